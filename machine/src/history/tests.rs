//! Each command records what it changed, in the state it returns; a refusal records nothing;
//! the history keeps its bound. Each test names the spec section of the command it drives.

use super::*;
use crate::check::{EvaluatorAnswer, EvaluatorOutcome};
use crate::command::{Command, Decide, Decision, StartRun, Submission};
use crate::ctx::{Caller, Ctx, Limits, NoUploads, PinnedProcess};
use crate::state::{Assignment, Mode, RunState, StepState, TimerKind};
use crate::{Refusal, Reply, RunId, render};
use agentprocess_process::{Offer, PersonFormat, load};
use serde_json::{Map, Value, json};

const ORG: &str = "acme";
const AGENT: &str = "a1";
const OPS: &str = "ops@acme.test";
const BOSS: &str = "boss@acme.test";
/// 2026-10-06T09:00:00Z.
const T0: i64 = 1_791_277_200_000;

/// Screening by an agent (`due` 1h), a choice between two agent routes, an approval that can
/// send the screening back, a wait, a past `wait_until`, a `wait_for` with a timeout, a finish.
const AUDIT: &str = "---
name: audit
description: d
inputs:
  pastAt: datetime
steps:
  - id: screen
    agent: Screen.
    output:
      ok: boolean
    due: 1h
  - id: route
    agent: Route.
    next: [sign_off, skip]
  - id: sign_off
    person: approvers
    approve: Sign off.
    on_reject: screen
    next: pause
  - id: skip
    finish: skipped
  - id: pause
    wait: 1h
  - id: past
    wait_until: inputs.pastAt
  - id: hear
    wait_for: paid
    timeout: 2d
  - id: done
    finish: done
---

body
";

/// One agent step with a yes/no `check`, then a finish.
const CHECKED: &str = "---
name: checked
description: d
inputs:
  pastAt: datetime
steps:
  - id: write
    agent: Write.
    output:
      text: string
    check:
      - ask: Is the text polite?
        pass: 0.9
        fail: 0.5
  - id: done
    finish: written
---

body
";

fn pinned(source: &str) -> PinnedProcess {
    let loaded = load(source.as_bytes(), &Offer::EVERYTHING).unwrap();
    PinnedProcess {
        process: loaded.process,
        version: 1,
        body: loaded.body,
        roles: [("approvers".to_string(), "finance".to_string())]
            .into_iter()
            .collect(),
    }
}

fn agent() -> Caller {
    Caller::agent(ORG, AGENT)
}

fn operator() -> Caller {
    Caller {
        operator: true,
        ..Caller::person(ORG, OPS, &["ops"])
    }
}

fn boss() -> Caller {
    Caller::person(ORG, BOSS, &["finance"])
}

fn step(id: &str) -> StepId {
    StepId::from_wire(id)
}

/// One run driven command by command, as the runtime would.
struct World {
    process: PinnedProcess,
    run: Option<RunState>,
    now: i64,
    limits: Limits,
    seeds: u8,
    token: String,
    escalate_to: Assignment,
}

impl World {
    fn new(source: &str) -> World {
        World {
            process: pinned(source),
            run: None,
            now: T0,
            limits: Limits::default(),
            seeds: 0,
            token: String::new(),
            escalate_to: Assignment::Operators { also: None },
        }
    }

    fn started(source: &str) -> World {
        let mut world = World::new(source);
        world.start().unwrap();
        world
    }

    fn run(&self) -> &RunState {
        self.run.as_ref().unwrap()
    }

    fn apply(&mut self, command: Command) -> Result<Reply, Refusal> {
        self.seeds += 1;
        let ctx = Ctx {
            now: Timestamp::from_millis(self.now),
            seed: [self.seeds; 32],
            limits: self.limits,
            person_format: PersonFormat::Email,
            escalate_to: &self.escalate_to,
            uploads: &NoUploads,
        };
        let transition = crate::apply(&self.process, self.run.as_ref(), command, &ctx)?;
        if let Some(token) = transition.reply.data()["token"].as_str() {
            self.token = token.to_string();
        }
        self.run = Some(transition.state);
        Ok(transition.reply)
    }

