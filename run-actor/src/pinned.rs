//! The processes runs pin, parsed once and kept by version (a published version never changes,
//! so a cached one is never stale), and each process's latest version, kept with a guard its
//! start's commit compares.

use crate::call::RuntimeError;
use crate::machine::{OrgId, PinnedProcess};
use agentprocess_org::{Catalog, LatestVersion};
use agentprocess_process::{Offer, load};
use agentprocess_store::{Compare, CompareOp, CompareTarget, Store};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// (organization, process name, version).
type VersionKey = (OrgId, String, u64);

/// Most processes whose latest version is kept; past it the map starts again empty.
const MAX_LATEST_KEPT: usize = 10_000;

/// What a start that pinned a process's latest version without reading the catalog stands on:
/// the catalog entry's store revision when the version was last read. Its commit compares it, so
/// a start never pins a version older than one published before the start was acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LatestGuard {
    pub organization: OrgId,
    pub process: String,
    pub latest: LatestVersion,
}

impl LatestGuard {
    /// The compare that holds while no version of the process was published since.
    pub(crate) fn compare(&self) -> Compare {
        Compare::new(
            self.latest.entry_key.clone(),
            CompareOp::Equal,
            CompareTarget::ModRevision(self.latest.mod_revision),
        )
    }
}

/// The actor host's cache of pinned processes over the organizations' catalogs.
#[derive(Debug)]
pub(crate) struct PinnedProcesses {
    catalog: Catalog,
    cache: Mutex<HashMap<VersionKey, Arc<PinnedProcess>>>,
    /// Each process's latest version as last read, by (organization, name).
    latest: Mutex<HashMap<(OrgId, String), LatestVersion>>,
}

impl PinnedProcesses {
    pub(crate) fn new(catalog: Catalog) -> Self {
        PinnedProcesses {
            catalog,
            cache: Mutex::new(HashMap::new()),
            latest: Mutex::new(HashMap::new()),
        }
    }

    /// The latest version of `name`, pinned, with the guard a start's commit compares: from
    /// memory when it was read before, else from the catalog. `None` when nothing is published.
    pub(crate) async fn resolve_latest(
        &self,
        organization: &OrgId,
        name: &str,
    ) -> Result<Option<(Arc<PinnedProcess>, LatestGuard)>, RuntimeError> {
        let address = (organization.clone(), name.to_string());
        let kept = self.latest.lock().unwrap().get(&address).cloned();
        let latest = match kept {
            Some(latest) => latest,
            None => {
                let Some(latest) = self.catalog.latest_version_entry(organization, name).await? else {
                    return Ok(None);
                };
                let mut kept = self.latest.lock().unwrap();
                if kept.len() >= MAX_LATEST_KEPT {
                    kept.clear();
                }
                kept.insert(address, latest.clone());
                latest
            }
        };
        let Some(pinned) = self.get(organization, name, latest.version).await? else {
            self.forget_latest(organization, name);
            return Ok(None);
        };
        Ok(Some((
            pinned,
            LatestGuard {
                organization: organization.clone(),
                process: name.to_string(),
                latest,
            },
        )))
    }

    /// Whether no version of the guard's process was published since it was taken; when one
    /// was, the kept latest version is forgotten and the next start reads the catalog.
    pub(crate) async fn guard_holds(
        &self,
        store: &dyn Store,
        guard: &LatestGuard,
    ) -> Result<bool, RuntimeError> {
        let (entry, _) = store.get(&guard.latest.entry_key).await?;
        let holds = entry.is_some_and(|entry| entry.mod_revision == guard.latest.mod_revision);
        if !holds {
            self.forget_latest(&guard.organization, &guard.process);
        }
        Ok(holds)
    }

    fn forget_latest(&self, organization: &OrgId, name: &str) {
        self.latest
            .lock()
            .unwrap()
            .remove(&(organization.clone(), name.to_string()));
    }

    /// The pinned process `name` at `version`, or at its latest version; `None` when there is no
    /// such published process.
    pub(crate) async fn resolve(
        &self,
        organization: &OrgId,
        name: &str,
        version: Option<u64>,
    ) -> Result<Option<Arc<PinnedProcess>>, RuntimeError> {
        let version = match version {
            Some(version) => version,
            None => match self.catalog.latest_version(organization, name).await? {
                Some(version) => version,
                None => return Ok(None),
            },
        };
        self.get(organization, name, version).await
    }

    /// The pinned process of a run: `name` at exactly `version`.
    pub(crate) async fn get(
        &self,
        organization: &OrgId,
        name: &str,
        version: u64,
    ) -> Result<Option<Arc<PinnedProcess>>, RuntimeError> {
        let key = (organization.clone(), name.to_string(), version);
        if let Some(found) = self.cache.lock().unwrap().get(&key) {
            return Ok(Some(found.clone()));
        }
        let Some(record) = self.catalog.published_record(organization, name, version).await? else {
            return Ok(None);
        };
        let loaded = load(record.source.as_bytes(), &Offer::EVERYTHING)
            .map_err(|issues| RuntimeError::Corrupt(format!("published {name} v{version}: {issues:?}")))?;
        let pinned = Arc::new(PinnedProcess {
            process: loaded.process,
            version,
            body: loaded.body,
            roles: record.roles,
        });
        self.cache.lock().unwrap().insert(key, pinned.clone());
        Ok(Some(pinned))
    }
}
