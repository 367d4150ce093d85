//! The whole key layout, in one place: every key the runtime writes and every range it reads.
//!
//! ```text
//! /agentprocess/<cluster>/                                 cluster root
//!   o/<org>/run/<runId>                                    run record
//!   o/<org>/idem/<requestId>                               idempotency record: fingerprint, expiry
//!   o/<org>/ready/<readySince>/<runId>/<stepId>            ready-step index, oldest first
//!   o/<org>/work/group/<group>/<since>/<runId>/<workItemId>    work items by group
//!   o/<org>/work/person/<person>/<since>/<runId>/<workItemId>  work items by person
//!   o/<org>/process/<name>/runs/<startedAt>/<runId>        runs of a process, oldest first
//!   o/<org>/process/<name>/inputs/<input>/<digest>/<startedAt>/<runId>
//!                                                          the same runs by an input's value
//!   o/<org>/process/<name>/published/<version>             published process versions
//!   o/<org>/upload/<uploadId>                              upload metadata
//!   o/<org>/catalog/<name>                                 latest published version of each process
//!   o/<org>/draft/<name>                                   the draft of each process (one per name)
//!   o/<org>/webhook/<webhookId>                            notification webhooks
//!   o/<org>/deadletter/<createdAt>/<runId>/<seq>           notifications that could not be delivered
//!   timer/<fireAt>/<org>/<runId>/<timerId>                 timer index, earliest first
//!   claim/<org>/<runId>/<stepId>                           claim keys (attached to a lease)
//!   outbox/<createdAt>/<org>/<runId>/<seq>                 notification outbox, oldest first
//!   idemexpiry/<expiresAt>/<org>/<requestId>               when idempotency records may go; the
//!                                                          record's payload (the original result)
//!   meta/runs-filed-by-input                               every run the store held is filed
//!                                                          under its inputs (written once)
//!   shard/<shard>                                          shard owner (attached to its lease)
//!   host/<hostId>                                          live actor hosts (attached to leases)
//!   leader/scheduler                                       scheduler election
//!   testclock/total                                        testing only: seconds the cluster's
//!                                                          clock was moved forward in all
//!   testclock/ack/<roleId>                                 testing only: what each role has
//!                                                          applied (attached to its lease)
//! ```
//!
//! Everything an organization owns sits under `o/<org>/`. Timers, claims, the outbox and the
//! idempotency expiry index are the exception ON PURPOSE: the scheduler reads them across every organization, so each is one
//! cluster-wide range (timers and outbox ordered by time first; the organization follows), and
//! claim expiry is one watch on `claim/`.
//!
//! Encodings:
//! - times are milliseconds since the Unix epoch, and numbers (versions, sequence numbers, shards)
//!   are unsigned integers, both zero-padded to 20 decimal digits, so byte order is numeric order
//!   and ranges come out oldest first;
//! - ids and names given by users are percent-encoded: bytes other than `A-Z a-z 0-9 - . _ ~ : @`
//!   become `%XX` (upper-case hex). An encoded segment never contains `/`, so no id can end its
//!   segment early and forge or reach into another key: `o/<org>/run/<id>` is only ever the run
//!   `id` of organization `org`. Ids sort among themselves by their encoding (that is, by their
//!   text except where escapes stand), which no range relies on.
//!
//! Leaf keys have no trailing `/`; prefixes always end with one, so the prefix of run `ab` never
//! covers run `abc`.

use crate::types::{KeyRange, prefix_end};
use agentprocess_ids::{OrgId, RunId, StepId};

/// Builds and parses the keys of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    root: Vec<u8>,
}

/// A ready-step index entry, parsed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyStepKey {
    pub org: OrgId,
    pub ready_since_ms: u64,
    pub run_id: RunId,
    pub step_id: StepId,
}

/// A work-item index entry (by group or by person), parsed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkItemKey {
    pub org: OrgId,
    /// The group or person the entry is filed under.
    pub assignee: Assignee,
    pub since_ms: u64,
    pub run_id: RunId,
    pub work_item_id: String,
}

/// Who a work item waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignee {
    Group(String),
    Person(String),
    /// The organization's operator queue: every person with operator rights reads it.
    Operators,
}

/// A per-process run index entry, parsed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRunKey {
    pub org: OrgId,
    pub process: String,
    pub started_at_ms: u64,
    pub run_id: RunId,
}

/// A timer index entry, parsed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerKey {
    pub fire_at_ms: u64,
    pub org: OrgId,
    pub run_id: RunId,
    pub timer_id: String,
}

/// A claim key, parsed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimKey {
    pub org: OrgId,
    pub run_id: RunId,
    pub step_id: StepId,
}

/// An outbox entry, parsed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxKey {
    pub created_at_ms: u64,
    pub org: OrgId,
    pub run_id: RunId,
    pub seq: u64,
}

/// A dead letter's key, parsed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterKey {
    pub org: OrgId,
    pub created_at_ms: u64,
    pub run_id: RunId,
    pub seq: u64,
}

/// An idempotency expiry entry, parsed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyExpiryKey {
    pub expires_at_ms: u64,
    pub org: OrgId,
    pub request_id: String,
}

/// A published process version key, parsed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedKey {
    pub org: OrgId,
    pub process: String,
    pub version: u64,
}

/// The families of keys the layout has: what a key is for, by its leading segments. Counting
/// keys and bytes per family shows where a store's size goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyFamily {
    Run,
    Idempotency,
    ReadyStep,
    WorkItem,
    ProcessRun,
    /// A run of a process filed under the digest of one of its inputs' values.
    ProcessRunInput,
    PublishedProcess,
    Upload,
    CatalogEntry,
    Draft,
    Webhook,
    DeadLetter,
    Timer,
    Claim,
    Outbox,
    IdempotencyExpiry,
    /// What the store says of itself: which one-time filings are done.
    Meta,
    Shard,
    Host,
    Leader,
    /// The shared test clock and its acknowledgements (`testing.clock_control` only).
    TestClock,
}

impl KeyFamily {
    /// Every family, in the order the layout above lists them.
    pub const ALL: [KeyFamily; 21] = [
        KeyFamily::Run,
        KeyFamily::Idempotency,
        KeyFamily::ReadyStep,
        KeyFamily::WorkItem,
        KeyFamily::ProcessRun,
        KeyFamily::ProcessRunInput,
        KeyFamily::PublishedProcess,
        KeyFamily::Upload,
        KeyFamily::CatalogEntry,
        KeyFamily::Draft,
        KeyFamily::Webhook,
        KeyFamily::DeadLetter,
        KeyFamily::Timer,
        KeyFamily::Claim,
        KeyFamily::Outbox,
        KeyFamily::IdempotencyExpiry,
        KeyFamily::Meta,
        KeyFamily::Shard,
        KeyFamily::Host,
        KeyFamily::Leader,
        KeyFamily::TestClock,
    ];

