//! `list_runs` filtered by an input finds a caller's own runs however many other runs of the
//! process came before them (tools.md `list_runs`: `inputs` matches on equality of the given
//! fields), on every page a caller reads, from the hot store and from the archive.

mod common;

use common::{Server, Who};
use serde_json::{Value, json};

const AGENT: Who = Who::Agent("a_ap");

/// A caller starts three runs with an input value no other run has, after 400 runs of the
/// same process: the first page of `list_runs` filtered by that value answers all three, and
/// nothing else.
#[tokio::test(flavor = "multi_thread")]
async fn an_input_filter_finds_the_callers_runs_behind_hundreds_of_others_on_its_first_page() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    server.publish_example("purchase-request");
    let client = server.client(&AGENT).await;
    for n in 0..400 {
        client.start_purchase_request(&format!("PR-{n}")).await;
    }
    let mut mine = Vec::new();
    for _ in 0..3 {
        let run = client.start_purchase_request("PR-UNIQUE").await;
        mine.push(run["run"]["id"].as_str().unwrap().to_owned());
    }
    let page = client
        .ok(
            "list_runs",
            json!({ "process": "purchase-request", "inputs": { "requestId": "PR-UNIQUE" } }),
        )
        .await;
    let first: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap())
        .collect();
    assert_eq!(first, mine, "the first page: {page}");
    assert_eq!(page["nextCursor"], Value::Null, "{page}");

    // Without the process filter, and with a state filter besides.
    let (ids, pages) = client
        .listed_run_ids(json!({ "inputs": { "requestId": "PR-UNIQUE" } }))
        .await;
    assert_eq!((ids, pages), (mine.clone(), 1));
    let (ids, _) = client
        .listed_run_ids(json!({ "inputs": { "requestId": "PR-UNIQUE" }, "state": "active" }))
        .await;
    assert_eq!(ids, mine);
    let (ids, _) = client
        .listed_run_ids(json!({ "inputs": { "requestId": "PR-UNIQUE" }, "state": "waiting" }))
        .await;
    assert!(ids.is_empty(), "{ids:?}");
}

/// A process declaring more inputs than a run is filed under is listed by reading its runs in
/// start order: the filter still answers exactly the runs whose inputs match.
#[tokio::test(flavor = "multi_thread")]
async fn a_process_with_more_inputs_than_are_filed_is_filtered_all_the_same() {
    const INPUTS: usize = 33;
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &[]);
    let declared: String = (0..INPUTS).map(|i| format!("  field{i:02}: string\n")).collect();
    let source = data.path().join("wide.md");
    std::fs::write(
        &source,
        format!(
            "---\nname: wide-intake\ndescription: Many inputs, one step.\ninputs:\n{declared}\
             steps:\n  - id: review\n    agent: Review the intake.\n    output:\n      notes: string\n\
             \x20 - id: done\n    finish: done\n---\n\n# Wide intake\n"
        ),
    )
    .unwrap();
    let (code, out, err) = server.import(&source, &[], true);
    assert_eq!(code, 0, "{out}\n{err}");
    let client = server.client(&AGENT).await;
    let mut ids = Vec::new();
    for run in 0..3 {
        let inputs: serde_json::Map<String, Value> = (0..INPUTS)
            .map(|i| (format!("field{i:02}"), json!(format!("run {run} value {i}"))))
            .collect();
        let view = client
            .ok(
                "start_run",
                json!({ "process": "wide-intake", "inputs": inputs, "requestId": common::request_id() }),
            )
            .await;
        ids.push(view["run"]["id"].as_str().unwrap().to_owned());
    }
    let (found, _) = client
        .listed_run_ids(json!({ "inputs": { "field32": "run 1 value 32", "field00": "run 1 value 0" } }))
        .await;
    assert_eq!(found, [ids[1].clone()]);
    let (none, _) = client
        .listed_run_ids(json!({ "inputs": { "field32": "run 1 value 32", "field00": "run 2 value 0" } }))
        .await;
    assert!(none.is_empty(), "{none:?}");
}
