//! Ended runs move to the archive when their time in the hot store is over: the hot store lets
//! go of every key they had, and `get_run`, `list_runs` (filters and cursors), refusals of
//! writes and replays of earlier writes answer exactly as before.

mod runtime_support;

use agentprocess_org::{BlobStore, Folder};
use agentprocess_run_actor::machine::{Caller, ErrorCode, RunId, StepId};
use agentprocess_run_actor::runtime::{
    Clock, Decision, ListRuns, LocalBlobs, Mode, Runtime, RuntimeConfig, ToolOutcome, Upload, Write,
};
use agentprocess_store::keys::{KeyFamily, Keys};
use agentprocess_store::{KeyRange, RangeRequest, RangeResult, Store};
use runtime_support::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const ARCHIVE_AFTER: Duration = Duration::from_secs(60);

fn archiving_runtime(store: Arc<dyn Store>, dir: &Path) -> Runtime {
    Runtime::new(
        store,
        Arc::new(LocalBlobs::new(dir.join("blobs"))),
        RuntimeConfig {
            archive_ended_runs_after: ARCHIVE_AFTER,
            ..RuntimeConfig::default()
        },
        Clock::starting_at(START),
    )
}

fn operator() -> Caller {
    let mut caller = person("ops@acme.test", &["ops"]);
    caller.operator = true;
    caller
}

async fn cancel(runtime: &Runtime, run: &RunId, request: &str) -> ToolOutcome {
    runtime
        .execute(
            &operator(),
            Write::Cancel {
                run_id: run.clone(),
                reason: "no longer needed".into(),
            },
            request,
        )
        .await
        .unwrap()
}

/// Fires every timer due now through the runtime, as the scheduler would; returns their ids.
async fn fire_due_timers(runtime: &Runtime) -> Vec<String> {
    let now = u64::try_from(runtime.clock().now().as_millis()).unwrap();
    let due = runtime
        .store()
        .range(RangeRequest::new(runtime.keys().timers_due(now)))
        .await
        .unwrap();
    let mut fired = Vec::new();
    for kv in due.kvs {
        let timer = runtime.keys().parse_timer(&kv.key).unwrap();
        runtime
            .fire_timer(&timer.org, &timer.run_id, &timer.timer_id)
            .await
            .unwrap();
        fired.push(timer.timer_id);
    }
    fired
}

/// Every `list_runs` item for `request`, read `page` at a time.
async fn list_all(runtime: &Runtime, request: ListRuns, page: usize) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let found = ok(runtime
            .list_runs(
                &agent("lister"),
                ListRuns {
                    limit: Some(page),
                    cursor: cursor.take(),
                    ..request.clone()
                },
            )
            .await
            .unwrap());
        items.extend(found["items"].as_array().unwrap().iter().cloned());
        match found["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return items,
        }
    }
}

/// Every key in the hot store.
async fn hot_store(store: &dyn Store) -> RangeResult {
    store
        .range(RangeRequest::new(KeyRange::from(Vec::new())))
        .await
        .unwrap()
}

/// The hot store's revision now.
async fn revision(store: &dyn Store) -> i64 {
    store
        .range(RangeRequest::new(KeyRange::from(Vec::new())).with_limit(1))
        .await
        .unwrap()
        .revision
}

/// The keys a run's writes put in the hot store: those whose revision is newer than the
/// store's before the write. The tests write one call at a time, so every key is the run's
/// whose write made it.
async fn written_since(store: &dyn Store, before: i64) -> BTreeSet<Vec<u8>> {
    hot_store(store)
        .await
        .kvs
        .into_iter()
        .filter(|kv| kv.mod_revision > before)
        .map(|kv| kv.key)
        .collect()
}

/// What archiving leaves of a run in the hot store: its idempotency records and their expiry
/// entries (replays answer as first answered until their own retention ends) and its
/// notifications not yet delivered (the scheduler, not run by these tests, delivers them).
fn stays_after_archiving(keys: &Keys, key: &[u8]) -> bool {
    keys.family_of(key).is_some_and(|owner| {
        matches!(
            owner.family,
            KeyFamily::Idempotency | KeyFamily::IdempotencyExpiry | KeyFamily::Outbox
        )
    })
}

