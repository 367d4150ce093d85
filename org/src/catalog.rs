//! The process catalog: each organization's drafts (imported, roles being bound) and published
//! versions (a published version never changes; the actor host caches the processes it pins).
//!
//! An operator imports a `PROCESS.md` as the DRAFT of its process (one per process name; a new
//! import replaces it and keeps the bindings of roles that still exist), binds every role name to
//! a group of the identity provider, and publishes: the draft becomes the next numbered version,
//! with its content hash, its bindings, when and by whom. The draft stays, so the operator can
//! re-bind and publish again. Publishing what the latest version already is (same content hash
//! AND same bindings) is refused as a conflict: it would make a version that changes nothing.
use crate::{Clock, OrgError};
use agentprocess_ids::OrgId;

use agentprocess_process::{Issue, LoadedProcess, Offer, load, warnings};
use agentprocess_store::keys::Keys;
use agentprocess_store::{Compare, RangeRequest, Store, StoreError, Txn, TxnOp};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Published processes and drafts, read from and written to the store.
#[derive(Debug, Clone)]
pub struct Catalog {
    store: Arc<dyn Store>,
    keys: Keys,
    clock: Clock,
}

/// A process's latest published version as its catalog entry said at one store revision: while
/// the entry's `mod_revision` is unchanged, no version was published since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestVersion {
    pub version: u64,
    pub entry_key: Vec<u8>,
    pub mod_revision: i64,
}

/// Why the catalog said no to an operator: the request's fault, never the infrastructure's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogRefusal {
    /// The source, the bindings, or the draft at publication breaks a rule: every issue found.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Issue>),
    #[error("there is no draft of process {0:?} in this organization")]
    NoDraft(String),
    /// The draft is exactly the latest version: same content hash, same bindings.
    #[error("version {version} of {name} already has this content and these bindings")]
    Unchanged { name: String, version: u64 },
    /// Another operator changed the draft or published a version between the read and the write.
    #[error("{0} was changed at the same time by another request; try again")]
    Raced(String),
}

/// Why a catalog operation did not happen: a refusal, or an infrastructure failure (retry).
#[derive(Debug, Clone, thiserror::Error)]
pub enum CatalogError {
    #[error(transparent)]
    Refused(#[from] CatalogRefusal),
    #[error(transparent)]
    Failed(#[from] OrgError),
}

impl From<StoreError> for CatalogError {
    fn from(error: StoreError) -> Self {
        CatalogError::Failed(OrgError::Store(error))
    }
}

/// A stored draft: the source as imported, what validation found in it, and its bindings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Draft {
    pub name: String,
    pub description: String,
    pub source: String,
    /// Hex SHA-256 content hash (spec §6.5).
    pub content_hash: String,
    /// The role names of its `person:` keys, in first-use order.
    pub roles: Vec<String>,
    /// Role name → group id, for roles in `roles` only.
    pub bindings: IndexMap<String, String>,
    pub imported_at: String,
    pub imported_by: String,
    /// `requires.systems`: what the process says it depends on (spec §7: import shows it).
    #[serde(default)]
    pub required_systems: Vec<String>,
    /// What the source allows but probably does not mean (never a refusal).
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// What an operator sees of a draft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DraftView {
    pub content_hash: String,
    pub roles: Vec<String>,
    pub bindings: IndexMap<String, String>,
    /// Roles still without a group, in `roles` order; publication needs none.
    pub unbound: Vec<String>,
    /// `{ systems }` when the process declares `requires`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<Value>,
    pub warnings: Vec<String>,
}

impl Draft {
    pub fn unbound(&self) -> Vec<String> {
        self.roles
            .iter()
            .filter(|role| !self.bindings.contains_key(*role))
            .cloned()
            .collect()
    }

