//! The processes runs pin, parsed once and kept by version: a published version never changes,
//! so a cached one is never stale.

use crate::call::RuntimeError;
use crate::machine::{OrgId, PinnedProcess};
use agentprocess_org::Catalog;
use agentprocess_process::{Offer, load};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// (organization, process name, version).
type VersionKey = (OrgId, String, u64);

/// The actor host's cache of pinned processes over the organizations' catalogs.
#[derive(Debug)]
pub(crate) struct PinnedProcesses {
    catalog: Catalog,
    cache: Mutex<HashMap<VersionKey, Arc<PinnedProcess>>>,
}

impl PinnedProcesses {
    pub(crate) fn new(catalog: Catalog) -> Self {
        PinnedProcesses {
            catalog,
            cache: Mutex::new(HashMap::new()),
        }
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
