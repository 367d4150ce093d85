//! Shared progression: making steps ready, completing them, following `next`, rewinding on
//! rejection and ending the run. Automatic transitions (finish reached, `wait_until` already
//! past, held event consumed) are applied here, in a loop, before a write returns.

use super::ctx::{Ctx, PinnedProcess};
use super::effect::{Effect, Notification};
use super::history::{self, HistoryEvent, HistoryKind};
use super::refusal::Refusal;
use super::state::*;
use super::{Answer, Reply, Transition, render};
use crate::Fresh;
use crate::Timestamp;
use crate::token;
use agentprocess_process::values::is_datetime;
use agentprocess_process::{DataPath, Next, PersonRef, Process, Step, StepId, StepKind, Target};
use serde_json::Value;

/// One command being applied: the run as it changes, and the effects gathered so far.
#[derive(Debug)]
pub(crate) struct Tx<'a> {
    pub pinned: &'a PinnedProcess,
    pub ctx: &'a Ctx<'a>,
    pub run: RunState,
    pub effects: Vec<Effect>,
    pub fresh: Fresh,
    /// History events of this command, appended to the run by [`Tx::finish`] only: a refusal
    /// drops the whole `Tx`, and with it these.
    pub history: Vec<HistoryEvent>,
}

impl<'a> Tx<'a> {
    pub fn new(pinned: &'a PinnedProcess, ctx: &'a Ctx<'a>, run: RunState) -> Self {
        Tx {
            pinned,
            ctx,
            run,
            effects: Vec::new(),
            fresh: Fresh::new(ctx.seed),
            history: Vec::new(),
        }
    }

