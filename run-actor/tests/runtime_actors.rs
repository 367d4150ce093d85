//! Run actors over the embedded store: serialization, parallel runs, idempotency, reads from
//! the indexes, organization isolation, uploads.

mod runtime_support;

use agentprocess_ids::OrgId;
use agentprocess_run_actor::machine::{ErrorCode, RunId};
use agentprocess_run_actor::runtime::{
    Clock, EvidenceItem, GetWork, ListRuns, LocalBlobs, Mode, ReadySteps, Runtime, RuntimeConfig,
    RuntimeError, Submission, Upload, Write, blob_store_from_url,
};
use agentprocess_store::Txn;
use agentprocess_store::probed::{Probe, Probed};
use runtime_support::*;
use serde_json::json;
use sha2::Digest;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_on_one_run_are_applied_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    let run = run_id(
        &start(
            &runtime,
            &agent("starter"),
            "defect-triage",
            json!({ "reportId": "T-1" }),
            "s-1",
        )
        .await,
    );

    let mut calls = Vec::new();
    for i in 0..40 {
        let (runtime, run) = (runtime.clone(), run.clone());
        calls.push(tokio::spawn(async move {
            claim(
                &runtime,
                &agent(&format!("a{i}")),
                &run,
                "triage",
                &format!("c-{i}"),
            )
            .await
        }));
    }
    let mut granted = 0;
    for call in calls {
        match call.await.unwrap() {
            agentprocess_run_actor::runtime::ToolOutcome::Ok(data) => {
                assert!(data["token"].is_string());
                granted += 1;
            }
            agentprocess_run_actor::runtime::ToolOutcome::Refused(refusal) => {
                assert_eq!(refusal.code, ErrorCode::Conflict);
                assert_eq!(refusal.issues, vec!["claimed_by_other".to_string()]);
            }
        }
    }
    assert_eq!(granted, 1, "exactly one claim wins");
    let view = ok(runtime.get_run(&agent("x"), &run).await.unwrap());
    assert_eq!(step_state(&view, "triage"), "claimed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_runs_proceed_in_parallel() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    let mut calls = Vec::new();
    for i in 0..1000 {
        let runtime = runtime.clone();
        calls.push(tokio::spawn(async move {
            let caller = agent(&format!("a{i}"));
            let view = start(
                &runtime,
                &caller,
                "defect-triage",
                json!({ "reportId": format!("T-{i}") }),
                &format!("s-{i}"),
            )
            .await;
            let run = run_id(&view);
            let claimed = ok(claim(&runtime, &caller, &run, "triage", &format!("c-{i}")).await);
            let token = claimed["token"].as_str().unwrap().to_string();
            let view = ok(runtime
                .execute(
                    &caller,
                    Write::Submit {
                        token,
                        submission: triage_findings(),
                    },
                    &format!("u-{i}"),
                )
                .await
                .unwrap());
            assert_eq!(step_state(&view, "verify_fix"), "waiting");
            run
        }));
    }
    let mut runs = Vec::new();
    for call in calls {
        runs.push(call.await.unwrap());
    }
    runs.sort();
    runs.dedup();
    assert_eq!(runs.len(), 1000);
    // Each run's three commands came one after the other: one commit each, none lost or
    // repeated. (Commands queued on one run share a commit; see
    // `commands_queued_behind_a_commit_share_the_next_one`.)
    let stats = runtime.stats();
    let commits = stats.commits.load(Ordering::Relaxed);
    assert_eq!(commits, 3000);

    // Every fix verification waits for the QA lead, paged from the work-item index.
    let lead = person("lead@acme.example", &["g_qa-lead"]);
    let mut seen = 0;
    let mut cursor = None;
    loop {
        let page = ok(runtime
            .get_work(
                &lead,
                GetWork {
                    limit: Some(100),
                    cursor: cursor.take(),
                    process: None,
                    ..GetWork::default()
                },
            )
            .await
            .unwrap());
        seen += page["items"].as_array().unwrap().len();
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, 1000);
}

/// Transactions wait while the gate is closed, so that commands queue behind one.
#[derive(Debug)]
struct Gate {
    open: tokio::sync::watch::Sender<bool>,
    /// Transactions waiting at the gate now.
    waiting: AtomicUsize,
}

impl Gate {
    fn new() -> Self {
        Gate {
            open: tokio::sync::watch::Sender::new(true),
            waiting: AtomicUsize::new(0),
        }
    }
}

#[async_trait::async_trait]
impl Probe for Gate {
    async fn txn(&self, _: &Txn) {
        let mut open = self.open.subscribe();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _ = open.wait_for(|open| *open).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Polls `check` every 10 ms until it holds, for at most ten seconds.
async fn until(what: &str, check: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Commands that reach a run while its previous commit is in flight are applied together and
/// committed in one transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_queued_behind_a_commit_share_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Probed::new(
        open_store(&dir.path().join("store")).await,
        Gate::new(),
    ));
    let runtime = runtime(
        store.clone(),
        &dir.path().join("blobs"),
        Clock::starting_at(START),
    );
    let branches: Vec<String> = (0..8).map(|b| format!("b{b}")).collect();
    let mut source = format!(
        "---\nname: fanout\ndescription: Agents side by side.\nsteps:\n  - id: fan\n    parallel: [{}]\n    next: done\n",
        branches.join(", ")
    );
    for branch in &branches {
        source.push_str(&format!(
            "  - id: {branch}\n    agent: Your part.\n    next: join\n"
        ));
    }
    source.push_str("  - id: done\n    finish: done\n---\n\n# Fanout\n");
    runtime
        .publish(&OrgId::from(ORG), source.as_bytes(), indexmap::IndexMap::new())
        .await
        .unwrap();
    let run = run_id(&start(&runtime, &agent("starter"), "fanout", json!({}), "s-1").await);
    let stats = runtime.stats();
    let commits_before = stats.commits.load(Ordering::SeqCst);

