//! `agentprocess gateway`: a stateless MCP gateway of a cluster. It authenticates callers, serves
//! the admin API and signed file links from etcd and the shared blob store, and routes each run's
//! calls over gRPC to the actor host that owns the run's shard.

use super::test_clock;
use super::{CommonArgs, connect_etcd, run_role, shared_blobs};
use crate::settings::{FlagSettings, Settings};
use crate::telemetry::Telemetry;
use agentprocess_cluster::{RoutedRunService, ShardMap};
use agentprocess_console::{UiAdmin, UiKey};
use agentprocess_gateway::files::{FileUrlSigner, SignedFileUrls, file_routes};
use agentprocess_gateway::respond::HttpFailure;
use agentprocess_gateway::{
    AdminParts, DEFAULT_PUBLIC_URL, ExtraRoutes, Identity, RuntimeBackend, admin_routes, trust_routes,
};
use agentprocess_run_actor::backlog::Backlog;
use agentprocess_run_actor::overview::StoreOverview;
use agentprocess_run_actor::runtime::{Catalog, Clock, NoHints, Uploads};
use agentprocess_store::Store;
use agentprocess_store::keys::Keys;
use anyhow::Context;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Run an MCP gateway of a cluster: the fourteen tools, the admin API and file links, with each
/// run's calls routed to the actor host that owns it. Start as many as the load needs, behind
/// one URL.
///
/// Every gateway of a cluster must share --public-url (the OAuth resource tokens name) and, in
/// dev mode, --dev-key; with neither given anywhere, the defaults agree.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The address to listen on [default: 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// The URL clients reach the cluster's gateways at, without /mcp: one for every gateway
    /// (the load balancer's) [default: http://127.0.0.1:8080].
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// Dev mode (no identity provider): the signing key file every gateway shares, created when
    /// absent; `agentprocess token --dev-key PATH` mints tokens they all accept. Signed file
    /// links use a key kept beside it unless files.key is set [default: the key in --data].
    #[arg(long, value_name = "PATH")]
    dev_key: Option<PathBuf>,
    /// A folder for this gateway's own files: its dev key and file link key when --dev-key is
    /// not given [default: .agentprocess].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
}

pub fn run(args: GatewayArgs) -> ExitCode {
    let flags = FlagSettings {
        listen: args.listen,
        data_dir: args.data,
        // Not http://<listen>: every gateway of a cluster names the same resource.
        public_url: Some(args.public_url.unwrap_or_else(|| DEFAULT_PUBLIC_URL.to_owned())),
        dev_key: args.dev_key,
        ..FlagSettings::default()
    };
    run_role("gateway", &args.common, flags, gateway)
}

