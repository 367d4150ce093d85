//! Durability of `EmbeddedStore`: crashes, restarts, the former format, the lock file.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use agentprocess_store::{
    Compare, EmbeddedOptions, EmbeddedStore, EventKind, KeyRange, RangeRequest, RecoveryReport, Store,
    StoreError, Txn, TxnOp,
};

const CHILD_DIR_ENV: &str = "AGENTPROCESS_STORE_TEST_CRASH_WRITER_DIR";
const CHILD_CACHE_ENV: &str = "AGENTPROCESS_STORE_TEST_CRASH_WRITER_CACHE_BYTES";
const CHILD_CHECKPOINT_ENV: &str = "AGENTPROCESS_STORE_TEST_CRASH_WRITER_CHECKPOINT_BYTES";

async fn open(dir: &std::path::Path) -> EmbeddedStore {
    open_with(dir, EmbeddedOptions::default()).await
}

async fn open_with(dir: &std::path::Path, options: EmbeddedOptions) -> EmbeddedStore {
    EmbeddedStore::open(dir, options).await.expect("open").0
}

async fn put(store: &EmbeddedStore, key: &str, value: &str) -> i64 {
    store
        .txn(Txn::new().and_then([TxnOp::put(key, value)]))
        .await
        .expect("put")
        .revision
}

async fn all_keys(store: &EmbeddedStore) -> Vec<(String, String)> {
    store
        .range(RangeRequest::new(KeyRange::prefix(Vec::new())))
        .await
        .expect("range")
        .kvs
        .into_iter()
        .map(|kv| {
            (
                String::from_utf8(kv.key).unwrap(),
                String::from_utf8(kv.value).unwrap(),
            )
        })
        .collect()
}