    pub fn view(&self) -> DraftView {
        DraftView {
            content_hash: self.content_hash.clone(),
            roles: self.roles.clone(),
            bindings: self.bindings.clone(),
            unbound: self.unbound(),
            requires: requires(&self.required_systems),
            warnings: self.warnings.clone(),
        }
    }
}

/// One published version, without its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionSummary {
    pub version: u64,
    pub content_hash: String,
    /// RFC 3339, UTC.
    pub published_at: String,
    /// Role name → group id, as bound at publication.
    pub roles: IndexMap<String, String>,
    /// Who published it (a person's email or an agent's id); `None` when published by the server
    /// itself ([`Catalog::publish`]).
    pub published_by: Option<String>,
}

/// A version just published, with the name of its process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedVersion {
    pub name: String,
    #[serde(flatten)]
    pub version: VersionSummary,
}

/// One process as operators see it: every published version, oldest first, and the draft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessEntry {
    pub name: String,
    /// Of the latest version, or of the draft while nothing is published.
    pub description: String,
    pub latest_version: Option<u64>,
    pub versions: Vec<VersionSummary>,
    pub draft: Option<DraftView>,
}

impl ProcessEntry {
    /// The draft when publishing it would make a new version: `None` when there is no draft, or
    /// when it is the latest version already (see [`is_latest_version`]).
    pub fn unpublished_draft(&self) -> Option<&DraftView> {
        self.draft
            .as_ref()
            .filter(|draft| !is_latest_version(&draft.content_hash, &draft.bindings, self.versions.last()))
    }
}

/// Whether a draft of `content_hash` with `bindings` is exactly the `latest` published version:
/// the same content hash AND the same bindings, so publishing it would change nothing. The one
/// rule behind [`CatalogRefusal::Unchanged`], the operators' process list and the operator CLI.
pub fn is_latest_version(
    content_hash: &str,
    bindings: &IndexMap<String, String>,
    latest: Option<&VersionSummary>,
) -> bool {
    latest.is_some_and(|latest| latest.content_hash == content_hash && latest.roles == *bindings)
}

/// A published version as stored: the source a run pins, the bindings, and the summary's facts.
/// A published version never changes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedRecord {
    /// The `PROCESS.md` exactly as imported.
    pub source: String,
    /// Role name → group id, as bound at publication.
    pub roles: IndexMap<String, String>,
    pub content_hash: String,
    /// RFC 3339, UTC.
    pub published_at: String,
    pub published_by: Option<String>,
}

/// The issues of a set of role bindings for a process whose role names are `roles`: a role it
/// does not have, or an empty group. Empty when the bindings may be applied.
pub fn binding_issues(roles: &[String], bindings: &IndexMap<String, String>) -> Vec<Issue> {
    let mut issues = Vec::new();
    for (role, group) in bindings {
        let path = format!("bindings.{role}");
        if !roles.contains(role) {
            let known = if roles.is_empty() {
                "it has no roles".to_string()
            } else {
                format!("its roles are {}", roles.join(", "))
            };
            issues.push(Issue::new(
                path,
                format!("the process has no role {role:?}; {known}"),
            ));
        } else if group.trim().is_empty() {
            issues.push(Issue::new(path, "the group must not be empty"));
        }
    }
    issues
}

/// One issue per role without a group: a process publishes only with every role bound.
pub fn unbound_issues<'r>(
    roles: impl IntoIterator<Item = &'r str>,
    bindings: &IndexMap<String, String>,
) -> Vec<Issue> {
    roles
        .into_iter()
        .filter(|role| !bindings.contains_key(*role))
        .map(|role| {
            Issue::new(
                format!("bindings.{role}"),
                format!("role {role:?} is not bound to a group of the identity provider"),
            )
        })
        .collect()
}

impl Catalog {
    pub fn new(store: Arc<dyn Store>, keys: Keys, clock: Clock) -> Self {
        Catalog { store, keys, clock }
    }

