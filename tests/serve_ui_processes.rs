//! The operators' process and webhook pages of `agentprocess serve`, in a real browser
//! (`tests/python/ui_processes_browser.py`) and checked through the admin API and MCP: import
//! with every issue at its line, bind, publish, versions with their content hashes (spec §6.5),
//! diffs; webhooks and dead letters; operators only.

mod common;

use common::browser::drive_browser_script;
use common::ui::*;
use common::{Server, Who, request_id, status_and_json};
use reqwest::header::COOKIE;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OPERATOR: Who = Who::Operator("ops@acme.test", &["ops"]);
const STARTER: Who = Who::Agent("a_claims");

/// `method {path}` on the admin API as an operator of acme, with a JSON body when given.
async fn admin(server: &Server, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", server.url))
        .bearer_auth(server.token(&OPERATOR));
    if let Some(body) = body {
        request = request.json(&body);
    }
    status_and_json(request.send().await.unwrap()).await
}

/// The ids of acme's dead letters, oldest first.
async fn dead_letter_ids(server: &Server) -> Vec<String> {
    let (status, letters) = admin(server, reqwest::Method::GET, "/admin/v1/dead-letters", None).await;
    assert_eq!(status, 200, "{letters}");
    letters["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A loopback URL nothing listens on: every delivery to it is refused.
async fn refusing_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{address}/hook")
}

/// A webhook receiver on loopback that answers 200 and keeps every body.
async fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let record = received.clone();
    let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
        let record = record.clone();
        async move {
            record
                .lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
            axum::http::StatusCode::OK
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

/// Starts runs of the account-closure example until acme has two dead letters (its webhook
/// refuses every delivery); returns their ids.
async fn two_dead_letters(server: &Server) -> Vec<String> {
    let client = server.client(&STARTER).await;
    for account in ["ACC-1", "ACC-2"] {
        client
            .ok(
                "start_run",
                json!({
                    "process": "account-closure",
                    "inputs": { "accountId": account, "closeAt": "2027-01-31T00:00:00Z" },
                    "requestId": request_id(),
                }),
            )
            .await;
    }
    client.close().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ids = dead_letter_ids(server).await;
        if ids.len() >= 2 {
            return ids;
        }
        assert!(Instant::now() < deadline, "two dead letters within 20 s: {ids:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Spec §6.5 (a published version is named by its content hash) and the admin API's rules, as
/// an operator meets them in the browser: the import refused with its issue at line 13, fixed
/// and imported, publication refused while a role is unbound, then v1 and v2 published (each
/// startable through MCP `start_run`), compared; a webhook saved, another deleted, one dead
/// letter redelivered (it reaches the new webhook) and another deleted; non-operators get 403.
#[tokio::test(flavor = "multi_thread")]
async fn an_operator_manages_processes_and_webhooks_in_the_browser() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &[],
        &[
            ("AGENTPROCESS_NOTIFICATIONS__MAX_ATTEMPTS", "2"),
            ("AGENTPROCESS_NOTIFICATIONS__FIRST_BACKOFF_MS", "50"),
        ],
    );
    server.publish_example("account-closure");
    let refusing = refusing_url().await;
    let (status, body) = admin(
        &server,
        reqwest::Method::PUT,
        "/admin/v1/webhooks/refuser",
        Some(json!({ "url": refusing, "secret": "whsec-refused" })),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let letters = two_dead_letters(&server).await;
    let (redeliver, delete) = (letters[0].clone(), letters[1].clone());
    let (receiver_url, received) = receiver().await;

    let summary = drive_browser_script(
        &server,
        "ui_processes_browser.py",
        &[],
        &[&receiver_url, &redeliver, &delete],
    )
    .await;

    // The versions the pages showed are the catalog's, and each is startable.
    let (status, entry) = admin(
        &server,
        reqwest::Method::GET,
        "/admin/v1/processes/expense-claim",
        None,
    )
    .await;
    assert_eq!(status, 200, "{entry}");
    let versions = entry["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "{entry}");
    for version in versions {
        let number = version["version"].to_string();
        assert_eq!(
            summary["hashes"][&number], version["contentHash"],
            "{summary} {entry}"
        );
        assert_eq!(version["roles"], json!({ "finance-reviewer": "finance" }));
    }
    let client = server.client(&STARTER).await;
    let started = client
        .ok(
            "start_run",
            json!({ "process": "expense-claim", "inputs": { "amount": 42.5 }, "requestId": request_id() }),
        )
        .await;
    assert_eq!(started["run"]["version"], 2, "{started}");
    client.close().await;

    // Webhooks: the new one is there without its secret, the refusing one is gone.
    let (_, hooks) = admin(&server, reqwest::Method::GET, "/admin/v1/webhooks", None).await;
    assert_eq!(hooks["webhooks"], json!([{ "id": "main", "url": receiver_url }]));
    // Dead letters: both gone; the redelivered one reaches the new webhook.
    let remaining = dead_letter_ids(&server).await;
    assert!(
        !remaining.contains(&redeliver) && !remaining.contains(&delete),
        "{remaining:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while received.lock().unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the redelivered notification did not arrive"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Only operators reach the process and webhook pages and forms (403 for anyone else, their
/// CSRF token notwithstanding); an operator's forms still need their CSRF token.
#[tokio::test(flavor = "multi_thread")]
async fn process_and_webhook_pages_are_for_operators_only() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let base = server.url.as_str();
    let person = cookie_pair(&dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui", PERSON_MIRA).await);
    let home = http()
        .get(format!("{base}/ui"))
        .header(COOKIE, &person)
        .send()
        .await
        .unwrap();
    let csrf = hidden(&home.text().await.unwrap(), "csrf");
    for path in [
        "/ui/processes",
        "/ui/processes/x",
        "/ui/processes/x/versions/1",
        "/ui/webhooks",
    ] {
        let page = http()
            .get(format!("{base}{path}"))
            .header(COOKIE, &person)
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 403, "{path}");
    }
    for path in [
        "/ui/processes/x/publish",
        "/ui/webhooks",
        "/ui/webhooks/main/delete",
    ] {
        let form = http()
            .post(format!("{base}{path}"))
            .header(COOKIE, &person)
            .form(&[
                ("csrf", csrf.as_str()),
                ("id", "main"),
                ("url", "http://127.0.0.1:9/"),
                ("secret", "s"),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(form.status(), 403, "{path}");
    }

    let mut operator_fields = PERSON_MIRA.to_vec();
    operator_fields.push(("operator", "on"));
    let operator =
        cookie_pair(&dev_sign_in(base, ("ap_sign_in", "ap_session"), "/ui", &operator_fields).await);
    let page = http()
        .get(format!("{base}/ui/webhooks"))
        .header(COOKIE, &operator)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let forged = http()
        .post(format!("{base}/ui/webhooks"))
        .header(COOKIE, &operator)
        .form(&[
            ("csrf", csrf.as_str()),
            ("id", "main"),
            ("url", "http://127.0.0.1:9/"),
            ("secret", "s"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403, "another session's CSRF token");
    let (_, hooks) = admin(&server, reqwest::Method::GET, "/admin/v1/webhooks", None).await;
    assert_eq!(hooks["webhooks"], json!([]), "nothing was saved");
    let unknown = http()
        .get(format!("{base}/ui/processes/nothing-here"))
        .header(COOKIE, &operator)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
}
