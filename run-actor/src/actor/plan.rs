//! The transaction a batch commits, planned from the state before and after with time passed in:
//! a pure function, so what a write stores is checked without a store. Claim keys are added by
//! the actor afterwards, since they need store leases.

use super::records::{self, IndexEntries, OutboxEntry};
use super::{Applied, RunAddress};
use crate::call::RuntimeError;
use crate::idempotency::{IdempotencyRecord, PinnedBody, RequestKey};
use crate::machine::{PinnedProcess, RunState, Timestamp};
use crate::packed;
use agentprocess_store::keys::Keys;
use agentprocess_store::{Compare, TxnOp};

/// What [`plan`] needs to know.
pub(crate) struct Inputs<'a> {
    pub keys: &'a Keys,
    pub address: &'a RunAddress,
    /// The run record's version as this actor last committed it (0: no run yet).
    pub loaded_version: i64,
    /// The index and timer entries the store holds for the run.
    pub loaded_index: &'a IndexEntries,
    /// The run after the batch; `None` when no command created it.
    pub run: Option<&'a RunState>,
    pub pinned: Option<&'a PinnedProcess>,
    /// Whether the run record changed.
    pub changed: bool,
    /// Each command's request, in batch order (`None`: a scheduler command, never recorded).
    pub requests: &'a [Option<&'a RequestKey>],
    /// Each command's outcome, in batch order.
    pub outcomes: &'a [Applied],
    pub now: Timestamp,
    /// How long an idempotency record answers replays.
    pub retention_seconds: u64,
    /// How long an ended run stays in the hot store before it moves to the archive.
    pub archive_after_ms: u64,
}

/// A batch's transaction without its claim keys.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The run record's version is the one this actor knows; every recorded request is new.
    pub compares: Vec<Compare>,
    /// The run record, changed index and timer entries, outbox entries, idempotency records.
    pub ops: Vec<TxnOp>,
    /// The run record's version after the commit.
    pub version: i64,
    /// Every index and timer entry after the commit.
    pub index: IndexEntries,
    /// The earliest fire time (ms) of timers this commit adds, for the scheduler's hint.
    pub earliest_new_timer: Option<u64>,
    /// Whether the commit writes outbox entries.
    pub notified: bool,
}