    pub fn process(&self) -> &'a Process {
        &self.pinned.process
    }

    pub fn now(&self) -> Timestamp {
        self.ctx.now
    }

    /// Renders the reply from the final state.
    pub fn finish(mut self, answer: Answer) -> Transition {
        if !matches!(answer, Answer::Ignored | Answer::NeedsEvaluation(_)) {
            self.run.updated_at = self.ctx.now;
            let events = std::mem::take(&mut self.history);
            history::append(&mut self.run, events, self.ctx.limits.history_events);
        }
        let reply = match answer {
            Answer::RunView => Reply::RunView(render::run_view(self.pinned, &self.run)),
            Answer::Claim { step, token } => {
                Reply::Claim(render::claim_result(self.pinned, &self.run, &step, &token))
            }
            Answer::Renew { token, expires_at } => Reply::Renew(serde_json::json!({
                "token": token,
                "expiresAt": expires_at.to_rfc3339(),
            })),
            Answer::SendEvent { consumed_by } => {
                Reply::SendEvent(serde_json::json!({ "consumedBy": consumed_by }))
            }
            Answer::Ignored | Answer::Applied => Reply::None,
            Answer::NeedsEvaluation(request) => Reply::NeedsEvaluation(request),
        };
        Transition {
            state: self.run,
            effects: self.effects,
            reply,
        }
    }

    /// Records that `by` made a change of the run, now.
    pub fn record(&mut self, by: &str, kind: HistoryKind) {
        self.history.push(HistoryEvent {
            at: self.now(),
            by: by.to_string(),
            kind,
        });
    }

    /// `conflict` with `run_ended` when the run is over: checked before anything else.
    pub fn refuse_if_ended(&self) -> Result<(), Refusal> {
        if self.run.has_ended() {
            Err(Refusal::run_ended())
        } else {
            Ok(())
        }
    }

    pub fn step_run(&mut self, id: &StepId) -> &mut StepRun {
        self.run
            .step_mut(id)
            .expect("every process step has a run record")
    }

    pub fn notify(&mut self, notification: Notification) {
        if self.run.mode == Mode::Live {
            self.effects.push(Effect::Notify(notification));
        }
    }

    pub fn arm_timer(&mut self, step: &StepId, kind: TimerKind, fire_at: Timestamp) {
        self.run.counters.timers += 1;
        let generation = self.run.counters.timers;
        self.step_run(step).timers.push(ArmedTimer {
            kind,
            generation,
            fire_at,
        });
    }

    /// Cancels the step's armed timers of the given kinds (all kinds when `None`).
    pub fn cancel_timers(&mut self, step: &StepId, kind: Option<TimerKind>) {
        self.step_run(step)
            .timers
            .retain(|t| kind.is_some_and(|k| k != t.kind));
    }

    /// Ends the step's claim: the token stops working (a later use is `stale`), the lease goes.
    pub fn release_claim(&mut self, step: &StepId) -> Option<Claim> {
        let claim = self.step_run(step).claim.take()?;
        self.retire_token(&claim);
        Some(claim)
    }

    /// `not_accepted` with every issue, leaving the issues in the step's `handoff` for whoever
    /// takes the step next (spec §3.3: an agent's `submit` or a person's `completed`). Nothing
    /// else changes: run data, and so the snapshot, stay as they were.
    pub fn not_accepted_remembered(&self, step: &StepId, issues: Vec<String>) -> Refusal {
        let mut remembered = self.run.clone();
        if let Some(run_step) = remembered.step_mut(step) {
            run_step.handoff.issues = Some(issues.clone());
        }
        let mut refusal = Refusal::not_accepted(issues);
        refusal.remember = Some(Box::new(remembered));
        refusal
    }

    /// Remembers a token that stops being current, so presenting it later is `stale`.
    pub fn retire_token(&mut self, claim: &Claim) {
        self.run.replaced_tokens.push(TokenTag::of(&claim.token));
    }

    /// Closes the step's open work item, if any. `decided` records it for `already_decided`.
    pub fn close_work_item(&mut self, step: &StepId, decided: bool) {
        if let Some(id) = self.step_run(step).work_item.take() {
            self.run.work_items.retain(|w| w.id != id);
            if decided {
                self.run.decided_work_items.push(id);
            }
        }
    }

    /// Makes a claimed or escalated agent step claimable again, keeping its `readySince` and
    /// `due` (it is the same attempt).
    pub fn make_claimable_again(&mut self, step: &StepId) {
        let now = self.now();
        let run_step = self.step_run(step);
        run_step.state = Some(StepState::Ready);
        run_step.ready_since.get_or_insert(now);
    }

    /// A task a person returned from escalation (`check-1`): a new task work item for the
    /// step's assignee, carrying the handoff; the `due` clock keeps running (same attempt).
    pub fn reopen_task(&mut self, step: &Step) {
        let StepKind::Task { person, .. } = &step.kind else {
            return;
        };
        let id = &step.id;
        match self.resolve_person(person) {
            Ok(assigned_to) => {
                self.step_run(id).state = Some(StepState::Waiting);
                let work_item = self.open_work_item(id, WorkItemKind::Task, assigned_to.clone());
                self.notify(Notification::WorkOpened {
                    work_item,
                    step: id.clone(),
                    to: assigned_to,
                });
            }
            Err(note) => self.fail_run_at(id, "server", note),
        }
    }

    /// Grants a new claim on a ready agent step to `holder`; returns the token.
    pub fn grant_claim(
        &mut self,
        step: &StepId,
        holder: &str,
        progress: Option<String>,
        lease: Option<u64>,
    ) -> (String, Timestamp) {
        self.run.counters.tokens += 1;
        let generation = self.run.counters.tokens;
        let (token, hash) = token::mint_at(self.run.id.as_str(), generation, self.fresh.bytes("token"));
        let lease = lease.unwrap_or_else(|| {
            self.run.counters.leases += 1;
            self.run.counters.leases
        });
        let expires_at = self.now().plus_seconds(self.ctx.limits.lease_seconds);
        let run_step = self.step_run(step);
        run_step.state = Some(StepState::Claimed);
        run_step.claim = Some(Claim {
            holder: holder.to_string(),
            lease,
            token: hash,
            generation,
            expires_at,
            progress,
        });
        (token, expires_at)
    }

    /// A claim's lease ended: the step is claimable at once and the handoff carries the last
    /// progress note (spec §3.3).
    pub fn expire_claim(&mut self, step: &StepId) {
        if let Some(claim) = self.release_claim(step) {
            self.run.expired_claims.push(ExpiredClaim {
                generation: claim.generation,
                step: step.clone(),
                expired_at: claim.expires_at,
            });
            self.record(
                history::SCHEDULER,
                HistoryKind::LeaseExpired {
                    step: step.clone(),
                    holder: claim.holder,
                },
            );
            let run_step = self.step_run(step);
            run_step.lease_expiries = run_step.lease_expiries.saturating_add(1);
            if let Some(progress) = claim.progress {
                run_step.handoff.progress = Some(progress);
            }
            self.make_claimable_again(step);
        }
    }

    /// Records a completion of `step` (moving any current record into `history`), closes the
    /// attempt, and continues at `next`.
    pub fn complete(&mut self, step: &StepId, record: StepRecord, next: Option<Target>) {
        self.record_completion(step, record, StepState::Done);
        self.follow(step, next);
    }

    /// Continues from a step that just finished along `next`: a step, or (`parallel-1`) the end
    /// of its branch.
    pub fn follow(&mut self, from: &StepId, next: Option<Target>) {
        match next {
            Some(Target::Step(id)) => self.advance_to(&id),
            Some(Target::Join) => self.join_branch(from),
            None => {
                let note = format!("step {from} completed but names no next step");
                self.fail_run_at(from, "server", note);
            }
        }
    }

    /// Stores a completion as the step's current record and closes everything open on the step.
    pub fn record_completion(&mut self, step: &StepId, mut record: StepRecord, state: StepState) {
        self.close_attempt(step, true);
        self.run.counters.completions += 1;
        record.seq = self.run.counters.completions;
        let run_step = self.step_run(step);
        if let Some(previous) = run_step.current.take() {
            run_step.history.push(previous);
        }
        run_step.current = Some(record);
        run_step.state = Some(state);
        run_step.handoff = Handoff::default();
        run_step.escalation = None;
        run_step.overdue = false;
    }

    /// Closes what an attempt holds open: claim, work item, timers.
    fn close_attempt(&mut self, step: &StepId, decided: bool) {
        self.release_claim(step);
        self.close_work_item(step, decided);
        self.cancel_timers(step, None);
    }

    /// Makes `target` ready and follows edges until the run rests: steps that complete at once
    /// (finish, a past `wait_until`, a held event) are completed in the same write.
    pub fn advance_to(&mut self, target: &StepId) {
        let mut id = target.clone();
        loop {
            if self.run.has_ended() {
                return;
            }
            match self.enter(&id) {
                None => return,
                Some(Some(Target::Step(next))) => id = next,
                Some(next) => return self.follow(&id, next),
            }
        }
    }

    /// `parallel-1`: a branch reached `join`. When it is the last one, the parallel step is done
    /// and the run continues at its `next`, in the same write.
    fn join_branch(&mut self, step: &StepId) {
        let Some((parallel, entry)) = self.branch_of(step) else {
            let note = format!("step {step} joined outside a parallel branch");
            return self.fail_run_at(step, "server", note);
        };
        let process = self.process();
        let parallel_step = process.step(&parallel).expect("branch_of names a process step");
        let StepKind::Parallel { branches } = &parallel_step.kind else {
            unreachable!("branch_of returns parallel steps")
        };
        let run_parallel = self.step_run(&parallel);
        if !run_parallel.joined.contains(&entry) {
            run_parallel.joined.push(entry);
        }
        let all_joined = branches.iter().all(|b| run_parallel.joined.contains(b));
        if all_joined {
            run_parallel.state = Some(StepState::Done);
            self.follow(&parallel, process.default_next(parallel_step));
        }
    }

    /// `parallel-1`: the parallel step and branch entry whose branch holds `step`.
    pub fn branch_of(&self, step: &StepId) -> Option<(StepId, StepId)> {
        let process = self.process();
        process.steps.iter().find_map(|parallel| match &parallel.kind {
            StepKind::Parallel { branches } => branches.iter().find_map(|entry| {
                branch_steps(process, entry)
                    .iter()
                    .any(|s| s == step)
                    .then(|| (parallel.id.clone(), entry.clone()))
            }),
            _ => None,
        })
    }

    /// Makes one step ready. Returns `None` when the step now rests (ready, waiting), or
    /// `Some(next)` when it completed at once and the run goes on at `next`.
    fn enter(&mut self, id: &StepId) -> Option<Option<Target>> {
        let process = self.process();
        let step = process.step(id).expect("targets name existing steps");
        let now = self.now();
        self.run.counters.entries += 1;
        let entered = self.run.counters.entries;
        let run_step = self.step_run(id);
        run_step.entered = entered;
        run_step.ready_since = Some(now);
        run_step.due_at = None;
        run_step.overdue = false;
        run_step.escalation = None;
        run_step.handoff = Handoff::default();
        match &step.kind {
            StepKind::Agent { .. } => {
                run_step.state = Some(StepState::Ready);
                self.start_due_clock(step);
                None
            }
            StepKind::Task { person, .. } | StepKind::Approve { person, .. } => {
                match self.resolve_person(person) {
                    Ok(assigned_to) => {
                        self.step_run(id).state = Some(StepState::Waiting);
                        self.start_due_clock(step);
                        let kind = if matches!(step.kind, StepKind::Task { .. }) {
                            WorkItemKind::Task
                        } else {
                            WorkItemKind::Approve
                        };
                        let work_item = self.open_work_item(id, kind, assigned_to.clone());
                        self.notify(Notification::WorkOpened {
                            work_item,
                            step: id.clone(),
                            to: assigned_to,
                        });
                    }
                    Err(note) => self.fail_run_at(id, "server", note),
                }
                None
            }
            StepKind::Wait { duration } => {
                run_step.state = Some(StepState::Waiting);
                self.arm_timer(id, TimerKind::Wait, now.plus_seconds(duration.as_seconds()));
                None
            }
            StepKind::WaitUntil { path } => {
                let at = match self.read_path(path) {
                    Some(Value::String(text)) if is_datetime(text) => Timestamp::parse_rfc3339(text),
                    _ => None,
                };
                match at {
                    None => {
                        let note = format!("{path} is missing or not a datetime");
                        self.fail_run_at(id, "server", note);
                        None
                    }
                    Some(at) if at <= now => {
                        // The wait is over as soon as it began: no timer, the server ends it.
                        self.record(
                            "server",
                            HistoryKind::TimerFired {
                                step: id.clone(),
                                timer: TimerKind::Wait,
                            },
                        );
                        self.step_run(id).state = Some(StepState::Waiting);
                        self.record_completion(id, self.server_record(), StepState::Done);
                        Some(process.default_next(step))
                    }
                    Some(at) => {
                        self.step_run(id).state = Some(StepState::Waiting);
                        self.arm_timer(id, TimerKind::Wait, at);
                        None
                    }
                }
            }
            StepKind::WaitFor { event, timeout, .. } => {
                run_step.state = Some(StepState::Waiting);
                if let Some(position) = self.run.held_events.iter().position(|e| &e.name == event) {
                    let held = self.run.held_events.remove(position);
                    let record = StepRecord {
                        output: held.data,
                        by: held.by.clone(),
                        at: now,
                        ..StepRecord::default()
                    };
                    // The cap held when the event was held, but run data may have grown since.
                    // Run data never goes over the cap (spec §6 rule 3), and there is no caller
                    // to refuse: the step fails with `by: "server"` and a note, as a wait whose
                    // data cannot be used does (spec §3.5), and the run ends.
                    if let Some(issue) = super::acceptance::over_cap_with(self, id, &record, "data") {
                        let note = format!("held event {event} could not be consumed: {issue}");
                        self.fail_run_at(id, "server", note);
                        return None;
                    }
                    self.record(
                        &held.by,
                        HistoryKind::HeldEventConsumed {
                            name: held.name,
                            step: id.clone(),
                        },
                    );
                    self.record_completion(id, record, StepState::Done);
                    return Some(process.default_next(step));
                }
                if let Some(timeout) = timeout {
                    self.arm_timer(
                        id,
                        TimerKind::WaitForTimeout,
                        now.plus_seconds(timeout.as_seconds()),
                    );
                }
                None
            }
            StepKind::Finish { outcome } => {
                run_step.state = Some(StepState::Done);
                self.end_run(RunEnd {
                    cancelled: false,
                    outcome: Some(outcome.clone()),
                    by: "server".to_string(),
                    at: now,
                    note: None,
                });
                None
            }
            StepKind::Parallel { branches } => {
                run_step.state = Some(StepState::Waiting);
                run_step.joined.clear();
                for entry in branches {
                    self.advance_to(entry);
                }
                None
            }
        }
    }

    /// A record made by the server itself (waits).
    pub fn server_record(&self) -> StepRecord {
        StepRecord {
            by: "server".to_string(),
            at: self.now(),
            ..StepRecord::default()
        }
    }

    fn start_due_clock(&mut self, step: &Step) {
        let Some(due) = step.due() else { return };
        let due_at = self.now().plus_seconds(due.as_seconds());
        self.step_run(&step.id).due_at = Some(due_at);
        self.arm_timer(&step.id, TimerKind::Due, due_at);
    }

    pub fn open_work_item(&mut self, step: &StepId, kind: WorkItemKind, assigned_to: Assignment) -> String {
        self.run.counters.work_items += 1;
        let id = format!("w_{}", self.run.counters.work_items);
        let opened_at = self.now();
        self.run.work_items.push(WorkItem {
            id: id.clone(),
            step: step.clone(),
            kind,
            assigned_to,
            opened_at,
        });
        self.step_run(step).work_item = Some(id.clone());
        id
    }

    /// Who a person step is assigned to; `Err(note)` when a path resolves to nothing.
    fn resolve_person(&self, person: &PersonRef) -> Result<Assignment, String> {
        match person {
            PersonRef::Role(role) => self
                .pinned
                .roles
                .get(role)
                .map(|group| Assignment::Group(group.clone()))
                .ok_or_else(|| format!("role {role} is not bound to a group")),
            PersonRef::Initiator => self
                .run
                .initiator
                .clone()
                .map(Assignment::Person)
                .ok_or_else(|| "the run has no initiator".to_string()),
            PersonRef::Path(path) => match self.read_path(path) {
                Some(Value::String(person)) if !person.is_empty() => Ok(Assignment::Person(person.clone())),
                _ => Err(format!("{path} resolves to no person")),
            },
        }
    }

    /// The current value at a data path, if any.
    pub fn read_path(&self, path: &DataPath) -> Option<&Value> {
        match path {
            DataPath::Input { field } => self.run.inputs.get(field),
            DataPath::StepOutput { step, field } => {
                self.run.step(step)?.current.as_ref()?.output.as_ref()?.get(field)
            }
        }
    }

    /// Fails `step` (`decision: failed`) and ends the run `failed` (spec §3.5).
    pub fn fail_run_at(&mut self, step: &StepId, by: &str, note: String) {
        let record = StepRecord {
            decision: Some("failed".to_string()),
            note: Some(note.clone()),
            by: by.to_string(),
            at: self.now(),
            ..StepRecord::default()
        };
        self.record_completion(step, record, StepState::Failed);
        self.end_run(RunEnd {
            cancelled: false,
            outcome: Some("failed".to_string()),
            by: by.to_string(),
            at: self.now(),
            note: Some(note),
        });
    }

    /// Ends the run: unfinished steps become `cancelled`, work items go, tokens die, timers are
    /// cancelled and held events are discarded (spec §3.5).
    pub fn end_run(&mut self, end: RunEnd) {
        let open: Vec<StepId> = self
            .run
            .steps
            .iter()
            .filter(|s| s.state.is_some_and(StepState::is_open))
            .map(|s| s.id.clone())
            .collect();
        for step in open {
            self.close_attempt(&step, false);
            self.step_run(&step).state = Some(StepState::Cancelled);
        }
        self.run.work_items.clear();
        self.run.held_events.clear();
        // Every write to an ended run is `run_ended` before any token is looked at.
        self.run.retired_tokens.clear();
        self.run.replaced_tokens.clear();
        self.run.expired_claims.clear();
        let state = if end.cancelled { "cancelled" } else { "ended" };
        let outcome = end.outcome.clone();
        self.record(
            &end.by,
            HistoryKind::Ended {
                state: state.to_string(),
                outcome: outcome.clone(),
                // A cancel's reason is on its own `cancelled` event.
                note: end.note.clone().filter(|_| !end.cancelled),
            },
        );
        self.run.end = Some(end);
        self.notify(Notification::RunEnded {
            state: state.to_string(),
            outcome,
        });
    }

    /// Rejection into `on_reject` (spec §3.1): every step reached after the returned-to step,
    /// other than the rejecting approval, moves its current record into `history` and is no
    /// longer reached; the approval keeps its rejection current; the returned-to step is made
    /// ready again. `parallel-1`: when the returned-to step is inside a branch, only that branch
    /// is rewound; returning to a parallel step rewinds every branch and forks again.
    pub fn rewind(&mut self, approval: &StepId, rejection: StepRecord, to: &StepId) {
        self.record_completion(approval, rejection, StepState::Done);
        self.step_run(approval).state = None;
        let since = self.run.step(to).map_or(0, |s| s.entered);
        let region: Option<Vec<StepId>> = self
            .branch_of(to)
            .map(|(_, entry)| branch_steps(self.process(), &entry));
        for run_step in &mut self.run.steps {
            let in_region = region.as_ref().is_none_or(|steps| steps.contains(&run_step.id));
            if run_step.id == *approval
                || run_step.id == *to
                || !in_region
                || run_step.state.is_none()
                || run_step.entered <= since
            {
                continue;
            }
            if run_step.state == Some(StepState::Done)
                && let Some(record) = run_step.current.take()
            {
                run_step.history.push(record);
            }
            run_step.state = None;
            run_step.joined.clear();
        }
        self.advance_to(to);
    }

    /// Bytes of run data (`inputs` and `steps`) as JSON, for `limits.runDataBytes`.
    pub fn run_data_bytes(&self) -> usize {
        serde_json::to_vec(&render::run_data(&self.run)).map_or(usize::MAX, |b| b.len())
    }

    /// The issue when run data is over the cap, or `None`.
    pub fn over_cap_issue(&self, path: &str) -> Option<String> {
        let bytes = self.run_data_bytes();
        let cap = self.ctx.limits.run_data_bytes;
        (bytes > cap)
            .then(|| format!("{path}: run data would be {bytes} bytes, over limits.runDataBytes ({cap})"))
    }

    /// Looks a token up: the step it currently claims, or the refusal (spec §4.3: a token that
    /// does not verify is `invalid`; one whose lease ended or was replaced is `stale`).
    pub fn verify_token(&self, token: &str) -> Result<StepId, Refusal> {
        let invalid = || Refusal::invalid("the token does not verify");
        let parsed = token::take_apart(token).ok_or_else(invalid)?;
        if parsed.run_id != self.run.id {
            return Err(invalid());
        }
        let current = self
            .run
            .steps
            .iter()
            .filter_map(|s| s.claim.as_ref().map(|c| (s, c)))
            .find(|(_, c)| c.generation == parsed.generation);
        if let Some((step, claim)) = current {
            // The current token of a live claim: it verifies only with the right secret.
            if claim.token != parsed.hash {
                return Err(invalid());
            }
            if claim.expires_at <= self.now() {
                return Err(Refusal::claim_expired(
                    &step.id,
                    claim.generation,
                    claim.expires_at,
                ));
            }
            return Ok(step.id.clone());
        }
        // A token this run issued and has since replaced or ended: `stale`. Anything else, a
        // made-up secret on an issued generation included, does not verify (spec §4.3).
        let issued = (1..=self.run.counters.tokens).contains(&parsed.generation);
        let replaced = issued && self.run.replaced_tokens.contains(&TokenTag::of(&parsed.hash));
        let expired = self
            .run
            .expired_claims
            .iter()
            .find(|expired| expired.generation == parsed.generation);
        if let Some(expired) = expired.filter(|_| replaced) {
            return Err(Refusal::claim_expired(
                &expired.step,
                expired.generation,
                expired.expired_at,
            ));
        }
        if replaced || self.run.retired_tokens.contains(&parsed.hash) {
            return Err(Refusal::stale("the claim has ended or was replaced"));
        }
        Err(invalid())
    }

    /// The claimed step's agent-identity check for token tools.
    pub fn check_holder(&self, step: &StepId, caller: &super::Caller) -> Result<(), Refusal> {
        let holder = self
            .run
            .step(step)
            .and_then(|s| s.claim.as_ref())
            .map(|c| c.holder.as_str());
        if !caller.is_agent() || holder != Some(caller.name()) {
            return Err(Refusal::forbidden(
                "only the agent holding the claim may use its token",
            ));
        }
        Ok(())
    }
}

/// `parallel-1`: the steps of the branch that starts at `entry`: the entry and every step
/// reachable from it along `next` and `on_timeout` edges, stopping at `join`.
pub(crate) fn branch_steps(process: &Process, entry: &StepId) -> Vec<StepId> {
    let mut seen = vec![entry.clone()];
    let mut position = 0;
    while let Some(id) = seen.get(position).cloned() {
        position += 1;
        let Some(step) = process.step(&id) else { continue };
        let mut targets: Vec<&Target> = match &step.next {
            Some(Next::Step(target)) => vec![target],
            Some(Next::Routes(routes)) => routes.iter().map(|r| &r.to).collect(),
            None => Vec::new(),
        };
        if let StepKind::WaitFor {
            on_timeout: Some(target),
            ..
        } = &step.kind
        {
            targets.push(target);
        }
        for target in targets {
            if let Target::Step(next) = target
                && !seen.contains(next)
            {
                seen.push(next.clone());
            }
        }
    }
    seen
}
