//! `load --idle-agents N`: agents with nothing to do, each asking `get_work` for work of a process
//! that has none, waiting (`--wait-seconds`, the `x-wait-1` profile) or polling every
//! `--idle-poll`; and with `--wake-every`, a prober that starts a run of that process now and then
//! (through `--wake-server`, another gateway of a cluster), whose step the idle agents must hear
//! of: the time from the start's answer to the first idle agent's page that lists it. The agent
//! that hears of it claims and submits it, so the agents are idle again.

use super::mcp_client::{CallOutcome, McpClient};
use super::processes;
use super::stats::Window;
use super::workers::{RunView, claim_arguments, request_id, submit_arguments, work_items};
use agentprocess_gateway::ToolName;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an idle agent pauses after a call that failed outright.
const FAILURE_PAUSE: Duration = Duration::from_millis(500);

/// How the idle agents and the prober behave.
#[derive(Debug, Clone)]
pub struct IdleOptions {
    /// `waitSeconds` of every `get_work`; `None` polls.
    pub wait_seconds: Option<u64>,
    /// The pause between two polls when not waiting.
    pub poll: Duration,
    /// How often the prober starts a run the idle agents must hear of.
    pub wake_every: Option<Duration>,
}

/// What the idle agents saw, as `load --idle-agents` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleReport {
    pub idle_agents: usize,
    pub wait_seconds: Option<u64>,
    pub seconds: f64,
    /// `get_work` calls the idle agents made in the window.
    pub get_work_calls: u64,
    pub get_work_per_second: f64,
    pub get_work_p50_ms: f64,
    pub get_work_p99_ms: f64,
    /// Calls that failed outright or were refused.
    pub failures: u64,
    /// Runs the prober started in the window.
    pub wakes_started: usize,
    /// Of those, the ones an idle agent heard of.
    pub wakes_heard: usize,
    /// From a start's answer to the first idle agent's page listing its step (0 when the page came
    /// first).
    pub wake_p50_ms: f64,
    pub wake_p99_ms: f64,
    pub wake_max_ms: f64,
}

impl IdleReport {
    pub fn table(&self) -> String {
        let mut out = String::new();
        let how = match self.wait_seconds {
            Some(seconds) => format!("waiting up to {seconds} s per call"),
            None => "polling".to_owned(),
        };
        let _ = writeln!(
            out,
            "{} idle agents, {how}, {:.1} s",
            self.idle_agents, self.seconds
        );
        let _ = writeln!(
            out,
            "get_work: {} calls = {:.1}/s, p50 {:.2} ms, p99 {:.2} ms, {} failed",
            self.get_work_calls,
            self.get_work_per_second,
            self.get_work_p50_ms,
            self.get_work_p99_ms,
            self.failures
        );
        if self.wakes_started > 0 {
            let _ = writeln!(
                out,
                "wakes: {} started, {} heard; start answered → heard: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                self.wakes_started, self.wakes_heard, self.wake_p50_ms, self.wake_p99_ms, self.wake_max_ms
            );
        }
        out
    }
}

/// What the idle agents and the prober share.
#[derive(Debug, Default)]
struct Shared {
    /// When each probe run's `start_run` answered, for runs started in the window.
    started: Mutex<HashMap<String, Instant>>,
    /// When an idle agent first got a page listing each run.
    heard: Mutex<HashMap<String, Instant>>,
}

/// The samples one idle agent took in the window.
#[derive(Debug, Default)]
struct Samples {
    latencies_micros: Vec<u64>,
    failures: u64,
}

/// Runs `tokens.len()` idle agents (and the prober, with `prober_token`) until the window ends.
pub async fn drive(
    client: McpClient,
    wake_client: McpClient,
    tokens: Vec<String>,
    prober_token: String,
    options: IdleOptions,
    window: Window,
) -> IdleReport {
    let client = Arc::new(client);
    let shared = Arc::new(Shared::default());
    let mut agents = Vec::new();
    for token in &tokens {
        agents.push(tokio::spawn(idle_agent(
            client.clone(),
            token.clone(),
            options.clone(),
            window,
            shared.clone(),
        )));
    }
    let prober = options
        .wake_every
        .map(|every| tokio::spawn(prober(wake_client, prober_token, every, window, shared.clone())));
    let mut samples = Samples::default();
    for agent in agents {
        if let Ok(theirs) = agent.await {
            samples.latencies_micros.extend(theirs.latencies_micros);
            samples.failures += theirs.failures;
        }
    }
    if let Some(prober) = prober {
        let _ = prober.await;
    }
    let started = shared.started.lock().unwrap().clone();
    let heard = shared.heard.lock().unwrap().clone();
    let mut wakes: Vec<u64> = started
        .iter()
        .filter_map(|(run, at)| {
            let heard = heard.get(run)?;
            Some(u64::try_from(heard.saturating_duration_since(*at).as_micros()).unwrap_or(u64::MAX))
        })
        .collect();
    wakes.sort_unstable();
    samples.latencies_micros.sort_unstable();
    let seconds = window.seconds();
    IdleReport {
        idle_agents: tokens.len(),
        wait_seconds: options.wait_seconds,
        seconds,
        get_work_calls: samples.latencies_micros.len() as u64,
        get_work_per_second: samples.latencies_micros.len() as f64 / seconds,
        get_work_p50_ms: percentile_ms(&samples.latencies_micros, 50.0),
        get_work_p99_ms: percentile_ms(&samples.latencies_micros, 99.0),
        failures: samples.failures,
        wakes_started: started.len(),
        wakes_heard: wakes.len(),
        wake_p50_ms: percentile_ms(&wakes, 50.0),
        wake_p99_ms: percentile_ms(&wakes, 99.0),
        wake_max_ms: wakes.last().map_or(0.0, |&max| max as f64 / 1000.0),
    }
}

