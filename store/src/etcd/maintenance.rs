//! Keeping etcd healthy: compacting the key history, defragmenting one member at a time, and
//! each member's database size against its quota. Not part of the [`crate::Store`] interface:
//! what a cluster's scheduler leader runs on a schedule.

use super::failure::{self, Failure};
use super::{CallError, EtcdStore, Repeat};
use crate::error::StoreError;
use etcd_client as etcd;
use std::time::Duration;

/// How long defragmenting one member may take (it blocks that member's writes meanwhile).
const DEFRAGMENT_TIMEOUT: Duration = Duration::from_secs(120);

/// One member's state, as its status call answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStatus {
    pub endpoint: String,
    /// The database file's size, in bytes: what etcd's quota (`--quota-backend-bytes`) counts.
    pub db_bytes: i64,
    /// The bytes of it in use; the rest is free pages a defragmentation gives back.
    pub db_bytes_in_use: i64,
    /// Whether this member is the raft leader.
    pub leader: bool,
    /// The store's revision as the member answered.
    pub revision: i64,
    /// Alarms and errors the member reports (`NOSPACE` among them).
    pub errors: Vec<String>,
}

impl EtcdStore {
    /// Every member's status, in endpoint order; a member that does not answer is an error.
    pub async fn member_statuses(&self) -> Vec<Result<MemberStatus, StoreError>> {
        let timeout = self.inner.options.request_timeout;
        let mut statuses = Vec::with_capacity(self.inner.members.len());
        for member in &self.inner.members {
            let mut maintenance = member.maintenance.clone();
            let answer = tokio::time::timeout(timeout, maintenance.status()).await;
            statuses.push(match answer {
                Ok(Ok(status)) => {
                    let header = status.header();
                    Ok(MemberStatus {
                        endpoint: member.endpoint.clone(),
                        db_bytes: status.db_size(),
                        db_bytes_in_use: status.raft_used_db_size(),
                        leader: header.is_some_and(|h| h.member_id() == status.leader()),
                        revision: header.map_or(0, |h| h.revision()),
                        errors: status.errors().to_vec(),
                    })
                }
                Ok(Err(error)) => Err(unavailable(&member.endpoint, "status", &error.to_string())),
                Err(_) => Err(unavailable(&member.endpoint, "status", "no answer in time")),
            });
        }
        statuses
    }

    /// Compacts the key history up to `revision`: older versions of keys are forgotten and
    /// watches can no longer start before it. A revision compacted already is not an error.
    pub async fn compact(&self, revision: i64) -> Result<(), StoreError> {
        let answer = self
            .inner
            .call(
                "compacting etcd's history",
                Repeat::Safe,
                |mut member| async move {
                    member
                        .kv
                        .compact(revision, None)
                        .await
                        .map(|_| ())
                        .map_err(failure::classify)
                },
            )
            .await;
        match answer {
            Ok(()) | Err(CallError::Compacted) => Ok(()),
            Err(error) => Err(error.for_lease(None)),
        }
    }

    /// Defragments the member at `index` (of [`EtcdStore::member_statuses`]): its database file
    /// shrinks to what is in use. The member serves no writes meanwhile, so callers defragment
    /// one member at a time.
    pub async fn defragment(&self, index: usize) -> Result<(), StoreError> {
        let member = self
            .inner
            .members
            .get(index)
            .ok_or_else(|| StoreError::Config(format!("no etcd member {index}")))?;
        let mut maintenance = member.maintenance.clone();
        match tokio::time::timeout(DEFRAGMENT_TIMEOUT, maintenance.defragment()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(match failure::classify(error) {
                Failure::Final(error) => error,
                other => unavailable(&member.endpoint, "defragment", &format!("{other:?}")),
            }),
            Err(_) => Err(unavailable(&member.endpoint, "defragment", "no answer in time")),
        }
    }

    /// Clears a `NOSPACE` alarm, once compaction and defragmentation made room: until then etcd
    /// refuses every write.
    pub async fn disarm_space_alarm(&self) -> Result<(), StoreError> {
        let answer = self
            .inner
            .call(
                "clearing etcd's space alarm",
                Repeat::Safe,
                |mut member| async move {
                    member
                        .maintenance
                        .alarm(etcd::AlarmAction::Deactivate, etcd::AlarmType::Nospace, None)
                        .await
                        .map(|_| ())
                        .map_err(failure::classify)
                },
            )
            .await;
        answer.map_err(|error| error.for_lease(None))
    }
}

fn unavailable(endpoint: &str, what: &str, reason: &str) -> StoreError {
    StoreError::Unavailable {
        context: format!("etcd {what} of {endpoint}"),
        reason: reason.to_owned(),
    }
}
