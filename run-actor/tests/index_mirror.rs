//! `get_work` (spec `tools.md` "get_work") on a host that reads its pages from watched copies of
//! the work indexes: pages served from the copy follow another host's writes, a page the copy
//! finds empty is read from the store, and the copies stay within their memory bound and close
//! when nobody reads them.

mod runtime_support;

use agentprocess_run_actor::MirrorLimits;
use agentprocess_run_actor::machine::{Caller, OrgId, RunId};
use agentprocess_run_actor::runtime::{Clock, LocalBlobs, Runtime, RuntimeConfig, Write};
use agentprocess_service::GetWork;
use agentprocess_store::probed::{Probe, Probed};
use agentprocess_store::{KeyRange, RangeRequest, WatchStream};
use runtime_support::*;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// Counts the store reads of the work indexes (ready steps and work items), and passes on their
/// watches' events only while `blind` is not set.
#[derive(Debug)]
struct WorkIndexes {
    prefixes: [Vec<u8>; 2],
    reads: AtomicUsize,
    blind: Arc<AtomicBool>,
}

#[async_trait::async_trait]
impl Probe for WorkIndexes {
    async fn range(&self, request: &RangeRequest) {
        if self.indexes(&request.range) {
            self.reads.fetch_add(1, Ordering::SeqCst);
        }
    }

    async fn watch(&self, range: &KeyRange, mut events: WatchStream) -> WatchStream {
        if !self.indexes(range) {
            return events;
        }
        let (sender, receiver) = mpsc::channel(64);
        let blind = self.blind.clone();
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                if !blind.load(Ordering::SeqCst) && sender.send(event).await.is_err() {
                    return;
                }
            }
        });
        WatchStream::from_channel(receiver)
    }
}

impl WorkIndexes {
    fn indexes(&self, range: &KeyRange) -> bool {
        self.prefixes.iter().any(|prefix| range.start.starts_with(prefix))
    }
}

struct Hosts {
    /// A host that reads every page from the store, and makes the writes.
    writer: Runtime,
    /// A host that reads its pages from its copies.
    reader: Runtime,
    probe: Arc<Probed<WorkIndexes>>,
}

async fn hosts(dir: &Path, limits: MirrorLimits) -> Hosts {
    let store = open_store(&dir.join("store")).await;
    let writer = runtime(store.clone(), &dir.join("blobs"), Clock::starting_at(START));
    publish_example(&writer, ORG, "defect-triage").await;
    let probe = Arc::new(Probed::new(
        store,
        WorkIndexes {
            prefixes: [
                writer.keys().ready_steps(&OrgId::from(ORG)).start,
                writer.keys().all_work_items(&OrgId::from(ORG)).start,
            ],
            reads: AtomicUsize::new(0),
            blind: Arc::default(),
        },
    ));
    let reader = Runtime::new(
        probe.clone(),
        Arc::new(LocalBlobs::new(dir.join("blobs"))),
        RuntimeConfig {
            index_mirror: Some(limits),
            ..RuntimeConfig::default()
        },
        Clock::starting_at(START),
    );
    Hosts {
        writer,
        reader,
        probe,
    }
}

async fn started(runtime: &Runtime, n: usize) -> RunId {
    run_id(
        &start(
            runtime,
            &agent("starter"),
            "defect-triage",
            json!({ "reportId": format!("D-{n}") }),
            &format!("start-{n}"),
        )
        .await,
    )
}

/// The runs of the items on `caller`'s first `get_work` page.
async fn listed(runtime: &Runtime, caller: &Caller) -> Vec<String> {
    let page = ok(runtime
        .get_work(
            caller,
            GetWork {
                limit: Some(100),
                ..GetWork::default()
            },
        )
        .await
        .expect("no infrastructure error"));
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| item["runId"].as_str().expect("a runId").to_owned())
        .collect()
}

/// Reads pages until `holds` is true of one that the store was not read for; panics after 10 s.
async fn page_from_copy(hosts: &Hosts, holds: impl Fn(&[String]) -> bool) -> Vec<String> {
    page_from_copy_for(hosts, &agent("reader"), holds).await
}

