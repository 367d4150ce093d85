//! The simulated callers: agents looping `start_run` → `get_work` → `claim` → `submit`, and people
//! looping `get_work` → `decide`, then finishing the runs they started. Each is one task with its
//! own [`Recorder`].

use super::mcp_client::{CallOutcome, Data, McpClient, Refusal};
use super::processes;
use super::stats::{Recorder, Window, is_expected_refusal};
use agentprocess_gateway::ToolName;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a caller waits before asking again when `get_work` found nothing.
const AGENT_POLL_PAUSE: Duration = Duration::from_millis(1);
const PERSON_POLL_PAUSE: Duration = Duration::from_millis(5);
/// How long a caller waits after a call that failed outright, so a server that is down is not
/// hammered.
const FAILURE_PAUSE: Duration = Duration::from_millis(50);
/// How many `get_work` → `claim` rounds an agent tries before it starts a new run.
const CLAIM_ROUNDS: usize = 50;
/// The `limit` of an agent's `get_work`: the largest page, so that with one fresh run per agent
/// an agent's own run is listed and agents do not all race for the oldest steps.
const AGENT_WORK_PAGE: u64 = 100;
/// The `limit` of a person's `get_work`.
const PERSON_WORK_PAGE: u64 = 20;
/// How long callers go on after the measured window to finish the runs they started (unmeasured),
/// so that a load leaves no open run behind: older ready steps come first in `get_work`, and
/// enough of them would push every agent's own run off its page in the next load on the store.
pub const DRAIN_PATIENCE: Duration = Duration::from_secs(30);

/// What every caller shares.
#[derive(Debug)]
pub struct LoadContext {
    pub client: McpClient,
    pub window: Window,
    /// Percent of agents' runs that start the approval process (0 when there are no people).
    pub approval_percent: u8,
    /// How many agents run: paced agents spread their starts over one interval.
    pub agents: usize,
    /// With `--rate`: how often each agent starts a run.
    pub run_interval: Option<Duration>,
    /// Agents not yet done, the runs they started finished: people go on until it is 0.
    pub agents_running: AtomicUsize,
    /// `waitSeconds` of every `get_work` (`x-wait-1`): a page with nothing waits for work.
    pub wait_seconds: Option<u64>,
}

impl LoadContext {
    /// Makes one call and records it. A call answered `retry` with a hint (a limit of the
    /// server's) is made again, with the same arguments and `requestId`, once the hint's time
    /// has passed, as spec §4.3 tells a client to; each attempt is recorded.
    async fn call(
        &self,
        recorder: &mut Recorder,
        token: &str,
        tool: ToolName,
        arguments: &Value,
    ) -> CallOutcome {
        loop {
            let started = Instant::now();
            let outcome = self.client.call(token, tool.as_str(), arguments).await;
            let finished = Instant::now();
            recorder.record_call(tool, started, finished, &outcome);
            if matches!(outcome, CallOutcome::Failed(_)) {
                tokio::time::sleep(FAILURE_PAUSE).await;
            }
            match &outcome {
                CallOutcome::Refused(refusal) if !self.is_past_drain() => match retry_after(refusal) {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return outcome,
                },
                _ => return outcome,
            }
        }
    }

    fn is_over(&self) -> bool {
        Instant::now() >= self.window.end
    }

    /// Whether finishing the runs started in the window has taken [`DRAIN_PATIENCE`] already.
    fn is_past_drain(&self) -> bool {
        Instant::now() >= self.window.end + DRAIN_PATIENCE
    }
}

/// How long a `retry` refusal that names a limit says to wait (`retry_after_ms: N` among its
/// issues); `None` for any other refusal.
pub fn retry_after(refusal: &Refusal) -> Option<Duration> {
    if refusal.code != "retry" {
        return None;
    }
    refusal
        .issues
        .iter()
        .find_map(|issue| issue.strip_prefix("retry_after_ms: ")?.parse().ok())
        .map(Duration::from_millis)
}

