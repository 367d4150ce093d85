//! Walks a run of one of the runner's processes to its finish, whoever each step belongs to:
//! every route of every choice, and every approval with `on_reject` rejected once on the way.

use super::client::Client;
use super::processes;
use super::{Checked, Context, fail, merge, ok, request_id};
use agentprocess_process::{FieldMap, Next, Process, Step, StepKind, sample_values};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// How many times a walk may act on a run (claim and submit, decide, move the clock, send an
/// event) before it counts as going round in circles. Rounds that only wait for a timer are
/// bounded apart, by how many come in a row, so a slow server is not taken for a looping run.
const MOST_ROUNDS: usize = 80;
/// How many reads in a row, 100 ms apart, may find nothing to act on (a timer not fired yet).
const MOST_IDLE_ROUNDS: usize = 100;
/// After how many such reads the clock is moved past a wait again.
const IDLE_ROUNDS_BEFORE_MOVING_AGAIN: usize = 20;

/// A choice to walk: at `step`, take the route to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub process: &'static str,
    pub step: String,
    pub to: String,
}

/// Every route of every choice of the runner's processes, and for a process without choices
/// its one way through; processes whose check (not advisory) could send a submission back are
/// left to the check-1 check.
pub fn every_route() -> Vec<(Route, Process)> {
    let mut routes = Vec::new();
    for (name, _) in processes::PROCESSES {
        let process = processes::process(name);
        if process
            .steps
            .iter()
            .any(|s| s.work().is_some_and(|w| w.check.is_some() && !w.advisory))
        {
            continue;
        }
        let mut choices = Vec::new();
        for step in &process.steps {
            if let Some(Next::Routes(list)) = &step.next {
                for route in list {
                    choices.push(Route {
                        process: name,
                        step: step.id.as_str().to_owned(),
                        to: route.to.to_string(),
                    });
                }
            }
        }
        if choices.is_empty() {
            choices.push(Route {
                process: name,
                step: String::new(),
                to: String::new(),
            });
        }
        routes.extend(choices.into_iter().map(|route| (route, process.clone())));
    }
    routes
}

/// Whether walking `process` needs the server's clock: a `wait` step holds the run for real time.
pub fn needs_clock(process: &Process) -> bool {
    process
        .steps
        .iter()
        .any(|s| matches!(s.kind, StepKind::Wait { .. }))
}

/// A value of every field (optional ones too): a `datetime` in the past, so that a `wait_until`
/// on it continues at once; `person` the runner's person.
fn values_of(fields: &FieldMap, person: &str) -> Value {
    Value::Object(sample_values(fields, person, "2020-01-01T00:00:00Z"))
}