/// Kills the child if the test fails before it does.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Not a test on its own: the writer that `acknowledged_writes_survive_kill_9` runs in a child
/// process. It writes from many tasks at once and prints each key once its write is acknowledged.
#[test]
#[ignore = "the child process of the kill -9 tests, which run it with --ignored"]
fn crash_writer_child() {
    let dir = std::env::var(CHILD_DIR_ENV)
        .unwrap_or_else(|_| panic!("{CHILD_DIR_ENV} names the store folder; run by the kill -9 tests"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut options = EmbeddedOptions::default();
    if let Some(bytes) = std::env::var(CHILD_CACHE_ENV).ok().and_then(|b| b.parse().ok()) {
        options.cache_bytes = bytes;
    }
    if let Some(bytes) = std::env::var(CHILD_CHECKPOINT_ENV)
        .ok()
        .and_then(|b| b.parse().ok())
    {
        options.checkpoint_after_bytes = bytes;
    }
    runtime.block_on(async move {
        let store = open_with(dir.as_ref(), options).await;
        let lease = store.lease_grant(3600).await.expect("grant");
        let mut tasks = Vec::new();
        for writer in 0..32 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0u64.. {
                    let key = format!("w{writer:02}/{n:08}");
                    let txn = Txn::new().when([Compare::absent(key.clone())]).and_then([
                        TxnOp::put(key.clone(), format!("value of {key}")),
                        TxnOp::put(format!("last/{writer:02}"), key.clone()),
                        TxnOp::put_with_lease(format!("leased/{writer:02}"), "x", lease.id),
                    ]);
                    let result = store.txn(txn).await.expect("txn");
                    assert!(result.succeeded);
                    use std::io::Write;
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ACK {key} {}", result.revision).unwrap();
                    out.flush().unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// A child process writes through the store with many concurrent writers and is killed with
/// SIGKILL mid-stream; reopening finds every write the child saw acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    let crash = kill_writer_and_check(None, None).await;
    // Every write since the open's checkpoint was in the journal only: the open replayed it.
    assert!(
        crash.report.replayed_records > 0,
        "nothing replayed: {:?}",
        crash.report
    );
}

/// The same with checkpoints every 32 KiB of journal, so the kill lands among journal rotations
/// and synced engine commits: what a checkpoint holds comes from the engine's file, the rest from
/// the journals after it, and the journals a checkpoint holds are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_across_checkpoints() {
    let crash = kill_writer_and_check(None, Some(32 * 1024)).await;
    assert!(
        crash.journals_left <= 2,
        "{} journals left: a checkpoint removes those before it",
        crash.journals_left
    );
    assert!(
        crash.report.replayed_records < crash.acknowledged,
        "the checkpoints held some writes: {:?} of {} acknowledged",
        crash.report,
        crash.acknowledged
    );
}

/// The same with a page cache far smaller than the store, so the kill lands among commits that
/// write back and read pages from disk rather than from memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_with_a_small_cache() {
    let cache_bytes = 64 * 1024;
    // Checkpoints every 256 KiB, so the engine's file (not only the journal) outgrows the cache.
    let crash = kill_writer_and_check(Some(cache_bytes), Some(256 * 1024)).await;
    assert!(
        crash.file_bytes > 4 * cache_bytes as u64,
        "the store outgrew its cache: {}",
        crash.file_bytes
    );
}

/// What a crash left and what reopening found.
struct Crash {
    /// The size of the engine's file after the crash.
    file_bytes: u64,
    /// Journal files after the crash.
    journals_left: usize,
    acknowledged: usize,
    report: RecoveryReport,
}

/// Journal files in a store directory.
fn journals(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|f| {
            let name = f.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("journal-") && name.ends_with(".log")
        })
        .count()
}

async fn kill_writer_and_check(cache_bytes: Option<usize>, checkpoint_after_bytes: Option<u64>) -> Crash {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    if let Some(bytes) = cache_bytes {
        command.env(CHILD_CACHE_ENV, bytes.to_string());
    }
    if let Some(bytes) = checkpoint_after_bytes {
        command.env(CHILD_CHECKPOINT_ENV, bytes.to_string());
    }
    let mut child = KillOnDrop(
        command
            .args([
                "--ignored",
                "--exact",
                "crash_writer_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the writer"),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut acked = Vec::new();
    while acked.len() < 3000 {
        let line = lines.next().expect("the writer stopped early").expect("read");
        if let Some(ack) = line.strip_prefix("ACK ") {
            acked.push(ack.to_string());
        }
    }
    child.0.kill().expect("SIGKILL"); // Child::kill sends SIGKILL on Unix
    child.0.wait().unwrap();
    // Acknowledgements printed before the kill count too.
    for line in lines {
        let Ok(line) = line else { break };
        if let Some(ack) = line.strip_prefix("ACK ") {
            acked.push(ack.to_string());
        }
    }

    let file_bytes = std::fs::metadata(dir.path().join("store.redb")).unwrap().len();
    let journals_left = journals(dir.path());
    let (store, report) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
        .await
        .expect("reopen after kill -9");
    let mut max_revision = 0;
    for ack in &acked {
        let (key, revision) = ack.split_once(' ').unwrap();
        let revision: i64 = revision.parse().unwrap();
        max_revision = max_revision.max(revision);
        let kv = store
            .get(key.as_bytes())
            .await
            .unwrap()
            .0
            .unwrap_or_else(|| panic!("acknowledged key {key} lost"));
        assert_eq!(kv.value, format!("value of {key}").into_bytes());
        assert_eq!(kv.mod_revision, revision);
    }
    assert!(report.revision >= max_revision);
    // The lease outlived the crash, with its keys attached.
    let leased = store.get(b"leased/00").await.unwrap().0.expect("leased key");
    let status = store
        .lease_time_to_live(leased.lease.unwrap())
        .await
        .unwrap()
        .expect("lease survives a crash");
    assert_eq!(status.granted_ttl, 3600);
    assert!(status.keys.len() <= 32 && !status.keys.is_empty());
    Crash {
        file_bytes,
        journals_left,
        acknowledged: acked.len(),
        report,
    }
}

/// A clean close checkpoints: the next open replays nothing, and one empty journal is left.
#[tokio::test]
async fn a_clean_close_leaves_nothing_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    for n in 0..100 {
        put(&store, &format!("k{n:03}"), "v").await;
    }
    store.close().await;
    let (store, report) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (report.replayed_records, report.torn_bytes, report.keys),
        (0, 0, 100)
    );
    assert_eq!(journals(dir.path()), 1);
    assert_eq!(all_keys(&store).await.len(), 100);
}

/// A copy of a running store's directory is what a crash leaves: the engine's file at its last
/// checkpoint and the journal after it. A frame cut short at the end of the journal (a write
/// torn by the crash, never acknowledged) is dropped and reported; every whole one is replayed.
#[tokio::test]
async fn a_torn_journal_tail_is_dropped_and_every_whole_record_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let mut revisions = Vec::new();
    for n in 0..50 {
        revisions.push(put(&store, &format!("k{n:02}"), &format!("v{n}")).await);
    }
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), crashed.path());
    drop(store);
    std::fs::remove_file(crashed.path().join("LOCK")).ok();
    let journal = std::fs::read_dir(crashed.path())
        .unwrap()
        .map(|f| f.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("journal-"))
        .expect("a journal");
    let mut file = std::fs::OpenOptions::new().append(true).open(&journal).unwrap();
    std::io::Write::write_all(&mut file, &[200, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7]).unwrap();
    drop(file);

    let (store, report) = EmbeddedStore::open(crashed.path(), EmbeddedOptions::default())
        .await
        .unwrap();
    assert_eq!(report.replayed_records, 50);
    assert_eq!(report.torn_bytes, 11);
    assert_eq!(report.revision, *revisions.last().unwrap());
    for (n, revision) in revisions.iter().enumerate() {
        let kv = store.get(format!("k{n:02}").as_bytes()).await.unwrap().0.unwrap();
        assert_eq!(
            (kv.value, kv.mod_revision),
            (format!("v{n}").into_bytes(), *revision)
        );
    }
    // The replay was checkpointed: opening again replays nothing.
    store.close().await;
    let (_, report) = EmbeddedStore::open(crashed.path(), EmbeddedOptions::default())
        .await
        .unwrap();
    assert_eq!((report.replayed_records, report.keys), (0, 50));
}

