//! The checks, each against the rule of the protocol it is named by (tools.md, the
//! specification's sections, the parallel-1 and check-1 profiles).

use super::client::Client;
use super::processes;
use super::{CheckResult, Checked, Context, Stop, fail, merge, ok, request_id, run_check};
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

/// The tools every core-2 server offers (spec §4.1); `renew`, `upload`, `send_event` and
/// `list_runs` are optional (§4.2), and the checks that use them need them listed in `describe`.
pub const REQUIRED_TOOLS: [&str; 10] = [
    "describe",
    "list_processes",
    "start_run",
    "get_run",
    "get_work",
    "claim",
    "submit",
    "escalate",
    "decide",
    "cancel",
];

/// How many claims race for one step in the competing-claims check, per agent.
const RACERS_PER_AGENT: usize = 4;
/// How many runs the competing agents share out.
const SHARED_RUNS: usize = 6;

// ------------------------------------------------------------------ the order checks run in

/// Runs every check in order; the first three read what the others need (`describe`, the
/// published processes).
pub async fn run_all(ctx: &mut Context) -> Vec<CheckResult> {
    let mut results = vec![
        run_check(
            "describe names the protocol, its version and its tools",
            "tools.md describe",
            describe(ctx),
        )
        .await,
    ];
    results.push(
        run_check(
            "tools/list offers every tool describe names",
            "tools.md; MCP tools/list",
            tools_listed(ctx),
        )
        .await,
    );
    results.push(
        run_check(
            "the runner's processes are published",
            "tools.md list_processes",
            published(ctx),
        )
        .await,
    );
    let ctx: &Context = ctx;
    macro_rules! check {
        ($name:literal, $rule:literal, $check:expr) => {
            results.push(run_check($name, $rule, $check).await)
        };
    }
    check!(
        "list_processes gives each process's inputs and requires",
        "tools.md list_processes",
        list_processes_shapes(ctx)
    );
    check!(
        "start_run refuses undeclared and mistyped inputs",
        "spec §2.3; tools.md start_run",
        start_run_invalid_inputs(ctx)
    );
    check!(
        "an agent cannot start a process with an initiator step",
        "spec §3.4; tools.md start_run",
        agent_cannot_start_initiator_process(ctx)
    );
    check!(
        "a replayed requestId answers as the first time; reused with other arguments it is a conflict",
        "spec §4 requestId",
        replays(ctx)
    );
    check!(
        "each route of a choice leads where the agent chose",
        "spec §3.2",
        every_route(ctx)
    );
    check!(
        "every route of every process leads to a finish, each on_reject rework kept in history",
        "spec §3.1, §3.2, §3.4",
        every_route_walked(ctx)
    );
    check!(
        "a rejection without on_reject ends the run rejected",
        "spec §3.4, §3.5",
        rejection_ends_run(ctx)
    );
    check!(
        "a rejection with on_reject reworks the step and keeps its history",
        "spec §3.1 history, §3.4",
        on_reject_rework(ctx)
    );
    check!(
        "submit refuses what the step does not declare and changes nothing",
        "spec §6 rule 3; tools.md submit",
        submit_refusals(ctx)
    );
    check!(
        "a replaced token is stale; one that does not verify is invalid",
        "spec §4.3, §6 rule 2",
        stale_and_invalid_tokens(ctx)
    );
    check!(
        "a claimed step is claimed by no one else",
        "tools.md claim",
        claim_conflicts(ctx)
    );
    check!(
        "competing agents never both hold one step, and no accepted submission is lost",
        "spec §6 rule 2; tools.md claim",
        competing_agents(ctx)
    );
    check!(
        "escalate, return, complete in the agent's place, and fail",
        "spec §3.3, §3.4; tools.md escalate, decide",
        escalation_paths(ctx)
    );
    check!(
        "agents cannot decide or cancel; people decide only what is assigned to them",
        "spec §6 rule 4; tools.md decide, cancel",
        forbidden(ctx)
    );
    check!(
        "another organization's runs are not found",
        "spec §4.3 not_found",
        other_organization(ctx)
    );
    check!(
        "decide's errors come in the order tools.md gives",
        "spec §3.4; tools.md decide",
        decide_error_order(ctx)
    );
    check!(
        "cancel ends the run and every later write is a conflict",
        "spec §3.5; tools.md cancel",
        cancel(ctx)
    );
    check!(
        "events are consumed by their wait or held until it is ready",
        "spec §3.6; tools.md send_event",
        events(ctx)
    );
    check!(
        "uploaded files are evidence, with sha256 and url in run data",
        "spec §5; tools.md upload",
        uploads(ctx)
    );
    check!(
        "test mode marks the run, its work and its claims",
        "spec §3.3 test mode",
        test_mode(ctx)
    );
    check!(
        "list_runs filters by process, state and inputs, and pages",
        "tools.md list_runs",
        list_runs(ctx)
    );
    check!(
        "an expired lease hands the step and its progress to the next agent",
        "spec §3.3 handoff, §6 rule 2",
        lease_expiry(ctx)
    );
    check!(
        "a step past its due time is overdue and stays open",
        "spec §2.2 due",
        due_and_overdue(ctx)
    );
    check!(
        "wait_until holds the run until the time it names",
        "spec §2.2 wait_until",
        wait_until(ctx)
    );
    check!("wait holds the run for its duration", "spec §2.2 wait", wait(ctx));
    check!(
        "a wait_for that times out goes to on_timeout",
        "spec §2.2 timeout, on_timeout",
        wait_for_timeout(ctx)
    );
    check!(
        "parallel branches are ready together, join, and rework together",
        "parallel-1",
        parallel(ctx)
    );
    check!(
        "a rejection inside a branch reworks that branch alone",
        "parallel-1",
        rework_inside_a_branch(ctx)
    );
    check!(
        "a checked step's submission gets a verdict",
        "check-1",
        checked_step(ctx)
    );
    check!(
        "get_work with waitSeconds waits for a step made ready, or answers an empty page when the wait is over",
        "x-wait-1",
        wait_for_work(ctx)
    );
    let violations = ctx.shared.violations.lock().expect("never poisoned").clone();
    results.push(CheckResult {
        name: "every tool result matches the protocol's result schema",
        rule: "tools.md shapes",
        outcome: if violations.is_empty() {
            super::Outcome::Passed
        } else {
            super::Outcome::Failed(
                violations
                    .iter()
                    .take(5)
                    .map(|v| format!("{}\n  {}", v.exchange, v.problems.join("\n  ")))
                    .chain((violations.len() > 5).then(|| format!("... and {} more", violations.len() - 5)))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        },
        seconds: 0.0,
    });
    results
}

// ------------------------------------------------------------------ helpers

fn ensure(condition: bool, rule: &str, what: impl FnOnce() -> String) -> Checked {
    if condition {
        Ok(())
    } else {
        Err(fail(rule, what()))
    }
}

/// Calls `tool`, which must be refused with `code` (and, when given, exactly `issues`); returns the error.
async fn refused(
    client: &Client,
    tool: &str,
    arguments: Value,
    code: &str,
    issues: Option<&[&str]>,
    rule: &str,
) -> Checked<Value> {
    let answer = client.call(tool, arguments.clone()).await?;
    let error = &answer["error"];
    let issues_match = issues.is_none_or(|expected| error["issues"] == json!(expected));
    if answer["ok"] == false && error["code"] == code && issues_match {
        Ok(error.clone())
    } else {
        let wanted = match issues {
            Some(issues) => format!("{code} with issues {}", json!(issues)),
            None => code.to_owned(),
        };
        Err(fail(
            rule,
            format!(
                "call: {} {tool} {arguments}\nexpected: {wanted}\nanswer: {answer}",
                client.who
            ),
        ))
    }
}

fn run_id(view: &Value) -> String {
    view["run"]["id"].as_str().unwrap_or_default().to_owned()
}

/// The state of `step` in a run view (`null` when not reached).
fn step_state<'a>(view: &'a Value, step: &str) -> &'a Value {
    view["steps"]
        .as_array()
        .and_then(|steps| steps.iter().find(|s| s["id"] == step))
        .map(|s| &s["state"])
        .unwrap_or(&Value::Null)
}

fn step_entry<'a>(view: &'a Value, step: &str) -> &'a Value {
    view["steps"]
        .as_array()
        .and_then(|steps| steps.iter().find(|s| s["id"] == step))
        .unwrap_or(&Value::Null)
}

async fn get_run(client: &Client, run: &str) -> Checked<Value> {
    ok(client, "get_run", json!({ "runId": run })).await
}

/// Checks `step` of `run` is in `state` now.
async fn expect_state(client: &Client, run: &str, step: &str, state: Value, rule: &str) -> Checked<Value> {
    let view = get_run(client, run).await?;
    ensure(step_state(&view, step) == &state, rule, || {
        format!("{step} of {run} should be {state}; get_run: {}", view["steps"])
    })?;
    Ok(view)
}

async fn start(ctx: &Context, client: &Client, process: &str, inputs: Value) -> Checked<String> {
    ctx.needs(process)?;
    let view = ok(
        client,
        "start_run",
        json!({ "process": process, "inputs": inputs, "requestId": request_id() }),
    )
    .await?;
    Ok(run_id(&view))
}

