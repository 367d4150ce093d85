//! What the load generator measures: every call's latency and outcome and every completed run,
//! kept per task without locks, merged at the end into a [`Report`] with exact percentiles.

use super::mcp_client::{CallOutcome, Refusal};
use agentprocess_gateway::ToolName;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// How many unexpected errors a report quotes in full.
const EXAMPLES_KEPT: usize = 5;

/// The measured window: a call or a run counts when it completes inside `[start, end)`.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub start: Instant,
    pub end: Instant,
}

impl Window {
    /// A window that opens after `warmup` from `now` and lasts `duration`.
    pub fn after_warmup(now: Instant, warmup: Duration, duration: Duration) -> Window {
        let start = now + warmup;
        Window {
            start,
            end: start + duration,
        }
    }

    pub fn contains(&self, at: Instant) -> bool {
        self.start <= at && at < self.end
    }

    pub fn seconds(&self) -> f64 {
        (self.end - self.start).as_secs_f64()
    }
}

/// Whether a refusal is what concurrent callers of a shared work queue run into by design: a claim
/// that lost the race for a step, a decision on an item another person just decided (which,
/// on the last step, ended the run: `run_ended` is checked before `already_decided`), or a
/// server's limit answering `retry` with when to come back (the call is made again then).
pub fn is_expected_refusal(tool: ToolName, refusal: &Refusal) -> bool {
    let conflict_on = |issue: &str| refusal.code == "conflict" && refusal.issues.iter().any(|i| i == issue);
    // A server's limit, with when to come back: the call is made again then.
    if super::workers::retry_after(refusal).is_some() {
        return true;
    }
    match tool {
        ToolName::Claim => refusal.code == "conflict",
        ToolName::Decide => {
            refusal.code == "stale" || conflict_on("already_decided") || conflict_on("run_ended")
        }
        _ => false,
    }
}

/// The key an error is counted under: the refusal code with its first issue, or the failure kind.
fn error_key(outcome: &CallOutcome) -> Option<String> {
    match outcome {
        CallOutcome::Ok(_) => None,
        CallOutcome::Refused(refusal) => Some(match refusal.issues.first() {
            Some(issue) => format!("{} ({issue})", refusal.code),
            None => refusal.code.clone(),
        }),
        CallOutcome::Failed(failure) => Some(failure.key()),
    }
}

/// One tool's samples.
#[derive(Debug, Default)]
struct ToolSamples {
    latencies_micros: Vec<u64>,
    /// The latencies of the calls answered ok alone.
    ok_latencies_micros: Vec<u64>,
    ok: u64,
    expected_errors: u64,
    unexpected_errors: u64,
    errors: BTreeMap<String, u64>,
}

/// The samples of one task (or, after [`Recorder::merge`], of all of them).
#[derive(Debug)]
pub struct Recorder {
    window: Window,
    tools: HashMap<ToolName, ToolSamples>,
    runs: BTreeMap<String, u64>,
    empty_polls: u64,
    unexpected_examples: Vec<String>,
}

impl Recorder {
    pub fn new(window: Window) -> Recorder {
        Recorder {
            window,
            tools: HashMap::new(),
            runs: BTreeMap::new(),
            empty_polls: 0,
            unexpected_examples: Vec::new(),
        }
    }

    /// Records a call that started at `started` and completed at `finished`, if it completed
    /// inside the window.
    pub fn record_call(
        &mut self,
        tool: ToolName,
        started: Instant,
        finished: Instant,
        outcome: &CallOutcome,
    ) {
        if !self.window.contains(finished) {
            return;
        }
        let samples = self.tools.entry(tool).or_default();
        let micros = u64::try_from((finished - started).as_micros()).unwrap_or(u64::MAX);
        samples.latencies_micros.push(micros);
        let Some(key) = error_key(outcome) else {
            samples.ok += 1;
            samples.ok_latencies_micros.push(micros);
            return;
        };
        let expected = matches!(outcome, CallOutcome::Refused(r) if is_expected_refusal(tool, r));
        if expected {
            samples.expected_errors += 1;
        } else {
            samples.unexpected_errors += 1;
            if self.unexpected_examples.len() < EXAMPLES_KEPT {
                let detail = match outcome {
                    CallOutcome::Refused(refusal) => refusal.to_string(),
                    CallOutcome::Failed(failure) => failure.to_string(),
                    CallOutcome::Ok(_) => unreachable!("an ok outcome has no error key"),
                };
                self.unexpected_examples
                    .push(format!("{}: {detail}", tool.as_str()));
            }
        }
        *samples.errors.entry(key).or_default() += 1;
    }