/// Revisions, metadata and leases come back after a clean restart; the revision goes on from
/// where it was, and a recovered lease restarts its countdown from its full TTL.
#[tokio::test(start_paused = true)]
async fn revisions_and_leases_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    put(&store, "a", "1").await;
    put(&store, "a", "2").await;
    let kept = store.lease_grant(30).await.unwrap();
    let revoked = store.lease_grant(30).await.unwrap();
    store
        .txn(Txn::new().and_then([
            TxnOp::put_with_lease("claim/1", "held", kept.id),
            TxnOp::put_with_lease("claim/2", "held", revoked.id),
        ]))
        .await
        .unwrap();
    store.lease_revoke(revoked.id).await.unwrap();
    let before = store.get(b"a").await.unwrap();
    let (claim, revision) = store.get(b"claim/1").await.unwrap();
    let claim = claim.unwrap();
    store.close().await;
    assert!(matches!(store.get(b"a").await, Err(StoreError::Closed)));

    // Time passes while the store is down: the lease does not expire for it.
    tokio::time::advance(Duration::from_secs(25)).await;
    let (store, report) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
        .await
        .unwrap();
    assert_eq!(report.revision, revision);
    assert_eq!((report.keys, report.leases), (2, 1));
    assert_eq!(store.get(b"a").await.unwrap(), before);
    assert_eq!(store.get(b"claim/1").await.unwrap().0, Some(claim));
    assert_eq!(store.get(b"claim/2").await.unwrap().0, None);
    let status = store.lease_time_to_live(kept.id).await.unwrap().unwrap();
    assert_eq!((status.granted_ttl, status.remaining_ttl), (30, 30));
    assert_eq!(status.keys, vec![b"claim/1".to_vec()]);
    assert_eq!(store.lease_time_to_live(revoked.id).await.unwrap(), None);

    // Lease ids are never reused, and the revision continues.
    let fresh = store.lease_grant(5).await.unwrap();
    assert!(fresh.id > revoked.id);
    assert_eq!(put(&store, "b", "1").await, revision + 1);

    // The recovered lease still expires, and its expiry is watched like any other.
    let mut watch = store
        .watch(KeyRange::prefix(b"claim/".to_vec()), None)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(31)).await;
    let event = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(event.kind, EventKind::Delete);
    assert_eq!(event.kv.key, b"claim/1");
    assert_eq!(store.get(b"claim/1").await.unwrap().0, None);
    store.close().await;

    // The expiry itself was durable.
    let store = open(dir.path()).await;
    assert_eq!(store.get(b"claim/1").await.unwrap().0, None);
    assert_eq!(store.lease_time_to_live(kept.id).await.unwrap(), None);
}

