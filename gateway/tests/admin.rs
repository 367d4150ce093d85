//! The operators' admin API over real HTTP on loopback, behind the real bearer layer with dev
//! tokens: who may use it, every endpoint and every error, every example process imported,
//! bound and published (spec §7), notification webhooks (whose secrets no answer carries) and
//! dead letters redelivered into the outbox or deleted, and organizations that never see or
//! touch each other's processes, webhooks or letters.

use agentprocess_gateway::auth::dev::{DevKey, DevTokenRequest};
use agentprocess_gateway::auth::require_bearer;
use agentprocess_gateway::{AdminParts, AuthConfig, Authenticator, IdentityKind, admin_routes};
use agentprocess_ids::{OrgId, RunId};
use agentprocess_process::Offer;
use agentprocess_run_actor::runtime::{Clock, LocalBlobs, Runtime, RuntimeConfig};
use agentprocess_store::{EmbeddedOptions, EmbeddedStore};
use agentprocess_testkit::examples;
use axum::middleware::from_fn_with_state;
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// A server that offers everything but `check-1` (no evaluator configured).
const NO_CHECK: Offer = Offer {
    check: false,
    ..Offer::EVERYTHING
};

/// The admin routes behind the bearer layer, on a free loopback port, over an in-memory store.
struct AdminServer {
    url: String,
    data_dir: tempfile::TempDir,
    store: Arc<EmbeddedStore>,
    _blobs: tempfile::TempDir,
}

async fn start(offer: Offer) -> AdminServer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let data_dir = tempfile::tempdir().unwrap();
    let blobs = tempfile::tempdir().unwrap();
    let authenticator = Arc::new(
        Authenticator::new(
            &AuthConfig::default(),
            &url,
            &agentprocess_gateway::auth::DevKeyLocation::DataDir(data_dir.path().to_owned()),
        )
        .unwrap(),
    );
    let store = Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default()));
    let runtime = Runtime::new(
        store.clone(),
        Arc::new(LocalBlobs::new(blobs.path())),
        RuntimeConfig::default(),
        Clock::system(),
    );
    let parts = AdminParts {
        catalog: runtime.catalog().clone(),
        store: runtime.store().clone(),
        keys: runtime.keys().clone(),
        hints: runtime.hints().clone(),
    };
    let app = admin_routes(parts, offer).route_layer(from_fn_with_state(authenticator, require_bearer));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    AdminServer {
        url,
        data_dir,
        store,
        _blobs: blobs,
    }
}

impl AdminServer {
    fn token(&self, organization: &str, kind: IdentityKind, operator: bool) -> String {
        DevKey::load_or_create(self.data_dir.path()).unwrap().mint(
            &self.url,
            &DevTokenRequest {
                organization: organization.into(),
                kind,
                operator,
                ttl: Duration::from_secs(600),
            },
        )
    }

    /// An operator (a person) of `organization`.
    fn operator(&self, organization: &str) -> String {
        self.token(organization, person("ops@acme.test"), true)
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> Answer {
        let mut request = reqwest::Client::new()
            .request(method, format!("{}{path}", self.url))
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        Answer {
            status,
            content_type,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
            text,
        }
    }

    async fn get(&self, path: &str, token: &str) -> Answer {
        self.call(Method::GET, path, Some(token), "").await
    }

    async fn import(&self, token: &str, source: impl Into<reqwest::Body>) -> Answer {
        self.call(Method::POST, "/admin/v1/processes", Some(token), source)
            .await
    }

    async fn bind(&self, token: &str, name: &str, bindings: Value) -> Answer {
        self.call(
            Method::PUT,
            &format!("/admin/v1/processes/{name}/bindings"),
            Some(token),
            json!({ "bindings": bindings }).to_string(),
        )
        .await
    }

    async fn publish(&self, token: &str, name: &str) -> Answer {
        self.call(
            Method::POST,
            &format!("/admin/v1/processes/{name}/publish"),
            Some(token),
            "",
        )
        .await
    }
}

#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: Option<String>,
    body: Value,
    text: String,
}

impl Answer {
    /// Asserts the status and, for errors, the error shape and code.
    fn expect(&self, status: u16, code: Option<&str>) -> &Value {
        assert_eq!(self.status, status, "{}", self.text);
        assert_eq!(
            self.content_type.as_deref(),
            Some("application/json"),
            "{}",
            self.text
        );
        if let Some(code) = code {
            assert_eq!(self.body["error"]["code"], code, "{}", self.text);
            assert!(
                !self.body["error"]["message"].as_str().unwrap().is_empty(),
                "{}",
                self.text
            );
        }
        &self.body
    }

    fn issues(&self) -> Vec<String> {
        self.body["error"]["issues"]
            .as_array()
            .unwrap_or_else(|| panic!("no issues: {}", self.text))
            .iter()
            .map(|i| i.as_str().unwrap().to_owned())
            .collect()
    }
}

fn person(email: &str) -> IdentityKind {
    IdentityKind::Person {
        email: email.into(),
        groups: vec!["g_ops".into()],
    }
}

/// The source of our example process `name` (`examples/NAME/PROCESS.md`).
fn example(name: &str) -> Vec<u8> {
    std::fs::read(agentprocess_testkit::example(name)).unwrap()
}

