//! Builds fixture runs with the run machine, one real command at a time: a start, then claims and
//! submissions of agent steps and decisions of people's work items, with sample values.

use agentprocess_process::{FieldMap, Next, PersonFormat, StepKind};
use agentprocess_run_actor::fixtures::Answered;
use agentprocess_run_actor::machine::{
    self, Assignment, Caller, Command, Ctx, Decide, Decision, EvidenceItem, Limits, Mode, NoUploads,
    PinnedProcess, Reply, RunState, StartRun, StepId, Submission, Timestamp, WorkItemKind, render,
};
use anyhow::{anyhow, bail};
use serde_json::{Map, Value};

/// The agent that starts fixture runs and does their agent steps.
pub const AGENT: &str = "fixtures-agent";
/// The person who decides fixture work items assigned to a group.
const PERSON: &str = "fixtures-person@example.com";
/// More commands than this on one run means the process loops: the run is not driven further.
const MAX_COMMANDS: usize = 64;

/// Fresh seeds: random bytes of this invocation followed by a counter, so every command of every
/// run gets its own (the machine derives ids and token secrets from the seed by hashing).
#[derive(Debug)]
struct Seeds {
    base: [u8; 24],
    next: u64,
}

impl Seeds {
    fn random() -> Self {
        let mut base = [0u8; 24];
        base[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        base[16..].copy_from_slice(&uuid::Uuid::new_v4().as_bytes()[..8]);
        Seeds { base, next: 0 }
    }

    fn next(&mut self) -> [u8; 32] {
        let mut seed = [0u8; 32];
        seed[..24].copy_from_slice(&self.base);
        seed[24..].copy_from_slice(&self.next.to_be_bytes());
        self.next += 1;
        seed
    }
}

/// Where a run is driven to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// A work item is open for people.
    PersonWork,
    /// The run ended.
    Ended,
}

/// Applies commands to fixture runs of one organization, with the server's limits.
#[derive(Debug)]
pub struct Driver {
    organization: String,
    limits: Limits,
    person_format: PersonFormat,
    escalate_to: Assignment,
    seeds: Seeds,
    /// Whether each command's answer is kept for its idempotency record.
    recording: bool,
    answered: Vec<Answered>,
}

impl Driver {
    /// `recording`: keep each command's answer for [`Driver::take_answered`].
    pub fn new(
        organization: &str,
        limits: Limits,
        person_format: PersonFormat,
        escalate_to: Assignment,
        recording: bool,
    ) -> Self {
        Driver {
            organization: organization.to_owned(),
            limits,
            person_format,
            escalate_to,
            seeds: Seeds::random(),
            recording,
            answered: Vec::new(),
        }
    }

    fn apply(
        &mut self,
        process: &PinnedProcess,
        run: Option<&RunState>,
        command: Command,
        now: Timestamp,
    ) -> anyhow::Result<machine::Transition> {
        let name = command.name();
        let ctx = Ctx {
            now,
            seed: self.seeds.next(),
            limits: self.limits,
            person_format: self.person_format,
            escalate_to: &self.escalate_to,
            uploads: &NoUploads,
        };
        let transition = machine::apply(process, run, command, &ctx)
            .map_err(|refusal| anyhow!("{} refused {name}: {refusal}", process.process.name))?;
        if let Reply::NeedsEvaluation(_) = transition.reply {
            bail!(
                "{}: a step with a check needs an evaluator; fixtures drive only steps without one",
                process.process.name
            );
        }
        if self.recording {
            self.answered.push(Answered {
                request_id: uuid::Uuid::new_v4().to_string(),
                data: transition.reply.data().clone(),
            });
        }
        Ok(transition)
    }

    /// The writes answered since the last call, each under a fresh `requestId`, when the driver
    /// records them (see [`Driver::new`]); none otherwise.
    pub fn take_answered(&mut self) -> Vec<Answered> {
        std::mem::take(&mut self.answered)
    }

    /// A new run of `process` started by the fixtures agent at `now`, with `inputs` or, when
    /// `None`, a sample value for every required input.
    pub fn start(
        &mut self,
        process: &PinnedProcess,
        inputs: Option<Map<String, Value>>,
        now: Timestamp,
    ) -> anyhow::Result<RunState> {
        let inputs = inputs.unwrap_or_else(|| samples(&process.process.inputs));
        let command = Command::StartRun(StartRun {
            run_id: machine::start_run_id(self.seeds.next(), now),
            caller: Caller::agent(&self.organization, AGENT),
            inputs: Value::Object(inputs),
            mode: Mode::Live,
        });
        Ok(self.apply(process, None, command, now)?.state)
    }

