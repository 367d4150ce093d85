//! The scheduler over a real runtime and embedded store: timers across a restart, claim
//! expiry, webhook delivery with retries and dead letters (and their redelivery), idempotency
//! cleanup. Time is the
//! runtime's injected clock, moved forward with `Clock::advance`.

use agentprocess_ids::{OrgId, RunId, StepId};
use agentprocess_run_actor::machine::{Caller, Timestamp};
use agentprocess_run_actor::runtime::{
    Clock, DeadLetterId, Decision, GetWork, LocalBlobs, Mode, NoHints, Redelivery, Runtime, RuntimeConfig,
    ToolOutcome, Write, redeliver_dead_letter,
};
use agentprocess_scheduler::{
    HttpTransport, SIGNATURE_HEADER, Scheduler, SchedulerConfig, SchedulerMetrics, SchedulerParts,
    StoreWatchHints, Webhook, configure_webhook, dead_letters, metrics, sign,
};
use agentprocess_store::probed::{Probe, Probed};
use agentprocess_store::{EmbeddedOptions, EmbeddedStore, RangeRequest, StoreError};
use indexmap::IndexMap;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ORG: &str = "acme";
/// 2026-10-01T00:00:00Z.
const START: Timestamp = Timestamp::from_millis(1_790_812_800_000);
const DAY: Duration = Duration::from_secs(86_400);

fn agent(id: &str) -> Caller {
    Caller::agent(ORG, id)
}

fn person(email: &str, groups: &[&str]) -> Caller {
    Caller::person(ORG, email, groups)
}

fn ok(outcome: ToolOutcome) -> Value {
    match outcome {
        ToolOutcome::Ok(data) => data,
        ToolOutcome::Refused(refusal) => panic!("refused: {refusal}"),
    }
}

async fn open(dir: &Path, at: Timestamp) -> (EmbeddedStore, Runtime) {
    let (store, _) = EmbeddedStore::open(dir.join("store"), EmbeddedOptions::default())
        .await
        .unwrap();
    let runtime = Runtime::new(
        Arc::new(store.clone()),
        Arc::new(LocalBlobs::new(dir.join("blobs"))),
        RuntimeConfig::default(),
        Clock::starting_at(at),
    );
    (store, runtime)
}

/// A scheduler's parts from an in-process runtime: its store, keys, clock and in-memory hints,
/// and the runtime as the run service.
fn parts(runtime: &Runtime) -> SchedulerParts {
    SchedulerParts {
        store: runtime.store().clone(),
        keys: runtime.keys().clone(),
        clock: runtime.clock().clone(),
        runs: Arc::new(runtime.clone()),
        hints: runtime.hints().clone(),
    }
}

/// Publishes our example process `name` (`examples/NAME`), each role bound to `g_<role>`.
async fn publish(runtime: &Runtime, name: &str) {
    let source = std::fs::read(agentprocess_testkit::example(name)).unwrap();
    let loaded = agentprocess_process::load(&source, &agentprocess_process::Offer::EVERYTHING).unwrap();
    let roles: IndexMap<String, String> = loaded
        .process
        .role_names()
        .into_iter()
        .map(|role| (role.to_string(), format!("g_{role}")))
        .collect();
    runtime.publish(&OrgId::from(ORG), &source, roles).await.unwrap();
}

async fn start(runtime: &Runtime, process: &str, inputs: Value, mode: Mode, request: &str) -> String {
    let view = ok(runtime
        .execute(
            &agent("starter"),
            Write::StartRun {
                process: process.into(),
                version: None,
                inputs,
                mode,
            },
            request,
        )
        .await
        .unwrap());
    view["run"]["id"].as_str().unwrap().to_string()
}

fn quick() -> SchedulerConfig {
    SchedulerConfig {
        first_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        outbox_poll: Duration::from_millis(50),
        cleanup_every: Duration::from_millis(50),
        ..SchedulerConfig::default()
    }
}

fn transport() -> Arc<HttpTransport> {
    Arc::new(HttpTransport::new(Duration::from_secs(5)))
}

/// Waits (in real time) until `check` holds, for at most ten seconds.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..500 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting until {what}");
}