    /// Applies `command`, returning the history events it appended.
    fn events_of(&mut self, command: Command) -> Vec<HistoryEvent> {
        let before = self.run.clone();
        self.apply(command).unwrap();
        appended(before.as_ref(), self.run()).to_vec()
    }

    fn start(&mut self) -> Result<Reply, Refusal> {
        let inputs = json!({ "pastAt": "2026-01-01T00:00:00Z" });
        self.apply(Command::StartRun(StartRun {
            run_id: RunId::from("r_history"),
            caller: agent(),
            inputs,
            mode: Mode::Test,
        }))
    }

    fn claim(&mut self, id: &str) -> Command {
        Command::Claim {
            caller: agent(),
            step: step(id),
        }
    }

    fn submit(&self, output: Value, next: Option<&str>) -> Command {
        let Value::Object(output) = output else {
            panic!("an object")
        };
        Command::Submit {
            caller: agent(),
            token: self.token.clone(),
            submission: Submission {
                output: Some(output),
                summary: Some("Done it.".into()),
                next: next.map(str::to_string),
                reason: next.map(|_| "Because.".to_string()),
                ..Submission::default()
            },
            evaluation: None,
        }
    }

    fn decide(&self, caller: Caller, decision: Decision, note: Option<&str>) -> Command {
        let work_item = self
            .run()
            .work_items
            .last()
            .expect("an open work item")
            .id
            .clone();
        Command::Decide(Decide {
            caller,
            work_item,
            snapshot: render::snapshot(self.run()),
            decision,
            output: None,
            evidence: None,
            summary: None,
            next: None,
            reason: None,
            note: note.map(str::to_string),
            evaluation: None,
        })
    }

    fn fire(&mut self, id: &str, kind: TimerKind) -> Command {
        let generation = self
            .run()
            .step(&step(id))
            .unwrap()
            .timers
            .iter()
            .find(|t| t.kind == kind)
            .expect("an armed timer")
            .generation;
        Command::TimerFired {
            step: step(id),
            kind,
            generation,
        }
    }

    /// From a fresh run to `sign_off` waiting on the approvers.
    fn reach_sign_off(&mut self) {
        let claim = self.claim("screen");
        self.apply(claim).unwrap();
        self.apply(self.submit(json!({ "ok": true }), None)).unwrap();
        let claim = self.claim("route");
        self.apply(claim).unwrap();
        self.apply(self.submit(json!({}), Some("sign_off"))).unwrap();
    }
}

fn kinds(events: &[HistoryEvent]) -> Vec<HistoryKind> {
    events.iter().map(|e| e.kind.clone()).collect()
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_millis(T0 + seconds * 1000)
}

#[test]
fn spec_3_2_start_run_records_started_with_its_mode_and_by_the_starter() {
    let mut world = World::new(AUDIT);
    world.start().unwrap();
    let history = &world.run().history;
    assert_eq!(
        history,
        &vec![HistoryEvent {
            at: at(0),
            by: AGENT.into(),
            kind: HistoryKind::Started { mode: Mode::Test },
        }]
    );
    assert_eq!(world.run().history_dropped, 0);
}

#[test]
fn spec_3_3_claim_records_the_step_and_when_the_claim_expires() {
    let mut world = World::started(AUDIT);
    let claim = world.claim("screen");
    let events = world.events_of(claim);
    let expires_at = at(i64::try_from(Limits::DEFAULT_LEASE_SECONDS).unwrap());
    assert_eq!(
        events,
        vec![HistoryEvent {
            at: at(0),
            by: AGENT.into(),
            kind: HistoryKind::Claimed {
                step: step("screen"),
                expires_at,
            },
        }]
    );
}

#[test]
fn spec_3_3_renew_records_the_new_expiry_and_the_progress_note_it_sent() {
    let mut world = World::started(AUDIT);
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    world.now += 60_000;
    let renew = |world: &World, progress: Option<&str>| Command::Renew {
        caller: agent(),
        token: world.token.clone(),
        progress: progress.map(str::to_string),
    };
    let events = world.events_of(renew(&world, Some("half the lists")));
    let lease = i64::try_from(Limits::DEFAULT_LEASE_SECONDS).unwrap();
    assert_eq!(
        kinds(&events),
        vec![HistoryKind::Renewed {
            step: step("screen"),
            expires_at: at(60 + lease),
            progress: Some("half the lists".into()),
        }]
    );
    // A renewal without a note records none, though the step keeps the last one.
    let events = world.events_of(renew(&world, None));
    assert_eq!(
        kinds(&events),
        vec![HistoryKind::Renewed {
            step: step("screen"),
            expires_at: at(60 + lease),
            progress: None,
        }]
    );
}

