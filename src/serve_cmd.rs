//! `agentprocess serve`: every role in one process (gateway, run actors, scheduler) on the embedded store.

use crate::backup::control::ControlSocket;
use crate::health::health_routes;
use crate::settings::{FlagSettings, Settings};
use crate::telemetry::{MetricsEndpoint, Telemetry, TelemetryArgs};
use agentprocess_console::{UiAdmin, UiKey};
use agentprocess_gateway::files::{FileUrlSigner, SignedFileUrls, file_routes};
use agentprocess_gateway::respond::HttpFailure;
use agentprocess_gateway::{AdminParts, ExtraRoutes, Identity, RuntimeBackend, admin_routes, trust_routes};
use agentprocess_process::Offer;
use agentprocess_run_actor::OpenAiEvaluator;
use agentprocess_run_actor::backlog::Backlog;
use agentprocess_run_actor::overview::StoreOverview;
use agentprocess_run_actor::runtime::{
    BlobStore, Clock, Evaluator, LocalBlobs, Runtime, RuntimeConfig, blob_store_from_url,
};
use agentprocess_scheduler::{HttpTransport, Scheduler, SchedulerParts};
use agentprocess_store::{EmbeddedOptions, EmbeddedStore, RecoveryReport, StoreError};
use anyhow::Context;
use axum::Json;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use clap::Args;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Run the server: the MCP endpoint, the admin API, the run actors and the scheduler, in one
/// process, with everything stored in the data folder.
///
/// Settings come from defaults, then the TOML file given by --config (or AGENTPROCESS_CONFIG),
/// then AGENTPROCESS_* variables (AGENTPROCESS_LIMITS__RUN_DATA_BYTES for [limits]
/// run_data_bytes), then these flags. With no identity provider configured ([auth.provider]),
/// the server runs in dev mode and accepts tokens from `agentprocess token`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on [default: 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// The data folder: store, uploads, dev keys [default: .agentprocess].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// The URL clients reach the server at, without /mcp [default: http://<listen>].
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// How long a claim lasts before it must be renewed, in seconds [default: 600].
    #[arg(long, value_name = "N")]
    lease_seconds: Option<u64>,
    /// A TOML settings file.
    #[arg(long, value_name = "FILE", env = "AGENTPROCESS_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    telemetry: TelemetryArgs,
}

pub fn run(args: ServeArgs) -> ExitCode {
    let flags = FlagSettings {
        listen: args.listen,
        data_dir: args.data,
        public_url: args.public_url,
        lease_seconds: args.lease_seconds,
        log_format: args.telemetry.log_format,
        metrics_listen: args.telemetry.metrics_listen,
        ..FlagSettings::default()
    };
    let settings = match Settings::load(args.config.as_deref(), flags) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("error: the settings cannot be used: {error}");
            return ExitCode::from(2);
        }
    };
    crate::roles::run_with_telemetry("serve", settings, serve)
}