    /// The family's name: the literal segment its keys are filed under (`process-runs`,
    /// `process-inputs` and `published` for the three kinds of keys under `process/<name>/`).
    pub fn name(self) -> &'static str {
        match self {
            KeyFamily::Run => "run",
            KeyFamily::Idempotency => "idem",
            KeyFamily::ReadyStep => "ready",
            KeyFamily::WorkItem => "work",
            KeyFamily::ProcessRun => "process-runs",
            KeyFamily::ProcessRunInput => "process-inputs",
            KeyFamily::PublishedProcess => "published",
            KeyFamily::Upload => "upload",
            KeyFamily::CatalogEntry => "catalog",
            KeyFamily::Draft => "draft",
            KeyFamily::Webhook => "webhook",
            KeyFamily::DeadLetter => "deadletter",
            KeyFamily::Timer => "timer",
            KeyFamily::Claim => "claim",
            KeyFamily::Outbox => "outbox",
            KeyFamily::IdempotencyExpiry => "idemexpiry",
            KeyFamily::Meta => "meta",
            KeyFamily::Shard => "shard",
            KeyFamily::Host => "host",
            KeyFamily::Leader => "leader",
            KeyFamily::TestClock => "testclock",
        }
    }
}

/// The family of a key and the organization it belongs to, as [`Keys::family_of`] reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyOwner {
    pub family: KeyFamily,
    /// The organization the key names: every key under `o/<org>/`, and the cluster-wide
    /// timers, claims, outbox and idempotency expiry entries; `None` for the cluster's own keys
    /// (shards, hosts, the scheduler election).
    pub organization: Option<OrgId>,
}

impl Keys {
    /// The keys of cluster `cluster` (itself encoded like an id).
    pub fn new(cluster: &str) -> Self {
        let mut root = b"/agentprocess/".to_vec();
        push_id(&mut root, cluster);
        root.push(b'/');
        Keys { root }
    }

    /// Every key of the cluster.
    pub fn cluster(&self) -> KeyRange {
        KeyRange::prefix(self.root.clone())
    }

    fn key(&self) -> Builder {
        Builder(self.root.clone())
    }

    fn org(&self, org: &OrgId) -> Builder {
        self.key().lit("o").id(org.as_str())
    }

    /// Everything an organization owns (but its timers, claims and outbox entries).
    pub fn organization(&self, org: &OrgId) -> KeyRange {
        self.org(org).prefix()
    }

    /// Every organization's keys, organization by organization: read one key, take its
    /// organization ([`Keys::family_of`]), and go on past [`Keys::organization`] to list them.
    pub fn organizations(&self) -> KeyRange {
        self.key().lit("o").prefix()
    }

    // Runs and idempotency.

    pub fn run(&self, org: &OrgId, run_id: &RunId) -> Vec<u8> {
        self.org(org).lit("run").id(run_id.as_str()).leaf()
    }

    pub fn runs(&self, org: &OrgId) -> KeyRange {
        self.org(org).lit("run").prefix()
    }

    pub fn idempotency(&self, org: &OrgId, request_id: &str) -> Vec<u8> {
        self.org(org).lit("idem").id(request_id).leaf()
    }

    // Ready steps.

    pub fn ready_step(&self, org: &OrgId, ready_since_ms: u64, run_id: &RunId, step_id: &StepId) -> Vec<u8> {
        self.org(org)
            .lit("ready")
            .num(ready_since_ms)
            .id(run_id.as_str())
            .id(step_id.as_str())
            .leaf()
    }

    /// The organization's ready steps, oldest `readySince` first.
    pub fn ready_steps(&self, org: &OrgId) -> KeyRange {
        self.org(org).lit("ready").prefix()
    }

    /// The organization's steps ready since `until_ms` or before, oldest first: the front of
    /// [`Keys::ready_steps`], cut where `readySince` passes `until_ms`.
    pub fn ready_steps_until(&self, org: &OrgId, until_ms: u64) -> KeyRange {
        let start = self.ready_steps(org).start;
        let end = self.org(org).lit("ready").num(until_ms.saturating_add(1)).leaf();
        KeyRange {
            start,
            end: Some(end),
        }
    }

    pub fn parse_ready_step(&self, key: &[u8]) -> Option<ReadyStepKey> {
        let mut p = self.parse(key)?;
        p.lit("o")?;
        let org = OrgId::from(p.id()?);
        p.lit("ready")?;
        let parsed = ReadyStepKey {
            org,
            ready_since_ms: p.num()?,
            run_id: p.id()?.into(),
            step_id: StepId::from_wire(p.id()?),
        };
        p.end()?;
        Some(parsed)
    }

    // Work items.

    pub fn work_item(
        &self,
        org: &OrgId,
        assignee: &Assignee,
        since_ms: u64,
        run_id: &RunId,
        work_item_id: &str,
    ) -> Vec<u8> {
        self.work_items_builder(org, assignee)
            .num(since_ms)
            .id(run_id.as_str())
            .id(work_item_id)
            .leaf()
    }

    /// Every work item entry of the organization, by assignee (an item assigned to the operator
    /// queue and a group is filed under both).
    pub fn all_work_items(&self, org: &OrgId) -> KeyRange {
        self.org(org).lit("work").prefix()
    }

    /// The work items waiting for a group or a person, oldest first.
    pub fn work_items(&self, org: &OrgId, assignee: &Assignee) -> KeyRange {
        self.work_items_builder(org, assignee).prefix()
    }

    fn work_items_builder(&self, org: &OrgId, assignee: &Assignee) -> Builder {
        let work = self.org(org).lit("work");
        match assignee {
            Assignee::Group(group) => work.lit("group").id(group),
            Assignee::Person(person) => work.lit("person").id(person),
            Assignee::Operators => work.lit("operators"),
        }
    }

    pub fn parse_work_item(&self, key: &[u8]) -> Option<WorkItemKey> {
        let mut p = self.parse(key)?;
        p.lit("o")?;
        let org = OrgId::from(p.id()?);
        p.lit("work")?;
        let assignee = match p.segment()? {
            b"group" => Assignee::Group(p.id()?),
            b"person" => Assignee::Person(p.id()?),
            b"operators" => Assignee::Operators,
            _ => return None,
        };
        let parsed = WorkItemKey {
            org,
            assignee,
            since_ms: p.num()?,
            run_id: p.id()?.into(),
            work_item_id: p.id()?,
        };
        p.end()?;
        Some(parsed)
    }

