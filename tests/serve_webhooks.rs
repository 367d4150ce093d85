//! `agentprocess serve` delivering notifications end to end: a webhook configured through the
//! admin API, a receiver on loopback that records what it gets, and runs of the
//! account-closure example whose approval step opens a work item, goes overdue (spec §2.2
//! `due`: the assignee and the organization's operators are notified) and is cancelled. Every
//! delivery is checked against its HMAC-SHA256 signature; a test-mode run delivers nothing
//! (spec §3.3); a receiver that keeps failing gets the configured attempts and the notification
//! becomes a dead letter operators read at `/admin/v1/dead-letters`, redeliver once the receiver
//! recovers, or delete.

mod common;

use common::{Server, Who, request_id, status_and_json};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PROCESS: &str = "account-closure";
const SECRET: &str = "whsec-e2e-7c1f0a";
const STARTER: Who = Who::Agent("a_closure");
const OPERATOR: Who = Who::Operator("ops@acme.test", &["ops"]);
/// `due: 2d` of the `confirm_request` step, and a minute more.
const PAST_DUE_SECONDS: u64 = 2 * 24 * 3600 + 60;

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    signature: Option<String>,
    delivery: Option<String>,
    content_type: Option<String>,
    body: Vec<u8>,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// A webhook receiver on 127.0.0.1:0 that records every request and answers `status`.
struct Receiver {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
    status: Arc<AtomicU16>,
}