    /// Records a run of `process` whose last write returned ok at `at`.
    pub fn record_run(&mut self, process: &str, at: Instant) {
        if self.window.contains(at) {
            *self.runs.entry(process.to_owned()).or_default() += 1;
        }
    }

    /// Records a `get_work` that returned no item, completed at `at`.
    pub fn record_empty_poll(&mut self, at: Instant) {
        if self.window.contains(at) {
            self.empty_polls += 1;
        }
    }

    /// Adds `other`'s samples to these.
    pub fn merge(&mut self, other: Recorder) {
        for (tool, theirs) in other.tools {
            let ours = self.tools.entry(tool).or_default();
            ours.latencies_micros.extend(theirs.latencies_micros);
            ours.ok_latencies_micros.extend(theirs.ok_latencies_micros);
            ours.ok += theirs.ok;
            ours.expected_errors += theirs.expected_errors;
            ours.unexpected_errors += theirs.unexpected_errors;
            for (key, count) in theirs.errors {
                *ours.errors.entry(key).or_default() += count;
            }
        }
        for (process, count) in other.runs {
            *self.runs.entry(process).or_default() += count;
        }
        self.empty_polls += other.empty_polls;
        let room = EXAMPLES_KEPT.saturating_sub(self.unexpected_examples.len());
        self.unexpected_examples
            .extend(other.unexpected_examples.into_iter().take(room));
    }

    /// The figures over the window.
    pub fn report(mut self) -> Report {
        let seconds = self.window.seconds();
        let per_second = |count: u64| {
            if seconds > 0.0 {
                count as f64 / seconds
            } else {
                0.0
            }
        };
        let mut tools = Vec::new();
        for tool in ToolName::ALL {
            let Some(mut samples) = self.tools.remove(&tool) else {
                continue;
            };
            samples.latencies_micros.sort_unstable();
            samples.ok_latencies_micros.sort_unstable();
            let sorted = &samples.latencies_micros;
            let accepted = &samples.ok_latencies_micros;
            tools.push(ToolReport {
                tool: tool.as_str(),
                calls: sorted.len() as u64,
                calls_per_second: per_second(sorted.len() as u64),
                ok: samples.ok,
                p50_ms: millis(percentile(sorted, 0.50)),
                p90_ms: millis(percentile(sorted, 0.90)),
                p99_ms: millis(percentile(sorted, 0.99)),
                max_ms: millis(sorted.last().copied().unwrap_or(0)),
                ok_p50_ms: millis(percentile(accepted, 0.50)),
                ok_p99_ms: millis(percentile(accepted, 0.99)),
                expected_errors: samples.expected_errors,
                unexpected_errors: samples.unexpected_errors,
                errors: samples.errors,
            });
        }
        let runs = self.runs.values().sum();
        let calls = tools.iter().map(|t| t.calls).sum();
        Report {
            seconds,
            runs,
            runs_per_second: per_second(runs),
            runs_by_process: self.runs,
            calls,
            calls_per_second: per_second(calls),
            empty_polls: self.empty_polls,
            expected_errors: tools.iter().map(|t| t.expected_errors).sum(),
            unexpected_errors: tools.iter().map(|t| t.unexpected_errors).sum(),
            unexpected_examples: self.unexpected_examples,
            tools,
        }
    }
}

/// The nearest-rank percentile `q` (0 to 1) of sorted samples; 0 when there are none.
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn millis(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// The figures of one tool over the window.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolReport {
    pub tool: &'static str,
    pub calls: u64,
    pub calls_per_second: f64,
    pub ok: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The p50 and p99 of the calls answered ok alone: under overload, without the fast
    /// refusals (`retry`) that the figures above include.
    pub ok_p50_ms: f64,
    pub ok_p99_ms: f64,
    /// Lost claim races and decisions on items someone else decided.
    pub expected_errors: u64,
    pub unexpected_errors: u64,
    /// Errors by refusal code (with its first issue) or failure kind.
    pub errors: BTreeMap<String, u64>,
}