/// Which process each run of an agent starts: spreads `percent` of runs over the approval
/// process evenly (an error-diffusion counter), staggered between agents.
#[derive(Debug, Clone)]
pub struct ProcessMix {
    percent: u32,
    carry: u32,
}

impl ProcessMix {
    pub fn new(percent: u8, agent_index: usize) -> ProcessMix {
        let percent = u32::from(percent.min(100));
        let stagger = u32::try_from(agent_index % 100).unwrap_or(0);
        ProcessMix {
            percent,
            carry: (stagger * percent) % 100,
        }
    }

    /// The process the next run starts.
    pub fn next_process(&mut self) -> &'static str {
        self.carry += self.percent;
        if self.carry >= 100 {
            self.carry -= 100;
            processes::APPROVAL
        } else {
            processes::AGENT_STEP
        }
    }
}

/// A fresh `requestId`.
pub fn request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `start_run` arguments for run number `n` of `process`.
pub fn start_run_arguments(process: &str, n: u64) -> Value {
    json!({ "process": process, "inputs": { "n": n }, "requestId": request_id() })
}

/// `get_work` arguments for a page of `limit` items, of the benchmark process `process` when given,
/// waiting up to `wait_seconds` for work when given.
pub fn get_work_arguments(limit: u64, process: Option<&str>, wait_seconds: Option<u64>) -> Value {
    let mut arguments = json!({ "limit": limit });
    if let Some(process) = process {
        arguments["process"] = json!(process);
    }
    if let Some(seconds) = wait_seconds {
        arguments["waitSeconds"] = json!(seconds);
    }
    arguments
}

/// What the load generator reads of a run view (`start_run`, `submit`, `decide`).
#[derive(Debug, Deserialize)]
pub struct RunView<'a> {
    #[serde(borrow)]
    pub run: RunHead<'a>,
    #[serde(borrow, default)]
    pub steps: Vec<StepHead<'a>>,
}

/// A run view's `run`, as far as it is read.
#[derive(Debug, Deserialize)]
pub struct RunHead<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(borrow)]
    pub process: Cow<'a, str>,
    #[serde(borrow)]
    pub state: Cow<'a, str>,
}

/// One of a run view's `steps`.
#[derive(Debug, Deserialize)]
pub struct StepHead<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
    #[serde(borrow, default)]
    pub state: Option<Cow<'a, str>>,
}

/// A `get_work` page, each item read only for its run and the exact call it names: an agent's
/// `claim`, or a person's `workItem.decide`.
#[derive(Debug, Deserialize)]
pub struct WorkPage<'a> {
    #[serde(borrow)]
    pub items: Vec<WorkItem<'a>>,
}

/// One item of a `get_work` page: an agent's (with `claim`) or a person's (with `workItem`).
#[derive(Debug, Deserialize)]
pub struct WorkItem<'a> {
    #[serde(rename = "runId", borrow)]
    pub run_id: Cow<'a, str>,
    #[serde(borrow, default)]
    pub claim: Option<NamedCall<'a>>,
    #[serde(rename = "workItem", borrow, default)]
    pub work_item: Option<PersonWorkItem<'a>>,
}

/// A person's work item, read for the `decide` call it names.
#[derive(Debug, Deserialize)]
pub struct PersonWorkItem<'a> {
    #[serde(borrow)]
    pub decide: NamedCall<'a>,
}

/// A call a result names (`{ tool, arguments }`), its arguments left as JSON text.
#[derive(Debug, Deserialize)]
pub struct NamedCall<'a> {
    #[serde(borrow)]
    pub arguments: &'a RawValue,
}

/// What the load generator reads of a `claim` result.
#[derive(Debug, Deserialize)]
struct ClaimResult<'a> {
    #[serde(borrow)]
    token: Cow<'a, str>,
}

/// The items of a `get_work` result (none if it is not a page).
pub fn work_items(data: &Data) -> Vec<WorkItem<'_>> {
    data.parse::<WorkPage<'_>>()
        .map_or_else(Vec::new, |page| page.items)
}