async fn start_test(ctx: &Context, client: &Client, process: &str, inputs: Value) -> Checked<Value> {
    ctx.needs(process)?;
    ok(
        client,
        "start_run",
        json!({ "process": process, "inputs": inputs, "mode": "test", "requestId": request_id() }),
    )
    .await
}

/// Every item of a paged read (`get_work`, `list_processes`): `tool` with `arguments`, then with
/// each `nextCursor` until there is none.
async fn all_items(client: &Client, tool: &str, arguments: Value) -> Checked<Vec<Value>> {
    let mut items = Vec::new();
    let mut arguments = arguments;
    loop {
        let page = ok(client, tool, arguments.clone()).await?;
        items.extend(page["items"].as_array().cloned().unwrap_or_default());
        if page["nextCursor"].is_null() || items.len() > 10_000 {
            return Ok(items);
        }
        arguments["cursor"] = page["nextCursor"].clone();
    }
}

/// Every item of `get_work` for `client`, of `process` when given.
async fn all_work(client: &Client, process: Option<&str>) -> Checked<Vec<Value>> {
    let mut arguments = json!({ "limit": 100 });
    if let Some(process) = process {
        arguments["process"] = json!(process);
    }
    all_items(client, "get_work", arguments).await
}

/// The agent's `get_work` item for `step` of `run`, if listed.
async fn agent_item(client: &Client, process: &str, run: &str, step: &str) -> Checked<Option<Value>> {
    Ok(all_work(client, Some(process))
        .await?
        .into_iter()
        .find(|item| item["runId"] == run && item["stepId"] == step))
}

async fn claim(client: &Client, run: &str, step: &str) -> Checked<Value> {
    ok(
        client,
        "claim",
        json!({ "runId": run, "stepId": step, "requestId": request_id() }),
    )
    .await
}

async fn submit(client: &Client, token: &Value, body: Value) -> Checked<Value> {
    let mut arguments =
        json!({ "token": token, "requestId": request_id(), "summary": "Done as the step asks." });
    merge(&mut arguments, body);
    ok(client, "submit", arguments).await
}

/// Claims `step` and submits `body` (output, evidence, next...); the run view after.
async fn do_agent_step(client: &Client, run: &str, step: &str, body: Value) -> Checked<Value> {
    let claimed = claim(client, run, step).await?;
    submit(client, &claimed["token"], body).await
}

/// The person's open work item for `step` of `run`: from their `get_work`.
async fn work_item(client: &Client, run: &str, step: &str) -> Checked<Value> {
    let items = all_work(client, None).await?;
    items
        .iter()
        .find(|item| item["runId"] == run && item["workItem"]["stepId"] == step)
        .map(|item| item["workItem"].clone())
        .ok_or_else(|| {
            fail(
                "tools.md get_work: a person is given the open work items assigned to them",
                format!(
                    "{} has no work item for {step} of {run}; get_work items: {}",
                    client.who,
                    json!(items)
                ),
            )
        })
}

/// Decides the person's work item for `step` of `run` with `decision` and `extra`; the answer.
async fn decide_call(client: &Client, run: &str, step: &str, decision: &str, extra: Value) -> Checked<Value> {
    let item = work_item(client, run, step).await?;
    let mut arguments = item["decide"]["arguments"].clone();
    arguments["requestId"] = json!(request_id());
    arguments["decision"] = json!(decision);
    merge(&mut arguments, extra);
    Ok(client.call("decide", arguments).await?)
}

async fn decide(client: &Client, run: &str, step: &str, decision: &str, extra: Value) -> Checked<Value> {
    let answer = decide_call(client, run, step, decision, extra).await?;
    if answer["ok"] == true {
        Ok(answer["data"].clone())
    } else {
        Err(fail(
            "decide must succeed here",
            format!("{} deciding {decision} on {step} of {run}: {answer}", client.who),
        ))
    }
}

fn link(reference: &str) -> Value {
    json!([{ "kind": "link", "ref": reference }])
}

async fn upload(client: &Client, name: &str) -> Checked<Value> {
    ok(
        client,
        "upload",
        json!({ "fileName": name, "contentType": "application/pdf", "contentBase64": "JVBERi0xLjQKJSBjb25mb3JtYW5jZQo=", "requestId": request_id() }),
    )
    .await
}

fn ended_with(view: &Value, outcome: &str, rule: &str) -> Checked {
    ensure(
        view["run"]["state"] == "ended" && view["run"]["outcome"] == outcome,
        rule,
        || format!("the run should have ended {outcome}: {}", view["run"]),
    )
}

fn purchase_inputs(ctx: &Context, n: usize) -> Value {
    json!({ "requestId": format!("PR-{}-{n}", ctx.tag), "quoteDocument": format!("https://quotes.test/{}/{n}", ctx.tag),
            "approver": ctx.person_email })
}

fn assess_output(next: &str) -> Value {
    json!({ "output": { "amountUsd": 1200, "vendor": "Office Supply Co", "justification": "Chairs for the new team." },
            "evidence": link("https://quotes.test/match"), "next": next, "reason": "The amount falls in this tier." })
}

// ------------------------------------------------------------------ discovery

async fn describe(ctx: &mut Context) -> Checked {
    let rule = "tools.md describe: { protocol: agentprocess, version: core-2, profiles, leaseSeconds, person, tools }, the tools at least those of spec §4.1";
    let data = ok(&ctx.agent, "describe", json!({})).await?;
    ctx.describe = data.clone();
    ensure(
        data["protocol"] == "agentprocess" && data["version"] == "core-2",
        rule,
        || format!("describe: {data}"),
    )?;
    ensure(data["leaseSeconds"].as_u64().is_some_and(|s| s > 0), rule, || {
        format!("leaseSeconds: {data}")
    })?;
    let tools: BTreeSet<&str> = data["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let missing: Vec<&str> = REQUIRED_TOOLS
        .iter()
        .copied()
        .filter(|t| !tools.contains(t))
        .collect();
    ensure(missing.is_empty(), rule, || {
        format!("describe's tools lack {missing:?}: {data}")
    })
}

async fn tools_listed(ctx: &Context) -> Checked {
    let rule = "every tool describe names is an MCP tool, with an inputSchema";
    let listed = ctx.agent.list_tools().await.map_err(|e| fail(rule, e))?;
    let names: HashSet<&str> = listed.iter().filter_map(|t| t["name"].as_str()).collect();
    for tool in ctx.describe["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        ensure(names.contains(tool), rule, || {
            format!("{tool} is not in tools/list: {names:?}")
        })?;
    }
    for tool in &listed {
        ensure(tool["inputSchema"]["type"] == "object", rule, || {
            format!("no object inputSchema: {tool}")
        })?;
    }
    Ok(())
}

async fn published(ctx: &mut Context) -> Checked {
    let names: BTreeSet<String> = all_items(&ctx.agent, "list_processes", json!({}))
        .await?
        .iter()
        .filter_map(|item| item["name"].as_str().map(str::to_owned))
        .collect();
    let mut missing = Vec::new();
    for (name, _) in processes::PROCESSES {
        let process = processes::process(name);
        let profile_offered = (!process.uses_parallel() || ctx.offers("parallel-1"))
            && (!process.uses_check() || ctx.offers("check-1"));
        if names.contains(*name) {
            ctx.published.insert((*name).to_owned());
        } else if profile_offered {
            missing.push(*name);
        }
    }
    ensure(
        missing.is_empty(),
        "the runner's processes must be imported and published with their bindings",
        || {
            format!(
                "not published: {}. Write them with `agentprocess conformance processes --out DIR` and import them \
             with bindings.json, or run with --publish against an agentprocess server; the checks that need them are not run.",
                missing.join(", ")
            )
        },
    )
}

async fn list_processes_shapes(ctx: &Context) -> Checked {
    ctx.needs("purchase-request")?;
    let rule = "tools.md list_processes: each item has name, description, version, inputs, and requires when the process declares it";
    let items = all_items(&ctx.agent, "list_processes", json!({})).await?;
    let item = |name: &str| {
        items
            .iter()
            .find(|item| item["name"] == name)
            .cloned()
            .unwrap_or_default()
    };
    let purchase = item("purchase-request");
    ensure(
        purchase["inputs"]
            == json!({ "requestId": "string", "quoteDocument": "string", "approver": "person" })
            && purchase["version"].as_u64().is_some_and(|v| v >= 1)
            && purchase["description"]
                .as_str()
                .is_some_and(|d| d.starts_with("Assess a purchase request"))
            && purchase.get("requires").is_none_or(Value::is_null),
        rule,
        || format!("{purchase}"),
    )?;
    if ctx.published.contains("partner-screening") {
        let screening = item("partner-screening");
        ensure(
            screening["requires"] == json!({ "systems": ["watchlist-screening"] }),
            rule,
            || format!("{screening}"),
        )?;
        ensure(screening["inputs"]["dealSize"]["type"] == "number", rule, || {
            format!("{screening}")
        })?;
    }
    Ok(())
}

// ------------------------------------------------------------------ starting runs

