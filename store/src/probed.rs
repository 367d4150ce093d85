//! A store that tells a probe of each read and transaction before passing it on: how tests count
//! a component's store calls, or hold them back, without writing a whole store of their own.

use crate::error::StoreError;
use crate::store::Store;
use crate::types::{
    KeyRange, KeyValue, LeaseGrant, LeaseId, LeaseStatus, RangeRequest, RangeResult, Txn, TxnResult,
    WatchStream,
};
use async_trait::async_trait;
use std::sync::Arc;

/// What is told of each call, before it goes on; each does nothing unless a probe says otherwise.
#[async_trait]
pub trait Probe: Send + Sync + std::fmt::Debug {
    async fn get(&self, _key: &[u8]) {}
    async fn range(&self, _request: &RangeRequest) {}
    async fn txn(&self, _txn: &Txn) {}
    /// An error to answer `txn` with instead of passing it on (nothing is written); `None`, the
    /// default, passes it on.
    async fn refuse_txn(&self, _txn: &Txn) -> Option<StoreError> {
        None
    }
    /// The stream a watch of `range` gives: `events`, unless a probe holds or replaces them.
    async fn watch(&self, _range: &KeyRange, events: WatchStream) -> WatchStream {
        events
    }
}

/// `inner`, with `probe` told of every read and transaction first, and handed every watch's
/// stream. Leases go straight through.
#[derive(Debug)]
pub struct Probed<P> {
    pub inner: Arc<dyn Store>,
    pub probe: P,
}

impl<P: Probe> Probed<P> {
    pub fn new(inner: Arc<dyn Store>, probe: P) -> Probed<P> {
        Probed { inner, probe }
    }
}

#[async_trait]
impl<P: Probe> Store for Probed<P> {
    async fn get(&self, key: &[u8]) -> Result<(Option<KeyValue>, i64), StoreError> {
        self.probe.get(key).await;
        self.inner.get(key).await
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResult, StoreError> {
        self.probe.range(&request).await;
        self.inner.range(request).await
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        self.probe.txn(&txn).await;
        if let Some(error) = self.probe.refuse_txn(&txn).await {
            return Err(error);
        }
        self.inner.txn(txn).await
    }

    async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrant, StoreError> {
        self.inner.lease_grant(ttl).await
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, StoreError> {
        self.inner.lease_keep_alive(lease).await
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.inner.lease_revoke(lease).await
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<LeaseStatus>, StoreError> {
        self.inner.lease_time_to_live(lease).await
    }

    async fn watch(&self, range: KeyRange, start_revision: Option<i64>) -> Result<WatchStream, StoreError> {
        let events = self.inner.watch(range.clone(), start_revision).await?;
        Ok(self.probe.watch(&range, events).await)
    }
}