/// Every role of a draft view bound to `g_<role>`.
fn bind_all(draft: &Value) -> Value {
    let bindings: serde_json::Map<String, Value> = draft["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|role| {
            let role = role.as_str().unwrap();
            (role.to_owned(), json!(format!("g_{role}")))
        })
        .collect();
    Value::Object(bindings)
}

const PATHS: [(&str, &str); 5] = [
    ("POST", "/admin/v1/processes"),
    ("GET", "/admin/v1/processes"),
    ("GET", "/admin/v1/processes/release-notes"),
    ("PUT", "/admin/v1/processes/release-notes/bindings"),
    ("POST", "/admin/v1/processes/release-notes/publish"),
];

#[tokio::test]
async fn without_a_token_the_bearer_layer_answers_401() {
    let server = start(NO_CHECK).await;
    for (method, path) in PATHS {
        let answer = server
            .call(method.parse().unwrap(), path, None, example("release-notes"))
            .await;
        assert_eq!(answer.status, 401, "{method} {path}: {}", answer.text);
    }
    let answer = server
        .call(Method::GET, "/admin/v1/processes", Some("not-a-jwt"), "")
        .await;
    assert_eq!(answer.status, 401);
}

#[tokio::test]
async fn only_operators_may_use_it() {
    let server = start(NO_CHECK).await;
    let operator = server.operator("acme");
    server
        .import(&operator, example("release-notes"))
        .await
        .expect(201, None);
    let not_operators = [
        server.token("acme", person("mira@acme.test"), false),
        server.token("acme", IdentityKind::Agent { id: "a_bot".into() }, false),
    ];
    for token in &not_operators {
        for (method, path) in PATHS {
            let body = if method == "PUT" {
                json!({ "bindings": { "product-manager": "g" } })
                    .to_string()
                    .into_bytes()
            } else {
                example("release-notes")
            };
            let answer = server
                .call(method.parse().unwrap(), path, Some(token), body)
                .await;
            answer.expect(403, Some("forbidden"));
            assert!(answer.text.contains("operator"), "{}", answer.text);
        }
    }
    // Nothing they sent changed anything.
    let listed = server.get("/admin/v1/processes", &operator).await;
    let entry = &listed.expect(200, None)["processes"][0];
    assert_eq!(entry["draft"]["bindings"], json!({}));
    assert_eq!(entry["latestVersion"], Value::Null);
    // An agent with operator rights is an operator.
    let agent_operator = server.token("acme", IdentityKind::Agent { id: "a_ci".into() }, true);
    server
        .get("/admin/v1/processes", &agent_operator)
        .await
        .expect(200, None);
}

