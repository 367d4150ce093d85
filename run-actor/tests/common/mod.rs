//! Test harness for the run state machine: hand-built processes, callers, a world that applies
//! commands with a moving clock, and schema checks of every rendered result.

#![allow(dead_code)]

use agentprocess_ids::OrgId;
use agentprocess_process::{
    Duration, DurationUnit, EvidenceKind, FieldMap, FieldSpec, FieldType, Next, Offer, PersonFormat,
    PersonRef, Process, ProcessName, Route, Step, StepId, StepKind, Target, Work, load,
};
use agentprocess_run_actor::machine::{
    self, Assignment, Caller, CallerKind, Command, Ctx, Decide, Decision, EvaluatorAnswer, EvaluatorOutcome,
    EvaluatorQuestion, EvaluatorRequest, EvidenceItem, Limits, Mode, PinnedProcess, Refusal, Reply, RunState,
    StartRun, Submission, Timestamp, Transition, UploadLookup, UploadStatus, render,
};
use indexmap::IndexMap;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

// ---------------------------------------------------------------- schemas

#[allow(unused_imports)]
pub use agentprocess_testkit::{assert_matches_schema, schemas_dir};

// ---------------------------------------------------------------- processes

pub fn id(text: &str) -> StepId {
    StepId::new(text).expect("test step ids are valid")
}

pub fn fields(list: &[(&str, FieldType)]) -> FieldMap {
    list.iter()
        .map(|(name, t)| (name.to_string(), FieldSpec::of_type(*t)))
        .collect()
}

pub fn work(
    instructions: &str,
    output: &[(&str, FieldType)],
    evidence: &[EvidenceKind],
    due: Option<Duration>,
) -> Work {
    Work {
        instructions: instructions.to_string(),
        output: fields(output),
        evidence: evidence.to_vec(),
        due,
        check: None,
        advisory: false,
    }
}

pub fn to(step: &str) -> Option<Next> {
    Some(Next::Step(Target::Step(id(step))))
}

pub fn routes(list: &[(&str, &str)]) -> Option<Next> {
    Some(Next::Routes(
        list.iter()
            .map(|(step, when)| Route {
                to: Target::Step(id(step)),
                when: Some(when.to_string()),
            })
            .collect(),
    ))
}

pub fn hours(amount: u64) -> Duration {
    Duration {
        amount,
        unit: DurationUnit::Hours,
    }
}

pub fn minutes(amount: u64) -> Duration {
    Duration {
        amount,
        unit: DurationUnit::Minutes,
    }
}

pub fn agent_step(step: &str, work: Work, next: Option<Next>) -> Step {
    Step {
        id: id(step),
        kind: StepKind::Agent { work },
        next,
    }
}

pub fn task_step(step: &str, person: PersonRef, work: Work, next: Option<Next>) -> Step {
    Step {
        id: id(step),
        kind: StepKind::Task { work, person },
        next,
    }
}

pub fn approve_step(
    step: &str,
    role: &str,
    on_reject: Option<&str>,
    due: Option<Duration>,
    next: Option<Next>,
) -> Step {
    Step {
        id: id(step),
        kind: StepKind::Approve {
            text: format!("Approve {step}."),
            person: PersonRef::Role(role.to_string()),
            on_reject: on_reject.map(id),
            due,
        },
        next,
    }
}

pub fn finish_step(step: &str, outcome: &str) -> Step {
    Step {
        id: id(step),
        kind: StepKind::Finish {
            outcome: outcome.to_string(),
        },
        next: None,
    }
}

pub fn step_of(step: &str, kind: StepKind, next: Option<Next>) -> Step {
    Step {
        id: id(step),
        kind,
        next,
    }
}

pub fn pinned(name: &str, inputs: FieldMap, steps: Vec<Step>) -> PinnedProcess {
    let mut roles = IndexMap::new();
    roles.insert("finance-approver".to_string(), "g_finance".to_string());
    roles.insert("accounts".to_string(), "g_accounts".to_string());
    PinnedProcess {
        process: Process {
            name: ProcessName::new(name).expect("test names are valid"),
            description: format!("The {name} process."),
            inputs,
            required_systems: Vec::new(),
            steps,
        },
        version: 3,
        body: format!("# {name}\n\nHow it goes.\n"),
        roles,
    }
}

