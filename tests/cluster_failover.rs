//! A cluster on loopback (3 etcd members, 3 actor hosts, 2 schedulers, 2 gateways, each its own
//! process) under competing agents while processes die: every acknowledged write survives, no
//! step is held by two agents at once, no step is accepted twice (architecture, "Sharding,
//! routing, failure"; spec §3.2 claims, tools.md `claim`, `submit`, `retry`).

mod cluster_support;
mod common;

use agentprocess_store::keys::Keys;
use agentprocess_store::{RangeRequest, Store};
use agentprocess_testkit::run_view::step_state;
use cluster_support::{Cluster, LEASE_TTL_SECONDS, Role, Shape};
use common::scrape::{scrape, value};
use common::{Mcp, Who, request_id};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

const PROCESS: &str = "---
name: cluster-step
description: One agent step with a small output, then finish.
inputs:
  n: number
steps:
  - id: work
    agent: Return the number n from the inputs as the result.
    output:
      result: number
  - id: done
    finish: done
---

# One step

Competing agents claim and submit it while the cluster loses processes.
";

const WAIT_PROCESS: &str = "---
name: cluster-wait
description: Waits until a time given in the inputs, then one agent step.
inputs:
  at: datetime
steps:
  - id: hold
    wait_until: inputs.at
  - id: work
    agent: Say that the wait is over.
    output:
      result: string
  - id: done
    finish: done
---

# Wait, then one step

The scheduler ends the wait; its leader dies before the time comes.
";

/// How long one call keeps being retried (same `requestId`) while it answers `retry` or gets no
/// answer: longer than a crashed host's lease, so its shards have moved by then.
const CALL_PATIENCE: Duration = Duration::from_secs(30);

/// A step of a run: (run id, step id).
type StepOfRun = (String, String);

/// An accepted submission: its `requestId`, the agent, and the number it submitted.
type Acceptance = (String, String, u64);

/// What the agents saw acknowledged: the history checked at the end.
#[derive(Debug, Default)]
struct History {
    /// Runs whose `start_run` was acknowledged.
    started: BTreeSet<String>,
    /// Acknowledged claims: (run, step) → the tokens granted (a replay returns the same one).
    claims: BTreeMap<StepOfRun, BTreeSet<String>>,
    /// Acknowledged submissions: (run, step) → (`requestId`, agent, the output's number).
    accepted: BTreeMap<StepOfRun, BTreeSet<Acceptance>>,
    /// Calls that answered `retry` at least once before they were acknowledged or refused.
    retried: usize,
    /// Every attempt of a call that answered `retry` or got no answer, in the order they came.
    failed_attempts: Vec<FailedAttempt>,
    /// Refusals other than the lost races a competing agent expects.
    unexpected: Vec<String>,
}

/// The process a disruption has down at the moment, if any: what a failed attempt is judged
/// against. Set by the disruption before it stops a process, cleared once the cluster settled.
#[derive(Debug, Clone, Default)]
struct Down(Arc<std::sync::Mutex<Option<(Role, usize)>>>);

impl Down {
    fn set(&self, process: Option<(Role, usize)>) {
        *self.0.lock().unwrap() = process;
    }

    fn now(&self) -> Option<(Role, usize)> {
        *self.0.lock().unwrap()
    }
}

/// How one attempt of a call failed.
#[derive(Debug, Clone, PartialEq)]
enum Failure {
    /// The call was answered `retry` (tools.md: transient server state).
    Retry,
    /// The call got no answer: the connection was refused or broke, or nothing came in 30 s.
    NoAnswer(String),
}

/// One attempt of a call that failed, with what was down when it did.
#[derive(Debug, Clone)]
struct FailedAttempt {
    tool: String,
    /// The gateway the agent calls through.
    gateway: usize,
    /// The process the disruption had down when the attempt failed.
    down: Option<(Role, usize)>,
    failure: Failure,
}

/// An agent's connection: its MCP client through one gateway.
struct Agent {
    name: String,
    client: Mcp,
    gateway: usize,
    down: Down,
}