    /// Validates `source` (offering everything) and publishes it at once as the next version of
    /// its process, with the role bindings (role name → group id), bypassing drafts. For
    /// seeding and tests; operators go through [`Catalog::import_draft`] and
    /// [`Catalog::publish_draft`]. Returns the version.
    pub async fn publish(
        &self,
        organization: &OrgId,
        source: &[u8],
        roles: IndexMap<String, String>,
    ) -> Result<u64, CatalogError> {
        let loaded = load(source, &Offer::EVERYTHING).map_err(CatalogRefusal::Invalid)?;
        let unbound = unbound_issues(loaded.process.role_names(), &roles);
        if !unbound.is_empty() {
            return Err(CatalogRefusal::Invalid(unbound).into());
        }
        let source = source_text(source)?;
        let published = self
            .commit_version(organization, &loaded, source, roles, None, None)
            .await?;
        Ok(published.version.version)
    }

    /// Parses and validates `source` against what the server offers and stores it as the draft
    /// of its process, replacing an earlier draft but keeping the bindings of roles the new
    /// source still has. An invalid source is refused with every issue and changes nothing.
    pub async fn import_draft(
        &self,
        organization: &OrgId,
        source: &[u8],
        offer: &Offer,
        imported_by: &str,
    ) -> Result<Draft, CatalogError> {
        let loaded = load(source, offer).map_err(CatalogRefusal::Invalid)?;
        let text = source_text(source)?;
        let name = loaded.process.name.to_string();
        let key = self.keys.draft(organization, &name);
        let (earlier, revision) = self.read_draft(organization, &name).await?;
        let roles: Vec<String> = loaded
            .process
            .role_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        let bindings = earlier
            .map(|draft| draft.bindings)
            .unwrap_or_default()
            .into_iter()
            .filter(|(role, _)| roles.contains(role))
            .collect();
        let draft = Draft {
            name: name.clone(),
            description: loaded.process.description.clone(),
            source: text.to_string(),
            content_hash: loaded.hash.to_hex(),
            roles,
            bindings,
            imported_at: self.clock.now().to_rfc3339(),
            imported_by: imported_by.to_string(),
            required_systems: loaded.process.required_systems.clone(),
            warnings: warnings(&loaded.process)
                .iter()
                .map(ToString::to_string)
                .collect(),
        };
        self.write_draft(key, revision, &draft).await?;
        Ok(draft)
    }

    /// Sets the given role bindings on the draft of `name`; roles not named keep theirs. A role
    /// the process does not have, or an empty group, refuses the whole request with every issue.
    pub async fn bind_roles(
        &self,
        organization: &OrgId,
        name: &str,
        bindings: &IndexMap<String, String>,
    ) -> Result<Draft, CatalogError> {
        let (draft, revision) = self.read_draft(organization, name).await?;
        let mut draft = draft.ok_or_else(|| CatalogRefusal::NoDraft(name.to_string()))?;
        let issues = binding_issues(&draft.roles, bindings);
        if !issues.is_empty() {
            return Err(CatalogRefusal::Invalid(issues).into());
        }
        for (role, group) in bindings {
            draft.bindings.insert(role.clone(), group.trim().to_string());
        }
        // Bindings in the order the roles are first used, whatever order they were given in.
        let ordered = draft
            .roles
            .iter()
            .filter_map(|role| {
                draft
                    .bindings
                    .get(role)
                    .map(|group| (role.clone(), group.clone()))
            })
            .collect();
        draft.bindings = ordered;
        self.write_draft(self.keys.draft(organization, name), revision, &draft)
            .await?;
        Ok(draft)
    }