    // Processes.

    fn process(&self, org: &OrgId, process: &str) -> Builder {
        self.org(org).lit("process").id(process)
    }

    pub fn process_run(&self, org: &OrgId, process: &str, started_at_ms: u64, run_id: &RunId) -> Vec<u8> {
        self.process(org, process)
            .lit("runs")
            .num(started_at_ms)
            .id(run_id.as_str())
            .leaf()
    }

    /// The runs of one process, oldest first.
    pub fn process_runs(&self, org: &OrgId, process: &str) -> KeyRange {
        self.process(org, process).lit("runs").prefix()
    }

    /// Run `run_id` of `process` filed under input `input`, whose value has the digest `digest`
    /// (the value itself can be of any size; the digest is the caller's, and equal values must
    /// have equal digests). Its position below [`Keys::process_runs_with_input`] is its
    /// [`Keys::process_run_position`], so one cursor walks both.
    pub fn process_run_input(
        &self,
        org: &OrgId,
        process: &str,
        input: &str,
        digest: &str,
        started_at_ms: u64,
        run_id: &RunId,
    ) -> Vec<u8> {
        self.process(org, process)
            .lit("inputs")
            .id(input)
            .id(digest)
            .num(started_at_ms)
            .id(run_id.as_str())
            .leaf()
    }

    /// The runs of one process whose input `input` has a value of digest `digest`, oldest first.
    pub fn process_runs_with_input(&self, org: &OrgId, process: &str, input: &str, digest: &str) -> KeyRange {
        self.process(org, process)
            .lit("inputs")
            .id(input)
            .id(digest)
            .prefix()
    }

    /// Where run `run_id`, started at `started_at_ms`, sits within [`Keys::process_runs`]: the
    /// key without the range's prefix. The archive orders its runs by the same bytes, so one
    /// cursor walks both tiers.
    pub fn process_run_position(started_at_ms: u64, run_id: &RunId) -> Vec<u8> {
        let mut position = format!("{started_at_ms:020}/").into_bytes();
        push_id(&mut position, run_id.as_str());
        position
    }

    /// The start time and run id of a [`Keys::process_run_position`]; `None` for other bytes.
    pub fn parse_process_run_position(position: &[u8]) -> Option<(u64, RunId)> {
        let (time, id) = (position.get(..20)?, position.get(21..)?);
        if position[20] != b'/' || !time.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let started_at_ms = std::str::from_utf8(time).ok()?.parse().ok()?;
        Some((started_at_ms, RunId::from(decode_id(id)?)))
    }

    pub fn parse_process_run(&self, key: &[u8]) -> Option<ProcessRunKey> {
        let mut p = self.parse(key)?;
        p.lit("o")?;
        let org = OrgId::from(p.id()?);
        p.lit("process")?;
        let process = p.id()?;
        p.lit("runs")?;
        let parsed = ProcessRunKey {
            org,
            process,
            started_at_ms: p.num()?,
            run_id: p.id()?.into(),
        };
        p.end()?;
        Some(parsed)
    }

    pub fn published_process(&self, org: &OrgId, process: &str, version: u64) -> Vec<u8> {
        self.process(org, process).lit("published").num(version).leaf()
    }

    /// The published versions of one process, lowest first (the last one is the latest).
    pub fn published_versions(&self, org: &OrgId, process: &str) -> KeyRange {
        self.process(org, process).lit("published").prefix()
    }

    pub fn parse_published_process(&self, key: &[u8]) -> Option<PublishedKey> {
        let mut p = self.parse(key)?;
        p.lit("o")?;
        let org = OrgId::from(p.id()?);
        p.lit("process")?;
        let process = p.id()?;
        p.lit("published")?;
        let version = p.num()?;
        p.end()?;
        Some(PublishedKey {
            org,
            process,
            version,
        })
    }

    /// Every process of the organization with everything filed under it (runs index, versions);
    /// list process names by paging through it.
    pub fn processes(&self, org: &OrgId) -> KeyRange {
        self.org(org).lit("process").prefix()
    }

    // Drafts: outside `process/<name>/` so that listing them does not page through runs.

    /// The draft of one process: what an operator imported and has not published (yet).
    pub fn draft(&self, org: &OrgId, process: &str) -> Vec<u8> {
        self.org(org).lit("draft").id(process).leaf()
    }

    /// The organization's drafts, by process name.
    pub fn drafts(&self, org: &OrgId) -> KeyRange {
        self.org(org).lit("draft").prefix()
    }

    // Uploads.

    pub fn upload(&self, org: &OrgId, upload_id: &str) -> Vec<u8> {
        self.org(org).lit("upload").id(upload_id).leaf()
    }

    pub fn uploads(&self, org: &OrgId) -> KeyRange {
        self.org(org).lit("upload").prefix()
    }

    // The process catalog, webhooks and dead letters.

    /// The catalog entry of one process: its latest published version, for `list_processes`.
    pub fn catalog_entry(&self, org: &OrgId, process: &str) -> Vec<u8> {
        self.org(org).lit("catalog").id(process).leaf()
    }

    /// The organization's catalog, by process name.
    pub fn catalog(&self, org: &OrgId) -> KeyRange {
        self.org(org).lit("catalog").prefix()
    }

    pub fn webhook(&self, org: &OrgId, webhook_id: &str) -> Vec<u8> {
        self.org(org).lit("webhook").id(webhook_id).leaf()
    }

    pub fn webhooks(&self, org: &OrgId) -> KeyRange {
        self.org(org).lit("webhook").prefix()
    }

    /// A webhook key, parsed back: (organization, webhook id).
    pub fn parse_webhook(&self, key: &[u8]) -> Option<(OrgId, String)> {
        let mut p = self.parse(key)?;
        p.lit("o")?;
        let org = OrgId::from(p.id()?);
        p.lit("webhook")?;
        let id = p.id()?;
        p.end()?;
        Some((org, id))
    }

    pub fn dead_letter(&self, org: &OrgId, created_at_ms: u64, run_id: &RunId, seq: u64) -> Vec<u8> {
        self.org(org)
            .lit("deadletter")
            .num(created_at_ms)
            .id(run_id.as_str())
            .num(seq)
            .leaf()
    }

    /// The organization's undeliverable notifications, oldest first.
    pub fn dead_letters(&self, org: &OrgId) -> KeyRange {
        self.org(org).lit("deadletter").prefix()
    }