    /// Drives `run` at `now` until it is where `until` says: each ready agent step claimed and
    /// submitted, each work item approved or completed. Fails when the run cannot get there
    /// (it waits on a timer or an event, it ended before a person step, or it loops).
    pub fn drive(
        &mut self,
        process: &PinnedProcess,
        mut run: RunState,
        until: Until,
        now: Timestamp,
    ) -> anyhow::Result<RunState> {
        for _ in 0..MAX_COMMANDS {
            match (until, run.has_ended(), run.work_items.is_empty()) {
                (Until::Ended, true, _) | (Until::PersonWork, false, false) => return Ok(run),
                (Until::PersonWork, true, _) => bail!(
                    "a run of {} ended before any step waited on a person",
                    process.process.name
                ),
                _ => {}
            }
            run = self.next_step(process, run, now)?;
        }
        bail!(
            "a run of {} took more than {MAX_COMMANDS} commands without getting there",
            process.process.name
        )
    }

    /// Does the first ready agent step, or else decides the oldest work item.
    fn next_step(
        &mut self,
        process: &PinnedProcess,
        run: RunState,
        now: Timestamp,
    ) -> anyhow::Result<RunState> {
        let agent = Caller::agent(&self.organization, AGENT);
        let ready = run.steps.iter().find(|step| {
            step.state == Some(machine::StepState::Ready)
                && matches!(
                    process
                        .process
                        .steps
                        .iter()
                        .find(|s| s.id.as_str() == step.id)
                        .map(|s| &s.kind),
                    Some(StepKind::Agent { .. })
                )
        });
        if let Some(step) = ready {
            let step_id = step.id.clone();
            let claim = Command::Claim {
                caller: agent.clone(),
                step: step_id.clone(),
            };
            let claimed = self.apply(process, Some(&run), claim, now)?;
            let token = claimed.reply.data()["token"]
                .as_str()
                .ok_or_else(|| anyhow!("a claim of {step_id} answered no token"))?
                .to_owned();
            let submit = Command::Submit {
                caller: agent,
                token,
                submission: self.submission(process, &step_id)?,
                evaluation: None,
            };
            return Ok(self.apply(process, Some(&claimed.state), submit, now)?.state);
        }
        let Some(item) = run.work_items.first().cloned() else {
            let waiting: Vec<&str> = run
                .steps
                .iter()
                .filter(|step| step.state.is_some_and(|s| s.is_open()))
                .map(|step| step.id.as_str())
                .collect();
            bail!(
                "a run of {} waits at {} with nothing an agent or a person can do now \
                 (fixtures drive agent steps and people's work items only)",
                process.process.name,
                waiting.join(", ")
            );
        };
        let (decision, output) = match item.kind {
            WorkItemKind::Approve => (Decision::Approved, None),
            WorkItemKind::Task => {
                let submission = self.submission(process, &item.step)?;
                (Decision::Completed, submission.output)
            }
            WorkItemKind::Escalation => bail!("fixture runs are never escalated"),
        };
        let decide = Command::Decide(Decide {
            caller: self.assignee(&item.assigned_to),
            work_item: item.id.clone(),
            snapshot: render::snapshot(&run),
            decision,
            output,
            evidence: None,
            summary: None,
            next: None,
            reason: None,
            note: None,
            evaluation: None,
        });
        Ok(self.apply(process, Some(&run), decide, now)?.state)
    }

    /// A submission that meets the step's declaration: sample outputs, link evidence, the first
    /// route when the step declares several.
    fn submission(&self, process: &PinnedProcess, step_id: &StepId) -> anyhow::Result<Submission> {
        let step = process
            .process
            .steps
            .iter()
            .find(|s| s.id.as_str() == step_id)
            .ok_or_else(|| anyhow!("no step {step_id} in {}", process.process.name))?;
        let work = step
            .work()
            .ok_or_else(|| anyhow!("step {step_id} takes no submission"))?;
        let mut evidence = Vec::new();
        for kind in &work.evidence {
            match kind.name() {
                "link" => evidence.push(EvidenceItem {
                    kind: "link".into(),
                    reference: "https://example.com/fixture".into(),
                }),
                other => bail!("step {step_id} needs {other} evidence, which fixtures cannot upload"),
            }
        }
        let (next, reason) = match &step.next {
            Some(Next::Routes(routes)) => (
                routes.first().map(|route| route.to.to_string()),
                Some("The first route, chosen by fixtures.".to_owned()),
            ),
            _ => (None, None),
        };
        Ok(Submission {
            output: Some(samples(&work.output)),
            evidence,
            summary: Some(format!("Done {step_id}.")),
            next,
            reason,
        })
    }

    /// A person who may decide a work item assigned this way.
    fn assignee(&self, assigned_to: &Assignment) -> Caller {
        match assigned_to {
            Assignment::Group(group) => Caller::person(&self.organization, PERSON, &[group.as_str()]),
            Assignment::Person(email) => Caller::person(&self.organization, email, &[]),
            Assignment::Operators { .. } => Caller {
                operator: true,
                ..Caller::person(&self.organization, PERSON, &[])
            },
        }
    }
}

/// A value for every required field: the first allowed value, or one of the field's type.
fn samples(fields: &FieldMap) -> Map<String, Value> {
    fields
        .iter()
        .filter(|(_, spec)| !spec.optional)
        .map(|(name, spec)| (name.clone(), spec.sample(PERSON, "2030-01-01T00:00:00Z")))
        .collect()
}
