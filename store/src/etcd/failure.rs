//! What an etcd-client error means: etcd said no, the request never left, or its fate is unknown.

use etcd_client as etcd;
use tonic::Code;

use crate::error::StoreError;

/// One failed attempt of a call, classified by what it tells about the request.
#[derive(Debug)]
pub(super) enum Failure {
    /// etcd answered, and the answer is final: nothing happened, and asking again (anywhere)
    /// gets the same answer. The refusals of the protocol (`TooLarge`, `InvalidRequest`), and
    /// the failures no retry mends (a full storage quota, refused credentials).
    Final(StoreError),
    /// etcd answered that the lease named in the request does not exist. The caller knows which
    /// lease that is.
    LeaseNotFound,
    /// etcd answered that the revision asked for is compacted away.
    Compacted,
    /// The request did not reach a member that could serve it (the connection could not be made,
    /// the member has no leader, or is overloaded): nothing happened, and another member may
    /// serve it.
    NotSent(String),
    /// The request may have been applied, or not (the connection broke after sending, the
    /// member timed out waiting for the cluster). Only requests that are safe to repeat are sent
    /// again.
    Unknown(String),
}

/// What hyper-util's connector says when a connection could not be made (the messages of its
/// `ConnectError`, which tonic turns into an `Unavailable` status carrying only the message).
/// Nothing was sent on a connection that never existed.
const CONNECT_FAILURES: &[&str] = &[
    "tcp connect error",
    "tcp open error",
    "dns error",
    "tcp bind local error",
    "tcp set_nonblocking error",
];

/// etcd's answers (its `rpctypes` errors) that are given before a request is proposed to the
/// cluster, so nothing happened.
const NOT_PROPOSED: &[&str] = &[
    // The member has no leader and the request required one (the store always requires one).
    "etcdserver: no leader",
    // Too many proposals are pending on the member.
    "etcdserver: too many requests",
    // The member would lose the cluster's quorum by serving the request.
    "etcdserver: unhealthy cluster",
    // The member does not support the request yet (during an upgrade).
    "etcdserver: not capable",
];

/// What etcd answers (`InvalidArgument`) to a request that names no user when the cluster has
/// authentication on.
const USER_MISSING: &str = "etcdserver: user name is empty";

/// Why etcd refuses a request for want of a user or of the user's rights.
const AUTHENTICATION_REFUSED: &str = "etcd refused the request: the cluster has authentication on and the \
     store has no user (cluster.etcd_user), or that user's role does not grant these keys";

pub(super) fn classify(error: etcd::Error) -> Failure {
    match error {
        etcd::Error::GRpcStatus(status) => classify_status(status.code(), status.message()),
        // etcd-client's own reading of a keep-alive answer whose TTL is 0 or less.
        etcd::Error::LeaseKeepAliveError(message) if message.contains("lease not found") => {
            Failure::LeaseNotFound
        }
        etcd::Error::InvalidArgs(message) => Failure::Final(StoreError::InvalidRequest(message)),
        etcd::Error::InvalidUri(error) => Failure::Final(StoreError::Config(error.to_string())),
        other => Failure::Unknown(other.to_string()),
    }
}

fn classify_status(code: Code, message: &str) -> Failure {
    let failure = |what: &str| format!("{what}: {message}");
    match code {
        Code::Unavailable if CONNECT_FAILURES.iter().any(|m| message.starts_with(m)) => {
            Failure::NotSent(failure("cannot connect"))
        }
        Code::Unavailable | Code::ResourceExhausted if NOT_PROPOSED.contains(&message) => {
            Failure::NotSent(message.to_string())
        }
        Code::NotFound if message == "etcdserver: requested lease not found" => Failure::LeaseNotFound,
        Code::OutOfRange if message == "etcdserver: mvcc: required revision has been compacted" => {
            Failure::Compacted
        }
        // etcd's answer to a request without a user on a cluster with authentication on: a
        // missing setting, not a malformed request, whatever its gRPC code says.
        Code::InvalidArgument if message == USER_MISSING => {
            Failure::Final(StoreError::Config(failure(AUTHENTICATION_REFUSED)))
        }
        Code::InvalidArgument
            if message == "etcdserver: too many operations in txn request"
                || message == "etcdserver: request is too large" =>
        {
            Failure::Final(StoreError::TooLarge(message.to_string()))
        }
        Code::InvalidArgument | Code::OutOfRange | Code::FailedPrecondition
            if message.starts_with("etcdserver: ") =>
        {
            Failure::Final(StoreError::InvalidRequest(message.to_string()))
        }
        Code::ResourceExhausted if message == "etcdserver: mvcc: database space exceeded" => {
            Failure::Final(StoreError::Unavailable {
                context: "writing to etcd".into(),
                reason: format!(
                    "{message}: nothing was written; the cluster's storage quota is full until it \
                     is compacted and defragmented"
                ),
            })
        }
        Code::Unauthenticated | Code::PermissionDenied => {
            Failure::Final(StoreError::Config(failure(AUTHENTICATION_REFUSED)))
        }
        _ => Failure::Unknown(format!("{code:?}: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_never_made_sent_nothing() {
        assert!(matches!(
            classify_status(Code::Unavailable, "tcp connect error"),
            Failure::NotSent(_)
        ));
        assert!(matches!(
            classify_status(Code::Unavailable, "etcdserver: no leader"),
            Failure::NotSent(_)
        ));
    }

    #[test]
    fn a_timeout_or_a_broken_connection_leaves_the_outcome_unknown() {
        assert!(matches!(
            classify_status(Code::Unavailable, "etcdserver: request timed out"),
            Failure::Unknown(_)
        ));
        assert!(matches!(
            classify_status(Code::Unavailable, "etcdserver: leader changed"),
            Failure::Unknown(_)
        ));
        assert!(matches!(
            classify_status(Code::Unknown, "h2 protocol error: connection reset"),
            Failure::Unknown(_)
        ));
    }

    #[test]
    fn etcds_refusals_keep_their_meaning() {
        assert!(matches!(
            classify_status(
                Code::InvalidArgument,
                "etcdserver: too many operations in txn request"
            ),
            Failure::Final(StoreError::TooLarge(_))
        ));
        assert!(matches!(
            classify_status(
                Code::InvalidArgument,
                "etcdserver: duplicate key given in txn request"
            ),
            Failure::Final(StoreError::InvalidRequest(_))
        ));
        assert!(matches!(
            classify_status(Code::NotFound, "etcdserver: requested lease not found"),
            Failure::LeaseNotFound
        ));
        assert!(matches!(
            classify_status(Code::OutOfRange, "etcdserver: too large lease TTL"),
            Failure::Final(StoreError::InvalidRequest(_))
        ));
    }

    #[test]
    fn a_request_without_the_user_authentication_needs_is_a_configuration_error() {
        for (code, message) in [
            (Code::InvalidArgument, "etcdserver: user name is empty"),
            (Code::PermissionDenied, "etcdserver: permission denied"),
            (Code::Unauthenticated, "etcdserver: invalid auth token"),
        ] {
            match classify_status(code, message) {
                Failure::Final(StoreError::Config(reason)) => {
                    assert!(
                        reason.contains("authentication on") && reason.contains(message),
                        "{reason}"
                    )
                }
                other => panic!("{message}: {other:?}"),
            }
        }
    }
}
