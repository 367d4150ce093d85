//! File evidence over HTTP (spec §5): signed URLs served on loopback by `file_routes` from a
//! real runtime, and `add_file_urls` on results rendered by real runs.

use agentprocess_gateway::files::{FileUrlSigner, add_file_urls, file_routes};
use agentprocess_ids::{OrgId, RunId, StepId};
use agentprocess_run_actor::machine::{
    Caller, EvaluatorAnswer, EvaluatorQuestion, EvaluatorRequest, Timestamp,
};
use agentprocess_run_actor::runtime::{
    Clock, Decision, Evaluator, EvidenceItem, GetWork, LocalBlobs, Runtime, RuntimeConfig, Submission,
    ToolOutcome, Upload, Write,
};
use agentprocess_store::{EmbeddedOptions, EmbeddedStore};
use agentprocess_testkit::assert_matches_schema;
use async_trait::async_trait;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ORG: &str = "acme";
/// 2026-10-01T00:00:00Z.
const START: Timestamp = Timestamp::from_millis(1_790_812_800_000);

/// A runtime on an in-memory store that keeps uploads in `blobs`, with a scripted evaluator.
fn runtime(blobs: &Path, evaluator: Option<Arc<dyn Evaluator>>) -> Runtime {
    Runtime::new(
        Arc::new(EmbeddedStore::in_memory(EmbeddedOptions::default())),
        Arc::new(LocalBlobs::new(blobs)),
        RuntimeConfig {
            evaluator,
            ..RuntimeConfig::default()
        },
        Clock::starting_at(START),
    )
}

fn signer() -> Arc<FileUrlSigner> {
    Arc::new(FileUrlSigner::new(&[42; 32], Duration::from_secs(300)).unwrap())
}