async fn ready_steps(runtime: &Runtime) -> Vec<Value> {
    let page = ok(runtime
        .get_work(&agent("worker"), GetWork::default())
        .await
        .unwrap());
    page["items"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_fires_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path(), START).await;
    publish(&runtime, "account-closure").await;
    let close_at = Timestamp::from_millis(START.as_millis() + 86_400_000);
    let run = start(
        &runtime,
        "account-closure",
        json!({ "accountId": "C-1", "closeAt": close_at.to_rfc3339() }),
        Mode::Live,
        "s-1",
    )
    .await;
    let owner = person("owner@acme.example", &["g_account-manager"]);
    let work = ok(runtime.get_work(&owner, GetWork::default()).await.unwrap());
    let item = &work["items"][0]["workItem"];
    let decided = ok(runtime
        .execute(
            &owner,
            Write::Decide {
                run_id: RunId::from(run.clone()),
                work_item: item["id"].as_str().unwrap().into(),
                snapshot: item["snapshot"].as_str().unwrap().into(),
                decision: Decision::Approved,
                output: None,
                evidence: None,
                summary: None,
                next: None,
                reason: None,
                note: None,
            },
            "d-1",
        )
        .await
        .unwrap());
    let state = |view: &Value, step: &str| {
        view["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == step)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state(&decided, "closing_time"), "waiting");
    let now = runtime.clock().now();
    store.close().await;
    drop(runtime);

    // A new process: same directory, time goes on from where it was.
    let (store, runtime) = open(dir.path(), now).await;
    let started = runtime.clock().now();
    let scheduler = Scheduler::start(parts(&runtime), transport(), quick());
    eventually("every timer due at the start has fired", || async {
        scheduler.timers_settled_at() >= started
    })
    .await;
    assert!(ready_steps(&runtime).await.is_empty(), "nothing fires early");
    runtime.clock().advance(DAY);
    eventually("stop_billing is ready", || async {
        ready_steps(&runtime)
            .await
            .iter()
            .any(|item| item["stepId"] == "stop_billing")
    })
    .await;
    let view = ok(runtime
        .get_run(&agent("x"), &RunId::from(run.as_str()))
        .await
        .unwrap());
    assert_eq!(state(&view, "closing_time"), "done");
    scheduler.stop().await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_claim_makes_the_step_claimable_with_its_progress() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path(), START).await;
    publish(&runtime, "defect-triage").await;
    let scheduler = Scheduler::start(parts(&runtime), transport(), quick());
    let run = start(
        &runtime,
        "defect-triage",
        json!({ "reportId": "T-1" }),
        Mode::Live,
        "s-1",
    )
    .await;
    let holder = agent("a1");
    let claimed = ok(runtime
        .execute(
            &holder,
            Write::Claim {
                run_id: RunId::from(run.clone()),
                step: StepId::from_wire("triage"),
            },
            "c-1",
        )
        .await
        .unwrap());
    let renewed = ok(runtime
        .execute(
            &holder,
            Write::Renew {
                token: claimed["token"].as_str().unwrap().into(),
                progress: Some("read the logs".into()),
            },
            "r-1",
        )
        .await
        .unwrap());
    assert_ne!(renewed["token"], claimed["token"]);
    assert!(ready_steps(&runtime).await.is_empty());

    runtime.clock().advance(Duration::from_secs(601));
    eventually("triage is claimable again", || async {
        ready_steps(&runtime)
            .await
            .iter()
            .any(|item| item["stepId"] == "triage" && item["handoff"]["progress"] == "read the logs")
    })
    .await;
    let again = ok(runtime
        .execute(
            &agent("a2"),
            Write::Claim {
                run_id: RunId::from(run),
                step: StepId::from_wire("triage"),
            },
            "c-2",
        )
        .await
        .unwrap());
    assert_eq!(again["handoff"]["progress"], "read the logs");
    scheduler.stop().await;
    store.close().await;
}

/// One request a receiver saw: its headers (names in lower case) and its body.
type Seen = (Vec<(String, String)>, Vec<u8>);

/// A webhook receiver on 127.0.0.1 that answers the first `failures` requests with 500.
#[derive(Clone, Default)]
struct Receiver {
    requests: Arc<Mutex<Vec<Seen>>>,
}

impl Receiver {
    async fn start(failures: usize) -> (Receiver, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let receiver = Receiver::default();
        let seen = receiver.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let (headers, body_start) = loop {
                        let n = socket.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buffer.extend_from_slice(&chunk[..n]);
                        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                            let text = String::from_utf8_lossy(&buffer[..end]).to_string();
                            let headers: Vec<(String, String)> = text
                                .lines()
                                .skip(1)
                                .filter_map(|line| line.split_once(':'))
                                .map(|(n, v)| (n.trim().to_lowercase(), v.trim().to_string()))
                                .collect();
                            break (headers, end + 4);
                        }
                    };
                    let length: usize = headers
                        .iter()
                        .find(|(n, _)| n == "content-length")
                        .and_then(|(_, v)| v.parse().ok())
                        .unwrap_or(0);
                    while buffer.len() < body_start + length {
                        let n = socket.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buffer.extend_from_slice(&chunk[..n]);
                    }
                    let body = buffer[body_start..body_start + length].to_vec();
                    let count = {
                        let mut requests = seen.requests.lock().unwrap();
                        requests.push((headers, body));
                        requests.len()
                    };
                    let status = if count <= failures {
                        "500 Internal Server Error"
                    } else {
                        "200 OK"
                    };
                    let response =
                        format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                    let _ = socket.write_all(response.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        (receiver, url)
    }

    fn requests(&self) -> Vec<Seen> {
        self.requests.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_are_delivered_signed_with_retries_and_never_for_test_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path(), START).await;
    publish(&runtime, "account-closure").await;
    let (receiver, url) = Receiver::start(2).await;
    let webhook = Webhook {
        url,
        secret: "s3cret".into(),
    };
    configure_webhook(
        runtime.store().as_ref(),
        runtime.keys(),
        &OrgId::from(ORG),
        "main",
        &webhook,
    )
    .await
    .unwrap();
    let inputs = json!({ "accountId": "C-1", "closeAt": "2027-01-01T00:00:00Z" });
    start(&runtime, "account-closure", inputs.clone(), Mode::Test, "t-1").await;
    let live = start(&runtime, "account-closure", inputs, Mode::Live, "s-1").await;
    let scheduler = Scheduler::start(parts(&runtime), transport(), quick());

    eventually("the third attempt succeeds", || async {
        receiver.requests().len() >= 3
    })
    .await;
    let outbox = runtime.keys().outbox_entries();
    eventually("the outbox is empty", || async {
        runtime
            .store()
            .range(RangeRequest::new(outbox.clone()))
            .await
            .unwrap()
            .kvs
            .is_empty()
    })
    .await;
    // With the outbox empty nothing is left to deliver: what the receiver has is all there is.
    let requests = receiver.requests();
    assert_eq!(requests.len(), 3, "two failures, one success, nothing more");
    for (headers, body) in &requests {
        let signature = headers
            .iter()
            .find(|(n, _)| n == SIGNATURE_HEADER)
            .map(|(_, v)| v.clone())
            .unwrap();
        assert_eq!(signature, sign("s3cret", body));
        let notification: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(notification["type"], "work_item_opened");
        assert_eq!(notification["runId"], live.as_str());
        assert_eq!(notification["mode"], "live");
        assert_eq!(notification["to"]["group"], "g_account-manager");
    }
    scheduler.stop().await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeliverable_notifications_become_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path(), START).await;
    publish(&runtime, "account-closure").await;
    let (receiver, url) = Receiver::start(usize::MAX).await;
    let webhook = Webhook {
        url,
        secret: "s".into(),
    };
    configure_webhook(
        runtime.store().as_ref(),
        runtime.keys(),
        &OrgId::from(ORG),
        "main",
        &webhook,
    )
    .await
    .unwrap();
    let inputs = json!({ "accountId": "C-1", "closeAt": "2027-01-01T00:00:00Z" });
    start(&runtime, "account-closure", inputs, Mode::Live, "s-1").await;
    let config = SchedulerConfig {
        max_attempts: 3,
        ..quick()
    };
    let scheduler = Scheduler::start(parts(&runtime), transport(), config);
    eventually("a dead letter appears", || async {
        !dead_letters(runtime.store().as_ref(), runtime.keys(), &OrgId::from(ORG), 10)
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    let letters = dead_letters(runtime.store().as_ref(), runtime.keys(), &OrgId::from(ORG), 10)
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0]["attempts"], 3);
    assert_eq!(letters[0]["notification"]["type"], "work_item_opened");
    assert_eq!(receiver.requests().len(), 3);
    scheduler.stop().await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_dead_letter_is_picked_up_when_signalled_and_gets_every_attempt_again() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path(), START).await;
    publish(&runtime, "account-closure").await;
    // Three failures bury the notification; the first attempt after redelivery fails too, so it
    // is only delivered if its attempts start again from zero.
    let (receiver, url) = Receiver::start(4).await;
    let webhook = Webhook {
        url,
        secret: "s".into(),
    };
    configure_webhook(
        runtime.store().as_ref(),
        runtime.keys(),
        &OrgId::from(ORG),
        "main",
        &webhook,
    )
    .await
    .unwrap();
    let inputs = json!({ "accountId": "C-1", "closeAt": "2027-01-01T00:00:00Z" });
    start(&runtime, "account-closure", inputs, Mode::Live, "s-1").await;
    // No periodic look at the outbox within the test: only signals and retries wake it.
    let config = SchedulerConfig {
        max_attempts: 3,
        outbox_poll: Duration::from_secs(3600),
        ..quick()
    };
    let scheduler = Scheduler::start(parts(&runtime), transport(), config);
    eventually("a dead letter appears", || async {
        !dead_letters(runtime.store().as_ref(), runtime.keys(), &OrgId::from(ORG), 10)
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    assert_eq!(receiver.requests().len(), 3);
    let letters = dead_letters(runtime.store().as_ref(), runtime.keys(), &OrgId::from(ORG), 10)
        .await
        .unwrap();
    let id = DeadLetterId::parse(letters[0]["id"].as_str().unwrap()).unwrap();

    let outcome = redeliver_dead_letter(runtime.store().as_ref(), runtime.keys(), &OrgId::from(ORG), &id)
        .await
        .unwrap();
    assert_eq!(outcome, Redelivery::Redelivered);
    runtime.hints().outbox_written();
    eventually("the redelivered notification is taken", || async {
        receiver.requests().len() == 5
    })
    .await;
    let requests = receiver.requests();
    assert_eq!(requests[4].1, requests[0].1, "the same notification");
    eventually("the outbox is empty", || async {
        runtime
            .store()
            .range(RangeRequest::new(runtime.keys().outbox_entries()))
            .await
            .unwrap()
            .kvs
            .is_empty()
    })
    .await;
    assert!(
        dead_letters(runtime.store().as_ref(), runtime.keys(), &OrgId::from(ORG), 10)
            .await
            .unwrap()
            .is_empty()
    );
    scheduler.stop().await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_records_go_after_their_retention() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path(), START).await;
    publish(&runtime, "defect-triage").await;
    let scheduler = Scheduler::start(parts(&runtime), transport(), quick());
    start(
        &runtime,
        "defect-triage",
        json!({ "reportId": "T-1" }),
        Mode::Live,
        "s-1",
    )
    .await;
    let record = runtime.keys().idempotency(&OrgId::from(ORG), "s-1");
    assert!(runtime.store().get(&record).await.unwrap().0.is_some());
    let six_days_on = runtime.clock().now().plus_seconds(DAY.as_secs() * 6);
    runtime.clock().advance(DAY * 6);
    eventually("a sweep ran six days on", || async {
        scheduler.swept_at() >= six_days_on
    })
    .await;
    assert!(
        runtime.store().get(&record).await.unwrap().0.is_some(),
        "kept for the retention"
    );
    runtime.clock().advance(DAY * 2);
    eventually("the record is gone", || async {
        runtime.store().get(&record).await.unwrap().0.is_none()
    })
    .await;
    scheduler.stop().await;
    store.close().await;
}