/// Copies the directory at `from` into `to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A store directory written by the store's former format (a snapshot, then a log after it whose
/// last 13 bytes are a write torn by a crash) opens: every key comes back with its revisions and
/// version, the lease with its keys, the revision and lease ids go on; the torn bytes are left
/// out; the former files are moved into `legacy-*/`, and later opens use the new file alone.
#[tokio::test]
async fn a_store_in_the_former_format_is_imported_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/legacy-store");
    copy_dir(&fixture, dir.path());

    let (store, report) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
        .await
        .unwrap();
    assert_eq!((report.revision, report.keys, report.leases), (35, 22, 1));
    let import = report.legacy_import.expect("the former files were imported");
    assert_eq!(import.torn_bytes, 13);
    assert!(import.replayed_records > 0, "{import:?}");
    let moved: Vec<String> = std::fs::read_dir(&import.moved_to)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(moved.len(), 2, "{moved:?}");
    assert!(!dir.path().join("snapshot").exists());

    let keys = all_keys(&store).await;
    assert_eq!(keys.len(), 22);
    assert_eq!(keys[0], ("claim/a".into(), "held".into()));
    assert_eq!(keys[21], ("tail/1".into(), "x".into()));
    assert!(
        store.get(b"run/19").await.unwrap().0.is_none(),
        "deleted before the import"
    );
    assert!(
        store.get(b"claim/c").await.unwrap().0.is_none(),
        "its lease was revoked"
    );
    let (run, revision) = store.get(b"run/04").await.unwrap();
    let run = run.unwrap();
    assert_eq!(revision, 35);
    assert_eq!(run.value, b"state 4 v2");
    assert_eq!((run.create_revision, run.mod_revision, run.version), (6, 24, 2));
    let run = store.get(b"run/05").await.unwrap().0.unwrap();
    assert_eq!((run.create_revision, run.mod_revision, run.version), (7, 7, 1));
    let claim = store.get(b"claim/a").await.unwrap().0.unwrap();
    let lease = claim.lease.expect("claim/a is leased");
    let status = store.lease_time_to_live(lease).await.unwrap().unwrap();
    assert_eq!(status.granted_ttl, 3600);
    assert_eq!(status.keys, vec![b"claim/a".to_vec(), b"claim/b".to_vec()]);
    assert!(
        store.lease_grant(5).await.unwrap().id.0 > 2,
        "lease ids are not reused"
    );
    assert_eq!(put(&store, "after", "v").await, 36);
    store.close().await;

    let (store, report) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
        .await
        .unwrap();
    assert_eq!(report.legacy_import, None);
    assert_eq!((report.revision, report.keys), (36, 23));
    assert_eq!(store.get(b"after").await.unwrap().0.unwrap().mod_revision, 36);
}