    /// Validates the draft of `name` again (what the server offers may have changed since the
    /// import) and publishes it as the next version. Refused with every issue when it is invalid
    /// or a role is unbound, and as [`CatalogRefusal::Unchanged`] when the latest version
    /// already has the same content hash and bindings. The draft stays.
    pub async fn publish_draft(
        &self,
        organization: &OrgId,
        name: &str,
        offer: &Offer,
        published_by: &str,
    ) -> Result<PublishedVersion, CatalogError> {
        let (draft, draft_revision) = self.read_draft(organization, name).await?;
        let draft = draft.ok_or_else(|| CatalogRefusal::NoDraft(name.to_string()))?;
        let (loaded, mut issues) = match load(draft.source.as_bytes(), offer) {
            Ok(loaded) => (Some(loaded), Vec::new()),
            Err(issues) => (None, issues),
        };
        issues.extend(unbound_issues(
            draft.roles.iter().map(String::as_str),
            &draft.bindings,
        ));
        let Some(loaded) = loaded.filter(|_| issues.is_empty()) else {
            return Err(CatalogRefusal::Invalid(issues).into());
        };
        if let Some(latest) = self.versions(organization, name).await?.pop()
            && is_latest_version(&draft.content_hash, &draft.bindings, Some(&latest))
        {
            return Err(CatalogRefusal::Unchanged {
                name: name.to_string(),
                version: latest.version,
            }
            .into());
        }
        let draft_unchanged = Compare::mod_revision_is(self.keys.draft(organization, name), draft_revision);
        self.commit_version(
            organization,
            &loaded,
            &draft.source,
            draft.bindings,
            Some(published_by),
            Some(draft_unchanged),
        )
        .await
    }

    /// Every process of the organization that has a published version or a draft, by name.
    /// Reads every version's record, sources included: an operator's listing, not a hot path.
    pub async fn processes(&self, organization: &OrgId) -> Result<Vec<ProcessEntry>, OrgError> {
        let mut entries: BTreeMap<String, ProcessEntry> = BTreeMap::new();
        let catalog = self
            .store
            .range(RangeRequest::new(self.keys.catalog(organization)))
            .await?;
        for kv in &catalog.kvs {
            let summary: Value = serde_json::from_slice(&kv.value)
                .map_err(|e| OrgError::Corrupt(format!("catalog entry: {e}")))?;
            let Some(name) = summary["name"].as_str() else {
                return Err(OrgError::Corrupt("catalog entry without a name".into()));
            };
            entries.insert(
                name.to_string(),
                self.published_entry(organization, name, &summary).await?,
            );
        }
        let drafts = self
            .store
            .range(RangeRequest::new(self.keys.drafts(organization)))
            .await?;
        for kv in &drafts.kvs {
            let draft: Draft =
                serde_json::from_slice(&kv.value).map_err(|e| OrgError::Corrupt(format!("draft: {e}")))?;
            add_draft(&mut entries, draft);
        }
        Ok(entries.into_values().collect())
    }

    /// One process of the organization; `None` when it has neither a version nor a draft.
    pub async fn process(&self, organization: &OrgId, name: &str) -> Result<Option<ProcessEntry>, OrgError> {
        let mut entries: BTreeMap<String, ProcessEntry> = BTreeMap::new();
        let (entry, _) = self
            .store
            .get(&self.keys.catalog_entry(organization, name))
            .await?;
        if let Some(kv) = entry {
            let summary: Value = serde_json::from_slice(&kv.value)
                .map_err(|e| OrgError::Corrupt(format!("catalog entry of {name}: {e}")))?;
            entries.insert(
                name.to_string(),
                self.published_entry(organization, name, &summary).await?,
            );
        }
        if let (Some(draft), _) = self.read_draft(organization, name).await? {
            add_draft(&mut entries, draft);
        }
        Ok(entries.remove(name))
    }

    async fn published_entry(
        &self,
        organization: &OrgId,
        name: &str,
        summary: &Value,
    ) -> Result<ProcessEntry, OrgError> {
        let versions = self.versions(organization, name).await?;
        Ok(ProcessEntry {
            name: name.to_string(),
            description: summary["description"].as_str().unwrap_or_default().to_string(),
            latest_version: versions.last().map(|v| v.version),
            versions,
            draft: None,
        })
    }

