//! The protocol's twelve published conformance fixtures, when `AGENTPROCESS_OFFICIAL` names them:
//! each is imported and published with the CLI, a run of it starts with inputs of every declared
//! type, its first step is offered to whoever the process names and done by them: an agent claims
//! and submits, a person decides (spec §2, §3, tools.md `start_run`, `get_work`, `claim`,
//! `submit`, `decide`).
//! Our own walks run on our examples; these check that the published documents work as well.

mod common;

use agentprocess_process::{Offer, PersonRef, StepKind, load};
use agentprocess_testkit::fake_evaluator::FakeEvaluator;
use common::{Mcp, Server, Who, request_id};
use serde_json::{Value, json};

/// The person every `person` input and output names.
const PERSON: &str = "someone@acme.test";

fn values_of(fields: &agentprocess_process::FieldMap) -> Value {
    Value::Object(agentprocess_process::sample_values(
        fields,
        PERSON,
        "2031-03-14T09:00:00Z",
    ))
}

/// A person identity in `group`, or [`PERSON`] for a step that names a person by data.
fn person_for(person: &PersonRef) -> Who {
    match person {
        PersonRef::Role(role) => {
            let groups: &'static [&'static str] =
                Box::leak(vec![&*String::leak(role.clone())].into_boxed_slice());
            Who::Person("member@acme.test", groups)
        }
        PersonRef::Initiator | PersonRef::Path(_) => Who::Person(PERSON, &["staff"]),
    }
}

async fn first_step_is_offered(server: &Server, name: &str, path: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap();
    let loaded = load(&bytes, &Offer::EVERYTHING).unwrap_or_else(|issues| panic!("{name}: {issues:?}"));
    let process = loaded.process;
    let roles: Vec<String> = process.role_names().into_iter().map(str::to_owned).collect();
    let bindings: Vec<(&str, &str)> = roles.iter().map(|r| (r.as_str(), r.as_str())).collect();
    let (code, out, err) = server.import(path, &bindings, true);
    assert_eq!(code, 0, "import of {name}:\n{out}\n{err}");

    // The initiator is the person the inputs name, so `initiator` steps reach them too.
    let starter = server.client(&Who::Person(PERSON, &["staff"])).await;
    let started = starter
        .ok(
            "start_run",
            json!({ "process": name, "inputs": values_of(&process.inputs), "requestId": request_id() }),
        )
        .await;
    let run_id = started["run"]["id"].as_str().unwrap().to_owned();
    let first = &process.steps[0];
    let view = starter.ok("get_run", json!({ "runId": run_id })).await;
    assert_eq!(view["steps"][0]["id"], first.id.as_str(), "{name}");

    match &first.kind {
        StepKind::Agent { work } => {
            assert_eq!(view["steps"][0]["state"], "ready", "{name}: {view}");
            let agent = server.client(&Who::Agent("a_conformance")).await;
            let work_list = agent.ok("get_work", json!({ "process": name })).await;
            assert!(
                work_list["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|item| item["runId"] == run_id.as_str()),
                "{name}: the agent is offered the first step: {work_list}"
            );
            let claimed = agent
                .ok(
                    "claim",
                    json!({ "runId": run_id, "stepId": first.id.as_str(), "requestId": request_id() }),
                )
                .await;
            let mut evidence = Vec::new();
            for kind in &work.evidence {
                evidence.push(evidence_item(&agent, kind.name()).await);
            }
            let mut body = json!({
                "token": claimed["token"], "requestId": request_id(),
                "output": values_of(&work.output), "evidence": evidence,
                "summary": "Done as the step asks.",
            });
            if let Some(agentprocess_process::Next::Routes(routes)) = &first.next {
                body["next"] = json!(routes[0].to.to_string());
                body["reason"] = json!("The first route fits.");
            }
            let envelope = agent.call("submit", body).await;
            if work.check.is_none() {
                assert_eq!(envelope["ok"], true, "{name}: submit: {envelope}");
                let after = starter.ok("get_run", json!({ "runId": run_id })).await;
                assert_eq!(after["steps"][0]["state"], "done", "{name}: {after}");
            } else {
                // The fake evaluator judges the output; either verdict is an answer of the protocol.
                assert!(
                    envelope["ok"] == true || envelope["error"]["code"] == "not_accepted",
                    "{name}: {envelope}"
                );
            }
        }
        StepKind::Task { person, .. } | StepKind::Approve { person, .. } => {
            assert_eq!(view["steps"][0]["state"], "waiting", "{name}: {view}");
            let person = server.client(&person_for(person)).await;
            let work_list = person.ok("get_work", json!({})).await;
            let item = work_list["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|item| item["runId"] == run_id.as_str())
                .unwrap_or_else(|| panic!("{name}: the person is offered the first step: {work_list}"));
            let decide = &item["workItem"]["decide"];
            let mut body = decide["arguments"].clone();
            body["requestId"] = json!(request_id());
            body["decision"] = decide["decisions"][0].clone();
            if let Some(work) = first.work() {
                let mut evidence = Vec::new();
                for kind in &work.evidence {
                    evidence.push(evidence_item(&person, kind.name()).await);
                }
                body["output"] = values_of(&work.output);
                body["evidence"] = json!(evidence);
            }
            person.ok("decide", body).await;
            let after = starter.ok("get_run", json!({ "runId": run_id })).await;
            assert_eq!(after["steps"][0]["state"], "done", "{name}: {after}");
        }
        other => panic!(
            "{name}: a first step of kind {} is not expected of the fixtures",
            other.name()
        ),
    }
}

async fn evidence_item(agent: &Mcp, kind: &str) -> Value {
    if kind == "link" {
        return json!({ "kind": "link", "ref": "https://evidence.test/1" });
    }
    let uploaded = agent
        .ok(
            "upload",
            json!({ "fileName": "report.pdf", "contentType": "application/pdf",
                    "contentBase64": "cmVwb3J0", "requestId": request_id() }),
        )
        .await;
    json!({ "kind": "file", "ref": uploaded["id"] })
}

#[tokio::test(flavor = "multi_thread")]
async fn every_published_fixture_is_imported_started_and_its_first_step_done() {
    let Some(fixtures) = agentprocess_testkit::official_fixtures_or_skip("serve_official_fixtures") else {
        return;
    };
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
    for (name, path) in &fixtures {
        first_step_is_offered(&server, name, path).await;
    }
}