/// `idempotency_retention_seconds` is a setting: a record goes once a shorter retention passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_records_go_after_a_retention_set_shorter() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = EmbeddedStore::open(dir.path().join("store"), EmbeddedOptions::default())
        .await
        .unwrap();
    let config = RuntimeConfig {
        idempotency_retention: Duration::from_secs(60),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(
        Arc::new(store.clone()),
        Arc::new(LocalBlobs::new(dir.path().join("blobs"))),
        config,
        Clock::starting_at(START),
    );
    publish(&runtime, "defect-triage").await;
    let scheduler = Scheduler::start(parts(&runtime), transport(), quick());
    start(
        &runtime,
        "defect-triage",
        json!({ "reportId": "T-1" }),
        Mode::Live,
        "s-1",
    )
    .await;
    let record = runtime.keys().idempotency(&ORG.into(), "s-1");
    let half_way = runtime.clock().now().plus_seconds(30);
    runtime.clock().advance(Duration::from_secs(30));
    eventually("a sweep ran half way", || async {
        scheduler.swept_at() >= half_way
    })
    .await;
    assert!(
        runtime.store().get(&record).await.unwrap().0.is_some(),
        "kept for the retention"
    );
    runtime.clock().advance(Duration::from_secs(31));
    eventually("the record is gone", || async {
        runtime.store().get(&record).await.unwrap().0.is_none()
    })
    .await;
    scheduler.stop().await;
    store.close().await;
}

