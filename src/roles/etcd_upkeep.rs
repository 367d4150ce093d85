//! Keeping the cluster's etcd healthy, run by the scheduler leader: the key history compacted
//! on a schedule (everything older than one period), each member's database size logged, and a
//! member whose file is mostly free pages (or that raised the space alarm) defragmented, one
//! member at a time, the leader last; then a space alarm is cleared.

use agentprocess_store::{EtcdStore, MemberStatus, Store, StoreError};
use std::time::Duration;

/// A member is defragmented when its file is at least this big...
const DEFRAGMENT_ABOVE_BYTES: i64 = 64 << 20;
/// ...and less than this share of it is in use (or when it raised the space alarm).
const DEFRAGMENT_BELOW_IN_USE: f64 = 0.5;

/// Whether a member's database is worth defragmenting now.
pub fn defragment_wanted(status: &MemberStatus) -> bool {
    let space_alarm = status.errors.iter().any(|e| e.contains("NOSPACE"));
    let mostly_free = status.db_bytes >= DEFRAGMENT_ABOVE_BYTES
        && (status.db_bytes_in_use as f64) < DEFRAGMENT_BELOW_IN_USE * status.db_bytes as f64;
    space_alarm || mostly_free
}

/// Runs until dropped: every `period`, compacts the history to the revision seen one period
/// before, then looks at every member and defragments those that need it.
pub async fn run(store: EtcdStore, period: Duration) {
    let mut previous_revision: Option<i64> = None;
    let mut ticker = tokio::time::interval(period);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        match store.get(b"\0").await {
            Ok((_, revision)) => {
                if let Some(revision) = previous_revision {
                    match store.compact(revision).await {
                        Ok(()) => tracing::info!(revision, "compacted etcd's history"),
                        Err(error) => tracing::warn!(%error, revision, "cannot compact etcd's history"),
                    }
                }
                previous_revision = Some(revision);
            }
            Err(error) => tracing::warn!(%error, "cannot read etcd's revision; compaction waits"),
        }
        if let Err(error) = defragment_where_needed(&store).await {
            tracing::warn!(%error, "etcd upkeep failed");
        }
    }
}

/// Looks at every member, logs its size, and defragments those that need it, followers first.
async fn defragment_where_needed(store: &EtcdStore) -> Result<(), StoreError> {
    let statuses = store.member_statuses().await;
    let mut wanted = Vec::new();
    let mut space_alarm = false;
    for (index, status) in statuses.iter().enumerate() {
        match status {
            Ok(status) => {
                tracing::info!(
                    endpoint = %status.endpoint,
                    db_bytes = status.db_bytes,
                    db_bytes_in_use = status.db_bytes_in_use,
                    leader = status.leader,
                    "etcd member size"
                );
                space_alarm |= status.errors.iter().any(|e| e.contains("NOSPACE"));
                if defragment_wanted(status) {
                    wanted.push((status.leader, index, status.endpoint.clone()));
                }
            }
            Err(error) => tracing::warn!(%error, "an etcd member did not report its status"),
        }
    }
    // Followers first: the leader's pause is the one every write feels.
    wanted.sort();
    for (_, index, endpoint) in wanted {
        match store.defragment(index).await {
            Ok(()) => tracing::info!(%endpoint, "defragmented etcd member"),
            Err(error) => tracing::warn!(%endpoint, %error, "cannot defragment etcd member"),
        }
    }
    if space_alarm {
        store.disarm_space_alarm().await?;
        tracing::warn!("cleared etcd's space alarm after compaction and defragmentation");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(db_bytes: i64, db_bytes_in_use: i64, errors: &[&str]) -> MemberStatus {
        MemberStatus {
            endpoint: "http://127.0.0.1:2379".into(),
            db_bytes,
            db_bytes_in_use,
            leader: false,
            revision: 1,
            errors: errors.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_big_file_mostly_free_or_a_space_alarm_is_defragmented_and_nothing_else() {
        assert!(defragment_wanted(&status(200 << 20, 50 << 20, &[])));
        assert!(
            !defragment_wanted(&status(200 << 20, 150 << 20, &[])),
            "mostly in use"
        );
        assert!(
            !defragment_wanted(&status(10 << 20, 1 << 20, &[])),
            "too small to matter"
        );
        assert!(defragment_wanted(&status(
            10 << 20,
            9 << 20,
            &["memberID:1 alarm:NOSPACE"]
        )));
    }
}