/// The supplier-onboarding example of spec §2: screen (routes), approve (on_reject), finishes.
pub fn supplier_onboarding() -> PinnedProcess {
    pinned(
        "supplier-onboarding",
        fields(&[("vendorName", FieldType::String), ("amount", FieldType::Number)]),
        vec![
            agent_step(
                "check_vendor",
                work(
                    "Check the vendor against the sanctions lists.",
                    &[("cleared", FieldType::Boolean), ("summary", FieldType::String)],
                    &[EvidenceKind::File],
                    None,
                ),
                routes(&[("approve", "Vendor is cleared"), ("decline", "Any sanctions hit")]),
            ),
            approve_step(
                "approve",
                "finance-approver",
                Some("check_vendor"),
                Some(Duration {
                    amount: 2,
                    unit: DurationUnit::Days,
                }),
                to("done"),
            ),
            finish_step("decline", "declined"),
            finish_step("done", "onboarded"),
        ],
    )
}

// ---------------------------------------------------------------- callers

pub const ORG: &str = "o_acme";
pub const OPERATORS: &str = "g_ops";

pub fn agent(name: &str) -> Caller {
    Caller::agent(ORG, name)
}

pub fn person(email: &str, groups: &[&str]) -> Caller {
    Caller::person(ORG, email, groups)
}

pub fn operator() -> Caller {
    Caller {
        organization: OrgId::from(ORG.to_string()),
        kind: CallerKind::Person {
            email: "ops@acme.example".to_string(),
            groups: vec![OPERATORS.to_string()],
        },
        operator: true,
    }
}

pub fn mira() -> Caller {
    person("mira@acme.example", &["g_staff"])
}

pub fn finance() -> Caller {
    person("fin@acme.example", &["g_finance"])
}

// ---------------------------------------------------------------- uploads

#[derive(Debug, Default)]
pub struct Uploads(pub HashMap<String, UploadStatus>);

impl UploadLookup for Uploads {
    fn lookup(&self, organization: &OrgId, upload_id: &str) -> UploadStatus {
        if organization != ORG {
            return UploadStatus::NotFound;
        }
        self.0.get(upload_id).cloned().unwrap_or(UploadStatus::NotFound)
    }
}

pub fn uploads() -> Uploads {
    let mut map = HashMap::new();
    map.insert(
        "f_91a".to_string(),
        UploadStatus::Verified {
            sha256: "4f1c".repeat(16),
        },
    );
    map.insert("f_bad".to_string(), UploadStatus::HashMismatch);
    Uploads(map)
}

pub fn file(reference: &str) -> EvidenceItem {
    EvidenceItem {
        kind: "file".to_string(),
        reference: reference.to_string(),
    }
}

pub fn link(reference: &str) -> EvidenceItem {
    EvidenceItem {
        kind: "link".to_string(),
        reference: reference.to_string(),
    }
}

pub fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

// ---------------------------------------------------------------- the world

/// 2026-10-06T09:00:00Z.
pub const T0: i64 = 1_791_277_200_000;

/// A fake evaluator: answers a request.
pub type Evaluator = Box<dyn FnMut(&EvaluatorRequest) -> EvaluatorOutcome>;

/// An evaluator whose answers pass every question of every check.
pub fn passing_evaluator() -> Evaluator {
    Box::new(|request: &EvaluatorRequest| EvaluatorOutcome::Answered {
        model: "fake-evaluator".to_string(),
        answers: request
            .questions
            .iter()
            .map(|question| match question {
                EvaluatorQuestion::YesNo { .. } => EvaluatorAnswer::YesNo { yes: 1.0 },
                EvaluatorQuestion::Choice { pass, .. } => EvaluatorAnswer::Choice {
                    name: pass[0].clone(),
                    confidence: 1.0,
                },
                EvaluatorQuestion::Rubric { levels, .. } => EvaluatorAnswer::Rubric {
                    level: levels.len() - 1,
                    confidence: 1.0,
                },
            })
            .collect(),
    })
}