async fn serve(mut settings: Settings, telemetry: Arc<Telemetry>) -> anyhow::Result<()> {
    let data_dir = settings.data_dir.clone();
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create the data folder {}", data_dir.display()))?;
    let (store, recovery) = open_store(&settings).await?;
    tracing::info!(%recovery, "store opened");
    let control_socket = ControlSocket::open(&data_dir, store.clone())
        .inspect_err(|error| {
            tracing::warn!(
                error = format!("{error:#}"),
                "no control socket: `agentprocess store backup` cannot reach this server while it runs"
            )
        })
        .ok();
    let store = Arc::new(store);
    let blobs: Arc<dyn BlobStore> = match &settings.uploads {
        Some(url) => blob_store_from_url(url).with_context(|| format!("uploads = {url:?}"))?,
        None => Arc::new(LocalBlobs::new(data_dir.join("uploads"))),
    };
    let clock = Clock::system();
    let runtime = Runtime::new(store.clone(), blobs, runtime_config(&settings)?, clock.clone());
    crate::roles::file_runs_by_inputs(runtime.clone());
    let transport = Arc::new(HttpTransport::new(Duration::from_secs(
        settings.webhook_timeout_seconds,
    )));
    let scheduler = Scheduler::start(scheduler_parts(&runtime), transport, settings.scheduler());

    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("cannot listen on {}", settings.listen))?;
    let local = listener.local_addr().context("the listener has no address")?;
    if settings.public_url.is_none() {
        // With port 0 the system picks the port: clients reach the one it picked.
        settings.public_url = Some(format!("http://{local}"));
    }
    let gateway = settings.gateway();
    let offer = offer(&settings);
    let admin = AdminParts {
        catalog: runtime.catalog().clone(),
        store: store.clone(),
        keys: runtime.keys().clone(),
        hints: runtime.hints().clone(),
    };
    let ui_admin = UiAdmin {
        parts: admin.clone(),
        offer,
        run_service: Arc::new(runtime.clone()),
        clock: clock.clone(),
    };
    let mut authenticated = admin_routes(admin, offer);
    if settings.testing.clock_control {
        tracing::warn!("testing.clock_control is on: operators can move the server's clock");
        authenticated = authenticated.route("/admin/v1/clock", post(advance_clock).with_state(clock.clone()));
    }
    let signer = Arc::new(
        FileUrlSigner::from_config(&settings.files, &data_dir)
            .map_err(|e| anyhow::anyhow!("signed file URLs cannot be set up: {e}"))?,
    );
    let backend = Arc::new(
        RuntimeBackend::new(Arc::new(runtime.clone())).with_decoration(Arc::new(SignedFileUrls {
            signer: signer.clone(),
            public_url: gateway.resource(),
            clock: clock.clone(),
        })),
    );
    let authenticated = authenticated.merge(trust_routes(backend.clone(), runtime.catalog().clone()));
    let authenticated = authenticated.merge(agentprocess_gateway::admin_ops::routes(
        backend.clone(),
        Arc::new(runtime.clone()),
        clock.clone(),
    ));
    let authenticated = authenticated.merge(agentprocess_gateway::admin_run_routes(backend.clone()));
    let console_key = UiKey::new(signer.derive_key(crate::web::UI_KEY_PURPOSE));
    let extra = ExtraRoutes {
        authenticated,
        public: file_routes(runtime.uploads().clone(), clock.clone(), signer)
            .merge(health_routes(store.clone(), scheduler.liveness())),
    };
    let overview = Arc::new(StoreOverview::new(
        store.clone(),
        runtime.keys().clone(),
        clock.clone(),
        settings.metrics.backlog_scan_limit,
        settings.metrics.overview_run_limit,
    ));
    let app = crate::web::gateway_with_console(&gateway, backend, extra, console_key, ui_admin, overview)?;

    let metrics = telemetry.serve_metrics(settings.metrics_listen).await?;
    if metrics.is_some() {
        let store: Arc<dyn agentprocess_store::Store> = store.clone();
        Backlog::start(store, runtime.keys().clone(), clock.clone(), settings.backlog());
    }
    print_banner(&settings, local, metrics);
    let waiting = runtime.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            // Calls waiting for work answer now instead of holding the shutdown up.
            waiting.stop_waiting_for_work();
        })
        .await
        .context("the HTTP server failed")?;
    eprintln!("agentprocess: shutting down");
    if let Some(control_socket) = control_socket {
        control_socket.close();
    }
    scheduler.stop().await;
    store.close().await;
    Ok(())
}

/// The runtime's settings from the server's: limits, escalations, retentions, the evaluator.
/// What an actor host runs with too, beside its cluster parts.
pub(crate) fn runtime_config(settings: &Settings) -> anyhow::Result<RuntimeConfig> {
    let evaluator: Option<Arc<dyn Evaluator>> = match &settings.evaluator {
        Some(config) => {
            Some(Arc::new(OpenAiEvaluator::new(config).map_err(|e| {
                anyhow::anyhow!("the evaluator cannot be used: {e}")
            })?))
        }
        None => None,
    };
    Ok(RuntimeConfig {
        evaluator,
        limits: settings.limits(),
        escalate_to: settings.escalate_to(),
        idempotency_retention: settings.idempotency_retention(),
        archive_ended_runs_after: settings.archive_ended_runs_after(),
        max_upload_bytes: usize::try_from(settings.limits.max_upload_bytes).unwrap_or(usize::MAX),
        ..RuntimeConfig::default()
    })
}