/// Walks one run: starts it, acts on whatever is ready until it ends, then checks the route was
/// taken and every rejection's rework kept its history.
pub async fn walk(ctx: &Context, route: &Route, process: &Process) -> Checked {
    let rule = "spec §3.2, §3.4: a run goes where each choice and decision sends it, to a finish";
    let starter = if process
        .steps
        .iter()
        .any(|s| matches!(s.person(), Some(agentprocess_process::PersonRef::Initiator)))
    {
        &ctx.person
    } else {
        &ctx.agent
    };
    let started = ok(
        starter,
        "start_run",
        json!({ "process": route.process, "inputs": values_of(&process.inputs, &ctx.person_email), "requestId": request_id() }),
    )
    .await?;
    let run = started["run"]["id"].as_str().unwrap_or_default().to_owned();
    // Each approval rejected once, and whether the step it returned to had been done before.
    let mut rejected: std::collections::BTreeMap<String, bool> = std::collections::BTreeMap::new();
    let mut events_sent: BTreeSet<String> = BTreeSet::new();
    let mut idle_rounds = 0;
    let mut acting_rounds = 0;
    let mut clock_moved_for: BTreeSet<String> = BTreeSet::new();
    let mut last_steps = Value::Null;
    while acting_rounds < MOST_ROUNDS {
        let view = ok(&ctx.agent, "get_run", json!({ "runId": run })).await?;
        last_steps = view["steps"].clone();
        let state = view["run"]["state"].as_str().unwrap_or_default();
        if state == "ended" || state == "cancelled" {
            return finished(route, process, &view, &rejected, rule);
        }
        let mut acted = false;
        for entry in view["steps"].as_array().into_iter().flatten() {
            let id = entry["id"].as_str().unwrap_or_default();
            let Some(step) = process.steps.iter().find(|s| s.id.as_str() == id) else {
                return Err(fail(
                    rule,
                    format!("{run} shows a step {id} its process does not declare"),
                ));
            };
            match (&step.kind, entry["state"].as_str()) {
                (StepKind::Agent { .. }, Some("ready")) => {
                    agent_step(ctx, &run, process, step, route).await?;
                    acted = true;
                }
                (StepKind::Task { .. } | StepKind::Approve { .. }, Some("waiting")) => {
                    let item = view["workItems"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|w| w["stepId"] == id)
                        .cloned()
                        .ok_or_else(|| {
                            fail(
                                rule,
                                format!("{id} of {run} waits on a person but has no work item: {view}"),
                            )
                        })?;
                    let reject = match &step.kind {
                        StepKind::Approve {
                            on_reject: Some(target),
                            ..
                        } if !rejected.contains_key(id) => {
                            let done_before = view["data"]["steps"][target.as_str()]["by"].is_string();
                            rejected.insert(id.to_owned(), done_before);
                            true
                        }
                        _ => false,
                    };
                    person_step(ctx, process, step, &item, route, reject).await?;
                    acted = true;
                }
                // The clock moves past a wait once; then the walk waits for the server's timer,
                // and moves it again only if the timer has not fired after a while.
                (StepKind::Wait { duration }, Some("waiting"))
                    if !clock_moved_for.contains(id) || idle_rounds >= IDLE_ROUNDS_BEFORE_MOVING_AGAIN =>
                {
                    let clock = ctx.needs_clock()?;
                    clock
                        .advance(duration.as_seconds() + 1)
                        .await
                        .map_err(|e| fail(rule, e))?;
                    clock_moved_for.insert(id.to_owned());
                    acted = true;
                }
                (StepKind::WaitFor { event, .. }, Some("waiting")) if events_sent.insert(id.to_owned()) => {
                    ok(
                        &ctx.agent,
                        "send_event",
                        json!({ "runId": run, "name": event, "data": { "sentBy": "conformance" }, "requestId": request_id() }),
                    )
                    .await?;
                    acted = true;
                }
                _ => {}
            }
            if acted {
                break;
            }
        }
        if acted {
            idle_rounds = 0;
            acting_rounds += 1;
        } else {
            // Timers fire just after the clock moves, and waits on past times at once.
            idle_rounds += 1;
            if idle_rounds > MOST_IDLE_ROUNDS {
                return Err(fail(
                    rule,
                    format!(
                        "{} of {run} is stuck: nothing to act on: {}",
                        route.process, view["steps"]
                    ),
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    Err(fail(
        rule,
        format!(
            "{} of {run} did not end after acting {MOST_ROUNDS} times; its steps: {last_steps}",
            route.process
        ),
    ))
}

/// The `next` and `reason` of a completion of `step`: the walked route at its step; elsewhere
/// the first route from which the walked step can still be reached, else the first route.
fn route_choice(process: &Process, step: &Step, route: &Route) -> Option<Value> {
    let Some(Next::Routes(routes)) = &step.next else {
        return None;
    };
    let to = if step.id.as_str() == route.step {
        route.to.clone()
    } else {
        routes
            .iter()
            .map(|r| r.to.to_string())
            .find(|to| reaches(process, to, &route.step))
            .unwrap_or_else(|| routes[0].to.to_string())
    };
    Some(json!({ "next": to, "reason": "The walk takes this route." }))
}

/// Whether step `to` can follow step `from` (or is it), along `next`, the following step,
/// `on_timeout` and parallel branches.
fn reaches(process: &Process, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut pending = vec![from.to_owned()];
    while let Some(id) = pending.pop() {
        if id == to {
            return true;
        }
        if !seen.insert(id.clone()) {
            continue;
        }
        let Some(step) = process.steps.iter().find(|s| s.id.as_str() == id) else {
            continue;
        };
        match &step.next {
            Some(Next::Routes(routes)) => pending.extend(routes.iter().map(|r| r.to.to_string())),
            _ => pending.extend(process.default_next(step).map(|t| t.to_string())),
        }
        match &step.kind {
            StepKind::WaitFor {
                on_timeout: Some(target),
                ..
            } => pending.push(target.to_string()),
            StepKind::Parallel { branches } => pending.extend(branches.iter().map(|b| b.as_str().to_owned())),
            _ => {}
        }
    }
    false
}

async fn evidence(client: &Client, step: &Step) -> Checked<Value> {
    let mut items = Vec::new();
    for kind in step.work().map(|w| w.evidence.clone()).unwrap_or_default() {
        if kind.name() == "link" {
            items.push(json!({ "kind": "link", "ref": "https://evidence.test/walk" }));
        } else {
            let uploaded = ok(
                client,
                "upload",
                json!({ "fileName": "evidence.pdf", "contentType": "application/pdf",
                        "contentBase64": "JVBERi0xLjQKJSB3YWxrCg==", "requestId": request_id() }),
            )
            .await?;
            items.push(json!({ "kind": "file", "ref": uploaded["id"] }));
        }
    }
    Ok(Value::Array(items))
}

async fn agent_step(ctx: &Context, run: &str, process: &Process, step: &Step, route: &Route) -> Checked {
    let work = step.work().expect("an agent step has work");
    let claimed = ok(
        &ctx.agent,
        "claim",
        json!({ "runId": run, "stepId": step.id.as_str(), "requestId": request_id() }),
    )
    .await?;
    let mut body = json!({
        "token": claimed["token"], "requestId": request_id(), "summary": "Done as the step asks.",
        "output": values_of(&work.output, &ctx.person_email), "evidence": evidence(&ctx.agent, step).await?,
    });
    if let Some(choice) = route_choice(process, step, route) {
        merge(&mut body, choice);
    }
    ok(&ctx.agent, "submit", body).await.map(drop)
}

async fn person_step(
    ctx: &Context,
    process: &Process,
    step: &Step,
    item: &Value,
    route: &Route,
    reject: bool,
) -> Checked {
    // Work assigned to a person by a path names the runner's person; a group's, its member.
    let person = &ctx.person;
    let mut arguments = item["decide"]["arguments"].clone();
    arguments["requestId"] = json!(request_id());
    match &step.kind {
        StepKind::Approve { .. } => {
            if reject {
                arguments["decision"] = json!("rejected");
                arguments["note"] = json!("Once more, please.");
            } else {
                arguments["decision"] = json!("approved");
            }
        }
        _ => {
            let work = step.work().expect("a task has work");
            arguments["decision"] = json!("completed");
            arguments["output"] = values_of(&work.output, &ctx.person_email);
            arguments["evidence"] = evidence(person, step).await?;
            if let Some(choice) = route_choice(process, step, route) {
                merge(&mut arguments, choice);
            }
        }
    }
    ok(person, "decide", arguments).await.map(drop)
}

/// Checks an ended walk: a finish's outcome, the walked route taken, and the rework of every
/// rejection kept in history.
fn finished(
    route: &Route,
    process: &Process,
    view: &Value,
    rejected: &std::collections::BTreeMap<String, bool>,
    rule: &str,
) -> Checked {
    let outcomes: Vec<&str> = process
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Finish { outcome } => Some(outcome.as_str()),
            _ => None,
        })
        .collect();
    let outcome = view["run"]["outcome"].as_str().unwrap_or_default();
    if view["run"]["state"] != "ended" || !outcomes.contains(&outcome) {
        return Err(fail(
            rule,
            format!(
                "{} ended {}, not at a finish: {}",
                route.process, view["run"]["state"], view["run"]
            ),
        ));
    }
    let steps = &view["data"]["steps"];
    // A rework after a later rejection may have moved the choice into history (spec §3.1).
    let chose = |entry: &Value| entry["next"] == route.to.as_str();
    let taken = chose(&steps[&route.step])
        || steps[&route.step]["history"]
            .as_array()
            .is_some_and(|h| h.iter().any(chose));
    if !route.step.is_empty() && !taken {
        return Err(fail(
            rule,
            format!(
                "{} at {}: the route to {} was chosen; run data: {}",
                route.process, route.step, route.to, steps[&route.step]
            ),
        ));
    }
    for (approval, target_done_before) in rejected {
        let history = steps[approval]["history"].as_array().cloned().unwrap_or_default();
        if !history
            .iter()
            .any(|h| h["decision"] == "rejected" && h["note"] == "Once more, please.")
        {
            return Err(fail(
                "spec §3.1: an approval decided again keeps its rejection in history",
                format!("{} {approval}: {}", route.process, steps[approval]),
            ));
        }
        let Some(StepKind::Approve {
            on_reject: Some(target),
            ..
        }) = process
            .steps
            .iter()
            .find(|s| s.id.as_str() == approval)
            .map(|s| &s.kind)
        else {
            continue;
        };
        let reworked = &steps[target.as_str()];
        if *target_done_before
            && reworked["history"].as_array().is_none_or(Vec::is_empty)
            && !is_parallel(process, target.as_str())
        {
            return Err(fail(
                "spec §3.1: a step done again after a rejection keeps its earlier completion in history",
                format!("{} {target}: {reworked}", route.process),
            ));
        }
    }
    Ok(())
}

/// A parallel step records nothing itself (spec §3.1); its branches keep the history.
fn is_parallel(process: &Process, id: &str) -> bool {
    process
        .steps
        .iter()
        .any(|s| s.id.as_str() == id && matches!(s.kind, StepKind::Parallel { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_choice_of_every_process_is_a_route_to_walk() {
        let routes = every_route();
        let of = |process: &str| routes.iter().filter(|(r, _)| r.process == process).count();
        assert_eq!(of("purchase-request"), 3);
        assert_eq!(of("account-closure"), 4);
        assert_eq!(of("refund-request"), 3);
        assert_eq!(
            of("contractor-setup"),
            1,
            "a process without choices is walked once"
        );
        assert_eq!(of("partner-screening"), 0, "left to the check-1 check");
        assert!(
            routes
                .iter()
                .all(|(r, _)| processes::PROCESSES.iter().any(|(n, _)| *n == r.process))
        );
    }
}