/// The item an agent claims: the step of its own run when listed, else one chosen by the agent's
/// index so that agents spread over the list instead of all racing for the oldest item.
pub fn pick_agent_item<'i, 'a>(
    items: &'i [WorkItem<'a>],
    own_run: Option<&str>,
    agent_index: usize,
) -> Option<&'i WorkItem<'a>> {
    if items.is_empty() {
        return None;
    }
    own_run
        .and_then(|run| items.iter().find(|item| item.run_id == run))
        .or_else(|| items.get(agent_index % items.len()))
}

/// Arguments a result names, with a fresh `requestId`, and `extra` fields set.
fn named_arguments(call: &NamedCall<'_>, extra: &[(&str, Value)]) -> Option<Value> {
    let mut arguments: serde_json::Map<String, Value> = serde_json::from_str(call.arguments.get()).ok()?;
    arguments.insert("requestId".into(), json!(request_id()));
    for (key, value) in extra {
        arguments.insert((*key).into(), value.clone());
    }
    Some(Value::Object(arguments))
}

/// The exact `claim` call a `get_work` item names, with a fresh `requestId`.
pub fn claim_arguments(item: &WorkItem<'_>) -> Option<Value> {
    named_arguments(item.claim.as_ref()?, &[])
}

/// The `claim` call of the agent step a run view shows ready, with a fresh `requestId`: how an agent
/// finishes its own run after the window without looking for it in `get_work`.
pub fn own_claim_arguments(view: &RunView<'_>) -> Option<Value> {
    let step = view
        .steps
        .iter()
        .find(|step| step.kind == "agent" && step.state.as_deref() == Some("ready"))?;
    Some(json!({ "runId": view.run.id, "stepId": step.id, "requestId": request_id() }))
}

/// `submit` arguments for the benchmark step, whose output is `{ result: number }`.
pub fn submit_arguments(token: &str, n: u64) -> Value {
    json!({
        "token": token,
        "output": { "result": n },
        "summary": "Returned the input number as the result.",
        "requestId": request_id(),
    })
}

/// The exact `decide` call a person's `get_work` item names, approving, with a fresh `requestId`.
pub fn approve_arguments(item: &WorkItem<'_>) -> Option<Value> {
    named_arguments(
        &item.work_item.as_ref()?.decide,
        &[("decision", json!("approved"))],
    )
}

/// The process of an ended run in a run view; `None` while the run is live.
pub fn ended_process<'v>(view: &'v RunView<'_>) -> Option<&'v str> {
    (view.run.state == "ended").then_some(&*view.run.process)
}

/// The process of the run an ok write answered with its run view, if that run ended.
fn ended_process_of(outcome: &CallOutcome) -> Option<String> {
    let CallOutcome::Ok(data) = outcome else {
        return None;
    };
    let view = data.parse::<RunView<'_>>()?;
    ended_process(&view).map(str::to_owned)
}