    /// Every published version of `name`, oldest first.
    async fn versions(&self, organization: &OrgId, name: &str) -> Result<Vec<VersionSummary>, OrgError> {
        let found = self
            .store
            .range(RangeRequest::new(
                self.keys.published_versions(organization, name),
            ))
            .await?;
        found
            .kvs
            .iter()
            .map(|kv| {
                let corrupt = |why: String| OrgError::Corrupt(format!("published {name}: {why}"));
                let key = self
                    .keys
                    .parse_published_process(&kv.key)
                    .ok_or_else(|| corrupt("unreadable key".into()))?;
                let record: PublishedRecord =
                    serde_json::from_slice(&kv.value).map_err(|e| corrupt(e.to_string()))?;
                Ok(VersionSummary {
                    version: key.version,
                    content_hash: record.content_hash,
                    published_at: record.published_at,
                    roles: record.roles,
                    published_by: record.published_by,
                })
            })
            .collect()
    }

    /// The draft of `name`, if one was imported and not yet published.
    pub async fn draft(&self, organization: &OrgId, name: &str) -> Result<Option<Draft>, OrgError> {
        Ok(self.read_draft(organization, name).await?.0)
    }

    async fn read_draft(&self, organization: &OrgId, name: &str) -> Result<(Option<Draft>, i64), OrgError> {
        let (found, _) = self.store.get(&self.keys.draft(organization, name)).await?;
        match found {
            None => Ok((None, 0)),
            Some(kv) => {
                let draft = serde_json::from_slice(&kv.value)
                    .map_err(|e| OrgError::Corrupt(format!("draft of {name}: {e}")))?;
                Ok((Some(draft), kv.mod_revision))
            }
        }
    }

    /// Puts the draft if it is still at `revision` (0: absent).
    async fn write_draft(&self, key: Vec<u8>, revision: i64, draft: &Draft) -> Result<(), CatalogError> {
        let value = serde_json::to_vec(draft).expect("a draft serializes");
        let txn = Txn::new()
            .when([Compare::mod_revision_is(key.clone(), revision)])
            .and_then([TxnOp::put(key, value)]);
        if !self.store.txn(txn).await?.succeeded {
            return Err(CatalogRefusal::Raced(format!("the draft of {}", draft.name)).into());
        }
        Ok(())
    }

    /// Writes the next version of the loaded process and its catalog entry in one transaction,
    /// if no other version was published since the latest was read (and `also` still holds).
    async fn commit_version(
        &self,
        organization: &OrgId,
        loaded: &LoadedProcess,
        source: &str,
        roles: IndexMap<String, String>,
        published_by: Option<&str>,
        also: Option<Compare>,
    ) -> Result<PublishedVersion, CatalogError> {
        let name = loaded.process.name.to_string();
        let entry_key = self.keys.catalog_entry(organization, &name);
        let (entry, _) = self.store.get(&entry_key).await?;
        let (latest, revision) = match &entry {
            Some(kv) => {
                let summary: Value = serde_json::from_slice(&kv.value)
                    .map_err(|e| OrgError::Corrupt(format!("catalog entry of {name}: {e}")))?;
                let latest = summary["version"]
                    .as_u64()
                    .ok_or_else(|| OrgError::Corrupt(format!("catalog entry of {name}")))?;
                (latest, kv.mod_revision)
            }
            None => (0, 0),
        };
        let version = latest + 1;
        let record = PublishedRecord {
            source: source.to_string(),
            roles,
            content_hash: loaded.hash.to_hex(),
            published_at: self.clock.now().to_rfc3339(),
            published_by: published_by.map(str::to_string),
        };
        let mut summary = json!({
            "name": name,
            "description": loaded.process.description,
            "version": version,
            "inputs": agentprocess_process::field_map_as_written(&loaded.process.inputs),
        });
        // A `list_processes` item carries `requires` when the process declares it (tools.md).
        if let Some(requires) = requires(&loaded.process.required_systems) {
            summary["requires"] = requires;
        }
        let mut compares = vec![Compare::mod_revision_is(entry_key.clone(), revision)];
        compares.extend(also);
        let txn = Txn::new().when(compares).and_then([
            TxnOp::put(
                self.keys.published_process(organization, &name, version),
                serde_json::to_vec(&record).expect("a published record serializes"),
            ),
            TxnOp::put(entry_key, summary.to_string()),
        ]);
        if !self.store.txn(txn).await?.succeeded {
            return Err(CatalogRefusal::Raced(format!("process {name}")).into());
        }
        Ok(PublishedVersion {
            name,
            version: VersionSummary {
                version,
                content_hash: record.content_hash,
                published_at: record.published_at,
                roles: record.roles,
                published_by: record.published_by,
            },
        })
    }