/// Calls `tool` until it gets an answer that is not `retry`, with the same arguments (and so
/// the same `requestId`); `None` when patience ran out. Every failed attempt is recorded.
async fn call_until_answered(
    agent: &Agent,
    tool: &str,
    arguments: Value,
    history: &Mutex<History>,
) -> Option<Value> {
    let deadline = Instant::now() + CALL_PATIENCE;
    let mut retried = false;
    loop {
        let failure = match agent.client.try_call(tool, arguments.clone()).await {
            Ok(envelope) if envelope["ok"] == false && envelope["error"]["code"] == "retry" => Failure::Retry,
            Ok(envelope) => {
                if retried {
                    history.lock().await.retried += 1;
                }
                return Some(envelope);
            }
            Err(error) => Failure::NoAnswer(error),
        };
        history.lock().await.failed_attempts.push(FailedAttempt {
            tool: tool.to_owned(),
            gateway: agent.gateway,
            down: agent.down.now(),
            failure,
        });
        retried = true;
        if Instant::now() > deadline {
            history
                .lock()
                .await
                .unexpected
                .push(format!("{tool} got no answer but retry for {CALL_PATIENCE:?}"));
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One agent: start a run, then take whatever work `get_work` offers (racing the others for it)
/// and submit it, until told to stop.
async fn agent_loop(agent: Agent, stop: Arc<AtomicBool>, history: Arc<Mutex<History>>) {
    let name = agent.name.clone();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let start = json!({ "process": "cluster-step", "inputs": { "n": n }, "requestId": request_id() });
        if let Some(envelope) = call_until_answered(&agent, "start_run", start, &history).await {
            match envelope["data"]["run"]["id"].as_str() {
                Some(run) => {
                    history.lock().await.started.insert(run.to_owned());
                }
                None => history
                    .lock()
                    .await
                    .unexpected
                    .push(format!("start_run: {envelope}")),
            }
        }
        let work = call_until_answered(&agent, "get_work", json!({ "limit": 5 }), &history).await;
        let Some(item) = work.and_then(|w| {
            w["data"]["items"]
                .as_array()
                .and_then(|items| items.first().cloned())
        }) else {
            continue;
        };
        let run = item["runId"].as_str().unwrap_or_default().to_owned();
        let step = item["stepId"].as_str().unwrap_or_default().to_owned();
        let claim = json!({ "runId": run, "stepId": step, "requestId": request_id() });
        let Some(claimed) = call_until_answered(&agent, "claim", claim, &history).await else {
            continue;
        };
        if claimed["ok"] == false {
            let code = claimed["error"]["code"].as_str().unwrap_or_default();
            if code != "conflict" && code != "stale" {
                history
                    .lock()
                    .await
                    .unexpected
                    .push(format!("{name} claim: {claimed}"));
            }
            continue;
        }
        let token = claimed["data"]["token"].as_str().unwrap_or_default().to_owned();
        history
            .lock()
            .await
            .claims
            .entry((run.clone(), step.clone()))
            .or_default()
            .insert(token.clone());
        let submit_id = request_id();
        let submit =
            json!({ "token": token, "output": { "result": n }, "summary": "done", "requestId": submit_id });
        if let Some(submitted) = call_until_answered(&agent, "submit", submit, &history).await {
            if submitted["ok"] == true {
                history
                    .lock()
                    .await
                    .accepted
                    .entry((run, step))
                    .or_default()
                    .insert((submit_id, name.clone(), n));
            } else {
                history
                    .lock()
                    .await
                    .unexpected
                    .push(format!("{name} submit: {submitted}"));
            }
        }
    }
}

/// Runs `agents` competing agents through both gateways while `disrupt` runs (telling what it
/// has down through [`Down`]), then checks the history against the store's final state through
/// gateway 0. Returns the history.
async fn under_load(
    cluster: &mut Cluster,
    agents: usize,
    disrupt: impl AsyncFnOnce(&mut Cluster, &Down),
) -> History {
    let stop = Arc::new(AtomicBool::new(false));
    let history = Arc::new(Mutex::new(History::default()));
    let down = Down::default();
    let mut tasks = Vec::new();
    for i in 0..agents {
        let name = format!("agent-{i}");
        let who = Who::Agent(Box::leak(name.clone().into_boxed_str()));
        let gateway = i % 2;
        let agent = Agent {
            name,
            client: cluster.client(gateway, &who).await,
            gateway,
            down: down.clone(),
        };
        tasks.push(tokio::spawn(agent_loop(agent, stop.clone(), history.clone())));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    disrupt(cluster, &down).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let history = std::mem::take(&mut *history.lock().await);
    assert!(
        history.unexpected.is_empty(),
        "unexpected answers: {:#?}\n{}",
        history.unexpected,
        cluster.logs()
    );
    assert!(
        history.started.len() > 20,
        "too little load to judge: {} runs",
        history.started.len()
    );
    for (key, tokens) in &history.claims {
        assert_eq!(
            tokens.len(),
            1,
            "step {key:?} was held by two claims at once: {tokens:?}"
        );
    }
    for (key, requests) in &history.accepted {
        assert_eq!(requests.len(), 1, "step {key:?} was accepted twice: {requests:?}");
    }
    let checker = cluster.client(0, &Who::Agent("checker")).await;
    let lost = Arc::new(AtomicUsize::new(0));
    for run in &history.started {
        let view = checker.ok("get_run", json!({ "runId": run })).await;
        assert_eq!(view["run"]["id"], run.as_str());
        let step = (run.clone(), "work".to_owned());
        if let Some(accepted) = history.accepted.get(&step) {
            let (_, agent, n) = accepted.first().expect("one acceptance");
            let recorded = &view["data"]["steps"]["work"];
            if step_state(&view, "work") != "done"
                || view["run"]["outcome"] != "done"
                || recorded["by"] != agent.as_str()
                || recorded["output"]["result"] != *n
            {
                lost.fetch_add(1, Ordering::Relaxed);
                eprintln!("the acknowledged submission of {run} by {agent} ({n}) is not in its run: {view}");
            }
        }
    }
    assert_eq!(
        lost.load(Ordering::Relaxed),
        0,
        "acknowledged submissions were lost"
    );
    // A caller sees its own acknowledged writes after the faults: three runs started through
    // one gateway with an input no other run has, listed through the other on the first page,
    // behind every run of the load (tools.md `list_runs`: `inputs` matches on equality).
    let starter = cluster.client(1, &Who::Agent("starter")).await;
    let unique = json!({ "n": 1_000_000_007u64 });
    let mut mine = Vec::new();
    for _ in 0..3 {
        let start = json!({ "process": "cluster-step", "inputs": unique, "requestId": request_id() });
        let view = starter.ok("start_run", start).await;
        mine.push(view["run"]["id"].clone());
    }
    let page = checker
        .ok(
            "list_runs",
            json!({ "process": "cluster-step", "inputs": unique }),
        )
        .await;
    assert_eq!(
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["id"].clone())
            .collect::<Vec<_>>(),
        mine,
        "the first page, behind {} runs: {page}",
        history.started.len()
    );
    assert_eq!(page["nextCursor"], json!(null), "{page}");
    eprintln!(
        "history: {} runs started, {} claims, {} submissions accepted, {} calls answered retry \
         or nothing first ({} failed attempts)",
        history.started.len(),
        history.claims.len(),
        history.accepted.len(),
        history.retried,
        history.failed_attempts.len()
    );
    history
}

/// Waits until `hosts` live actor hosts hold every shard: a lost host's lease ended and its
/// shards moved. Panics after the host lease and ten seconds more.
async fn survivors_hold_every_shard(cluster: &Cluster, hosts: usize) {
    let deadline = Instant::now() + Duration::from_secs(LEASE_TTL_SECONDS + 10);
    loop {
        let (live, held) = cluster.shard_view().await;
        if live == hosts && held == cluster_support::SHARDS {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the shards did not move: {live} hosts live, {held} shards held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn publish_process(cluster: &Cluster) {
    publish_text(cluster, PROCESS);
}

fn publish_text(cluster: &Cluster, text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("PROCESS.md");
    std::fs::write(&path, text).unwrap();
    cluster.publish_in(common::ORG, &path, &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_actor_host_killed_mid_load_moves_its_shards_and_loses_no_acknowledged_write() {
    let mut cluster = Cluster::start(Shape::default()).await;
    publish_process(&cluster);
    under_load(&mut cluster, 12, async |cluster: &mut Cluster, _: &Down| {
        cluster.kill9(Role::Actor, 0);
        let killed_at = Instant::now();
        // Its shards go to the survivors once its lease ends.
        survivors_hold_every_shard(cluster, 2).await;
        eprintln!("shards moved {:?} after the kill", killed_at.elapsed());
    })
    .await;
}

/// The wait timers in the store (cluster-wide) of the runs in `runs`.
async fn wait_timers_of(cluster: &Cluster, runs: &[String]) -> Vec<String> {
    let keys = Keys::new("default");
    let timers = cluster
        .store
        .range(RangeRequest::new(keys.timers()))
        .await
        .expect("read the timer index");
    timers
        .kvs
        .iter()
        .filter_map(|kv| keys.parse_timer(&kv.key))
        .filter(|timer| runs.iter().any(|run| run == timer.run_id.as_str()))
        .map(|timer| format!("{}/{}", timer.run_id, timer.timer_id))
        .collect()
}

/// How many wait timers the scheduler `index` fired, as its metrics count them.
async fn wait_timers_fired_by(cluster: &Cluster, index: usize) -> f64 {
    let samples = scrape(&cluster.metrics_url(Role::Scheduler, index)).await;
    value(
        &samples,
        "agentprocess_scheduler_timers_fired_total",
        &[("kind", "wait")],
    )
    .unwrap_or(0.0)
}

/// Architecture, "Scheduler": the leader is elected through etcd and a standby takes over. Runs
/// wait until a time a few seconds ahead; the leader is killed before it comes, every wait still
/// pending (its timer in the store, its step waiting); the standby, leading now, fires every
/// timer (its metrics count them) and so ends every wait (each run's next step becomes ready).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_scheduler_leader_killed_its_standby_ends_every_pending_wait() {
    let mut cluster = Cluster::start(Shape {
        env: vec![("AGENTPROCESS_METRICS_LISTEN".to_owned(), "127.0.0.1:0".to_owned())],
        ..Shape::default()
    })
    .await;
    publish_text(&cluster, WAIT_PROCESS);
    let starter = cluster.client(0, &Who::Agent("starter")).await;
    let wait = Duration::from_secs(10);
    let wait_ends = std::time::SystemTime::now() + wait;
    let at = agentprocess_run_actor::machine::Timestamp::from_millis(
        i64::try_from(
            wait_ends
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap(),
    )
    .to_rfc3339();
    let mut runs = Vec::new();
    for _ in 0..20 {
        let started = starter
            .ok(
                "start_run",
                json!({ "process": "cluster-wait", "inputs": { "at": at }, "requestId": request_id() }),
            )
            .await;
        assert_eq!(step_state(&started, "hold"), "waiting", "{started}");
        runs.push(started["run"]["id"].as_str().unwrap().to_owned());
    }
    let leader = cluster.scheduler_leader().await.expect("a scheduler leads");
    let standby = 1 - leader;
    assert_eq!(
        wait_timers_fired_by(&cluster, standby).await,
        0.0,
        "the standby fired nothing"
    );
    cluster.kill9(Role::Scheduler, leader);
    let killed_at = Instant::now();
    assert!(
        std::time::SystemTime::now() < wait_ends,
        "the leader must be killed before the waits' time: the runs took too long to start"
    );

    // Every wait was pending at the kill: its timer is in the store, its step waiting (the
    // leader is dead and the time has not come, so nothing could have ended it since).
    let reader = cluster.client(1, &Who::Agent("reader")).await;
    let pending = wait_timers_of(&cluster, &runs).await;
    assert_eq!(
        pending.len(),
        runs.len(),
        "one wait timer per run after the kill: {pending:?}"
    );
    for run in &runs {
        let view = reader.ok("get_run", json!({ "runId": run })).await;
        assert_eq!(step_state(&view, "hold"), "waiting", "{view}");
    }
    assert!(
        std::time::SystemTime::now() < wait_ends,
        "the waits must be seen pending before their time: reading them took too long"
    );

    let deadline = killed_at + wait + Duration::from_secs(LEASE_TTL_SECONDS + 10);
    for run in &runs {
        loop {
            let view = reader.ok("get_run", json!({ "runId": run })).await;
            if step_state(&view, "work") == "ready" {
                assert_eq!(step_state(&view, "hold"), "done", "{view}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the wait of {run} did not end after the leader died: {view}\n{}",
                cluster.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert_eq!(
        cluster.scheduler_leader().await,
        Some(standby),
        "the standby leads now"
    );
    assert_eq!(
        wait_timers_of(&cluster, &runs).await,
        Vec::<String>::new(),
        "every wait timer fired and left the index"
    );
    let fired = wait_timers_fired_by(&cluster, standby).await;
    assert!(
        fired >= runs.len() as f64,
        "the standby fired every wait timer: {fired} of {}",
        runs.len()
    );
    eprintln!(
        "every wait ended {:?} after the leader was killed",
        killed_at.elapsed()
    );
}

/// Architecture, "Storage and keys": etcd keeps serving with one member of three gone, and so
/// does the cluster: the agents' history under load holds across the loss of a member (the
/// leader, the hardest one to lose).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_etcd_member_killed_mid_load_the_cluster_keeps_serving() {
    let mut cluster = Cluster::start(Shape::default()).await;
    publish_process(&cluster);
    under_load(&mut cluster, 12, async |cluster: &mut Cluster, _: &Down| {
        let leader = cluster.etcd.leader();
        cluster.etcd.kill(leader);
        eprintln!("killed etcd member {leader}, the leader");
    })
    .await;
}

/// Architecture, "Sharding, routing, failure": a host that lost its lease cannot write. An actor
/// host is frozen (SIGSTOP) past its lease while the agents go on; its shards move; it is
/// resumed (SIGCONT), possibly with calls it had taken before the freeze. It finds its lease
/// gone, drops every shard and joins again under a new lease, and the agents' history holds
/// throughout: no acknowledged write lost, no step held twice or accepted twice. (That a write
/// under a lost lease changes nothing in the store is checked where it can be seen key by key:
/// `run-actor/tests/fence.rs` and the membership tests of `cluster/tests/`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_actor_host_frozen_past_its_lease_writes_nothing_after_losing_its_shards() {
    let mut cluster = Cluster::start(Shape::default()).await;
    publish_process(&cluster);
    under_load(&mut cluster, 12, async |cluster: &mut Cluster, _: &Down| {
        cluster.signal(Role::Actor, 0, "STOP");
        survivors_hold_every_shard(cluster, 2).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        cluster.signal(Role::Actor, 0, "CONT");
        cluster.wait_settled(3).await;
    })
    .await;
    let log = cluster.log(Role::Actor, 0);
    assert!(
        log.contains("lost the host's lease: dropped every shard"),
        "the resumed host did not notice it lost its lease:\n{log}"
    );
}

/// Architecture, "Sharding, routing, failure" (graceful leave): every actor host and every
/// gateway is restarted in turn (SIGTERM, start again) under load; an actor host hands its
/// shards over before it exits. Every failed attempt of every call is counted, and the only
/// ones are attempts to reach a gateway while it is down (the agents retry those with the same
/// `requestId`): no call is answered `retry`, none fails while an actor host restarts, none
/// through the gateway that is up. The history holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_of_every_actor_host_and_gateway_fails_only_calls_to_the_gateway_that_is_down() {
    let mut cluster = Cluster::start(Shape::default()).await;
    publish_process(&cluster);
    let history = under_load(&mut cluster, 12, async |cluster: &mut Cluster, down: &Down| {
        for actor in 0..3 {
            let stopping = Instant::now();
            down.set(Some((Role::Actor, actor)));
            cluster.terminate(Role::Actor, actor);
            eprintln!(
                "actor host {actor} handed over and stopped in {:?}",
                stopping.elapsed()
            );
            cluster.restart(Role::Actor, actor);
            cluster.wait_settled(3).await;
            down.set(None);
        }
        for gateway in 0..2 {
            down.set(Some((Role::Gateway, gateway)));
            cluster.terminate(Role::Gateway, gateway);
            cluster.restart(Role::Gateway, gateway);
            cluster.wait_settled(3).await;
            down.set(None);
        }
    })
    .await;
    let failed: Vec<&FailedAttempt> = history
        .failed_attempts
        .iter()
        .filter(|attempt| {
            let own_gateway_down = attempt.down == Some((Role::Gateway, attempt.gateway));
            let not_sent = matches!(&attempt.failure, Failure::NoAnswer(error) if error.contains("error sending request"));
            !(own_gateway_down && not_sent)
        })
        .collect();
    assert_eq!(
        failed.len(),
        0,
        "attempts that failed other than by reaching a gateway that was down: {failed:#?}"
    );
    let tools: BTreeSet<&str> = history
        .failed_attempts
        .iter()
        .map(|attempt| attempt.tool.as_str())
        .collect();
    eprintln!(
        "{} attempts ({tools:?}) reached a gateway that was down, and were retried",
        history.failed_attempts.len()
    );
}