/// Every key `written` (by one run) is checked against the hot store: what archiving leaves
/// ([`stays_after_archiving`]) is all still there, and nothing else is.
async fn only_replays_and_notifications_stay(runtime: &Runtime, written: &BTreeSet<Vec<u8>>) {
    let keys = runtime.keys();
    let families = |set: &BTreeSet<Vec<u8>>| -> BTreeSet<KeyFamily> {
        set.iter()
            .filter_map(|key| keys.family_of(key).map(|owner| owner.family))
            .collect()
    };
    let written_families = families(written);
    assert!(
        written_families.contains(&KeyFamily::Run)
            && written_families.contains(&KeyFamily::Idempotency)
            && written_families.contains(&KeyFamily::IdempotencyExpiry),
        "the run's writes are all seen: {written_families:?}"
    );
    let hot: BTreeSet<Vec<u8>> = hot_store(runtime.store().as_ref())
        .await
        .kvs
        .into_iter()
        .map(|kv| kv.key)
        .collect();
    let left: BTreeSet<Vec<u8>> = written.intersection(&hot).cloned().collect();
    let staying: BTreeSet<Vec<u8>> = written
        .iter()
        .filter(|key| stays_after_archiving(keys, key))
        .cloned()
        .collect();
    let readable = |set: &BTreeSet<Vec<u8>>| -> Vec<String> {
        set.iter()
            .map(|key| String::from_utf8_lossy(key).into_owned())
            .collect()
    };
    assert_eq!(
        readable(&left),
        readable(&staying),
        "of the {} keys the run wrote, only its idempotency records and notifications stay",
        written.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_run_leaves_the_hot_store_and_reads_the_same_from_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let runtime = archiving_runtime(store.clone(), dir.path());
    publish_example(&runtime, ORG, "defect-triage").await;
    publish_example(&runtime, ORG, "release-notes").await;

    // Eight runs over two processes, started a millisecond apart or in the same millisecond;
    // five end (cancelled), three stay open.
    let mut runs = Vec::new();
    let mut written: BTreeMap<RunId, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for i in 0..8 {
        let before = revision(store.as_ref()).await;
        let view = if i % 2 == 0 {
            start(
                &runtime,
                &agent("starter"),
                "defect-triage",
                json!({ "reportId": format!("T-{i}") }),
                &format!("s-{i}"),
            )
            .await
        } else {
            start(
                &runtime,
                &agent("starter"),
                "release-notes",
                json!({ "changes": "b", "version": format!("p-{i}"), "releaseAt": "2027-01-01T00:00:00Z" }),
                &format!("s-{i}"),
            )
            .await
        };
        runs.push(run_id(&view));
        written.insert(run_id(&view), written_since(store.as_ref(), before).await);
        if i != 3 {
            runtime.clock().advance(Duration::from_millis(1));
        }
    }
    let ended: Vec<&RunId> = runs.iter().step_by(2).chain([&runs[3]]).collect();
    let mut cancelled = Vec::new();
    for (i, run) in ended.iter().enumerate() {
        let before = revision(store.as_ref()).await;
        cancelled.push(ok(cancel(&runtime, run, &format!("x-{i}")).await));
        let by_cancel = written_since(store.as_ref(), before).await;
        written.get_mut(*run).unwrap().extend(by_cancel);
    }

    // What the reads answer while every run is hot.
    let mut views = Vec::new();
    for run in &runs {
        views.push(ok(runtime.get_run(&agent("reader"), run).await.unwrap()));
    }
    let requests = [
        ListRuns::default(),
        ListRuns {
            process: Some("defect-triage".into()),
            ..ListRuns::default()
        },
        ListRuns {
            state: Some("cancelled".into()),
            ..ListRuns::default()
        },
        ListRuns {
            inputs: Some(object(json!({ "reportId": "T-4" }))),
            ..ListRuns::default()
        },
    ];
    let mut listed = Vec::new();
    for request in &requests {
        listed.push(list_all(&runtime, request.clone(), 100).await);
    }
    assert_eq!(listed[0].len(), 8);
    assert_eq!(listed[2].len(), 5);

    // Not due yet: the archive timer leaves the run where it is.
    runtime.clock().advance(ARCHIVE_AFTER - Duration::from_secs(1));
    let before_early_timers = hot_store(store.as_ref()).await.kvs;
    for run in &ended {
        runtime.fire_timer(&ORG.into(), run, "archive").await.unwrap();
    }
    assert_eq!(
        hot_store(store.as_ref()).await.kvs,
        before_early_timers,
        "an archive timer fired early changes nothing"
    );
    runtime.clock().advance(Duration::from_secs(1));
    let fired = fire_due_timers(&runtime).await;
    assert_eq!(fired.iter().filter(|id| *id == "archive").count(), 5, "{fired:?}");

    // The hot store holds nothing of an ended run any more but its idempotency records and
    // notifications; the open ones are untouched.
    for run in &ended {
        only_replays_and_notifications_stay(&runtime, &written[*run]).await;
    }
    let hot = hot_store(store.as_ref()).await.kvs;
    for run in runs.iter().filter(|r| !ended.contains(r)) {
        assert!(
            written[run].iter().all(|key| hot.iter().any(|kv| &kv.key == key)),
            "every key of open run {run} is still there"
        );
    }
    assert!(dir.path().join("blobs/archive").is_dir());

    // Reads answer the same, from the archive, and in pages of any size.
    for (run, view) in runs.iter().zip(&views) {
        assert_eq!(&ok(runtime.get_run(&agent("reader"), run).await.unwrap()), view);
    }
    for (request, before) in requests.iter().zip(&listed) {
        for page in [1, 2, 3, 100] {
            assert_eq!(
                &list_all(&runtime, request.clone(), page).await,
                before,
                "{request:?} by {page}"
            );
        }
    }

    // An archived run refuses writes as any ended run does; replays answer as first answered.
    let refusal = refused(cancel(&runtime, ended[0], "x-again").await);
    assert_eq!(refusal.code, ErrorCode::Conflict);
    assert_eq!(refusal.issues, vec!["run_ended".to_string()]);
    let refusal = refused(
        runtime
            .execute(
                &agent("a"),
                Write::SendEvent {
                    run_id: ended[0].clone(),
                    name: "anything".into(),
                    data: None,
                },
                "e-1",
            )
            .await
            .unwrap(),
    );
    assert_eq!(refusal.issues, vec!["run_ended".to_string()]);
    assert_eq!(ok(cancel(&runtime, ended[1], "x-1").await), cancelled[1]);

    // A timer that comes again finds nothing to move; a new runtime over the same store and
    // blobs (a restart) reads the archive too.
    runtime
        .fire_timer(&ORG.into(), ended[0], "archive")
        .await
        .unwrap();
    let restarted = archiving_runtime(store.clone(), dir.path());
    assert_eq!(
        ok(restarted.get_run(&agent("reader"), ended[2]).await.unwrap()),
        views[4]
    );
    assert_eq!(list_all(&restarted, ListRuns::default(), 3).await, listed[0]);
    // Another organization sees neither tier's runs.
    let stranger = in_org(agent("reader"), "other-org");
    assert_eq!(
        refused(restarted.get_run(&stranger, ended[0]).await.unwrap()).code,
        ErrorCode::NotFound
    );
}

/// A blob store in a local folder that counts the objects read from it.
#[derive(Debug)]
struct CountingBlobs {
    inner: LocalBlobs,
    gets: AtomicUsize,
}

impl CountingBlobs {
    fn gets(&self) -> usize {
        self.gets.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl BlobStore for CountingBlobs {
    async fn put(&self, path: &str, bytes: &[u8]) -> Result<(), String> {
        self.inner.put(path, bytes).await
    }

    async fn get(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(path).await
    }

    async fn put_all(&self, objects: Vec<(String, Vec<u8>)>) -> Result<(), String> {
        self.inner.put_all(objects).await
    }

    async fn list_folder(&self, dir: &str) -> Result<Folder, String> {
        self.inner.list_folder(dir).await
    }
}

/// Starting a run does not look for it in the archive: its id carries the clock's current
/// millisecond, so no archived run can have it once archiving waits a second or more. With
/// archiving at once, and for a run neither tier holds, the archive is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_a_run_reads_the_archive_only_when_archiving_waits_under_a_second() {
    for (archive_after, starts_read_the_archive) in [(ARCHIVE_AFTER, false), (Duration::ZERO, true)] {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(&dir.path().join("store")).await;
        let blobs = Arc::new(CountingBlobs {
            inner: LocalBlobs::new(dir.path().join("blobs")),
            gets: AtomicUsize::new(0),
        });
        let runtime = Runtime::new(
            store,
            blobs.clone(),
            RuntimeConfig {
                archive_ended_runs_after: archive_after,
                ..RuntimeConfig::default()
            },
            Clock::starting_at(START),
        );
        publish_example(&runtime, ORG, "defect-triage").await;
        let before = blobs.gets();
        for i in 0..3 {
            let view = start(
                &runtime,
                &agent("starter"),
                "defect-triage",
                json!({ "reportId": format!("T-{i}") }),
                &format!("s-{i}"),
            )
            .await;
            assert_eq!(view["run"]["state"], "active", "{view}");
        }
        assert_eq!(
            blobs.gets() > before,
            starts_read_the_archive,
            "archiving after {archive_after:?}: {} archive reads for three starts",
            blobs.gets() - before
        );

        let before = blobs.gets();
        let unknown = RunId::from("r_0000000000000000000000000000");
        let refusal = refused(runtime.get_run(&agent("reader"), &unknown).await.unwrap());
        assert_eq!(refusal.code, ErrorCode::NotFound);
        assert!(
            blobs.gets() > before,
            "a run the hot store lacks is looked for in the archive"
        );
    }
}

/// A decision on the run's only open work item, as it stands now.
fn decision(view: &Value, run: &RunId, decision: Decision, note: Option<&str>) -> Write {
    let item = &view["workItems"][0];
    Write::Decide {
        run_id: run.clone(),
        work_item: item["id"].as_str().unwrap().into(),
        snapshot: item["snapshot"].as_str().unwrap().into(),
        decision,
        output: None,
        evidence: None,
        summary: None,
        next: None,
        reason: None,
        note: note.map(str::to_string),
    }
}

/// Tools.md: a replay returns the original result. That holds for every kind of write after
/// the run it wrote to moved to the archive, as long as the record's own retention lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_write_replays_its_first_answer_after_the_run_was_archived() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let runtime = archiving_runtime(store.clone(), dir.path());
    publish_example(&runtime, ORG, "defect-triage").await;
    let (worker, lead) = (agent("a_worker"), person("lead@acme.test", &["g_qa-lead"]));
    let mut writes: Vec<(Caller, Write, &str, Value)> = Vec::new();
    let mut written = BTreeSet::new();
    let mut write = async |caller: &Caller, write: Write, request: &'static str| -> Value {
        let before = revision(store.as_ref()).await;
        let data = ok(runtime.execute(caller, write.clone(), request).await.unwrap());
        written.extend(written_since(store.as_ref(), before).await);
        writes.push((caller.clone(), write, request, data.clone()));
        data
    };

    let started = write(
        &worker,
        Write::StartRun {
            process: "defect-triage".into(),
            version: None,
            inputs: json!({ "reportId": "T-1" }),
            mode: Mode::Live,
        },
        "w-start",
    )
    .await;
    let run = run_id(&started);
    let claim_triage = || Write::Claim {
        run_id: run.clone(),
        step: StepId::from_wire("triage"),
    };
    let claimed = write(&worker, claim_triage(), "w-claim").await;
    let renewed = write(
        &worker,
        Write::Renew {
            token: claimed["token"].as_str().unwrap().into(),
            progress: Some("read the report".into()),
        },
        "w-renew",
    )
    .await;
    let escalated = write(
        &worker,
        Write::Escalate {
            token: renewed["token"].as_str().unwrap().into(),
            note: "the logs are missing".into(),
        },
        "w-escalate",
    )
    .await;
    write(
        &operator(),
        decision(&escalated, &run, Decision::Returned, Some("logs attached now")),
        "w-return",
    )
    .await;
    let claimed = write(&worker, claim_triage(), "w-claim-again").await;
    let submitted = write(
        &worker,
        Write::Submit {
            token: claimed["token"].as_str().unwrap().into(),
            submission: triage_findings(),
        },
        "w-submit",
    )
    .await;
    write(
        &worker,
        Write::SendEvent {
            run_id: run.clone(),
            name: "customer_replied".into(),
            data: Some(object(json!({ "text": "works now" }))),
        },
        "w-event",
    )
    .await;
    write(
        &lead,
        decision(&submitted, &run, Decision::Approved, None),
        "w-approve",
    )
    .await;
    write(
        &operator(),
        Write::Cancel {
            run_id: run.clone(),
            reason: "closed by hand".into(),
        },
        "w-cancel",
    )
    .await;
    let upload = || Upload {
        file_name: "report.txt".into(),
        content_type: "text/plain".into(),
        bytes: b"all good".to_vec(),
    };
    let uploaded = ok(runtime.upload(&worker, upload(), "w-upload").await.unwrap());

    runtime.clock().advance(ARCHIVE_AFTER);
    assert!(fire_due_timers(&runtime).await.contains(&"archive".to_string()));
    only_replays_and_notifications_stay(&runtime, &written).await;

    for (caller, write, request, first) in &writes {
        let again = runtime.execute(caller, write.clone(), request).await.unwrap();
        assert_eq!(&ok(again), first, "{request}");
    }
    assert_eq!(
        ok(runtime.upload(&worker, upload(), "w-upload").await.unwrap()),
        uploaded
    );
    // Other arguments under a used requestId are still a conflict.
    let other = runtime
        .execute(
            &operator(),
            Write::Cancel {
                run_id: run.clone(),
                reason: "another reason".into(),
            },
            "w-cancel",
        )
        .await
        .unwrap();
    assert_eq!(refused(other).code, ErrorCode::Conflict);
}

