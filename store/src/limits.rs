//! etcd's request rules, checked before a transaction is applied (embedded) or sent (etcd).

use crate::error::StoreError;
use crate::types::{CompareTarget, RangeRequest, Txn, TxnOp};

/// Limits etcd enforces on requests, kept so that code that works here works on etcd.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_txn_ops: usize,
    pub max_request_bytes: usize,
}

impl Limits {
    /// etcd's defaults: `--max-txn-ops` 128 and `--max-request-bytes` 1.5 MiB.
    pub(crate) const ETCD_DEFAULTS: Limits = Limits {
        max_txn_ops: 128,
        max_request_bytes: 1_572_864,
    };
}

/// etcd's request rules: operation count and request size ([`StoreError::TooLarge`]), non-empty
/// keys, and no key written twice (or put and deleted) in one branch.
pub(crate) fn validate(txn: &Txn, limits: Limits) -> Result<(), StoreError> {
    let invalid = |why: String| Err(StoreError::InvalidRequest(why));
    for (name, len) in [
        ("compares", txn.compares.len()),
        ("then operations", txn.then.len()),
        ("else operations", txn.otherwise.len()),
    ] {
        if len > limits.max_txn_ops {
            return Err(StoreError::TooLarge(format!(
                "{len} {name}, more than the limit of {}",
                limits.max_txn_ops
            )));
        }
    }
    let size = request_bytes(txn);
    for branch in [&txn.then, &txn.otherwise] {
        let mut puts: Vec<&[u8]> = Vec::new();
        for op in branch.iter() {
            if let TxnOp::Put { key, .. } = op {
                if key.is_empty() {
                    return invalid("empty key".into());
                }
                puts.push(key);
            }
        }
        puts.sort_unstable();
        if puts.windows(2).any(|w| w[0] == w[1]) {
            return invalid("the same key is put twice in one transaction".into());
        }
        for op in branch.iter() {
            if let TxnOp::Delete { range } = op
                && puts.iter().any(|k| range.contains(k))
            {
                return invalid("a key is both put and deleted in one transaction".into());
            }
        }
    }
    if size > limits.max_request_bytes {
        return Err(StoreError::TooLarge(format!(
            "request of {size} bytes, more than the limit of {}",
            limits.max_request_bytes
        )));
    }
    Ok(())
}

/// The bytes of keys and values a transaction carries: what etcd's request size limit counts
/// (near enough; the envelope is small).
pub(crate) fn request_bytes(txn: &Txn) -> usize {
    let mut size = 0;
    for compare in &txn.compares {
        size += compare.key.len();
        if let CompareTarget::Value(v) = &compare.target {
            size += v.len();
        }
    }
    for op in txn.then.iter().chain(&txn.otherwise) {
        size += match op {
            TxnOp::Put { key, value, .. } => key.len() + value.len(),
            TxnOp::Delete { range } | TxnOp::Range(RangeRequest { range, .. }) => {
                range.start.len() + range.end.as_ref().map_or(0, Vec::len)
            }
        };
    }
    size
}