impl Receiver {
    async fn start(status: u16) -> Receiver {
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let status = Arc::new(AtomicU16::new(status));
        let (record, answer) = (received.clone(), status.clone());
        let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
            let (record, answer) = (record.clone(), answer.clone());
            async move {
                let (parts, body) = request.into_parts();
                let body = axum::body::to_bytes(body, 1 << 20).await.unwrap().to_vec();
                let header = |name: &str| parts.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
                record.lock().unwrap().push(Received {
                    path: parts.uri.path().to_owned(),
                    signature: header("x-agentprocess-signature"),
                    delivery: header("x-agentprocess-delivery"),
                    content_type: header("content-type"),
                    body,
                });
                axum::http::StatusCode::from_u16(answer.load(Ordering::SeqCst)).unwrap()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver {
            url,
            received,
            status,
        }
    }

    fn all(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The requests about `run_id`, in arrival order.
    fn of_run(&self, run_id: &str) -> Vec<Received> {
        self.all()
            .into_iter()
            .filter(|r| r.json()["runId"] == run_id)
            .collect()
    }

    /// Waits (up to 10 s) until `done` holds for the requests about `run_id`.
    async fn wait_for(&self, run_id: &str, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let received = self.of_run(run_id);
            if done(&received) {
                return received;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} for {run_id} within 10 s; received: {:?}",
                self.all()
                    .iter()
                    .map(|r| String::from_utf8_lossy(&r.body).into_owned())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `sha256=<hex>` of the HMAC-SHA256 of `body` under `secret`, computed here independently.
fn expected_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

/// Asserts a delivery is signed with `secret`, names itself, and is JSON.
fn assert_signed(received: &Received, secret: &str) {
    assert_eq!(
        received.signature.as_deref(),
        Some(expected_signature(secret, &received.body).as_str()),
        "signature of {}",
        String::from_utf8_lossy(&received.body)
    );
    assert_eq!(received.delivery.as_deref(), received.json()["id"].as_str());
    assert_eq!(received.content_type.as_deref(), Some("application/json"));
}

fn of_type<'a>(received: &'a [Received], kind: &str) -> Vec<&'a Received> {
    received.iter().filter(|r| r.json()["type"] == kind).collect()
}

/// `PUT /admin/v1/webhooks/{id}` as an operator of `organization`; returns (status, body text).
async fn put_webhook(
    server: &Server,
    organization: &str,
    id: &str,
    url: &str,
    secret: &str,
) -> (u16, String) {
    let response = reqwest::Client::new()
        .put(format!("{}/admin/v1/webhooks/{id}", server.url))
        .bearer_auth(server.token_in(organization, &OPERATOR))
        .json(&json!({ "url": url, "secret": secret }))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// `GET {path}` on the admin API as an operator of `organization`.
async fn admin_get(server: &Server, organization: &str, path: &str) -> Value {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", server.url))
        .bearer_auth(server.token_in(organization, &OPERATOR))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// `method {path}` on the admin API as an operator of `organization`; returns (status, JSON body
/// or null).
async fn admin_call(
    server: &Server,
    organization: &str,
    method: reqwest::Method,
    path: &str,
) -> (u16, Value) {
    let response = reqwest::Client::new()
        .request(method, format!("{}{path}", server.url))
        .bearer_auth(server.token_in(organization, &OPERATOR))
        .send()
        .await
        .unwrap();
    status_and_json(response).await
}

/// Polls the dead letters of acme (up to 10 s) until one about `run_id` is there.
async fn dead_letter_of(server: &Server, receiver: &Receiver, run_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let letters = admin_get(server, "acme", "/admin/v1/dead-letters").await;
        let found = letters["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["notification"]["runId"] == run_id)
            .cloned();
        if let Some(letter) = found {
            return letter;
        }
        assert!(
            Instant::now() < deadline,
            "no dead letter for {run_id} within 10 s; {} attempts",
            receiver.of_run(run_id).len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts an account-closure run; returns the run view.
async fn start_run(server: &Server, mode: &str) -> Value {
    let client = server.client(&STARTER).await;
    let started = client
        .ok(
            "start_run",
            json!({
                "process": PROCESS,
                "inputs": { "accountId": "ACC-7", "closeAt": "2027-01-31T00:00:00Z" },
                "mode": mode,
                "requestId": request_id(),
            }),
        )
        .await;
    client.close().await;
    started
}

async fn cancel(server: &Server, run_id: &str) {
    let client = server.client(&OPERATOR).await;
    client
        .ok(
            "cancel",
            json!({ "runId": run_id, "reason": "the customer stayed", "requestId": request_id() }),
        )
        .await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn work_opened_overdue_and_run_ended_are_delivered_signed_to_the_organization_webhook() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example(PROCESS);
    let receiver = Receiver::start(200).await;

    let (status, text) =
        put_webhook(&server, "acme", "main", &format!("{}/acme", receiver.url), SECRET).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({ "id": "main", "url": format!("{}/acme", receiver.url) })
    );
    assert!(!text.contains(SECRET), "{text}");
    // Another organization's webhook on the same receiver gets none of acme's notifications.
    let (status, text) = put_webhook(
        &server,
        "globex",
        "main",
        &format!("{}/globex", receiver.url),
        "g",
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let listed = admin_get(&server, "acme", "/admin/v1/webhooks").await;
    assert_eq!(
        listed,
        json!({ "webhooks": [{ "id": "main", "url": format!("{}/acme", receiver.url) }] })
    );

    // The approval step is ready at start: its work item is opened for group account-manager.
    let started = start_run(&server, "live").await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    let work_item_id = started["workItems"][0]["id"].as_str().unwrap().to_owned();
    let received = receiver
        .wait_for(&run_id, "work_item_opened", |r| !r.is_empty())
        .await;
    assert_eq!(received.len(), 1, "{received:?}");
    let opened = &received[0];
    assert_eq!(opened.path, "/acme");
    assert_signed(opened, SECRET);
    let body = opened.json();
    let id = body["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with(&format!("{run_id}.")), "{id}");
    let opened_at = body["at"].as_str().unwrap().to_owned();
    assert_eq!(
        body,
        json!({
            "id": id, "organization": "acme", "runId": run_id, "process": PROCESS, "version": 1,
            "mode": "live", "at": opened_at,
            "type": "work_item_opened", "workItemId": work_item_id, "stepId": "confirm_request",
            "to": { "group": "account-manager" },
        })
    );

    // §2.2 due: past 2d the step is overdue; the assignee and the operators are notified.
    server.advance(PAST_DUE_SECONDS).await;
    let received = receiver
        .wait_for(&run_id, "two overdue notifications", |r| {
            of_type(r, "overdue").len() >= 2
        })
        .await;
    let overdue = of_type(&received, "overdue");
    assert_eq!(overdue.len(), 2, "{received:?}");
    let mut recipients: Vec<Value> = overdue
        .iter()
        .map(|r| {
            assert_signed(r, SECRET);
            let body = r.json();
            assert_eq!(body["stepId"], "confirm_request");
            assert_eq!(body["runId"], run_id);
            assert_eq!(body["mode"], "live");
            assert!(body["at"].as_str().unwrap() > opened_at.as_str(), "{body}");
            body["to"].clone()
        })
        .collect();
    recipients.sort_by_key(ToString::to_string);
    assert_eq!(
        recipients,
        [
            json!({ "group": "account-manager" }),
            json!({ "operators": true })
        ]
    );
    let ids: std::collections::HashSet<&str> =
        received.iter().map(|r| r.delivery.as_deref().unwrap()).collect();
    assert_eq!(ids.len(), 3, "every notification has its own id");

    // §3.5: cancelling ends the run; the run_ended notification follows.
    cancel(&server, &run_id).await;
    let received = receiver
        .wait_for(&run_id, "run_ended", |r| !of_type(r, "run_ended").is_empty())
        .await;
    let ended = of_type(&received, "run_ended");
    assert_eq!(ended.len(), 1);
    assert_signed(ended[0], SECRET);
    let body = ended[0].json();
    assert_eq!(body["state"], "cancelled");
    assert_eq!(body["outcome"], Value::Null);
    assert_eq!(received.len(), 4, "nothing delivered twice: {received:?}");

    assert!(
        receiver.all().iter().all(|r| r.path == "/acme"),
        "globex's webhook got acme's notifications"
    );
    let letters = admin_get(&server, "acme", "/admin/v1/dead-letters").await;
    assert_eq!(letters, json!({ "items": [] }));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_test_mode_run_delivers_no_notification() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example(PROCESS);
    let receiver = Receiver::start(200).await;
    let (status, text) = put_webhook(&server, "acme", "main", &receiver.url, SECRET).await;
    assert_eq!(status, 200, "{text}");

    // §3.3: the server MUST NOT send real notifications for a test-mode run. Each step of the
    // test run comes before the same step of a live run, whose delivery is the sentinel: the
    // outbox has taken the test run's notifications by then, so any sent would have arrived.
    let test = start_run(&server, "test").await;
    let test_run = test["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(test["workItems"].as_array().unwrap().len(), 1, "{test}");
    let live = start_run(&server, "live").await;
    let live_run = live["run"]["id"].as_str().unwrap().to_owned();
    receiver
        .wait_for(&live_run, "work_item_opened", |r| !r.is_empty())
        .await;
    server.advance(PAST_DUE_SECONDS).await;
    receiver
        .wait_for(&live_run, "overdue", |r| of_type(r, "overdue").len() == 2)
        .await;
    cancel(&server, &test_run).await;
    cancel(&server, &live_run).await;
    receiver
        .wait_for(&live_run, "run_ended", |r| !of_type(r, "run_ended").is_empty())
        .await;

    assert_eq!(
        receiver.of_run(&test_run).len(),
        0,
        "{:?}",
        receiver.of_run(&test_run)
    );
    assert_eq!(receiver.all().len(), 4);
    let letters = admin_get(&server, "acme", "/admin/v1/dead-letters").await;
    assert_eq!(letters, json!({ "items": [] }));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_receiver_is_retried_and_the_notification_becomes_a_dead_letter_to_redeliver_or_delete() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        data.path(),
        &[],
        &[
            ("AGENTPROCESS_NOTIFICATIONS__MAX_ATTEMPTS", "3"),
            ("AGENTPROCESS_NOTIFICATIONS__FIRST_BACKOFF_MS", "50"),
        ],
    );
    server.publish_example(PROCESS);
    let receiver = Receiver::start(500).await;
    let (status, text) = put_webhook(&server, "acme", "main", &receiver.url, SECRET).await;
    assert_eq!(status, 200, "{text}");

    let started = start_run(&server, "live").await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    let letters = loop {
        let letters = admin_get(&server, "acme", "/admin/v1/dead-letters").await;
        if !letters["items"].as_array().unwrap().is_empty() {
            break letters;
        }
        assert!(
            Instant::now() < deadline,
            "no dead letter within 10 s; {} attempts",
            receiver.all().len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // Three attempts of the same notification, each signed, then a dead letter holding it.
    let attempts = receiver.of_run(&run_id);
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    for attempt in &attempts {
        assert_signed(attempt, SECRET);
        assert_eq!(attempt.body, attempts[0].body);
    }
    let items = letters["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{letters}");
    assert_eq!(items[0]["notification"], attempts[0].json());
    assert_eq!(items[0]["notification"]["type"], "work_item_opened");
    assert_eq!(items[0]["attempts"], 3);
    let error = items[0]["error"].as_str().unwrap();
    assert!(
        error.contains(&receiver.url) && error.contains("HTTP 500"),
        "{error}"
    );
    // Another organization's operators do not see it.
    let theirs = admin_get(&server, "globex", "/admin/v1/dead-letters").await;
    assert_eq!(theirs, json!({ "items": [] }));

    // Once the receiver recovers, the next notification is delivered at the first attempt, and
    // the dead letter stays where it is.
    receiver.status.store(200, Ordering::SeqCst);
    cancel(&server, &run_id).await;
    let received = receiver
        .wait_for(&run_id, "run_ended", |r| !of_type(r, "run_ended").is_empty())
        .await;
    assert_eq!(received.len(), 4, "{received:?}");
    let letters = admin_get(&server, "acme", "/admin/v1/dead-letters?limit=10").await;
    assert_eq!(letters["items"].as_array().unwrap().len(), 1);

    // Another organization's operators cannot redeliver it: to them it does not exist.
    let id = items[0]["id"].as_str().unwrap().to_owned();
    let redeliver = format!("/admin/v1/dead-letters/{id}/redeliver");
    let (status, body) = admin_call(&server, "globex", reqwest::Method::POST, &redeliver).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("not_found")),
        "{body}"
    );
    // acme's operators redeliver it: the recovered receiver gets the same notification, signed,
    // as a fresh delivery; the dead letter is gone.
    let (status, body) = admin_call(&server, "acme", reqwest::Method::POST, &redeliver).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body, json!({ "id": id, "redelivered": true }));
    let received = receiver
        .wait_for(&run_id, "the redelivered notification", |r| r.len() == 5)
        .await;
    let redelivered = &received[4];
    assert_signed(redelivered, SECRET);
    assert_eq!(redelivered.json(), attempts[0].json());
    assert_eq!(redelivered.delivery, attempts[0].delivery);
    let letters = admin_get(&server, "acme", "/admin/v1/dead-letters").await;
    assert_eq!(letters, json!({ "items": [] }));
    let (status, body) = admin_call(&server, "acme", reqwest::Method::POST, &redeliver).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("not_found")),
        "{body}"
    );

    // A second notification fails into a dead letter, which operators delete: gone from the
    // list, and never attempted again.
    receiver.status.store(500, Ordering::SeqCst);
    let second = start_run(&server, "live").await;
    let second_run = second["run"]["id"].as_str().unwrap().to_owned();
    let letter = dead_letter_of(&server, &receiver, &second_run).await;
    assert_eq!(receiver.of_run(&second_run).len(), 3);
    receiver.status.store(200, Ordering::SeqCst);
    let path = format!("/admin/v1/dead-letters/{}", letter["id"].as_str().unwrap());
    let (status, body) = admin_call(&server, "acme", reqwest::Method::DELETE, &path).await;
    assert_eq!((status, body), (204, Value::Null));
    let letters = admin_get(&server, "acme", "/admin/v1/dead-letters").await;
    assert_eq!(letters, json!({ "items": [] }));
    let (status, body) = admin_call(&server, "acme", reqwest::Method::DELETE, &path).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("not_found")),
        "{body}"
    );
    // A sentinel: a notification that enters the outbox after the deletion is delivered, and the
    // deleted one was not attempted again before it.
    let sentinel = start_run(&server, "live").await;
    let sentinel_run = sentinel["run"]["id"].as_str().unwrap().to_owned();
    receiver
        .wait_for(&sentinel_run, "work_item_opened", |r| !r.is_empty())
        .await;
    assert_eq!(receiver.of_run(&second_run).len(), 3);
}