#[tokio::test]
async fn every_example_imports_binds_publishes_and_lists() {
    let server = start(Offer::EVERYTHING).await;
    let token = server.operator("acme");
    let mut names = Vec::new();
    let examples = examples();
    assert!(
        examples.len() >= 12,
        "at least twelve examples, found {}",
        examples.len()
    );
    for (folder, path) in examples {
        let source = std::fs::read(&path).unwrap();
        let loaded = agentprocess_process::load(&source, &Offer::EVERYTHING).unwrap();
        let imported = server.import(&token, source).await;
        let body = imported.expect(201, None);
        let name = body["name"].as_str().unwrap().to_owned();
        assert_eq!(name, folder);
        let draft = &body["draft"];
        assert_eq!(draft["contentHash"], loaded.hash.to_hex());
        let roles: Vec<&str> = loaded.process.role_names();
        assert_eq!(draft["roles"], json!(roles));
        assert_eq!(draft["unbound"], json!(roles));
        assert_eq!(draft["bindings"], json!({}));

        let bound = server.bind(&token, &name, bind_all(draft)).await;
        let body = bound.expect(200, None);
        assert_eq!(body["name"], name);
        assert_eq!(body["draft"]["unbound"], json!([]));
        assert_eq!(body["draft"]["bindings"], bind_all(draft));

        let published = server.publish(&token, &name).await;
        let body = published.expect(201, None);
        assert_eq!(body["name"], name);
        assert_eq!(body["version"], 1);
        assert_eq!(body["contentHash"], loaded.hash.to_hex());
        assert_eq!(body["roles"], bind_all(draft));
        assert_eq!(body["publishedBy"], "ops@acme.test");
        assert!(
            body["publishedAt"]
                .as_str()
                .is_some_and(|at| at.starts_with("20") && at.ends_with('Z'))
        );
        names.push(name);
    }
    let listed = server.get("/admin/v1/processes", &token).await;
    let processes = listed.expect(200, None)["processes"].as_array().unwrap().clone();
    let listed_names: Vec<&str> = processes.iter().map(|p| p["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(listed_names, names);
    for process in &processes {
        assert_eq!(process["latestVersion"], 1);
        assert_eq!(process["versions"].as_array().unwrap().len(), 1);
        assert!(process["description"].as_str().is_some_and(|d| !d.is_empty()));
        assert_eq!(process["draft"]["unbound"], json!([]));
        let version = &process["versions"][0];
        for field in ["version", "contentHash", "publishedAt", "roles"] {
            assert!(!version[field].is_null(), "{field}: {version}");
        }
    }
    let one = server.get("/admin/v1/processes/partner-screening", &token).await;
    let entry = one.expect(200, None);
    assert_eq!(
        entry,
        &processes
            .iter()
            .find(|p| p["name"] == "partner-screening")
            .cloned()
            .unwrap()
    );
}

#[tokio::test]
async fn an_invalid_process_is_refused_with_every_issue() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    let source = "---\nname: Bad_Name\ndescription: x\ncolour: blue\nsteps:\n  - id: a\n    agent: Do it.\n    next: nowhere\n---\n";
    let answer = server.import(&token, source).await;
    answer.expect(422, Some("invalid"));
    let issues = answer.issues();
    assert!(issues.len() >= 3, "{issues:?}");
    assert!(issues.iter().any(|i| i.starts_with("name")), "{issues:?}");
    assert!(issues.iter().any(|i| i.contains("colour")), "{issues:?}");
    assert!(issues.iter().any(|i| i.contains("nowhere")), "{issues:?}");

    // Not a PROCESS.md at all, and not even text.
    let answer = server.import(&token, "hello").await;
    answer.expect(422, Some("invalid"));
    assert!(!answer.issues().is_empty());
    server
        .import(&token, vec![0xff, 0xfe, 0x00])
        .await
        .expect(422, Some("invalid"));

    // A profile this server does not offer: check-1 without an evaluator.
    let answer = server.import(&token, example("partner-screening")).await;
    answer.expect(422, Some("invalid"));
    assert!(
        answer.issues().iter().any(|i| i.contains("check")),
        "{:?}",
        answer.issues()
    );

    let listed = server.get("/admin/v1/processes", &token).await;
    assert_eq!(listed.expect(200, None)["processes"], json!([]));
}

#[tokio::test]
async fn bindings_errors() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    server
        .import(&token, example("purchase-request"))
        .await
        .expect(201, None);
    let path = "/admin/v1/processes/purchase-request/bindings";

    let answer = server
        .bind(
            &token,
            "purchase-request",
            json!({ "executive": "g_executive", "janitor": "g_x", "budget-owner": "" }),
        )
        .await;
    answer.expect(422, Some("invalid"));
    let issues = answer.issues();
    assert_eq!(issues.len(), 2, "{issues:?}");
    assert!(issues[0].starts_with("bindings.janitor:"), "{issues:?}");
    assert!(issues[1].starts_with("bindings.budget-owner:"), "{issues:?}");

    for malformed in [
        "{\"bindings\": {\"executive\": ",
        "[1, 2]",
        "{\"bindings\": [\"executive\"]}",
        "{\"bindings\": {\"executive\": 3}}",
        "{\"roles\": {}}",
        "",
    ] {
        let answer = server.call(Method::PUT, path, Some(&token), malformed).await;
        answer.expect(400, Some("invalid"));
        assert!(answer.text.contains("must be JSON like"), "{}", answer.text);
    }

    let answer = server
        .bind(&token, "no-such-process", json!({ "executive": "g" }))
        .await;
    answer.expect(404, Some("not_found"));

    // Nothing applied by any of these.
    let entry = server.get("/admin/v1/processes/purchase-request", &token).await;
    assert_eq!(entry.expect(200, None)["draft"]["bindings"], json!({}));

    let answer = server
        .bind(&token, "purchase-request", json!({ "executive": "g_executive" }))
        .await;
    assert_eq!(
        answer.expect(200, None)["draft"]["unbound"],
        json!(["budget-owner"])
    );
}

#[tokio::test]
async fn publish_errors() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    server
        .import(&token, example("policy-update"))
        .await
        .expect(201, None);

    let answer = server.publish(&token, "policy-update").await;
    answer.expect(422, Some("invalid"));
    let issues = answer.issues();
    assert_eq!(issues.len(), 3, "one per unbound role: {issues:?}");
    for role in ["policy-owner", "security-reviewer", "compliance-reviewer"] {
        assert!(
            issues.iter().any(|i| i.starts_with(&format!("bindings.{role}:"))),
            "{issues:?}"
        );
    }

    server
        .publish(&token, "nothing-here")
        .await
        .expect(404, Some("not_found"));

    let draft = server.get("/admin/v1/processes/policy-update", &token).await.body["draft"].clone();
    server
        .bind(&token, "policy-update", bind_all(&draft))
        .await
        .expect(200, None);
    assert_eq!(
        server.publish(&token, "policy-update").await.expect(201, None)["version"],
        1
    );
    // The same content and bindings again: refused, no version 2.
    server
        .publish(&token, "policy-update")
        .await
        .expect(409, Some("conflict"));
    // New bindings: version 2.
    server
        .bind(
            &token,
            "policy-update",
            json!({ "compliance-reviewer": "g_compliance_eu" }),
        )
        .await
        .expect(200, None);
    assert_eq!(
        server.publish(&token, "policy-update").await.expect(201, None)["version"],
        2
    );
    let entry = server.get("/admin/v1/processes/policy-update", &token).await;
    let entry = entry.expect(200, None);
    assert_eq!(entry["latestVersion"], 2);
    assert_eq!(
        entry["versions"][0]["roles"]["compliance-reviewer"],
        "g_compliance-reviewer"
    );
    assert_eq!(
        entry["versions"][1]["roles"]["compliance-reviewer"],
        "g_compliance_eu"
    );
}