    pub fn parse_dead_letter(&self, key: &[u8]) -> Option<DeadLetterKey> {
        let mut p = self.parse(key)?;
        p.lit("o")?;
        let org = OrgId::from(p.id()?);
        p.lit("deadletter")?;
        let parsed = DeadLetterKey {
            org,
            created_at_ms: p.num()?,
            run_id: p.id()?.into(),
            seq: p.num()?,
        };
        p.end()?;
        Some(parsed)
    }

    // Cluster-wide: timers, claims, outbox, idempotency expiry.

    pub fn idempotency_expiry(&self, expires_at_ms: u64, org: &OrgId, request_id: &str) -> Vec<u8> {
        self.key()
            .lit("idemexpiry")
            .num(expires_at_ms)
            .id(org.as_str())
            .id(request_id)
            .leaf()
    }

    /// The idempotency records that may go at or before `until_ms`, earliest first.
    pub fn idempotency_expiries_due(&self, until_ms: u64) -> KeyRange {
        let start = self.key().lit("idemexpiry").prefix().start;
        let end = match until_ms.checked_add(1) {
            Some(after) => self.key().lit("idemexpiry").num(after).0,
            None => self
                .key()
                .lit("idemexpiry")
                .prefix()
                .end
                .expect("expiry prefix has an end"),
        };
        KeyRange::new(start, end)
    }

    pub fn parse_idempotency_expiry(&self, key: &[u8]) -> Option<IdempotencyExpiryKey> {
        let mut p = self.parse(key)?;
        p.lit("idemexpiry")?;
        let parsed = IdempotencyExpiryKey {
            expires_at_ms: p.num()?,
            org: p.id()?.into(),
            request_id: p.id()?,
        };
        p.end()?;
        Some(parsed)
    }

    pub fn timer(&self, fire_at_ms: u64, org: &OrgId, run_id: &RunId, timer_id: &str) -> Vec<u8> {
        self.key()
            .lit("timer")
            .num(fire_at_ms)
            .id(org.as_str())
            .id(run_id.as_str())
            .id(timer_id)
            .leaf()
    }

    /// Every timer, earliest first.
    pub fn timers(&self) -> KeyRange {
        self.key().lit("timer").prefix()
    }

    /// The timers that fire at or before `until_ms`, earliest first.
    pub fn timers_due(&self, until_ms: u64) -> KeyRange {
        let start = self.key().lit("timer").prefix().start;
        let end = match until_ms.checked_add(1) {
            Some(after) => self.key().lit("timer").num(after).0,
            None => self.timers().end.expect("timer prefix has an end"),
        };
        KeyRange::new(start, end)
    }

    pub fn parse_timer(&self, key: &[u8]) -> Option<TimerKey> {
        let mut p = self.parse(key)?;
        p.lit("timer")?;
        let parsed = TimerKey {
            fire_at_ms: p.num()?,
            org: p.id()?.into(),
            run_id: p.id()?.into(),
            timer_id: p.id()?,
        };
        p.end()?;
        Some(parsed)
    }

    pub fn claim(&self, org: &OrgId, run_id: &RunId, step_id: &StepId) -> Vec<u8> {
        self.key()
            .lit("claim")
            .id(org.as_str())
            .id(run_id.as_str())
            .id(step_id.as_str())
            .leaf()
    }

    /// Every claim of the cluster: watch it to see claims expire.
    pub fn claims(&self) -> KeyRange {
        self.key().lit("claim").prefix()
    }

    /// The claims of one run.
    pub fn run_claims(&self, org: &OrgId, run_id: &RunId) -> KeyRange {
        self.key()
            .lit("claim")
            .id(org.as_str())
            .id(run_id.as_str())
            .prefix()
    }

    pub fn parse_claim(&self, key: &[u8]) -> Option<ClaimKey> {
        let mut p = self.parse(key)?;
        p.lit("claim")?;
        let parsed = ClaimKey {
            org: p.id()?.into(),
            run_id: p.id()?.into(),
            step_id: StepId::from_wire(p.id()?),
        };
        p.end()?;
        Some(parsed)
    }

    pub fn outbox(&self, created_at_ms: u64, org: &OrgId, run_id: &RunId, seq: u64) -> Vec<u8> {
        self.key()
            .lit("outbox")
            .num(created_at_ms)
            .id(org.as_str())
            .id(run_id.as_str())
            .num(seq)
            .leaf()
    }

    /// Every outbox entry, oldest first.
    pub fn outbox_entries(&self) -> KeyRange {
        self.key().lit("outbox").prefix()
    }

    pub fn parse_outbox(&self, key: &[u8]) -> Option<OutboxKey> {
        let mut p = self.parse(key)?;
        p.lit("outbox")?;
        let parsed = OutboxKey {
            created_at_ms: p.num()?,
            org: p.id()?.into(),
            run_id: p.id()?.into(),
            seq: p.num()?,
        };
        p.end()?;
        Some(parsed)
    }

    // Cluster membership.

    pub fn shard(&self, shard: u32) -> Vec<u8> {
        self.key().lit("shard").num(u64::from(shard)).leaf()
    }

    /// The shard map, shard 0 first.
    pub fn shards(&self) -> KeyRange {
        self.key().lit("shard").prefix()
    }

    pub fn parse_shard(&self, key: &[u8]) -> Option<u32> {
        let mut p = self.parse(key)?;
        p.lit("shard")?;
        let shard = p.num()?;
        p.end()?;
        u32::try_from(shard).ok()
    }

    pub fn host(&self, host_id: &str) -> Vec<u8> {
        self.key().lit("host").id(host_id).leaf()
    }

    pub fn hosts(&self) -> KeyRange {
        self.key().lit("host").prefix()
    }

    /// The host id of a key of [`Keys::hosts`].
    pub fn parse_host(&self, key: &[u8]) -> Option<String> {
        let mut p = self.parse(key)?;
        p.lit("host")?;
        let host_id = p.id()?;
        p.end()?;
        Some(host_id)
    }

    pub fn scheduler_leader(&self) -> Vec<u8> {
        self.key().lit("leader").lit("scheduler").leaf()
    }

    // The shared test clock (`testing.clock_control` only).

    /// The seconds the cluster's clock was moved forward in all, as decimal text.
    pub fn test_clock(&self) -> Vec<u8> {
        self.key().lit("testclock").lit("total").leaf()
    }

    /// The total a role (`role_id`, one per process) has applied to its clock, as decimal text;
    /// attached to the role's lease.
    pub fn test_clock_ack(&self, role_id: &str) -> Vec<u8> {
        self.key().lit("testclock").lit("ack").id(role_id).leaf()
    }