/// A process whose one agent step is due an hour after it becomes ready.
const CHASE: &str = "---\nname: chase\ndescription: A step with a due date.\nsteps:\n  - id: work\n    agent: Do it.\n    due: 1h\n  - id: done\n    finish: done\n---\n\n# Chase\n";

/// How many of the first 100 work items an agent sees are overdue.
async fn overdue_items(runtime: &Runtime) -> usize {
    let page = ok(runtime
        .get_work(
            &agent("worker"),
            GetWork {
                limit: Some(100),
                ..GetWork::default()
            },
        )
        .await
        .unwrap());
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["overdue"] == true)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_window_fires_every_timer_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path(), START).await;
    runtime
        .publish(&OrgId::from(ORG), CHASE.as_bytes(), IndexMap::new())
        .await
        .unwrap();
    for i in 0..50 {
        start(&runtime, "chase", json!({}), Mode::Live, &format!("s-{i}")).await;
        runtime.clock().advance(Duration::from_secs(1));
    }
    let config = SchedulerConfig {
        timer_window: 4,
        ..quick()
    };
    let scheduler = Scheduler::start(parts(&runtime), transport(), config);
    eventually("the window is loaded", || async {
        scheduler.timers_in_memory() >= 4
    })
    .await;
    assert_eq!(scheduler.timers_in_memory(), 4, "only the window is in memory");
    // Nothing is due yet: a pass that looks again keeps the window as it is.
    let a_second_on = runtime.clock().now().plus_seconds(1);
    runtime.clock().advance(Duration::from_secs(1));
    eventually("the scheduler looked again", || async {
        scheduler.timers_settled_at() >= a_second_on
    })
    .await;
    assert_eq!(scheduler.timers_in_memory(), 4, "still only the window");
    // While they fire, fired timers are held back until the next reload and count as in memory
    // too: the bound is checked above, before anything is due.
    runtime.clock().advance(Duration::from_secs(7200));
    eventually("every step is overdue", || async {
        overdue_items(&runtime).await == 50
    })
    .await;
    let timers = runtime.keys().timers();
    let left = runtime
        .store()
        .range(RangeRequest::new(timers))
        .await
        .unwrap()
        .kvs
        .len();
    assert_eq!(left, 0, "every due timer fired once and is gone");
    scheduler.stop().await;
    store.close().await;
}

