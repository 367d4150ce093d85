//! The schema helper itself: it must reject what the contracts reject.

mod common;

use agentprocess_run_actor::machine::ErrorCode;
use common::assert_matches_schema;
use serde_json::json;

#[test]
#[should_panic(expected = "refuses the value")]
fn schema_checks_reject_a_renew_result_without_expiry() {
    assert_matches_schema("tools/renew.result.json", &json!({ "token": "t" }));
}

#[test]
#[should_panic(expected = "refuses the value")]
fn schema_checks_reject_an_unknown_run_state() {
    assert_matches_schema(
        "run-view.json",
        &json!({ "run": { "id": "r", "process": "p", "version": 1, "mode": "live", "state": "paused",
                 "outcome": null, "ended": null, "startedBy": "u", "startedAt": "t", "updatedAt": "t" },
                 "data": { "inputs": {}, "steps": {} }, "steps": [], "workItems": [], "body": "" }),
    );
}

#[test]
fn every_schema_file_compiles() {
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(common::schemas_dir().join("index.json")).unwrap())
            .unwrap();
    for file in index["shared"].as_object().unwrap().values() {
        let file = file.as_str().unwrap();
        // `null` is no valid shape; what matters is that the schema compiled to say so.
        let panic = std::panic::catch_unwind(|| assert_matches_schema(file, &json!(null))).unwrap_err();
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("refuses the value"), "{file}: {message}");
    }
}

#[test]
fn the_error_codes_are_exactly_those_of_the_tool_error_schema() {
    let path = common::schemas_dir().join("tool-error.json");
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let codes = ErrorCode::ALL.map(|code| json!(code));
    assert_eq!(schema["properties"]["code"]["enum"], json!(codes));
    for code in ErrorCode::ALL {
        assert_eq!(json!(code), code.as_str(), "serialized as the protocol writes it");
    }
}