/// Runs a store held before runs were filed by input, hot and archived, are filed once by
/// [`Runtime::file_runs_by_inputs`]; until then `list_runs` filtered by inputs reads runs in
/// start order (a page skips at most so many), after it the filter finds them on its first page
/// however many runs came before (tools.md `list_runs`: `inputs` matches on equality).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_from_before_filing_are_filed_once_and_then_found_by_input_on_the_first_page() {
    use agentprocess_run_actor::runtime::Filing;
    use agentprocess_store::{Txn, TxnOp};
    const OTHERS: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let runtime = archiving_runtime(store.clone(), dir.path());
    publish_example(&runtime, ORG, "defect-triage").await;
    let mut started = Vec::new();
    for i in 0..OTHERS + 2 {
        let report = if i < OTHERS {
            format!("T-{i}")
        } else {
            "T-sought".to_string()
        };
        let view = start(
            &runtime,
            &agent("starter"),
            "defect-triage",
            json!({ "reportId": report }),
            &format!("s-{i}"),
        )
        .await;
        started.push(run_id(&view));
        runtime.clock().advance(Duration::from_millis(1));
    }
    let sought = &started[OTHERS..];
    // Half the others end and are archived, and the first of the two sought.
    let ending = started[..OTHERS].iter().step_by(2).chain([&sought[0]]);
    for (i, run) in ending.enumerate() {
        ok(cancel(&runtime, run, &format!("x-{i}")).await);
    }
    runtime.clock().advance(ARCHIVE_AFTER);
    fire_due_timers(&runtime).await;

    // As a store from before filing: no filing in the hot store or the archive.
    let all = store
        .range(RangeRequest::new(KeyRange::from(Vec::new())))
        .await
        .unwrap();
    let filings: Vec<TxnOp> = all
        .kvs
        .iter()
        .filter(|kv| {
            runtime
                .keys()
                .family_of(&kv.key)
                .is_some_and(|owner| owner.family == KeyFamily::ProcessRunInput)
        })
        .map(|kv| TxnOp::delete(kv.key.clone()))
        .collect();
    assert_eq!(
        filings.len(),
        OTHERS / 2 + 1,
        "the hot runs were filed as written"
    );
    for chunk in filings.chunks(100) {
        store.txn(Txn::new().and_then(chunk.to_vec())).await.unwrap();
    }
    let archived_filings = dir.path().join("blobs/archive").join(hex(ORG)).join("inputs");
    assert!(archived_filings.is_dir(), "archived runs were filed as archived");
    std::fs::remove_dir_all(&archived_filings).unwrap();
    let by_input = ListRuns {
        inputs: Some(object(json!({ "reportId": "T-sought" }))),
        ..ListRuns::default()
    };

    // Not filed yet: read in start order, the first page ends before reaching them.
    let first = ok(runtime
        .list_runs(&agent("lister"), by_input.clone())
        .await
        .unwrap());
    assert_eq!(first["items"], json!([]), "{first}");
    assert!(first["nextCursor"].is_string());
    let every = list_all(&runtime, by_input.clone(), 20).await;
    let ids = |items: &[Value]| -> Vec<String> {
        items
            .iter()
            .map(|item| item["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let sought: Vec<String> = sought.iter().map(ToString::to_string).collect();
    assert_eq!(ids(&every), sought);

    let filed = runtime.file_runs_by_inputs().await.unwrap();
    assert_eq!(
        filed,
        Filing::Done {
            hot: OTHERS / 2 + 1,
            archived: OTHERS / 2 + 1
        }
    );
    let first = ok(runtime
        .list_runs(&agent("lister"), by_input.clone())
        .await
        .unwrap());
    assert_eq!(ids(first["items"].as_array().unwrap()), sought, "{first}");
    assert_eq!(first["nextCursor"], json!(null));
    assert_eq!(
        list_all(&runtime, by_input, 1).await,
        every,
        "a page at a time, the same"
    );
    assert_eq!(runtime.file_runs_by_inputs().await.unwrap(), Filing::AlreadyDone);
}

fn hex(text: &str) -> String {
    text.bytes().map(|byte| format!("{byte:02x}")).collect()
}
