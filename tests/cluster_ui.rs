//! The web UI and dev mode's authorization server across the gateways of a cluster (etcd, an
//! actor host, a scheduler, two gateways, each its own process): the gateways share the dev key
//! and the file link key beside it, not memory, so a session started on one is good on the
//! other, and one OAuth flow may touch both (architecture, "Gateway": a gateway is stateless).

mod cluster_support;
mod common;

use cluster_support::{Cluster, Shape};
use common::ui::*;
use common::{Mcp, Who, request_id};
use reqwest::header::COOKIE;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_session_and_an_oauth_flow_span_the_gateways_of_a_cluster() {
    let cluster = Cluster::start(Shape {
        actors: 1,
        schedulers: 1,
        gateways: 2,
        env: Vec::new(),
    })
    .await;
    let (first, second) = (cluster.gateway_url(0), cluster.gateway_url(1));

    // Signed in on the first gateway, the person is signed in on the second.
    let session = cookie_pair(&dev_sign_in(first, ("ap_sign_in", "ap_session"), "/ui", PERSON_MIRA).await);
    let page = http()
        .get(format!("{second}/ui"))
        .header(COOKIE, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains(MIRA));

    // Registered on the second, allowed on the first, exchanged on the second.
    let client_id = register(second, REDIRECT_URI).await;
    let answer = allow(first, &session, &client_id, "st-c").await;
    assert_eq!(
        param(&answer, "iss").as_deref(),
        Some(cluster.public_url.as_str())
    );
    let code = param(&answer, "code").expect("a code");
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT_URI),
        ("client_id", client_id.as_str()),
        ("code_verifier", VERIFIER),
    ];
    let (status, body, _) = token_request(second, &form).await;
    assert_eq!(status, 200, "{body}");
    let token = body["access_token"].as_str().unwrap().to_owned();
    // The same gateway refuses the code a second time.
    let (status, again, _) = token_request(second, &form).await;
    assert_eq!((status, again["error"].as_str()), (400, Some("invalid_grant")));

    // The token acts as Mira on either gateway: a run that waits on her is in her work.
    cluster.publish_example_in(common::ORG, "purchase-request");
    let agent = cluster.client(0, &Who::Agent("a_ap")).await;
    let started = agent
        .ok(
            "start_run",
            json!({
                "process": "purchase-request",
                "inputs": { "requestId": "PR-C", "quoteDocument": "https://docs.test/pr-c", "approver": MIRA },
                "requestId": request_id(),
            }),
        )
        .await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    let claim = agent
        .ok(
            "claim",
            json!({ "runId": run_id, "stepId": "assess", "requestId": request_id() }),
        )
        .await;
    agent
        .ok(
            "submit",
            json!({
                "token": claim["token"], "requestId": request_id(),
                "output": { "amountUsd": 90.0, "vendor": "Acme Supplies", "justification": "Quote matches the request" },
                "evidence": [{ "kind": "link", "ref": "https://erp.test/match/c" }],
                "summary": "Assessed", "next": "team_lead_approval", "reason": "90 USD is under 5000",
            }),
        )
        .await;
    agent.close().await;
    let mira = Mcp::connect(&cluster.mcp_url(0), &token).await;
    let work = mira.ok("get_work", json!({})).await;
    assert!(
        work["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|item| item["runId"] == run_id.as_str()),
        "{work}"
    );
    mira.close().await;

    // The operators' overview, read by a gateway off etcd, counts the run and the approval
    // waiting on Mira.
    let operator = cookie_pair(&dev_sign_in(second, ("ap_sign_in", "ap_session"), "/ui", OPERATOR).await);
    let overview = http()
        .get(format!("{second}/ui/overview"))
        .header(COOKIE, &operator)
        .send()
        .await
        .unwrap();
    assert_eq!(overview.status(), 200);
    let html = overview.text().await.unwrap();
    assert_eq!(tile_figure(&html, "People's queue"), "1", "{html}");
    assert_eq!(tile_figure(&html, "Agent steps ready"), "0", "{html}");
    assert!(
        html.contains(r#"aria-label="purchase-request: 1 waiting""#)
            || html.contains(r#"aria-label="purchase-request: 1 active""#),
        "{html}"
    );
}

const OPERATOR: &[(&str, &str)] = &[
    ("organization", common::ORG),
    ("kind", "person"),
    ("email", "ops@acme.test"),
    ("groups", "ops"),
    ("operator", "on"),
];

/// The figure of the overview's tile labelled `label`.
fn tile_figure<'a>(html: &'a str, label: &str) -> &'a str {
    let tile = &html[html
        .find(&format!("<dt>{label}"))
        .unwrap_or_else(|| panic!("no tile {label}"))..];
    let figure = &tile[tile.find(r#"class="figure">"#).unwrap() + r#"class="figure">"#.len()..];
    &figure[..figure.find('<').unwrap()]
}