async fn start_run_invalid_inputs(ctx: &Context) -> Checked {
    ctx.needs("purchase-request")?;
    let rule = "tools.md start_run: undeclared or mistyped inputs -> invalid with issues";
    let mut extra = purchase_inputs(ctx, 0);
    extra["colour"] = json!("red");
    let error = refused(
        &ctx.agent,
        "start_run",
        json!({ "process": "purchase-request", "inputs": extra, "requestId": request_id() }),
        "invalid",
        None,
        rule,
    )
    .await?;
    ensure(
        error["issues"].as_array().is_some_and(|i| !i.is_empty()),
        rule,
        || format!("no issues: {error}"),
    )?;
    let mut mistyped = purchase_inputs(ctx, 0);
    mistyped["requestId"] = json!(42);
    refused(
        &ctx.agent,
        "start_run",
        json!({ "process": "purchase-request", "inputs": mistyped, "requestId": request_id() }),
        "invalid",
        None,
        rule,
    )
    .await?;
    let mut missing = purchase_inputs(ctx, 0);
    missing.as_object_mut().expect("an object").remove("approver");
    refused(
        &ctx.agent,
        "start_run",
        json!({ "process": "purchase-request", "inputs": missing, "requestId": request_id() }),
        "invalid",
        None,
        rule,
    )
    .await?;
    Ok(())
}

async fn agent_cannot_start_initiator_process(ctx: &Context) -> Checked {
    ctx.needs("training-request")?;
    let rule =
        "tools.md start_run: a process with a step assigned to initiator, started by an agent -> invalid";
    let inputs = json!({ "requestRef": format!("TR-{}", ctx.tag), "supervisor": ctx.person_email });
    refused(
        &ctx.agent,
        "start_run",
        json!({ "process": "training-request", "inputs": inputs.clone(), "requestId": request_id() }),
        "invalid",
        None,
        rule,
    )
    .await?;
    // A person may, and the initiator step is theirs.
    let run = start(ctx, &ctx.person, "training-request", inputs).await?;
    work_item(&ctx.person, &run, "course_details").await?;
    Ok(())
}

async fn replays(ctx: &Context) -> Checked {
    ctx.needs("purchase-request")?;
    let rule = "a write replayed with its requestId returns the original result; the same requestId with other arguments -> conflict";
    let id = request_id();
    let arguments =
        json!({ "process": "purchase-request", "inputs": purchase_inputs(ctx, 1), "requestId": id });
    let first = ok(&ctx.agent, "start_run", arguments.clone()).await?;
    let again = ok(&ctx.agent, "start_run", arguments).await?;
    ensure(run_id(&first) == run_id(&again), rule, || {
        format!(
            "two runs for one requestId: {} and {}",
            run_id(&first),
            run_id(&again)
        )
    })?;
    refused(
        &ctx.agent,
        "start_run",
        json!({ "process": "purchase-request", "inputs": purchase_inputs(ctx, 2), "requestId": id }),
        "conflict",
        None,
        rule,
    )
    .await?;

    let run = run_id(&first);
    let claim_id = request_id();
    let claimed = ok(
        &ctx.agent,
        "claim",
        json!({ "runId": run, "stepId": "assess", "requestId": claim_id }),
    )
    .await?;
    let replayed = ok(
        &ctx.agent,
        "claim",
        json!({ "runId": run, "stepId": "assess", "requestId": claim_id }),
    )
    .await?;
    ensure(
        claimed["token"] == replayed["token"] && claimed["expiresAt"] == replayed["expiresAt"],
        "tools.md claim: a replay returns the original result",
        || format!("first: {claimed}\nreplay: {replayed}"),
    )?;
    let submit_id = request_id();
    let mut body = json!({ "token": claimed["token"], "requestId": submit_id, "summary": "Matched." });
    merge(&mut body, assess_output("team_lead_approval"));
    let submitted = ok(&ctx.agent, "submit", body.clone()).await?;
    let replayed = ok(&ctx.agent, "submit", body.clone()).await?;
    ensure(
        submitted["data"] == replayed["data"] && submitted["run"]["id"] == replayed["run"]["id"],
        rule,
        || format!("first: {submitted}\nreplay: {replayed}"),
    )?;
    body["summary"] = json!("Matched, said differently.");
    refused(&ctx.agent, "submit", body, "conflict", None, rule).await?;
    Ok(())
}

// ------------------------------------------------------------------ routes and approvals

async fn every_route(ctx: &Context) -> Checked {
    ctx.needs("purchase-request")?;
    let rule =
        "spec §3.3: the agent's next names the step that follows; an approval's next continues the run";
    for (n, route) in ["team_lead_approval", "budget_approval", "executive_approval"]
        .into_iter()
        .enumerate()
    {
        let run = start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 10 + n)).await?;
        let claimed = claim(&ctx.agent, &run, "assess").await?;
        let routes: Vec<&Value> = claimed["step"]["next"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| &r["to"])
            .collect();
        ensure(
            routes
                == [
                    &json!("team_lead_approval"),
                    &json!("budget_approval"),
                    &json!("executive_approval"),
                ],
            "tools.md claim: step.next lists the routes",
            || format!("claim: {claimed}"),
        )?;
        let view = submit(&ctx.agent, &claimed["token"], assess_output(route)).await?;
        ensure(
            step_state(&view, route) == "waiting" && view["data"]["steps"]["assess"]["next"] == route,
            rule,
            || format!("after choosing {route}: {view}"),
        )?;
        for other in ["team_lead_approval", "budget_approval", "executive_approval"]
            .into_iter()
            .filter(|o| *o != route)
        {
            ensure(step_state(&view, other).is_null(), rule, || {
                format!("{other} was reached too: {}", view["steps"])
            })?;
        }
        let view = decide(&ctx.person, &run, route, "approved", json!({})).await?;
        ensure(step_state(&view, "place_order") == "ready", rule, || {
            format!("after approval: {}", view["steps"])
        })?;
        let view = do_agent_step(&ctx.agent, &run, "place_order", json!({ "output": { "orderNumber": format!("PO-{n}") }, "evidence": link("https://orders.test/1") })).await?;
        ended_with(
            &view,
            "ordered",
            "spec §3: a finish step ends the run with its outcome",
        )?;
        ensure(
            view["run"]["ended"]["note"].is_null() && view["run"]["ended"]["by"] == "server",
            "spec §3.5: a finish ends the run by server with a null note",
            || format!("{}", view["run"]),
        )?;
        ensure(
            view["data"]["steps"][route]["decision"] == "approved",
            "tools.md run view: an approval's data has its decision",
            || format!("{}", view["data"]),
        )?;
    }
    Ok(())
}

async fn every_route_walked(ctx: &Context) -> Checked {
    let mut not_run = Vec::new();
    let mut walked = 0;
    for (route, process) in super::walk::every_route() {
        let name = route.process;
        if !ctx.published.contains(name) {
            // A process needing a profile the server does not offer is not expected of it.
            let expected = (!process.uses_parallel() || ctx.offers("parallel-1"))
                && (!process.uses_check() || ctx.offers("check-1"));
            if expected {
                not_run.push(format!("{name} (not published)"));
            }
            continue;
        }
        if super::walk::needs_clock(&process) && ctx.clock.is_none() {
            not_run.push(format!("{name} (a wait needs the clock)"));
            continue;
        }
        match super::walk::walk(ctx, &route, &process).await {
            Ok(()) => walked += 1,
            Err(Stop::NotRun(why)) => not_run.push(format!("{name}: {why}")),
            Err(Stop::Failed(why)) => {
                let at = if route.step.is_empty() {
                    String::new()
                } else {
                    format!(" taking {} -> {}", route.step, route.to)
                };
                return Err(Stop::Failed(format!("walking {name}{at}: {why}")));
            }
        }
    }
    not_run.dedup();
    if not_run.is_empty() {
        Ok(())
    } else {
        Err(Stop::NotRun(format!(
            "{walked} walks passed; not walked: {}",
            not_run.join(", ")
        )))
    }
}

async fn rejection_ends_run(ctx: &Context) -> Checked {
    ctx.needs("purchase-request")?;
    let run = start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 20)).await?;
    do_agent_step(&ctx.agent, &run, "assess", assess_output("executive_approval")).await?;
    let view = decide(
        &ctx.person,
        &run,
        "executive_approval",
        "rejected",
        json!({ "note": "Not this quarter." }),
    )
    .await?;
    let rule =
        "spec §3.5: an approval without on_reject ends the run rejected, ended.note the rejection note";
    ended_with(&view, "rejected", rule)?;
    ensure(view["run"]["ended"]["note"] == "Not this quarter.", rule, || {
        format!("{}", view["run"])
    })?;
    ensure(
        view["data"]["steps"]["executive_approval"]["note"] == "Not this quarter.",
        "tools.md run view: the rejection's note is in run data",
        || format!("{}", view["data"]),
    )
}

fn policy_inputs(ctx: &Context, n: usize) -> Value {
    json!({ "policyId": format!("POL-{}-{n}", ctx.tag), "draftDocument": "https://docs.test/policy", "author": ctx.person_email })
}

async fn write_draft(ctx: &Context, run: &str, version: &str) -> Checked<Value> {
    let file = upload(&ctx.person, &format!("{version}.pdf")).await?;
    decide(
        &ctx.person,
        run,
        "write_draft",
        "completed",
        json!({ "output": { "version": version, "changeSummary": "Clarified retention." },
                "evidence": [{ "kind": "file", "ref": file["id"] }], "summary": "Draft frozen." }),
    )
    .await
}

