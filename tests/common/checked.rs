//! Checked runs scripted over MCP: `screened-payment`, an agent's screening with an advisory
//! check (steered by the fake evaluator's markers) before an approval that can send it back.

use super::{Mcp, request_id};
use serde_json::json;

/// The process: `screen` (agent, advisory check), `sign_off` (approvers, `on_reject: screen`),
/// `done`.
pub const SCREENED_PAYMENT: &str = r#"---
name: screened-payment
description: An agent screens a payment with an advisory check; an approver signs it off.
inputs:
  payment: string
steps:
  - id: screen
    agent: Screen the payment against the policy and say whether it is cleared.
    output:
      cleared: boolean
    check:
      - ask: The cleared verdict follows from the policy.
        pass: 0.9
        fail: 0.5
    advisory: true
  - id: sign_off
    person: approvers
    approve: Sign the payment off when the screening is right.
    on_reject: screen
  - id: done
    finish: paid
---

# Screened payment

The check is advisory while it earns trust.
"#;

pub async fn start_run(agent: &Mcp, payment: &str) -> String {
    let started = agent
        .ok(
            "start_run",
            json!({ "process": "screened-payment", "inputs": { "payment": payment }, "requestId": request_id() }),
        )
        .await;
    started["run"]["id"].as_str().unwrap().to_owned()
}

/// Claims `screen` and submits, with `marker` in the summary to steer the fake evaluator
/// (`[check:fail]`, `[check:unsure]`, or nothing for a pass).
pub async fn screen(agent: &Mcp, run_id: &str, marker: &str) {
    let claimed = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "screen", "requestId": request_id() }),
        )
        .await;
    agent
        .ok(
            "submit",
            json!({ "token": claimed["token"], "output": { "cleared": true },
                    "summary": format!("Screened against the policy. {marker}"), "requestId": request_id() }),
        )
        .await;
}

/// The approver's decision on `sign_off`, as its work item hands the call out.
pub async fn sign_off(approver: &Mcp, run_id: &str, decision: &str, note: Option<&str>) {
    let work = approver.ok("get_work", json!({ "limit": 100 })).await;
    let item = work["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == run_id && item["workItem"]["stepId"] == "sign_off")
        .unwrap_or_else(|| panic!("no sign_off item for {run_id}: {work}"))
        .clone();
    let mut arguments = item["workItem"]["decide"]["arguments"].clone();
    arguments["decision"] = json!(decision);
    arguments["requestId"] = json!(request_id());
    if let Some(note) = note {
        arguments["note"] = json!(note);
    }
    approver.ok("decide", arguments).await;
}

/// The runs [`script_verdicts`] made, one per way a verdict can fare.
#[derive(Debug, Clone)]
pub struct ScriptedVerdicts {
    /// P-1: a pass approved (agreed).
    pub agreed: String,
    /// P-2: a fail rejected (agreed), reworked into a pass approved (agreed).
    pub reworked: String,
    /// P-3: a pass rejected (disagreed); the rework waits for the agent.
    pub rejected_pass: String,
    /// P-4: a fail approved (disagreed).
    pub approved_fail: String,
    /// P-5: an unsure verdict, then approved.
    pub unsure: String,
    /// P-6: a pass waiting on `sign_off` (undecided).
    pub waiting: String,
}

/// Six runs of `screened-payment` whose verdicts count, in the trust report, 3 agreed,
/// 2 disagreed, 1 unsure, 0 errors and 1 undecided.
pub async fn script_verdicts(agent: &Mcp, approver: &Mcp) -> ScriptedVerdicts {
    // A pass the approver approves: agreed.
    let agreed = start_run(agent, "P-1").await;
    screen(agent, &agreed, "").await;
    sign_off(approver, &agreed, "approved", None).await;
    // A fail the approver rejects (agreed), reworked into a pass the approver approves (agreed).
    let reworked = start_run(agent, "P-2").await;
    screen(agent, &reworked, "[check:fail]").await;
    sign_off(
        approver,
        &reworked,
        "rejected",
        Some("the policy reference is missing"),
    )
    .await;
    screen(agent, &reworked, "").await;
    sign_off(approver, &reworked, "approved", None).await;
    // A pass the approver rejects: disagreed; the rework waits.
    let rejected_pass = start_run(agent, "P-3").await;
    screen(agent, &rejected_pass, "").await;
    sign_off(
        approver,
        &rejected_pass,
        "rejected",
        Some("the amount is over the limit"),
    )
    .await;
    // A fail the approver approves: disagreed.
    let approved_fail = start_run(agent, "P-4").await;
    screen(agent, &approved_fail, "[check:fail]").await;
    sign_off(approver, &approved_fail, "approved", None).await;
    // An unsure verdict, and a pass no one has decided yet.
    let unsure = start_run(agent, "P-5").await;
    screen(agent, &unsure, "[check:unsure]").await;
    sign_off(approver, &unsure, "approved", None).await;
    let waiting = start_run(agent, "P-6").await;
    screen(agent, &waiting, "").await;

    ScriptedVerdicts {
        agreed,
        reworked,
        rejected_pass,
        approved_fail,
        unsure,
        waiting,
    }
}