    /// The latest published version of `name`; `None` when nothing is published.
    pub async fn latest_version(&self, organization: &OrgId, name: &str) -> Result<Option<u64>, OrgError> {
        Ok(self
            .latest_version_entry(organization, name)
            .await?
            .map(|latest| latest.version))
    }

    /// The latest published version of `name` with the store revision of the catalog entry that
    /// says so; `None` when nothing is published.
    pub async fn latest_version_entry(
        &self,
        organization: &OrgId,
        name: &str,
    ) -> Result<Option<LatestVersion>, OrgError> {
        let key = self.keys.catalog_entry(organization, name);
        let (entry, _) = self.store.get(&key).await?;
        let Some(entry) = entry else { return Ok(None) };
        let summary: Value = serde_json::from_slice(&entry.value)
            .map_err(|e| OrgError::Corrupt(format!("catalog entry of {name}: {e}")))?;
        match summary["version"].as_u64() {
            Some(version) => Ok(Some(LatestVersion {
                version,
                entry_key: key,
                mod_revision: entry.mod_revision,
            })),
            None => Err(OrgError::Corrupt(format!("catalog entry of {name}"))),
        }
    }

    /// Why a run could not find `name` (at `version`), for the `not_found` a caller gets: no such
    /// process, no such version, or a draft that was never published.
    pub async fn unresolved_reason(
        &self,
        organization: &OrgId,
        name: &str,
        version: Option<u64>,
    ) -> Result<String, OrgError> {
        let (entry, _) = self
            .store
            .get(&self.keys.catalog_entry(organization, name))
            .await?;
        let latest = match entry {
            Some(kv) => serde_json::from_slice::<Value>(&kv.value)
                .map_err(|e| OrgError::Corrupt(format!("catalog entry of {name}: {e}")))?["version"]
                .as_u64(),
            None => None,
        };
        if let (Some(latest), Some(version)) = (latest, version) {
            return Ok(format!(
                "process {name} has no version {version}; its latest published version is {latest}"
            ));
        }
        let (draft, _) = self.read_draft(organization, name).await?;
        Ok(match draft {
            Some(_) => format!(
                "process {name} is imported as a draft but not published; an operator publishes it \
                 (agentprocess process import --publish, or POST /admin/v1/processes/{name}/publish)"
            ),
            None => format!("no published process {name} in this organization"),
        })
    }

    /// The record of `name` at exactly `version`; `None` when there is no such version.
    pub async fn published_record(
        &self,
        organization: &OrgId,
        name: &str,
        version: u64,
    ) -> Result<Option<PublishedRecord>, OrgError> {
        let (record, _) = self
            .store
            .get(&self.keys.published_process(organization, name, version))
            .await?;
        record
            .map(|record| {
                serde_json::from_slice(&record.value)
                    .map_err(|e| OrgError::Corrupt(format!("published {name} v{version}: {e}")))
            })
            .transpose()
    }
}

