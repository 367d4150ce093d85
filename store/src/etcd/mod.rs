//! [`EtcdStore`]: the [`Store`] interface over an etcd 3.4 cluster, failing over between members.
//!
//! The store keeps one connection per endpoint and sends every request to one member, the
//! preferred one, until it fails; then it moves on to the next endpoint and stays there. A
//! request is sent again to another member only when that cannot apply it twice:
//!
//! - reads, lease keep-alives, lease grants (a lease granted twice leaves one unused lease that
//!   expires, holding no key) and watch (re)creations are repeated after any failure;
//! - writes (a transaction that puts or deletes, a lease revoke) are repeated only when the
//!   failure proves they were never applied: the connection could not be made, or the member
//!   answered before proposing them (it has no leader). Any other failure after sending is
//!   [`StoreError::Unavailable`], outcome unknown, as the [`Store`] trait allows.
//!
//! Each call may take [`EtcdOptions::request_timeout`] in all, retries included. Every request
//! requires a leader (etcd's `hasleader` metadata): a member cut off from its cluster answers
//! "no leader" at once instead of serving stale data or holding the request.
//!
//! Transactions are checked against etcd's request limits before they are sent, with the
//! same rules and errors as the embedded store ([`crate::limits`]).

mod convert;
mod failure;
mod maintenance;
mod watch;

pub use maintenance::MemberStatus;

use crate::metrics::{EtcdFailure, StoreMetrics};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client as etcd;
use tokio::time::Instant;

use self::convert::EtcdRange;
use self::failure::Failure;
use crate::error::StoreError;
use crate::limits::{Limits, validate};
use crate::store::Store;
use crate::types::{
    KeyRange, KeyValue, LeaseGrant, LeaseId, LeaseStatus, RangeRequest, RangeResult, Txn, TxnOp, TxnResult,
    WatchStream,
};

/// Largest answer the store accepts from etcd. gRPC's default of 4 MiB is too small for a range
/// of many large values; callers bound their ranges with `limit`.
const MAX_RESPONSE_BYTES: usize = 256 << 20;

/// The longest pause between two rounds of attempts over every member.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// How an [`EtcdStore`] connects and how long it waits.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// TLS to the members: required by `https://` endpoints, refused with `http://` ones.
    pub tls: Option<EtcdTls>,
    /// The etcd user to authenticate as, when the cluster has authentication enabled. The
    /// token etcd issues is refreshed when it expires.
    pub user: Option<EtcdUser>,
    /// How long making a connection to one member may take before the attempt fails (and the
    /// next member is tried). [`EtcdStore::connect`] also waits this long, at most, for the
    /// first member to answer.
    pub connect_timeout: Duration,
    /// How long one call may take in all, attempts on other members included. A linearizable
    /// request waits for a leader, so this should exceed the cluster's election timeout.
    pub request_timeout: Duration,
    /// HTTP/2 keep-alive pings on connections with open streams (watches, requests waiting),
    /// to notice a member that stopped answering without closing its connections. etcd answers
    /// pings more frequent than its `--grpc-keepalive-min-time` (5 s by default) by closing the
    /// connection.
    pub keep_alive_interval: Duration,
    /// How long a ping may go unanswered before the connection is given up.
    pub keep_alive_timeout: Duration,
    /// The cluster's `--max-txn-ops` (etcd's default 128).
    pub max_txn_ops: usize,
    /// The cluster's `--max-request-bytes` (etcd's default 1.5 MiB).
    pub max_request_bytes: usize,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            tls: None,
            user: None,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(10),
            keep_alive_interval: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(5),
            max_txn_ops: Limits::ETCD_DEFAULTS.max_txn_ops,
            max_request_bytes: Limits::ETCD_DEFAULTS.max_request_bytes,
        }
    }
}

/// TLS to etcd's members, from PEM files' contents.
#[derive(Clone, Default)]
pub struct EtcdTls {
    /// The certificate authority that signed the members' certificates (PEM). `None`: the
    /// platform's trusted roots.
    pub ca_pem: Option<Vec<u8>>,
    /// This client's certificate and private key (PEM), for members that require client
    /// certificates (`--client-cert-auth`).
    pub client_identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The name the members' certificates must carry, when it is not the endpoint's host.
    pub server_name: Option<String>,
}