#[tokio::test]
async fn another_organization_sees_nothing() {
    let server = start(NO_CHECK).await;
    let acme = server.operator("acme");
    server
        .import(&acme, example("release-notes"))
        .await
        .expect(201, None);
    server
        .bind(
            &acme,
            "release-notes",
            json!({ "product-manager": "g_product-managers" }),
        )
        .await
        .expect(200, None);
    server.publish(&acme, "release-notes").await.expect(201, None);

    let globex = server.operator("globex");
    let listed = server.get("/admin/v1/processes", &globex).await;
    assert_eq!(listed.expect(200, None)["processes"], json!([]));
    server
        .get("/admin/v1/processes/release-notes", &globex)
        .await
        .expect(404, Some("not_found"));
    server
        .bind(&globex, "release-notes", json!({ "product-manager": "g_mine" }))
        .await
        .expect(404, Some("not_found"));
    server
        .publish(&globex, "release-notes")
        .await
        .expect(404, Some("not_found"));

    let ours = server.get("/admin/v1/processes/release-notes", &acme).await;
    let ours = ours.expect(200, None);
    assert_eq!(ours["versions"].as_array().unwrap().len(), 1);
    assert_eq!(
        ours["draft"]["bindings"],
        json!({ "product-manager": "g_product-managers" })
    );
}

#[tokio::test]
async fn an_unknown_process_is_404() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    let answer = server.get("/admin/v1/processes/nope", &token).await;
    answer.expect(404, Some("not_found"));
    assert!(answer.text.contains("nope"));
}

#[tokio::test]
async fn an_oversized_body_is_413() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    // Just over the document limit, within the body limit: refused by validation, with its issue.
    let over_document_limit = vec![b'a'; agentprocess_process::parse::MAX_DOCUMENT_BYTES + 1];
    let answer = server.import(&token, over_document_limit).await;
    answer.expect(422, Some("invalid"));
    assert!(
        answer.issues()[0].contains("the limit is"),
        "{:?}",
        answer.issues()
    );

    let huge = vec![b'a'; 2 << 20];
    let answer = server.import(&token, huge).await;
    answer.expect(413, Some("invalid"));
    assert!(answer.text.contains("larger than the limit"), "{}", answer.text);
    let answer = server
        .call(
            Method::PUT,
            "/admin/v1/processes/x/bindings",
            Some(&token),
            vec![b' '; 2 << 20],
        )
        .await;
    answer.expect(413, Some("invalid"));
}

#[tokio::test]
async fn a_failed_store_is_503_unavailable() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    server
        .import(&token, example("release-notes"))
        .await
        .expect(201, None);
    server.store.close().await;
    for (method, path) in PATHS {
        let body = if method == "PUT" {
            json!({ "bindings": { "product-manager": "g" } })
                .to_string()
                .into_bytes()
        } else {
            example("release-notes")
        };
        let answer = server
            .call(method.parse().unwrap(), path, Some(&token), body)
            .await;
        answer.expect(503, Some("unavailable"));
        assert!(answer.text.contains("try again"), "{}", answer.text);
    }
}

// Webhooks and dead letters.

const SECRET: &str = "whsec-do-not-echo-0123456789";

/// The id of the dead letter `bury("acme", 1, "r1")` writes, as the list shows it.
const R1_LETTER: &str = "000000000000000100000000000000017231";

/// The endpoints of webhooks and dead letters, each with a valid body.
fn notification_paths() -> [(Method, String, String); 6] {
    let webhook = json!({ "url": "https://hooks.acme.test/ap", "secret": SECRET }).to_string();
    [
        (Method::PUT, "/admin/v1/webhooks/main".into(), webhook),
        (Method::GET, "/admin/v1/webhooks".into(), String::new()),
        (Method::DELETE, "/admin/v1/webhooks/main".into(), String::new()),
        (Method::GET, "/admin/v1/dead-letters".into(), String::new()),
        (
            Method::POST,
            format!("/admin/v1/dead-letters/{R1_LETTER}/redeliver"),
            String::new(),
        ),
        (
            Method::DELETE,
            format!("/admin/v1/dead-letters/{R1_LETTER}"),
            String::new(),
        ),
    ]
}

impl AdminServer {
    async fn put_webhook(&self, token: &str, id: &str, body: Value) -> Answer {
        self.call(
            Method::PUT,
            &format!("/admin/v1/webhooks/{id}"),
            Some(token),
            body.to_string(),
        )
        .await
    }

    async fn delete_webhook(&self, token: &str, id: &str) -> Answer {
        self.call(
            Method::DELETE,
            &format!("/admin/v1/webhooks/{id}"),
            Some(token),
            "",
        )
        .await
    }

    fn keys(&self) -> agentprocess_store::keys::Keys {
        agentprocess_store::keys::Keys::new(&RuntimeConfig::default().cluster)
    }

    /// The webhooks of `organization` as the scheduler reads them, secrets included.
    async fn stored_webhooks(
        &self,
        organization: &str,
    ) -> Vec<(String, agentprocess_run_actor::runtime::Webhook)> {
        agentprocess_run_actor::runtime::webhooks(
            self.store.as_ref(),
            &self.keys(),
            &OrgId::from(organization),
        )
        .await
        .unwrap()
    }