#[test]
fn spec_3_3_a_lapsed_lease_records_its_holder_and_counts_on_the_step() {
    let mut world = World::started(AUDIT);
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    let lease = world
        .run()
        .step(&step("screen"))
        .unwrap()
        .claim
        .as_ref()
        .unwrap()
        .lease;
    world.now += 3_600_000;
    let events = world.events_of(Command::ClaimExpired {
        step: step("screen"),
        lease,
    });
    assert_eq!(
        events,
        vec![HistoryEvent {
            at: at(3600),
            by: SCHEDULER.into(),
            kind: HistoryKind::LeaseExpired {
                step: step("screen"),
                holder: AGENT.into(),
            },
        }]
    );
    assert_eq!(world.run().step(&step("screen")).unwrap().lease_expiries, 1);

    // A claim that finds the lease lapsed before the scheduler did records the expiry first.
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    world.now += 3_600_000;
    let claim = world.claim("screen");
    let events = world.events_of(claim);
    assert!(matches!(
        kinds(&events)[..],
        [HistoryKind::LeaseExpired { .. }, HistoryKind::Claimed { .. }]
    ));
    assert_eq!(events[0].by, SCHEDULER);
    assert_eq!(world.run().step(&step("screen")).unwrap().lease_expiries, 2);
}

#[test]
fn spec_3_3_submit_records_the_summary_and_the_chosen_next_with_its_reason() {
    let mut world = World::started(AUDIT);
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    let events = world.events_of(world.submit(json!({ "ok": true }), None));
    assert_eq!(
        kinds(&events),
        vec![HistoryKind::Submitted {
            step: step("screen"),
            summary: Some("Done it.".into()),
            next: None,
            reason: None,
        }]
    );
    let claim = world.claim("route");
    world.apply(claim).unwrap();
    let events = world.events_of(world.submit(json!({}), Some("sign_off")));
    assert_eq!(
        kinds(&events),
        vec![HistoryKind::Submitted {
            step: step("route"),
            summary: Some("Done it.".into()),
            next: Some("sign_off".into()),
            reason: Some("Because.".into()),
        }]
    );
}

#[test]
fn spec_3_3_escalate_records_the_note_and_the_work_item_it_opened() {
    let mut world = World::started(AUDIT);
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    let events = world.events_of(Command::Escalate {
        caller: agent(),
        token: world.token.clone(),
        note: "The lists disagree.".into(),
    });
    assert_eq!(
        events,
        vec![HistoryEvent {
            at: at(0),
            by: AGENT.into(),
            kind: HistoryKind::Escalated {
                step: step("screen"),
                work_item: "w_1".into(),
                note: "The lists disagree.".into(),
            },
        }]
    );
}

#[test]
fn spec_3_4_returning_an_escalation_records_the_note_and_who_returned_it() {
    let mut world = World::started(AUDIT);
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    world
        .apply(Command::Escalate {
            caller: agent(),
            token: world.token.clone(),
            note: "Stuck.".into(),
        })
        .unwrap();
    let events = world.events_of(world.decide(operator(), Decision::Returned, Some("Use the EU list.")));
    assert_eq!(
        events,
        vec![HistoryEvent {
            at: at(0),
            by: OPS.into(),
            kind: HistoryKind::Returned {
                step: step("screen"),
                work_item: "w_1".into(),
                note: "Use the EU list.".into(),
            },
        }]
    );
    // The escalation and the return stay in the history once decided.
    assert!(
        world
            .run()
            .history
            .iter()
            .any(|e| matches!(&e.kind, HistoryKind::Escalated { note, .. } if note == "Stuck."))
    );
}

