//! The shard map a gateway (or the scheduler) routes by: which live host holds each shard.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentprocess_store::keys::Keys;
use agentprocess_store::{Store, StoreError};
use tokio::sync::Notify;

use crate::membership::HostRecord;
use crate::mirror::Mirror;
use crate::shards::{rendezvous_owner, shard_of};
use crate::task::AbortOnDrop;

/// The live hosts and the shard keys, followed by watches. Reads answer from memory; they may
/// lag the store by a watch event, which is why a host answers a misrouted call with
/// [`crate::NotOwner`] and the caller calls [`ShardMap::refresh`] and tries again. Stops
/// following when dropped.
#[derive(Debug)]
pub struct ShardMap {
    keys: Keys,
    shards: u32,
    hosts: Arc<Mirror>,
    owners: Arc<Mirror>,
    /// The next turn of [`ShardMap::any_host`]'s round robin.
    turn: AtomicUsize,
    _followers: [AbortOnDrop; 2],
}

impl ShardMap {
    /// Reads the hosts and the shard keys of the cluster (`shards` shards), then follows them.
    /// Must be called inside a tokio runtime.
    pub async fn watch(store: Arc<dyn Store>, keys: Keys, shards: u32) -> Result<Arc<ShardMap>, StoreError> {
        // Nothing waits on changes: reads look at the copies when they are made.
        let changed = Arc::new(Notify::new());
        let hosts = Arc::new(Mirror::new(store.clone(), keys.hosts(), changed.clone()));
        let owners = Arc::new(Mirror::new(store, keys.shards(), changed));
        let hosts_at = hosts.load().await?;
        let owners_at = owners.load().await?;
        Ok(Arc::new(ShardMap {
            _followers: [
                AbortOnDrop::spawn(hosts.clone().follow(Some(hosts_at))),
                AbortOnDrop::spawn(owners.clone().follow(Some(owners_at))),
            ],
            keys,
            shards,
            hosts,
            owners,
            turn: AtomicUsize::new(0),
        }))
    }

    /// The cluster's shard count.
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// Where calls for `shard` go: the holder named by the shard key when that host is live;
    /// otherwise the live host rendezvous hashing gives the shard (it is about to take it);
    /// `None` when no host is live.
    pub fn route(&self, shard: u32) -> Option<HostRecord> {
        if let Some(owner) = self.owners.get(&self.keys.shard(shard))
            && let Ok(holder) = std::str::from_utf8(&owner.value)
            && let Some(record) = self.record(holder)
        {
            return Some(record);
        }
        let hosts = self.hosts();
        let ids: Vec<String> = hosts.iter().map(|host| host.id.clone()).collect();
        let owner = rendezvous_owner(shard, &ids)?;
        hosts.into_iter().find(|host| host.id == owner)
    }

    /// [`ShardMap::route`] for the shard of `routing_key` (a `runId`).
    pub fn route_key(&self, routing_key: &str) -> Option<HostRecord> {
        self.route(shard_of(routing_key, self.shards))
    }

    /// A live host, taking turns: for calls that belong to no run (reads from indexes,
    /// uploads).
    pub fn any_host(&self) -> Option<HostRecord> {
        let hosts = self.hosts();
        if hosts.is_empty() {
            return None;
        }
        let turn = self.turn.fetch_add(1, Ordering::Relaxed) % hosts.len();
        hosts.into_iter().nth(turn)
    }

    /// Reads the hosts and the shard keys again now: for a caller told by a host that it is
    /// not the owner, so the next route reflects the store as of this call at least.
    pub async fn refresh(&self) -> Result<(), StoreError> {
        self.hosts.load().await?;
        self.owners.load().await?;
        Ok(())
    }

    /// Every live host, by id.
    pub fn hosts(&self) -> Vec<HostRecord> {
        let (entries, _) = self.hosts.entries();
        entries
            .iter()
            .filter_map(|kv| parse_record(self.keys.parse_host(&kv.key)?, &kv.value))
            .collect()
    }

    /// The record of `host_id`, if it is live.
    fn record(&self, host_id: &str) -> Option<HostRecord> {
        let kv = self.hosts.get(&self.keys.host(host_id))?;
        parse_record(host_id.to_string(), &kv.value)
    }
}

/// A host key's record; the id is the key's (the value cannot claim another host's key).
fn parse_record(id: String, value: &[u8]) -> Option<HostRecord> {
    match serde_json::from_slice::<HostRecord>(value) {
        Ok(record) => Some(HostRecord { id, url: record.url }),
        Err(error) => {
            tracing::debug!(host = %id, %error, "a host key that is not a host record; ignoring it");
            None
        }
    }
}
