//! The operators' overview page of the web console against `agentprocess serve`: runs of the
//! last day by process and state and per hour, the work waiting for agents and for people, and
//! the lease expiries and escalations of the last day, each figure checked against what the
//! protocol's tools say of the same runs (tools.md `list_runs`, `get_work`); then the page in a
//! real browser (`tests/python/ui_overview_browser.py`), charts and numbers alike.

mod common;

use common::browser::drive_browser_script;
use common::ui::*;
use common::{Mcp, Server, Who, request_id};
use reqwest::header::COOKIE;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const OPERATOR: &[(&str, &str)] = &[
    ("organization", "acme"),
    ("kind", "person"),
    ("email", "ops@acme.test"),
    ("groups", "ops"),
    ("operator", "on"),
];
const PERSON: &[(&str, &str)] = &[
    ("organization", "acme"),
    ("kind", "person"),
    ("email", "manager@acme.test"),
];

async fn claim(agent: &Mcp, run_id: &str, step: &str) -> Value {
    agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": step, "requestId": request_id() }),
        )
        .await
}

/// How many runs `list_runs` gives of `process` in `state`, over every page.
async fn listed(operator: &Mcp, process: &str, state: &str) -> usize {
    operator
        .listed_run_ids(json!({ "process": process, "state": state }))
        .await
        .0
        .len()
}

/// Five runs of two processes: a claim that lapses, an escalation, a cancelled run, a run
/// waiting on a person's approval and one whose first step nobody claimed. The overview must
/// count each where the tools put it.
#[tokio::test(flavor = "multi_thread")]
async fn the_overview_counts_what_the_tools_say() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(data.path(), &[], &[]);
    server.publish_example("defect-triage");
    server.publish_example("purchase-request");
    let agent = server.client(&Who::Agent("triager")).await;
    let operator = server.client(&Who::Operator("ops@acme.test", &["ops"])).await;
    let start = |process: &'static str, inputs: Value| {
        let agent = &agent;
        async move {
            let started = agent
                .ok(
                    "start_run",
                    json!({ "process": process, "inputs": inputs, "requestId": request_id() }),
                )
                .await;
            started["run"]["id"].as_str().unwrap().to_owned()
        }
    };
    let lapsed = start("defect-triage", json!({ "reportId": "D-1" })).await;
    let escalated = start("defect-triage", json!({ "reportId": "D-2" })).await;
    let cancelled = start("defect-triage", json!({ "reportId": "D-3" })).await;
    let approval = agent.start_purchase_request("PR-1").await["run"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let unclaimed = agent.start_purchase_request("PR-2").await["run"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A claim whose lease runs out: its step is ready again, and the run's history says why.
    claim(&agent, &lapsed, "triage").await;
    let claimed = claim(&agent, &escalated, "triage").await;
    agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": "cannot reproduce", "requestId": request_id() }),
        )
        .await;
    operator
        .ok(
            "cancel",
            json!({ "runId": cancelled, "reason": "a duplicate report", "requestId": request_id() }),
        )
        .await;
    let claimed = claim(&agent, &approval, "assess").await;
    agent
        .ok(
            "submit",
            json!({
                "token": claimed["token"],
                "output": { "amountUsd": 120.0, "vendor": "Acme Supplies", "justification": "Quote matches" },
                "evidence": [{ "kind": "link", "ref": "https://erp.test/match/1" }],
                "summary": "Assessed", "next": "team_lead_approval", "reason": "120 USD is under 5000",
                "requestId": request_id(),
            }),
        )
        .await;
    server.advance(3600).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let history = operator.ok("get_run", json!({ "runId": lapsed })).await;
        if history["steps"][0]["state"] == "ready" {
            break;
        }
        assert!(Instant::now() < deadline, "the claim did not lapse: {history}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = unclaimed;

    // What the tools say, for the page to match.
    let mut runs_by_state = serde_json::Map::new();
    for process in ["defect-triage", "purchase-request"] {
        let mut states = serde_json::Map::new();
        for state in ["active", "waiting", "ended", "cancelled"] {
            states.insert(state.into(), json!(listed(&operator, process, state).await));
        }
        runs_by_state.insert(process.into(), Value::Object(states));
    }
    assert_eq!(
        runs_by_state["defect-triage"]["cancelled"], 1,
        "{runs_by_state:?}"
    );
    let ready = agent.ok("get_work", json!({ "limit": 100 })).await;
    let ready_steps = ready["items"].as_array().unwrap().len();
    assert_eq!(
        ready_steps, 2,
        "the lapsed triage and the unclaimed assessment: {ready}"
    );
    let expected = json!({
        "runsByState": runs_by_state,
        "readySteps": ready_steps,
        "peoplesQueue": 2,
        "openEscalations": 1,
        "leaseExpiries": 1,
        "escalations": 1,
        "started": 5,
        "ended": 1,
    });

    // Over HTTP: operators only, and the page names each figure.
    let base = server.url.as_str();
    let person = cookie_pair(&dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui", PERSON).await);
    let refused = http()
        .get(format!("{base}/ui/overview"))
        .header(COOKIE, &person)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let ops = cookie_pair(&dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui", OPERATOR).await);
    let page = http()
        .get(format!("{base}/ui/overview"))
        .header(COOKIE, &ops)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains(r#"href="/ui/overview""#),
        "the operator's navigation links the overview"
    );
    for (state, count) in [("cancelled", 1), ("ended", 0)] {
        let drawn = html
            .matches(&format!(r#"data-state="{state}" data-count="{count}""#))
            .count();
        assert_eq!(drawn, usize::from(count > 0), "{state}: {html}");
    }

    let summary =
        drive_browser_script(&server, "ui_overview_browser.py", &[&expected.to_string()], &[]).await;
    assert_eq!(
        summary["pages"],
        json!(["overview", "overview-desktop"]),
        "{summary}"
    );
    for client in [agent, operator] {
        client.close().await;
    }
}

/// An overview that would read more run records than `metrics.overview_run_limit` reads that
/// many and says its counts are lower bounds.
#[tokio::test(flavor = "multi_thread")]
async fn an_overview_past_its_run_limit_says_its_counts_are_lower_bounds() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &[],
        &[("AGENTPROCESS_METRICS__OVERVIEW_RUN_LIMIT", "2")],
    );
    server.publish_example("defect-triage");
    let agent = server.client(&Who::Agent("triager")).await;
    for report in ["D-1", "D-2", "D-3"] {
        agent
            .ok(
                "start_run",
                json!({ "process": "defect-triage", "inputs": { "reportId": report }, "requestId": request_id() }),
            )
            .await;
    }
    agent.close().await;
    let base = server.url.as_str();
    let ops = cookie_pair(&dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui", OPERATOR).await);
    let html = http()
        .get(format!("{base}/ui/overview"))
        .header(COOKIE, &ops)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("the counts below are lower bounds"), "{html}");
    assert!(html.contains(r#"aria-label="defect-triage: 2 active""#), "{html}");
}