#[test]
fn spec_3_4_completing_an_escalated_agent_step_records_it_done_in_the_agents_place() {
    let mut world = World::started(AUDIT);
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    world
        .apply(Command::Escalate {
            caller: agent(),
            token: world.token.clone(),
            note: "Stuck.".into(),
        })
        .unwrap();
    let mut decide = world.decide(operator(), Decision::Completed, None);
    if let Command::Decide(decide) = &mut decide {
        let mut output = Map::new();
        output.insert("ok".into(), json!(true));
        decide.output = Some(output);
        decide.summary = Some("Checked both lists myself.".into());
    }
    let events = world.events_of(decide);
    assert_eq!(
        kinds(&events),
        vec![HistoryKind::CompletedForAgent {
            step: step("screen"),
            work_item: "w_1".into(),
            summary: Some("Checked both lists myself.".into()),
        }]
    );
    assert_eq!(events[0].by, OPS);
}

#[test]
fn spec_3_4_approving_and_rejecting_record_the_decision_and_its_note() {
    let mut world = World::started(AUDIT);
    world.reach_sign_off();
    let rejected = world.events_of(world.decide(boss(), Decision::Rejected, Some("Policy missing.")));
    assert_eq!(
        kinds(&rejected),
        vec![HistoryKind::Decided {
            step: step("sign_off"),
            work_item: "w_1".into(),
            decision: Decision::Rejected,
            note: Some("Policy missing.".into()),
        }]
    );
    assert_eq!(rejected[0].by, BOSS);
    world.reach_sign_off();
    let approved = world.events_of(world.decide(boss(), Decision::Approved, Some("Fine.")));
    assert_eq!(
        kinds(&approved),
        vec![HistoryKind::Decided {
            step: step("sign_off"),
            work_item: "w_2".into(),
            decision: Decision::Approved,
            note: Some("Fine.".into()),
        }]
    );
}

#[test]
fn spec_3_4_a_failed_decision_records_the_decision_then_the_run_ended_failed() {
    let mut world = World::started(AUDIT);
    world.reach_sign_off();
    let events = world.events_of(world.decide(boss(), Decision::Failed, Some("Fraud.")));
    assert_eq!(
        kinds(&events),
        vec![
            HistoryKind::Decided {
                step: step("sign_off"),
                work_item: "w_1".into(),
                decision: Decision::Failed,
                note: Some("Fraud.".into()),
            },
            HistoryKind::Ended {
                state: "ended".into(),
                outcome: Some("failed".into()),
                note: Some("Fraud.".into()),
            },
        ]
    );
    assert!(events.iter().all(|e| e.by == BOSS));
}

#[test]
fn spec_2_2_timers_record_their_kind_by_the_scheduler_and_a_past_wait_until_by_the_server() {
    let mut world = World::started(AUDIT);
    // `due` 1h on screen: overdue, the work stays open.
    world.now += 3_600_000;
    let due = world.fire("screen", TimerKind::Due);
    let events = world.events_of(due);
    assert_eq!(
        events,
        vec![HistoryEvent {
            at: at(3600),
            by: SCHEDULER.into(),
            kind: HistoryKind::TimerFired {
                step: step("screen"),
                timer: TimerKind::Due,
            },
        }]
    );
    world.reach_sign_off();
    world
        .apply(world.decide(boss(), Decision::Approved, None))
        .unwrap();
    // The wait ends; `past` was already past, so it ends in the same write; `hear` waits.
    world.now += 3_600_000;
    let wait = world.fire("pause", TimerKind::Wait);
    let events = world.events_of(wait);
    assert_eq!(
        kinds(&events),
        vec![
            HistoryKind::TimerFired {
                step: step("pause"),
                timer: TimerKind::Wait,
            },
            HistoryKind::TimerFired {
                step: step("past"),
                timer: TimerKind::Wait,
            },
        ]
    );
    assert_eq!(
        (events[0].by.as_str(), events[1].by.as_str()),
        (SCHEDULER, "server")
    );
    // The `wait_for` times out and the run reaches its finish in the same write.
    world.now += 2 * 86_400_000;
    let timeout = world.fire("hear", TimerKind::WaitForTimeout);
    let events = world.events_of(timeout);
    assert_eq!(
        kinds(&events),
        vec![
            HistoryKind::TimerFired {
                step: step("hear"),
                timer: TimerKind::WaitForTimeout,
            },
            HistoryKind::Ended {
                state: "ended".into(),
                outcome: Some("done".into()),
                note: None,
            },
        ]
    );
    assert_eq!(events[1].by, "server");
}