impl fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca_pem", &self.ca_pem.as_ref().map(|_| "PEM"))
            .field(
                "client_identity",
                &self.client_identity.as_ref().map(|_| "PEM, redacted"),
            )
            .field("server_name", &self.server_name)
            .finish()
    }
}

/// An etcd user name and password.
#[derive(Clone)]
pub struct EtcdUser {
    pub name: String,
    pub password: String,
}

impl fmt::Debug for EtcdUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdUser")
            .field("name", &self.name)
            .field("password", &"redacted")
            .finish()
    }
}

impl EtcdTls {
    fn tonic_config(&self) -> etcd::TlsOptions {
        let mut config = etcd::TlsOptions::new();
        config = match &self.ca_pem {
            Some(pem) => config.ca_certificate(etcd::Certificate::from_pem(pem)),
            None => config.with_native_roots(),
        };
        if let Some((cert, key)) = &self.client_identity {
            config = config.identity(etcd::Identity::from_pem(cert, key));
        }
        if let Some(name) = &self.server_name {
            config = config.domain_name(name.clone());
        }
        config
    }
}

/// The [`Store`] over an etcd cluster. Cheap to clone: clones share the connections.
#[derive(Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

struct Inner {
    members: Vec<Member>,
    /// The index of the member requests go to first.
    preferred: AtomicUsize,
    options: EtcdOptions,
    limits: Limits,
}

/// One endpoint and the clients of its connection.
#[derive(Clone)]
struct Member {
    /// The member's place in [`Inner::members`].
    index: usize,
    /// Logging in as the configured user, when there is one.
    login: Option<Arc<MemberLogin>>,
    endpoint: String,
    kv: etcd::KvClient,
    lease: etcd::LeaseClient,
    watch: etcd::WatchClient,
    maintenance: etcd::MaintenanceClient,
}

/// Logging in to one member as the configured etcd user.
///
/// A connection is logged in on its first use, not when the store is made: a member that is
/// down at start is kept (the store turns to it when the others fail) and logs in once it
/// answers. After that etcd-client renews the token whenever etcd refuses it as expired.
struct MemberLogin {
    client: etcd::Client,
    user: EtcdUser,
    done: AtomicBool,
    /// One login at a time per member.
    turn: tokio::sync::Mutex<()>,
}

impl MemberLogin {
    /// Logs in unless that is done. A failure is the member's: nothing was sent for the caller.
    async fn ensure(&self) -> Result<(), String> {
        if self.done.load(Ordering::Acquire) {
            return Ok(());
        }
        let _turn = self.turn.lock().await;
        if self.done.load(Ordering::Acquire) {
            return Ok(());
        }
        let credentials = (self.user.name.clone(), self.user.password.clone());
        self.client
            .clone()
            .update_user(Some(credentials))
            .await
            .map_err(|error| format!("logging in as etcd user {:?}: {error}", self.user.name))?;
        self.done.store(true, Ordering::Release);
        Ok(())
    }
}

