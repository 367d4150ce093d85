//! The runs area of the web UI against `agentprocess serve` with the fake evaluator: the runs
//! table with each filter of `list_runs` (tools.md `list_runs`) and its cursor, the stuck filter
//! (ready and unclaimed too long, or claims lapsed too often) and each sort, who holds each claim
//! until when, a run's page with the history of a step reworked after a rejection (spec §5
//! `on_reject`, tools.md run view `history`) and of an escalation once it is decided (spec §3.3),
//! its claims and its map with the current step highlighted, cancel with a reason (tools.md
//! `cancel`), the operators' escalation queue (spec §3.3) and the trust report (check-1 §4);
//! then the same pages in a real browser (`tests/python/ui_runs_browser.py`).

mod common;

use agentprocess_testkit::fake_evaluator::FakeEvaluator;
use common::browser::drive_browser_script;
use common::checked::{SCREENED_PAYMENT, ScriptedVerdicts, script_verdicts, start_run};
use common::ui::*;
use common::{Server, Who, request_id};
use reqwest::header::COOKIE;
use serde_json::json;
use std::time::{Duration, Instant};

/// A review due within an hour, for the overdue filter.
const TIMED_REVIEW: &str = r#"---
name: timed-review
description: A reviewer signs a note off within the hour.
inputs:
  note: string
steps:
  - id: review
    person: reviewers
    approve: Sign the note off.
    due: 1h
  - id: done
    finish: reviewed
---

# Timed review
"#;

/// An agent sorts a ticket into a queue: the runs whose claims the table shows.
const TRIAGE: &str = r#"---
name: triage
description: An agent sorts a ticket into a queue.
inputs:
  ticket: string
  priority: string
steps:
  - id: sort
    agent: Sort the ticket into the queue its priority calls for.
    output:
      queue: string
  - id: done
    finish: sorted
---

# Triage
"#;

/// The agent's note when it escalates the held run's ticket, and the operator's when returning it.
const TRIAGE_ESCALATION: &str = "the ticket names no customer";
const TRIAGE_RETURN: &str = "it is the Acme account; go on";

const OPERATOR: &[(&str, &str)] = &[
    ("organization", "acme"),
    ("kind", "person"),
    ("email", "ops@acme.test"),
    ("groups", "ops"),
    ("operator", "on"),
];
const APPROVER: &[(&str, &str)] = &[
    ("organization", "acme"),
    ("kind", "person"),
    ("email", "boss@acme.test"),
    ("groups", "approvers"),
];

/// A signed-in browser, by hand: its session cookie.
struct Browser {
    base: String,
    cookie: String,
}

impl Browser {
    async fn sign_in(base: &str, fields: &[(&str, &str)]) -> Browser {
        let session = dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui", fields).await;
        Browser {
            base: base.to_owned(),
            cookie: cookie_pair(&session),
        }
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        http()
            .get(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .send()
            .await
            .unwrap()
    }

    /// A page's status and HTML.
    async fn page(&self, path: &str) -> (u16, String) {
        let response = self.get(path).await;
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        http()
            .post(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .form(form)
            .send()
            .await
            .unwrap()
    }
}

/// The run ids the runs list shows, in order.
fn listed_runs(html: &str) -> Vec<String> {
    html.split("href=\"/ui/runs/")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
        .collect()
}

/// The "Next page" link's address, if the page has one.
fn next_page(html: &str) -> Option<String> {
    let end = html.find("\" rel=\"next\"")?;
    let start = html[..end].rfind("href=\"")? + "href=\"".len();
    Some(html[start..end].replace("&amp;", "&"))
}

/// Every run the runs list shows for `query`, following its "Next page" links.
async fn ui_runs(browser: &Browser, query: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut path = format!("/ui/runs?{query}");
    loop {
        let (status, html) = browser.page(&path).await;
        assert_eq!(status, 200, "{path}: {html}");
        ids.extend(listed_runs(&html));
        match next_page(&html) {
            Some(next) => path = next,
            None => return ids,
        }
    }
}

/// The opening tag of the element of an SVG with `data-step="STEP"`.
fn step_tag<'a>(svg: &'a str, step: &str) -> &'a str {
    let at = svg
        .find(&format!("data-step=\"{step}\""))
        .unwrap_or_else(|| panic!("no {step} in the map"));
    let start = svg[..at].rfind('<').unwrap();
    let end = at + svg[at..].find('>').unwrap();
    &svg[start..end]
}