    /// Written once every run the store held was filed under its inputs' values (runs written
    /// since are filed as they are written): from then on `list_runs` may read by input.
    pub fn runs_filed_by_input(&self) -> Vec<u8> {
        self.key().lit("meta").lit("runs-filed-by-input").leaf()
    }

    /// Where a scan of [`Keys::organizations`] for the runs' `list_runs` entries goes on after
    /// `key`: just past it when it may be followed by more of them, else past the whole range of
    /// its kind (an organization's run records, idempotency records, ...; a process's published
    /// versions or input filings), none of which holds one.
    pub fn past_kind_of(&self, key: &[u8]) -> Vec<u8> {
        let just_past = || {
            let mut next = key.to_vec();
            next.push(0);
            next
        };
        let Some(rest) = key.strip_prefix(self.root.as_slice()) else {
            return just_past();
        };
        let slashes: Vec<usize> = rest
            .iter()
            .enumerate()
            .filter(|(_, byte)| **byte == b'/')
            .map(|(at, _)| at)
            .collect();
        // o/<org>/<kind>/... and o/<org>/process/<name>/<kind>/...
        if !rest.starts_with(b"o/") || slashes.len() < 3 {
            return just_past();
        }
        let depth = if &rest[slashes[1] + 1..slashes[2]] == b"process" {
            if slashes.len() < 5 || &rest[slashes[3] + 1..slashes[4]] == b"runs" {
                return just_past();
            }
            4
        } else {
            2
        };
        prefix_end(&key[..self.root.len() + slashes[depth] + 1]).unwrap_or_else(just_past)
    }

    /// Every role's acknowledgement of the test clock.
    pub fn test_clock_acks(&self) -> KeyRange {
        self.key().lit("testclock").lit("ack").prefix()
    }

    /// The family of a key of this cluster and its organization, read from the key's leading
    /// segments (what follows them is not checked); `None` for a key of another cluster or one
    /// this layout does not write.
    pub fn family_of(&self, key: &[u8]) -> Option<KeyOwner> {
        let mut p = self.parse(key)?;
        let (family, organization) = match p.segment()? {
            b"o" => {
                let org = OrgId::from(p.id()?);
                let family = match p.segment()? {
                    b"run" => KeyFamily::Run,
                    b"idem" => KeyFamily::Idempotency,
                    b"ready" => KeyFamily::ReadyStep,
                    b"work" => KeyFamily::WorkItem,
                    b"process" => {
                        p.id()?;
                        match p.segment()? {
                            b"runs" => KeyFamily::ProcessRun,
                            b"inputs" => KeyFamily::ProcessRunInput,
                            b"published" => KeyFamily::PublishedProcess,
                            _ => return None,
                        }
                    }
                    b"upload" => KeyFamily::Upload,
                    b"catalog" => KeyFamily::CatalogEntry,
                    b"draft" => KeyFamily::Draft,
                    b"webhook" => KeyFamily::Webhook,
                    b"deadletter" => KeyFamily::DeadLetter,
                    _ => return None,
                };
                (family, Some(org))
            }
            b"timer" => {
                p.num()?;
                (KeyFamily::Timer, Some(OrgId::from(p.id()?)))
            }
            b"claim" => (KeyFamily::Claim, Some(OrgId::from(p.id()?))),
            b"outbox" => {
                p.num()?;
                (KeyFamily::Outbox, Some(OrgId::from(p.id()?)))
            }
            b"idemexpiry" => {
                p.num()?;
                (KeyFamily::IdempotencyExpiry, Some(OrgId::from(p.id()?)))
            }
            b"meta" => (KeyFamily::Meta, None),
            b"shard" => (KeyFamily::Shard, None),
            b"host" => (KeyFamily::Host, None),
            b"leader" => (KeyFamily::Leader, None),
            b"testclock" => (KeyFamily::TestClock, None),
            _ => return None,
        };
        // Every family's keys go on past the segments read: a bare prefix is no key of ours.
        if p.0.is_empty() {
            return None;
        }
        Some(KeyOwner { family, organization })
    }

    fn parse<'k>(&self, key: &'k [u8]) -> Option<Parser<'k>> {
        key.strip_prefix(self.root.as_slice()).map(Parser)
    }
}

/// Appends `/`-terminated segments.
struct Builder(Vec<u8>);

impl Builder {
    fn lit(mut self, literal: &str) -> Self {
        self.0.extend_from_slice(literal.as_bytes());
        self.0.push(b'/');
        self
    }

    fn id(mut self, id: &str) -> Self {
        push_id(&mut self.0, id);
        self.0.push(b'/');
        self
    }

    fn num(mut self, n: u64) -> Self {
        self.0.extend_from_slice(format!("{n:020}").as_bytes());
        self.0.push(b'/');
        self
    }

    /// The key built so far, without its trailing `/`.
    fn leaf(mut self) -> Vec<u8> {
        self.0.pop();
        self.0
    }

    fn prefix(self) -> KeyRange {
        let end = prefix_end(&self.0);
        KeyRange { start: self.0, end }
    }
}

fn passes_unescaped(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b':' | b'@')
}

fn push_id(out: &mut Vec<u8>, id: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &byte in id.as_bytes() {
        if passes_unescaped(byte) {
            out.push(byte);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 15)]]);
        }
    }
}