async fn on_reject_rework(ctx: &Context) -> Checked {
    ctx.needs("policy-update")?;
    let rule = "spec §3.5: on_reject makes the named step current again; rewound steps are null and keep their history";
    let run = start(ctx, &ctx.person, "policy-update", policy_inputs(ctx, 1)).await?;
    write_draft(ctx, &run, "v1").await?;
    decide(&ctx.person, &run, "compliance_review", "approved", json!({})).await?;
    let view = decide(
        &ctx.person,
        &run,
        "security_review",
        "rejected",
        json!({ "note": "Name the key rotation period." }),
    )
    .await?;
    ensure(step_state(&view, "write_draft") == "waiting", rule, || {
        format!("{}", view["steps"])
    })?;
    for rewound in ["compliance_review", "security_review"] {
        ensure(step_state(&view, rewound).is_null(), rule, || {
            format!("{rewound}: {}", view["steps"])
        })?;
    }
    let steps = &view["data"]["steps"];
    ensure(
        steps["security_review"]["decision"] == "rejected"
            && steps["security_review"]["note"] == "Name the key rotation period."
            && steps["compliance_review"]
                .get("decision")
                .is_none_or(Value::is_null)
            && steps["compliance_review"]["history"]
                .as_array()
                .is_some_and(|h| h.len() == 1),
        "spec §3.1: the rejecting approval keeps its decision and note current; the steps after the returned-to step move into history",
        || format!("{steps}"),
    )?;
    write_draft(ctx, &run, "v2").await?;
    decide(&ctx.person, &run, "compliance_review", "approved", json!({})).await?;
    decide(&ctx.person, &run, "security_review", "approved", json!({})).await?;
    let view = decide(
        &ctx.person,
        &run,
        "publish_policy",
        "completed",
        json!({ "output": { "publishedVersion": "v2", "effectiveAt": "2031-01-01T00:00:00Z" },
                "evidence": [{ "kind": "file", "ref": upload(&ctx.person, "published.pdf").await?["id"] }] }),
    )
    .await?;
    ended_with(&view, "published", rule)?;
    let steps = &view["data"]["steps"];
    ensure(steps["write_draft"]["output"]["version"] == "v2", rule, || {
        format!("the current draft is v2: {steps}")
    })?;
    let history = steps["write_draft"]["history"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    ensure(
        history.len() == 1 && history[0]["output"]["version"] == "v1",
        rule,
        || format!("the first draft is kept in history: {}", steps["write_draft"]),
    )?;
    let history = steps["security_review"]["history"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    ensure(
        history.len() == 1 && history[0]["decision"] == "rejected",
        rule,
        || format!("the rejection is kept in history: {}", steps["security_review"]),
    )
}

async fn submit_refusals(ctx: &Context) -> Checked {
    ctx.needs_tool("renew")?;
    ctx.needs("purchase-request")?;
    let rule = "tools.md submit: not_accepted with issues, nothing changed, the claim stands";
    let run = start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 30)).await?;
    let claimed = claim(&ctx.agent, &run, "assess").await?;
    let before = get_run(&ctx.agent, &run).await?;
    let cases = [
        json!({ "output": { "amountUsd": "a lot", "vendor": "V", "justification": "J", "colour": "red" }, "evidence": link("https://x.test"), "next": "budget_approval", "reason": "R" }),
        json!({ "output": { "amountUsd": 10, "vendor": "V", "justification": "J" }, "next": "budget_approval", "reason": "R" }),
        json!({ "output": { "amountUsd": 10, "vendor": "V", "justification": "J" }, "evidence": link("https://x.test") }),
        json!({ "output": { "amountUsd": 10, "vendor": "V", "justification": "J" }, "evidence": link("https://x.test"), "next": "place_order", "reason": "R" }),
    ];
    for case in cases {
        let mut arguments =
            json!({ "token": claimed["token"], "requestId": request_id(), "summary": "Tried." });
        merge(&mut arguments, case);
        let error = refused(&ctx.agent, "submit", arguments, "not_accepted", None, rule).await?;
        ensure(
            error["issues"].as_array().is_some_and(|i| !i.is_empty()),
            rule,
            || format!("no issues: {error}"),
        )?;
    }
    let after = get_run(&ctx.agent, &run).await?;
    ensure(
        after["steps"] == before["steps"] && after["data"] == before["data"],
        rule,
        || format!("before: {before}\nafter: {after}"),
    )?;
    ok(
        &ctx.agent,
        "renew",
        json!({ "token": claimed["token"], "requestId": request_id() }),
    )
    .await?;
    Ok(())
}

// ------------------------------------------------------------------ tokens and claims

async fn stale_and_invalid_tokens(ctx: &Context) -> Checked {
    ctx.needs_tool("renew")?;
    ctx.needs("purchase-request")?;
    let run = start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 40)).await?;
    let claimed = claim(&ctx.agent, &run, "assess").await?;
    let renewed = ok(
        &ctx.agent,
        "renew",
        json!({ "token": claimed["token"], "progress": "Matched the vendor.", "requestId": request_id() }),
    )
    .await?;
    ensure(
        renewed["token"] != claimed["token"],
        "tools.md renew: a new token",
        || format!("{renewed}"),
    )?;
    let stale_rule = "tools.md submit, renew: the token of a replaced claim -> stale";
    refused(
        &ctx.agent,
        "renew",
        json!({ "token": claimed["token"], "requestId": request_id() }),
        "stale",
        None,
        stale_rule,
    )
    .await?;
    let mut body = json!({ "token": claimed["token"], "requestId": request_id(), "summary": "S" });
    merge(&mut body, assess_output("team_lead_approval"));
    refused(&ctx.agent, "submit", body, "stale", None, stale_rule).await?;
    let invalid_rule = "tools.md claim: a token that does not verify -> invalid, on any tool that takes one";
    for token in ["not-a-token", "eyJhbGciOiJub25lIn0.e30.", "apt1.r_0000.1.00"] {
        refused(
            &ctx.agent,
            "renew",
            json!({ "token": token, "requestId": request_id() }),
            "invalid",
            None,
            invalid_rule,
        )
        .await?;
        refused(
            &ctx.agent,
            "escalate",
            json!({ "token": token, "note": "n", "requestId": request_id() }),
            "invalid",
            None,
            invalid_rule,
        )
        .await?;
    }
    let view = submit(&ctx.agent, &renewed["token"], assess_output("team_lead_approval")).await?;
    ensure(
        step_state(&view, "assess") == "done",
        "the current token still submits",
        || format!("{}", view["steps"]),
    )
}

async fn claim_conflicts(ctx: &Context) -> Checked {
    ctx.needs("purchase-request")?;
    let rule = "tools.md claim: conflict claimed_by_other / claimed_by_you / not_ready; forbidden for a non-agent step";
    let run = start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 50)).await?;
    ensure(
        agent_item(&ctx.agent, "purchase-request", &run, "assess")
            .await?
            .is_some(),
        "tools.md get_work: a ready agent step is listed",
        || format!("assess of {run} is not listed"),
    )?;
    claim(&ctx.agent, &run, "assess").await?;
    ensure(
        agent_item(&ctx.second_agent, "purchase-request", &run, "assess")
            .await?
            .is_none(),
        "tools.md get_work: a claimed step is not listed",
        || format!("assess of {run} is still listed"),
    )?;
    let refusals: [(&Client, &str, &str, Option<&[&str]>); 4] = [
        (
            &ctx.second_agent,
            "assess",
            "conflict",
            Some(&["claimed_by_other"]),
        ),
        (&ctx.agent, "assess", "conflict", Some(&["claimed_by_you"])),
        (&ctx.agent, "place_order", "conflict", Some(&["not_ready"])),
        (&ctx.agent, "budget_approval", "forbidden", None),
    ];
    for (client, step, code, issues) in refusals {
        let arguments = json!({ "runId": run, "stepId": step, "requestId": request_id() });
        refused(client, "claim", arguments, code, issues, rule).await?;
    }
    Ok(())
}

async fn competing_agents(ctx: &Context) -> Checked {
    ctx.needs("purchase-request")?;
    let rule = "tools.md claim: at most one live claim per step; an accepted submit is kept";
    let mut runs = Vec::new();
    for n in 0..SHARED_RUNS {
        runs.push(start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 100 + n)).await?);
    }
    let runs = Arc::new(runs);
    let mut racers = tokio::task::JoinSet::new();
    for (agent, who) in [(&ctx.agent, "first"), (&ctx.second_agent, "second")] {
        for racer in 0..RACERS_PER_AGENT {
            let agent = agent.clone();
            let runs = runs.clone();
            racers.spawn(async move {
                let mut won = Vec::new();
                // Every racer tries every run, starting at a different one.
                for i in 0..runs.len() {
                    let run = &runs[(i + racer) % runs.len()];
                    let answer = agent.call("claim", json!({ "runId": run, "stepId": "assess", "requestId": request_id() })).await?;
                    if answer["ok"] == true {
                        let mut body = json!({ "token": answer["data"]["token"], "requestId": request_id(), "summary": format!("By the {who} agent.") });
                        merge(&mut body, assess_output("team_lead_approval"));
                        let submitted = agent.call("submit", body).await?;
                        won.push((run.clone(), answer, submitted));
                    } else if answer["error"]["code"] != "conflict" {
                        return Ok::<_, super::client::CallFailure>(Err(format!("claim of {run}: {answer}")));
                    }
                }
                Ok(Ok(won))
            });
        }
    }
    let mut wins: Vec<(String, Value, Value)> = Vec::new();
    while let Some(joined) = racers.join_next().await {
        match joined.map_err(|e| fail(rule, format!("a racer failed: {e}")))?? {
            Ok(won) => wins.extend(won),
            Err(answer) => {
                return Err(fail(
                    "tools.md claim: a claim of a claimed step is conflict",
                    answer,
                ));
            }
        }
    }
    let claimed_runs: Vec<&String> = wins.iter().map(|(run, _, _)| run).collect();
    let unique: BTreeSet<&String> = claimed_runs.iter().copied().collect();
    ensure(unique.len() == claimed_runs.len(), rule, || {
        format!("a step was claimed twice: {claimed_runs:?}")
    })?;
    ensure(unique.len() == runs.len(), rule, || {
        format!("only {} of {} steps were claimed", unique.len(), runs.len())
    })?;
    for (run, _, submitted) in &wins {
        ensure(submitted["ok"] == true, rule, || {
            format!("the winner's submit of {run} was refused: {submitted}")
        })?;
        let view = get_run(&ctx.agent, run).await?;
        ensure(
            step_state(&view, "assess") == "done"
                && view["data"]["steps"]["assess"]["summary"]
                    == submitted["data"]["data"]["steps"]["assess"]["summary"],
            rule,
            || {
                format!(
                    "the accepted submission of {run} is not what get_run shows: {}",
                    view["data"]
                )
            },
        )?;
    }
    Ok(())
}