    /// The outbox, as the scheduler reads it: (key, notification).
    async fn outbox(&self) -> Vec<(Vec<u8>, Value)> {
        use agentprocess_store::{RangeRequest, Store};
        self.store
            .range(RangeRequest::new(self.keys().outbox_entries()))
            .await
            .unwrap()
            .kvs
            .into_iter()
            .map(|kv| (kv.key, serde_json::from_slice(&kv.value).unwrap()))
            .collect()
    }

    async fn redeliver(&self, token: &str, id: &str) -> Answer {
        self.call(
            Method::POST,
            &format!("/admin/v1/dead-letters/{id}/redeliver"),
            Some(token),
            "",
        )
        .await
    }

    async fn delete_dead_letter(&self, token: &str, id: &str) -> Answer {
        self.call(
            Method::DELETE,
            &format!("/admin/v1/dead-letters/{id}"),
            Some(token),
            "",
        )
        .await
    }

    /// Puts a dead letter as the scheduler's outbox does after its last attempt.
    async fn bury(&self, organization: &str, created_at_ms: u64, run_id: &str) {
        use agentprocess_store::{Store, Txn, TxnOp};
        let letter = json!({
            "notification": { "id": format!("{run_id}.1"), "organization": organization, "runId": run_id },
            "attempts": 3,
            "error": "https://hooks.acme.test/ap: HTTP 500 Internal Server Error",
        });
        self.store
            .txn(Txn::new().and_then([
                TxnOp::put(
                    self.keys().dead_letter(
                        &OrgId::from(organization),
                        created_at_ms,
                        &RunId::from(run_id),
                        1,
                    ),
                    letter.to_string(),
                ),
            ]))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn webhooks_are_stored_listed_and_removed_and_their_secret_is_never_returned() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    let listed = server.get("/admin/v1/webhooks", &token).await;
    assert_eq!(listed.expect(200, None), &json!({ "webhooks": [] }));

    let stored = server
        .put_webhook(
            &token,
            "main",
            json!({ "url": "https://hooks.acme.test/ap", "secret": SECRET }),
        )
        .await;
    assert_eq!(
        stored.expect(200, None),
        &json!({ "id": "main", "url": "https://hooks.acme.test/ap" })
    );
    assert!(!stored.text.contains(SECRET), "{}", stored.text);
    server
        .put_webhook(
            &token,
            "audit",
            json!({ "url": "http://127.0.0.1:9/audit", "secret": "other" }),
        )
        .await
        .expect(200, None);
    // PUT again replaces: a new url and a rotated secret.
    server
        .put_webhook(
            &token,
            "main",
            json!({ "url": "https://hooks.acme.test/v2", "secret": "rotated" }),
        )
        .await
        .expect(200, None);

    let listed = server.get("/admin/v1/webhooks", &token).await;
    assert_eq!(
        listed.expect(200, None),
        &json!({ "webhooks": [
            { "id": "audit", "url": "http://127.0.0.1:9/audit" },
            { "id": "main", "url": "https://hooks.acme.test/v2" },
        ] })
    );
    assert!(
        !listed.text.contains("rotated") && !listed.text.contains("other"),
        "{}",
        listed.text
    );
    // The scheduler signs with the secret that was given.
    let secrets: Vec<(String, String)> = server
        .stored_webhooks("acme")
        .await
        .into_iter()
        .map(|(id, webhook)| (id, webhook.secret))
        .collect();
    assert_eq!(
        secrets,
        [
            ("audit".into(), "other".into()),
            ("main".into(), "rotated".into())
        ]
    );

    let removed = server.delete_webhook(&token, "audit").await;
    assert_eq!(removed.status, 204, "{}", removed.text);
    assert_eq!(removed.text, "");
    let again = server.delete_webhook(&token, "audit").await;
    again.expect(404, Some("not_found"));
    assert!(again.text.contains("audit"), "{}", again.text);
    let listed = server.get("/admin/v1/webhooks", &token).await;
    assert_eq!(
        listed.expect(200, None)["webhooks"],
        json!([{ "id": "main", "url": "https://hooks.acme.test/v2" }])
    );
}

#[tokio::test]
async fn an_invalid_webhook_is_refused_with_every_issue_and_nothing_is_stored() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    let refused = server
        .put_webhook(
            &token,
            "main",
            json!({ "url": "ftp://hooks.acme.test", "secret": "", "events": [] }),
        )
        .await;
    refused.expect(422, Some("invalid"));
    assert_eq!(
        refused.issues(),
        [
            "events: unknown field; a webhook has url and secret",
            "url \"ftp://hooks.acme.test\" is not an absolute http(s) URL",
            "secret must not be empty",
        ]
    );
    assert_eq!(
        refused.body["error"]["message"],
        "3 issue(s) found; nothing was changed"
    );

