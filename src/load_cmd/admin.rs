//! Publishing the benchmark processes through the admin API before the load starts.

use super::processes;
use crate::process_admin::{AdminClient, publish_with_bindings};
use anyhow::{Context, anyhow};
use std::collections::BTreeMap;

/// A process version the server published (or already had).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub name: String,
    /// `None` when the server already had this content published and said so.
    pub version: Option<u64>,
}

/// Imports `name`, binds its roles (the approver role to the people's group) and publishes it,
/// with the same admin client as `agentprocess process import` (blocking: call it off the async
/// runtime's threads).
///
/// Running the load generator again against the same server is fine: an import or publication of
/// content the server already holds (`409 Conflict`) is not an error.
pub fn publish(server: &str, operator_token: &str, name: &str) -> anyhow::Result<Published> {
    let text = processes::text(name).with_context(|| format!("{name} is not a benchmark process"))?;
    let client = AdminClient::connect(server, Some(operator_token)).map_err(|f| anyhow!("{f}"))?;
    let mut bindings = BTreeMap::new();
    if name == processes::APPROVAL {
        bindings.insert(
            processes::APPROVER_ROLE.to_owned(),
            processes::APPROVERS_GROUP.to_owned(),
        );
    }
    let version =
        publish_with_bindings(&client, name, text, &bindings).map_err(|stop| anyhow!("{name}: {stop}"))?;
    Ok(Published {
        name: name.to_owned(),
        version,
    })
}