/// One run and a clock. Every applied command is checked for determinism, and every rendered
/// result against its schema.
pub struct World {
    pub process: PinnedProcess,
    pub run: Option<RunState>,
    pub now: i64,
    pub seeds: u64,
    pub uploads: Uploads,
    pub limits: Limits,
    pub last: Option<Transition>,
    /// `check-1`: answers evaluator requests the way the runtime does. When set, a command
    /// answered with `NeedsEvaluation` is applied again with the outcome attached; when unset,
    /// the `NeedsEvaluation` transition is returned as it is.
    pub evaluator: Option<Evaluator>,
    /// The latest evaluator request, with the command it was for.
    pub last_request: Option<(EvaluatorRequest, Command)>,
    /// Who escalations wait on: the operator queue, with the `OPERATORS` group named too.
    pub escalate_to: Assignment,
}

impl World {
    pub fn new(process: PinnedProcess) -> Self {
        World {
            process,
            run: None,
            now: T0,
            seeds: 0,
            uploads: uploads(),
            limits: Limits {
                run_data_bytes: 256 * 1024,
                ..Limits::default()
            },
            last: None,
            evaluator: None,
            last_request: None,
            escalate_to: Assignment::Operators {
                also: Some(OPERATORS.to_string()),
            },
        }
    }

    /// Answers every evaluator request with `outcome`.
    pub fn evaluate_with(&mut self, outcome: EvaluatorOutcome) {
        self.evaluator = Some(Box::new(move |_| outcome.clone()));
    }

    pub fn run(&self) -> &RunState {
        self.run.as_ref().expect("the run has started")
    }

    pub fn advance(&mut self, seconds: i64) {
        self.now += seconds * 1000;
    }

    pub fn apply(&mut self, command: Command) -> Result<Transition, Refusal> {
        self.seeds += 1;
        let seed = numbered_seed(self.seeds);
        let ctx = Ctx {
            now: Timestamp::from_millis(self.now),
            seed,
            limits: self.limits,
            person_format: PersonFormat::Email,
            escalate_to: &self.escalate_to,
            uploads: &self.uploads,
        };
        let schema = result_schema(&command);
        let first = machine::apply(&self.process, self.run.as_ref(), command.clone(), &ctx);
        let second = machine::apply(&self.process, self.run.as_ref(), command.clone(), &ctx);
        assert_eq!(first, second, "apply is deterministic");
        if let Ok(Transition {
            state,
            effects,
            reply: Reply::NeedsEvaluation(request),
        }) = &first
        {
            assert_eq!(
                Some(state),
                self.run.as_ref(),
                "asking the evaluator changes nothing"
            );
            assert!(effects.is_empty(), "asking the evaluator has no effects");
            assert_eq!(
                request.questions.len(),
                request_questions(&self.process, &request.step)
            );
            self.last_request = Some(((**request).clone(), command.clone()));
            if let Some(evaluator) = self.evaluator.as_mut() {
                let outcome = evaluator(request);
                return self.apply(command.with_evaluation(outcome));
            }
            return first;
        }
        match &first {
            Ok(transition) => {
                if let Some(schema) = schema {
                    assert_matches_schema(schema, transition.reply.data());
                }
                self.run = Some(transition.state.clone());
                self.last = Some(transition.clone());
                self.check_renderings();
            }
            Err(refusal) => assert_matches_schema("tool-error.json", &error_object(refusal)),
        }
        first
    }

    /// Checks the run view, run data, work items and get_work items against their schemas.
    pub fn check_renderings(&self) {
        let run = self.run();
        let view = render::run_view(&self.process, run);
        assert_matches_schema("run-view.json", &view);
        assert_matches_schema("tools/get_run.result.json", &view);
        assert_matches_schema("run-data.json", &render::run_data(run));
        let mut items = Vec::new();
        for step in &run.steps {
            if let Some(item) = render::agent_work_item(run, &step.id) {
                items.push(item);
            }
        }
        for item in &run.work_items {
            assert_matches_schema("work-item.json", &render::work_item(&self.process, run, item));
            items.push(render::person_work_item(&self.process, run, item));
        }
        assert_matches_schema(
            "tools/get_work.result.json",
            &json!({ "items": items, "nextCursor": null }),
        );
    }

    pub fn view(&self) -> Value {
        render::run_view(&self.process, self.run())
    }

    pub fn start(&mut self, caller: Caller, inputs: Value) -> Result<Transition, Refusal> {
        self.start_mode(caller, inputs, Mode::Live)
    }