/// Serves `file_routes` on a free loopback port; returns its URL.
async fn serve(runtime: &Runtime, signer: &Arc<FileUrlSigner>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = file_routes(runtime.uploads().clone(), runtime.clock().clone(), signer.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

fn agent(id: &str) -> Caller {
    Caller::agent(ORG, id)
}

fn person(email: &str, groups: &[&str]) -> Caller {
    Caller::person(ORG, email, groups)
}

fn ok(outcome: ToolOutcome) -> Value {
    match outcome {
        ToolOutcome::Ok(data) => data,
        ToolOutcome::Refused(refusal) => panic!("refused: {refusal}"),
    }
}

async fn upload(runtime: &Runtime, caller: &Caller, file_name: &str, bytes: &[u8], request: &str) -> String {
    let stored = ok(runtime
        .upload(
            caller,
            Upload {
                file_name: file_name.into(),
                content_type: "application/pdf".into(),
                bytes: bytes.to_vec(),
            },
            request,
        )
        .await
        .unwrap());
    stored["id"].as_str().unwrap().to_owned()
}

async fn get(url: &str) -> reqwest::Response {
    reqwest::Client::new().get(url).send().await.unwrap()
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> &'a str {
    response
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

async fn error_code(response: reqwest::Response) -> String {
    assert_eq!(header(&response, "content-type"), "application/json");
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["message"].is_string(), "{body}");
    body["error"]["code"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_url_serves_the_exact_bytes_as_an_attachment_until_it_expires() {
    let blobs = tempfile::tempdir().unwrap();
    let runtime = runtime(blobs.path(), None);
    let signer = signer();
    let server = serve(&runtime, &signer).await;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let id = upload(
        &runtime,
        &agent("a_screener"),
        "Prüfbericht \"v1\".pdf",
        &bytes,
        "f-1",
    )
    .await;

    let url = signer.sign(&server, ORG, &id, runtime.clock().now());
    assert!(url.starts_with(&format!("{server}/files/")), "{url}");
    let response = get(&url).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "application/pdf");
    assert_eq!(header(&response, "content-length"), "70000");
    assert_eq!(
        header(&response, "content-disposition"),
        "attachment; filename=\"Pr_fbericht _v1_.pdf\"; filename*=UTF-8''Pr%C3%BCfbericht%20%22v1%22.pdf"
    );
    let cache = header(&response, "cache-control");
    let max_age: u64 = cache
        .strip_prefix("private, max-age=")
        .unwrap_or_else(|| panic!("{cache}"))
        .parse()
        .unwrap();
    // The TTL, rounded up to the minute.
    assert!((295..=360).contains(&max_age), "{cache}");
    assert_eq!(header(&response, "x-content-type-options"), "nosniff");
    assert_eq!(response.bytes().await.unwrap().as_ref(), bytes.as_slice());

    // Past its expiry the same URL is gone, with a reason.
    runtime.clock().advance(Duration::from_secs(max_age + 1));
    let expired = get(&url).await;
    assert_eq!(expired.status(), 410);
    assert_eq!(error_code(expired).await, "expired");
    // A fresh URL works again.
    let fresh = signer.sign(&server, ORG, &id, runtime.clock().now());
    assert_eq!(get(&fresh).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_that_do_not_verify_or_name_nothing_are_refused_and_store_failures_say_retry() {
    let blobs = tempfile::tempdir().unwrap();
    let runtime = runtime(blobs.path(), None);
    let signer = signer();
    let server = serve(&runtime, &signer).await;
    let id = upload(
        &runtime,
        &agent("a_screener"),
        "report.pdf",
        b"%PDF report",
        "f-1",
    )
    .await;
    let now = runtime.clock().now();
    let url = signer.sign(&server, ORG, &id, now);

    // One character of the link changed.
    let mut tampered = url.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let refused = get(&tampered).await;
    assert_eq!(refused.status(), 403);
    assert_eq!(error_code(refused).await, "invalid_link");
    // Signed with another key.
    let stranger = FileUrlSigner::new(&[1; 32], Duration::from_secs(300)).unwrap();
    assert_eq!(get(&stranger.sign(&server, ORG, &id, now)).await.status(), 403);
    assert_eq!(get(&format!("{server}/files/not-a-link")).await.status(), 403);

    // Correctly signed, but another organization has no such upload.
    let elsewhere = get(&signer.sign(&server, "globex", &id, now)).await;
    assert_eq!(elsewhere.status(), 404);
    assert_eq!(error_code(elsewhere).await, "not_found");
    assert_eq!(
        get(&signer.sign(&server, ORG, "f_missing", now)).await.status(),
        404
    );

    // The stored bytes changed under the record: an error, never another file.
    let (record, _) = runtime
        .read_upload(&OrgId::from(ORG), &id)
        .await
        .unwrap()
        .unwrap();
    std::fs::write(blobs.path().join(&record.path), b"%PDF forged").unwrap();
    let failed = get(&url).await;
    assert_eq!(failed.status(), 503);
    assert!(failed.headers().contains_key("retry-after"));
    let body = failed.text().await.unwrap();
    assert!(
        !body.contains("forged") && !body.contains(&record.path),
        "no internals: {body}"
    );
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["code"],
        "retry"
    );
}

/// Answers every question of `partner-screening` passing, but the first with the next yes-probability
/// in its script: 0.62 is unsure, 0.97 passes.
#[derive(Debug)]
struct Scripted {
    cleared: Mutex<VecDeque<f64>>,
}

#[async_trait]
impl Evaluator for Scripted {
    async fn evaluate(&self, request: &EvaluatorRequest) -> Result<(String, Vec<EvaluatorAnswer>), String> {
        let cleared = self.cleared.lock().unwrap().pop_front().expect("scripted");
        let answers = request
            .questions
            .iter()
            .enumerate()
            .map(|(at, question)| match question {
                EvaluatorQuestion::YesNo { .. } if at == 0 => EvaluatorAnswer::YesNo { yes: cleared },
                EvaluatorQuestion::YesNo { .. } => EvaluatorAnswer::YesNo { yes: 0.99 },
                EvaluatorQuestion::Choice { pass, .. } => EvaluatorAnswer::Choice {
                    name: pass[0].clone(),
                    confidence: 0.99,
                },
                EvaluatorQuestion::Rubric { levels, .. } => EvaluatorAnswer::Rubric {
                    level: levels.len() - 1,
                    confidence: 0.99,
                },
            })
            .collect();
        Ok(("test-model".into(), answers))
    }
}

/// Publishes our `partner-screening` example, its manager role bound to `g_partnerships`.
async fn publish_partner_screening(runtime: &Runtime) {
    let source = std::fs::read(agentprocess_testkit::example("partner-screening")).unwrap();
    let roles = indexmap::IndexMap::from([("partnerships-manager".to_owned(), "g_partnerships".to_owned())]);
    runtime.publish(&OrgId::from(ORG), &source, roles).await.unwrap();
}

fn screening(report: &str) -> Submission {
    let Value::Object(output) =
        json!({ "cleared": true, "summary": "Cleared on the sanctions and adverse-media lists." })
    else {
        unreachable!()
    };
    Submission {
        output: Some(output),
        evidence: vec![
            EvidenceItem {
                kind: "file".into(),
                reference: report.into(),
            },
            EvidenceItem {
                kind: "link".into(),
                reference: "https://watchlists.example/search/1".into(),
            },
        ],
        summary: Some("Searched both lists by legal name; no hits.".into()),
        next: Some("partner_approval".into()),
        reason: Some("Partner is cleared.".into()),
    }
}

fn decide(view: &Value, step: &str, decision: Decision, note: Option<&str>) -> Write {
    let item = view["workItems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["stepId"] == step)
        .unwrap_or_else(|| panic!("a work item on {step}"));
    Write::Decide {
        run_id: view["run"]["id"].as_str().unwrap().into(),
        work_item: item["id"].as_str().unwrap().into(),
        snapshot: item["snapshot"].as_str().unwrap().into(),
        decision,
        output: None,
        evidence: None,
        summary: None,
        next: None,
        reason: None,
        note: note.map(str::to_owned),
    }
}

/// The `url` of a file item, fetched: its bytes. A `link` item has no `url`.
async fn fetched(item: &Value) -> Vec<u8> {
    assert_eq!(item["kind"], "file", "{item}");
    let response = get(item["url"].as_str().unwrap_or_else(|| panic!("no url on {item}"))).await;
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap().to_vec()
}

fn decorate(mut data: Value, signer: &FileUrlSigner, server: &str, runtime: &Runtime) -> Value {
    add_file_urls(&mut data, ORG, signer, server, runtime.clock().now());
    data
}

/// Spec §5: "Wherever run data is returned, each file item also carries a short-lived url",
/// followed through a checked step whose unsure verdict holds the submission as a candidate,
/// an approval that rejects it back, and a second completion that moves the first to history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_item_in_real_results_gets_a_url_that_serves_its_upload() {
    let blobs = tempfile::tempdir().unwrap();
    let evaluator = Arc::new(Scripted {
        cleared: Mutex::new(VecDeque::from([0.62, 0.97])),
    });
    let runtime = runtime(blobs.path(), Some(evaluator));
    let signer = signer();
    let server = serve(&runtime, &signer).await;
    publish_partner_screening(&runtime).await;
    let screener = agent("a_screener");
    let operator = Caller {
        operator: true,
        ..person("ops@acme.example", &[])
    };
    let approver = person("partners@acme.example", &["g_partnerships"]);

    let view = ok(runtime
        .execute(
            &screener,
            Write::StartRun {
                process: "partner-screening".into(),
                version: None,
                inputs: json!({ "partnerName": "Acme", "dealSize": 48000 }),
                mode: agentprocess_run_actor::runtime::Mode::Live,
            },
            "s-1",
        )
        .await
        .unwrap());
    let run = view["run"]["id"].as_str().unwrap().to_owned();
    let first = upload(&runtime, &screener, "screening-1.pdf", b"first screening", "f-1").await;
    let second = upload(&runtime, &screener, "screening-2.pdf", b"second screening", "f-2").await;
    let claim = |request: &'static str| {
        let (runtime, screener, run) = (runtime.clone(), screener.clone(), run.clone());
        async move {
            ok(runtime
                .execute(
                    &screener,
                    Write::Claim {
                        run_id: RunId::from(run),
                        step: StepId::from_wire("screen_partner"),
                    },
                    request,
                )
                .await
                .unwrap())
        }
    };

    // The check is unsure: the submission is held as the escalation's candidate.
    let claimed = claim("c-1").await;
    let held = ok(runtime
        .execute(
            &screener,
            Write::Submit {
                token: claimed["token"].as_str().unwrap().into(),
                submission: screening(&first),
            },
            "u-1",
        )
        .await
        .unwrap());
    let held = decorate(held, &signer, &server, &runtime);
    assert_matches_schema("run-view.json", &held);
    assert_matches_schema("tools/submit.result.json", &held);
    let escalation = &held["workItems"][0]["escalation"];
    assert_eq!(escalation["check"]["verdict"], "unsure");
    let candidate = &escalation["candidate"]["evidence"];
    assert_eq!(candidate[0]["ref"], first.as_str());
    assert_eq!(fetched(&candidate[0]).await, b"first screening");
    assert!(candidate[1].get("url").is_none(), "a link item gets no url");
    assert_eq!(
        held["workItems"][0]["evidence"],
        json!(["file"]),
        "requirements stay"
    );

    // The operator sees the same candidate in get_work.
    let work = ok(runtime.get_work(&operator, GetWork::default()).await.unwrap());
    let work = decorate(work, &signer, &server, &runtime);
    assert_matches_schema("tools/get_work.result.json", &work);
    let candidate = &work["items"][0]["workItem"]["escalation"]["candidate"]["evidence"];
    assert_eq!(fetched(&candidate[0]).await, b"first screening");

    // Completed with the candidate: run data carries the file item, with sha256 and url.
    let completed = ok(runtime
        .execute(
            &operator,
            decide(&held, "screen_partner", Decision::Completed, None),
            "d-1",
        )
        .await
        .unwrap());
    let completed = decorate(completed, &signer, &server, &runtime);
    assert_matches_schema("run-view.json", &completed);
    let evidence = &completed["data"]["steps"]["screen_partner"]["evidence"];
    assert!(evidence[0]["sha256"].is_string());
    assert_eq!(fetched(&evidence[0]).await, b"first screening");

    // The partnerships manager rejects back to the screening; the screener claims it again and sees run data.
    let rejected = ok(runtime
        .execute(
            &approver,
            decide(
                &completed,
                "partner_approval",
                Decision::Rejected,
                Some("Attach the adverse-media part."),
            ),
            "d-2",
        )
        .await
        .unwrap());
    let rejected = decorate(rejected, &signer, &server, &runtime);
    assert_matches_schema("run-view.json", &rejected);
    let claimed = decorate(claim("c-2").await, &signer, &server, &runtime);
    assert_matches_schema("tools/claim.result.json", &claimed);
    assert_matches_schema("run-data.json", &claimed["data"]);
    let files_in_claim: Vec<&Value> = file_items(&claimed["data"]);
    assert!(!files_in_claim.is_empty(), "{}", claimed["data"]);
    for item in files_in_claim {
        assert_eq!(fetched(item).await, b"first screening");
    }

    // A second, passing completion: the first moves to history, and both files open.
    let done = ok(runtime
        .execute(
            &screener,
            Write::Submit {
                token: claimed["token"].as_str().unwrap().into(),
                submission: screening(&second),
            },
            "u-2",
        )
        .await
        .unwrap());
    let undecorated = done.clone();
    let done = decorate(done, &signer, &server, &runtime);
    assert_matches_schema("run-view.json", &done);
    assert_matches_schema("run-data.json", &done["data"]);
    let record = &done["data"]["steps"]["screen_partner"];
    assert_eq!(record["evidence"][0]["ref"], second.as_str());
    assert_eq!(fetched(&record["evidence"][0]).await, b"second screening");
    assert_eq!(record["history"][0]["evidence"][0]["ref"], first.as_str());
    assert_eq!(
        fetched(&record["history"][0]["evidence"][0]).await,
        b"first screening"
    );
    // Nothing but the urls changed, and the snapshot, taken without them, still decides.
    assert_eq!(strip_urls(done.clone()), undecorated);
    let approved = ok(runtime
        .execute(
            &approver,
            decide(&done, "partner_approval", Decision::Approved, None),
            "d-3",
        )
        .await
        .unwrap());
    assert_eq!(approved["run"]["outcome"], "partnered");

    // get_run of the ended run, decorated for another caller later on: fresh urls that work.
    runtime.clock().advance(Duration::from_secs(3600));
    let read = ok(runtime
        .get_run(&operator, &RunId::from(run.as_str()))
        .await
        .unwrap());
    let read = decorate(read, &signer, &server, &runtime);
    assert_matches_schema("tools/get_run.result.json", &read);
    assert_eq!(
        fetched(&read["data"]["steps"]["screen_partner"]["evidence"][0]).await,
        b"second screening"
    );
    // The urls handed out an hour ago have expired.
    let old = get(record["evidence"][0]["url"].as_str().unwrap()).await;
    assert_eq!(old.status(), 410);
}

/// Every `file` item in run data, current and history.
fn file_items(run_data: &Value) -> Vec<&Value> {
    let mut found = Vec::new();
    for step in run_data["steps"].as_object().unwrap().values() {
        let history = step["history"].as_array().unwrap();
        for record in std::iter::once(step).chain(history) {
            if let Some(items) = record["evidence"].as_array() {
                found.extend(items.iter().filter(|item| item["kind"] == "file"));
            }
        }
    }
    found
}

/// `value` without any `url` key on evidence-like objects: what the runtime rendered.
fn strip_urls(mut value: Value) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if map.contains_key("kind") && map.contains_key("ref") {
                    map.remove("url");
                }
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut value);
    value
}