/// Timers armed inside the window are read into it when they come due, in one reload, not one
/// reload per timer armed: a busy server arms a claim-expiry timer with every claim. Each still
/// fires at its time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_armed_inside_the_window_are_read_when_due_not_when_armed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path(), START).await;
    runtime
        .publish(&OrgId::from(ORG), CHASE.as_bytes(), IndexMap::new())
        .await
        .unwrap();
    let scheduler = Scheduler::start(parts(&runtime), transport(), quick());
    let a_second_on = runtime.clock().now().plus_seconds(1);
    runtime.clock().advance(Duration::from_secs(1));
    eventually("the scheduler settled", || async {
        scheduler.timers_settled_at() >= a_second_on
    })
    .await;
    let reloads_before = scheduler.timer_window_reloads();
    for i in 0..20 {
        start(&runtime, "chase", json!({}), Mode::Live, &format!("s-{i}")).await;
    }
    // Every start armed a due timer an hour on; a later pass has seen every hint.
    let two_seconds_on = runtime.clock().now().plus_seconds(1);
    runtime.clock().advance(Duration::from_secs(1));
    eventually("the scheduler looked again", || async {
        scheduler.timers_settled_at() >= two_seconds_on
    })
    .await;
    assert_eq!(
        scheduler.timer_window_reloads(),
        reloads_before,
        "no reload before the armed timers are due"
    );
    runtime.clock().advance(Duration::from_secs(7200));
    eventually("every step is overdue", || async {
        overdue_items(&runtime).await == 20
    })
    .await;
    scheduler.stop().await;
    store.close().await;
}