// ------------------------------------------------------------------ escalations

fn defect_inputs(ctx: &Context, n: usize) -> Value {
    json!({ "reportId": format!("BUG-{}-{n}", ctx.tag) })
}

async fn escalation_paths(ctx: &Context) -> Checked {
    ctx.needs_tool("renew")?;
    ctx.needs("defect-triage")?;
    let rule = "tools.md escalate, decide: an escalated agent step waits on a work item; returned goes back to agents with the note; completed finishes it";
    let run = start(ctx, &ctx.agent, "defect-triage", defect_inputs(ctx, 1)).await?;
    let claimed = claim(&ctx.agent, &run, "triage").await?;
    let view = ok(
        &ctx.agent,
        "escalate",
        json!({ "token": claimed["token"], "note": "The logs are missing.", "requestId": request_id() }),
    )
    .await?;
    ensure(step_state(&view, "triage") == "waiting", rule, || {
        format!("{}", view["steps"])
    })?;
    let item = view["workItems"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["stepId"] == "triage")
        .cloned()
        .unwrap_or_default();
    ensure(
        item["escalation"]["note"] == "The logs are missing."
            && item["decide"]["decisions"] == json!(["returned", "completed", "failed"]),
        rule,
        || format!("{item}"),
    )?;
    refused(
        &ctx.agent,
        "renew",
        json!({ "token": claimed["token"], "requestId": request_id() }),
        "stale",
        None,
        "tools.md escalate: the token is invalid afterwards",
    )
    .await?;

    decide(
        &ctx.operator,
        &run,
        "triage",
        "returned",
        json!({ "note": "Logs are attached now." }),
    )
    .await?;
    let item = agent_item(&ctx.agent, "defect-triage", &run, "triage")
        .await?
        .ok_or_else(|| fail(rule, "the returned step is not offered to agents"))?;
    ensure(
        item["handoff"]["returned"]["note"] == "Logs are attached now.",
        rule,
        || format!("{item}"),
    )?;
    let claimed = claim(&ctx.agent, &run, "triage").await?;
    ensure(
        claimed["handoff"]["returned"]["note"] == "Logs are attached now.",
        rule,
        || format!("{claimed}"),
    )?;
    ok(
        &ctx.agent,
        "escalate",
        json!({ "token": claimed["token"], "note": "Still stuck.", "requestId": request_id() }),
    )
    .await?;
    let view = decide(
        &ctx.operator,
        &run,
        "triage",
        "completed",
        json!({ "output": { "findings": "Login loop on SSO.", "workaround": "None." }, "evidence": link("https://bugs.test/1"),
                "next": "qa_reproduce", "reason": "Not in the runbook.", "summary": "Completed for the agent." }),
    )
    .await?;
    ensure(
        step_state(&view, "triage") == "done" && step_state(&view, "qa_reproduce") == "waiting",
        rule,
        || format!("{}", view["steps"]),
    )?;

    let fail_rule =
        "tools.md decide failed: ends the run failed, the step marked failed, the note in run data";
    let view = decide(
        &ctx.person,
        &run,
        "qa_reproduce",
        "failed",
        json!({ "note": "Cannot reproduce on any build." }),
    )
    .await?;
    ended_with(&view, "failed", fail_rule)?;
    ensure(
        step_state(&view, "qa_reproduce") == "failed"
            && view["run"]["ended"]["note"] == "Cannot reproduce on any build.",
        fail_rule,
        || format!("{view}"),
    )
}

async fn forbidden(ctx: &Context) -> Checked {
    ctx.needs_tool("send_event")?;
    ctx.needs("purchase-request")?;
    let rule =
        "tools.md decide, cancel: forbidden for a non-human identity or a person outside the assignment";
    let run = start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 60)).await?;
    do_agent_step(&ctx.agent, &run, "assess", assess_output("budget_approval")).await?;
    let item = work_item(&ctx.person, &run, "budget_approval").await?;
    let mut arguments = item["decide"]["arguments"].clone();
    arguments["requestId"] = json!(request_id());
    arguments["decision"] = json!("approved");
    refused(&ctx.agent, "decide", arguments.clone(), "forbidden", None, rule).await?;
    arguments["requestId"] = json!(request_id());
    refused(&ctx.outsider, "decide", arguments, "forbidden", None, rule).await?;
    refused(
        &ctx.agent,
        "cancel",
        json!({ "runId": run, "reason": "r", "requestId": request_id() }),
        "forbidden",
        None,
        rule,
    )
    .await?;
    refused(
        &ctx.person,
        "send_event",
        json!({ "runId": run, "name": "x", "requestId": request_id() }),
        "forbidden",
        None,
        "tools.md send_event: from an agent or an operator; forbidden otherwise",
    )
    .await?;
    let view = get_run(&ctx.agent, &run).await?;
    ensure(step_state(&view, "budget_approval") == "waiting", rule, || {
        format!("a refused call changed the run: {}", view["steps"])
    })?;

    // An approval assigned by a person input is the named person's alone.
    let mut inputs = purchase_inputs(ctx, 61);
    inputs["approver"] = json!(ctx.outsider_email);
    let run = start(ctx, &ctx.agent, "purchase-request", inputs).await?;
    do_agent_step(&ctx.agent, &run, "assess", assess_output("team_lead_approval")).await?;
    let item = work_item(&ctx.outsider, &run, "team_lead_approval").await?;
    ensure(
        item["assignedTo"] == json!({ "person": ctx.outsider_email }),
        "tools.md run view: assignedTo is { person } for a person path",
        || format!("{item}"),
    )?;
    let mut arguments = item["decide"]["arguments"].clone();
    arguments["requestId"] = json!(request_id());
    arguments["decision"] = json!("approved");
    refused(&ctx.person, "decide", arguments.clone(), "forbidden", None, rule).await?;
    arguments["requestId"] = json!(request_id());
    ok(&ctx.outsider, "decide", arguments).await?;
    Ok(())
}

async fn other_organization(ctx: &Context) -> Checked {
    let Some(foreign) = &ctx.foreign_agent else {
        return Err(Stop::NotRun(
            "no agent of another organization was given (--foreign-agent-token)".to_owned(),
        ));
    };
    ctx.needs("purchase-request")?;
    let rule = "spec: an organization's runs do not exist for another organization: not_found";
    let run = start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 70)).await?;
    refused(
        foreign,
        "get_run",
        json!({ "runId": run }),
        "not_found",
        None,
        rule,
    )
    .await?;
    refused(
        foreign,
        "claim",
        json!({ "runId": run, "stepId": "assess", "requestId": request_id() }),
        "not_found",
        None,
        rule,
    )
    .await?;
    ensure(
        agent_item(foreign, "purchase-request", &run, "assess")
            .await?
            .is_none(),
        rule,
        || "another organization's agent is offered the step".to_owned(),
    )
}

async fn decide_error_order(ctx: &Context) -> Checked {
    ctx.needs("purchase-request")?;
    let rule = "tools.md decide: run_ended, then already_decided, then not_found, then stale snapshot";
    let run = start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 80)).await?;
    do_agent_step(&ctx.agent, &run, "assess", assess_output("budget_approval")).await?;
    let item = work_item(&ctx.person, &run, "budget_approval").await?;
    let arguments = |work_item: &Value, snapshot: &Value| json!({ "runId": run, "workItemId": work_item, "snapshot": snapshot, "decision": "approved", "requestId": request_id() });
    let id = item["id"].clone();
    let snapshot = item["decide"]["arguments"]["snapshot"].clone();
    refused(
        &ctx.person,
        "decide",
        arguments(&json!("w_does_not_exist"), &json!("0000")),
        "not_found",
        None,
        rule,
    )
    .await?;
    refused(
        &ctx.person,
        "decide",
        arguments(&id, &json!("0000")),
        "stale",
        None,
        rule,
    )
    .await?;
    ok(&ctx.person, "decide", arguments(&id, &snapshot)).await?;
    refused(
        &ctx.person,
        "decide",
        arguments(&id, &json!("0000")),
        "conflict",
        Some(&["already_decided"]),
        rule,
    )
    .await?;
    ok(
        &ctx.operator,
        "cancel",
        json!({ "runId": run, "reason": "Order error check.", "requestId": request_id() }),
    )
    .await?;
    refused(
        &ctx.person,
        "decide",
        arguments(&json!("w_does_not_exist"), &json!("0000")),
        "conflict",
        Some(&["run_ended"]),
        rule,
    )
    .await?;
    Ok(())
}

