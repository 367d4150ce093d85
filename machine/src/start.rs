//! `start_run`: check the inputs (every issue at once), refuse `initiator` steps for agent
//! starters, apply the run-data cap, and make the first step ready.

use super::advance::Tx;
use super::command::StartRun;
use super::ctx::{CallerKind, Ctx, Fresh, PinnedProcess, hex};
use super::refusal::Refusal;
use super::state::*;
use super::time::Timestamp;
use super::{Answer, Transition};
use agentprocess_ids::RunId;
use agentprocess_process::{PersonRef, check_values};
use serde_json::Value;

/// The id of a run started at `started_at` by a command whose context carries `seed`: `r_`,
/// the start time in milliseconds as 11 hex digits, then 16 hex digits of the seed's fresh
/// value for purpose `run`.
///
/// The time comes first so that new runs sit together at the end of the store's key order:
/// a run's record and its updates share the last pages of the run table instead of landing on a
/// random page of a table that holds every run not yet archived. The part after the time is
/// fixed by the seed, which the runtime derives from the organization and the `requestId` for a
/// start, so every retry of one start names the same suffix (a retry at another millisecond gets
/// another time part; its idempotency record, keyed by `requestId`, still answers it).
pub fn start_run_id(seed: [u8; 32], started_at: Timestamp) -> RunId {
    let millis = u64::try_from(started_at.as_millis()).unwrap_or(0);
    let suffix = hex(&Fresh::new(seed).bytes("run"));
    RunId::from(format!("r_{millis:011x}{}", &suffix[..16]))
}

pub(crate) fn start(pinned: &PinnedProcess, command: StartRun, ctx: &Ctx<'_>) -> Result<Transition, Refusal> {
    let process = &pinned.process;
    let mut issues: Vec<String> = Vec::new();
    let inputs = match command.inputs {
        Value::Object(inputs) => inputs,
        _ => {
            return Err(Refusal::invalid("inputs must be an object")
                .with_issues(vec!["inputs: expected object".into()]));
        }
    };
    issues.extend(
        check_values(
            &process.inputs,
            &Value::Object(inputs.clone()),
            "inputs",
            ctx.person_format,
        )
        .into_iter()
        .map(|issue| issue.to_string()),
    );
    if command.caller.is_agent() {
        for (position, step) in process.steps.iter().enumerate() {
            if step.person() == Some(&PersonRef::Initiator) {
                issues.push(format!(
                    "steps[{position}].person: step {} is assigned to initiator, and a run started by an agent has no initiator",
                    step.id
                ));
            }
        }
    }
    let initiator = match &command.caller.kind {
        CallerKind::Person { email, .. } => Some(email.clone()),
        CallerKind::Agent { .. } => None,
    };
    let run = RunState {
        id: command.run_id,
        organization: command.caller.organization.clone(),
        process: process.name.to_string(),
        version: pinned.version,
        mode: command.mode,
        started_by: command.caller.name().to_string(),
        initiator,
        started_at: ctx.now,
        updated_at: ctx.now,
        end: None,
        inputs,
        steps: process.steps.iter().map(|s| StepRun::new(s.id.clone())).collect(),
        work_items: Vec::new(),
        decided_work_items: Vec::new(),
        held_events: Vec::new(),
        retired_tokens: Vec::new(),
        replaced_tokens: Vec::new(),
        counters: Counters::default(),
    };
    let mut tx = Tx::new(pinned, ctx, run);
    if let Some(issue) = tx.over_cap_issue("inputs") {
        issues.push(issue);
    }
    if !issues.is_empty() {
        return Err(Refusal::invalid("the run cannot start with these inputs").with_issues(issues));
    }
    let first = process
        .steps
        .first()
        .expect("a valid process has steps")
        .id
        .clone();
    tx.advance_to(&first);
    Ok(tx.finish(Answer::RunView))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_is_its_start_time_then_sixteen_hex_digits_of_its_seed() {
        let id = start_run_id([3; 32], Timestamp::from_millis(1_796_000_000_123));
        let id = id.as_str();
        assert_eq!(id.len(), 2 + 11 + 16, "{id}");
        assert!(id.starts_with("r_1a2"), "{id}");
        assert_eq!(&id[2..13], format!("{:011x}", 1_796_000_000_123_u64));
        assert!(
            id[13..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(&id[13..], &hex(&Fresh::new([3; 32]).bytes("run"))[..16]);
    }

    #[test]
    fn later_runs_sort_after_earlier_ones_whatever_their_seeds() {
        let mut ids: Vec<(i64, RunId)> = (0..200_i64)
            .map(|i| {
                let seed = [u8::try_from(i % 251).unwrap(); 32];
                (
                    1_700_000_000_000 + i * 997,
                    start_run_id(seed, Timestamp::from_millis(1_700_000_000_000 + i * 997)),
                )
            })
            .collect();
        ids.reverse();
        ids.sort_by(|a, b| a.1.as_str().cmp(b.1.as_str()));
        assert!(ids.windows(2).all(|pair| pair[0].0 < pair[1].0));
    }

    #[test]
    fn a_time_before_the_epoch_counts_as_the_epoch() {
        let id = start_run_id([5; 32], Timestamp::from_millis(-5));
        assert!(id.as_str().starts_with("r_00000000000"), "{}", id.as_str());
    }
}