impl Member {
    /// Logs in to the member if the store has a user and it has not yet.
    async fn log_in(&self) -> Result<(), String> {
        match &self.login {
            Some(login) => login.ensure().await,
            None => Ok(()),
        }
    }
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let endpoints: Vec<&str> = self.inner.members.iter().map(|m| m.endpoint.as_str()).collect();
        f.debug_struct("EtcdStore")
            .field("endpoints", &endpoints)
            .field("preferred", &self.inner.preferred.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Whether a request may be sent again after a failure whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repeat {
    /// Reads, keep-alives, grants, watch creations: repeating them changes nothing.
    Safe,
    /// Writes: sent again only when the failure proves nothing was applied.
    OnlyIfNotApplied,
}

/// Why a call failed, before the caller names the lease an etcd "lease not found" was about.
#[derive(Debug)]
enum CallError {
    LeaseNotFound,
    Compacted,
    Store(StoreError),
}

impl CallError {
    /// The error of a call that names at most one lease (`None`: it names none).
    fn for_lease(self, lease: Option<LeaseId>) -> StoreError {
        match (self, lease) {
            (CallError::Store(error), _) => error,
            (CallError::LeaseNotFound, Some(lease)) => StoreError::LeaseNotFound(lease),
            (CallError::LeaseNotFound, None) => StoreError::InvalidRequest(
                "etcd answered \"lease not found\" to a request naming no lease".into(),
            ),
            (CallError::Compacted, _) => StoreError::InvalidRequest(
                "etcd answered \"revision compacted\" to a request naming no revision".into(),
            ),
        }
    }
}

/// Splits a `URL,URL,URL` list (as given to a `--etcd` flag) into endpoints.
pub fn parse_endpoint_list(list: &str) -> Result<Vec<String>, StoreError> {
    let endpoints: Vec<String> = list.split(',').map(|e| e.trim().to_string()).collect();
    if endpoints.iter().any(String::is_empty) {
        return Err(StoreError::Config(format!(
            "the etcd endpoint list {list:?} has an empty entry; write URL,URL,URL"
        )));
    }
    Ok(endpoints)
}

/// Checks one endpoint and spells it as a URL: `http://host:port`, `https://host:port` or
/// `host:port` (`https://` when `tls` is set, `http://` otherwise). An `https://` endpoint needs
/// TLS settings and an `http://` one refuses them, so a secured cluster is never reached in
/// plain text by mistake.
fn endpoint_url(endpoint: &str, tls: bool) -> Result<String, StoreError> {
    let bad = |why: &str| Err(StoreError::Config(format!("etcd endpoint {endpoint:?}: {why}")));
    let scheme = if tls { "https" } else { "http" };
    let authority = match endpoint.split_once("://") {
        Some(("http", _)) if tls => {
            return bad("TLS to etcd is configured, so endpoints must be https://host:port");
        }
        Some(("https", _)) if !tls => {
            return bad(
                "an https:// endpoint needs TLS settings (at least the CA that signed the \
                 members' certificates, or the platform's roots); or use http://",
            );
        }
        Some(("http" | "https", rest)) => rest,
        Some((scheme, _)) => return bad(&format!("unknown scheme {scheme:?}; use http://host:port")),
        None => endpoint,
    };
    let authority = authority.strip_suffix('/').unwrap_or(authority);
    if authority.contains('/') {
        return bad(&format!("an endpoint has no path; use {scheme}://host:port"));
    }
    let Some((host, port)) = authority.rsplit_once(':') else {
        return bad(&format!(
            "no port (etcd serves clients on 2379 by default); use {scheme}://host:port"
        ));
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return bad(&format!("no host; use {scheme}://host:port"));
    }
    if port.parse::<u16>().is_err() {
        return bad(&format!("{port:?} is not a port number"));
    }
    Ok(format!("{scheme}://{authority}"))
}

impl EtcdStore {
    /// Connects to the cluster behind `endpoints` (each `http://host:port` or `host:port`).
    ///
    /// Fails with [`StoreError::Config`] when the list is empty, an endpoint is malformed or
    /// listed twice, or the endpoints answer for different clusters; with
    /// [`StoreError::Unavailable`] when no endpoint answers within
    /// [`EtcdOptions::connect_timeout`]. Endpoints that do not answer yet are kept: the store
    /// turns to them when the others fail.
    pub async fn connect(endpoints: &[String], options: EtcdOptions) -> Result<EtcdStore, StoreError> {
        if endpoints.is_empty() {
            return Err(StoreError::Config("no etcd endpoint given".into()));
        }
        for (name, duration) in [
            ("connect timeout", options.connect_timeout),
            ("request timeout", options.request_timeout),
            ("keep-alive interval", options.keep_alive_interval),
            ("keep-alive timeout", options.keep_alive_timeout),
        ] {
            if duration.is_zero() {
                return Err(StoreError::Config(format!("the etcd {name} must be above zero")));
            }
        }
        let mut urls: Vec<String> = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let url = endpoint_url(endpoint.trim(), options.tls.is_some())?;
            if urls.contains(&url) {
                return Err(StoreError::Config(format!("etcd endpoint {url} is listed twice")));
            }
            urls.push(url);
        }
        let mut connect_options = etcd::ConnectOptions::new()
            .with_connect_timeout(options.connect_timeout)
            .with_keep_alive(options.keep_alive_interval, options.keep_alive_timeout)
            // etcd closes connections that ping while no stream is open (its keep-alive policy
            // does not permit pings without streams), so only busy connections ping.
            .with_keep_alive_while_idle(false)
            .with_require_leader(true)
            // Once logged in, a token etcd no longer accepts (it expired) is renewed and the
            // request sent again.
            .with_auto_token_refresh(true);
        if let Some(tls) = &options.tls {
            connect_options = connect_options.with_tls(tls.tonic_config());
        }
        let mut members = Vec::with_capacity(urls.len());
        for (index, url) in urls.into_iter().enumerate() {
            // Connections are made on first use; this only builds the client.
            let client = etcd::Client::connect([url.as_str()], Some(connect_options.clone()))
                .await
                .map_err(|error| StoreError::Config(format!("etcd endpoint {url}: {error}")))?;
            let login = options.user.clone().map(|user| {
                Arc::new(MemberLogin {
                    client: client.clone(),
                    user,
                    done: AtomicBool::new(false),
                    turn: tokio::sync::Mutex::new(()),
                })
            });
            members.push(Member {
                index,
                login,
                kv: client.kv_client().max_decoding_message_size(MAX_RESPONSE_BYTES),
                lease: client.lease_client(),
                watch: client
                    .watch_client()
                    .max_decoding_message_size(MAX_RESPONSE_BYTES),
                maintenance: client.maintenance_client(),
                endpoint: url,
            });
        }
        let preferred = first_answering_member(&members, options.connect_timeout).await?;
        Ok(EtcdStore {
            inner: Arc::new(Inner {
                members,
                preferred: AtomicUsize::new(preferred),
                limits: Limits {
                    max_txn_ops: options.max_txn_ops,
                    max_request_bytes: options.max_request_bytes,
                },
                options,
            }),
        })
    }

    /// The endpoints, as URLs, in the order given.
    pub fn endpoints(&self) -> Vec<String> {
        self.inner.members.iter().map(|m| m.endpoint.clone()).collect()
    }

    /// The endpoint requests go to first now.
    pub fn preferred_endpoint(&self) -> String {
        self.inner.members[self.inner.preferred.load(Ordering::Relaxed)]
            .endpoint
            .clone()
    }
}

/// Asks every member for its status at once; the first in list order that answers becomes the
/// preferred member. Members answering for different clusters are a configuration error.
async fn first_answering_member(members: &[Member], connect_timeout: Duration) -> Result<usize, StoreError> {
    let mut asks = tokio::task::JoinSet::new();
    for (index, member) in members.iter().enumerate() {
        let member = member.clone();
        asks.spawn(async move {
            let ask = async {
                member.log_in().await?;
                let status = member
                    .maintenance
                    .clone()
                    .status()
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(status.header().map_or(0, |header| header.cluster_id()))
            };
            let answer = match tokio::time::timeout(connect_timeout, ask).await {
                Ok(answer) => answer,
                Err(_) => Err(format!("no answer within {connect_timeout:?}")),
            };
            (index, answer)
        });
    }
    let mut answers: Vec<(usize, Result<u64, String>)> = asks.join_all().await;
    answers.sort_by_key(|(index, _)| *index);
    let clusters: Vec<(usize, u64)> = answers
        .iter()
        .filter_map(|(index, answer)| answer.as_ref().ok().map(|cluster| (*index, *cluster)))
        .collect();
    let Some(&(first, cluster)) = clusters.first() else {
        let failures: Vec<String> = answers
            .iter()
            .filter_map(|(index, answer)| {
                let failure = answer.as_ref().err()?;
                Some(format!("{}: {failure}", members[*index].endpoint))
            })
            .collect();
        return Err(StoreError::Unavailable {
            context: "connecting to etcd".into(),
            reason: format!("no endpoint answered ({})", failures.join("; ")),
        });
    };
    if let Some(&(other, other_cluster)) = clusters.iter().find(|(_, c)| *c != cluster) {
        return Err(StoreError::Config(format!(
            "etcd endpoints {} and {} belong to different clusters ({cluster:x} and {other_cluster:x})",
            members[first].endpoint, members[other].endpoint
        )));
    }
    Ok(first)
}

impl Inner {
    /// Runs `attempt` on the preferred member, and on the next ones as [`Repeat`] allows, until it
    /// succeeds, fails for good, or the request timeout is spent. `context` says what the call
    /// was doing, for errors.
    async fn call<T, F, Fut>(&self, context: &str, repeat: Repeat, mut attempt: F) -> Result<T, CallError>
    where
        F: FnMut(Member) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let timeout = self.options.request_timeout;
        let deadline = Instant::now() + timeout;
        let mut last_failures: Vec<Option<String>> = vec![None; self.members.len()];
        let mut backoff = Duration::from_millis(20);
        let mut attempts = 0;
        loop {
            let index = self.preferred.load(Ordering::Relaxed);
            let member = &self.members[index];
            let outcome = tokio::time::timeout_at(deadline, async {
                // Not logged in: nothing was sent, so any request may go to the next member.
                member.log_in().await.map_err(Failure::NotSent)?;
                attempt(member.clone()).await
            })
            .await;
            attempts += 1;
            let metrics = StoreMetrics::global();
            let reason = match outcome {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(Failure::Final(error))) => {
                    metrics.record_etcd_failure(EtcdFailure::Refused);
                    return Err(CallError::Store(error));
                }
                Ok(Err(Failure::LeaseNotFound)) => return Err(CallError::LeaseNotFound),
                Ok(Err(Failure::Compacted)) => return Err(CallError::Compacted),
                Ok(Err(Failure::NotSent(reason))) => {
                    metrics.record_etcd_failure(EtcdFailure::Unreachable);
                    reason
                }
                Ok(Err(Failure::Unknown(reason))) if repeat == Repeat::Safe => {
                    metrics.record_etcd_failure(EtcdFailure::Unknown);
                    reason
                }
                Ok(Err(Failure::Unknown(reason))) => {
                    metrics.record_etcd_failure(EtcdFailure::Unknown);
                    self.move_on_from(index);
                    return Err(CallError::Store(StoreError::Unavailable {
                        context: context.into(),
                        reason: format!(
                            "{}: {reason}; the write may or may not have been applied",
                            member.endpoint
                        ),
                    }));
                }
                Err(_) => {
                    metrics.record_etcd_failure(EtcdFailure::Timeout);
                    let reason = format!("{}: no answer within {timeout:?}", member.endpoint);
                    self.move_on_from(index);
                    let reason = match repeat {
                        Repeat::Safe => reason,
                        Repeat::OnlyIfNotApplied => {
                            format!("{reason}; the write may or may not have been applied")
                        }
                    };
                    return Err(CallError::Store(StoreError::Unavailable {
                        context: context.into(),
                        reason,
                    }));
                }
            };
            tracing::debug!(endpoint = %member.endpoint, %reason, "etcd attempt failed; trying the next member");
            last_failures[index] = Some(reason);
            self.move_on_from(index);
            if attempts % self.members.len() == 0 {
                let pause = backoff.min(deadline.saturating_duration_since(Instant::now()));
                tokio::time::sleep(pause).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            if Instant::now() >= deadline {
                let failures: Vec<String> = self
                    .members
                    .iter()
                    .zip(&last_failures)
                    .filter_map(|(member, failure)| {
                        failure.as_ref().map(|f| format!("{}: {f}", member.endpoint))
                    })
                    .collect();
                return Err(CallError::Store(StoreError::Unavailable {
                    context: context.into(),
                    reason: format!("no member served it within {timeout:?} ({})", failures.join("; ")),
                }));
            }
            metrics.record_etcd_retry();
        }
    }

