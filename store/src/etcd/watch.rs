//! Watches over etcd that resume on another member, from the next revision, when theirs fails.
//!
//! One task per watch reads etcd's watch stream and forwards its events. When the stream
//! breaks (the member died, lost its leader, or closed the stream), the task creates the watch
//! again on the next member from the first revision it has not delivered, so the events go on
//! in order with none skipped or repeated. It gives up with the error of that call (after
//! [`super::EtcdOptions::request_timeout`]) when no member takes the watch, and ends the stream
//! with [`StoreError::Compacted`] when etcd has compacted the revisions it needs.

use std::sync::Arc;

use etcd_client as etcd;
use tokio::sync::mpsc;

use super::convert::{self, EtcdRange};
use super::failure::{self, Failure};
use super::{CallError, Inner, Repeat};
use crate::error::StoreError;
use crate::types::{WatchEvent, WatchStream};

/// Events buffered between the task and the watcher before the task waits (and etcd buffers).
const WATCH_CHANNEL: usize = 1024;

type EventSender = mpsc::Sender<Result<WatchEvent, StoreError>>;

/// A watch etcd has confirmed.
struct Created {
    stream: etcd::WatchStream,
    /// The store revision when etcd created it.
    revision: i64,
    /// The member that serves it.
    member: usize,
    endpoint: String,
}

/// Why forwarding from one etcd watch stream stopped.
enum End {
    /// The watcher dropped its stream.
    WatcherGone,
    /// etcd compacted revisions the watch still needed: this one and older are gone.
    Compacted(i64),
    /// The stream failed; the watch can go on elsewhere.
    Broken(String),
}

pub(super) async fn open(
    inner: Arc<Inner>,
    range: EtcdRange,
    start_revision: Option<i64>,
) -> Result<WatchStream, StoreError> {
    let (sender, receiver) = mpsc::channel(WATCH_CHANNEL);
    if range == EtcdRange::Empty {
        // No event can fall in an empty range: the stream stays open, silent, until dropped.
        tokio::spawn(async move { sender.closed().await });
        return Ok(WatchStream::from_channel(receiver));
    }
    let start_revision = start_revision.map(|revision| revision.max(1));
    if let Some(revision) = start_revision
        && let Some(compact_revision) = compacted_before(&inner, &range, revision).await?
    {
        return Err(StoreError::Compacted { compact_revision });
    }
    let created = create(&inner, &range, start_revision.unwrap_or(0))
        .await
        .map_err(|error| error.for_lease(None))?;
    let next = start_revision.unwrap_or(created.revision + 1);
    tokio::spawn(pump(inner, range, next, created, sender));
    Ok(WatchStream::from_channel(receiver))
}

/// Creates the watch on the preferred member (or the next ones), from `start_revision` (`0`:
/// from the next revision).
async fn create(inner: &Inner, range: &EtcdRange, start_revision: i64) -> Result<Created, CallError> {
    inner
        .call("watching etcd", Repeat::Safe, |mut member| {
            let request = range.watch_options(start_revision);
            async move {
                let Some((key, options)) = request else {
                    return Err(Failure::Final(StoreError::InvalidRequest(
                        "an empty key range cannot be watched on etcd".into(),
                    )));
                };
                let mut stream = member
                    .watch
                    .watch(key, Some(options))
                    .await
                    .map_err(failure::classify)?;
                match stream.message().await.map_err(failure::classify)? {
                    Some(answer) if answer.created() && !answer.canceled() => Ok(Created {
                        stream,
                        revision: answer.header().map_or(0, |header| header.revision()),
                        member: member.index,
                        endpoint: member.endpoint,
                    }),
                    Some(answer) if answer.canceled() => Err(Failure::NotSent(format!(
                        "etcd cancelled the watch it was creating: {}",
                        answer.cancel_reason()
                    ))),
                    Some(_) => Err(Failure::Unknown(
                        "etcd's first watch answer did not confirm the watch".into(),
                    )),
                    None => Err(Failure::Unknown("etcd closed the watch stream at once".into())),
                }
            }
        })
        .await
}

