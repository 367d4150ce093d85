//! The typed result of validation: kinds, routes, people, paths, durations and checks.

use agentprocess_process::{
    Check, DataPath, Duration, DurationUnit, EvidenceKind, FieldType, Next, Offer, PersonRef, Process,
    Question, Route, StepId, StepKind, Target, Work, load, validate,
};
use serde_json::json;

/// Our example process `name` (`examples/NAME/PROCESS.md`), loaded with every profile offered.
fn example(name: &str) -> Process {
    let bytes = std::fs::read(agentprocess_testkit::example(name)).expect("example");
    load(&bytes, &Offer::EVERYTHING)
        .expect("example publishes")
        .process
}

fn id(text: &str) -> StepId {
    StepId::new(text).expect("step id")
}

fn step_target(text: &str) -> Target {
    Target::Step(id(text))
}

fn work(process: &Process, step: &str) -> Work {
    process
        .step(&id(step))
        .and_then(|s| s.work())
        .cloned()
        .expect("work step")
}

/// Spec §2.2: kinds, route lists, person references and durations of the purchase-request example.
#[test]
fn spec_2_2_purchase_request_reads_as_typed_steps() {
    let process = example("purchase-request");
    assert_eq!(process.name.as_str(), "purchase-request");
    let kinds: Vec<&str> = process.steps.iter().map(|s| s.kind_name()).collect();
    assert_eq!(
        kinds,
        ["agent", "approve", "approve", "approve", "agent", "finish"]
    );
    assert_eq!(
        process.inputs.keys().collect::<Vec<_>>(),
        ["requestId", "quoteDocument", "approver"]
    );
    assert_eq!(process.inputs["approver"].field_type, FieldType::Person);

    let validate_step = &process.steps[0];
    assert_eq!(
        validate_step.next,
        Some(Next::Routes(vec![
            Route {
                to: step_target("team_lead_approval"),
                when: None
            },
            Route {
                to: step_target("budget_approval"),
                when: None
            },
            Route {
                to: step_target("executive_approval"),
                when: None
            },
        ]))
    );
    assert_eq!(process.default_next(validate_step), None);
    let validate_work = work(&process, "assess");
    assert_eq!(validate_work.evidence, [EvidenceKind::Link]);
    assert_eq!(
        validate_work.output.keys().collect::<Vec<_>>(),
        ["amountUsd", "vendor", "justification"]
    );
    assert_eq!(validate_work.check, None);
    assert!(!validate_work.advisory);

    let manager = &process.steps[1];
    assert_eq!(
        manager.kind,
        StepKind::Approve {
            text: "Approve if amountUsd is at most 5000 and the purchase serves the team's plan.".to_string(),
            person: PersonRef::Path(DataPath::Input {
                field: "approver".to_string()
            }),
            on_reject: None,
            due: Some(Duration {
                amount: 2,
                unit: DurationUnit::Days
            }),
        }
    );
    assert_eq!(manager.next, Some(Next::Step(step_target("place_order"))));
    assert_eq!(
        process.steps[2].person(),
        Some(&PersonRef::Role("budget-owner".to_string()))
    );
    assert_eq!(process.role_names(), ["budget-owner", "executive"]);
    // `place_order` names no next: the following step is the default.
    assert_eq!(process.default_next(&process.steps[4]), Some(step_target("done")));
    assert_eq!(
        process.steps[5].kind,
        StepKind::Finish {
            outcome: "ordered".to_string()
        }
    );
    assert!(!process.uses_parallel() && !process.uses_check() && !process.uses_events());
    assert!(!process.uses_file_evidence());
}

/// Spec §2.2: `wait_until` paths, `wait_for` with timeout, `on_reject` and `initiator`.
#[test]
fn spec_2_2_waits_rejections_and_initiators_are_typed() {
    let notes = example("release-notes");
    assert_eq!(
        notes.steps[2].kind,
        StepKind::WaitUntil {
            path: DataPath::Input {
                field: "releaseAt".to_string()
            }
        }
    );
    assert!(
        matches!(&notes.steps[1].kind, StepKind::Approve { on_reject: Some(back), .. } if back == &id("write_notes"))
    );

    let closure = example("account-closure");
    assert_eq!(
        closure.steps[4].kind,
        StepKind::WaitFor {
            event: "statement-paid".to_string(),
            timeout: Some(Duration {
                amount: 30,
                unit: DurationUnit::Days
            }),
            on_timeout: Some(step_target("collections")),
        }
    );
    assert!(closure.uses_events());

    let training = example("training-request");
    assert_eq!(training.steps[0].person(), Some(&PersonRef::Initiator));
    assert!(training.uses_file_evidence());
    let items = &work(&training, "course_details").output["items"];
    assert_eq!(items.field_type, FieldType::List);
    assert_eq!(
        items.items.as_ref().map(|i| i.field_type),
        Some(FieldType::Object)
    );
}

