//! Our example processes load, and together they use every construct of core-2 (spec §2),
//! parallel-1 and check-1, so the tests and the conformance runner built on them reach every rule.

use agentprocess_process::{
    DataPath, DurationUnit, EvidenceKind, FieldMap, FieldType, LoadedProcess, Next, Offer, PersonRef,
    Question, StepKind, Target, load, parse_document,
};
use std::collections::BTreeSet;

fn examples() -> Vec<(String, LoadedProcess)> {
    let examples = agentprocess_testkit::examples();
    assert!(
        examples.len() >= 12,
        "at least twelve examples, found {}",
        examples.len()
    );
    examples
        .into_iter()
        .map(|(name, path)| {
            let bytes = std::fs::read(&path).unwrap();
            let loaded =
                load(&bytes, &Offer::EVERYTHING).unwrap_or_else(|issues| panic!("{name}: {issues:?}"));
            (name, loaded)
        })
        .collect()
}

#[test]
fn every_example_loads_under_its_folder_name_with_its_body_kept() {
    for (name, loaded) in examples() {
        assert_eq!(
            loaded.process.name.as_str(),
            name,
            "the folder is named after the process"
        );
        let bytes = std::fs::read(agentprocess_testkit::example(&name)).unwrap();
        let document = parse_document(&bytes).unwrap();
        assert!(
            String::from_utf8(bytes).unwrap().ends_with(&document.body),
            "{name}"
        );
        assert!(
            loaded.body.trim_start().starts_with("# "),
            "{name}: a body with a heading"
        );
    }
}

/// Each example that needs a profile or a system is refused by a server that does not offer it
/// (spec §2.4 offers, parallel-1, check-1): the profiles are really exercised, not just declared.
#[test]
fn an_example_using_a_profile_needs_that_profile() {
    for (name, loaded) in examples() {
        let bytes = std::fs::read(agentprocess_testkit::example(&name)).unwrap();
        let mut offer = Offer::EVERYTHING;
        offer.parallel = false;
        assert_eq!(
            load(&bytes, &offer).is_ok(),
            !loaded.process.uses_parallel(),
            "{name} without parallel-1"
        );
        let mut offer = Offer::EVERYTHING;
        offer.check = false;
        assert_eq!(
            load(&bytes, &offer).is_ok(),
            !loaded.process.uses_check(),
            "{name} without check-1"
        );
    }
}

fn field_types(fields: &FieldMap, into: &mut BTreeSet<&'static str>) {
    for spec in fields.values() {
        into.insert(spec.field_type.name());
        if spec.optional {
            into.insert("optional");
        }
        if spec.one_of.is_some() {
            into.insert("one_of");
        }
        if spec.description.is_some() {
            into.insert("description");
        }
        if let Some(items) = &spec.items {
            into.insert(if items.field_type == FieldType::Object {
                "list of objects"
            } else {
                "list of values"
            });
        }
    }
}

#[test]
fn together_the_examples_use_every_construct() {
    let mut used: BTreeSet<&'static str> = BTreeSet::new();
    for (_, loaded) in examples() {
        let process = &loaded.process;
        if !process.required_systems.is_empty() {
            used.insert("requires");
        }
        let mut inputs = BTreeSet::new();
        field_types(&process.inputs, &mut inputs);
        used.extend(inputs.into_iter().map(|t| match t {
            "string" => "input string",
            "number" => "input number",
            "boolean" => "input boolean",
            "date" => "input date",
            "datetime" => "input datetime",
            "list" => "input list",
            "object" => "input object",
            "person" => "input person",
            other => other,
        }));
        for step in &process.steps {
            used.insert(step.kind_name());
            if let Some(work) = step.work() {
                field_types(&work.output, &mut used);
                for kind in &work.evidence {
                    used.insert(match kind {
                        EvidenceKind::File => "evidence file",
                        EvidenceKind::Link => "evidence link",
                    });
                }
                if let Some(check) = &work.check {
                    used.insert("check");
                    if work.advisory {
                        used.insert("advisory");
                    }
                    for question in &check.questions {
                        used.insert(match question {
                            Question::YesNo { .. } => "check yes/no",
                            Question::Choice { .. } => "check one_of",
                            Question::Rubric { .. } => "check levels",
                        });
                    }
                }
            }
            match step.person() {
                Some(PersonRef::Role(_)) => used.insert("person role"),
                Some(PersonRef::Initiator) => used.insert("person initiator"),
                Some(PersonRef::Path(DataPath::Input { .. })) => used.insert("person from inputs"),
                Some(PersonRef::Path(DataPath::StepOutput { .. })) => {
                    used.insert("person from a step output")
                }
                None => false,
            };
            if let Some(due) = step.due() {
                used.insert(match due.unit {
                    DurationUnit::Minutes => "due minutes",
                    DurationUnit::Hours => "due hours",
                    DurationUnit::Days => "due days",
                });
            }
            match &step.kind {
                StepKind::Approve {
                    on_reject: Some(_), ..
                } => {
                    used.insert("on_reject");
                }
                StepKind::WaitUntil {
                    path: DataPath::Input { .. },
                } => {
                    used.insert("wait_until an input");
                }
                StepKind::WaitUntil {
                    path: DataPath::StepOutput { .. },
                } => {
                    used.insert("wait_until a step output");
                }
                StepKind::WaitFor {
                    timeout: Some(_),
                    on_timeout: Some(_),
                    ..
                } => {
                    used.insert("wait_for timeout and on_timeout");
                }
                _ => {}
            }
            match &step.next {
                Some(Next::Step(Target::Join)) => used.insert("next join"),
                Some(Next::Step(Target::Step(_))) => used.insert("next one step"),
                Some(Next::Routes(routes)) if routes.iter().any(|r| r.when.is_some()) => {
                    used.insert("next routes with when")
                }
                Some(Next::Routes(_)) => used.insert("next choice"),
                None => used.insert("next by order"),
            };
        }
        if process
            .steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Finish { .. }))
            .count()
            > 1
        {
            used.insert("several finishes");
        }
    }
    let every: BTreeSet<&'static str> = [
        "requires",
        "input string",
        "input number",
        "input boolean",
        "input date",
        "input datetime",
        "input list",
        "input object",
        "input person",
        "optional",
        "one_of",
        "description",
        "list of objects",
        "list of values",
        "string",
        "number",
        "boolean",
        "datetime",
        "list",
        "object",
        "person",
        "agent",
        "task",
        "approve",
        "wait",
        "wait_until",
        "wait_for",
        "finish",
        "parallel",
        "evidence file",
        "evidence link",
        "check",
        "advisory",
        "check yes/no",
        "check one_of",
        "check levels",
        "person role",
        "person initiator",
        "person from inputs",
        "person from a step output",
        "due minutes",
        "due hours",
        "due days",
        "on_reject",
        "wait_until an input",
        "wait_until a step output",
        "wait_for timeout and on_timeout",
        "next join",
        "next one step",
        "next routes with when",
        "next choice",
        "next by order",
        "several finishes",
    ]
    .into_iter()
    .collect();
    let missing: Vec<_> = every.difference(&used).collect();
    assert!(missing.is_empty(), "no example uses {missing:?}");
}