/// A scheduler as a role of its own: built from a store and a run-service handle alone, with
/// writers that send no hints (`NoHints`) and no periodic look at the outbox. A notification
/// written after it started is still delivered, and a claim armed after it started still expires
/// on time: the store watch is what tells it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_of_its_own_learns_of_new_work_from_store_watches() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = EmbeddedStore::open(dir.path().join("store"), EmbeddedOptions::default())
        .await
        .unwrap();
    let store: Arc<dyn agentprocess_store::Store> = Arc::new(store);
    let clock = Clock::starting_at(START);
    let runtime = Runtime::new(
        store.clone(),
        Arc::new(LocalBlobs::new(dir.path().join("blobs"))),
        RuntimeConfig {
            hints: Arc::new(NoHints),
            ..RuntimeConfig::default()
        },
        clock.clone(),
    );
    let keys = runtime.keys().clone();
    let runs: Arc<dyn agentprocess_service::RunService> = Arc::new(runtime.clone());
    let (receiver, url) = Receiver::start(0).await;
    configure_webhook(
        store.as_ref(),
        &keys,
        &OrgId::from(ORG),
        "main",
        &Webhook {
            url,
            secret: "s".into(),
        },
    )
    .await
    .unwrap();
    let config = SchedulerConfig {
        outbox_poll: Duration::from_secs(3600),
        ..quick()
    };
    let parts = SchedulerParts {
        store: store.clone(),
        keys: keys.clone(),
        clock: clock.clone(),
        runs: runs.clone(),
        hints: StoreWatchHints::start(store.clone(), keys),
    };
    let scheduler = Scheduler::start(parts, transport(), config);
    // Let the scheduler load its (empty) window first.
    eventually("the first timer pass", || async {
        scheduler.timers_settled_at() >= START
    })
    .await;

    publish(&runtime, "account-closure").await;
    publish(&runtime, "defect-triage").await;
    let inputs = json!({ "accountId": "C-9", "closeAt": "2027-01-01T00:00:00Z" });
    start(&runtime, "account-closure", inputs, Mode::Live, "s-0").await;
    eventually("the approval's work_item_opened is delivered", || async {
        !receiver.requests().is_empty()
    })
    .await;
    let run = start(
        &runtime,
        "defect-triage",
        json!({ "reportId": "T-9" }),
        Mode::Live,
        "s-1",
    )
    .await;
    ok(runtime
        .execute(
            &agent("a1"),
            Write::Claim {
                run_id: RunId::from(run),
                step: StepId::from_wire("triage"),
            },
            "c-1",
        )
        .await
        .unwrap());
    assert!(ready_steps(&runtime).await.is_empty());
    clock.advance(Duration::from_secs(601));
    eventually("the expired claim makes triage claimable again", || async {
        ready_steps(&runtime)
            .await
            .iter()
            .any(|item| item["stepId"] == "triage")
    })
    .await;
    scheduler.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liveness_is_running_until_the_scheduler_stops() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, runtime) = open(dir.path(), START).await;
    let scheduler = Scheduler::start(parts(&runtime), transport(), quick());
    let liveness = scheduler.liveness();
    assert!(liveness.is_running());
    scheduler.stop().await;
    assert!(!liveness.is_running());
}

/// A store that never answers: etcd cut off, each call waiting out a timeout that never ends.
/// It counts the calls waiting in it, so a test sees when every task is stuck in one.
#[derive(Debug, Default)]
struct Unanswering {
    waiting: Arc<AtomicUsize>,
}

/// One call waiting in an [`Unanswering`] store, counted until it is dropped (aborted).
struct WaitingCall(Arc<AtomicUsize>);

