//! Notification delivery: every outbox entry is POSTed as JSON to each webhook of its
//! organization, signed with HMAC-SHA256 of the body under the webhook's secret, until every
//! webhook answered 2xx; then the entry is deleted. Failures are retried with exponential
//! backoff; after `max_attempts` the entry becomes a dead letter operators can list, discard, or
//! put back into the outbox, where it is a new entry again (first attempt). Delivery is at
//! least once: a crash between the POST and the delete sends it again, and receivers
//! deduplicate on the notification's `id`. Test-mode runs never deliver.

use crate::SchedulerConfig;
use crate::SchedulerParts;
use crate::metrics::SchedulerMetrics;
use agentprocess_ids::OrgId;
use agentprocess_org::{Webhook, webhooks as webhooks_of};
use agentprocess_service::error_chain;
use agentprocess_store::{RangeRequest, StoreError, Txn, TxnOp};
use async_trait::async_trait;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The header carrying `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "x-agentprocess-signature";
/// The header carrying the notification id, for deduplication.
pub const DELIVERY_HEADER: &str = "x-agentprocess-delivery";
/// How many outbox entries one look at the outbox takes.
const OUTBOX_PAGE: usize = 256;
/// Most delivered entries deleted by one transaction: etcd's default `--max-txn-ops`.
const DELETES_PER_TRANSACTION: usize = 128;

/// Why one delivery failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct DeliveryError(pub String);

/// Sends one signed POST. [`HttpTransport`] in production; tests may count calls.
#[async_trait]
pub trait Transport: Send + Sync + std::fmt::Debug {
    async fn post(&self, url: &str, headers: &[(&str, String)], body: Vec<u8>) -> Result<(), DeliveryError>;
}

/// HTTP(S) delivery with `reqwest` over rustls.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: reqwest::Client,
}

impl HttpTransport {
    pub fn new(timeout: Duration) -> Self {
        // reqwest is built without a bundled crypto provider; install ring's for the process
        // (a no-op when another part of the binary installed one first).
        let _ = rustls::crypto::ring::default_provider().install_default();
        HttpTransport {
            client: reqwest::Client::builder()
                .timeout(timeout)
                .build()
                .expect("the HTTP client builds"),
        }
    }
}

#[async_trait]
impl Transport for HttpTransport {
    async fn post(&self, url: &str, headers: &[(&str, String)], body: Vec<u8>) -> Result<(), DeliveryError> {
        let mut request = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request.send().await.map_err(|e| DeliveryError(error_chain(&e)))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(DeliveryError(format!("HTTP {}", response.status())))
        }
    }
}

/// `sha256=<hex>` of the HMAC-SHA256 of `body` under `secret`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Delivery state of an entry that failed, kept in memory (a restart starts it again).
#[derive(Debug)]
struct Retry {
    attempts: u32,
    not_before: Instant,
}

/// What a log line says about the notification an outbox entry holds.
struct Delivery<'a> {
    organization: &'a str,
    id: &'a str,
    kind: &'a str,
}

impl<'a> Delivery<'a> {
    fn of(entry: &'a Value) -> Self {
        Delivery {
            organization: entry["organization"].as_str().unwrap_or_default(),
            id: entry["id"].as_str().unwrap_or_default(),
            kind: entry["type"].as_str().unwrap_or_default(),
        }
    }
}

enum Delivered {
    /// Every webhook took it (or there was nothing to deliver): the entry can go.
    Done,
    Failed(String),
}

/// The webhooks of each organization with entries in one look at the outbox, read once for all
/// of them. Read after the outbox, so a webhook registered before an entry was written is there.
type WebhooksByOrganization = HashMap<OrgId, Result<Arc<Vec<(String, Webhook)>>, StoreError>>;

/// What the delivery loop holds between looks at the outbox.
#[derive(Default)]
struct OutboxState {
    /// Entries waiting for their next attempt after a failure.
    retries: HashMap<Vec<u8>, Retry>,
    /// Entries being delivered now.
    in_flight: HashSet<Vec<u8>>,
    /// Entries every webhook took, to delete at the next look (all in one transaction).
    delivered: HashSet<Vec<u8>>,
    /// After a failed delete, when deleting is tried again.
    deletes_not_before: Option<Instant>,
}

impl OutboxState {
    /// Whether delivered entries wait to be deleted, and may be now.
    fn deletes_due(&self, now: Instant) -> bool {
        !self.delivered.is_empty() && self.deletes_not_before.is_none_or(|at| at <= now)
    }
}

pub(crate) async fn run(
    parts: Arc<SchedulerParts>,
    transport: Arc<dyn Transport>,
    config: SchedulerConfig,
    mut stopped: watch::Receiver<bool>,
) {
    let mut state = OutboxState::default();
    let mut deliveries: JoinSet<(Vec<u8>, Value, Result<Delivered, StoreError>)> = JoinSet::new();
    // Whether the outbox may hold entries not yet seen: a hint, the poll or a retry came due.
    let mut look = true;
    let mut last_look: Option<Instant> = None;
    loop {
        // Each pass looks at the stop signal first: the select below may find other branches
        // ready as well, pass after pass.
        if stopped.has_changed().unwrap_or(true) {
            deliveries.shutdown().await;
            return;
        }
        // Looks are at least `outbox_gather` apart: under load one look, one read of each
        // organization's webhooks and one delete serve every entry written in between.
        let next_look = last_look.map_or_else(Instant::now, |at| at + config.outbox_gather);
        let now = Instant::now();
        if (look || state.deletes_due(now)) && now >= next_look {
            last_look = Some(now);
            if state.deletes_due(now) {
                delete_delivered(&parts, &config, &mut state).await;
            }
            if std::mem::take(&mut look) {
                look_at_outbox(&parts, &transport, &config, &mut state, &mut deliveries).await;
            }
            continue;
        }
        let next_retry = state.retries.values().map(|r| r.not_before).min();
        let poll = last_look.unwrap_or(now) + config.outbox_poll;
        let mut wake = next_retry.map_or(poll, |r| r.min(poll));
        if look {
            wake = wake.min(next_look);
        }
        if !state.delivered.is_empty() {
            wake = wake.min(next_look.max(state.deletes_not_before.unwrap_or(next_look)));
        }
        tokio::select! {
            _ = stopped.changed() => {
                deliveries.shutdown().await;
                return;
            }
            _ = tokio::time::sleep_until(wake) => {
                if next_retry.is_some_and(|r| r <= Instant::now()) || poll <= Instant::now() {
                    look = true;
                }
            }
            _ = parts.hints.next_outbox_hint() => look = true,
            Some(done) = deliveries.join_next(), if !deliveries.is_empty() => {
                let Ok((raw_key, entry, outcome)) = done else { continue };
                settle(&parts, &config, &mut state, raw_key, &entry, outcome).await;
            }
        }
    }
}

/// Deletes the entries every webhook took, in as few transactions as etcd allows. What cannot
/// be deleted now is tried again after `first_backoff` (and not delivered again meanwhile).
async fn delete_delivered(parts: &SchedulerParts, config: &SchedulerConfig, state: &mut OutboxState) {
    let keys: Vec<Vec<u8>> = state.delivered.iter().cloned().collect();
    for chunk in keys.chunks(DELETES_PER_TRANSACTION) {
        let deletes = chunk.iter().map(|key| TxnOp::delete(key.clone()));
        if let Err(error) = parts.store.txn(Txn::new().and_then(deletes)).await {
            tracing::warn!(
                %error, entries = state.delivered.len(),
                "cannot delete delivered notifications from the outbox; trying again"
            );
            state.deletes_not_before = Some(Instant::now() + config.first_backoff);
            return;
        }
        for key in chunk {
            state.delivered.remove(key);
        }
    }
    state.deletes_not_before = None;
}

/// Reads a page of the outbox and starts delivering every entry neither delivered, in flight
/// nor waiting for a retry.
async fn look_at_outbox(
    parts: &Arc<SchedulerParts>,
    transport: &Arc<dyn Transport>,
    config: &SchedulerConfig,
    state: &mut OutboxState,
    deliveries: &mut JoinSet<(Vec<u8>, Value, Result<Delivered, StoreError>)>,
) {
    let now = Instant::now();
    let page = match parts
        .store
        .range(RangeRequest::new(parts.keys.outbox_entries()).with_limit(OUTBOX_PAGE))
        .await
    {
        Ok(page) => page,
        Err(error) => {
            tracing::warn!(%error, "the outbox cannot be read; looking again at the next poll");
            return;
        }
    };
    if !page.more {
        let present: HashSet<&[u8]> = page.kvs.iter().map(|kv| kv.key.as_slice()).collect();
        state.retries.retain(|key, _| present.contains(key.as_slice()));
    }
    let mut due = Vec::new();
    for kv in page.kvs {
        if state.in_flight.contains(&kv.key)
            || state.delivered.contains(&kv.key)
            || state.retries.get(&kv.key).is_some_and(|r| r.not_before > now)
        {
            continue;
        }
        let Some(key) = parts.keys.parse_outbox(&kv.key) else {
            continue;
        };
        let Ok(entry) = serde_json::from_slice::<Value>(&kv.value) else {
            continue;
        };
        due.push((kv.key, kv.value, key, entry));
    }
    let mut webhooks = WebhooksByOrganization::new();
    for (_, _, key, entry) in &due {
        if entry["mode"].as_str() != Some("test") && !webhooks.contains_key(&key.org) {
            let read = webhooks_of(parts.store.as_ref(), &parts.keys, &key.org).await;
            webhooks.insert(key.org.clone(), read.map(Arc::new));
        }
    }
    for (raw_key, body, key, entry) in due {
        // Test-mode runs never deliver.
        let targets = match webhooks.get(&key.org) {
            None => Ok(Arc::new(Vec::new())),
            Some(read) => read.clone(),
        };
        if targets.as_ref().is_ok_and(|targets| targets.is_empty()) {
            state.retries.remove(&raw_key);
            state.delivered.insert(raw_key);
            continue;
        }
        state.in_flight.insert(raw_key.clone());
        let transport = transport.clone();
        let metrics = config.metrics.clone();
        // Each delivery is a trace of its own, naming the run it is about.
        let span = tracing::debug_span!(
            parent: None,
            "webhook_delivery",
            organization = %key.org,
            runId = %key.run_id,
            kind = entry["type"].as_str().unwrap_or_default(),
        );
        deliveries.spawn(tracing::Instrument::instrument(
            async move {
                let outcome = match targets {
                    Ok(targets) => Ok(deliver(transport.as_ref(), &metrics, &targets, &entry, body).await),
                    Err(error) => Err(error),
                };
                (raw_key, entry, outcome)
            },
            span,
        ));
    }
}

/// Records how one delivery ended: delivered (deleted at the next look), to be tried again
/// after a backoff, or buried as a dead letter after its last attempt.
async fn settle(
    parts: &SchedulerParts,
    config: &SchedulerConfig,
    state: &mut OutboxState,
    raw_key: Vec<u8>,
    entry: &Value,
    outcome: Result<Delivered, StoreError>,
) {
    state.in_flight.remove(&raw_key);
    match outcome {
        Ok(Delivered::Done) => {
            state.retries.remove(&raw_key);
            state.delivered.insert(raw_key);
        }
        Ok(Delivered::Failed(error)) => {
            let retry = state.retries.entry(raw_key.clone()).or_insert(Retry {
                attempts: 0,
                not_before: Instant::now(),
            });
            retry.attempts += 1;
            let notification = Delivery::of(entry);
            if retry.attempts >= config.max_attempts {
                match bury(parts, &raw_key, entry, retry.attempts, &error).await {
                    Ok(()) => {
                        config.metrics.notifications_dead_lettered.add(1, &[]);
                        tracing::warn!(
                            organization = %notification.organization, id = %notification.id,
                            kind = %notification.kind, attempts = retry.attempts, %error,
                            "webhook delivery failed for the last time; the notification is a dead letter now"
                        );
                        state.retries.remove(&raw_key);
                    }
                    Err(store_error) => tracing::warn!(
                        id = %notification.id, error = %store_error,
                        "cannot move an undeliverable notification to the dead letters; will try again"
                    ),
                }
            } else {
                let backoff = config
                    .first_backoff
                    .saturating_mul(1 << (retry.attempts - 1).min(16));
                let backoff = backoff.min(config.max_backoff);
                retry.not_before = Instant::now() + backoff;
                tracing::info!(
                    organization = %notification.organization, id = %notification.id,
                    kind = %notification.kind, attempt = retry.attempts,
                    max_attempts = config.max_attempts, retry_in_ms = backoff.as_millis() as u64, %error,
                    "webhook delivery failed"
                );
            }
        }
        Err(store_error) => {
            let notification = Delivery::of(entry);
            tracing::warn!(
                id = %notification.id, error = %store_error,
                "cannot deliver a notification: the store failed; will try again"
            );
            let retry = state.retries.entry(raw_key).or_insert(Retry {
                attempts: 0,
                not_before: Instant::now(),
            });
            retry.not_before = Instant::now() + config.first_backoff;
        }
    }
}

/// POSTs one entry to every webhook of its organization.
async fn deliver(
    transport: &dyn Transport,
    metrics: &SchedulerMetrics,
    webhooks: &[(String, Webhook)],
    entry: &Value,
    body: Vec<u8>,
) -> Delivered {
    let id = entry["id"].as_str().unwrap_or_default().to_string();
    let mut failures = Vec::new();
    for (_, webhook) in webhooks {
        let headers = [
            (SIGNATURE_HEADER, sign(&webhook.secret, &body)),
            (DELIVERY_HEADER, id.clone()),
        ];
        match transport.post(&webhook.url, &headers, body.clone()).await {
            Ok(()) => metrics.notifications_delivered.add(1, &[]),
            Err(e) => {
                metrics.notifications_failed.add(1, &[]);
                failures.push(format!("{}: {e}", webhook.url));
            }
        }
    }
    if failures.is_empty() {
        Delivered::Done
    } else {
        Delivered::Failed(failures.join("; "))
    }
}

/// Moves an entry that could not be delivered to the organization's dead letters.
async fn bury(
    parts: &SchedulerParts,
    raw_key: &[u8],
    entry: &Value,
    attempts: u32,
    error: &str,
) -> Result<(), StoreError> {
    let keys = &parts.keys;
    let Some(key) = keys.parse_outbox(raw_key) else {
        return Ok(());
    };
    let letter = json!({ "notification": entry, "attempts": attempts, "error": error });
    parts
        .store
        .txn(Txn::new().and_then([
            TxnOp::delete(raw_key.to_vec()),
            TxnOp::put(
                keys.dead_letter(&key.org, key.created_at_ms, &key.run_id, key.seq),
                letter.to_string(),
            ),
        ]))
        .await
        .map(|_| ())
}