    // The first claim's commit waits at the closed gate; the other seven queue behind it.
    store.probe.open.send_replace(false);
    let claim_branch = |i: usize| {
        let (runtime, run, branch) = (runtime.clone(), run.clone(), branches[i].clone());
        tokio::spawn(async move {
            claim(
                &runtime,
                &agent(&format!("a{i}")),
                &run,
                &branch,
                &format!("c-{i}"),
            )
            .await
        })
    };
    let mut calls = vec![claim_branch(0)];
    until("the first claim's commit waits", || {
        store.probe.waiting.load(Ordering::SeqCst) == 1
    })
    .await;
    calls.extend((1..branches.len()).map(claim_branch));
    let commands = 1 + branches.len() as u64;
    until("every claim was sent", || {
        stats.commands.load(Ordering::SeqCst) == commands
    })
    .await;
    store.probe.open.send_replace(true);
    for call in calls {
        assert!(ok(call.await.unwrap())["token"].is_string());
    }

    let queued = branches.len() as u64 - 1;
    let commits = stats.commits.load(Ordering::SeqCst) - commits_before - 1;
    assert!(commits < queued, "{queued} queued claims took {commits} commits");
    let view = ok(runtime.get_run(&agent("x"), &run).await.unwrap());
    for branch in &branches {
        assert_eq!(step_state(&view, branch), "claimed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_returns_the_original_result_even_after_the_lease_ended() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    let caller = agent("a1");
    let first = start(
        &runtime,
        &caller,
        "defect-triage",
        json!({ "reportId": "T-1" }),
        "s-1",
    )
    .await;
    // start_run: a retry returns the original run and starts no other.
    let again = start(
        &runtime,
        &caller,
        "defect-triage",
        json!({ "reportId": "T-1" }),
        "s-1",
    )
    .await;
    assert_eq!(first, again);
    let run = run_id(&first);

    let claimed = ok(claim(&runtime, &caller, &run, "triage", "c-1").await);
    runtime.clock().advance(Duration::from_secs(3600));
    let replayed = ok(claim(&runtime, &caller, &run, "triage", "c-1").await);
    assert_eq!(claimed, replayed, "token and expiresAt of the original claim");

    // Other arguments under the same requestId: conflict.
    let other = refused(claim(&runtime, &caller, &run, "qa_reproduce", "c-1").await);
    assert_eq!(other.code, ErrorCode::Conflict);

    // A failed call is not recorded: the same requestId succeeds once the call is right.
    let token = claimed["token"].as_str().unwrap().to_string();
    let renewed = runtime
        .execute(
            &caller,
            Write::Renew {
                token: token.clone(),
                progress: None,
            },
            "r-1",
        )
        .await
        .unwrap();
    // The lease ended an hour ago (the actor's expiresAt is the truth): stale.
    assert_eq!(refused(renewed).code, ErrorCode::Stale);
    let fresh_claim = ok(claim(&runtime, &caller, &run, "triage", "c-2").await);
    let token = fresh_claim["token"].as_str().unwrap().to_string();
    let mut bad = triage_findings();
    bad.output = None;
    let not_accepted = refused(
        runtime
            .execute(
                &caller,
                Write::Submit {
                    token: token.clone(),
                    submission: bad,
                },
                "u-1",
            )
            .await
            .unwrap(),
    );
    assert_eq!(not_accepted.code, ErrorCode::NotAccepted);
    let accepted = ok(runtime
        .execute(
            &caller,
            Write::Submit {
                token,
                submission: triage_findings(),
            },
            "u-2",
        )
        .await
        .unwrap());
    assert_eq!(step_state(&accepted, "triage"), "done");
    let listed = ok(runtime.list_runs(&caller, ListRuns::default()).await.unwrap());
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    // tools.md `list_runs`: the items carry exactly the fields the contract names.
    agentprocess_testkit::assert_matches_schema("tools/list_runs.result.json", &listed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_arguments_in_another_key_order_replay_and_a_changed_one_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    let caller = agent("a1");
    let run = run_id(
        &start(
            &runtime,
            &caller,
            "defect-triage",
            json!({ "reportId": "T-1" }),
            "s-1",
        )
        .await,
    );
    let claimed = ok(claim(&runtime, &caller, &run, "triage", "c-1").await);
    let token = claimed["token"].as_str().unwrap().to_string();
    let submit = |output: &str| {
        let mut submission = triage_findings();
        submission.output = Some(object(serde_json::from_str(output).unwrap()));
        Write::Submit {
            token: token.clone(),
            submission,
        }
    };
    let first = ok(runtime
        .execute(
            &caller,
            submit(r#"{ "findings": "cache", "workaround": "flushed it" }"#),
            "u-1",
        )
        .await
        .unwrap());
    assert_eq!(step_state(&first, "triage"), "done");

    // Spec: repeating a write with the same arguments returns the original result.
    let reordered = ok(runtime
        .execute(
            &caller,
            submit(r#"{ "workaround": "flushed it", "findings": "cache" }"#),
            "u-1",
        )
        .await
        .unwrap());
    assert_eq!(first, reordered);

    // Different arguments under the same requestId: conflict.
    let changed = refused(
        runtime
            .execute(
                &caller,
                submit(r#"{ "workaround": "restarted it", "findings": "cache" }"#),
                "u-1",
            )
            .await
            .unwrap(),
    );
    assert_eq!(changed.code, ErrorCode::Conflict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_of_one_request_resolve_to_one_result() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    let caller = agent("a1");
    let run = run_id(
        &start(
            &runtime,
            &caller,
            "defect-triage",
            json!({ "reportId": "T-1" }),
            "s-1",
        )
        .await,
    );
    let mut calls = Vec::new();
    for _ in 0..20 {
        let (runtime, run, caller) = (runtime.clone(), run.clone(), caller.clone());
        calls.push(tokio::spawn(async move {
            runtime
                .execute(
                    &caller,
                    Write::SendEvent {
                        run_id: run,
                        name: "ping".into(),
                        data: None,
                    },
                    "e-1",
                )
                .await
                .unwrap()
        }));
    }
    let mut answers = Vec::new();
    for call in calls {
        answers.push(ok(call.await.unwrap()));
    }
    assert!(answers.iter().all(|a| *a == answers[0]));
    // The event was held once, not twenty times: the run record changed once for it.
    let (record, _) = runtime
        .store()
        .get(&runtime.keys().run(&OrgId::from(ORG), &run))
        .await
        .unwrap();
    let state: serde_json::Value =
        serde_json::from_slice(&agentprocess_run_actor::packed::unpack(&record.unwrap().value).unwrap())
            .unwrap();
    assert_eq!(state["held_events"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn organizations_do_not_see_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    publish_example(&runtime, "globex", "defect-triage").await;
    let ours = agent("a1");
    let theirs = in_org(agent("a1"), "globex");
    let run = run_id(
        &start(
            &runtime,
            &ours,
            "defect-triage",
            json!({ "reportId": "T-1" }),
            "same",
        )
        .await,
    );
    // The same requestId in another organization is another request.
    let their_run = run_id(
        &start(
            &runtime,
            &theirs,
            "defect-triage",
            json!({ "reportId": "T-9" }),
            "same",
        )
        .await,
    );
    assert_ne!(run, their_run);
    assert_eq!(
        refused(runtime.get_run(&theirs, &run).await.unwrap()).code,
        ErrorCode::NotFound
    );
    assert_eq!(
        refused(claim(&runtime, &theirs, &run, "triage", "c").await).code,
        ErrorCode::NotFound
    );
    let work = ok(runtime.get_work(&theirs, GetWork::default()).await.unwrap());
    let items = work["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["runId"], their_run.as_str());
    let processes = ok(runtime.list_processes(&theirs, None).await.unwrap());
    assert_eq!(processes["items"][0]["name"], "defect-triage");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_work_and_list_runs_page_with_cursors_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    publish_example(&runtime, ORG, "release-notes").await;
    let caller = agent("a1");
    for i in 0..7 {
        start(
            &runtime,
            &caller,
            "defect-triage",
            json!({ "reportId": format!("T-{i}") }),
            &format!("s-{i}"),
        )
        .await;
        runtime.clock().advance(Duration::from_millis(5));
        start(
            &runtime,
            &caller,
            "release-notes",
            json!({ "changes": "b", "version": format!("p-{i}"), "releaseAt": "2027-01-01T00:00:00Z" }),
            &format!("b-{i}"),
        )
        .await;
        runtime.clock().advance(Duration::from_millis(5));
    }
    // Agents: ready steps oldest first, three at a time, optionally one process only.
    let mut ready = Vec::new();
    let mut cursor = None;
    loop {
        let page = ok(runtime
            .get_work(
                &caller,
                GetWork {
                    limit: Some(3),
                    cursor: cursor.take(),
                    process: Some("release-notes".into()),
                    ..GetWork::default()
                },
            )
            .await
            .unwrap());
        for item in page["items"].as_array().unwrap() {
            assert_eq!(item["process"], "release-notes");
            ready.push(item["readySince"].as_str().unwrap().to_string());
        }
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(ready.len(), 7);
    assert!(ready.windows(2).all(|w| w[0] <= w[1]));

    // list_runs across processes, with an inputs filter.
    let all = ok(runtime
        .list_runs(
            &caller,
            ListRuns {
                limit: Some(100),
                ..ListRuns::default()
            },
        )
        .await
        .unwrap());
    assert_eq!(all["items"].as_array().unwrap().len(), 14);
    let one = ok(runtime
        .list_runs(
            &caller,
            ListRuns {
                process: Some("defect-triage".into()),
                inputs: Some(object(json!({ "reportId": "T-3" }))),
                ..ListRuns::default()
            },
        )
        .await
        .unwrap());
    assert_eq!(one["items"].as_array().unwrap().len(), 1);
    assert_eq!(one["items"][0]["inputs"]["reportId"], "T-3");
    let bad = refused(
        runtime
            .get_work(
                &caller,
                GetWork {
                    cursor: Some("zz".into()),
                    ..GetWork::default()
                },
            )
            .await
            .unwrap(),
    );
    assert_eq!(bad.code, ErrorCode::Invalid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_recorded_and_verified_for_file_evidence() {
    let dir = tempfile::tempdir().unwrap();
    uploads_are_recorded_and_verified(fresh(dir.path()).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_in_an_in_memory_object_store() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = blob_store_from_url("memory:///").unwrap();
    uploads_are_recorded_and_verified(fresh_with_blobs(dir.path(), blobs).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_in_a_file_object_store() {
    let dir = tempfile::tempdir().unwrap();
    let blobs_dir = dir.path().join("blobs");
    std::fs::create_dir_all(&blobs_dir).unwrap();
    let url = url::Url::from_directory_path(&blobs_dir).unwrap();
    let blobs = blob_store_from_url(url.as_str()).unwrap();
    uploads_are_recorded_and_verified(fresh_with_blobs(dir.path(), blobs).await).await;
    assert_eq!(
        std::fs::read_dir(&blobs_dir).unwrap().count(),
        1,
        "one organization's folder"
    );
}

/// Uploads are refused over `maxUploadBytes`, replayed by `requestId`, and usable as file
/// evidence in the organization that made them.
async fn uploads_are_recorded_and_verified(runtime: Runtime) {
    publish_example(&runtime, ORG, "policy-update").await;
    let owner = person("owner@acme.example", &[]);
    let view = start(
        &runtime,
        &owner,
        "policy-update",
        json!({ "policyId": "P-1", "draftDocument": "d", "author": "owner@acme.example" }),
        "s-1",
    )
    .await;
    let run = run_id(&view);
    let upload = |bytes: Vec<u8>| Upload {
        file_name: "policy.pdf".into(),
        content_type: "application/pdf".into(),
        bytes,
    };
    let too_big = refused(
        runtime
            .upload(
                &owner,
                upload(vec![0; runtime.config().max_upload_bytes + 1]),
                "f-0",
            )
            .await
            .unwrap(),
    );
    assert_eq!(too_big.code, ErrorCode::Invalid);
    let stored = ok(runtime
        .upload(&owner, upload(b"%PDF-1.7".to_vec()), "f-1")
        .await
        .unwrap());
    assert_eq!(stored["bytes"], 8);
    let replayed = ok(runtime
        .upload(&owner, upload(b"%PDF-1.7".to_vec()), "f-1")
        .await
        .unwrap());
    assert_eq!(stored, replayed);
    let id = stored["id"].as_str().unwrap().to_string();

    let work = ok(runtime.get_work(&owner, GetWork::default()).await.unwrap());
    let item = &work["items"][0]["workItem"];
    let decide = |reference: &str, snapshot: &str| Write::Decide {
        run_id: run.clone(),
        work_item: item["id"].as_str().unwrap().into(),
        snapshot: snapshot.into(),
        decision: agentprocess_run_actor::runtime::Decision::Completed,
        output: Some(object(json!({ "version": "r1", "changeSummary": "terms" }))),
        evidence: Some(vec![EvidenceItem {
            kind: "file".into(),
            reference: reference.into(),
        }]),
        summary: None,
        next: None,
        reason: None,
        note: None,
    };
    let snapshot = item["snapshot"].as_str().unwrap().to_string();
    let missing = refused(
        runtime
            .execute(&owner, decide("f_nope", &snapshot), "d-1")
            .await
            .unwrap(),
    );
    assert_eq!(missing.code, ErrorCode::NotAccepted);
    // Another organization cannot use this upload.
    let done = ok(runtime
        .execute(&owner, decide(&id, &snapshot), "d-2")
        .await
        .unwrap());
    let evidence = &done["data"]["steps"]["write_draft"]["evidence"][0];
    assert_eq!(evidence["sha256"], stored["sha256"]);
    let _ = Submission::default();
}

/// Spec §5: file evidence is verified against the bytes stored for the upload and recorded with
/// their SHA-256; an upload whose bytes changed since is not accepted as evidence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_5_file_evidence_is_verified_and_recorded_with_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    let caller = agent("a1");
    let upload = |file_name: &str, bytes: &[u8]| Upload {
        file_name: file_name.into(),
        content_type: "text/plain".into(),
        bytes: bytes.to_vec(),
    };
    let log_bytes = b"12:00:01 cache miss storm\n12:00:05 cache flushed\n";
    let log = ok(runtime
        .upload(&caller, upload("diagnostics.log", log_bytes), "f-1")
        .await
        .unwrap());
    let log_id = log["id"].as_str().unwrap().to_string();
    let changed = ok(runtime
        .upload(&caller, upload("notes.txt", b"as uploaded"), "f-2")
        .await
        .unwrap());
    let changed_id = changed["id"].as_str().unwrap().to_string();
    let (record, _) = runtime
        .read_upload(&OrgId::from(ORG), &changed_id)
        .await
        .unwrap()
        .unwrap();
    std::fs::write(dir.path().join("blobs").join(&record.path), b"changed since").unwrap();

    let run = run_id(
        &start(
            &runtime,
            &caller,
            "defect-triage",
            json!({ "reportId": "T-1" }),
            "s-1",
        )
        .await,
    );
    let claimed = ok(claim(&runtime, &caller, &run, "triage", "c-1").await);
    let token = claimed["token"].as_str().unwrap().to_string();
    let citing = |uploads: &[&str]| {
        let mut submission = triage_findings();
        submission.evidence.extend(uploads.iter().map(|id| EvidenceItem {
            kind: "file".into(),
            reference: (*id).into(),
        }));
        Write::Submit {
            token: token.clone(),
            submission,
        }
    };
    let refusal = refused(
        runtime
            .execute(&caller, citing(&[&log_id, &changed_id]), "u-1")
            .await
            .unwrap(),
    );
    assert_eq!(refusal.code, ErrorCode::NotAccepted);
    assert_eq!(
        refusal.issues,
        [format!(
            "evidence {changed_id}: stored bytes no longer match the upload's hash"
        )]
    );

    let view = ok(runtime.execute(&caller, citing(&[&log_id]), "u-2").await.unwrap());
    let sha256: String = sha2::Sha256::digest(log_bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        view["data"]["steps"]["triage"]["evidence"],
        json!([
            { "kind": "link", "ref": "https://tickets.example/1" },
            { "kind": "file", "ref": log_id, "sha256": sha256 },
        ])
    );
}

/// Spec §2.3: numbers are never rounded. Run inputs and step outputs of any size and precision
/// read back from the store with the digits they were sent with (serde_json writes an exponent
/// as `e` with a sign).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_2_3_numbers_are_never_rounded() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    let source = "---\nname: measure\ndescription: Record an amount.\ninputs:\n  amount: number\nsteps:\n  - id: record\n    agent: Record the amount.\n    output:\n      amount: number\n    next: done\n  - id: done\n    finish: done\n---\n\n# Measure\n";
    runtime
        .publish(&OrgId::from(ORG), source.as_bytes(), indexmap::IndexMap::new())
        .await
        .unwrap();
    let caller = agent("a1");
    // (as sent, as read back)
    for (i, (sent, kept)) in [
        ("123456789012345678901234567890", "123456789012345678901234567890"),
        (
            "-98765432109876543210.000000000000000000001",
            "-98765432109876543210.000000000000000000001",
        ),
        ("0.1000000000000000000000001", "0.1000000000000000000000001"),
        ("1.0", "1.0"),
        ("1.50", "1.50"),
        ("-0", "-0"),
        ("1e400", "1e+400"),
        ("1E+2", "1e+2"),
        (
            "-1.2345678901234567890123456789e-400",
            "-1.2345678901234567890123456789e-400",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let amount: serde_json::Value = serde_json::from_str(sent).unwrap();
        let run = run_id(
            &start(
                &runtime,
                &caller,
                "measure",
                json!({ "amount": amount }),
                &format!("s-{i}"),
            )
            .await,
        );
        let claimed = ok(claim(&runtime, &caller, &run, "record", &format!("c-{i}")).await);
        let submission = Submission {
            output: Some(object(json!({ "amount": amount }))),
            summary: Some("Recorded.".into()),
            ..Submission::default()
        };
        let write = Write::Submit {
            token: claimed["token"].as_str().unwrap().to_string(),
            submission,
        };
        ok(runtime.execute(&caller, write, &format!("u-{i}")).await.unwrap());
        let view = ok(runtime.get_run(&agent("x"), &run).await.unwrap());
        assert_eq!(view["data"]["inputs"]["amount"].to_string(), kept, "input {sent}");
        assert_eq!(
            view["data"]["steps"]["record"]["output"]["amount"].to_string(),
            kept,
            "output {sent}"
        );
    }
}

/// Serving file evidence (spec §5): an upload reads back with its record in its own
/// organization only, and bytes that changed or vanished since the upload are an error, never
/// a different file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_reads_back_in_its_organization_and_only_with_its_recorded_hash() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    let owner = person("owner@acme.example", &[]);
    let stored = ok(runtime
        .upload(
            &owner,
            Upload {
                file_name: "receipt.pdf".into(),
                content_type: "application/pdf".into(),
                bytes: b"%PDF-1.7 receipt".to_vec(),
            },
            "f-1",
        )
        .await
        .unwrap());
    let id = stored["id"].as_str().unwrap();

    let (record, bytes) = runtime
        .read_upload(&OrgId::from(ORG), id)
        .await
        .unwrap()
        .expect("found");
    assert_eq!(bytes, b"%PDF-1.7 receipt");
    assert_eq!(record.id, id);
    assert_eq!(record.file_name, "receipt.pdf");
    assert_eq!(record.content_type, "application/pdf");
    assert_eq!(record.sha256, stored["sha256"]);
    assert_eq!(record.bytes, 16);
    assert_eq!(record.by, "owner@acme.example");

    assert_eq!(
        runtime.read_upload(&OrgId::from("globex"), id).await.unwrap(),
        None,
        "another organization"
    );
    assert_eq!(
        runtime.read_upload(&OrgId::from(ORG), "f_0000").await.unwrap(),
        None,
        "no such upload"
    );

    let blob = dir.path().join("blobs").join(&record.path);
    std::fs::write(&blob, b"%PDF-1.7 forged").unwrap();
    let changed = runtime.read_upload(&OrgId::from(ORG), id).await.unwrap_err();
    assert!(
        matches!(changed, RuntimeError::Corrupt(ref message) if message.contains("sha256")),
        "{changed}"
    );
    std::fs::remove_file(&blob).unwrap();
    let gone = runtime.read_upload(&OrgId::from(ORG), id).await.unwrap_err();
    assert!(matches!(gone, RuntimeError::Blobs(_)), "{gone}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_actor_of_an_ended_run_leaves_memory_at_once_and_its_run_still_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    // Idle actors would stay an hour: only the end of the run can make this one go.
    let runtime = Runtime::new(
        open_store(&dir.path().join("store")).await,
        Arc::new(LocalBlobs::new(dir.path().join("blobs"))),
        RuntimeConfig {
            idle_eviction: Duration::from_secs(3600),
            ..Default::default()
        },
        Clock::starting_at(START),
    );
    publish_example(&runtime, ORG, "defect-triage").await;
    let caller = agent("a1");
    let open = run_id(
        &start(
            &runtime,
            &caller,
            "defect-triage",
            json!({ "reportId": "T-1" }),
            "s-1",
        )
        .await,
    );
    let ended = run_id(
        &start(
            &runtime,
            &caller,
            "defect-triage",
            json!({ "reportId": "T-2" }),
            "s-2",
        )
        .await,
    );
    assert_eq!(runtime.live_actors(), 2);
    let mut operator = person("ops@acme.test", &["ops"]);
    operator.operator = true;
    let cancel = |request: &'static str| {
        let (runtime, operator, ended) = (runtime.clone(), operator.clone(), ended.clone());
        async move {
            runtime
                .execute(
                    &operator,
                    Write::Cancel {
                        run_id: ended,
                        reason: "done with it".into(),
                    },
                    request,
                )
                .await
                .unwrap()
        }
    };
    ok(cancel("x-1").await);
    until("the ended run's actor is gone", || runtime.live_actors() == 1).await;
    assert_eq!(refused(cancel("x-2").await).issues, vec!["run_ended".to_string()]);
    assert!(ok(claim(&runtime, &caller, &open, "triage", "c-1").await)["token"].is_string());
}

/// Refuses every transaction as an overloaded store client does, while `refusing` is set.
#[derive(Debug, Default)]
struct Overloaded {
    refusing: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl Probe for Overloaded {
    async fn refuse_txn(&self, _: &Txn) -> Option<agentprocess_store::StoreError> {
        self.refusing
            .load(Ordering::SeqCst)
            .then(|| agentprocess_store::StoreError::Overloaded {
                limit: "cluster.max_in_flight_store_requests".into(),
                retry_after_ms: 100,
            })
    }
}

/// A run that does not exist keeps no actor in memory: not for a call naming no run, and not for
/// a start the store refused to take (under overload, each `retry` of a start names a new run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_actor_is_kept_for_a_run_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Probed::new(
        open_store(&dir.path().join("store")).await,
        Overloaded::default(),
    ));
    let runtime = runtime(
        store.clone(),
        &dir.path().join("blobs"),
        Clock::starting_at(START),
    );
    publish_example(&runtime, ORG, "defect-triage").await;
    let caller = agent("a1");
    let nowhere = claim(&runtime, &caller, &RunId::from("r_nowhere"), "triage", "c-1").await;
    assert_eq!(refused(nowhere).code, ErrorCode::NotFound);
    until("the actor of a run that is not there is gone", || {
        runtime.live_actors() == 0
    })
    .await;

    store.probe.refusing.store(true, Ordering::SeqCst);
    for n in 0..5 {
        let refused = runtime
            .execute(
                &caller,
                Write::StartRun {
                    process: "defect-triage".into(),
                    version: None,
                    inputs: json!({ "reportId": format!("T-{n}") }),
                    mode: Mode::Live,
                },
                &format!("s-{n}"),
            )
            .await;
        assert!(
            matches!(
                refused,
                Err(RuntimeError::Store(
                    agentprocess_store::StoreError::Overloaded { .. }
                ))
            ),
            "{refused:?}"
        );
    }
    until("no actor is kept for a start that was not taken", || {
        runtime.live_actors() == 0
    })
    .await;
    store.probe.refusing.store(false, Ordering::SeqCst);
    let started = run_id(
        &start(
            &runtime,
            &caller,
            "defect-triage",
            json!({ "reportId": "T-9" }),
            "s-9",
        )
        .await,
    );
    assert!(ok(claim(&runtime, &caller, &started, "triage", "c-2").await)["token"].is_string());
    assert_eq!(runtime.live_actors(), 1, "an existing run's actor stays");
}

/// A runtime over a store in `dir` whose actors leave memory after 50 ms idle, on a clock that
/// stands still unless moved.
async fn evicting_runtime(dir: &std::path::Path) -> Runtime {
    let config = RuntimeConfig {
        idle_eviction: Duration::from_millis(50),
        ..Default::default()
    };
    Runtime::new(
        open_store(&dir.join("store")).await,
        Arc::new(LocalBlobs::new(dir.join("blobs"))),
        config,
        Clock::starting_at(START),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_actors_are_evicted_and_reload_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = evicting_runtime(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    let caller = agent("a1");
    let run = run_id(
        &start(
            &runtime,
            &caller,
            "defect-triage",
            json!({ "reportId": "T-1" }),
            "s-1",
        )
        .await,
    );
    assert_eq!(runtime.live_actors(), 1);
    until("the idle actor is evicted", || runtime.live_actors() == 0).await;
    let claimed = ok(claim(&runtime, &caller, &run, "triage", "c-1").await);
    assert!(claimed["token"].is_string(), "loaded again from the store");
    let stats = runtime.stats();
    assert_eq!(stats.loads.load(Ordering::Relaxed), 1);
    assert_eq!(stats.evictions.load(Ordering::Relaxed), 1);
}

/// A new run's actor reads nothing before it commits (its id is the call's own): a `start_run`
/// retried after that actor left memory, within the same millisecond, names the same run, which
/// the store already holds. The commit finds it there and the retry is answered the first result
/// (spec §4), with no second run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_retried_in_its_millisecond_after_its_actor_left_is_answered_the_first_result() {
    let dir = tempfile::tempdir().unwrap();
    // The clock stands still: the retry comes in the first call's millisecond.
    let runtime = evicting_runtime(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    let caller = agent("a1");
    let inputs = json!({ "reportId": "T-1" });
    let first = start(&runtime, &caller, "defect-triage", inputs.clone(), "s-1").await;
    until("the idle actor is evicted", || runtime.live_actors() == 0).await;
    let again = start(&runtime, &caller, "defect-triage", inputs, "s-1").await;
    assert_eq!(again, first);
    let listed = ok(runtime.list_runs(&caller, ListRuns::default()).await.unwrap());
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_too_large_for_one_transaction_is_committed_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    let branches: Vec<String> = (0..40).map(|b| format!("b{b}")).collect();
    let mut source = format!(
        "---\nname: fanout\ndescription: Agents side by side.\nsteps:\n  - id: fan\n    parallel: [{}]\n    next: done\n",
        branches.join(", ")
    );
    for branch in &branches {
        source.push_str(&format!(
            "  - id: {branch}\n    agent: Your part.\n    next: join\n"
        ));
    }
    source.push_str("  - id: done\n    finish: done\n---\n\n# Fanout\n");
    runtime
        .publish(&OrgId::from(ORG), source.as_bytes(), indexmap::IndexMap::new())
        .await
        .unwrap();
    let run = run_id(&start(&runtime, &agent("starter"), "fanout", json!({}), "s-1").await);
    let mut calls = Vec::new();
    for (i, branch) in branches.iter().enumerate() {
        let (runtime, run, branch) = (runtime.clone(), run.clone(), branch.clone());
        calls.push(tokio::spawn(async move {
            claim(
                &runtime,
                &agent(&format!("a{i}")),
                &run,
                &branch,
                &format!("c-{i}"),
            )
            .await
        }));
    }
    for call in calls {
        assert!(ok(call.await.unwrap())["token"].is_string());
    }
    let view = ok(runtime.get_run(&agent("x"), &run).await.unwrap());
    for branch in &branches {
        assert_eq!(step_state(&view, branch), "claimed");
    }
}

/// Spec `tools.md` § get_work: through the run service an agent's page comes as the JSON its
/// items were stored as, spliced, and reads as exactly the page of values; a person's page, whose
/// items may hold file evidence the gateway links, comes as values. Both follow the cursor alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_work_page_is_spliced_from_the_stored_items_and_reads_as_the_same_page() {
    use agentprocess_service::{self as service, RunService};
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    for n in 0..3 {
        let inputs = json!({ "reportId": format!("T-{n}") });
        start(
            &runtime,
            &agent("starter"),
            "defect-triage",
            inputs,
            &format!("s-{n}"),
        )
        .await;
    }
    let service_agent = service::Caller {
        organization: ORG.into(),
        kind: service::CallerKind::Agent { id: "worker".into() },
        operator: false,
    };
    let request = || GetWork {
        limit: Some(2),
        ..GetWork::default()
    };
    let values = ok(runtime.get_work(&agent("worker"), request()).await.unwrap());
    assert_eq!(values["items"].as_array().unwrap().len(), 2);
    assert!(values["nextCursor"].is_string(), "{values:#}");
    let service::ToolOutcome::Rendered(page) = RunService::get_work(&runtime, &service_agent, request())
        .await
        .unwrap()
    else {
        panic!("an agent's page is not rendered");
    };
    assert_eq!(page.to_value(), values);
    assert_eq!(
        page.json(),
        values.to_string(),
        "spliced as serde_json writes the values"
    );
    let next = GetWork {
        cursor: values["nextCursor"].as_str().map(str::to_owned),
        ..request()
    };
    let service::ToolOutcome::Rendered(rest) = RunService::get_work(&runtime, &service_agent, next)
        .await
        .unwrap()
    else {
        panic!("an agent's page is not rendered");
    };
    assert_eq!(rest.to_value()["items"].as_array().unwrap().len(), 1);
    assert_eq!(rest.to_value()["nextCursor"], serde_json::Value::Null);

    let service_person = service::Caller {
        organization: ORG.into(),
        kind: service::CallerKind::Person {
            email: "ops@example.com".into(),
            groups: vec!["support".into()],
        },
        operator: false,
    };
    let outcome = RunService::get_work(&runtime, &service_person, GetWork::default())
        .await
        .unwrap();
    assert!(matches!(outcome, service::ToolOutcome::Ok(_)), "{outcome:?}");
}

/// The operators' read of the ready-step index: every ready agent step of the organization,
/// oldest first, cut at an instant, paged; nobody else reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_reads_the_ready_steps_oldest_first_up_to_an_instant() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = fresh(dir.path()).await;
    publish_example(&runtime, ORG, "defect-triage").await;
    let starter = agent("a1");
    let mut runs = Vec::new();
    for i in 0..3 {
        let view = start(
            &runtime,
            &starter,
            "defect-triage",
            json!({ "reportId": format!("T-{i}") }),
            &format!("s-{i}"),
        )
        .await;
        runs.push(run_id(&view).as_str().to_owned());
        runtime.clock().advance(Duration::from_secs(1));
    }
    let mut operator = person("ops@acme.test", &[]);
    operator.operator = true;
    let read = |request: ReadySteps| {
        let runtime = runtime.clone();
        let operator = operator.clone();
        async move { ok(runtime.ready_steps(&operator, request).await.unwrap()) }
    };
    let run_ids = |page: &serde_json::Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["runId"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = read(ReadySteps::default()).await;
    assert_eq!(run_ids(&all), runs);
    assert_eq!(all["items"][0]["stepId"], "triage");
    // Cut at the second run's readySince: it and the first, and no cursor past the cut.
    let second_ready = all["items"][1]["readySince"].as_str().unwrap();
    let second_ready = agentprocess_run_actor::machine::Timestamp::parse_rfc3339(second_ready).unwrap();
    let until = u64::try_from(second_ready.as_millis()).unwrap();
    let cut = read(ReadySteps {
        ready_until_ms: Some(until),
        ..ReadySteps::default()
    })
    .await;
    assert_eq!(run_ids(&cut), runs[..2]);
    assert_eq!(cut["nextCursor"], serde_json::Value::Null);
    let first = read(ReadySteps {
        limit: Some(1),
        ..ReadySteps::default()
    })
    .await;
    assert_eq!(run_ids(&first), runs[..1]);
    let next = read(ReadySteps {
        limit: Some(1),
        cursor: first["nextCursor"].as_str().map(str::to_owned),
        ..ReadySteps::default()
    })
    .await;
    assert_eq!(run_ids(&next), runs[1..2]);
    // Not an operator: refused, whoever it is.
    for caller in [agent("a1"), person("mira@acme.test", &["ops"])] {
        let refusal = refused(runtime.ready_steps(&caller, ReadySteps::default()).await.unwrap());
        assert_eq!(refusal.code, ErrorCode::Forbidden);
    }
}

/// Counts reads of one key.
#[derive(Debug)]
struct KeyReads {
    key: Vec<u8>,
    reads: AtomicUsize,
}

#[async_trait::async_trait]
impl Probe for KeyReads {
    async fn get(&self, key: &[u8]) {
        if key == self.key.as_slice() {
            self.reads.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Spec `start_run`: without `version`, a run pins the latest published version. A host keeps
/// which version is the latest and reads the catalog only when a start's commit finds that a
/// newer one was published meanwhile, here by another host of the same store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_pins_a_version_published_by_another_host_without_reading_the_catalog_each_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir.path().join("store")).await;
    let publisher = runtime(
        store.clone(),
        &dir.path().join("blobs"),
        Clock::starting_at(START),
    );
    publish_example(&publisher, ORG, "defect-triage").await;
    let catalog_entry = publisher.keys().catalog_entry(&OrgId::from(ORG), "defect-triage");
    let counting = Arc::new(Probed::new(
        store.clone(),
        KeyReads {
            key: catalog_entry,
            reads: AtomicUsize::new(0),
        },
    ));
    let starter = runtime(
        counting.clone(),
        &dir.path().join("blobs"),
        Clock::starting_at(START),
    );
    let started = |n: usize| {
        let starter = starter.clone();
        async move {
            let view = start(
                &starter,
                &agent("starter"),
                "defect-triage",
                json!({ "reportId": format!("T-{n}") }),
                &format!("s-{n}"),
            )
            .await;
            view["run"]["version"].as_u64().unwrap()
        }
    };
    assert_eq!(started(1).await, 1);
    assert_eq!(started(2).await, 1);
    assert_eq!(started(3).await, 1);
    assert_eq!(
        counting.probe.reads.load(Ordering::SeqCst),
        1,
        "the latest version is read once"
    );

    let source = std::fs::read_to_string(agentprocess_testkit::example("defect-triage")).unwrap();
    let loaded =
        agentprocess_process::load(source.as_bytes(), &agentprocess_process::Offer::EVERYTHING).unwrap();
    let roles: indexmap::IndexMap<String, String> = loaded
        .process
        .role_names()
        .into_iter()
        .map(|role| (role.to_string(), format!("g_{role}")))
        .collect();
    publisher
        .publish(
            &OrgId::from(ORG),
            format!("{source}\nA second version, published by another host.\n").as_bytes(),
            roles,
        )
        .await
        .unwrap();
    assert_eq!(
        started(4).await,
        2,
        "the start after the publish pins the new version"
    );
    assert_eq!(started(5).await, 2);
    let reads = counting.probe.reads.load(Ordering::SeqCst);
    assert!(
        (2..=3).contains(&reads),
        "{reads} reads: one more for the new version, and at most one to see the old one moved"
    );
}