/// The figures of a load run over its measured window.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub seconds: f64,
    /// Runs whose last write (a `submit` or a `decide` that ended the run) returned ok.
    pub runs: u64,
    pub runs_per_second: f64,
    pub runs_by_process: BTreeMap<String, u64>,
    pub calls: u64,
    pub calls_per_second: f64,
    /// `get_work` calls that found no item (included in `calls`).
    pub empty_polls: u64,
    pub expected_errors: u64,
    pub unexpected_errors: u64,
    /// The first few unexpected errors in full.
    pub unexpected_examples: Vec<String>,
    pub tools: Vec<ToolReport>,
}

impl Report {
    /// A plain-text table for people.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "runs completed: {} in {:.1} s = {:.1} runs/s",
            self.runs, self.seconds, self.runs_per_second
        );
        for (process, count) in &self.runs_by_process {
            let _ = writeln!(out, "  {process}: {count}");
        }
        let _ = writeln!(
            out,
            "tool calls: {} = {:.1} calls/s ({} get_work found nothing)",
            self.calls, self.calls_per_second, self.empty_polls
        );
        let _ = writeln!(
            out,
            "errors: {} expected (lost races), {} unexpected",
            self.expected_errors, self.unexpected_errors
        );
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  errors",
            "tool", "calls", "calls/s", "ok", "p50 ms", "p90 ms", "p99 ms", "max ms"
        );
        for tool in &self.tools {
            let errors: Vec<String> = tool.errors.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            let _ = writeln!(
                out,
                "{:<10} {:>9} {:>9.1} {:>9} {:>9.2} {:>9.2} {:>9.2} {:>9.2}  {}",
                tool.tool,
                tool.calls,
                tool.calls_per_second,
                tool.ok,
                tool.p50_ms,
                tool.p90_ms,
                tool.p99_ms,
                tool.max_ms,
                errors.join(", ")
            );
        }
        if !self.unexpected_examples.is_empty() {
            let _ = writeln!(out);
            let _ = writeln!(out, "first unexpected errors:");
            for example in &self.unexpected_examples {
                let _ = writeln!(out, "  {example}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_cmd::mcp_client::{Data, Failure};
    use serde_json::json;

    fn window() -> Window {
        Window::after_warmup(Instant::now(), Duration::from_secs(1), Duration::from_secs(10))
    }

    fn refusal(code: &str, issues: &[&str]) -> CallOutcome {
        CallOutcome::Refused(Refusal {
            code: code.into(),
            message: "no".into(),
            issues: issues.iter().map(|i| i.to_string()).collect(),
        })
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&sorted, 0.50), 50);
        assert_eq!(percentile(&sorted, 0.99), 99);
        assert_eq!(percentile(&sorted, 1.0), 100);
        assert_eq!(percentile(&sorted, 0.0), 1);
        assert_eq!(percentile(&[7], 0.99), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }

    #[test]
    fn the_calls_answered_ok_have_latencies_of_their_own() {
        let w = window();
        let mut recorder = Recorder::new(w);
        let ok = CallOutcome::Ok(Data::from_value(&json!({})));
        let retry = refusal(
            "retry",
            &[
                "limit: cluster.max_in_flight_store_requests",
                "retry_after_ms: 100",
            ],
        );
        let at = w.start + Duration::from_millis(100);
        for _ in 0..9 {
            recorder.record_call(ToolName::StartRun, at, at + Duration::from_millis(1), &retry);
        }
        recorder.record_call(ToolName::StartRun, at, at + Duration::from_millis(40), &ok);
        let report = recorder.report();
        let start = &report.tools[0];
        assert_eq!((start.calls, start.ok), (10, 1));
        assert_eq!(start.p50_ms, 1.0, "every attempt, the refusals included");
        assert_eq!(
            (start.ok_p50_ms, start.ok_p99_ms),
            (40.0, 40.0),
            "the one answered ok"
        );
    }

    #[test]
    fn only_calls_completing_inside_the_window_count() {
        let w = window();
        let mut recorder = Recorder::new(w);
        let ok = CallOutcome::Ok(Data::from_value(&json!({})));
        let during_warmup = w.start - Duration::from_millis(1);
        recorder.record_call(ToolName::Claim, during_warmup, during_warmup, &ok);
        recorder.record_call(
            ToolName::Claim,
            during_warmup,
            w.start + Duration::from_millis(3),
            &ok,
        );
        recorder.record_call(ToolName::Claim, w.end, w.end, &ok);
        recorder.record_run("p", during_warmup);
        recorder.record_run("p", w.start);
        recorder.record_run("p", w.end);
        let report = recorder.report();
        assert_eq!(report.calls, 1);
        assert_eq!(report.tools[0].p50_ms, 4.0);
        assert_eq!(report.runs, 1);
        assert_eq!(report.runs_per_second, 0.1);
    }

    #[test]
    fn lost_claim_races_and_decided_items_are_expected_errors() {
        assert!(is_expected_refusal(
            ToolName::Claim,
            &Refusal {
                code: "conflict".into(),
                message: String::new(),
                issues: vec!["claimed_by_other".into()],
            }
        ));
        let cases = [
            (ToolName::Claim, refusal("conflict", &["not_ready"]), true),
            (ToolName::Decide, refusal("conflict", &["already_decided"]), true),
            (ToolName::Decide, refusal("stale", &[]), true),
            (ToolName::Decide, refusal("conflict", &["run_ended"]), true),
            (ToolName::Decide, refusal("conflict", &["not_ready"]), false),
            (ToolName::Submit, refusal("conflict", &["run_ended"]), false),
            (ToolName::Submit, refusal("stale", &[]), false),
            (
                ToolName::StartRun,
                refusal("invalid", &["inputs.n: missing"]),
                false,
            ),
            (ToolName::Claim, refusal("forbidden", &[]), false),
        ];
        for (tool, outcome, expected) in cases {
            let CallOutcome::Refused(r) = &outcome else {
                unreachable!()
            };
            assert_eq!(is_expected_refusal(tool, r), expected, "{tool:?} {r:?}");
        }
    }

    #[test]
    fn errors_are_counted_by_code_and_kind_and_examples_kept() {
        let w = window();
        let at = w.start + Duration::from_millis(1);
        let mut one = Recorder::new(w);
        one.record_call(
            ToolName::Claim,
            at,
            at,
            &refusal("conflict", &["claimed_by_other"]),
        );
        one.record_call(
            ToolName::Submit,
            at,
            at,
            &CallOutcome::Failed(Failure::Status(503)),
        );
        let mut two = Recorder::new(w);
        two.record_call(
            ToolName::Claim,
            at,
            at,
            &refusal("conflict", &["claimed_by_other"]),
        );
        two.record_call(
            ToolName::Claim,
            at,
            at,
            &CallOutcome::Ok(Data::from_value(&json!({}))),
        );
        two.record_run("load-agent-step", at);
        one.merge(two);
        let report = one.report();
        assert_eq!(report.calls, 4);
        assert_eq!(report.expected_errors, 2);
        assert_eq!(report.unexpected_errors, 1);
        assert_eq!(report.unexpected_examples, ["submit: HTTP status 503"]);
        let claim = report.tools.iter().find(|t| t.tool == "claim").unwrap();
        assert_eq!(claim.ok, 1);
        assert_eq!(claim.errors["conflict (claimed_by_other)"], 2);
        let submit = report.tools.iter().find(|t| t.tool == "submit").unwrap();
        assert_eq!(submit.errors["http_503"], 1);
        assert_eq!(report.runs_by_process["load-agent-step"], 1);
        // Tools appear in the order of tools.md.
        let order: Vec<_> = report.tools.iter().map(|t| t.tool).collect();
        assert_eq!(order, ["claim", "submit"]);
        assert!(report.table().contains("http_503: 1"), "{}", report.table());
    }
}