/// One agent: starts a run, claims a ready step (its own run's when listed) and submits it, until
/// the window ends; then finishes, unmeasured, each run it started that nobody claimed.
pub async fn agent(context: Arc<LoadContext>, index: usize, token: String) -> Recorder {
    let mut recorder = Recorder::new(context.window);
    let mut mix = ProcessMix::new(context.approval_percent, index);
    let mut n: u64 = 0;
    // The claim calls of this agent's runs that it did not claim itself.
    let mut unclaimed: Vec<Value> = Vec::new();
    // Paced agents start evenly spread over one interval, then one run per interval each.
    let mut next_start = context
        .run_interval
        .map(|interval| tokio::time::Instant::now() + interval.mul_f64(index as f64 / context.agents as f64));
    while !context.is_over() {
        if let (Some(at), Some(interval)) = (next_start.as_mut(), context.run_interval) {
            tokio::time::sleep_until(*at).await;
            *at += interval;
            if context.is_over() {
                break;
            }
        }
        n += 1;
        let arguments = start_run_arguments(mix.next_process(), n);
        let started = context
            .call(&mut recorder, &token, ToolName::StartRun, &arguments)
            .await;
        let (own_run, own_claim) = match started {
            CallOutcome::Ok(data) => match data.parse::<RunView<'_>>() {
                Some(view) => (Some(view.run.id.to_string()), own_claim_arguments(&view)),
                None => (None, None),
            },
            _ => continue,
        };
        let claimed = claim_a_step(&context, &mut recorder, &token, index, own_run.as_deref()).await;
        if claimed.as_ref().map(|(_, run)| run) != own_run.as_ref() {
            unclaimed.extend(own_claim);
        }
        let Some((step_token, _)) = claimed else {
            continue;
        };
        submit_step(&context, &mut recorder, &token, &step_token, n).await;
    }
    for arguments in unclaimed {
        if context.is_past_drain() {
            break;
        }
        // Another agent may have claimed it meanwhile: a refusal means it is not this one's to end.
        if let CallOutcome::Ok(claim) = context
            .call(&mut recorder, &token, ToolName::Claim, &arguments)
            .await
            && let Some(claim) = claim.parse::<ClaimResult<'_>>()
        {
            submit_step(&context, &mut recorder, &token, &claim.token, n).await;
        }
    }
    context.agents_running.fetch_sub(1, Ordering::AcqRel);
    recorder
}

/// Submits the benchmark step claimed with `step_token`, counting the run when it ended.
async fn submit_step(context: &LoadContext, recorder: &mut Recorder, token: &str, step_token: &str, n: u64) {
    let arguments = submit_arguments(step_token, n);
    let submitted = context.call(recorder, token, ToolName::Submit, &arguments).await;
    if let Some(process) = ended_process_of(&submitted) {
        recorder.record_run(&process, Instant::now());
    }
}

/// Polls `get_work` and claims an item until a claim succeeds; the step token and the item's run,
/// or `None` when the window ended, a call failed unexpectedly or no claim succeeded in
/// [`CLAIM_ROUNDS`] rounds.
async fn claim_a_step(
    context: &LoadContext,
    recorder: &mut Recorder,
    token: &str,
    index: usize,
    own_run: Option<&str>,
) -> Option<(String, String)> {
    let get_work = get_work_arguments(AGENT_WORK_PAGE, None, context.wait_seconds);
    for _ in 0..CLAIM_ROUNDS {
        if context.is_over() {
            return None;
        }
        let CallOutcome::Ok(data) = context.call(recorder, token, ToolName::GetWork, &get_work).await else {
            return None;
        };
        let items = work_items(&data);
        let Some(item) = pick_agent_item(&items, own_run, index) else {
            recorder.record_empty_poll(Instant::now());
            tokio::time::sleep(AGENT_POLL_PAUSE).await;
            continue;
        };
        let arguments = claim_arguments(item)?;
        let run = arguments.get("runId").and_then(Value::as_str)?.to_owned();
        drop(items);
        match context.call(recorder, token, ToolName::Claim, &arguments).await {
            CallOutcome::Ok(claim) => {
                return claim
                    .parse::<ClaimResult<'_>>()
                    .map(|claim| (claim.token.into_owned(), run));
            }
            CallOutcome::Refused(refusal) if is_expected_refusal(ToolName::Claim, &refusal) => continue,
            _ => return None,
        }
    }
    None
}

