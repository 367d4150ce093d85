//! The process catalog: published versions of each organization's processes, and the pinned
//! processes that runs use, parsed once and cached by version (a published version never
//! changes).

use super::RuntimeError;
use crate::machine::PinnedProcess;
use crate::machine::render;
use agentprocess_process::{Issue, Offer, load};
use agentprocess_store::keys::Keys;
use agentprocess_store::{Compare, Store, StoreError, Txn, TxnOp};
use indexmap::IndexMap;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type VersionKey = (String, String, u64);

/// Published processes, read from the store and cached.
#[derive(Debug)]
pub struct Catalog {
    store: Arc<dyn Store>,
    keys: Keys,
    pinned: Mutex<HashMap<VersionKey, Arc<PinnedProcess>>>,
}

/// Why a process could not be published.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("the process is not valid: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Issue>),
    #[error("role {0} is not bound to a group")]
    UnboundRole(String),
    #[error("another version of this process was published at the same time")]
    Raced,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Catalog {
    pub(crate) fn new(store: Arc<dyn Store>, keys: Keys) -> Self {
        Catalog {
            store,
            keys,
            pinned: Mutex::new(HashMap::new()),
        }
    }

    /// Validates `source` and publishes it as the next version of its process, with the role
    /// bindings (role name → group id). Returns the version.
    pub async fn publish(
        &self,
        organization: &str,
        source: &[u8],
        roles: IndexMap<String, String>,
    ) -> Result<u64, CatalogError> {
        let loaded = load(source, &Offer::EVERYTHING).map_err(CatalogError::Invalid)?;
        if let Some(role) = loaded
            .process
            .role_names()
            .into_iter()
            .find(|role| !roles.contains_key(*role))
        {
            return Err(CatalogError::UnboundRole(role.to_string()));
        }
        let name = loaded.process.name.to_string();
        let entry_key = self.keys.catalog_entry(organization, &name);
        let (entry, _) = self.store.get(&entry_key).await?;
        let (latest, revision) = match &entry {
            Some(kv) => (
                serde_json::from_slice::<Value>(&kv.value)
                    .ok()
                    .and_then(|v| v["version"].as_u64())
                    .unwrap_or(0),
                kv.mod_revision,
            ),
            None => (0, 0),
        };
        let version = latest + 1;
        let record = json!({
            "source": String::from_utf8_lossy(source),
            "roles": roles,
        });
        let summary = json!({
            "name": name,
            "description": loaded.process.description,
            "version": version,
            "inputs": render::field_map(&loaded.process.inputs),
        });
        let txn = Txn::new()
            .when([Compare::mod_revision_is(entry_key.clone(), revision)])
            .and_then([
                TxnOp::put(
                    self.keys.published_process(organization, &name, version),
                    record.to_string(),
                ),
                TxnOp::put(entry_key, summary.to_string()),
            ]);
        if !self.store.txn(txn).await?.succeeded {
            return Err(CatalogError::Raced);
        }
        Ok(version)
    }

    /// The pinned process `name` at `version`, or at its latest version; `None` when there is
    /// no such published process.
    pub async fn resolve(
        &self,
        organization: &str,
        name: &str,
        version: Option<u64>,
    ) -> Result<Option<Arc<PinnedProcess>>, RuntimeError> {
        let version = match version {
            Some(version) => version,
            None => {
                let (entry, _) = self
                    .store
                    .get(&self.keys.catalog_entry(organization, name))
                    .await?;
                let Some(entry) = entry else { return Ok(None) };
                let summary: Value = serde_json::from_slice(&entry.value)
                    .map_err(|e| RuntimeError::Corrupt(format!("catalog entry of {name}: {e}")))?;
                match summary["version"].as_u64() {
                    Some(version) => version,
                    None => return Err(RuntimeError::Corrupt(format!("catalog entry of {name}"))),
                }
            }
        };
        self.pinned(organization, name, version).await
    }

    /// The pinned process of a run: `name` at exactly `version`.
    pub async fn pinned(
        &self,
        organization: &str,
        name: &str,
        version: u64,
    ) -> Result<Option<Arc<PinnedProcess>>, RuntimeError> {
        let key = (organization.to_string(), name.to_string(), version);
        if let Some(found) = self.pinned.lock().unwrap().get(&key) {
            return Ok(Some(found.clone()));
        }
        let (record, _) = self
            .store
            .get(&self.keys.published_process(organization, name, version))
            .await?;
        let Some(record) = record else { return Ok(None) };
        let corrupt = |why: String| RuntimeError::Corrupt(format!("published {name} v{version}: {why}"));
        let record: Value = serde_json::from_slice(&record.value).map_err(|e| corrupt(e.to_string()))?;
        let source = record["source"]
            .as_str()
            .ok_or_else(|| corrupt("no source".into()))?;
        let roles: IndexMap<String, String> =
            serde_json::from_value(record["roles"].clone()).map_err(|e| corrupt(e.to_string()))?;
        let loaded =
            load(source.as_bytes(), &Offer::EVERYTHING).map_err(|issues| corrupt(format!("{issues:?}")))?;
        let pinned = Arc::new(PinnedProcess {
            process: loaded.process,
            version,
            body: loaded.body,
            roles,
        });
        self.pinned.lock().unwrap().insert(key, pinned.clone());
        Ok(Some(pinned))
    }
}