#[test]
fn spec_3_6_an_event_is_recorded_held_then_consumed_when_its_wait_is_reached() {
    let mut world = World::started(AUDIT);
    let send = |name: &str| Command::SendEvent {
        caller: agent(),
        name: name.into(),
        data: None,
    };
    let events = world.events_of(send("paid"));
    assert_eq!(
        kinds(&events),
        vec![HistoryKind::EventReceived {
            name: "paid".into(),
            consumed_by: None,
        }]
    );
    world.reach_sign_off();
    world
        .apply(world.decide(boss(), Decision::Approved, None))
        .unwrap();
    world.now += 3_600_000;
    let wait = world.fire("pause", TimerKind::Wait);
    let events = world.events_of(wait);
    let consumed = events
        .iter()
        .find(|e| matches!(e.kind, HistoryKind::HeldEventConsumed { .. }))
        .expect("the held event is consumed in the same write");
    assert_eq!(
        consumed.kind,
        HistoryKind::HeldEventConsumed {
            name: "paid".into(),
            step: step("hear"),
        }
    );
    assert_eq!(consumed.by, AGENT, "by the event's sender");
    assert!(matches!(events.last().unwrap().kind, HistoryKind::Ended { .. }));
}

#[test]
fn spec_3_6_an_event_a_waiting_step_consumes_at_once_names_that_step() {
    let mut world = World::started(AUDIT);
    world.reach_sign_off();
    world
        .apply(world.decide(boss(), Decision::Approved, None))
        .unwrap();
    world.now += 3_600_000;
    let wait = world.fire("pause", TimerKind::Wait);
    world.apply(wait).unwrap();
    let events = world.events_of(Command::SendEvent {
        caller: agent(),
        name: "paid".into(),
        data: None,
    });
    assert_eq!(
        kinds(&events)[0],
        HistoryKind::EventReceived {
            name: "paid".into(),
            consumed_by: Some(step("hear")),
        }
    );
}

#[test]
fn spec_3_5_cancel_records_the_reason_then_the_run_cancelled() {
    let mut world = World::started(AUDIT);
    let events = world.events_of(Command::Cancel {
        caller: operator(),
        reason: "Duplicate.".into(),
    });
    assert_eq!(
        kinds(&events),
        vec![
            HistoryKind::Cancelled {
                reason: "Duplicate.".into(),
            },
            HistoryKind::Ended {
                state: "cancelled".into(),
                outcome: None,
                note: None,
            },
        ]
    );
    assert!(events.iter().all(|e| e.by == OPS));
}

#[test]
fn spec_3_2_a_finish_reached_by_a_submission_records_the_end_by_the_server() {
    let mut world = World::started(AUDIT);
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    world.apply(world.submit(json!({ "ok": true }), None)).unwrap();
    let claim = world.claim("route");
    world.apply(claim).unwrap();
    let events = world.events_of(world.submit(json!({}), Some("skip")));
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[1],
        HistoryEvent {
            at: at(0),
            by: "server".into(),
            kind: HistoryKind::Ended {
                state: "ended".into(),
                outcome: Some("skipped".into()),
                note: None,
            },
        }
    );
}

/// `check-1` §3: the verdict and what it did follow the submission.
fn checked_submit(world: &mut World, yes: f64) -> Result<Reply, Refusal> {
    let claim = world.claim("write");
    if world.run().step(&step("write")).unwrap().state == Some(StepState::Ready) {
        world.apply(claim).unwrap();
    }
    let mut submit = world.submit(json!({ "text": "Dear vendor," }), None);
    if let Command::Submit { evaluation, .. } = &mut submit {
        *evaluation = Some(EvaluatorOutcome::Answered {
            model: "m".into(),
            answers: vec![EvaluatorAnswer::YesNo { yes }],
        });
    }
    world.apply(submit)
}