    pub fn start_mode(&mut self, caller: Caller, inputs: Value, mode: Mode) -> Result<Transition, Refusal> {
        // The seed `apply` is about to use: the run id is the runtime's to choose.
        let run_id = machine::start_run_id(numbered_seed(self.seeds + 1), Timestamp::from_millis(self.now));
        self.apply(Command::StartRun(StartRun {
            run_id,
            caller,
            inputs,
            mode,
        }))
    }

    pub fn claim(&mut self, caller: Caller, step: &str) -> Result<Transition, Refusal> {
        self.apply(Command::Claim {
            caller,
            step: StepId::from_wire(step.to_string()),
        })
    }

    /// Claims and returns the token.
    pub fn claim_token(&mut self, caller: Caller, step: &str) -> String {
        let transition = self.claim(caller, step).expect("claim succeeds");
        transition.reply.data()["token"]
            .as_str()
            .expect("a token")
            .to_string()
    }

    pub fn submit(
        &mut self,
        caller: Caller,
        token: &str,
        submission: Submission,
    ) -> Result<Transition, Refusal> {
        self.apply(Command::Submit {
            caller,
            token: token.to_string(),
            submission,
            evaluation: None,
        })
    }

    pub fn decide(&mut self, caller: Caller, work_item: &str, decision: Decision) -> DecideBuilder<'_> {
        let snapshot = render::snapshot(self.run());
        DecideBuilder {
            world: self,
            decide: Decide {
                caller,
                work_item: work_item.to_string(),
                snapshot,
                decision,
                output: None,
                evidence: None,
                summary: None,
                next: None,
                reason: None,
                note: None,
                evaluation: None,
            },
        }
    }

    /// The id of the open work item on `step`.
    pub fn work_item_on(&self, step: &str) -> String {
        self.run()
            .work_items
            .iter()
            .find(|w| w.step == step)
            .unwrap_or_else(|| panic!("no work item on {step}"))
            .id
            .clone()
    }

    pub fn step_state(&self, step: &str) -> Value {
        self.view()["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == step)
            .unwrap()["state"]
            .clone()
    }

    pub fn run_state(&self) -> Value {
        self.view()["run"]["state"].clone()
    }

    /// Fires every armed timer due by now, oldest first.
    pub fn fire_due_timers(&mut self) {
        loop {
            let run = self.run();
            let next = run
                .steps
                .iter()
                .flat_map(|s| {
                    s.timers
                        .iter()
                        .map(move |t| (t.fire_at, s.id.clone(), t.kind, t.generation))
                })
                .filter(|(at, ..)| at.as_millis() <= self.now)
                .min_by_key(|(at, _, _, generation)| (*at, *generation));
            let Some((_, step, kind, generation)) = next else {
                return;
            };
            self.apply(Command::TimerFired {
                step,
                kind,
                generation,
            })
            .expect("timers apply");
        }
    }
}

fn request_questions(process: &PinnedProcess, step: &str) -> usize {
    process
        .process
        .step(&id(step))
        .and_then(|s| s.work())
        .and_then(|w| w.check.as_ref())
        .map_or(0, |c| c.questions.len())
}

fn result_schema(command: &Command) -> Option<&'static str> {
    Some(match command {
        Command::StartRun(_) => "tools/start_run.result.json",
        Command::Claim { .. } => "tools/claim.result.json",
        Command::Renew { .. } => "tools/renew.result.json",
        Command::Submit { .. } => "tools/submit.result.json",
        Command::Escalate { .. } => "tools/escalate.result.json",
        Command::Decide(_) => "tools/decide.result.json",
        Command::Cancel { .. } => "tools/cancel.result.json",
        Command::SendEvent { .. } => "tools/send_event.result.json",
        Command::TimerFired { .. } | Command::ClaimExpired { .. } => return None,
    })
}

pub struct DecideBuilder<'w> {
    world: &'w mut World,
    pub decide: Decide,
}

impl DecideBuilder<'_> {
    pub fn note(mut self, note: &str) -> Self {
        self.decide.note = Some(note.to_string());
        self
    }
    pub fn output(mut self, output: Value) -> Self {
        self.decide.output = Some(obj(output));
        self
    }
    pub fn evidence(mut self, evidence: Vec<EvidenceItem>) -> Self {
        self.decide.evidence = Some(evidence);
        self
    }
    pub fn next(mut self, next: &str, reason: &str) -> Self {
        self.decide.next = Some(next.to_string());
        self.decide.reason = Some(reason.to_string());
        self
    }
    pub fn snapshot(mut self, snapshot: &str) -> Self {
        self.decide.snapshot = snapshot.to_string();
        self
    }
    pub fn send(self) -> Result<Transition, Refusal> {
        self.world.apply(Command::Decide(self.decide))
    }
}