/// parallel-1 §1: branch entries, `join` targets and the continuation.
#[test]
fn parallel_1_product_launch_has_branches_and_joins() {
    let process = example("product-launch");
    assert!(process.uses_parallel());
    assert_eq!(
        process.steps[1].kind,
        StepKind::Parallel {
            branches: vec![
                id("engineering_ready"),
                id("marketing_ready"),
                id("support_ready")
            ]
        }
    );
    assert_eq!(
        process.steps[1].next,
        Some(Next::Step(step_target("go_decision")))
    );
    for branch_step in &process.steps[2..5] {
        assert_eq!(branch_step.next, Some(Next::Step(Target::Join)));
    }
}

/// check-1 §2: the three question kinds with their thresholds; `requires` (revision 10).
#[test]
fn check_1_partner_screening_questions_are_typed() {
    let process = example("partner-screening");
    assert_eq!(process.required_systems, ["watchlist-screening"]);
    let check = work(&process, "screen_partner").check.expect("check");
    assert_eq!(
        check,
        Check {
            questions: vec![
                Question::YesNo {
                    ask: "Does the cleared value agree with the attached report?".to_string(),
                    pass: Some(0.9),
                    fail: Some(0.5),
                },
                Question::Choice {
                    ask: "How does the summary read?".to_string(),
                    one_of: vec![
                        (
                            "decisive".to_string(),
                            "Gives the result and names both lists.".to_string()
                        ),
                        (
                            "vague".to_string(),
                            "Hedges or leaves the result open.".to_string()
                        ),
                        ("unreadable".to_string(), "Impossible to tell.".to_string()),
                    ],
                    pass: vec!["decisive".to_string()],
                    unsure: vec!["unreadable".to_string()],
                    confidence: None,
                },
                Question::Rubric {
                    ask: "How thorough is the screening?".to_string(),
                    levels: vec![
                        "No list is clearly searched.".to_string(),
                        "One list is searched.".to_string(),
                        "Both lists are searched, with the search terms given.".to_string(),
                    ],
                    pass: 2,
                    confidence: Some(0.8),
                },
            ]
        }
    );
}

/// check-1 §2: the short form is one yes/no question with default thresholds; `advisory` is kept.
#[test]
fn check_1_short_form_and_advisory() {
    let frontmatter = json!({
        "name": "screen",
        "description": "Screen a vendor.",
        "steps": [
            { "id": "screen", "agent": "Screen the vendor.", "check": "The report covers both lists.",
              "advisory": true, "next": "done" },
            { "id": "done", "finish": "screened" }
        ]
    });
    let process = validate(&frontmatter, &Offer::EVERYTHING).expect("valid");
    let screen = work(&process, "screen");
    assert!(screen.advisory);
    assert_eq!(
        screen.check.map(|c| c.questions),
        Some(vec![Question::YesNo {
            ask: "The report covers both lists.".to_string(),
            pass: None,
            fail: None
        }])
    );
}

/// Spec §2.3: `one_of` values are kept exactly as written, numbers unrounded.
#[test]
fn spec_2_3_one_of_numbers_keep_their_text() {
    let frontmatter: serde_json::Value = serde_json::from_str(
        r#"{ "name": "p", "description": "d",
             "inputs": { "rate": { "type": "number", "one_of": [0.1000000000000000000001, 100.50] } },
             "steps": [ { "id": "done", "finish": "ok" } ] }"#,
    )
    .expect("json");
    let process = validate(&frontmatter, &Offer::EVERYTHING).expect("valid");
    let values = process.inputs["rate"].one_of.clone().expect("one_of");
    let texts: Vec<String> = values.iter().map(ToString::to_string).collect();
    assert_eq!(texts, ["0.1000000000000000000001", "100.50"]);
}

/// Spec §2.1 and §2.2: issues are located, and every one is reported in one pass.
#[test]
fn spec_2_every_issue_is_reported_at_once_with_its_location() {
    let frontmatter = json!({
        "name": "Invoice",
        "steps": [
            { "id": "validate", "agent": "Validate.", "nxt": "approve" },
            { "id": "approve", "person": "cfo", "approve": "Approve.", "next": "aprove" },
            { "id": "done", "finish": "approved" }
        ]
    });
    let issues: Vec<String> = validate(&frontmatter, &Offer::EVERYTHING)
        .expect_err("refused")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        issues,
        [
            r#"name: "Invoice" does not match ^[a-z0-9]+(-[a-z0-9]+)*$"#,
            "steps[0].nxt: unknown field",
            r#"steps[1].next: unknown step "aprove""#,
            "description: missing",
        ]
    );
}