    let refused = server
        .put_webhook(&token, "main", json!({ "url": "/relative" }))
        .await;
    refused.expect(422, Some("invalid"));
    assert_eq!(
        refused.issues(),
        [
            "url \"/relative\" is not an absolute http(s) URL",
            "secret is required: deliveries are signed with it",
        ]
    );
    let refused = server
        .put_webhook(
            &token,
            "no%20spaces",
            json!({ "url": "https://h.test", "secret": "s" }),
        )
        .await;
    refused.expect(422, Some("invalid"));
    assert_eq!(
        refused.issues(),
        ["id \"no spaces\" must be 1 to 64 letters, digits, '.', '_' or '-'"]
    );

    let malformed = server
        .call(Method::PUT, "/admin/v1/webhooks/main", Some(&token), "{ not json")
        .await;
    malformed.expect(400, Some("invalid"));
    assert!(malformed.text.contains("must be JSON"), "{}", malformed.text);
    let too_large = server
        .call(
            Method::PUT,
            "/admin/v1/webhooks/main",
            Some(&token),
            vec![b' '; 2 << 20],
        )
        .await;
    too_large.expect(413, Some("invalid"));

    assert!(server.stored_webhooks("acme").await.is_empty());
    let listed = server.get("/admin/v1/webhooks", &token).await;
    assert_eq!(listed.expect(200, None)["webhooks"], json!([]));
}

#[tokio::test]
async fn only_operators_may_manage_webhooks_and_read_dead_letters() {
    let server = start(NO_CHECK).await;
    let operator = server.operator("acme");
    server
        .put_webhook(
            &operator,
            "main",
            json!({ "url": "https://hooks.acme.test/ap", "secret": SECRET }),
        )
        .await
        .expect(200, None);
    server.bury("acme", 1, "r1").await;
    let not_operators = [
        server.token("acme", person("mira@acme.test"), false),
        server.token("acme", IdentityKind::Agent { id: "a_bot".into() }, false),
    ];
    for (method, path, body) in notification_paths() {
        let answer = server.call(method.clone(), &path, None, body.clone()).await;
        assert_eq!(answer.status, 401, "{method} {path}: {}", answer.text);
        for token in &not_operators {
            let answer = server
                .call(method.clone(), &path, Some(token), body.clone())
                .await;
            answer.expect(403, Some("forbidden"));
            assert!(!answer.text.contains("hooks.acme.test"), "{}", answer.text);
            assert!(!answer.text.contains("r1"), "{}", answer.text);
        }
    }
    // Nothing they sent changed anything.
    let stored = server.stored_webhooks("acme").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].1.secret, SECRET);
    let letters = server.get("/admin/v1/dead-letters", &operator).await;
    assert_eq!(letters.expect(200, None)["items"][0]["id"], R1_LETTER);
    assert!(server.outbox().await.is_empty());
}

#[tokio::test]
async fn dead_letters_are_listed_oldest_first_up_to_the_limit() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    let listed = server.get("/admin/v1/dead-letters", &token).await;
    assert_eq!(listed.expect(200, None), &json!({ "items": [] }));

    for (created_at_ms, run_id) in [(30, "r3"), (10, "r1"), (20, "r2")] {
        server.bury("acme", created_at_ms, run_id).await;
    }
    let listed = server.get("/admin/v1/dead-letters", &token).await;
    let items = listed.expect(200, None)["items"].as_array().unwrap().clone();
    let runs: Vec<&str> = items
        .iter()
        .map(|item| item["notification"]["runId"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ["r1", "r2", "r3"]);
    assert_eq!(items[0]["attempts"], 3);
    assert_eq!(
        items[0]["error"],
        "https://hooks.acme.test/ap: HTTP 500 Internal Server Error"
    );
    let first_two = server.get("/admin/v1/dead-letters?limit=2", &token).await;
    assert_eq!(first_two.expect(200, None)["items"], json!(items[..2].to_vec()));
    // The default is 50: 55 letters give 50.
    for n in 0..52 {
        server.bury("acme", 100 + n, &format!("bulk{n}")).await;
    }
    let listed = server.get("/admin/v1/dead-letters", &token).await;
    assert_eq!(listed.expect(200, None)["items"].as_array().unwrap().len(), 50);
    let listed = server.get("/admin/v1/dead-letters?limit=500", &token).await;
    assert_eq!(listed.expect(200, None)["items"].as_array().unwrap().len(), 55);

    for query in ["limit=0", "limit=501", "limit=ten", "limit=-1", "page=2"] {
        let answer = server
            .get(&format!("/admin/v1/dead-letters?{query}"), &token)
            .await;
        answer.expect(400, Some("invalid"));
        assert!(answer.text.contains("from 1 to 500"), "{query}: {}", answer.text);
    }
}