async fn cancel(ctx: &Context) -> Checked {
    ctx.needs_tool("send_event")?;
    ctx.needs("purchase-request")?;
    let rule = "tools.md cancel: state cancelled, run.ended { by, at, note: reason }; on an ended run conflict run_ended";
    let run = start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 90)).await?;
    let claimed = claim(&ctx.agent, &run, "assess").await?;
    let view = ok(
        &ctx.operator,
        "cancel",
        json!({ "runId": run, "reason": "Duplicate request.", "requestId": request_id() }),
    )
    .await?;
    ensure(
        view["run"]["state"] == "cancelled"
            && view["run"]["ended"]["note"] == "Duplicate request."
            && view["run"]["ended"]["at"].is_string(),
        rule,
        || format!("{}", view["run"]),
    )?;
    let ended = Some(&["run_ended"][..]);
    refused(
        &ctx.operator,
        "cancel",
        json!({ "runId": run, "reason": "Again.", "requestId": request_id() }),
        "conflict",
        ended,
        rule,
    )
    .await?;
    let mut body = json!({ "token": claimed["token"], "requestId": request_id(), "summary": "S" });
    merge(&mut body, assess_output("team_lead_approval"));
    refused(
        &ctx.agent,
        "submit",
        body,
        "conflict",
        ended,
        "tools.md submit: run_ended is checked before anything else",
    )
    .await?;
    refused(
        &ctx.agent,
        "send_event",
        json!({ "runId": run, "name": "anything", "requestId": request_id() }),
        "conflict",
        ended,
        "tools.md send_event: on an ended run conflict run_ended",
    )
    .await?;
    Ok(())
}

// ------------------------------------------------------------------ events, files, modes, lists

fn closure_inputs(ctx: &Context, n: usize, close_at: &str) -> Value {
    json!({ "accountId": format!("ACC-{}-{n}", ctx.tag), "closeAt": close_at })
}

/// Starts an account closure whose closing time has passed and takes it to `final_statement`.
async fn closure_at_final_statement(ctx: &Context, n: usize) -> Checked<String> {
    let run = start(
        ctx,
        &ctx.agent,
        "account-closure",
        closure_inputs(ctx, n, "2020-01-01T00:00:00Z"),
    )
    .await?;
    decide(&ctx.person, &run, "confirm_request", "approved", json!({})).await?;
    eventually_state(
        &ctx.agent,
        &run,
        "stop_billing",
        "ready",
        "spec §3.6: a wait_until whose time has passed continues at once",
    )
    .await?;
    do_agent_step(
        &ctx.agent,
        &run,
        "stop_billing",
        json!({ "output": { "stoppedItems": ["sub_1"] }, "evidence": link("https://billing.test/1") }),
    )
    .await?;
    Ok(run)
}

async fn events(ctx: &Context) -> Checked {
    ctx.needs("account-closure")?;
    let rule = "tools.md send_event: consumedBy names the wait that took it, or null when held; held events are consumed when their wait is ready";
    let run = closure_at_final_statement(ctx, 1).await?;
    let held = ok(&ctx.agent, "send_event", json!({ "runId": run, "name": "statement-paid", "data": { "paymentId": "pay_1" }, "requestId": request_id() })).await?;
    ensure(held["consumedBy"].is_null(), rule, || format!("{held}"))?;
    let view = do_agent_step(
        &ctx.agent,
        &run,
        "final_statement",
        json!({ "output": { "statementId": "ST-1", "amountDue": 40, "currency": "EUR" }, "evidence": link("https://billing.test/st"),
                "next": "payment_event", "reason": "An amount is due." }),
    )
    .await?;
    ensure(
        step_state(&view, "payment_event") == "done" && step_state(&view, "check_payment") == "ready",
        rule,
        || format!("the held event was not consumed: {}", view["steps"]),
    )?;
    ensure(
        view["data"]["steps"]["payment_event"]["output"] == json!({ "paymentId": "pay_1" }),
        "tools.md run view: a wait_for step's output is the event data",
        || format!("{}", view["data"]["steps"]),
    )?;

    let run = closure_at_final_statement(ctx, 2).await?;
    do_agent_step(
        &ctx.agent,
        &run,
        "final_statement",
        json!({ "output": { "statementId": "ST-2", "amountDue": 40, "currency": "EUR" }, "evidence": link("https://billing.test/st"),
                "next": "payment_event", "reason": "An amount is due." }),
    )
    .await?;
    expect_state(&ctx.agent, &run, "payment_event", json!("waiting"), rule).await?;
    let unrelated = ok(
        &ctx.agent,
        "send_event",
        json!({ "runId": run, "name": "something-else", "requestId": request_id() }),
    )
    .await?;
    ensure(unrelated["consumedBy"].is_null(), rule, || format!("{unrelated}"))?;
    let consumed = ok(&ctx.operator, "send_event", json!({ "runId": run, "name": "statement-paid", "data": { "paymentId": "pay_2" }, "requestId": request_id() })).await?;
    ensure(consumed["consumedBy"] == "payment_event", rule, || {
        format!("{consumed}")
    })?;
    expect_state(&ctx.agent, &run, "check_payment", json!("ready"), rule).await?;
    Ok(())
}

async fn uploads(ctx: &Context) -> Checked {
    ctx.needs_tool("upload")?;
    ctx.needs("policy-update")?;
    let rule = "tools.md upload and evidence: a file's id is evidence; run data adds sha256 and url; an unknown file is not accepted";
    let uploaded = upload(&ctx.person, "draft.pdf").await?;
    ensure(
        uploaded["id"].is_string()
            && uploaded["sha256"].as_str().is_some_and(|s| s.len() == 64)
            && uploaded["bytes"].as_u64().is_some(),
        rule,
        || format!("{uploaded}"),
    )?;
    let run = start(ctx, &ctx.person, "policy-update", policy_inputs(ctx, 2)).await?;
    let answer = decide_call(
        &ctx.person,
        &run,
        "write_draft",
        "completed",
        json!({ "output": { "version": "v1", "changeSummary": "c" }, "evidence": [{ "kind": "file", "ref": "f_does_not_exist" }] }),
    )
    .await?;
    ensure(
        answer["ok"] == false && answer["error"]["code"] == "not_accepted",
        rule,
        || format!("{answer}"),
    )?;
    let answer = decide_call(&ctx.person, &run, "write_draft", "completed", json!({ "output": { "version": "v1", "changeSummary": "c" }, "evidence": link("https://docs.test/v1") })).await?;
    ensure(
        answer["ok"] == false && answer["error"]["code"] == "not_accepted",
        "tools.md submit: evidence: file required",
        || format!("{answer}"),
    )?;
    let view = decide(
        &ctx.person,
        &run,
        "write_draft",
        "completed",
        json!({ "output": { "version": "v1", "changeSummary": "c" }, "evidence": [{ "kind": "file", "ref": uploaded["id"] }] }),
    )
    .await?;
    let evidence = &view["data"]["steps"]["write_draft"]["evidence"][0];
    ensure(
        evidence["ref"] == uploaded["id"]
            && evidence["sha256"] == uploaded["sha256"]
            && evidence["url"].is_string(),
        rule,
        || format!("{evidence}"),
    )
}

async fn test_mode(ctx: &Context) -> Checked {
    ctx.needs("purchase-request")?;
    let rule = "tools.md: in mode test, the run, every work item and get_work item carry mode test";
    let view = start_test(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 200)).await?;
    let run = run_id(&view);
    ensure(view["run"]["mode"] == "test", rule, || format!("{}", view["run"]))?;
    let item = agent_item(&ctx.agent, "purchase-request", &run, "assess")
        .await?
        .ok_or_else(|| fail(rule, "the test run's step is not offered"))?;
    ensure(item["mode"] == "test", rule, || format!("{item}"))?;
    let claimed = claim(&ctx.agent, &run, "assess").await?;
    ensure(claimed["mode"] == "test", rule, || format!("{claimed}"))?;
    submit(&ctx.agent, &claimed["token"], assess_output("budget_approval")).await?;
    let item = work_item(&ctx.person, &run, "budget_approval").await?;
    ensure(item["mode"] == "test", rule, || format!("{item}"))
}

