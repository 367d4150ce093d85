//! The inbox and the work item page of the web UI, over HTTP and in a real browser: a person's
//! open work as `get_work` gives it (spec tools.md `get_work`: oldest first; §2.2 `due` and
//! overdue; test runs marked), and the decisions `decide` takes from a person (tools.md
//! `decide`: `completed` with output and file evidence sent through `upload`, `approved`,
//! `rejected` with its note, `stale` when the snapshot is old, `returned` on an escalation).
//! The browser (Debian's chromium, Playwright in `target/py-venv`) and axe-core
//! (`target/ui-test-deps`) come from `scripts/install-deps.sh`.

mod common;

use common::browser::{browser_prerequisites, drive_browser_script};
use common::ui::*;
use common::{Mcp, Server, Who, request_id};
use reqwest::header::{CONTENT_TYPE, COOKIE};
use serde_json::{Value, json};
use std::time::Duration;

const AGENT: Who = Who::Agent("a_ap");
const ENGINEERING_LEAD: Who = Who::Person("eng-lead@acme.test", &["engineering-lead"]);
/// Mira's groups in the browser test: she reviews policies and leads marketing.
const MIRA_GROUPS: &str = "staff, compliance-reviewer, security-reviewer, marketing-lead";

/// A process whose description holds raw HTML, with one task for the group `staff`.
const HTML_BODY_PROCESS: &str = r#"---
name: html-body
description: A task whose process description holds raw HTML.
inputs:
  title: string
steps:
  - id: write
    person: staff
    task: Write the text for the title.
    output:
      text: string
  - id: done
    finish: written
---

# Written <b>bold</b>

<script>alert("body")</script>

<img src="x" onerror="alert(1)">
"#;