/// The source as text. `load` refuses what is not UTF-8, so this fails only on a bug.
/// `requires` as `list_processes` and the admin API show it: `None` when nothing is declared.
fn requires(systems: &[String]) -> Option<Value> {
    (!systems.is_empty()).then(|| json!({ "systems": systems }))
}

fn source_text(source: &[u8]) -> Result<&str, CatalogRefusal> {
    std::str::from_utf8(source)
        .map_err(|e| CatalogRefusal::Invalid(vec![Issue::new("", format!("the file is not UTF-8: {e}"))]))
}

/// Adds a draft to its process's entry, or makes an entry for a process not yet published.
fn add_draft(entries: &mut BTreeMap<String, ProcessEntry>, draft: Draft) {
    let view = draft.view();
    entries
        .entry(draft.name.clone())
        .or_insert_with(|| ProcessEntry {
            name: draft.name,
            description: draft.description,
            latest_version: None,
            versions: Vec::new(),
            draft: None,
        })
        .draft = Some(view);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bindings(pairs: &[(&str, &str)]) -> IndexMap<String, String> {
        pairs
            .iter()
            .map(|(role, group)| (role.to_string(), group.to_string()))
            .collect()
    }

    fn version(number: u64, content_hash: &str, roles: &[(&str, &str)]) -> VersionSummary {
        VersionSummary {
            version: number,
            content_hash: content_hash.to_string(),
            published_at: "2026-10-06T09:00:00Z".to_string(),
            roles: bindings(roles),
            published_by: None,
        }
    }

    fn entry(versions: Vec<VersionSummary>, draft: Option<(&str, &[(&str, &str)])>) -> ProcessEntry {
        ProcessEntry {
            name: "expense-claim".to_string(),
            description: String::new(),
            latest_version: versions.last().map(|v| v.version),
            versions,
            draft: draft.map(|(content_hash, pairs)| DraftView {
                content_hash: content_hash.to_string(),
                roles: pairs.iter().map(|(role, _)| role.to_string()).collect(),
                bindings: bindings(pairs),
                unbound: Vec::new(),
                requires: None,
                warnings: Vec::new(),
            }),
        }
    }

    #[test]
    fn a_draft_is_the_latest_version_only_with_the_same_content_hash_and_bindings() {
        let latest = version(2, "aa", &[("reviewer", "finance")]);
        let same = bindings(&[("reviewer", "finance")]);
        assert!(is_latest_version("aa", &same, Some(&latest)));
        assert!(!is_latest_version("bb", &same, Some(&latest)), "other content");
        let regrouped = bindings(&[("reviewer", "audit")]);
        assert!(
            !is_latest_version("aa", &regrouped, Some(&latest)),
            "other bindings"
        );
        assert!(!is_latest_version("aa", &same, None), "nothing published");
    }

    #[test]
    fn only_a_draft_that_differs_from_the_latest_version_is_unpublished() {
        let older = version(1, "00", &[("reviewer", "finance")]);
        let latest = version(2, "aa", &[("reviewer", "finance")]);
        let published = entry(
            vec![older.clone(), latest.clone()],
            Some(("aa", &[("reviewer", "finance")])),
        );
        assert_eq!(published.unpublished_draft(), None);
        let changed = entry(vec![latest.clone()], Some(("bb", &[("reviewer", "finance")])));
        assert_eq!(
            changed.unpublished_draft().map(|d| d.content_hash.as_str()),
            Some("bb")
        );
        let like_an_older_version = entry(vec![older, latest], Some(("00", &[("reviewer", "finance")])));
        assert!(like_an_older_version.unpublished_draft().is_some());
        let never_published = entry(Vec::new(), Some(("aa", &[])));
        assert!(never_published.unpublished_draft().is_some());
        assert_eq!(entry(vec![version(1, "aa", &[])], None).unpublished_draft(), None);
    }
}