async fn list_runs(ctx: &Context) -> Checked {
    ctx.needs_tool("list_runs")?;
    ctx.needs("venue-booking")?;
    let rule = "tools.md list_runs: process, state and inputs (equality of the given fields) filter; limit and cursor page";
    let needs = format!("needs-{}", ctx.tag);
    let mut runs = Vec::new();
    for n in 0..3 {
        let inputs = json!({ "eventId": format!("EV-{}-{n}", ctx.tag), "needs": needs, "venueOne": "A", "venueTwo": "B", "venueThree": "C" });
        runs.push(start(ctx, &ctx.person, "venue-booking", inputs).await?);
    }
    let one = ok(
        &ctx.person,
        "list_runs",
        json!({ "process": "venue-booking", "inputs": { "eventId": format!("EV-{}-1", ctx.tag) } }),
    )
    .await?;
    let ids: Vec<&Value> = one["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| &i["id"])
        .collect();
    ensure(ids == [&json!(runs[1])], rule, || format!("{one}"))?;
    ensure(
        one["items"][0]["inputs"]["needs"] == needs.as_str() && one["items"][0]["state"] == "waiting",
        rule,
        || format!("{one}"),
    )?;

    let mut cursor = Value::Null;
    let mut paged = Vec::new();
    for _ in 0..10 {
        let mut arguments = json!({ "process": "venue-booking", "inputs": { "needs": needs }, "limit": 1 });
        if !cursor.is_null() {
            arguments["cursor"] = cursor.clone();
        }
        let page = ok(&ctx.person, "list_runs", arguments).await?;
        ensure(
            page["items"].as_array().is_some_and(|i| i.len() <= 1),
            rule,
            || format!("limit 1: {page}"),
        )?;
        paged.extend(
            page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| i["id"].as_str().map(str::to_owned)),
        );
        cursor = page["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    let mut expected = runs.clone();
    expected.sort();
    paged.sort();
    ensure(paged == expected, rule, || {
        format!("paging gave {paged:?}, expected {expected:?}")
    })?;

    ok(
        &ctx.operator,
        "cancel",
        json!({ "runId": runs[2], "reason": "Event moved.", "requestId": request_id() }),
    )
    .await?;
    let cancelled = ok(
        &ctx.person,
        "list_runs",
        json!({ "process": "venue-booking", "state": "cancelled", "inputs": { "needs": needs } }),
    )
    .await?;
    let ids: Vec<&Value> = cancelled["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| &i["id"])
        .collect();
    ensure(ids == [&json!(runs[2])], rule, || format!("{cancelled}"))
}

// ------------------------------------------------------------------ time

fn release_inputs(ctx: &Context, n: usize, release_at: &str) -> Value {
    json!({ "changes": "Faster search.", "version": format!("{}.{n}", ctx.tag), "releaseAt": release_at })
}

async fn lease_expiry(ctx: &Context) -> Checked {
    ctx.needs_tool("renew")?;
    ctx.needs("release-notes")?;
    let clock = ctx.needs_clock()?;
    let rule = "tools.md renew, get_work: after a lease expires the step is ready again, its progress in handoff; the old token is stale";
    let lease = ctx.describe["leaseSeconds"].as_u64().unwrap_or(600);
    let run = start(
        ctx,
        &ctx.agent,
        "release-notes",
        release_inputs(ctx, 1, "2020-01-01T00:00:00Z"),
    )
    .await?;
    let claimed = claim(&ctx.agent, &run, "write_notes").await?;
    let renewed = ok(&ctx.agent, "renew", json!({ "token": claimed["token"], "progress": "Two of five changes written.", "requestId": request_id() })).await?;
    clock.advance(lease + 1).await.map_err(|e| fail(rule, e))?;
    let mut item = None;
    for _ in 0..50 {
        item = agent_item(&ctx.second_agent, "release-notes", &run, "write_notes").await?;
        if item.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let item = item.ok_or_else(|| fail(rule, "the step is not offered again after its lease"))?;
    ensure(
        item["handoff"]["progress"] == "Two of five changes written.",
        rule,
        || format!("{item}"),
    )?;
    let claimed_again = claim(&ctx.second_agent, &run, "write_notes").await?;
    ensure(
        claimed_again["handoff"]["progress"] == "Two of five changes written.",
        rule,
        || format!("{claimed_again}"),
    )?;
    refused(
        &ctx.agent,
        "renew",
        json!({ "token": renewed["token"], "requestId": request_id() }),
        "stale",
        None,
        rule,
    )
    .await?;
    Ok(())
}

async fn due_and_overdue(ctx: &Context) -> Checked {
    ctx.needs("purchase-request")?;
    let clock = ctx.needs_clock()?;
    let rule = "spec: a step with due has a due time; past it, overdue is true and the item stays open";
    let run = start(ctx, &ctx.agent, "purchase-request", purchase_inputs(ctx, 300)).await?;
    let view = do_agent_step(&ctx.agent, &run, "assess", assess_output("budget_approval")).await?;
    let entry = step_entry(&view, "budget_approval");
    ensure(
        entry["due"].is_string() && entry["overdue"] == false,
        rule,
        || format!("{entry}"),
    )?;
    clock.advance(2 * 86_400 + 60).await.map_err(|e| fail(rule, e))?;
    let mut overdue = Value::Null;
    for _ in 0..50 {
        let view = get_run(&ctx.agent, &run).await?;
        overdue = step_entry(&view, "budget_approval").clone();
        if overdue["overdue"] == true {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    ensure(
        overdue["overdue"] == true && overdue["state"] == "waiting",
        rule,
        || format!("{overdue}"),
    )?;
    let item = work_item(&ctx.person, &run, "budget_approval").await?;
    ensure(item["due"] == overdue["due"], rule, || format!("{item}"))
}

async fn wait_until(ctx: &Context) -> Checked {
    ctx.needs("release-notes")?;
    let clock = ctx.needs_clock()?;
    let rule = "spec §2.2: wait_until holds the run until the datetime it names";
    let now = clock.advance(0).await.map_err(|e| fail(rule, e))?;
    let later = humantime::parse_rfc3339_weak(&now)
        .map(|t| humantime::format_rfc3339_seconds(t + std::time::Duration::from_secs(3_600)).to_string())
        .map_err(|e| fail(rule, format!("the server's time {now} is not RFC 3339: {e}")))?;
    let run = start(ctx, &ctx.agent, "release-notes", release_inputs(ctx, 2, &later)).await?;
    do_agent_step(&ctx.agent, &run, "write_notes", json!({ "output": { "draftRef": "d1", "headline": "h", "highlights": "x" }, "evidence": link("https://docs.test/d1") })).await?;
    decide(&ctx.person, &run, "product_review", "approved", json!({})).await?;
    expect_state(&ctx.agent, &run, "release_time", json!("waiting"), rule).await?;
    clock.advance(3_500).await.map_err(|e| fail(rule, e))?;
    expect_state(&ctx.agent, &run, "release_time", json!("waiting"), rule).await?;
    clock.advance(101).await.map_err(|e| fail(rule, e))?;
    eventually_state(&ctx.agent, &run, "post_notes", "ready", rule).await
}

async fn wait(ctx: &Context) -> Checked {
    ctx.needs("refund-request")?;
    let clock = ctx.needs_clock()?;
    let rule = "spec §2.2: wait holds the run for its duration";
    let inputs = json!({ "orderId": format!("O-{}", ctx.tag), "requestedUsd": 80, "channel": "web", "expedite": false,
                         "customer": { "name": "Ana" }, "lineItems": ["mug"] });
    let run = start(ctx, &ctx.agent, "refund-request", inputs).await?;
    expect_state(&ctx.agent, &run, "grace_period", json!("waiting"), rule).await?;
    clock.advance(14 * 60).await.map_err(|e| fail(rule, e))?;
    expect_state(&ctx.agent, &run, "grace_period", json!("waiting"), rule).await?;
    clock.advance(61).await.map_err(|e| fail(rule, e))?;
    eventually_state(&ctx.agent, &run, "review_order", "ready", rule).await
}

/// Waits (briefly) for `step` of `run` to reach `state`: timers fire just after the clock moves.
async fn eventually_state(client: &Client, run: &str, step: &str, state: &str, rule: &str) -> Checked {
    let mut view = Value::Null;
    for _ in 0..50 {
        view = get_run(client, run).await?;
        if step_state(&view, step) == state {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(fail(
        rule,
        format!("{step} of {run} did not become {state}: {}", view["steps"]),
    ))
}

async fn wait_for_timeout(ctx: &Context) -> Checked {
    ctx.needs("account-closure")?;
    let clock = ctx.needs_clock()?;
    let rule = "spec §3.6: a wait_for not satisfied within its timeout continues at on_timeout";
    let run = closure_at_final_statement(ctx, 3).await?;
    do_agent_step(
        &ctx.agent,
        &run,
        "final_statement",
        json!({ "output": { "statementId": "ST-3", "amountDue": 40, "currency": "EUR" }, "evidence": link("https://billing.test/st"),
                "next": "payment_event", "reason": "An amount is due." }),
    )
    .await?;
    clock.advance(30 * 86_400 + 60).await.map_err(|e| fail(rule, e))?;
    eventually_state(&ctx.agent, &run, "collections", "waiting", rule).await
}

// ------------------------------------------------------------------ profiles

async fn parallel(ctx: &Context) -> Checked {
    if !ctx.offers("parallel-1") {
        return Err(Stop::NotRun("describe does not offer parallel-1".to_owned()));
    }
    ctx.needs("product-launch")?;
    let rule = "parallel-1: every branch is ready at once; the join waits for all; on_reject into the parallel step reworks every branch";
    let branches = ["engineering_ready", "marketing_ready", "support_ready"];
    let run = start(
        ctx,
        &ctx.agent,
        "product-launch",
        json!({ "launchId": format!("L-{}", ctx.tag), "launchLead": ctx.person_email }),
    )
    .await?;
    let view = do_agent_step(
        &ctx.agent,
        &run,
        "kickoff",
        json!({ "output": { "plan": "https://plans.test/1" } }),
    )
    .await?;
    for branch in branches {
        ensure(step_state(&view, branch) == "waiting", rule, || {
            format!("{branch}: {}", view["steps"])
        })?;
    }
    for round in 0..2 {
        for (i, branch) in branches.iter().enumerate() {
            let field = ["engineeringNote", "marketingNote", "supportNote"][i];
            let view = decide(&ctx.person, &run, branch, "completed", json!({ "output": { field: format!("Ready, round {round}.") }, "evidence": link("https://launch.test/ok") })).await?;
            let expected = if i + 1 == branches.len() {
                json!("waiting")
            } else {
                Value::Null
            };
            ensure(step_state(&view, "go_decision") == &expected, rule, || {
                format!("after {branch}, go_decision: {}", view["steps"])
            })?;
        }
        if round == 0 {
            let view = decide(
                &ctx.person,
                &run,
                "go_decision",
                "rejected",
                json!({ "note": "Support articles are missing." }),
            )
            .await?;
            for branch in branches {
                ensure(step_state(&view, branch) == "waiting", rule, || {
                    format!("rework of {branch}: {}", view["steps"])
                })?;
            }
        }
    }
    let view = decide(&ctx.person, &run, "go_decision", "approved", json!({})).await?;
    ended_with(&view, "launched", rule)?;
    let history = view["data"]["steps"]["support_ready"]["history"]
        .as_array()
        .map(Vec::len);
    ensure(history == Some(1), rule, || {
        format!(
            "the first round is kept in history: {}",
            view["data"]["steps"]["support_ready"]
        )
    })
}

async fn rework_inside_a_branch(ctx: &Context) -> Checked {
    if !ctx.offers("parallel-1") {
        return Err(Stop::NotRun("describe does not offer parallel-1".to_owned()));
    }
    ctx.needs("office-opening")?;
    let rule = "parallel-1: on_reject inside a branch returns within that branch; the other branch stays done and the join waits";
    let run = start(
        ctx,
        &ctx.agent,
        "office-opening",
        json!({ "officeId": format!("OF-{}", ctx.tag), "officeManager": ctx.person_email }),
    )
    .await?;
    do_agent_step(
        &ctx.agent,
        &run,
        "plan",
        json!({ "output": { "planRef": "https://plans.test/office" } }),
    )
    .await?;
    let completed = |field: &str, text: &str| json!({ "output": { field: text }, "evidence": link("https://office.test/report") });
    decide(
        &ctx.person,
        &run,
        "network_setup",
        "completed",
        completed("networkReport", "First install."),
    )
    .await?;
    let view = decide(
        &ctx.person,
        &run,
        "furniture",
        "completed",
        completed("deliveryNote", "All delivered."),
    )
    .await?;
    ensure(
        step_state(&view, "network_signoff") == "waiting" && step_state(&view, "open_office").is_null(),
        rule,
        || format!("{}", view["steps"]),
    )?;
    let view = decide(
        &ctx.person,
        &run,
        "network_signoff",
        "rejected",
        json!({ "note": "The scan failed on the guest network." }),
    )
    .await?;
    ensure(
        step_state(&view, "network_setup") == "waiting"
            && step_state(&view, "furniture") == "done"
            && step_state(&view, "open_office").is_null(),
        rule,
        || format!("after the rejection: {}", view["steps"]),
    )?;
    decide(
        &ctx.person,
        &run,
        "network_setup",
        "completed",
        completed("networkReport", "Guest network fixed."),
    )
    .await?;
    let view = decide(&ctx.person, &run, "network_signoff", "approved", json!({})).await?;
    ensure(step_state(&view, "open_office") == "waiting", rule, || {
        format!("the join: {}", view["steps"])
    })?;
    let view = decide(&ctx.person, &run, "open_office", "approved", json!({})).await?;
    ended_with(&view, "opened", rule)?;
    let steps = &view["data"]["steps"];
    ensure(
        steps["network_setup"]["output"]["networkReport"] == "Guest network fixed."
            && steps["network_setup"]["history"].as_array().map(Vec::len) == Some(1)
            && steps["furniture"]["history"].as_array().is_none_or(Vec::is_empty),
        "spec §3.1: the reworked branch step keeps its first completion in history; the other branch has none",
        || format!("{steps}"),
    )
}

async fn checked_step(ctx: &Context) -> Checked {
    if !ctx.offers("check-1") {
        return Err(Stop::NotRun("describe does not offer check-1".to_owned()));
    }
    ctx.needs("partner-screening")?;
    let rule = "check-1: a checked submission is accepted (done, or waiting on a person with the verdict) or sent back with the verdict in handoff.check";
    let run = start(
        ctx,
        &ctx.agent,
        "partner-screening",
        json!({ "partnerName": format!("Partner {}", ctx.tag), "dealSize": 250000 }),
    )
    .await?;
    let claimed = claim(&ctx.agent, &run, "screen_partner").await?;
    let report = upload(&ctx.agent, "screening.pdf").await?;
    let arguments = json!({ "token": claimed["token"], "requestId": request_id(), "summary": "Searched both lists; no match.",
                                "output": { "cleared": true, "summary": "Cleared: no match on the sanctions or adverse-media list." },
                                "evidence": [{ "kind": "file", "ref": report["id"] }], "next": "partner_approval", "reason": "Cleared." });
    let answer = ctx.agent.call("submit", arguments.clone()).await?;
    if answer["ok"] == true {
        let view = &answer["data"];
        let state = step_state(view, "screen_partner");
        ensure(state == "done" || state == "waiting", rule, || {
            format!("{}", view["steps"])
        })?;
        if state == "waiting" {
            let item = view["workItems"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|w| w["stepId"] == "screen_partner")
                .cloned()
                .unwrap_or_default();
            ensure(
                item["escalation"]["check"].is_object() && item["escalation"]["candidate"].is_object(),
                rule,
                || format!("{item}"),
            )?;
        }
        Ok(())
    } else {
        ensure(answer["error"]["code"] == "not_accepted", rule, || {
            format!("{answer}")
        })?;
        let item = agent_item(&ctx.agent, "partner-screening", &run, "screen_partner")
            .await?
            .ok_or_else(|| fail(rule, "the bounced step is not offered again"))?;
        ensure(item["handoff"]["check"].is_object(), rule, || format!("{item}"))
    }
}

// ------------------------------------------------------------------ x-wait-1 (a profile of our server)

/// The process the wait check starts, whose agent steps no other check leaves ready.
const WAIT_PROCESS: &str = "audit-remediation";

/// `x-wait-1` (docs/profiles/wait.md): `waitSeconds` outside 1–20 is `invalid`; a first page that
/// holds nothing waits, and answers the step a start makes ready meanwhile; when nothing comes,
/// it answers an empty page once the wait is over.
async fn wait_for_work(ctx: &Context) -> Checked {
    if !ctx.offers("x-wait-1") {
        return Err(Stop::NotRun("describe does not offer x-wait-1".to_owned()));
    }
    ctx.needs(WAIT_PROCESS)?;
    let rule = "x-wait-1: get_work with waitSeconds waits for matching work, then answers the page";
    for wait in [json!(0), json!(21), json!(1.5)] {
        let error = refused(
            &ctx.second_agent,
            "get_work",
            json!({ "waitSeconds": wait }),
            "invalid",
            None,
            rule,
        )
        .await?;
        let named = error["issues"].as_array().is_some_and(|issues| {
            issues
                .iter()
                .any(|i| i.as_str().is_some_and(|i| i.starts_with("waitSeconds:")))
        });
        ensure(named, rule, || {
            format!("waitSeconds {wait}: the issues do not name waitSeconds: {error}")
        })?;
    }
    if !all_work(&ctx.second_agent, Some(WAIT_PROCESS)).await?.is_empty() {
        return Err(Stop::NotRun(format!(
            "{WAIT_PROCESS} has ready steps already (left by an earlier run?); the check needs none"
        )));
    }
    let empty_wait = json!({ "process": WAIT_PROCESS, "waitSeconds": 1 });
    let started = std::time::Instant::now();
    let page = ok(&ctx.second_agent, "get_work", empty_wait).await?;
    let waited = started.elapsed();
    ensure(
        page["items"] == json!([]) && waited >= std::time::Duration::from_millis(900),
        rule,
        || format!("with nothing ready, a 1 s wait answered after {waited:?}: {page}"),
    )?;

    let waiter = ctx.second_agent.clone();
    let waiting = tokio::spawn(async move {
        ok(
            &waiter,
            "get_work",
            json!({ "process": WAIT_PROCESS, "waitSeconds": 15 }),
        )
        .await
    });
    // The call is on its way and waiting before the run starts.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let inputs = json!({ "auditId": format!("AUD-{}", ctx.tag), "findingsOwner": ctx.person_email });
    let run = start(ctx, &ctx.agent, WAIT_PROCESS, inputs).await?;
    let answered = waiting.await;
    // Ended, so that nothing is left ready for the next runner.
    ok(
        &ctx.operator,
        "cancel",
        json!({ "runId": run, "reason": "conformance: the x-wait-1 check is done", "requestId": request_id() }),
    )
    .await?;
    let page = answered.map_err(|e| Stop::Failed(format!("the waiting call's task failed: {e}")))??;
    let heard = page["items"].as_array().is_some_and(|items| {
        items
            .iter()
            .any(|item| item["runId"] == run && item["stepId"] == "write_report")
    });
    ensure(heard, rule, || {
        format!("the waiting get_work answered {page}, not write_report of {run}, made ready while it waited")
    })
}