/// A good screening submission for `check_vendor` choosing `next`.
pub fn screening(next: &str) -> Submission {
    Submission {
        output: Some(obj(json!({ "cleared": true, "summary": "No matches." }))),
        evidence: vec![file("f_91a")],
        summary: Some("Searched both lists by legal name. No hits.".to_string()),
        next: Some(next.to_string()),
        reason: Some("Vendor is cleared.".to_string()),
    }
}

pub fn refused(result: Result<Transition, Refusal>) -> (machine::ErrorCode, Vec<String>) {
    let refusal = result.expect_err("refused");
    (refusal.code, refusal.issues)
}

/// A refusal as the `error` of a tool result, for checks against `tool-error.json`.
pub fn error_object(refusal: &Refusal) -> Value {
    json!({ "code": refusal.code, "message": refusal.message, "issues": refusal.issues })
}

// ---------------------------------------------------------------- examples

/// Our example process `name` (`examples/NAME`), pinned at version 1 with every role bound to
/// the group `g_ROLE`.
pub fn example(name: &str) -> PinnedProcess {
    let path = agentprocess_testkit::example(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let loaded = load(&bytes, &Offer::EVERYTHING).unwrap_or_else(|issues| panic!("{name}: {issues:?}"));
    let roles: IndexMap<String, String> = loaded
        .process
        .role_names()
        .into_iter()
        .map(|role| (role.to_string(), format!("g_{role}")))
        .collect();
    PinnedProcess {
        process: loaded.process,
        version: 1,
        body: loaded.body,
        roles,
    }
}

/// A value that satisfies a declaration.
pub fn sample(spec: &FieldSpec, name: &str) -> Value {
    if let Some(first) = spec.one_of.as_ref().and_then(|values| values.first()) {
        return first.clone();
    }
    match spec.field_type {
        FieldType::String => json!(format!("{name} text")),
        FieldType::Number => json!(42),
        FieldType::Boolean => json!(true),
        FieldType::Date => json!("2026-10-06"),
        FieldType::Datetime => json!("2026-10-01T00:00:00Z"),
        FieldType::List => json!([]),
        FieldType::Object => json!({}),
        FieldType::Person => json!(format!("{}@acme.example", name.to_lowercase())),
    }
}

pub fn sample_map(fields: &FieldMap) -> Map<String, Value> {
    fields
        .iter()
        .filter(|(_, spec)| !spec.optional)
        .map(|(name, spec)| (name.clone(), sample(spec, name)))
        .collect()
}

/// A submission that meets `step`'s declaration, choosing `next` (or the first route).
pub fn good_submission(world: &World, step: &str, next: Option<&str>) -> Submission {
    let step = world.process.process.step(&id(step)).unwrap();
    let work = step.work().unwrap();
    let evidence = work
        .evidence
        .iter()
        .map(|kind| match kind.name() {
            "file" => file("f_91a"),
            _ => link("https://example.com/record"),
        })
        .collect::<Vec<EvidenceItem>>();
    let (next, reason) = match &step.next {
        Some(Next::Routes(routes)) => (
            Some(
                next.map(str::to_string)
                    .unwrap_or_else(|| routes[0].to.to_string()),
            ),
            Some("Chosen by the walk.".to_string()),
        ),
        _ => (None, None),
    };
    Submission {
        output: Some(sample_map(&work.output)),
        evidence,
        summary: Some(format!("Did {}.", step.id)),
        next,
        reason,
    }
}

/// Someone who may decide an item with this assignment.
pub fn assignee(assigned_to: &Assignment) -> Caller {
    match assigned_to {
        Assignment::Group(group) => person("member@acme.example", &[group.as_str()]),
        Assignment::Person(email) => person(email, &[]),
        Assignment::Operators { also: Some(group) } => person("member@acme.example", &[group.as_str()]),
        Assignment::Operators { also: None } => operator(),
    }
}

/// The seed of the `n`th command a harness applies: `n`, big-endian, then zeros.
fn numbered_seed(n: u64) -> [u8; 32] {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&n.to_be_bytes());
    seed
}
