//! `get_work` calls that wait for work (the `x-wait-1` profile, `docs/profiles/wait.md`): each
//! organization's waiting callers, woken by a watch on its ready-step and work-item indexes, so
//! that work made ready by any actor host reaches a caller waiting on this one.
//!
//! A new ready step wakes one waiting agent whose `process` filter it matches, the one waiting
//! longest, and every listening agent it matches (a listener is told, not handed the step); a new
//! work item wakes every waiting or listening person of the organization (each reads its own
//! items). A woken caller reads its page again: it answers if it holds items, else waits on. The
//! watch of an organization opens with its first waiter and closes a while after its last.

use super::reads;
use crate::actor::Host;
use crate::call::RuntimeError;
use crate::machine::{Caller, CallerKind, OrgId, Refusal};
use agentprocess_service::{GetWork, RenderedData};
use agentprocess_store::keys::Keys;
use agentprocess_store::{EventKind, Store};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// How long an organization's watch stays open after its last waiter left.
const LINGER: Duration = Duration::from_secs(30);
/// How long a waiter waits for its organization's watch to open; past it, the call answers the
/// page it has (an empty one) rather than wait blind.
const WATCH_OPEN_PATIENCE: Duration = Duration::from_secs(2);
/// How long to wait before opening a watch again after it failed.
const REOPEN_AFTER: Duration = Duration::from_millis(500);

/// Every organization's waiting callers on this host.
#[derive(Debug)]
pub(crate) struct WorkWaiters {
    organizations: Mutex<HashMap<OrgId, Arc<Organization>>>,
    /// Set when the host shuts down: every waiting call answers its page now, and no call
    /// waits any more.
    stopping: watch::Sender<bool>,
}

impl Default for WorkWaiters {
    fn default() -> Self {
        WorkWaiters {
            organizations: Mutex::default(),
            stopping: watch::Sender::new(false),
        }
    }
}

/// One organization's waiting callers and the state of its watch.
#[derive(Debug)]
struct Organization {
    waiters: Mutex<Vec<Arc<Waiter>>>,
    /// True while both index watches are open: a waiter registered then misses nothing.
    watching: watch::Sender<bool>,
    /// When the last waiter left (`None` while any waits).
    idle_since: Mutex<Option<Instant>>,
}

/// One waiting call.
#[derive(Debug)]
struct Waiter {
    /// `None` for a person; an agent's `process` filter (`Some(None)` when it has none).
    agent_process: Option<Option<String>>,
    /// Waits for work made ready after it started (a `subscriptions/listen` stream), rather than
    /// for a page to answer.
    listening: bool,
    /// Set when a wake is on its way, so the next new step wakes another waiter.
    woken: AtomicBool,
    wake: Notify,
}

/// A registered waiter; leaves its organization when dropped.
struct Registration {
    organization: Arc<Organization>,
    waiter: Arc<Waiter>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let empty = {
            let mut waiters = self.organization.waiters.lock().unwrap();
            waiters.retain(|waiter| !Arc::ptr_eq(waiter, &self.waiter));
            waiters.is_empty()
        };
        if empty {
            *self.organization.idle_since.lock().unwrap() = Some(Instant::now());
        }
        // A wake that reached an agent answering for another reason goes on to the next agent
        // (which reads its page and waits on when the step is not for it): never lost.
        if self.waiter.agent_process.is_some()
            && !self.waiter.listening
            && self.waiter.woken.load(Ordering::Acquire)
        {
            self.organization.hand_to_agent(None);
        }
    }
}