/// What the scripted runs are, for the browser script.
struct Scripted {
    verdicts: ScriptedVerdicts,
    escalated: String,
    overdue: String,
    on_time: String,
    /// A triage run whose claim lapsed once: ready since before the clock moved two hours.
    lapsed: String,
    /// A triage run escalated, returned, and claimed again after the clock moved: its claim is
    /// live.
    held: String,
    /// A triage run started after the clock moved, ready and unclaimed.
    fresh: String,
}

/// Starts a triage run of `ticket`.
async fn start_triage(agent: &common::Mcp, ticket: &str, priority: &str) -> String {
    let started = agent
        .ok(
            "start_run",
            json!({ "process": "triage", "inputs": { "ticket": ticket, "priority": priority }, "requestId": request_id() }),
        )
        .await;
    started["run"]["id"].as_str().unwrap().to_owned()
}

async fn claim_sort(agent: &common::Mcp, run_id: &str) -> serde_json::Value {
    agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "sort", "requestId": request_id() }),
        )
        .await
}

/// Waits until `run_id`'s step `step` is in `state`, as `client` reads it.
async fn step_reaches(client: &common::Mcp, run_id: &str, step: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let view = client.ok("get_run", json!({ "runId": run_id })).await;
        let steps = view["steps"].as_array().unwrap();
        if steps.iter().any(|s| s["id"] == step && s["state"] == state) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{step} of {run_id} is not {state}: {view}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn script(server: &Server) -> Scripted {
    let agent = server.client(&Who::Agent("screener")).await;
    let approver = server
        .client(&Who::Person("boss@acme.test", &["approvers"]))
        .await;
    let verdicts = script_verdicts(&agent, &approver).await;
    // An agent escalates its screening: the step waits on the operators.
    let escalated = start_run(&agent, "P-7").await;
    let claimed = agent
        .ok(
            "claim",
            json!({ "runId": escalated, "stepId": "screen", "requestId": request_id() }),
        )
        .await;
    agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": "the policy does not cover refunds", "requestId": request_id() }),
        )
        .await;
    // A review that goes overdue, and one started after that.
    let start_review = |note: &'static str| {
        let agent = &agent;
        async move {
            let started = agent
                .ok(
                    "start_run",
                    json!({ "process": "timed-review", "inputs": { "note": note }, "requestId": request_id() }),
                )
                .await;
            started["run"]["id"].as_str().unwrap().to_owned()
        }
    };
    let overdue = start_review("late").await;
    // A triage the agent claims and leaves: its claim lapses when the clock moves.
    let lapsed = start_triage(&agent, "T-1", "high").await;
    claim_sort(&agent, &lapsed).await;
    server.advance(2 * 3600).await;
    let operator = server.client(&Who::Operator("ops@acme.test", &["ops"])).await;
    step_reaches(&operator, &lapsed, "sort", "ready").await;
    // A triage escalated and returned, then claimed again: the claim is live.
    let held = start_triage(&agent, "T-2", "low").await;
    let claimed = claim_sort(&agent, &held).await;
    agent
        .ok(
            "escalate",
            json!({ "token": claimed["token"], "note": TRIAGE_ESCALATION, "requestId": request_id() }),
        )
        .await;
    let view = operator.ok("get_run", json!({ "runId": held })).await;
    let item = &view["workItems"][0];
    operator
        .ok(
            "decide",
            json!({ "runId": held, "workItemId": item["id"], "snapshot": item["snapshot"],
                    "decision": "returned", "note": TRIAGE_RETURN, "requestId": request_id() }),
        )
        .await;
    claim_sort(&agent, &held).await;
    let fresh = start_triage(&agent, "T-3", "high").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let view = operator.ok("get_run", json!({ "runId": overdue })).await;
        if view["steps"][0]["overdue"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "the review did not go overdue: {view}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let on_time = start_review("on time").await;
    for client in [agent, approver, operator] {
        client.close().await;
    }
    Scripted {
        verdicts,
        escalated,
        overdue,
        on_time,
        lapsed,
        held,
        fresh,
    }
}