#[tokio::test]
async fn another_organization_sees_no_webhooks_or_dead_letters() {
    let server = start(NO_CHECK).await;
    let acme = server.operator("acme");
    server
        .put_webhook(
            &acme,
            "main",
            json!({ "url": "https://hooks.acme.test/ap", "secret": SECRET }),
        )
        .await
        .expect(200, None);
    server.bury("acme", 1, "r-acme").await;

    let globex = server.operator("globex");
    let listed = server.get("/admin/v1/webhooks", &globex).await;
    assert_eq!(listed.expect(200, None)["webhooks"], json!([]));
    let letters = server.get("/admin/v1/dead-letters", &globex).await;
    assert_eq!(letters.expect(200, None)["items"], json!([]));
    server
        .delete_webhook(&globex, "main")
        .await
        .expect(404, Some("not_found"));
    // The same id in globex is globex's own webhook.
    server
        .put_webhook(
            &globex,
            "main",
            json!({ "url": "https://hooks.globex.test", "secret": "g" }),
        )
        .await
        .expect(200, None);

    let ours = server.get("/admin/v1/webhooks", &acme).await;
    assert_eq!(
        ours.expect(200, None)["webhooks"],
        json!([{ "id": "main", "url": "https://hooks.acme.test/ap" }])
    );
    assert_eq!(server.stored_webhooks("acme").await[0].1.secret, SECRET);
    let letters = server.get("/admin/v1/dead-letters", &acme).await;
    assert_eq!(
        letters.expect(200, None)["items"][0]["notification"]["runId"],
        "r-acme"
    );
}

#[tokio::test]
async fn webhooks_and_dead_letters_answer_503_when_the_store_fails() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    server.store.close().await;
    for (method, path, body) in notification_paths() {
        let answer = server.call(method.clone(), &path, Some(&token), body).await;
        answer.expect(503, Some("unavailable"));
        assert!(
            answer.text.contains("try again"),
            "{method} {path}: {}",
            answer.text
        );
    }
}

#[tokio::test]
async fn a_dead_letter_is_redelivered_into_the_outbox_once_or_deleted() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    server.bury("acme", 1, "r1").await;
    server.bury("acme", 2, "r2").await;
    let listed = server.get("/admin/v1/dead-letters", &token).await;
    let items = listed.expect(200, None)["items"].as_array().unwrap().clone();
    let ids: Vec<&str> = items.iter().map(|item| item["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], R1_LETTER);
    assert_eq!(
        ids[0],
        agentprocess_run_actor::runtime::DeadLetterId {
            created_at_ms: 1,
            run_id: "r1".into(),
            seq: 1
        }
        .encode()
    );
    assert_ne!(ids[0], ids[1]);
    assert_eq!(items[0]["notification"]["runId"], "r1");

    let redelivered = server.redeliver(&token, ids[0]).await;
    assert_eq!(
        redelivered.expect(202, None),
        &json!({ "id": R1_LETTER, "redelivered": true })
    );
    // The notification is back in the outbox, under the key it was buried from, as it was.
    assert_eq!(
        server.outbox().await,
        [(
            server
                .keys()
                .outbox(1, &OrgId::from("acme"), &RunId::from("r1"), 1),
            items[0]["notification"].clone()
        )]
    );
    let listed = server.get("/admin/v1/dead-letters", &token).await;
    assert_eq!(listed.expect(200, None)["items"], json!([items[1].clone()]));
    // Once: the dead letter is gone.
    let again = server.redeliver(&token, ids[0]).await;
    again.expect(404, Some("not_found"));
    assert!(again.text.contains(R1_LETTER), "{}", again.text);
    server
        .delete_dead_letter(&token, ids[0])
        .await
        .expect(404, Some("not_found"));

    let deleted = server.delete_dead_letter(&token, ids[1]).await;
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    assert_eq!(deleted.text, "");
    server
        .delete_dead_letter(&token, ids[1])
        .await
        .expect(404, Some("not_found"));
    server
        .redeliver(&token, ids[1])
        .await
        .expect(404, Some("not_found"));
    let listed = server.get("/admin/v1/dead-letters", &token).await;
    assert_eq!(listed.expect(200, None), &json!({ "items": [] }));
    assert_eq!(
        server.outbox().await.len(),
        1,
        "deleting put nothing in the outbox"
    );
}

#[tokio::test]
async fn a_malformed_or_unknown_dead_letter_id_is_refused_and_nothing_changes() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    server.bury("acme", 1, "r1").await;
    let unknown = agentprocess_run_actor::runtime::DeadLetterId {
        created_at_ms: 1,
        run_id: "r9".into(),
        seq: 1,
    }
    .encode();
    server
        .redeliver(&token, &unknown)
        .await
        .expect(404, Some("not_found"));
    server
        .delete_dead_letter(&token, &unknown)
        .await
        .expect(404, Some("not_found"));
    for malformed in [
        "r1".to_string(),
        // Upper-case hex: created at 10 ms.
        R1_LETTER.replacen("0000000000000001", "000000000000000A", 1),
        R1_LETTER[..32].to_string(),
        format!("{R1_LETTER}0"),
        "..%2F..%2Fwebhook%2Fmain".to_string(),
    ] {
        let answer = server.redeliver(&token, &malformed).await;
        answer.expect(400, Some("invalid"));
        assert!(answer.text.contains("not a dead letter id"), "{}", answer.text);
        server
            .delete_dead_letter(&token, &malformed)
            .await
            .expect(400, Some("invalid"));
    }
    // A dead letter that holds no notification can be deleted, not redelivered.
    {
        use agentprocess_store::{Store, Txn, TxnOp};
        server
            .store
            .txn(
                Txn::new().and_then([TxnOp::put(
                    server
                        .keys()
                        .dead_letter(&OrgId::from("acme"), 5, &RunId::from("broken"), 1),
                    r#"{"attempts": 1}"#,
                )]),
            )
            .await
            .unwrap();
    }
    let broken = agentprocess_run_actor::runtime::DeadLetterId {
        created_at_ms: 5,
        run_id: "broken".into(),
        seq: 1,
    }
    .encode();
    server
        .redeliver(&token, &broken)
        .await
        .expect(409, Some("conflict"));
    assert!(server.outbox().await.is_empty());
    let listed = server.get("/admin/v1/dead-letters", &token).await;
    assert_eq!(listed.expect(200, None)["items"][0]["id"], R1_LETTER);
    let deleted = server.delete_dead_letter(&token, &broken).await;
    assert_eq!(deleted.status, 204, "{}", deleted.text);
}

