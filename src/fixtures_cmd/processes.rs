//! The processes fixture runs pin: the load generator's two, and one that waits until a time;
//! each published through the catalog, as an operator's import and publish would, if needed.

use crate::load_cmd::processes as load;
use agentprocess_process::Offer;
use agentprocess_run_actor::fixtures::pinned_process;
use agentprocess_run_actor::machine::{OrgId, PinnedProcess};
use agentprocess_run_actor::runtime::{Catalog, CatalogError, CatalogRefusal};
use anyhow::{Context, anyhow};
use indexmap::IndexMap;
use std::sync::Arc;

/// The process whose runs wait on a timer: until the `fireAt` input, then finish.
pub const TIMER: &str = "fixture-wait";

/// [`TIMER`]'s text.
pub const TIMER_TEXT: &str = "---
name: fixture-wait
description: Waits until the time in fireAt, then finishes. Published by agentprocess fixtures.
inputs:
  fireAt: datetime
steps:
  - id: wait
    wait_until: inputs.fireAt
  - id: done
    finish: waited
---

# Fixtures: a timer

Each run holds one pending timer, at its fireAt.
";

/// Who the catalog records as having imported and published the fixture processes.
const PUBLISHER: &str = "agentprocess fixtures";

/// The text and role bindings of a process the fixtures command publishes itself.
fn builtin(name: &str) -> Option<(&'static str, IndexMap<String, String>)> {
    match name {
        TIMER => Some((TIMER_TEXT, IndexMap::new())),
        load::APPROVAL => Some((
            load::APPROVAL_TEXT,
            [(load::APPROVER_ROLE.to_owned(), load::APPROVERS_GROUP.to_owned())].into(),
        )),
        _ => load::text(name).map(|text| (text, IndexMap::new())),
    }
}

/// A process runs pin, and whether this command published that version.
#[derive(Debug)]
pub struct Resolved {
    pub pinned: Arc<PinnedProcess>,
    pub newly_published: bool,
}

/// The process `name` of `organization` at the version fixture runs pin. A process of the
/// fixtures command's own is imported, bound and published when its latest version differs
/// (as `agentprocess load` publishes it); any other must be published already.
pub async fn resolve(
    catalog: &Catalog,
    organization: &OrgId,
    name: &str,
    offer: &Offer,
) -> anyhow::Result<Resolved> {
    let (version, newly_published) = match builtin(name) {
        Some((text, bindings)) => publish(catalog, organization, text, &bindings, offer).await?,
        None => {
            let version = catalog
                .latest_version(organization, name)
                .await
                .with_context(|| format!("reading the catalog entry of {name}"))?
                .ok_or_else(|| {
                    anyhow!(
                        "no published process {name} in organization {organization}: publish it first \
                         (agentprocess process import PATH --publish)"
                    )
                })?;
            (version, false)
        }
    };
    let pinned = pinned_process(catalog, organization, name, version)
        .await
        .with_context(|| format!("reading {name} version {version}"))?
        .ok_or_else(|| anyhow!("{name} version {version} is not in the catalog"))?;
    Ok(Resolved {
        pinned,
        newly_published,
    })
}

/// Imports `text` as its process's draft, binds its roles and publishes it; the latest version
/// when it already has this content and these bindings.
async fn publish(
    catalog: &Catalog,
    organization: &OrgId,
    text: &str,
    bindings: &IndexMap<String, String>,
    offer: &Offer,
) -> anyhow::Result<(u64, bool)> {
    let draft = catalog
        .import_draft(organization, text.as_bytes(), offer, PUBLISHER)
        .await
        .map_err(|e| anyhow!("importing a fixture process: {e}"))?;
    let name = draft.name;
    if !bindings.is_empty() {
        catalog
            .bind_roles(organization, &name, bindings)
            .await
            .map_err(|e| anyhow!("binding the roles of {name}: {e}"))?;
    }
    match catalog.publish_draft(organization, &name, offer, PUBLISHER).await {
        Ok(published) => Ok((published.version.version, true)),
        Err(CatalogError::Refused(CatalogRefusal::Unchanged { version, .. })) => Ok((version, false)),
        Err(e) => Err(anyhow!("publishing {name}: {e}")),
    }
}