/// The cells of the runs table's row of `run_id`, as text without tags.
fn row_text(html: &str, run_id: &str) -> String {
    let at = html
        .find(&format!("href=\"/ui/runs/{run_id}\""))
        .unwrap_or_else(|| panic!("no row of {run_id}: {html}"));
    let start = html[..at].rfind("<tr").unwrap();
    let end = at + html[at..].find("</tr>").unwrap();
    without_tags(&html[start..end])
}

/// HTML as its text: tags dropped, each as a space, and runs of spaces made one.
fn without_tags(html: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `aria-sort` of the header of the table's column `label`, if it has one.
fn aria_sort(html: &str, label: &str) -> Option<String> {
    let table = html.find("<table")?;
    let at = table + html[table..].find(&format!(">{label}<"))?;
    let start = html[..at].rfind("<th")?;
    let header = &html[start..at];
    let value = header.split("aria-sort=\"").nth(1)?;
    Some(value[..value.find('"')?].to_owned())
}

/// `items` (`list_runs` items, in the listing's order) sorted as the table sorts a page by
/// `key`: stable, so rows alike keep the listing's order.
fn sorted_as_the_table(mut items: Vec<serde_json::Value>, key: &str, descending: bool) -> Vec<String> {
    let rank = |state: &str| {
        ["active", "waiting", "ended", "cancelled"]
            .iter()
            .position(|s| *s == state)
    };
    let at = |item: &serde_json::Value, field: &str| {
        agentprocess_service::Timestamp::parse_rfc3339(item[field].as_str().unwrap()).unwrap()
    };
    items.sort_by(|a, b| {
        let ordering = match key {
            "started" => at(a, "startedAt").cmp(&at(b, "startedAt")),
            "updated" => at(a, "updatedAt").cmp(&at(b, "updatedAt")),
            "process" => (a["process"].as_str(), a["version"].as_u64())
                .cmp(&(b["process"].as_str(), b["version"].as_u64())),
            "state" => rank(a["state"].as_str().unwrap()).cmp(&rank(b["state"].as_str().unwrap())),
            other => panic!("no sort {other}"),
        };
        if descending { ordering.reverse() } else { ordering }
    });
    items
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The runs list shows what `list_runs` gives the caller for each filter (process, state,
/// input values; tools.md `list_runs`), overdue runs (tools.md run view `steps[].overdue`) and
/// every page through the tool's cursor; a refused filter is shown next to its field. The run
/// page shows every attempt of a reworked step (tools.md run view `history`), the map marks the
/// current step, cancel needs a reason and an operator, the escalation queue and the trust
/// report are for operators, and the trust report counts the scripted verdicts (check-1 §4).
/// Then the browser walks the same pages and an operator cancels a run through them.
#[tokio::test(flavor = "multi_thread")]
async fn runs_maps_escalations_and_trust_through_the_pages() {
    let evaluator = FakeEvaluator::spawn_on_thread(None);
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &[],
        &[
            ("AGENTPROCESS_EVALUATOR__URL", evaluator.base_url.as_str()),
            ("AGENTPROCESS_EVALUATOR__MODEL", "fake"),
        ],
    );
    for (name, text, bindings) in [
        (
            "screened-payment",
            SCREENED_PAYMENT,
            &[("approvers", "approvers")][..],
        ),
        ("timed-review", TIMED_REVIEW, &[("reviewers", "reviewers")][..]),
        ("triage", TRIAGE, &[][..]),
    ] {
        let source = data.path().join(format!("{name}.md"));
        std::fs::write(&source, text).unwrap();
        let (code, out, err) = server.import(&source, bindings, true);
        assert_eq!(code, 0, "{out}\n{err}");
    }
    let scripted = script(&server).await;
    let verdicts = &scripted.verdicts;
    let base = server.url.as_str();
    let operator = Browser::sign_in(base, OPERATOR).await;
    let approver = Browser::sign_in(base, APPROVER).await;
    let mcp = server.client(&Who::Operator("ops@acme.test", &["ops"])).await;

    // Each filter shows exactly what list_runs gives, over every page.
    for (query, arguments) in [
        (
            "process=screened-payment&limit=2",
            json!({ "process": "screened-payment" }),
        ),
        (
            "process=screened-payment&state=waiting&limit=2",
            json!({ "process": "screened-payment", "state": "waiting" }),
        ),
        ("state=ended&limit=3", json!({ "state": "ended" })),
        ("inputs=payment%3DP-3", json!({ "inputs": { "payment": "P-3" } })),
        ("limit=100", json!({})),
    ] {
        let shown = ui_runs(&operator, query).await;
        assert_eq!(shown, mcp.listed_run_ids(arguments.clone()).await.0, "{query}");
        assert!(!shown.is_empty(), "{query}");
    }
    let all_payments = ui_runs(&operator, "process=screened-payment&limit=2").await;
    assert_eq!(all_payments.len(), 7, "{all_payments:?}");
    assert_eq!(
        ui_runs(&operator, "inputs=payment%3DP-3").await,
        vec![verdicts.rejected_pass.clone()]
    );
    let (_, first_page) = operator.page("/ui/runs?process=screened-payment&limit=2").await;
    assert_eq!(listed_runs(&first_page).len(), 2);
    let next = next_page(&first_page).expect("a next page");
    assert!(
        next.contains("process=screened-payment") && next.contains("limit=2") && next.contains("cursor="),
        "{next}"
    );
    // Overdue: only the review past its due time.
    assert_eq!(
        ui_runs(&operator, "process=timed-review&overdue=on").await,
        vec![scripted.overdue.clone()]
    );
    let mut reviews = ui_runs(&operator, "process=timed-review").await;
    reviews.sort();
    let mut both = vec![scripted.overdue.clone(), scripted.on_time.clone()];
    both.sort();
    assert_eq!(reviews, both);
    // Refused filters: next to their fields, the form keeps what was typed.
    let (status, html) = operator.page("/ui/runs?process=screened-payment&limit=0").await;
    assert_eq!(status, 200);
    assert!(html.contains("id=\"limit-error\""), "{html}");
    assert!(html.contains("value=\"screened-payment\""), "{html}");
    let (_, html) = operator.page("/ui/runs?state=sleeping").await;
    assert!(html.contains("id=\"state-error\""), "{html}");
    let (_, html) = operator.page("/ui/runs?inputs=payment").await;
    assert!(
        html.contains("id=\"inputs-error\"") && html.contains("no ="),
        "{html}"
    );
    let (_, html) = operator.page("/ui/runs?cursor=zz").await;
    assert!(html.contains("Start from the first page"), "{html}");

    // The table: each run's process and version, state, current steps with who holds each
    // claim until when (from the operator's inspection), first inputs and age.
    let (_, html) = operator.page("/ui/runs?process=triage").await;
    for header in [
        "Run",
        "Process",
        "State",
        "Current steps",
        "Inputs",
        "Started",
        "Updated",
    ] {
        assert!(html.contains(&format!(">{header}<")), "{header}: {html}");
    }
    let held = row_text(&html, &scripted.held);
    for expected in [
        "triage v1",
        "active",
        "sort claimed",
        "held by screener until",
        "ticket: T-2",
        "priority: low",
        "ago",
    ] {
        assert!(held.contains(expected), "{expected}: {held}");
    }
    let lapsed = row_text(&html, &scripted.lapsed);
    for expected in ["sort ready", "1 claim lapsed", "ticket: T-1", "2 h "] {
        assert!(lapsed.contains(expected), "{expected}: {lapsed}");
    }
    assert!(!lapsed.contains("held by"), "{lapsed}");
    // A person who is no operator sees the run, not who holds its claim.
    let (_, html) = approver.page("/ui/runs?process=triage").await;
    assert!(!row_text(&html, &scripted.held).contains("held by"), "{html}");

    // Stuck: ready and unclaimed longer than the threshold (the rework of P-3 and the lapsed
    // triage, the longest waiting first), or claims lapsed more than the limit however long
    // the step waited; the other filters still hold.
    for (query, expected) in [
        (
            "stuck=on&waited=60&lapsed=",
            vec![verdicts.rejected_pass.as_str(), scripted.lapsed.as_str()],
        ),
        ("stuck=on&waited=180&lapsed=", Vec::<&str>::new()),
        ("stuck=on&waited=180&lapsed=0", vec![scripted.lapsed.as_str()]),
        ("stuck=on&waited=180&lapsed=1", Vec::<&str>::new()),
        (
            "stuck=on&waited=60&lapsed=&process=triage",
            vec![scripted.lapsed.as_str()],
        ),
        (
            "stuck=on&waited=60&lapsed=&inputs=payment%3DP-3",
            vec![verdicts.rejected_pass.as_str()],
        ),
        (
            "stuck=on&waited=60&lapsed=&limit=1",
            vec![verdicts.rejected_pass.as_str(), scripted.lapsed.as_str()],
        ),
    ] {
        assert_eq!(ui_runs(&operator, query).await, expected, "{query}");
    }
    let (_, html) = operator.page("/ui/runs?stuck=on&waited=60&lapsed=").await;
    assert!(html.contains("Stuck runs, the longest waiting first"), "{html}");
    let stuck_row = row_text(&html, &scripted.lapsed);
    assert!(
        stuck_row.contains("Stuck") && stuck_row.contains("unclaimed for 2 h"),
        "{stuck_row}"
    );
    let (_, html) = operator.page("/ui/runs?stuck=on&waited=0").await;
    assert!(html.contains("id=\"waited-error\""), "{html}");
    // Stuck is the operators' (it reads the organization's ready steps).
    let (_, html) = approver.page("/ui/runs").await;
    assert!(!html.contains("id=\"stuck\""), "{html}");
    let (_, html) = approver.page("/ui/runs?stuck=on").await;
    assert!(html.contains("id=\"stuck-error\""), "{html}");

    // Sorts: the listing's order (the order runs started) across pages, said by aria-sort;
    // every other order sorts the page shown, each header linking to its sort.
    let (listed, _) = mcp.listed_run_ids(json!({})).await;
    let items = mcp.ok("list_runs", json!({ "limit": 100 })).await["items"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(listed.len(), items.len(), "one page holds every run");
    let (_, html) = operator.page("/ui/runs?limit=100").await;
    assert_eq!(listed_runs(&html), listed);
    assert_eq!(aria_sort(&html, "Started").as_deref(), Some("ascending"));
    assert!(html.contains("href=\"/ui/runs?process=&amp;state=&amp;inputs=&amp;limit=100&amp;sort=started&amp;order=desc#results\""), "{html}");
    for key in ["started", "updated", "process", "state"] {
        for (order, descending) in [("asc", false), ("desc", true)] {
            let (_, html) = operator
                .page(&format!("/ui/runs?limit=100&sort={key}&order={order}"))
                .await;
            assert_eq!(
                listed_runs(&html),
                sorted_as_the_table(items.clone(), key, descending),
                "{key} {order}"
            );
            let label = format!("{}{}", key[..1].to_uppercase(), &key[1..]);
            let expected = if descending { "descending" } else { "ascending" };
            assert_eq!(
                aria_sort(&html, &label).as_deref(),
                Some(expected),
                "{key} {order}"
            );
            assert!(html.contains("a sort orders the page shown"), "{html}");
        }
    }

    // The held run's page: who holds the claim until when, and the escalation in its history,
    // with both notes, though it was returned (spec §3.3).
    let (status, html) = operator.page(&format!("/ui/runs/{}", scripted.held)).await;
    assert_eq!(status, 200, "{html}");
    let text = without_tags(&html);
    for expected in [
        "sort is held by screener until",
        &format!("escalated sort Reason {TRIAGE_ESCALATION}"),
        &format!("ops@acme.test returned sort Note {TRIAGE_RETURN}"),
        "sort · agent · claimed · held by screener until",
    ] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    let (_, html) = approver.page(&format!("/ui/runs/{}", scripted.held)).await;
    assert!(
        html.contains("Who holds a claim is shown to operators."),
        "{html}"
    );
    assert!(!html.contains("is held by"), "{html}");
    let (_, html) = operator.page(&format!("/ui/runs/{}", scripted.lapsed)).await;
    assert!(
        without_tags(&html).contains("Claims of sort lapsed 1 time."),
        "{html}"
    );
    assert!(html.contains("No one holds a claim on this run."), "{html}");

    // The reworked run: both screenings and the rejection between them.
    let (status, html) = operator.page(&format!("/ui/runs/{}", verdicts.reworked)).await;
    assert_eq!(status, 200, "{html}");
    for expected in [
        "Reworked steps",
        "Screened against the policy. [check:fail]",
        "the policy reference is missing",
        "(attempt 1)",
        "(attempt 2)",
        "sent back",
    ] {
        assert!(html.contains(expected), "{expected}: {html}");
    }
    // The waiting run: its map marks sign_off current and screen done.
    let svg = operator
        .get(&format!("/ui/runs/{}/map.svg", verdicts.waiting))
        .await;
    assert_eq!(svg.status(), 200);
    assert_eq!(svg.headers()["content-type"], "image/svg+xml");
    let svg = svg.text().await.unwrap();
    assert!(
        step_tag(&svg, "sign_off").contains("data-state=\"current\""),
        "{svg}"
    );
    assert!(step_tag(&svg, "screen").contains("data-state=\"done\""), "{svg}");
    let (_, html) = operator.page(&format!("/ui/runs/{}", verdicts.waiting)).await;
    assert!(
        html.contains(&format!("src=\"/ui/runs/{}/map.svg\"", verdicts.waiting)),
        "{html}"
    );
    assert!(html.contains("current: sign_off"), "{html}");
    assert!(
        html.contains(&format!("href=\"/ui/work/{}/sign_off\"", verdicts.waiting)),
        "{html}"
    );
    // A version's map: nothing highlighted; a version that does not exist is a 404 page.
    let version = operator
        .get("/ui/processes/screened-payment/versions/1/map.svg")
        .await;
    assert_eq!(version.status(), 200);
    let version = version.text().await.unwrap();
    assert!(
        version.contains("data-step=\"sign_off\"") && !version.contains("data-state="),
        "{version}"
    );
    for missing in [
        "/ui/processes/screened-payment/versions/9/map.svg",
        "/ui/processes/screened-payment/versions/x/map.svg",
        "/ui/runs/r_nope/map.svg",
        "/ui/runs/r_nope",
    ] {
        let (status, html) = operator.page(missing).await;
        assert_eq!(status, 404, "{missing}: {html}");
    }

    // Cancel: a reason is required, the CSRF token too, and only an operator may.
    let cancel_path = format!("/ui/runs/{}/cancel", scripted.on_time);
    let (_, html) = operator.page(&format!("/ui/runs/{}", scripted.on_time)).await;
    let csrf = hidden(&html, "csrf");
    let empty = operator
        .post(&cancel_path, &[("csrf", &csrf), ("reason", "  ")])
        .await;
    assert_eq!(empty.status(), 200);
    assert!(empty.text().await.unwrap().contains("id=\"reason-error\""));
    let forged = operator.post(&cancel_path, &[("reason", "no token")]).await;
    assert_eq!(forged.status(), 403);
    let (_, approver_html) = approver.page(&format!("/ui/runs/{}", scripted.on_time)).await;
    assert!(!approver_html.contains("Cancel the run"), "{approver_html}");
    let refused = approver
        .post(
            &cancel_path,
            &[("csrf", &hidden(&approver_html, "csrf")), ("reason", "not mine")],
        )
        .await;
    assert_eq!(refused.status(), 200);
    assert!(refused.text().await.unwrap().contains("forbidden"));
    let view = mcp.ok("get_run", json!({ "runId": scripted.on_time })).await;
    assert_eq!(view["run"]["state"], "waiting", "{view}");

    // The escalation queue: the operators', with the reason and where to decide it.
    let (status, html) = operator.page("/ui/escalations").await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("the policy does not cover refunds"), "{html}");
    assert!(
        html.contains(&format!("href=\"/ui/work/{}/screen\"", scripted.escalated)),
        "{html}"
    );
    assert!(html.contains("screener"), "{html}");
    // The trust report: the scripted verdicts, counted.
    let (status, html) = operator.page("/ui/trust?process=screened-payment").await;
    assert_eq!(status, 200, "{html}");
    for expected in [
        "7 live runs read.",
        "60% (3 of 5 decided verdicts)",
        "data-count=\"agreed\">3<",
        "data-count=\"disagreed\">2<",
        "data-count=\"unsure\">1<",
        "data-count=\"error\">0<",
        "data-count=\"undecided\">1<",
        "the amount is over the limit",
    ] {
        assert!(html.contains(expected), "{expected}: {html}");
    }
    for run in [&verdicts.rejected_pass, &verdicts.approved_fail] {
        assert!(
            html.contains(&format!("href=\"/ui/runs/{run}\"")),
            "{run}: {html}"
        );
    }
    let (_, html) = operator.page("/ui/trust?process=no-such-process").await;
    assert!(html.contains("id=\"process-error\""), "{html}");
    // Operators' pages: 403 for everyone else.
    for path in [
        "/ui/escalations",
        "/ui/trust",
        "/ui/trust?process=screened-payment",
    ] {
        let (status, html) = approver.page(path).await;
        assert_eq!(status, 403, "{path}");
        assert!(html.contains("Operators only"), "{path}: {html}");
    }

    // The browser: every page checked, and an operator cancels the on-time review.
    let ids = json!({
        "reworked": verdicts.reworked, "waiting": verdicts.waiting, "rejectedPass": verdicts.rejected_pass,
        "escalated": scripted.escalated, "overdue": scripted.overdue, "cancel": scripted.on_time,
        "lapsed": scripted.lapsed, "held": scripted.held, "fresh": scripted.fresh,
        "escalationNote": TRIAGE_ESCALATION, "returnNote": TRIAGE_RETURN,
    });
    let summary = drive_browser_script(&server, "ui_runs_browser.py", &[&ids.to_string()], &[]).await;
    assert!(summary["pages"].as_array().unwrap().len() >= 8, "{summary}");
    let view = mcp.ok("get_run", json!({ "runId": scripted.on_time })).await;
    assert_eq!(view["run"]["state"], "cancelled", "{view}");
    assert_eq!(view["run"]["ended"]["note"], "The note was withdrawn", "{view}");
    assert_eq!(view["run"]["ended"]["by"], "ops@acme.test", "{view}");
    mcp.close().await;
}