#[tokio::test]
async fn another_organization_can_neither_redeliver_nor_delete_a_dead_letter() {
    let server = start(NO_CHECK).await;
    server.bury("acme", 1, "r1").await;
    let globex = server.operator("globex");
    let answer = server.redeliver(&globex, R1_LETTER).await;
    answer.expect(404, Some("not_found"));
    server
        .delete_dead_letter(&globex, R1_LETTER)
        .await
        .expect(404, Some("not_found"));
    assert!(server.outbox().await.is_empty());

    let acme = server.operator("acme");
    let letters = server.get("/admin/v1/dead-letters", &acme).await;
    assert_eq!(letters.expect(200, None)["items"][0]["id"], R1_LETTER);
    // globex's own letter of the same run id and time is globex's alone.
    server.bury("globex", 1, "r1").await;
    server.redeliver(&globex, R1_LETTER).await.expect(202, None);
    assert_eq!(
        server
            .outbox()
            .await
            .into_iter()
            .map(|(key, _)| key)
            .collect::<Vec<_>>(),
        [server
            .keys()
            .outbox(1, &OrgId::from("globex"), &RunId::from("r1"), 1)]
    );
    let letters = server.get("/admin/v1/dead-letters", &acme).await;
    assert_eq!(letters.expect(200, None)["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn two_versions_and_the_draft_are_diffed_line_by_line() {
    let server = start(NO_CHECK).await;
    let token = server.operator("acme");
    let first = example("purchase-request");
    let draft = server.import(&token, first.clone()).await.expect(201, None)["draft"].clone();
    server
        .bind(&token, "purchase-request", bind_all(&draft))
        .await
        .expect(200, None);
    server.publish(&token, "purchase-request").await.expect(201, None);
    let text = String::from_utf8(first).unwrap();
    let body_line = text
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap()
        .to_owned();
    let second = text.replace(&body_line, "A changed last line of the body.");
    server.import(&token, second.clone()).await.expect(201, None);
    server.publish(&token, "purchase-request").await.expect(201, None);
    let third = second.replace("A changed last line of the body.", "The draft's own last line.");
    server.import(&token, third).await.expect(201, None);

    let answer = server
        .get("/admin/v1/processes/purchase-request/diff?from=1&to=2", &token)
        .await;
    let body = answer.expect(200, None);
    assert_eq!(body["from"]["version"], 1);
    assert_eq!(body["to"]["version"], 2);
    assert_ne!(body["from"]["contentHash"], body["to"]["contentHash"]);
    let diff = &body["diff"];
    assert_eq!(
        (
            diff["identical"].as_bool(),
            diff["added"].as_u64(),
            diff["removed"].as_u64()
        ),
        (Some(false), Some(1), Some(1))
    );
    let changed: Vec<(&str, &str)> = diff["hunks"][0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|line| line["op"] != "equal")
        .map(|line| (line["op"].as_str().unwrap(), line["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        changed,
        [
            ("delete", body_line.as_str()),
            ("insert", "A changed last line of the body.")
        ]
    );
    assert!(
        diff["unified"]
            .as_str()
            .unwrap()
            .starts_with("--- purchase-request v1\n+++ purchase-request v2\n")
    );

    let to_draft = server
        .get(
            "/admin/v1/processes/purchase-request/diff?from=2&to=draft",
            &token,
        )
        .await;
    let body = to_draft.expect(200, None);
    assert_eq!(body["to"]["draft"], true);
    assert!(
        body["diff"]["unified"]
            .as_str()
            .unwrap()
            .contains("+The draft's own last line.")
    );
    let same = server
        .get("/admin/v1/processes/purchase-request/diff?from=2&to=2", &token)
        .await;
    assert_eq!(same.expect(200, None)["diff"]["identical"], true);

    for (query, status, code) in [
        ("?from=1&to=9", 404, "not_found"),
        ("?from=1", 400, "invalid"),
        ("?from=0&to=1", 400, "invalid"),
        ("?from=one&to=2", 400, "invalid"),
    ] {
        server
            .get(
                &format!("/admin/v1/processes/purchase-request/diff{query}"),
                &token,
            )
            .await
            .expect(status, Some(code));
    }
    server
        .get("/admin/v1/processes/nothing-here/diff?from=1&to=2", &token)
        .await
        .expect(404, Some("not_found"));
    let other = server.operator("globex");
    server
        .get("/admin/v1/processes/purchase-request/diff?from=1&to=2", &other)
        .await
        .expect(404, Some("not_found"));
}