/// A multipart body of `fields` (and one file, when given): its content type and bytes, as a
/// browser sends a form with `enctype="multipart/form-data"`.
fn multipart(fields: &[(&str, &str)], file: Option<(&str, &[u8])>) -> (String, Vec<u8>) {
    let boundary = "----agentprocess-test-boundary";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    if let Some((file_name, bytes)) = file {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"evidence_files\"; \
                 filename=\"{file_name}\"\r\nContent-Type: text/plain\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// GET `path` with the session cookie `session`: status and body.
async fn get_page(base: &str, path: &str, session: &str) -> (u16, String) {
    let response = http()
        .get(format!("{base}{path}"))
        .header(COOKIE, session)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// POSTs a multipart form to `path` with the session cookie `session`.
async fn post_form(
    base: &str,
    path: &str,
    session: &str,
    fields: &[(&str, &str)],
    file: Option<(&str, &[u8])>,
) -> reqwest::Response {
    let (content_type, body) = multipart(fields, file);
    http()
        .post(format!("{base}{path}"))
        .header(COOKIE, session)
        .header(CONTENT_TYPE, content_type)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Signs `email` in (groups `groups`) on the dev form; returns the session's `Cookie` pair.
async fn session_of(base: &str, email: &str, groups: &str) -> String {
    let fields = [
        ("organization", "acme"),
        ("kind", "person"),
        ("email", email),
        ("groups", groups),
    ];
    cookie_pair(&dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui", &fields).await)
}

fn step_state(view: &Value, step: &str) -> Value {
    view["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == step)
        .map(|s| s["state"].clone())
        .unwrap_or(Value::Null)
}

/// Over plain HTTP: the inbox lists the task and links its page; the page shows the process
/// body with its raw HTML escaped; another person gets neither the item nor its page, and their
/// form is refused; a form without the session's CSRF token is refused; a form that is not
/// multipart gets a clear 400; the owner's completion reaches the run (tools.md `decide`).
#[tokio::test(flavor = "multi_thread")]
async fn the_work_page_escapes_the_body_keeps_others_out_and_wants_its_csrf_token() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let base = server.url.as_str();
    let process = data.path().join("html-body.md");
    std::fs::write(&process, HTML_BODY_PROCESS).unwrap();
    let (code, out, err) = server.import(&process, &[("staff", "staff")], true);
    assert_eq!(code, 0, "{out}\n{err}");
    let agent = server.client(&AGENT).await;
    let started = agent
        .ok(
            "start_run",
            json!({ "process": "html-body", "inputs": { "title": "T" }, "requestId": request_id() }),
        )
        .await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    let path = format!("/ui/work/{run_id}/write");

    let mira = session_of(base, MIRA, "staff").await;
    let (status, inbox) = get_page(base, "/ui", &mira).await;
    assert_eq!(status, 200);
    assert!(inbox.contains(&format!("href=\"{path}\"")), "{inbox}");
    assert!(inbox.contains("updates every 30 seconds"), "{inbox}");
    // It reloads itself every 30 seconds, unless the person turns that off.
    let refresh = |response: &reqwest::Response| {
        response
            .headers()
            .get("refresh")
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let live = http()
        .get(format!("{base}/ui"))
        .header(COOKIE, &mira)
        .send()
        .await
        .unwrap();
    assert_eq!(refresh(&live).as_deref(), Some("30"));
    let still = http()
        .get(format!("{base}/ui?updates=off"))
        .header(COOKIE, &mira)
        .send()
        .await
        .unwrap();
    assert_eq!(refresh(&still), None);
    assert!(still.text().await.unwrap().contains("Automatic updates are off"));

    let (status, page) = get_page(base, &path, &mira).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Write the text for the title."), "{page}");
    assert!(
        page.contains("<h3>Written &lt;b&gt;bold&lt;/b&gt;</h3>"),
        "{page}"
    );
    assert!(
        page.contains("&lt;script&gt;alert(\"body\")&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("<script"), "raw HTML passed through: {page}");
    assert!(!page.contains("<img"), "raw HTML passed through: {page}");
    let csrf = hidden(&page, "csrf");
    let snapshot = hidden(&page, "snapshot");
    let work_item_id = hidden(&page, "workItemId");

    // Another person: not in their inbox, no page, and their form changes nothing.
    let olga = session_of(base, "olga@acme.test", "finance").await;
    let (_, olga_inbox) = get_page(base, "/ui", &olga).await;
    assert!(!olga_inbox.contains(&run_id), "{olga_inbox}");
    assert!(olga_inbox.contains("Nothing is waiting for you"), "{olga_inbox}");
    let (status, refused) = get_page(base, &path, &olga).await;
    assert_eq!(status, 403);
    assert!(!refused.contains("Write the text"), "{refused}");
    let (_, olga_page) = get_page(base, "/ui", &olga).await;
    let olga_csrf = hidden(&olga_page, "csrf");
    let completion = |csrf: &str| {
        vec![
            ("csrf", csrf.to_owned()),
            ("workItemId", work_item_id.clone()),
            ("snapshot", snapshot.clone()),
            ("requestId", request_id()),
            ("decision", "completed".to_owned()),
            ("output.text", "Hello".to_owned()),
            ("summary", "Wrote it".to_owned()),
        ]
    };
    let as_pairs = |fields: &[(&str, String)]| -> Vec<(String, String)> {
        fields.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    };
    let send = |session: String, fields: Vec<(String, String)>| {
        let path = path.clone();
        async move {
            let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            post_form(base, &path, &session, &pairs, None).await
        }
    };
    let by_olga = send(olga.clone(), as_pairs(&completion(&olga_csrf))).await;
    assert_eq!(by_olga.status(), 403);

    // Without the CSRF token, or with another session's: refused before anything is read.
    let mut without = as_pairs(&completion(""));
    without.retain(|(k, _)| k != "csrf");
    assert_eq!(send(mira.clone(), without).await.status(), 403);
    let foreign = send(mira.clone(), as_pairs(&completion(&olga_csrf))).await;
    assert_eq!(foreign.status(), 403);
    assert!(foreign.text().await.unwrap().contains("cannot be accepted"));
    let urlencoded = http()
        .post(format!("{base}{path}"))
        .header(COOKIE, &mira)
        .form(&[("csrf", csrf.as_str()), ("decision", "completed")])
        .send()
        .await
        .unwrap();
    assert_eq!(urlencoded.status(), 400);
    assert!(urlencoded.text().await.unwrap().contains("multipart/form-data"));
    let view = agent.ok("get_run", json!({ "runId": run_id })).await;
    assert_eq!(step_state(&view, "write"), "waiting", "{view}");

    // The owner's form, with its token: done, and back to the inbox with a notice for this
    // session, once (a flash cookie the inbox clears).
    let done = send(mira.clone(), as_pairs(&completion(&csrf))).await;
    assert_eq!(done.status(), 303);
    assert_eq!(location(&done), "/ui");
    let flash = cookie_pair(&set_cookie(&done, "ap_flash").expect("a flash"));
    let view = agent.ok("get_run", json!({ "runId": run_id })).await;
    assert_eq!(
        view["data"]["steps"]["write"]["output"],
        json!({ "text": "Hello" })
    );
    assert_eq!(view["data"]["steps"]["write"]["by"], MIRA);
    let with_flash = |session: &str| format!("{session}; {flash}");
    let inbox = http()
        .get(format!("{base}/ui"))
        .header(COOKIE, with_flash(&mira))
        .send()
        .await
        .unwrap();
    let cleared = set_cookie(&inbox, "ap_flash").expect("the flash is cleared");
    assert!(
        cleared.starts_with("ap_flash=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    let notice = inbox.text().await.unwrap();
    assert!(
        notice.contains(&format!("Done: you completed write of run {run_id}.")),
        "{notice}"
    );
    let (_, reloaded) = get_page(base, "/ui", &mira).await;
    assert!(!reloaded.contains("Done: you"), "shown once: {reloaded}");
    // Neither a made-up query nor another session's flash says anything was decided.
    let (_, forged) = get_page(base, "/ui?done=rejected&run=r_fake&step=pay_everyone", &mira).await;
    assert!(
        !forged.contains("Done: you") && !forged.contains("pay_everyone"),
        "{forged}"
    );
    let (_, borrowed) = get_page(base, "/ui", &with_flash(&olga)).await;
    assert!(
        !borrowed.contains("Done: you"),
        "another session's flash: {borrowed}"
    );
    // The item is no longer open: its page says who completed it, and a form sent from the
    // page as it was before is not sent on (tools.md `decide`: `already_decided`).
    let (status, closed) = get_page(base, &path, &mira).await;
    assert_eq!(status, 200);
    assert!(
        closed.contains("no longer open") && closed.contains(MIRA),
        "{closed}"
    );
    assert!(!closed.contains("class=\"work-form\""), "{closed}");
    let again = send(mira.clone(), as_pairs(&completion(&csrf))).await;
    assert_eq!(again.status(), 200);
    let again = again.text().await.unwrap();
    assert!(again.contains("This item was decided already"), "{again}");
    assert!(
        again.contains("no longer open") && again.contains(MIRA),
        "{again}"
    );
    agent.close().await;
}

/// Starts `process` with `inputs` as the agent; returns the run id.
async fn start(agent: &Mcp, process: &str, inputs: Value, mode: &str) -> String {
    let started = agent
        .ok(
            "start_run",
            json!({ "process": process, "inputs": inputs, "mode": mode, "requestId": request_id() }),
        )
        .await;
    started["run"]["id"].as_str().unwrap().to_owned()
}

/// The agent claims `step` and submits `submission`.
async fn claim_and_submit(agent: &Mcp, run_id: &str, step: &str, mut submission: Value) -> Value {
    let claim = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": step, "requestId": request_id() }),
        )
        .await;
    submission["token"] = claim["token"].clone();
    submission["requestId"] = json!(request_id());
    agent.ok("submit", submission).await
}

/// A purchase request (in `mode`) whose `assess` is done, waiting on Mira's approval.
async fn purchase_waiting_for_mira(agent: &Mcp, mode: &str) -> String {
    let run_id = start(
        agent,
        "purchase-request",
        json!({ "requestId": "PR-UI", "quoteDocument": "https://docs.test/quote", "approver": MIRA }),
        mode,
    )
    .await;
    claim_and_submit(
        agent,
        &run_id,
        "assess",
        json!({
            "output": { "amountUsd": 120.0, "vendor": "Acme Supplies", "justification": "Quote matches the request" },
            "evidence": [{ "kind": "link", "ref": "https://erp.test/match/ui" }],
            "summary": "Assessed", "next": "team_lead_approval", "reason": "120 USD is under 5000",
        }),
    )
    .await;
    run_id
}

/// Every evidence item of a step's current record and its history.
fn evidence_of(view: &Value, step: &str) -> Vec<Value> {
    let entry = &view["data"]["steps"][step];
    let mut records = vec![entry.clone()];
    records.extend(entry["history"].as_array().cloned().unwrap_or_default());
    records
        .iter()
        .flat_map(|record| record["evidence"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// In a real browser at 375 px: Mira's inbox marks an overdue approval of a test run (§2.2 due,
/// tools.md mode `test`); she completes a task with a file uploaded as its evidence, approves,
/// rejects with a note (tools.md `decide`), and sends a completion whose snapshot went stale
/// meanwhile (parallel-1 §3: a sibling branch completed), which shows the fresh run and keeps
/// what she typed; an operator returns an escalated agent step with a note. Every page passes
/// axe-core (no serious or critical violation), has no sideways scroll and no console error.
/// The run data afterwards is read through MCP.
#[tokio::test(flavor = "multi_thread")]
async fn a_person_works_through_the_inbox_in_a_browser() {
    browser_prerequisites();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    for example in ["purchase-request", "policy-update", "product-launch"] {
        server.publish_example(example);
    }
    let agent = server.client(&AGENT).await;

    // An approval of a test run, overdue once the server's clock passes its 2 days.
    let overdue_run = purchase_waiting_for_mira(&agent, "test").await;
    server.advance(3 * 86_400).await;
    let mut overdue = false;
    for _ in 0..100 {
        let view = agent.ok("get_run", json!({ "runId": overdue_run })).await;
        let step = view["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "team_lead_approval")
            .cloned();
        if step.is_some_and(|s| s["overdue"] == true) {
            overdue = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        overdue,
        "team_lead_approval is overdue after the clock moved 3 days"
    );

    let policy_run = start(
        &agent,
        "policy-update",
        json!({ "policyId": "P-7", "draftDocument": "https://docs.test/p-7", "author": MIRA }),
        "live",
    )
    .await;
    let launch_run = start(
        &agent,
        "product-launch",
        json!({ "launchId": "L-UI", "launchLead": "lead@acme.test" }),
        "live",
    )
    .await;
    claim_and_submit(
        &agent,
        &launch_run,
        "kickoff",
        json!({ "output": { "plan": "plan-ui" }, "summary": "Plan page created, leads notified" }),
    )
    .await;
    let escalated_run = purchase_escalated(&agent).await;

    let plan = json!({
        "miraGroups": MIRA_GROUPS,
        "overdueRun": overdue_run,
        "policyRun": policy_run,
        "launchRun": launch_run,
        "escalatedRun": escalated_run,
        "engineeringLeadToken": server.token(&ENGINEERING_LEAD),
    });
    let summary = drive_browser_script(&server, "ui_work_browser.py", &[], &[&plan.to_string()]).await;
    assert_eq!(
        summary["pages"],
        json!([
            "inbox",
            "work-task",
            "work-task-errors",
            "inbox-after-task",
            "work-approval",
            "work-reject-errors",
            "work-stale",
            "inbox-after-stale",
            "inbox-operator",
            "work-escalation",
            "work-return-errors",
        ]),
        "{summary}"
    );

    // The file went through `upload` and is the task's evidence; the approvals are Mira's.
    let policy = agent.ok("get_run", json!({ "runId": policy_run })).await;
    let files: Vec<Value> = evidence_of(&policy, "write_draft")
        .into_iter()
        .filter(|item| item["kind"] == "file")
        .collect();
    assert_eq!(files.len(), 1, "{policy}");
    assert!(
        files[0]["sha256"].as_str().is_some_and(|s| s.len() == 64),
        "{policy}"
    );
    let steps = &policy["data"]["steps"];
    let compliance = std::iter::once(steps["compliance_review"].clone())
        .chain(
            steps["compliance_review"]["history"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        )
        .find(|record| record["decision"] == "approved");
    assert_eq!(compliance.unwrap()["by"], MIRA, "{policy}");
    assert_eq!(steps["security_review"]["decision"], "rejected", "{policy}");
    assert_eq!(
        steps["security_review"]["note"], "Require hardware keys for admins",
        "{policy}"
    );
    assert_eq!(
        step_state(&policy, "write_draft"),
        "waiting",
        "rejected back to write_draft: {policy}"
    );

    // The stale completion was sent again as typed, after the sibling's.
    let launch = agent.ok("get_run", json!({ "runId": launch_run })).await;
    let marketing = &launch["data"]["steps"]["marketing_ready"];
    assert_eq!(
        marketing["output"],
        json!({ "marketingNote": "Announcement scheduled for 9:00" }),
        "{launch}"
    );
    assert_eq!(marketing["by"], MIRA);
    assert_eq!(
        launch["data"]["steps"]["engineering_ready"]["by"],
        "eng-lead@acme.test"
    );

    // The operator's return reaches the agent as the step's handoff.
    let work = agent.ok("get_work", json!({})).await;
    let returned = work["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["runId"] == escalated_run.as_str() && item["stepId"] == "assess")
        .unwrap_or_else(|| panic!("assess is the agent's again: {work}"));
    assert_eq!(
        returned["handoff"]["returned"]["note"],
        "Use the treasury's USD rate"
    );
    assert_eq!(returned["handoff"]["returned"]["by"], "ops@acme.test");
    agent.close().await;
}

/// A purchase request whose `assess` the agent escalated: it waits on the operators.
async fn purchase_escalated(agent: &Mcp) -> String {
    let run_id = start(
        agent,
        "purchase-request",
        json!({ "requestId": "PR-EUR", "quoteDocument": "https://docs.test/eur", "approver": MIRA }),
        "live",
    )
    .await;
    let claim = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    agent
        .ok(
            "escalate",
            json!({ "token": claim["token"], "note": "The quote is in EUR", "requestId": request_id() }),
        )
        .await;
    run_id
}

/// An agent signed in sees its ready steps the same way (tools.md `get_work` for an agent:
/// `readySince`, `due`, `overdue`, mode), and a step's page tells it to claim through the tools,
/// with no form: `decide` is for people.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_sees_its_ready_steps_in_the_inbox() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let base = server.url.as_str();
    server.publish_example("purchase-request");
    let agent = server.client(&AGENT).await;
    let run_id = start(
        &agent,
        "purchase-request",
        json!({ "requestId": "PR-A", "quoteDocument": "https://docs.test/a", "approver": MIRA }),
        "test",
    )
    .await;
    agent.close().await;
    let fields = [("organization", "acme"), ("kind", "agent"), ("agent_id", "a_ap")];
    let session = cookie_pair(&dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui", &fields).await);
    let (status, inbox) = get_page(base, "/ui", &session).await;
    assert_eq!(status, 200);
    let path = format!("/ui/work/{run_id}/assess");
    assert!(inbox.contains(&format!("href=\"{path}\"")), "{inbox}");
    assert!(
        inbox.contains("Agent step: assess") && inbox.contains("Test run"),
        "{inbox}"
    );
    assert!(inbox.contains("Open since"), "{inbox}");
    let (status, page) = get_page(base, &path, &session).await;
    assert_eq!(status, 200);
    assert!(page.contains("Agents claim and submit it"), "{page}");
    assert!(!page.contains("<form class=\"work-form\""), "{page}");
}

/// Opens the page of `step` of `run_id` as `session` and sends its completion form with
/// `fields` added to the hidden ones the page carries.
async fn send_completion(
    base: &str,
    session: &str,
    run_id: &str,
    step: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    let path = format!("/ui/work/{run_id}/{step}");
    let (status, page) = get_page(base, &path, session).await;
    assert_eq!(status, 200, "{page}");
    let hidden_fields: Vec<(&str, String)> = ["csrf", "workItemId", "snapshot", "requestId"]
        .into_iter()
        .map(|name| (name, hidden(&page, name)))
        .collect();
    let mut form: Vec<(&str, &str)> = hidden_fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    form.push(("decision", "completed"));
    form.extend_from_slice(fields);
    post_form(base, &path, session, &form, None).await
}

/// The form's inputs follow the step's declared output fields (spec §3.4 field types): `one_of`
/// as radio buttons whose choice arrives as the declared value, a list one value per line, a
/// value outside the choices refused next to its field with the rest kept.
#[tokio::test(flavor = "multi_thread")]
async fn typed_fields_reach_the_run_as_their_declared_types() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let base = server.url.as_str();
    server.publish_example("defect-triage");
    server.publish_example("contractor-setup");
    let agent = server.client(&AGENT).await;
    let session = session_of(base, MIRA, "qa-lead, procurement-ops").await;

    let report = start(&agent, "defect-triage", json!({ "reportId": "BUG-1" }), "live").await;
    claim_and_submit(
        &agent,
        &report,
        "triage",
        json!({
            "output": { "findings": "Login loop", "workaround": "Cache cleared" },
            "evidence": [{ "kind": "link", "ref": "https://bugs.test/bug-1" }],
            "summary": "Not fixed", "next": "qa_reproduce", "reason": "The runbook workaround did not resolve it",
        }),
    )
    .await;
    let (_, page) = get_page(base, &format!("/ui/work/{report}/qa_reproduce"), &session).await;
    assert!(
        page.contains("type=\"radio\" id=\"f-output-priority-1\" name=\"output.priority\" value=\"1\""),
        "{page}"
    );
    assert!(
        page.contains("<label for=\"f-output-priority-1\">major</label>"),
        "{page}"
    );
    let mut fields = vec![
        ("output.reproSteps", "Sign in twice"),
        ("output.affectedUsers", "All EU customers"),
        ("output.priority", "9"),
        ("evidence_links", "https://bugs.test/bug-1/repro"),
    ];
    let refused = send_completion(base, &session, &report, "qa_reproduce", &fields).await;
    assert_eq!(refused.status(), 200);
    let page = refused.text().await.unwrap();
    assert!(
        page.contains("id=\"f-output-priority-error\">Choose one of the values shown."),
        "{page}"
    );
    assert!(page.contains("aria-invalid=\"true\""), "{page}");
    assert!(
        page.contains("value=\"All EU customers\""),
        "the rest is kept: {page}"
    );
    fields[2] = ("output.priority", "1");
    let done = send_completion(base, &session, &report, "qa_reproduce", &fields).await;
    assert_eq!(done.status(), 303, "{}", done.text().await.unwrap());
    let view = agent.ok("get_run", json!({ "runId": report })).await;
    let record = &view["data"]["steps"]["qa_reproduce"];
    assert_eq!(record["output"]["priority"], "major", "{view}");
    assert_eq!(
        record["evidence"][0]["ref"], "https://bugs.test/bug-1/repro",
        "{view}"
    );

    let setup = start(
        &agent,
        "contractor-setup",
        json!({ "contractorId": "K-1", "contractorName": "Ada", "firstDay": "2027-01-04", "sponsor": MIRA }),
        "live",
    )
    .await;
    let registered = send_completion(
        base,
        &session,
        &setup,
        "vendor_record",
        &[
            ("output.vendorRecord", "V-1"),
            ("output.site", "Berlin"),
            ("output.engagementTitle", "Engineer"),
            ("evidence_links", "https://vendors.test/v-1"),
        ],
    )
    .await;
    assert_eq!(registered.status(), 303, "{}", registered.text().await.unwrap());
    let needs = send_completion(
        base,
        &session,
        &setup,
        "access_needs",
        &[
            ("output.systems", "ERP\n\n CRM \n"),
            ("output.hardware", "Laptop"),
            ("output.mentor", "bob@acme.test"),
        ],
    )
    .await;
    assert_eq!(needs.status(), 303, "{}", needs.text().await.unwrap());
    let view = agent.ok("get_run", json!({ "runId": setup })).await;
    assert_eq!(
        view["data"]["steps"]["access_needs"]["output"],
        json!({ "systems": ["ERP", "CRM"], "hardware": "Laptop", "mentor": "bob@acme.test" }),
        "{view}"
    );
    agent.close().await;
}