/// Decodes an id segment; `None` unless it is exactly what [`push_id`] would write.
fn decode_id(segment: &[u8]) -> Option<String> {
    let hex = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = Vec::with_capacity(segment.len());
    let mut i = 0;
    while i < segment.len() {
        let byte = segment[i];
        if byte == b'%' {
            let decoded = hex(*segment.get(i + 1)?)? << 4 | hex(*segment.get(i + 2)?)?;
            if passes_unescaped(decoded) {
                return None;
            }
            out.push(decoded);
            i += 3;
        } else if passes_unescaped(byte) {
            out.push(byte);
            i += 1;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

/// Reads `/`-separated segments of a key below the cluster root.
struct Parser<'k>(&'k [u8]);

impl<'k> Parser<'k> {
    fn segment(&mut self) -> Option<&'k [u8]> {
        if self.0.is_empty() {
            return None;
        }
        match self.0.iter().position(|b| *b == b'/') {
            Some(i) => {
                let (segment, rest) = (&self.0[..i], &self.0[i + 1..]);
                // A `/` must be followed by another segment: leaf keys have no trailing slash.
                if rest.is_empty() {
                    return None;
                }
                self.0 = rest;
                Some(segment)
            }
            None => {
                let segment = self.0;
                self.0 = &[];
                Some(segment)
            }
        }
    }

    fn lit(&mut self, literal: &str) -> Option<()> {
        (self.segment()? == literal.as_bytes()).then_some(())
    }

    fn id(&mut self) -> Option<String> {
        decode_id(self.segment()?)
    }

    fn num(&mut self) -> Option<u64> {
        let segment = self.segment()?;
        if segment.len() != 20 || !segment.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(segment).ok()?.parse().ok()
    }

    fn end(&self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Keys {
        Keys::new("prod")
    }

    fn an_org(text: &str) -> OrgId {
        OrgId::from(text)
    }

    fn a_run(text: &str) -> RunId {
        RunId::from(text)
    }

    fn a_step(text: &str) -> StepId {
        StepId::from_wire(text)
    }

    #[test]
    fn layout_reads_as_documented() {
        let k = keys();
        assert_eq!(
            k.run(&an_org("acme"), &a_run("r1")),
            b"/agentprocess/prod/o/acme/run/r1"
        );
        assert_eq!(
            k.ready_step(
                &an_org("acme"),
                1_700_000_000_000,
                &a_run("r1"),
                &a_step("review")
            ),
            b"/agentprocess/prod/o/acme/ready/00000001700000000000/r1/review"
        );
        assert_eq!(
            k.claim(&an_org("acme"), &a_run("r1"), &a_step("review")),
            b"/agentprocess/prod/claim/acme/r1/review"
        );
        assert_eq!(
            k.work_item(
                &an_org("acme"),
                &Assignee::Person("ana@example.com".into()),
                5,
                &a_run("r1"),
                "w1"
            ),
            b"/agentprocess/prod/o/acme/work/person/ana@example.com/00000000000000000005/r1/w1"
        );
    }

    #[test]
    fn a_process_run_position_is_its_key_below_the_range_and_parses_back() {
        let k = keys();
        let org = OrgId::from("acme");
        for (at, id) in [(0u64, "r_1"), (1_700_000_000_000, "r/odd id%"), (u64::MAX, "")] {
            let id = RunId::from(id);
            let key = k.process_run(&org, "invoice", at, &id);
            let range = k.process_runs(&org, "invoice");
            let position = Keys::process_run_position(at, &id);
            assert_eq!(&key[range.start.len()..], position.as_slice());
            assert_eq!(Keys::parse_process_run_position(&position), Some((at, id)));
        }
        assert_eq!(Keys::parse_process_run_position(b"00000000000000000001-r"), None);
        assert_eq!(Keys::parse_process_run_position(b"0000000000000000000x/r"), None);
        assert_eq!(Keys::parse_process_run_position(b"short"), None);
    }

    #[test]
    fn a_scan_for_runs_listing_entries_skips_whole_kinds_but_never_one_of_them() {
        let k = keys();
        let org = OrgId::from("acme");
        let run = RunId::from("r_1");
        let listing = k.process_run(&org, "invoice", 7, &run);
        let mut past_listing = listing.clone();
        past_listing.push(0);
        assert_eq!(k.past_kind_of(&listing), past_listing);
        // Past every run record of the organization, not past its processes.
        let record = k.run(&org, &run);
        let past_records = k.past_kind_of(&record);
        assert!(past_records > record);
        assert!(past_records <= k.upload(&org, "u"), "the next kind starts after");
        assert!(listing < record, "process sorts before run");
        // Past a process's filings and published versions, onto its runs or the next process.
        let filed = k.process_run_input(&org, "invoice", "vendor", "ab", 7, &run);
        let past_filed = k.past_kind_of(&filed);
        assert!(past_filed > filed && past_filed <= listing);
        let published = k.published_process(&org, "invoice", 3);
        let past_published = k.past_kind_of(&published);
        assert!(past_published > published);
        assert!(past_published <= k.process_run(&org, "invoice2", 0, &run));
        // A key of no organization: just past it.
        let shard = k.shard(4);
        let mut past_shard = shard.clone();
        past_shard.push(0);
        assert_eq!(k.past_kind_of(&shard), past_shard);
    }

    #[test]
    fn a_run_filed_under_an_input_sits_at_its_position_and_apart_from_the_runs_range() {
        let k = keys();
        let org = OrgId::from("acme");
        let id = RunId::from("r_1");
        let key = k.process_run_input(&org, "invoice", "vendor/name", "ab12", 1_700_000_000_000, &id);
        let range = k.process_runs_with_input(&org, "invoice", "vendor/name", "ab12");
        let within = |range: &KeyRange| range.contains(&key);
        assert!(within(&range));
        assert_eq!(
            &key[range.start.len()..],
            Keys::process_run_position(1_700_000_000_000, &id).as_slice()
        );
        let runs = k.process_runs(&org, "invoice");
        assert!(!within(&runs), "not among the process's runs");
        let other_value = k.process_runs_with_input(&org, "invoice", "vendor/name", "ab1");
        assert!(!within(&other_value), "no digest covers another");
        assert_eq!(k.family_of(&key).unwrap().family, KeyFamily::ProcessRunInput);
    }

    #[test]
    fn ready_steps_until_holds_the_steps_ready_by_then_and_no_later_ones() {
        let k = keys();
        let org = an_org("o");
        let range = k.ready_steps_until(&org, 1_000);
        let within = |key: &[u8]| key >= range.start.as_slice() && key < range.end.as_deref().unwrap();
        for (ready_since, expected) in [
            (0, true),
            (999, true),
            (1_000, true),
            (1_001, false),
            (u64::MAX, false),
        ] {
            let key = k.ready_step(&org, ready_since, &a_run("r"), &a_step("s"));
            assert_eq!(within(&key), expected, "ready since {ready_since}");
        }
        let other = k.ready_step(&an_org("p"), 5, &a_run("r"), &a_step("s"));
        assert!(!within(&other));
        assert_eq!(k.ready_steps_until(&org, 0).start, k.ready_steps(&org).start);
    }

    #[test]
    fn time_ordered_indexes_come_out_oldest_first() {
        let k = keys();
        let times = [
            0u64,
            9,
            10,
            99,
            1_000,
            1_699_999_999_999,
            1_700_000_000_000,
            u64::MAX,
        ];
        let mut ready: Vec<Vec<u8>> = times
            .iter()
            .rev()
            .map(|t| k.ready_step(&an_org("o"), *t, &a_run("r"), &a_step("s")))
            .collect();
        ready.sort();
        let parsed: Vec<u64> = ready
            .iter()
            .map(|key| k.parse_ready_step(key).unwrap().ready_since_ms)
            .collect();
        assert_eq!(parsed, times);

        let mut timers: Vec<Vec<u8>> = times
            .iter()
            .rev()
            .map(|t| k.timer(*t, &an_org("z"), &a_run("r"), "t"))
            .collect();
        timers.sort();
        let parsed: Vec<u64> = timers
            .iter()
            .map(|key| k.parse_timer(key).unwrap().fire_at_ms)
            .collect();
        assert_eq!(parsed, times);

        // Within one time, the organization and ids decide; across times, time alone does.
        assert!(k.timer(1, &an_org("zzz"), &a_run("r"), "t") < k.timer(2, &an_org("aaa"), &a_run("r"), "t"));
        assert!(k.outbox(5, &an_org("o"), &a_run("r"), 10) > k.outbox(5, &an_org("o"), &a_run("r"), 9));
        assert!(k.published_process(&an_org("o"), "p", 10) > k.published_process(&an_org("o"), "p", 9));
    }

    #[test]
    fn timers_due_covers_exactly_the_due_timers() {
        let k = keys();
        let due = k.timers_due(1_000);
        assert!(due.contains(&k.timer(0, &an_org("o"), &a_run("r"), "t")));
        assert!(due.contains(&k.timer(1_000, &an_org("o"), &a_run("r"), "t")));
        assert!(!due.contains(&k.timer(1_001, &an_org("o"), &a_run("r"), "t")));
        assert!(!due.contains(&k.claim(&an_org("o"), &a_run("r"), &a_step("s"))));
        assert!(
            k.timers_due(u64::MAX)
                .contains(&k.timer(u64::MAX, &an_org("o"), &a_run("r"), "t"))
        );
    }

    #[test]
    fn every_key_parses_back_to_its_parts() {
        let k = keys();
        let odd = "a/b%2F c\u{e9}\u{0}\u{1f600}";
        let ready = k.ready_step(&an_org(odd), 42, &a_run(odd), &a_step("s/1"));
        assert_eq!(
            k.parse_ready_step(&ready),
            Some(ReadyStepKey {
                org: odd.into(),
                ready_since_ms: 42,
                run_id: odd.into(),
                step_id: a_step("s/1")
            })
        );
        let work = k.work_item(
            &an_org("o"),
            &Assignee::Group("ops/eu".into()),
            7,
            &a_run("r"),
            "w",
        );
        assert_eq!(
            k.parse_work_item(&work).map(|w| (w.assignee, w.since_ms)),
            Some((Assignee::Group("ops/eu".into()), 7))
        );
        let run = k.process_run(&an_org("o"), "expense report", 3, &a_run("r9"));
        assert_eq!(
            k.parse_process_run(&run),
            Some(ProcessRunKey {
                org: "o".into(),
                process: "expense report".into(),
                started_at_ms: 3,
                run_id: "r9".into()
            })
        );
        assert_eq!(
            k.parse_claim(&k.claim(&an_org("o"), &a_run(odd), &a_step("s")))
                .map(|c| c.run_id),
            Some(a_run(odd))
        );
        assert_eq!(
            k.parse_outbox(&k.outbox(1, &an_org("o"), &a_run("r"), 2))
                .map(|o| (o.created_at_ms, o.seq)),
            Some((1, 2))
        );
        assert_eq!(
            k.parse_published_process(&k.published_process(&an_org("o"), "p", 4))
                .map(|p| p.version),
            Some(4)
        );
        assert_eq!(k.parse_shard(&k.shard(255)), Some(255));
        assert_eq!(
            k.parse_host(&k.host("actor-1/eu")),
            Some("actor-1/eu".to_string())
        );
        assert_eq!(k.parse_host(&k.shard(1)), None);
        assert!(k.hosts().contains(&k.host("actor-1/eu")));
        let expiry = k.idempotency_expiry(9, &an_org("o"), "req/1");
        assert_eq!(
            k.parse_idempotency_expiry(&expiry)
                .map(|e| (e.expires_at_ms, e.request_id)),
            Some((9, "req/1".to_string()))
        );
        assert!(k.idempotency_expiries_due(9).contains(&expiry));
        assert!(!k.idempotency_expiries_due(8).contains(&expiry));
        assert!(
            k.organization(&an_org("o"))
                .contains(&k.dead_letter(&an_org("o"), 1, &a_run("r"), 2))
        );
        assert!(
            k.organization(&an_org("o"))
                .contains(&k.webhook(&an_org("o"), "w"))
        );
        assert_eq!(
            k.parse_webhook(&k.webhook(&an_org("o"), "hook/1")),
            Some((an_org("o"), "hook/1".to_string()))
        );
        assert_eq!(
            k.parse_webhook(&k.dead_letter(&an_org("o"), 1, &a_run("r"), 2)),
            None
        );
        assert_eq!(
            k.parse_dead_letter(&k.dead_letter(&an_org("o/x"), 1, &a_run("run/9"), 2)),
            Some(DeadLetterKey {
                org: "o/x".into(),
                created_at_ms: 1,
                run_id: "run/9".into(),
                seq: 2
            })
        );
        assert_eq!(
            k.parse_dead_letter(&k.outbox(1, &an_org("o"), &a_run("r"), 2)),
            None
        );
        assert_eq!(k.parse_dead_letter(&k.webhook(&an_org("o"), "w")), None);
        assert!(k.drafts(&an_org("o")).contains(&k.draft(&an_org("o"), "p")));
        assert!(
            !k.drafts(&an_org("o"))
                .contains(&k.catalog_entry(&an_org("o"), "p"))
        );
        assert!(!k.drafts(&an_org("o")).contains(&k.draft(&an_org("o2"), "p")));
        // A key of another kind, or of another cluster, does not parse.
        assert_eq!(k.parse_timer(&ready), None);
        assert_eq!(Keys::new("staging").parse_ready_step(&ready), None);
    }

    #[test]
    fn ids_with_separators_cannot_forge_other_keys() {
        let k = keys();
        // A run id that tries to climb into another organization's records.
        let forged = k.run(&an_org("evil"), &a_run("x/../../o/acme/run/r1"));
        assert_ne!(forged, k.run(&an_org("acme"), &a_run("r1")));
        assert!(!k.organization(&an_org("acme")).contains(&forged));
        assert!(k.runs(&an_org("evil")).contains(&forged));

        // An organization named like a prefix of another sees none of the other's keys.
        assert!(
            !k.organization(&an_org("acme"))
                .contains(&k.run(&an_org("acme/run"), &a_run("r1")))
        );
        assert!(
            !k.organization(&an_org("ac"))
                .contains(&k.run(&an_org("acme"), &a_run("r1")))
        );
        assert!(
            !k.runs(&an_org("acme"))
                .contains(&k.idempotency(&an_org("acme"), "run/r1"))
        );

        // A run's claims range does not cover a run whose id extends it.
        assert!(!k.run_claims(&an_org("o"), &a_run("r1")).contains(&k.claim(
            &an_org("o"),
            &a_run("r10"),
            &a_step("s")
        )));
        assert!(!k.run_claims(&an_org("o"), &a_run("r1")).contains(&k.claim(
            &an_org("o"),
            &a_run("r1/x"),
            &a_step("s")
        )));

        // Ids that would inject a fake step or time into the ready index parse back intact.
        let tricky = k.ready_step(&an_org("o"), 5, &a_run("r/00000000000000000001/x"), &a_step("s"));
        let parsed = k.parse_ready_step(&tricky).unwrap();
        assert_eq!(
            (parsed.run_id.as_str(), parsed.step_id.as_str()),
            ("r/00000000000000000001/x", "s")
        );
        assert!(!k.ready_steps(&an_org("o/ready")).contains(&tricky));

        // Percent signs are escaped too, so an id cannot spell a pre-escaped separator.
        assert_ne!(
            k.run(&an_org("o"), &a_run("a%2Fb")),
            k.run(&an_org("o"), &a_run("a/b"))
        );
        // Distinct ids give distinct keys, including the empty id and escape-looking ones.
        let ids = [
            "", "a", "a/", "/a", "a%", "%2F", "%252F", "a b", "A", "\u{0}", "a.b", "a:b@c",
        ];
        let mut all: Vec<Vec<u8>> = ids.iter().map(|id| k.run(&an_org("o"), &a_run(id))).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), ids.len());
        for id in ids {
            assert!(
                !k.run(&an_org("o"), &a_run(id))[k.runs(&an_org("o")).start.len()..].contains(&b'/'),
                "{id:?}"
            );
        }
    }

    /// Every key the layout writes falls in the family named after its leading segments, with
    /// the organization it names; keys of other clusters and unknown shapes fall in none.
    #[test]
    fn family_of_names_the_family_and_organization_of_every_key_the_layout_writes() {
        use KeyFamily as F;
        let k = keys();
        let org = an_org("acme/eu");
        let (run, step) = (a_run("r1"), a_step("s"));
        let group = Assignee::Group("ops".into());
        let expected: Vec<(Vec<u8>, KeyFamily, Option<&OrgId>)> = vec![
            (k.run(&org, &run), F::Run, Some(&org)),
            (k.idempotency(&org, "req/1"), F::Idempotency, Some(&org)),
            (k.ready_step(&org, 5, &run, &step), F::ReadyStep, Some(&org)),
            (k.work_item(&org, &group, 5, &run, "w1"), F::WorkItem, Some(&org)),
            (
                k.work_item(&org, &Assignee::Operators, 5, &run, "w1"),
                F::WorkItem,
                Some(&org),
            ),
            (k.process_run(&org, "runs", 5, &run), F::ProcessRun, Some(&org)),
            (
                k.process_run_input(&org, "inputs", "vendor", "ab", 5, &run),
                F::ProcessRunInput,
                Some(&org),
            ),
            (
                k.published_process(&org, "published", 2),
                F::PublishedProcess,
                Some(&org),
            ),
            (k.upload(&org, "f1"), F::Upload, Some(&org)),
            (k.catalog_entry(&org, "p"), F::CatalogEntry, Some(&org)),
            (k.draft(&org, "p"), F::Draft, Some(&org)),
            (k.webhook(&org, "w"), F::Webhook, Some(&org)),
            (k.dead_letter(&org, 1, &run, 2), F::DeadLetter, Some(&org)),
            (k.timer(9, &org, &run, "due.1.s"), F::Timer, Some(&org)),
            (k.claim(&org, &run, &step), F::Claim, Some(&org)),
            (k.outbox(9, &org, &run, 3), F::Outbox, Some(&org)),
            (
                k.idempotency_expiry(9, &org, "req/1"),
                F::IdempotencyExpiry,
                Some(&org),
            ),
            (k.runs_filed_by_input(), F::Meta, None),
            (k.shard(7), F::Shard, None),
            (k.host("h1"), F::Host, None),
            (k.scheduler_leader(), F::Leader, None),
            (k.test_clock(), F::TestClock, None),
            (k.test_clock_ack("gateway-1"), F::TestClock, None),
        ];
        for (key, family, organization) in &expected {
            assert_eq!(
                k.family_of(key),
                Some(KeyOwner {
                    family: *family,
                    organization: organization.cloned()
                }),
                "{}",
                String::from_utf8_lossy(key)
            );
        }
        let mut seen: Vec<KeyFamily> = expected.iter().map(|(_, family, _)| *family).collect();
        seen.dedup();
        assert_eq!(seen, KeyFamily::ALL, "one example per family, in layout order");
        let names: std::collections::BTreeSet<&str> = KeyFamily::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names.len(), KeyFamily::ALL.len(), "names are distinct");

        // Another cluster's keys, bare prefixes, unknown segments and bad encodings: no family.
        assert_eq!(Keys::new("staging").family_of(&k.run(&org, &run)), None);
        assert_eq!(k.family_of(&k.runs(&org).start), None);
        assert_eq!(k.family_of(b"/agentprocess/prod/o/acme/unknown/x"), None);
        assert_eq!(k.family_of(b"/agentprocess/prod/o/acme/process/p/other/x"), None);
        assert_eq!(k.family_of(b"/agentprocess/prod/timer/notanumber/o/r/t"), None);
        assert_eq!(k.family_of(b"/agentprocess/prod/o/a%2f/run/r"), None);
        assert_eq!(k.family_of(b"elsewhere"), None);
        assert!(k.test_clock_acks().contains(&k.test_clock_ack("actor-1")));
        assert!(!k.test_clock_acks().contains(&k.test_clock()));
    }

    #[test]
    fn non_canonical_encodings_do_not_parse() {
        let k = keys();
        // Lower-case hex, escaped plain characters and raw special bytes are not ours.
        assert_eq!(decode_id(b"%2f"), None);
        assert_eq!(decode_id(b"%41"), None);
        assert_eq!(decode_id(b"a b"), None);
        assert_eq!(decode_id(b"%2"), None);
        assert_eq!(decode_id(b"%2F"), Some("/".into()));
        let trailing = [
            k.ready_step(&an_org("o"), 1, &a_run("r"), &a_step("s")),
            b"/".to_vec(),
        ]
        .concat();
        assert_eq!(k.parse_ready_step(&trailing), None);
        let longer = [
            k.ready_step(&an_org("o"), 1, &a_run("r"), &a_step("s")),
            b"/extra".to_vec(),
        ]
        .concat();
        assert_eq!(k.parse_ready_step(&longer), None);
    }
}