#[test]
fn check_3_a_pass_records_the_submission_then_the_verdict_accepted() {
    let mut world = World::started(CHECKED);
    let before = world.run.clone();
    checked_submit(&mut world, 0.95).unwrap();
    let events = appended(before.as_ref(), world.run());
    assert!(matches!(events[0].kind, HistoryKind::Claimed { .. }));
    assert_eq!(
        kinds(events)[1..3],
        [
            HistoryKind::Submitted {
                step: step("write"),
                summary: Some("Done it.".into()),
                next: None,
                reason: None,
            },
            HistoryKind::CheckVerdict {
                step: step("write"),
                verdict: Verdict::Pass,
                action: CheckAction::Accepted,
                work_item: None,
            },
        ]
    );
}

#[test]
fn check_3_unsure_records_the_verdict_sent_to_a_person_with_its_work_item() {
    let mut world = World::started(CHECKED);
    let before = world.run.clone();
    checked_submit(&mut world, 0.7).unwrap();
    let events = appended(before.as_ref(), world.run());
    assert_eq!(
        events.last().unwrap().kind,
        HistoryKind::CheckVerdict {
            step: step("write"),
            verdict: Verdict::Unsure,
            action: CheckAction::ToPerson,
            work_item: Some("w_1".into()),
        }
    );
}

#[test]
fn check_3_a_fail_is_refused_and_the_handoff_it_leaves_carries_the_verdict_sent_back() {
    let mut world = World::started(CHECKED);
    let claim = world.claim("write");
    world.apply(claim).unwrap();
    let before = world.run().clone();
    let refusal = checked_submit(&mut world, 0.1).unwrap_err();
    let remembered = refusal.remember.expect("a fail leaves the issues in the handoff");
    assert_eq!(
        kinds(appended(Some(&before), &remembered)),
        vec![HistoryKind::CheckVerdict {
            step: step("write"),
            verdict: Verdict::Fail,
            action: CheckAction::SentBack,
            work_item: None,
        }]
    );
}

#[test]
fn a_refused_command_records_nothing() {
    let mut world = World::started(AUDIT);
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    let before = world.run().clone();
    let refused = [
        // Another claim on a claimed step: conflict.
        world.claim("screen"),
        // An escalation without a note: invalid.
        Command::Escalate {
            caller: agent(),
            token: world.token.clone(),
            note: " ".into(),
        },
        // An agent may never cancel.
        Command::Cancel {
            caller: agent(),
            reason: "No.".into(),
        },
        // A submission that misses its output: not_accepted.
        world.submit(json!({}), None),
    ];
    for command in refused {
        let name = command.name();
        let refusal = world.apply(command).expect_err(name);
        let after = refusal
            .remember
            .map_or_else(|| world.run().clone(), |state| *state);
        assert_eq!(after.history, before.history, "{name}");
        assert!(appended(Some(&before), &after).is_empty(), "{name}");
    }
    // A timer that no longer applies is ignored and records nothing either.
    let events = world.events_of(Command::ClaimExpired {
        step: step("screen"),
        lease: 99,
    });
    assert!(events.is_empty());
}

#[test]
fn the_history_keeps_its_bound_dropping_the_oldest_and_counting_them() {
    let mut world = World::new(AUDIT);
    world.limits.history_events = 3;
    world.start().unwrap();
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    for _ in 0..4 {
        world
            .apply(Command::Renew {
                caller: agent(),
                token: world.token.clone(),
                progress: None,
            })
            .unwrap();
    }
    // started, claimed, 4 renewals: 6 recorded, the 3 newest kept.
    let run = world.run();
    assert_eq!(run.history.len(), 3);
    assert_eq!(run.history_dropped, 3);
    assert_eq!(run.history_recorded(), 6);
    assert!(
        run.history
            .iter()
            .all(|e| matches!(e.kind, HistoryKind::Renewed { .. }))
    );
    // What the next command appended is still told apart from what was kept.
    let before = world.run.clone();
    world
        .apply(Command::Cancel {
            caller: operator(),
            reason: "Enough.".into(),
        })
        .unwrap();
    let appended = appended(before.as_ref(), world.run());
    assert_eq!(appended.len(), 2);
    assert!(matches!(appended[0].kind, HistoryKind::Cancelled { .. }));
    assert_eq!(world.run().history_dropped, 5);
}