/// The `p`th percentile of sorted microseconds, in milliseconds (0 for none).
fn percentile_ms(sorted_micros: &[u64], p: f64) -> f64 {
    if sorted_micros.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted_micros.len() as f64).ceil() as usize;
    sorted_micros[rank.clamp(1, sorted_micros.len()) - 1] as f64 / 1000.0
}

/// One idle agent: asks for work of the probe process until the window ends; claims and submits
/// what it hears of.
async fn idle_agent(
    client: Arc<McpClient>,
    token: String,
    options: IdleOptions,
    window: Window,
    shared: Arc<Shared>,
) -> Samples {
    let mut samples = Samples::default();
    let mut arguments = json!({ "process": processes::WAKE, "limit": 20 });
    if let Some(seconds) = options.wait_seconds {
        arguments["waitSeconds"] = json!(seconds);
    }
    while Instant::now() < window.end {
        let started = Instant::now();
        let outcome = client.call(&token, ToolName::GetWork.as_str(), &arguments).await;
        let answered = Instant::now();
        let measured = window.contains(started);
        if measured {
            samples
                .latencies_micros
                .push(u64::try_from((answered - started).as_micros()).unwrap_or(u64::MAX));
        }
        let data = match outcome {
            CallOutcome::Ok(data) => data,
            CallOutcome::Refused(_) | CallOutcome::Failed(_) => {
                if measured {
                    samples.failures += 1;
                }
                tokio::time::sleep(FAILURE_PAUSE).await;
                continue;
            }
        };
        let claims: Vec<Value> = {
            let items = work_items(&data);
            let mut heard = shared.heard.lock().unwrap();
            for item in &items {
                heard.entry(item.run_id.to_string()).or_insert(answered);
            }
            items.iter().filter_map(claim_arguments).collect()
        };
        if claims.is_empty() {
            if options.wait_seconds.is_none() {
                tokio::time::sleep(options.poll).await;
            }
            continue;
        }
        for claim in claims {
            finish(&client, &token, &claim).await;
        }
    }
    samples
}

/// Claims a probe step and submits it; a claim another agent won is left alone.
async fn finish(client: &McpClient, token: &str, claim: &Value) {
    let CallOutcome::Ok(claimed) = client.call(token, ToolName::Claim.as_str(), claim).await else {
        return;
    };
    let Some(step_token) = claimed
        .parse::<StepToken<'_>>()
        .map(|claimed| claimed.token.into_owned())
    else {
        return;
    };
    let _ = client
        .call(
            token,
            ToolName::Submit.as_str(),
            &submit_arguments(&step_token, 0),
        )
        .await;
}

#[derive(Debug, Deserialize)]
struct StepToken<'a> {
    #[serde(borrow)]
    token: Cow<'a, str>,
}

/// Starts a run of the probe process every `every` until the window ends, noting when each
/// start answered.
async fn prober(client: McpClient, token: String, every: Duration, window: Window, shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u64 = 0;
    while Instant::now() < window.end {
        tick.tick().await;
        n += 1;
        let arguments =
            json!({ "process": processes::WAKE, "inputs": { "n": n }, "requestId": request_id() });
        let sent = Instant::now();
        let outcome = client.call(&token, ToolName::StartRun.as_str(), &arguments).await;
        let answered = Instant::now();
        let CallOutcome::Ok(data) = outcome else { continue };
        if !window.contains(sent) {
            continue;
        }
        if let Some(view) = data.parse::<RunView<'_>>() {
            shared
                .started
                .lock()
                .unwrap()
                .insert(view.run.id.to_string(), answered);
        }
    }
}