/// The embedded store in the settings' data folder, opened as `serve` opens it. A store that a
/// running server holds is refused with [`StoreError::Locked`], said in words an operator acts on.
pub(crate) async fn open_store(settings: &Settings) -> anyhow::Result<(EmbeddedStore, RecoveryReport)> {
    let dir = settings.data_dir.join("store");
    let options = EmbeddedOptions {
        cache_bytes: usize::try_from(settings.store.cache_bytes).unwrap_or(usize::MAX),
        checkpoint_after_bytes: settings.store.checkpoint_after_bytes,
        ..EmbeddedOptions::default()
    };
    match EmbeddedStore::open(&dir, options).await {
        Ok(opened) => Ok(opened),
        Err(StoreError::Locked(_)) => anyhow::bail!(
            "the store in {} is in use by another process (a running `agentprocess serve`?); stop it first",
            dir.display()
        ),
        Err(error) => Err(error).with_context(|| format!("cannot open the store in {}", dir.display())),
    }
}

/// What publication accepts: the profiles and optional tools this server offers.
pub(crate) fn offer(settings: &Settings) -> Offer {
    Offer {
        parallel: true,
        check: settings.evaluator.is_some(),
        upload: true,
        send_event: true,
    }
}

/// A scheduler in this process: it reads the runtime's store with its keys and clock, fires
/// through the runtime, and takes the runtime's in-memory hints.
pub(crate) fn scheduler_parts(runtime: &Runtime) -> SchedulerParts {
    SchedulerParts {
        store: runtime.store().clone(),
        keys: runtime.keys().clone(),
        clock: runtime.clock().clone(),
        runs: Arc::new(runtime.clone()),
        hints: runtime.hints().clone(),
    }
}

fn print_banner(settings: &Settings, local: SocketAddr, metrics: Option<MetricsEndpoint>) {
    let public_url = settings.public_url();
    println!("agentprocess {} listening on {local}", env!("CARGO_PKG_VERSION"));
    crate::telemetry::print_metrics_endpoint(metrics);
    println!("MCP endpoint: {}/mcp", public_url.trim_end_matches('/'));
    if settings.auth.provider.is_none() {
        // The token command finds this server's URL in the data folder.
        println!("dev mode (no identity provider configured). Get a token with:");
        println!(
            "  agentprocess token --data {} --org ORG --agent AGENT_ID",
            settings.data_dir.display()
        );
        println!(
            "  agentprocess token --data {} --org ORG --person EMAIL --group GROUP [--operator]",
            settings.data_dir.display()
        );
    }
}

pub(crate) async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

/// `POST /admin/v1/clock` `{ "advanceSeconds": N }` (testing only): moves the server's clock
/// forward, so due dates, waits and lease expiry arrive at once.
async fn advance_clock(
    State(clock): State<Clock>,
    Extension(identity): Extension<Identity>,
    body: Result<Json<Value>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let seconds = match clock_request(&identity, body) {
        Ok(seconds) => seconds,
        Err(refused) => return refused.into_response(),
    };
    clock.advance(Duration::from_secs(seconds));
    clock_answer(&clock)
}

/// The seconds a `POST /admin/v1/clock` asks for, or the answer refusing it: only operators
/// move the clock, by a whole number of seconds of at most ten years.
pub(crate) fn clock_request(
    identity: &Identity,
    body: Result<Json<Value>, axum::extract::rejection::JsonRejection>,
) -> Result<u64, HttpFailure> {
    if !identity.operator {
        return Err(HttpFailure::Forbidden("an operator token is required".into()));
    }
    let seconds = match body {
        Ok(Json(body)) => body.get("advanceSeconds").and_then(Value::as_u64),
        Err(rejection) => return Err(HttpFailure::Malformed(rejection.body_text())),
    };
    seconds.filter(|&s| s <= 10 * 365 * 24 * 3600).ok_or_else(|| {
        HttpFailure::Malformed(
            "the body must be { \"advanceSeconds\": N } with N a non-negative integer of at most ten years"
                .into(),
        )
    })
}

/// The answer to a clock move: the clock's time after it.
pub(crate) fn clock_answer(clock: &Clock) -> Response {
    Json(json!({ "now": clock.now().to_rfc3339() })).into_response()
}