/// [`page_from_copy`] for `caller`.
async fn page_from_copy_for(
    hosts: &Hosts,
    caller: &Caller,
    holds: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let before = hosts.probe.probe.reads.load(Ordering::SeqCst);
        let runs = listed(&hosts.reader, caller).await;
        let from_copy = hosts.probe.probe.reads.load(Ordering::SeqCst) == before;
        if from_copy && holds(&runs) {
            return runs;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no page from the copy as expected; last {runs:?} (from the copy: {from_copy})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_come_from_the_copy_and_follow_starts_and_claims_made_on_another_host() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts(dir.path(), MirrorLimits::default()).await;
    let first = started(&hosts.writer, 1).await;
    let first_id = first.to_string();
    assert_eq!(
        listed(&hosts.reader, &agent("reader")).await,
        vec![first_id.clone()]
    );

    page_from_copy(&hosts, |runs| runs == [first_id.clone()]).await;
    let second = started(&hosts.writer, 2).await.to_string();
    page_from_copy(&hosts, |runs| runs == [first_id.clone(), second.clone()]).await;
    ok(claim(&hosts.writer, &agent("a_claimer"), &first, "triage", "claim-1").await);
    page_from_copy(&hosts, |runs| runs == [second.clone()]).await;
    assert!(hosts.reader.index_mirror_bytes().unwrap() > 0);

    // Pages after the first, from the copy, with the store's cursors.
    let third = started(&hosts.writer, 3).await.to_string();
    page_from_copy(&hosts, |runs| runs.len() == 2).await;
    let before = hosts.probe.probe.reads.load(Ordering::SeqCst);
    let one = |cursor: Option<String>| GetWork {
        limit: Some(1),
        cursor,
        ..GetWork::default()
    };
    let page = ok(hosts.reader.get_work(&agent("reader"), one(None)).await.unwrap());
    assert_eq!(page["items"][0]["runId"], json!(second));
    let cursor = page["nextCursor"].as_str().expect("a next page").to_owned();
    let page = ok(hosts
        .reader
        .get_work(&agent("reader"), one(Some(cursor)))
        .await
        .unwrap());
    assert_eq!(page["items"][0]["runId"], json!(third));
    assert_eq!(page["nextCursor"], json!(null));
    assert_eq!(
        hosts.probe.probe.reads.load(Ordering::SeqCst),
        before,
        "both pages came from the copy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_the_copy_finds_empty_is_read_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts(dir.path(), MirrorLimits::default()).await;
    let first = started(&hosts.writer, 1).await;
    page_from_copy(&hosts, |runs| runs == [first.to_string()]).await;
    ok(claim(&hosts.writer, &agent("a_claimer"), &first, "triage", "claim-1").await);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while hosts.reader.index_mirror_bytes() != Some(0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the copy heard of the claim"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The copy is whole and empty, and hears of nothing more: as far behind as a copy can be.
    hosts.probe.probe.blind.store(true, Ordering::SeqCst);
    let second = started(&hosts.writer, 2).await.to_string();
    let before = hosts.probe.probe.reads.load(Ordering::SeqCst);
    assert_eq!(
        listed(&hosts.reader, &agent("reader")).await,
        vec![second],
        "work made ready elsewhere is never answered as no work"
    );
    assert!(
        hosts.probe.probe.reads.load(Ordering::SeqCst) > before,
        "read from the store"
    );
    assert_eq!(
        hosts.reader.index_mirror_bytes(),
        Some(0),
        "the copy still holds nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_past_the_memory_bound_is_read_from_the_store_and_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Room for about two ready steps.
    let limits = MirrorLimits {
        max_bytes: 2_500,
        ..MirrorLimits::default()
    };
    let hosts = hosts(dir.path(), limits).await;
    let mut runs = vec![started(&hosts.writer, 1).await.to_string()];
    page_from_copy(&hosts, |listed| listed == runs.as_slice()).await;
    let held = hosts.reader.index_mirror_bytes().unwrap();
    assert!(held > 0 && held <= limits.max_bytes, "{held} bytes held");

    for n in 2..=6 {
        runs.push(started(&hosts.writer, n).await.to_string());
    }
    // Pages come oldest ready first, runs ready in one millisecond by id: the order of run ids,
    // which begin with their start time.
    runs.sort();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while hosts.reader.index_mirror_bytes() != Some(0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the copy past its bound was dropped"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..3 {
        let before = hosts.probe.probe.reads.load(Ordering::SeqCst);
        assert_eq!(listed(&hosts.reader, &agent("reader")).await, runs);
        assert!(
            hosts.probe.probe.reads.load(Ordering::SeqCst) > before,
            "read from the store"
        );
        assert_eq!(hosts.reader.index_mirror_bytes(), Some(0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_nobody_reads_closes_and_gives_its_memory_back() {
    let dir = tempfile::tempdir().unwrap();
    let limits = MirrorLimits {
        idle_close: Duration::from_millis(300),
        ..MirrorLimits::default()
    };
    let hosts = hosts(dir.path(), limits).await;
    let run = started(&hosts.writer, 1).await.to_string();
    page_from_copy(&hosts, |runs| runs == [run.clone()]).await;
    assert!(hosts.reader.index_mirror_bytes().unwrap() > 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while hosts.reader.index_mirror_bytes() != Some(0) {
        assert!(tokio::time::Instant::now() < deadline, "the unread copy closed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Read again, it opens again.
    page_from_copy(&hosts, |runs| runs == [run.clone()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persons_page_comes_from_the_copy_of_the_work_items() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts(dir.path(), MirrorLimits::default()).await;
    let qa = person("qa@acme.example", &["g_qa-lead"]);
    assert_eq!(listed(&hosts.reader, &qa).await, Vec::<String>::new());

    // Triage done on the other host: `verify_fix` waits for the QA lead.
    let run = started(&hosts.writer, 1).await;
    let claimed = ok(claim(&hosts.writer, &agent("a_triage"), &run, "triage", "claim-1").await);
    let submit = Write::Submit {
        token: claimed["token"].as_str().unwrap().into(),
        submission: triage_findings(),
    };
    ok(hosts
        .writer
        .execute(&agent("a_triage"), submit, "submit-1")
        .await
        .unwrap());
    page_from_copy_for(&hosts, &qa, |runs| runs == [run.to_string()]).await;
    assert_eq!(
        listed(
            &hosts.reader,
            &person("dev@acme.example", &["g_developer-oncall"])
        )
        .await,
        Vec::<String>::new(),
        "another group's person sees none of it"
    );
}