/// etcd's compaction revision when `revision` is compacted away for this range, else `None`.
///
/// A watch from a compacted revision is created and then cancelled, so the answer to the
/// watch call cannot say it. A read at that revision can (it fails alike), but without the
/// compaction revision; the cancelled watch then gives that.
async fn compacted_before(
    inner: &Inner,
    range: &EtcdRange,
    revision: i64,
) -> Result<Option<i64>, StoreError> {
    let (key, options) = range.get_options(1);
    let read = inner
        .call("reading from etcd", Repeat::Safe, |mut member| {
            let (key, options) = (
                key.clone(),
                options.clone().with_revision(revision).with_count_only(),
            );
            async move { member.kv.get(key, Some(options)).await.map_err(failure::classify) }
        })
        .await;
    match read {
        Ok(_) => Ok(None),
        Err(CallError::Compacted) => {
            let mut created = create(inner, range, revision)
                .await
                .map_err(|error| error.for_lease(None))?;
            let cancelled = async {
                loop {
                    match created.stream.message().await {
                        Ok(Some(answer)) if answer.compact_revision() > 0 => {
                            return Some(last_compacted(answer.compact_revision()));
                        }
                        Ok(Some(_)) => continue,
                        Ok(None) | Err(_) => return None,
                    }
                }
            };
            // Without etcd's word on where compaction stopped, `revision` itself is known to be
            // compacted away: the read at it just said so.
            let compacted = tokio::time::timeout(inner.options.request_timeout, cancelled).await;
            Ok(Some(compacted.ok().flatten().unwrap_or(revision)))
        }
        // A revision after the store's: the watch waits for it, as etcd's watches do.
        Err(CallError::Store(StoreError::InvalidRequest(message))) if message.contains("future revision") => {
            Ok(None)
        }
        Err(error) => Err(error.for_lease(None)),
    }
}

/// The newest revision whose events are gone after etcd compacted at `compact_revision`: etcd
/// keeps the state at its compaction revision, so a watch can start there, and
/// [`StoreError::Compacted`] names the revision before it.
fn last_compacted(compact_revision: i64) -> i64 {
    compact_revision - 1
}

/// Forwards the events of `created`, then of each watch that replaces it, until the watcher is
/// gone or the watch cannot go on. `next` is the first revision not yet delivered.
async fn pump(inner: Arc<Inner>, range: EtcdRange, mut next: i64, mut created: Created, sender: EventSender) {
    loop {
        match forward(&mut created.stream, &mut next, &sender).await {
            End::WatcherGone => return,
            End::Compacted(compact_revision) => {
                let _ = sender.send(Err(StoreError::Compacted { compact_revision })).await;
                return;
            }
            End::Broken(reason) => {
                tracing::info!(
                    endpoint = %created.endpoint,
                    %reason,
                    next_revision = next,
                    "etcd watch broke; watching again on the next member"
                );
                inner.move_on_from(created.member);
                let again = tokio::select! {
                    _ = sender.closed() => return,
                    again = create(&inner, &range, next) => again,
                };
                match again {
                    Ok(replacement) => created = replacement,
                    Err(error) => {
                        let _ = sender.send(Err(error.for_lease(None))).await;
                        return;
                    }
                }
            }
        }
    }
}

/// Forwards the events of one etcd watch stream, advancing `next` past each answer delivered.
async fn forward(stream: &mut etcd::WatchStream, next: &mut i64, sender: &EventSender) -> End {
    loop {
        let answer = tokio::select! {
            _ = sender.closed() => return End::WatcherGone,
            answer = stream.message() => answer,
        };
        let answer = match answer {
            Ok(Some(answer)) => answer,
            Ok(None) => return End::Broken("etcd closed the watch stream".into()),
            Err(error) => return End::Broken(error.to_string()),
        };
        if answer.compact_revision() > 0 {
            return End::Compacted(last_compacted(answer.compact_revision()));
        }
        if answer.canceled() {
            return End::Broken(format!("etcd cancelled the watch: {}", answer.cancel_reason()));
        }
        let mut last_revision = None;
        for event in answer.events().iter().filter_map(convert::watch_event) {
            // After a resume, etcd starts at `next`; nothing before it is delivered twice.
            if event.kv.mod_revision < *next {
                continue;
            }
            last_revision = Some(event.kv.mod_revision);
            if sender.send(Ok(event)).await.is_err() {
                return End::WatcherGone;
            }
        }
        // etcd never splits one revision's events over two answers (the store does not ask for
        // fragments), so every event of `last_revision` has been delivered.
        if let Some(revision) = last_revision {
            *next = revision + 1;
        }
    }
}