impl WorkWaiters {
    /// Answers every waiting call with its page as it is, and every later call at once.
    pub(crate) fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Registers a waiter in `caller`'s organization, opening its watch if none is open, and
    /// returns once the watch is open (or `None` when it cannot open in time).
    async fn register(
        self: &Arc<Self>,
        host: &Host,
        caller: &Caller,
        process: Option<String>,
        listening: bool,
    ) -> Option<Registration> {
        let waiter = Arc::new(Waiter {
            agent_process: match caller.kind {
                CallerKind::Agent { .. } => Some(process),
                CallerKind::Person { .. } => None,
            },
            listening,
            woken: AtomicBool::new(false),
            wake: Notify::new(),
        });
        // Joined under the lock that forgetting an idle organization takes: an organization is
        // never forgotten, and its watch closed, with a waiter that just joined it.
        let organization = {
            let mut organizations = self.organizations.lock().unwrap();
            let organization = organizations
                .entry(caller.organization.clone())
                .or_insert_with(|| {
                    let organization = Arc::new(Organization {
                        waiters: Mutex::new(Vec::new()),
                        watching: watch::Sender::new(false),
                        idle_since: Mutex::new(None),
                    });
                    tokio::spawn(watch_organization(
                        host.store.clone(),
                        host.keys.clone(),
                        caller.organization.clone(),
                        Arc::downgrade(&organization),
                        Arc::downgrade(self),
                    ));
                    organization
                })
                .clone();
            organization.waiters.lock().unwrap().push(waiter.clone());
            *organization.idle_since.lock().unwrap() = None;
            organization
        };
        let registration = Registration { organization, waiter };
        let mut watching = registration.organization.watching.subscribe();
        match tokio::time::timeout(WATCH_OPEN_PATIENCE, watching.wait_for(|open| *open)).await {
            Ok(Ok(_)) => Some(registration),
            _ => None,
        }
    }

    /// Forgets `organization` if it is still `this` one and nobody waited in it for [`LINGER`].
    fn forget_if_idle(&self, organization: &OrgId, this: &Arc<Organization>) -> bool {
        let mut organizations = self.organizations.lock().unwrap();
        let idle = this.waiters.lock().unwrap().is_empty()
            && this
                .idle_since
                .lock()
                .unwrap()
                .is_some_and(|since| since.elapsed() >= LINGER);
        if idle
            && organizations
                .get(organization)
                .is_some_and(|kept| Arc::ptr_eq(kept, this))
        {
            organizations.remove(organization);
        }
        idle
    }
}

impl Waiter {
    /// Whether this is an agent whose filter takes a step of `process` (`None`: any).
    fn takes(&self, process: Option<&str>) -> bool {
        self.agent_process.as_ref().is_some_and(|filter| {
            filter
                .as_deref()
                .is_none_or(|wanted| process.is_none_or(|process| process == wanted))
        })
    }

    fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

impl Organization {
    /// A new ready step of `process`: tells every listening agent it matches, and wakes the
    /// waiting agent it is handed to ([`Organization::hand_to_agent`]).
    fn step_ready(&self, process: Option<&str>) {
        for waiter in self.waiters.lock().unwrap().iter() {
            if waiter.listening && waiter.takes(process) {
                waiter.wake();
            }
        }
        self.hand_to_agent(process);
    }

    /// Wakes the agent waiting longest (not listening) that a step of `process` matches and
    /// that no other wake is on its way to.
    fn hand_to_agent(&self, process: Option<&str>) {
        let waiters = self.waiters.lock().unwrap();
        let matching = waiters.iter().find(|waiter| {
            !waiter.listening && !waiter.woken.load(Ordering::Acquire) && waiter.takes(process)
        });
        if let Some(waiter) = matching {
            waiter.wake();
        }
    }

    /// A new work item: wakes every waiting person.
    fn item_opened(&self) {
        for waiter in self.waiters.lock().unwrap().iter() {
            if waiter.agent_process.is_none() {
                waiter.wake();
            }
        }
    }