/// Plans the transaction of a batch. Refused commands record nothing; a run that does not
/// serialize is `Corrupt` (a bug), and nothing is planned.
pub(crate) fn plan(inputs: Inputs<'_>) -> Result<Plan, RuntimeError> {
    let Inputs {
        keys,
        address,
        loaded_version,
        loaded_index,
        run,
        pinned,
        changed,
        requests,
        outcomes,
        now,
        retention_seconds,
        archive_after_ms,
    } = inputs;
    let RunAddress { organization, run_id } = address;
    let run_key = keys.run(organization, run_id);
    let mut compares = vec![Compare::version_is(run_key.clone(), loaded_version)];
    let mut ops = Vec::new();
    let version = if changed {
        loaded_version + 1
    } else {
        loaded_version
    };
    let index = match (run, pinned) {
        (Some(run), Some(process)) => records::index_of(keys, process, run, archive_after_ms),
        _ => IndexEntries::new(),
    };
    if changed && let Some(run) = run {
        let bytes = serde_json::to_vec(run)
            .map_err(|e| RuntimeError::Corrupt(format!("run {run_id} does not serialize: {e}")))?;
        ops.push(TxnOp::put(run_key, packed::pack(bytes)));
    }
    for (key, value) in &index {
        if loaded_index.get(key) != Some(value) {
            ops.push(TxnOp::put(key.clone(), value.clone()));
        }
    }
    for key in loaded_index.keys() {
        if !index.contains_key(key) {
            ops.push(TxnOp::delete(key.clone()));
        }
    }
    let mut seq = 0u64;
    for outcome in outcomes {
        let (Applied::Ok { notifications, .. }, Some(run)) = (outcome, run) else {
            continue;
        };
        for notification in notifications {
            let number = (u64::try_from(version).unwrap_or(0) << 16) | seq;
            seq += 1;
            let entry = OutboxEntry::new(run, format!("{run_id}.{number}"), now, notification);
            ops.push(TxnOp::put(
                keys.outbox(records::millis(now), organization, run_id, number),
                entry.to_bytes(),
            ));
        }
    }
    let expires_at = now.plus_seconds(retention_seconds);
    let pinned_body = match (run, pinned) {
        (Some(run), Some(process)) => Some(PinnedBody {
            process: &run.process,
            version: process.version,
            body: &process.body,
        }),
        _ => None,
    };
    for (request, outcome) in requests.iter().zip(outcomes) {
        if let (Some(request), Applied::Ok { data, .. }) = (request, outcome) {
            compares.push(Compare::absent(keys.idempotency(organization, &request.id)));
            let record = IdempotencyRecord {
                fingerprint: &request.fingerprint,
                run_id: Some(run_id.as_str()),
                at: now,
                data,
                pinned_body,
            };
            ops.extend(record.puts(keys, organization, &request.id, expires_at));
        }
    }
    let earliest_new_timer = index
        .keys()
        .filter(|key| !loaded_index.contains_key(*key))
        .filter_map(|key| keys.parse_timer(key))
        .map(|timer| timer.fire_at_ms)
        .min();
    Ok(Plan {
        compares,
        ops,
        version,
        index,
        earliest_new_timer,
        notified: seq > 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idempotency::Fingerprint;
    use crate::machine::OrgId;
    use crate::machine::{self, Caller, Command, Ctx, Limits, Mode, NoUploads, StartRun};
    use agentprocess_process::{Offer, PersonFormat, load};
    use agentprocess_store::CompareTarget;
    use serde_json::json;

    const SOURCE: &str = "---\nname: p\ndescription: d\ninputs:\n  ticket: string\nsteps:\n  - id: triage\n    person: desk\n    approve: Look.\n    due: 1h\n  - id: done\n    finish: done\n---\n\nbody\n";

    fn pinned() -> PinnedProcess {
        let loaded = load(SOURCE.as_bytes(), &Offer::EVERYTHING).unwrap();
        PinnedProcess {
            process: loaded.process,
            version: 1,
            body: loaded.body,
            roles: [("desk".to_string(), "g_desk".to_string())].into_iter().collect(),
        }
    }

    fn started(pinned: &PinnedProcess, now: Timestamp) -> machine::Transition {
        let ctx = Ctx {
            now,
            seed: [7; 32],
            limits: Limits::default(),
            person_format: PersonFormat::Email,
            escalate_to: &machine::Assignment::Operators { also: None },
            uploads: &NoUploads,
        };
        let command = Command::StartRun(StartRun {
            run_id: machine::start_run_id(ctx.seed, now),
            caller: Caller::agent("acme", "a1"),
            inputs: json!({ "ticket": "T-1" }),
            mode: Mode::Live,
        });
        machine::apply(pinned, None, command, &ctx).unwrap()
    }

    fn put_keys(plan: &Plan) -> Vec<Vec<u8>> {
        plan.ops
            .iter()
            .filter_map(|op| match op {
                TxnOp::Put { key, .. } => Some(key.clone()),
                _ => None,
            })
            .collect()
    }

    /// A `start_run` commits in one transaction (ARCHITECTURE: one txn per run write): the run
    /// record, the approval's work-item entry and due timer, the `work_item_opened` outbox entry,
    /// the idempotency record and its expiry, guarded by "no run yet" and "request not seen".
    #[test]
    fn a_start_plans_the_run_its_indexes_outbox_and_idempotency_record_in_one_transaction() {
        let keys = Keys::new("default");
        let pinned = pinned();
        let now = Timestamp::from_millis(1_790_812_800_000);
        let transition = started(&pinned, now);
        let run = transition.state.clone();
        let address = RunAddress {
            organization: "acme".into(),
            run_id: run.id.clone(),
        };
        let notifications = transition
            .effects
            .iter()
            .map(|machine::Effect::Notify(n)| n.clone())
            .collect();
        let outcomes = vec![Applied::Ok {
            data: transition.reply.data().clone(),
            notifications,
        }];
        let request = RequestKey {
            id: "req-1".into(),
            fingerprint: Fingerprint([1; 32]),
        };
        let empty = IndexEntries::new();
        let plan = plan(Inputs {
            keys: &keys,
            address: &address,
            loaded_version: 0,
            loaded_index: &empty,
            run: Some(&run),
            pinned: Some(&pinned),
            changed: true,
            requests: &[Some(&request)],
            outcomes: &outcomes,
            now,
            retention_seconds: 60,
            archive_after_ms: 60_000,
        })
        .unwrap();

        assert_eq!(plan.version, 1);
        let puts = put_keys(&plan);
        let run_key = keys.run(&OrgId::from("acme"), &run.id);
        assert!(puts.contains(&run_key), "the run record");
        assert!(
            puts.contains(&keys.idempotency(&OrgId::from("acme"), "req-1")),
            "the idempotency record"
        );
        assert_eq!(
            puts.iter().filter(|k| keys.parse_outbox(k).is_some()).count(),
            1,
            "one work_item_opened notification"
        );
        assert!(
            puts.iter().any(|k| keys.parse_work_item(k).is_some()),
            "the approval's work-item entry"
        );
        let due = now.plus_seconds(3600).as_millis() as u64;
        assert_eq!(plan.earliest_new_timer, Some(due), "the due timer, for the hint");
        assert!(plan.notified);
        assert_eq!(plan.compares.len(), 2);
        assert!(matches!(plan.compares[0].target, CompareTarget::Version(0)));
        assert!(matches!(
            plan.compares[1].target,
            CompareTarget::CreateRevision(0)
        ));
        assert_eq!(
            plan.compares[1].key,
            keys.idempotency(&OrgId::from("acme"), "req-1")
        );

        // The same state again, as after a refused command: nothing of the run is rewritten and
        // no record is made for a refusal.
        let again = super::plan(Inputs {
            keys: &keys,
            address: &address,
            loaded_version: plan.version,
            loaded_index: &plan.index,
            run: Some(&run),
            pinned: Some(&pinned),
            changed: false,
            requests: &[Some(&request)],
            outcomes: &[Applied::Refused(machine::Refusal::invalid("no"))],
            now,
            retention_seconds: 60,
            archive_after_ms: 60_000,
        })
        .unwrap();
        assert!(again.ops.is_empty(), "{:?}", again.ops);
        assert_eq!(again.version, 1);
        assert_eq!(again.earliest_new_timer, None);
        assert!(!again.notified);
    }
}