async fn gateway(settings: Settings, telemetry: Arc<Telemetry>) -> anyhow::Result<()> {
    let (store, keys) = connect_etcd(&settings).await?;
    let blobs = shared_blobs(&settings, "gateway")?;
    let clock = Clock::system();
    if settings.testing.clock_control {
        test_clock::warn_clock_control("gateway");
        test_clock::follow(
            store.clone(),
            keys.clone(),
            clock.clone(),
            format!("gateway:{}", super::incarnation_id("gateway")),
            settings.cluster.host_lease_seconds,
        )
        .await?;
    }
    let map = ShardMap::watch(store.clone(), keys.clone(), settings.cluster.shards)
        .await
        .context("cannot read the cluster's shard map")?;
    let runs = Arc::new(RoutedRunService::new(
        map.clone(),
        super::routing_options(&settings)?,
    ));
    let gateway = settings.gateway();
    // The file link key: files.key when set, else a key file beside the shared dev key (so
    // every gateway started with it signs alike), else this gateway's data folder.
    let link_key_dir = match &settings.dev_key {
        Some(path) => path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(".")),
        None => settings.data_dir.clone(),
    };
    let signer = Arc::new(
        FileUrlSigner::from_config(&settings.files, &link_key_dir)
            .map_err(|e| anyhow::anyhow!("signed file URLs cannot be set up: {e}"))?,
    );
    let backend = Arc::new(
        RuntimeBackend::new(runs.clone()).with_decoration(Arc::new(SignedFileUrls {
            signer: signer.clone(),
            public_url: gateway.resource(),
            clock: clock.clone(),
        })),
    );
    let catalog = Catalog::new(store.clone(), keys.clone(), clock.clone());
    let trust = trust_routes(backend.clone(), catalog.clone());
    let run_routes = agentprocess_gateway::admin_run_routes(backend.clone());
    let admin = AdminParts {
        catalog,
        store: store.clone(),
        keys: keys.clone(),
        // The scheduler watches the outbox in the store.
        hints: Arc::new(NoHints),
    };
    let offer = crate::serve_cmd::offer(&settings);
    let ui_admin = UiAdmin {
        parts: admin.clone(),
        offer,
        run_service: runs.clone(),
        clock: clock.clone(),
    };
    let mut authenticated = admin_routes(admin, offer);
    if settings.testing.clock_control {
        let state = ClusterClock {
            store: store.clone(),
            keys: keys.clone(),
            clock: clock.clone(),
        };
        authenticated = authenticated.route("/admin/v1/clock", post(advance_clock).with_state(state));
    }
    let authenticated = authenticated.merge(agentprocess_gateway::admin_ops::routes(
        backend.clone(),
        runs.clone(),
        clock.clone(),
    ));
    let console_key = UiKey::new(signer.derive_key(crate::web::UI_KEY_PURPOSE));
    let extra = ExtraRoutes {
        authenticated: authenticated.merge(trust).merge(run_routes),
        public: file_routes(
            Uploads::new(store.clone(), keys.clone(), blobs),
            clock.clone(),
            signer,
        )
        .merge(health_routes(map)),
    };
    let overview = Arc::new(StoreOverview::new(
        store.clone(),
        keys.clone(),
        clock.clone(),
        settings.metrics.backlog_scan_limit,
        settings.metrics.overview_run_limit,
    ));
    let app = crate::web::gateway_with_console(&gateway, backend, extra, console_key, ui_admin, overview)?;
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("cannot listen on {}", settings.listen))?;
    let local = listener.local_addr().context("the listener has no address")?;
    let metrics = telemetry.serve_metrics(settings.metrics_listen).await?;
    if metrics.is_some() {
        // Every gateway samples the backlog, so each one's scrape carries what autoscaling
        // needs; the reads are bounded by the settings.
        Backlog::start(store, keys, clock, settings.backlog());
    }
    println!(
        "agentprocess {} gateway listening on {local}",
        env!("CARGO_PKG_VERSION")
    );
    crate::telemetry::print_metrics_endpoint(metrics);
    println!(
        "MCP endpoint: http://{local}/mcp (public URL {})",
        settings.public_url()
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(super::shutdown_signal())
        .await
        .context("the HTTP server failed")?;
    eprintln!("agentprocess: gateway stopped");
    Ok(())
}

/// What moving the cluster's clock needs: the store that holds it and this gateway's clock.
#[derive(Clone)]
struct ClusterClock {
    store: Arc<dyn Store>,
    keys: Keys,
    clock: Clock,
}

/// How long a clock move waits for every role to apply it.
const CLOCK_PATIENCE: Duration = Duration::from_secs(10);

/// `POST /admin/v1/clock` `{ "advanceSeconds": N }` (testing only), as `serve` answers it, for
/// the whole cluster: adds N to the cluster's test clock, waits until every role following it
/// has applied the move, and answers with this gateway's time after it.
async fn advance_clock(
    State(state): State<ClusterClock>,
    Extension(identity): Extension<Identity>,
    body: Result<Json<Value>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let seconds = match crate::serve_cmd::clock_request(&identity, body) {
        Ok(seconds) => seconds,
        Err(refused) => return refused.into_response(),
    };
    let moved = async {
        let total = test_clock::advance(state.store.as_ref(), &state.keys, seconds).await?;
        test_clock::wait_for_acks(state.store.as_ref(), &state.keys, total, CLOCK_PATIENCE).await
    };
    match moved.await {
        Ok(()) => crate::serve_cmd::clock_answer(&state.clock),
        Err(error) => HttpFailure::Unavailable(format!("{error:#}")).into_response(),
    }
}

/// `GET /healthz` (the process answers) and `GET /readyz` (some actor host is registered, so
/// calls can be routed), for a load balancer.
fn health_routes(map: Arc<ShardMap>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({ "status": "alive" })) }))
        .route("/readyz", get(ready))
        .with_state(map)
}

async fn ready(State(map): State<Arc<ShardMap>>) -> (StatusCode, Json<Value>) {
    let hosts = map.hosts().len();
    let status = if hosts > 0 {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "status": if hosts > 0 { "ready" } else { "not_ready" },
        "actorHosts": hosts,
    });
    (status, Json(body))
}