impl Drop for WaitingCall {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Unanswering {
    /// Waits forever, counted among the waiting calls meanwhile.
    async fn never<T>(&self) -> T {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _call = WaitingCall(self.waiting.clone());
        std::future::pending().await
    }
}

#[async_trait::async_trait]
impl agentprocess_store::Store for Unanswering {
    async fn get(&self, _: &[u8]) -> Result<(Option<agentprocess_store::KeyValue>, i64), StoreError> {
        self.never().await
    }
    async fn range(&self, _: RangeRequest) -> Result<agentprocess_store::RangeResult, StoreError> {
        self.never().await
    }
    async fn txn(&self, _: agentprocess_store::Txn) -> Result<agentprocess_store::TxnResult, StoreError> {
        self.never().await
    }
    async fn lease_grant(&self, _: i64) -> Result<agentprocess_store::LeaseGrant, StoreError> {
        self.never().await
    }
    async fn lease_keep_alive(&self, _: agentprocess_store::LeaseId) -> Result<i64, StoreError> {
        self.never().await
    }
    async fn lease_revoke(&self, _: agentprocess_store::LeaseId) -> Result<(), StoreError> {
        self.never().await
    }
    async fn lease_time_to_live(
        &self,
        _: agentprocess_store::LeaseId,
    ) -> Result<Option<agentprocess_store::LeaseStatus>, StoreError> {
        self.never().await
    }
    async fn watch(
        &self,
        _: agentprocess_store::KeyRange,
        _: Option<i64>,
    ) -> Result<agentprocess_store::WatchStream, StoreError> {
        self.never().await
    }
}

/// A scheduler told to stop while its store does not answer (a leader given SIGTERM while etcd
/// is unreachable) stops within its patience: its tasks are aborted where they wait, rather than
/// the process waiting on them for as long as the store stays away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_stops_within_its_patience_when_the_store_does_not_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, runtime) = open(dir.path(), START).await;
    let store = Arc::new(Unanswering::default());
    let parts = SchedulerParts {
        store: store.clone(),
        ..parts(&runtime)
    };
    let patience = Duration::from_millis(300);
    let config = SchedulerConfig {
        stop_patience: patience,
        ..quick()
    };
    let scheduler = Scheduler::start(parts, transport(), config);
    let liveness = scheduler.liveness();
    // Each of the three tasks (timers, outbox, cleanup) begins with a read of the store.
    eventually("every task waits inside a store call", || async {
        store.waiting.load(Ordering::SeqCst) == 3
    })
    .await;
    assert!(liveness.is_running());
    let stopping = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(10), scheduler.stop())
        .await
        .expect("the scheduler stops although its store does not answer");
    let took = stopping.elapsed();
    assert!(!liveness.is_running());
    // The tasks did not end by themselves: they were aborted in their calls, after the patience.
    assert!(took >= patience, "stopped in {took:?}, before its patience");
    assert_eq!(
        store.waiting.load(Ordering::SeqCst),
        0,
        "the calls waiting in the store were dropped"
    );
}

/// The data points of the metric `name` in the latest export: each one's attributes as
/// `(key, value)` strings and its value (a sum's value, a histogram's count).
fn metric_points(exporter: &InMemoryMetricExporter, name: &str) -> Vec<(Vec<(String, String)>, u64)> {
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    let attributes = |set: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| -> Vec<(String, String)> {
        set.map(|kv| (kv.key.to_string(), kv.value.to_string())).collect()
    };
    let exports = exporter.get_finished_metrics().unwrap();
    let mut points = Vec::new();
    for scope in exports.last().iter().flat_map(|export| export.scope_metrics()) {
        for metric in scope.metrics().filter(|metric| metric.name() == name) {
            match metric.data() {
                AggregatedMetrics::U64(MetricData::Sum(sum)) => points.extend(
                    sum.data_points()
                        .map(|p| (attributes(&mut p.attributes()), p.value())),
                ),
                AggregatedMetrics::F64(MetricData::Histogram(histogram)) => points.extend(
                    histogram
                        .data_points()
                        .map(|p| (attributes(&mut p.attributes()), p.count())),
                ),
                other => panic!("{name} has unexpected data {other:?}"),
            }
        }
    }
    points
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fired_timer_is_counted_by_kind_with_its_lateness() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path(), START).await;
    publish(&runtime, "defect-triage").await;
    let config = SchedulerConfig {
        metrics: SchedulerMetrics::new(&provider.meter(metrics::METER)),
        ..quick()
    };
    let scheduler = Scheduler::start(parts(&runtime), transport(), config);
    let run = start(
        &runtime,
        "defect-triage",
        json!({ "reportId": "T-1" }),
        Mode::Live,
        "s-1",
    )
    .await;
    ok(runtime
        .execute(
            &agent("a1"),
            Write::Claim {
                run_id: RunId::from(run),
                step: StepId::from_wire("triage"),
            },
            "c-1",
        )
        .await
        .unwrap());

    // The claim's lease runs out: the scheduler fires its `claim.<lease>.<step>` timer.
    runtime.clock().advance(Duration::from_secs(601));
    let claim = vec![(metrics::ATTRIBUTE_KIND.to_string(), "claim".to_string())];
    eventually("the claim timer is counted", || async {
        provider.force_flush().unwrap();
        metric_points(&exporter, metrics::TIMERS_FIRED)
            .iter()
            .any(|(attributes, count)| *attributes == claim && *count >= 1)
    })
    .await;
    let lateness = metric_points(&exporter, metrics::FIRE_LATENESS);
    assert!(
        lateness
            .iter()
            .any(|(attributes, count)| *attributes == claim && *count >= 1),
        "{lateness:?}"
    );
    // Every kind the scheduler counted is one of the bounded set.
    for (attributes, _) in metric_points(&exporter, metrics::TIMERS_FIRED) {
        assert_eq!(attributes.len(), 1, "{attributes:?}");
        assert!(
            metrics::TIMER_KINDS.contains(&attributes[0].1.as_str()),
            "{attributes:?}"
        );
    }
    scheduler.stop().await;
    store.close().await;
}