/// A crash after the import was written but before the former files were moved leaves both:
/// the next open keeps the imported file (and what was written to it since) and moves the
/// former files aside.
#[tokio::test]
async fn former_files_left_beside_an_imported_store_are_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/legacy-store");
    copy_dir(&fixture, dir.path());
    let store = open(dir.path()).await;
    put(&store, "after the import", "v").await;
    store.close().await;
    copy_dir(&fixture, dir.path());

    let (store, report) = EmbeddedStore::open(dir.path(), EmbeddedOptions::default())
        .await
        .unwrap();
    let import = report.legacy_import.expect("the former files were moved");
    assert_eq!(import.replayed_records, 0, "nothing was imported twice");
    assert!(!dir.path().join("snapshot").exists());
    assert!(store.get(b"after the import").await.unwrap().0.is_some());
}

/// A second open of a directory in use fails with `Locked`; closing releases it.
#[tokio::test]
async fn the_lock_file_keeps_a_second_opener_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let second = EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).await;
    assert!(matches!(second, Err(StoreError::Locked(_))), "{second:?}");
    store.close().await;
    let third = EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).await;
    assert!(third.is_ok());
}

/// Dropping every handle releases the directory too.
#[tokio::test]
async fn dropping_the_store_releases_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    put(&store, "k", "v").await;
    drop(store);
    let mut reopened = None;
    for _ in 0..100 {
        match EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).await {
            Ok((store, _)) => {
                reopened = Some(store);
                break;
            }
            Err(StoreError::Locked(_)) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(other) => panic!("{other}"),
        }
    }
    let store = reopened.expect("the lock is released after the handles are dropped");
    assert!(store.get(b"k").await.unwrap().0.is_some());
}

/// A store far larger than its page cache, with keys overwritten many times, keeps every key's
/// last state and its leases across a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_larger_than_its_cache_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions {
        cache_bytes: 16 * 1024,
        ..EmbeddedOptions::default()
    };
    let store = open_with(dir.path(), options.clone()).await;
    let lease = store.lease_grant(600).await.unwrap();
    let mut expected = Vec::new();
    for i in 0..400 {
        let key = format!("k{:04}", i % 150);
        let value = format!("{i}-{}", "x".repeat(100));
        put(&store, &key, &value).await;
        if i % 50 == 0 {
            store
                .txn(Txn::new().and_then([TxnOp::put_with_lease(format!("l{i}"), "x", lease.id)]))
                .await
                .unwrap();
            expected.push((format!("l{i}"), "x".to_string()));
        }
    }
    for i in 250..400 {
        expected.push((format!("k{:04}", i % 150), format!("{i}-{}", "x".repeat(100))));
    }
    expected.sort();
    let revision = store.get(b"k0000").await.unwrap().1;
    let before = store.get(b"k0007").await.unwrap().0;
    store.close().await;

    let (store, report) = EmbeddedStore::open(dir.path(), options).await.unwrap();
    assert_eq!(report.revision, revision);
    assert_eq!(all_keys(&store).await, expected);
    assert_eq!(store.get(b"k0007").await.unwrap().0, before);
    let status = store.lease_time_to_live(lease.id).await.unwrap().unwrap();
    assert_eq!(status.keys.len(), 8);
    assert!(store.lease_grant(5).await.unwrap().id > lease.id);
}