    /// After a watch was cut: wakes everyone, since what happened meanwhile is not known.
    fn wake_all(&self) {
        for waiter in self.waiters.lock().unwrap().iter() {
            waiter.wake();
        }
    }
}

/// Keeps `organization`'s ready-step and work-item indexes watched while it has waiters, and a
/// while after; wakes them on every new entry.
async fn watch_organization(
    store: Arc<dyn Store>,
    keys: Keys,
    organization_id: OrgId,
    organization: Weak<Organization>,
    waiters: Weak<WorkWaiters>,
) {
    let ready = keys.ready_steps(&organization_id);
    let work = keys.all_work_items(&organization_id);
    let mut first = true;
    loop {
        let opened = async {
            let ready_events = store.watch(ready.clone(), None).await?;
            let work_events = store.watch(work.clone(), None).await?;
            Ok::<_, agentprocess_store::StoreError>((ready_events, work_events))
        };
        let (mut ready_events, mut work_events) = match opened.await {
            Ok(streams) => streams,
            Err(error) => {
                tracing::warn!(%error, organization = %organization_id, "cannot watch for work to wake waiting get_work calls; trying again");
                tokio::time::sleep(REOPEN_AFTER).await;
                continue;
            }
        };
        let Some(this) = organization.upgrade() else {
            return;
        };
        this.watching.send_replace(true);
        if !std::mem::take(&mut first) {
            this.wake_all();
        }
        drop(this);
        let mut linger = tokio::time::interval(LINGER);
        linger.tick().await;
        loop {
            tokio::select! {
                event = ready_events.next() => match event {
                    Some(Ok(event)) if event.kind == EventKind::Put => {
                        let Some(this) = organization.upgrade() else { return };
                        let process = reads::stored_item_process(&event.kv.value);
                        this.step_ready(process.as_deref());
                    }
                    Some(Ok(_)) => {}
                    _ => break,
                },
                event = work_events.next() => match event {
                    Some(Ok(event)) if event.kind == EventKind::Put => {
                        let Some(this) = organization.upgrade() else { return };
                        this.item_opened();
                    }
                    Some(Ok(_)) => {}
                    _ => break,
                },
                _ = linger.tick() => {
                    let (Some(this), Some(waiters)) = (organization.upgrade(), waiters.upgrade()) else { return };
                    if waiters.forget_if_idle(&organization_id, &this) {
                        this.watching.send_replace(false);
                        return;
                    }
                }
            }
        }
        let Some(this) = organization.upgrade() else {
            return;
        };
        this.watching.send_replace(false);
        drop(this);
        tokio::time::sleep(REOPEN_AFTER).await;
    }
}

/// The caller's `get_work` page; with `request.wait` on a first page that holds nothing, the call
/// waits until a matching item is ready, or the wait is over, and answers the page then. A call
/// that may wait registers before its first read, so that one read serves a call that finds work
/// and a call that starts waiting alike.
pub(crate) async fn work_page(
    host: &Host,
    caller: &Caller,
    request: GetWork,
) -> Result<Result<RenderedData, Refusal>, RuntimeError> {
    if request.only_new
        && let Some(wait) = request.wait
    {
        return new_work(host, caller, request, wait).await;
    }
    let wait = request.wait.filter(|_| request.cursor.is_none());
    let Some(wait) = wait else {
        return reads::work_page(host, caller, request).await;
    };
    let deadline = Instant::now() + wait;
    let mut stopping = host.waiters.stopping.subscribe();
    let stopped = *stopping.borrow_and_update();
    let registration = match stopped {
        true => None,
        false => {
            host.waiters
                .register(host, caller, request.process.clone(), false)
                .await
        }
    };
    let Some(registration) = registration else {
        // Shutting down, or the store cannot be watched: the page as it is.
        return reads::work_page(host, caller, request).await;
    };
    loop {
        registration.waiter.woken.store(false, Ordering::Release);
        let page = reads::work_page(host, caller, request.clone()).await?;
        match &page {
            Ok(rendered) if reads::page_is_empty(rendered) => {}
            _ => return Ok(page),
        }
        tokio::select! {
            _ = registration.waiter.wake.notified() => {}
            _ = tokio::time::sleep_until(deadline) => return Ok(page),
            _ = stopping.changed() => return Ok(page),
        }
    }
}

/// The caller's page once work is made ready after the call started (and the page then holds
/// some), or an empty page when none came within `wait`, the host is shutting down, or its store
/// cannot be watched: how a `subscriptions/listen` stream hears of new work.
async fn new_work(
    host: &Host,
    caller: &Caller,
    request: GetWork,
    wait: Duration,
) -> Result<Result<RenderedData, Refusal>, RuntimeError> {
    let deadline = Instant::now() + wait;
    let mut stopping = host.waiters.stopping.subscribe();
    if *stopping.borrow_and_update() {
        return Ok(Ok(reads::empty_page()));
    }
    let Some(registration) = host
        .waiters
        .register(host, caller, request.process.clone(), true)
        .await
    else {
        return Ok(Ok(reads::empty_page()));
    };
    loop {
        tokio::select! {
            _ = registration.waiter.wake.notified() => {}
            _ = tokio::time::sleep_until(deadline) => return Ok(Ok(reads::empty_page())),
            _ = stopping.changed() => return Ok(Ok(reads::empty_page())),
        }
        registration.waiter.woken.store(false, Ordering::Release);
        let page = reads::work_page(host, caller, request.clone()).await?;
        match &page {
            Ok(rendered) if reads::page_is_empty(rendered) => {}
            _ => return Ok(page),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn organization() -> Arc<Organization> {
        Arc::new(Organization {
            waiters: Mutex::new(Vec::new()),
            watching: watch::Sender::new(true),
            idle_since: Mutex::new(None),
        })
    }

    fn waiting(organization: &Arc<Organization>, agent_process: Option<Option<&str>>) -> Registration {
        joined(organization, agent_process, false)
    }

    fn listening(organization: &Arc<Organization>, agent_process: Option<Option<&str>>) -> Registration {
        joined(organization, agent_process, true)
    }

    fn joined(
        organization: &Arc<Organization>,
        agent_process: Option<Option<&str>>,
        listening: bool,
    ) -> Registration {
        let waiter = Arc::new(Waiter {
            agent_process: agent_process.map(|filter| filter.map(str::to_owned)),
            listening,
            woken: AtomicBool::new(false),
            wake: Notify::new(),
        });
        organization.waiters.lock().unwrap().push(waiter.clone());
        Registration {
            organization: organization.clone(),
            waiter,
        }
    }

    fn woken(registration: &Registration) -> bool {
        registration.waiter.woken.load(Ordering::Acquire)
    }

    #[test]
    fn a_new_step_wakes_the_agent_waiting_longest_whose_filter_it_matches() {
        let organization = organization();
        let other_process = waiting(&organization, Some(Some("invoice-approval")));
        let person = waiting(&organization, None);
        let first = waiting(&organization, Some(None));
        let second = waiting(&organization, Some(Some("defect-triage")));
        organization.step_ready(Some("defect-triage"));
        assert!(woken(&first) && !woken(&second));
        assert!(!woken(&other_process) && !woken(&person), "neither may take it");
        // The next step goes to the next agent: the first already has a wake on its way.
        organization.step_ready(Some("defect-triage"));
        assert!(woken(&second));
        organization.step_ready(Some("defect-triage"));
        assert!(!woken(&other_process), "nobody is left for a third");
    }

    #[test]
    fn a_new_work_item_wakes_every_waiting_person_and_no_agent() {
        let organization = organization();
        let agent = waiting(&organization, Some(None));
        let people = [waiting(&organization, None), waiting(&organization, None)];
        organization.item_opened();
        assert!(people.iter().all(woken));
        assert!(!woken(&agent));
    }

    #[test]
    fn a_wake_that_reaches_an_agent_answering_anyway_goes_on_to_the_next() {
        let organization = organization();
        let answering = waiting(&organization, Some(None));
        let next = waiting(&organization, Some(Some("defect-triage")));
        organization.step_ready(Some("defect-triage"));
        assert!(woken(&answering) && !woken(&next));
        drop(answering);
        assert!(woken(&next), "the wake was passed on");
        assert_eq!(organization.waiters.lock().unwrap().len(), 1);
        drop(next);
        assert!(
            organization.idle_since.lock().unwrap().is_some(),
            "idle once the last left"
        );
    }

    #[test]
    fn a_new_step_tells_every_listener_it_matches_and_is_handed_to_one_waiting_agent() {
        let organization = organization();
        let listener = listening(&organization, Some(Some("defect-triage")));
        let any_listener = listening(&organization, Some(None));
        let other_listener = listening(&organization, Some(Some("invoice-approval")));
        let first = waiting(&organization, Some(None));
        let second = waiting(&organization, Some(None));
        organization.step_ready(Some("defect-triage"));
        assert!(woken(&listener) && woken(&any_listener));
        assert!(!woken(&other_listener));
        assert!(
            woken(&first) && !woken(&second),
            "handed to one waiting agent only"
        );
        drop(listener);
        drop(any_listener);
        assert!(!woken(&second), "a listener that leaves passes nothing on");
        // Listening people hear of new work items, as waiting people do.
        let person = listening(&organization, None);
        organization.item_opened();
        assert!(woken(&person));
    }
}