/// Counts the scheduler's reads of webhooks and the transactions that delete outbox entries.
#[derive(Debug)]
struct SchedulerCalls {
    keys: agentprocess_store::keys::Keys,
    webhook_reads: AtomicUsize,
    outbox_deletes: AtomicUsize,
}

#[async_trait::async_trait]
impl Probe for SchedulerCalls {
    async fn range(&self, request: &RangeRequest) {
        if request.range == self.keys.webhooks(&OrgId::from(ORG)) {
            self.webhook_reads.fetch_add(1, Ordering::SeqCst);
        }
    }

    async fn txn(&self, txn: &agentprocess_store::Txn) {
        let deletes_outbox = txn.then.iter().any(|op| match op {
            agentprocess_store::TxnOp::Delete { range } => self.keys.parse_outbox(&range.start).is_some(),
            _ => false,
        });
        if deletes_outbox {
            self.outbox_deletes.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_look_at_the_outbox_reads_the_webhooks_once_and_deletes_what_it_delivered_together() {
    let dir = tempfile::tempdir().unwrap();
    let (store, runtime) = open(dir.path(), START).await;
    publish(&runtime, "account-closure").await;
    let (receiver, url) = Receiver::start(0).await;
    let webhook = Webhook {
        url,
        secret: "s3cret".into(),
    };
    configure_webhook(
        runtime.store().as_ref(),
        runtime.keys(),
        &OrgId::from(ORG),
        "main",
        &webhook,
    )
    .await
    .unwrap();
    // Forty notifications wait in the outbox when the scheduler starts: one work item each.
    const RUNS: usize = 40;
    for n in 0..RUNS {
        let inputs = json!({ "accountId": format!("C-{n}"), "closeAt": "2027-01-01T00:00:00Z" });
        start(&runtime, "account-closure", inputs, Mode::Live, &format!("s-{n}")).await;
    }
    let counting = Arc::new(Probed::new(
        runtime.store().clone(),
        SchedulerCalls {
            keys: runtime.keys().clone(),
            webhook_reads: Default::default(),
            outbox_deletes: Default::default(),
        },
    ));
    let config = SchedulerConfig {
        outbox_poll: Duration::from_secs(3600),
        outbox_gather: Duration::from_millis(200),
        ..quick()
    };
    let scheduler = Scheduler::start(
        SchedulerParts {
            store: counting.clone(),
            ..parts(&runtime)
        },
        transport(),
        config,
    );
    eventually("the outbox is empty", || async {
        runtime
            .store()
            .range(RangeRequest::new(runtime.keys().outbox_entries()))
            .await
            .unwrap()
            .kvs
            .is_empty()
    })
    .await;
    let mut delivered: Vec<String> = receiver
        .requests()
        .iter()
        .map(|(_, body)| {
            serde_json::from_slice::<Value>(body).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    delivered.sort();
    delivered.dedup();
    assert_eq!(delivered.len(), RUNS, "every notification, each once");
    // Deliveries end one by one; their deletes wait for the next look, at most 200 ms on.
    let deletes = counting.probe.outbox_deletes.load(Ordering::SeqCst);
    assert!(
        (1..=3).contains(&deletes),
        "{deletes} delete transactions for {RUNS} entries"
    );
    assert_eq!(counting.probe.webhook_reads.load(Ordering::SeqCst), 1);
    scheduler.stop().await;
    store.close().await;
}