/// One person: approves the approval process's open work items, until the window ends; then on,
/// unmeasured, until every agent is done and no item is left (or [`DRAIN_PATIENCE`] has passed).
pub async fn person(context: Arc<LoadContext>, index: usize, token: String) -> Recorder {
    let mut recorder = Recorder::new(context.window);
    let get_work = get_work_arguments(PERSON_WORK_PAGE, Some(processes::APPROVAL), context.wait_seconds);
    while !context.is_past_drain() {
        let CallOutcome::Ok(data) = context
            .call(&mut recorder, &token, ToolName::GetWork, &get_work)
            .await
        else {
            continue;
        };
        let items = work_items(&data);
        if items.is_empty() {
            if context.is_over() && context.agents_running.load(Ordering::Acquire) == 0 {
                break;
            }
            recorder.record_empty_poll(Instant::now());
            tokio::time::sleep(PERSON_POLL_PAUSE).await;
            continue;
        }
        // People of one group see the same list: each starts at a different item.
        let Some(arguments) = approve_arguments(&items[index % items.len()]) else {
            continue;
        };
        drop(items);
        let decided = context
            .call(&mut recorder, &token, ToolName::Decide, &arguments)
            .await;
        if let Some(process) = ended_process_of(&decided) {
            recorder.record_run(&process, Instant::now());
        }
    }
    recorder
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_that_names_its_wait_is_waited_for_and_nothing_else_is() {
        let refusal = |code: &str, issues: &[&str]| Refusal {
            code: code.to_owned(),
            message: String::new(),
            issues: issues.iter().map(|issue| (*issue).to_owned()).collect(),
        };
        let limited = refusal(
            "retry",
            &["limit: admission.max_in_flight_calls", "retry_after_ms: 250"],
        );
        assert_eq!(retry_after(&limited), Some(Duration::from_millis(250)));
        assert_eq!(
            retry_after(&refusal("retry", &[])),
            None,
            "a failure without a hint"
        );
        assert_eq!(retry_after(&refusal("conflict", &["retry_after_ms: 5"])), None);
    }

    fn data(value: Value) -> Data {
        Data::from_value(&value)
    }

    fn agent_item(run: &str) -> Value {
        json!({ "runId": run, "stepId": "work", "process": "load-agent-step", "version": 1,
                "mode": "live", "readySince": "2026-10-06T09:00:00Z", "due": null, "overdue": false,
                "handoff": null,
                "claim": { "tool": "claim",
                           "arguments": { "runId": run, "stepId": "work", "requestId": "<new UUID>" } } })
    }

    fn page(items: &[Value]) -> Data {
        data(json!({ "items": items, "nextCursor": null }))
    }

    #[test]
    fn an_agent_claims_its_own_run_when_listed() {
        let page = page(&[agent_item("r_1"), agent_item("r_2"), agent_item("r_3")]);
        let items = work_items(&page);
        assert_eq!(pick_agent_item(&items, Some("r_3"), 0).unwrap().run_id, "r_3");
    }

    #[test]
    fn without_its_own_run_agents_spread_over_the_list() {
        let page = page(&[agent_item("r_1"), agent_item("r_2")]);
        let items = work_items(&page);
        assert_eq!(pick_agent_item(&items, Some("r_9"), 0).unwrap().run_id, "r_1");
        assert_eq!(pick_agent_item(&items, None, 3).unwrap().run_id, "r_2");
        assert!(pick_agent_item(&[], Some("r_1"), 0).is_none());
    }

    #[test]
    fn a_page_is_read_for_each_items_run_and_call_only() {
        // Fields the load generator does not read, escapes included, are skipped, not refused.
        let mut item = agent_item("r_1");
        item["handoff"] = json!({ "progress": "half \"done\"\n" });
        let page = page(&[item]);
        let items = work_items(&page);
        assert_eq!(items.len(), 1);
        assert_eq!(claim_arguments(&items[0]).unwrap()["stepId"], "work");
        assert!(work_items(&data(json!({ "nextCursor": null }))).is_empty());
    }

    #[test]
    fn an_agent_finishes_its_own_run_by_the_agent_step_its_view_shows_ready() {
        let view = |state: &str| {
            data(
                json!({ "run": { "id": "r_1", "process": "load-agent-step", "state": "active" },
                         "steps": [ { "id": "approve", "kind": "approve", "state": null },
                                    { "id": "work", "kind": "agent", "state": state } ] }),
            )
        };
        let own_claim = |view: Data| own_claim_arguments(&view.parse::<RunView<'_>>().unwrap());
        let arguments = own_claim(view("ready")).unwrap();
        assert_eq!(arguments["runId"], "r_1");
        assert_eq!(arguments["stepId"], "work");
        assert!(uuid::Uuid::parse_str(arguments["requestId"].as_str().unwrap()).is_ok());
        assert!(own_claim(view("claimed")).is_none());
    }

    #[test]
    fn the_claim_call_is_the_one_get_work_names_with_a_fresh_request_id() {
        let page = page(&[agent_item("r_1"), json!({ "runId": "r_2" })]);
        let items = work_items(&page);
        let arguments = claim_arguments(&items[0]).unwrap();
        assert_eq!(arguments["runId"], "r_1");
        assert_eq!(arguments["stepId"], "work");
        let request_id = arguments["requestId"].as_str().unwrap();
        assert!(uuid::Uuid::parse_str(request_id).is_ok(), "{request_id}");
        assert_ne!(
            claim_arguments(&items[0]).unwrap()["requestId"],
            arguments["requestId"]
        );
        assert!(claim_arguments(&items[1]).is_none());
    }

    #[test]
    fn approving_uses_the_decide_call_the_work_item_names() {
        let item = json!({ "runId": "r_1", "process": "load-approval", "version": 1, "mode": "live",
            "workItem": { "id": "w_1", "stepId": "approve", "kind": "approve", "snapshot": "9b7e",
                "decide": { "tool": "decide",
                            "arguments": { "runId": "r_1", "workItemId": "w_1", "snapshot": "9b7e",
                                           "requestId": "<new UUID>" },
                            "decisions": ["approved", "rejected", "failed"] } } });
        let page = page(&[item]);
        let arguments = approve_arguments(&work_items(&page)[0]).unwrap();
        assert_eq!(arguments["decision"], "approved");
        assert_eq!(arguments["snapshot"], "9b7e");
        assert_eq!(arguments["workItemId"], "w_1");
        assert_ne!(arguments["requestId"], "<new UUID>");
    }

    #[test]
    fn start_run_and_submit_match_the_benchmark_process() {
        let start = start_run_arguments(processes::AGENT_STEP, 3);
        assert_eq!(start["process"], processes::AGENT_STEP);
        assert_eq!(start["inputs"], json!({ "n": 3 }));
        let submit = submit_arguments("tok", 3);
        assert_eq!(submit["output"], json!({ "result": 3 }));
        assert_eq!(submit["token"], "tok");
        assert!(!submit["summary"].as_str().unwrap().is_empty());
    }

    #[test]
    fn a_run_counts_only_once_its_view_says_ended() {
        let answer = |state: &str| {
            CallOutcome::Ok(data(
                json!({ "run": { "id": "r_1", "process": "load-agent-step", "state": state } }),
            ))
        };
        assert_eq!(
            ended_process_of(&answer("ended")).as_deref(),
            Some("load-agent-step")
        );
        assert_eq!(ended_process_of(&answer("waiting")), None);
        assert_eq!(ended_process_of(&answer("cancelled")), None);
        assert_eq!(
            ended_process_of(&CallOutcome::Ok(data(json!({ "token": "t" })))),
            None
        );
    }

    #[test]
    fn the_process_mix_sends_the_given_share_to_the_approval_process() {
        for (percent, agent) in [(0, 0), (25, 0), (25, 7), (50, 3), (100, 1)] {
            let mut mix = ProcessMix::new(percent, agent);
            let approvals = (0..100)
                .filter(|_| mix.next_process() == processes::APPROVAL)
                .count();
            assert_eq!(approvals, usize::from(percent), "{percent}% agent {agent}");
        }
        // Agents are staggered: with 25%, agents 0 and 1 do not start their approval runs together.
        let first = |agent| {
            let mut mix = ProcessMix::new(25, agent);
            (0..4).position(|_| mix.next_process() == processes::APPROVAL)
        };
        assert_ne!(first(0), first(1));
    }
}