/// A watcher that stops reading while the history moves past it ends with `Compacted`, never
/// with a gap; a watch from before the history fails the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_falls_behind_gets_an_explicit_error() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions {
        watch_history_bytes: 8 * 1024,
        watch_channel: 4,
        ..EmbeddedOptions::default()
    };
    let store = open_with(dir.path(), options.clone()).await;
    let first = put(&store, "k", "0").await;
    let mut watch = store.watch(KeyRange::prefix(b"k".to_vec()), None).await.unwrap();
    for i in 1..400 {
        put(&store, "k", &format!("{i}-{}", "x".repeat(100))).await;
    }
    let mut previous = first;
    let error = loop {
        match watch
            .next()
            .await
            .expect("the watch ends with an error, not silently")
        {
            Ok(event) => {
                assert_eq!(event.kv.mod_revision, previous + 1, "no gaps before the error");
                previous = event.kv.mod_revision;
            }
            Err(error) => break error,
        }
    };
    assert!(matches!(error, StoreError::Compacted { .. }), "{error}");
    assert!(watch.next().await.is_none());
    let too_old = store.watch(KeyRange::prefix(b"k".to_vec()), Some(first)).await;
    assert!(matches!(too_old, Err(StoreError::Compacted { .. })));
    store.close().await;

    // After a restart, events before it are gone; watching from the next revision works.
    let (store, report) = EmbeddedStore::open(dir.path(), options).await.unwrap();
    let gone = store
        .watch(KeyRange::prefix(b"k".to_vec()), Some(report.revision))
        .await;
    assert!(matches!(gone, Err(StoreError::Compacted { .. })));
    let mut watch = store
        .watch(KeyRange::prefix(b"k".to_vec()), Some(report.revision + 1))
        .await
        .unwrap();
    let r = put(&store, "k", "after").await;
    assert_eq!(watch.next().await.unwrap().unwrap().kv.mod_revision, r);
}

/// Closing the store ends its watches.
#[tokio::test]
async fn closing_the_store_ends_its_watches() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let mut watch = store.watch(KeyRange::prefix(Vec::new()), None).await.unwrap();
    let r = put(&store, "k", "v").await;
    store.close().await;
    assert_eq!(watch.next().await.unwrap().unwrap().kv.mod_revision, r);
    assert!(watch.next().await.is_none());
    let shared: Arc<dyn Store> = Arc::new(store);
    assert!(matches!(shared.lease_grant(5).await, Err(StoreError::Closed)));
}

/// Concurrent transactions share log syncs: far fewer syncs than transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_transactions_share_one_sync() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let mut tasks = Vec::new();
    for writer in 0..256 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..4 {
                put(&store, &format!("w{writer}/{n}"), "v").await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let stats = store.stats();
    assert_eq!(stats.records, 1024);
    assert!(
        stats.syncs * 2 < stats.records,
        "group commit should batch: {stats:?}"
    );
}

/// A lease expires when its TTL is up and not before; keep-alive restarts the countdown.
#[tokio::test(start_paused = true)]
async fn leases_expire_on_time_and_keep_alive_postpones_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let lease = store.lease_grant(10).await.unwrap();
    store
        .txn(Txn::new().and_then([TxnOp::put_with_lease("claim", "x", lease.id)]))
        .await
        .unwrap();
    let mut watch = store
        .watch(KeyRange::prefix(b"claim".to_vec()), None)
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(store.lease_keep_alive(lease.id).await.unwrap(), 10);
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(store.get(b"claim").await.unwrap().0.is_some(), "kept alive");
    let event = watch.next().await.unwrap().unwrap();
    assert_eq!(event.kind, EventKind::Delete);
    let expired_after = started.elapsed();
    assert!(
        expired_after >= Duration::from_secs(18) && expired_after < Duration::from_secs(19),
        "expired after {expired_after:?}"
    );
    assert_eq!(store.get(b"claim").await.unwrap().0, None);
}

/// A batch stops at its byte limit; the requests past it go in the next batch, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_stop_at_their_byte_limit() {
    let dir = tempfile::tempdir().unwrap();
    let options = EmbeddedOptions {
        max_batch_bytes: 1,
        ..EmbeddedOptions::default()
    };
    let store = open_with(dir.path(), options).await;
    let mut tasks = Vec::new();
    for writer in 0..64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut last = 0;
            for n in 0..4 {
                let revision = put(&store, &format!("k{writer}"), &n.to_string()).await;
                assert!(revision > last);
                last = revision;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let stats = store.stats();
    assert_eq!((stats.records, stats.syncs), (256, 256));
    for writer in 0..64 {
        let kv = store
            .get(format!("k{writer}").as_bytes())
            .await
            .unwrap()
            .0
            .unwrap();
        assert_eq!((kv.value, kv.version), (b"3".to_vec(), 4));
    }
}