    /// Makes the member after `failed` the preferred one, unless another call already moved on.
    fn move_on_from(&self, failed: usize) {
        let next = (failed + 1) % self.members.len();
        let _ = self
            .preferred
            .compare_exchange(failed, next, Ordering::Relaxed, Ordering::Relaxed);
    }

    async fn range(&self, key: Vec<u8>, options: etcd::GetOptions) -> Result<etcd::GetResponse, StoreError> {
        self.call("reading from etcd", Repeat::Safe, |mut member| {
            let (key, options) = (key.clone(), options.clone());
            async move { member.kv.get(key, Some(options)).await.map_err(failure::classify) }
        })
        .await
        .map_err(|error| error.for_lease(None))
    }

    /// Finds which of `leases` etcd does not know, after it refused a transaction that named
    /// them with "lease not found".
    async fn missing_lease(&self, leases: &[LeaseId]) -> Result<LeaseId, StoreError> {
        for &lease in leases {
            if self.lease_time_to_live(lease).await?.is_none() {
                return Ok(lease);
            }
        }
        // Every lease exists again, which etcd cannot do: a lease id is never reused. Report the
        // first, which the refusal was about if there was only one.
        Ok(leases[0])
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<LeaseStatus>, StoreError> {
        let response = self
            .call(
                "reading a lease from etcd",
                Repeat::Safe,
                |mut member| async move {
                    member
                        .lease
                        .time_to_live(lease.0, Some(etcd::LeaseTimeToLiveOptions::new().with_keys()))
                        .await
                        .map_err(failure::classify)
                },
            )
            .await
            .map_err(|error| error.for_lease(Some(lease)))?;
        if response.ttl() < 0 {
            return Ok(None);
        }
        let mut keys = response.keys().to_vec();
        keys.sort();
        Ok(Some(LeaseStatus {
            id: lease,
            granted_ttl: response.granted_ttl(),
            // etcd rounds the seconds left down; a live lease has more than none.
            remaining_ttl: response.ttl().max(1),
            keys,
        }))
    }
}

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &[u8]) -> Result<(Option<KeyValue>, i64), StoreError> {
        let response = self.inner.range(key.to_vec(), etcd::GetOptions::new()).await?;
        let revision = response.header().map_or(0, |header| header.revision());
        Ok((response.kvs().first().map(convert::key_value), revision))
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResult, StoreError> {
        let (key, options) = EtcdRange::new(&request.range).get_options(request.limit);
        let response = self.inner.range(key, options).await?;
        Ok(convert::range_result(&response, 0))
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        validate(&txn, self.inner.limits)?;
        let request = etcd::Txn::new()
            .when(txn.compares.iter().map(convert::compare).collect::<Vec<_>>())
            .and_then(txn.then.iter().map(convert::txn_op).collect::<Vec<_>>())
            .or_else(txn.otherwise.iter().map(convert::txn_op).collect::<Vec<_>>());
        let repeat = if txn.writes() {
            Repeat::OnlyIfNotApplied
        } else {
            Repeat::Safe
        };
        let answer = self
            .inner
            .call("running a transaction on etcd", repeat, |mut member| {
                let request = request.clone();
                async move { member.kv.txn(request).await.map_err(failure::classify) }
            })
            .await;
        let response = match answer {
            Ok(response) => response,
            Err(CallError::LeaseNotFound) => {
                let leases: Vec<LeaseId> = txn
                    .then
                    .iter()
                    .chain(&txn.otherwise)
                    .filter_map(|op| match op {
                        TxnOp::Put { lease, .. } => *lease,
                        _ => None,
                    })
                    .collect();
                if leases.is_empty() {
                    return Err(CallError::LeaseNotFound.for_lease(None));
                }
                return Err(StoreError::LeaseNotFound(
                    self.inner.missing_lease(&leases).await?,
                ));
            }
            Err(error) => return Err(error.for_lease(None)),
        };
        let revision = response.header().map_or(0, |header| header.revision());
        let results = response
            .op_responses()
            .iter()
            .map(|op| convert::op_result(op, revision))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| StoreError::Unavailable {
                context: "running a transaction on etcd".into(),
                reason: "etcd answered with a nested transaction's result the store did not ask for".into(),
            })?;
        Ok(TxnResult {
            succeeded: response.succeeded(),
            revision,
            results,
        })
    }

    async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrant, StoreError> {
        let response = self
            .inner
            .call(
                "granting a lease on etcd",
                Repeat::Safe,
                |mut member| async move { member.lease.grant(ttl, None).await.map_err(failure::classify) },
            )
            .await
            .map_err(|error| error.for_lease(None))?;
        if !response.error().is_empty() {
            return Err(StoreError::InvalidRequest(response.error().to_string()));
        }
        Ok(LeaseGrant {
            id: LeaseId(response.id()),
            ttl: response.ttl(),
        })
    }

    async fn lease_keep_alive(&self, lease: LeaseId) -> Result<i64, StoreError> {
        let ttl = self
            .inner
            .call(
                "keeping a lease alive on etcd",
                Repeat::Safe,
                |mut member| async move {
                    // etcd-client sends a first keep-alive and reads its answer itself, failing
                    // with "lease not found" when it has a TTL <= 0, but keeps the TTL to itself:
                    // a second round on the same stream reads it.
                    let (mut keeper, mut answers) = member
                        .lease
                        .keep_alive(lease.0)
                        .await
                        .map_err(failure::classify)?;
                    keeper.keep_alive().await.map_err(failure::classify)?;
                    match answers.message().await.map_err(failure::classify)? {
                        Some(answer) => Ok(answer.ttl()),
                        None => Err(Failure::Unknown("etcd closed the keep-alive stream".into())),
                    }
                },
            )
            .await;
        match ttl {
            Err(error) => Err(error.for_lease(Some(lease))),
            Ok(ttl) if ttl <= 0 => Err(StoreError::LeaseNotFound(lease)),
            Ok(ttl) => Ok(ttl),
        }
    }

    async fn lease_revoke(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.inner
            .call(
                "revoking a lease on etcd",
                Repeat::OnlyIfNotApplied,
                |mut member| async move { member.lease.revoke(lease.0).await.map_err(failure::classify) },
            )
            .await
            .map_err(|error| error.for_lease(Some(lease)))?;
        Ok(())
    }

    async fn lease_time_to_live(&self, lease: LeaseId) -> Result<Option<LeaseStatus>, StoreError> {
        self.inner.lease_time_to_live(lease).await
    }

    async fn watch(&self, range: KeyRange, start_revision: Option<i64>) -> Result<WatchStream, StoreError> {
        watch::open(self.inner.clone(), EtcdRange::new(&range), start_revision).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked_and_spelled_as_urls() {
        assert_eq!(
            endpoint_url("127.0.0.1:2379", false).unwrap(),
            "http://127.0.0.1:2379"
        );
        assert_eq!(
            endpoint_url("http://etcd-0:2379/", false).unwrap(),
            "http://etcd-0:2379"
        );
        assert_eq!(
            endpoint_url("http://[::1]:2379", false).unwrap(),
            "http://[::1]:2379"
        );
        assert_eq!(endpoint_url("etcd-0:2379", true).unwrap(), "https://etcd-0:2379");
        assert_eq!(
            endpoint_url("https://etcd-0:2379", true).unwrap(),
            "https://etcd-0:2379"
        );
        for bad in [
            "etcd-0",
            "http://etcd-0",
            "https://etcd-0:2379",
            "ftp://etcd-0:2379",
            "http://etcd-0:port",
            "http://:2379",
            "http://etcd-0:2379/v3",
            "http://etcd-0:99999",
        ] {
            assert!(
                matches!(endpoint_url(bad, false), Err(StoreError::Config(_))),
                "{bad}"
            );
        }
        // With TLS configured, a plain-text endpoint is a mistake, not a fallback.
        for bad in ["http://etcd-0:2379", "https://etcd-0", "https://etcd-0:2379/v3"] {
            assert!(
                matches!(endpoint_url(bad, true), Err(StoreError::Config(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn endpoint_lists_split_on_commas() {
        assert_eq!(
            parse_endpoint_list("http://a:1, http://b:2,c:3").unwrap(),
            vec!["http://a:1", "http://b:2", "c:3"]
        );
        assert!(matches!(
            parse_endpoint_list("a:1,,b:2"),
            Err(StoreError::Config(_))
        ));
        assert!(matches!(parse_endpoint_list(""), Err(StoreError::Config(_))));
    }

    #[tokio::test]
    async fn connect_refuses_bad_configuration_without_contacting_anyone() {
        let connect = |endpoints: &[&str], options: EtcdOptions| {
            let endpoints: Vec<String> = endpoints.iter().map(|e| e.to_string()).collect();
            async move { EtcdStore::connect(&endpoints, options).await }
        };
        assert!(matches!(
            connect(&[], EtcdOptions::default()).await,
            Err(StoreError::Config(_))
        ));
        assert!(matches!(
            connect(&["127.0.0.1:2379", "http://127.0.0.1:2379"], EtcdOptions::default()).await,
            Err(StoreError::Config(message)) if message.contains("twice")
        ));
        let no_time = EtcdOptions {
            request_timeout: Duration::ZERO,
            ..EtcdOptions::default()
        };
        assert!(matches!(
            connect(&["127.0.0.1:2379"], no_time).await,
            Err(StoreError::Config(_))
        ));
    }
}