#[test]
fn events_serialize_with_camel_case_types_and_rfc_3339_times_and_read_back() {
    let event = HistoryEvent {
        at: at(0),
        by: AGENT.into(),
        kind: HistoryKind::Claimed {
            step: step("screen"),
            expires_at: at(600),
        },
    };
    let value = serde_json::to_value(&event).unwrap();
    assert_eq!(
        value,
        json!({ "at": "2026-10-06T09:00:00Z", "by": "a1", "type": "claimed", "step": "screen",
                "expiresAt": "2026-10-06T09:10:00Z" })
    );
    assert_eq!(serde_json::from_value::<HistoryEvent>(value).unwrap(), event);
    let decided = HistoryKind::Decided {
        step: step("sign_off"),
        work_item: "w_1".into(),
        decision: Decision::Rejected,
        note: None,
    };
    let value = serde_json::to_value(&decided).unwrap();
    assert_eq!(
        value,
        json!({ "type": "decided", "step": "sign_off", "workItem": "w_1", "decision": "rejected" })
    );
    assert_eq!(value["type"], decided.name());
    let timer = serde_json::to_value(HistoryKind::TimerFired {
        step: step("hear"),
        timer: TimerKind::WaitForTimeout,
    })
    .unwrap();
    assert_eq!(timer["timer"], timer_name(TimerKind::WaitForTimeout));
}

#[test]
fn a_run_stored_before_the_history_existed_loads_with_none() {
    let world = World::started(AUDIT);
    let mut stored = serde_json::to_value(world.run()).unwrap();
    let object = stored.as_object_mut().unwrap();
    assert!(object.remove("history").is_some());
    assert!(object.get("historyDropped").is_none() && object.get("history_dropped").is_none());
    for step in object["steps"].as_array_mut().unwrap() {
        step.as_object_mut().unwrap().remove("lease_expiries");
    }
    let loaded: RunState = serde_json::from_value(stored).unwrap();
    assert!(loaded.history.is_empty());
    assert_eq!(loaded.history_dropped, 0);
    assert!(loaded.steps.iter().all(|s| s.lease_expiries == 0));
}

#[test]
fn an_event_names_its_step_when_it_has_one() {
    let escalated = HistoryKind::Escalated {
        step: step("screen"),
        work_item: "w_1".into(),
        note: "Stuck.".into(),
    };
    let held = HistoryKind::EventReceived {
        name: "paid".into(),
        consumed_by: None,
    };
    assert_eq!(held.step(), None);
    assert_eq!(escalated.step(), Some(&step("screen")));
}

#[test]
fn the_inspection_shows_who_holds_a_claim_until_when_and_what_an_escalation_says() {
    let mut world = World::started(AUDIT);
    let claim = world.claim("screen");
    world.apply(claim).unwrap();
    let view = crate::inspect::inspection(world.run());
    assert_eq!(view["run"]["state"], "active");
    assert_eq!(view["run"]["startedBy"], AGENT);
    assert!(view["run"].get("end").is_none());
    let screen = &view["steps"][0];
    assert_eq!(screen["id"], "screen");
    assert_eq!(screen["state"], "claimed");
    assert_eq!(
        screen["claim"],
        json!({ "holder": AGENT, "expiresAt": "2026-10-06T09:10:00Z" })
    );
    assert_eq!(screen["leaseExpiries"], 0);
    assert_eq!(screen["due"], "2026-10-06T10:00:00Z");
    assert_eq!(
        view["steps"][1],
        json!({ "id": "route", "state": null, "leaseExpiries": 0 })
    );
    world
        .apply(Command::Escalate {
            caller: agent(),
            token: world.token.clone(),
            note: "Stuck.".into(),
        })
        .unwrap();
    let view = crate::inspect::inspection(world.run());
    assert!(view["steps"][0].get("claim").is_none());
    assert_eq!(
        view["workItems"],
        json!([{ "id": "w_1", "kind": "escalation", "step": "screen", "assignedTo": { "operators": true },
                 "openedAt": "2026-10-06T09:00:00Z", "note": "Stuck." }])
    );
    let history = history_view(world.run());
    assert_eq!(history["runId"], "r_history");
    assert_eq!(history["dropped"], 0);
    assert_eq!(history["events"].as_array().unwrap().len(), 3);
    assert_eq!(history["events"][2]["type"], "escalated");
}
