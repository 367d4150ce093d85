//! Publishing the benchmark processes through the admin API before the load starts.

use super::processes;
use crate::process_admin::{AdminClient, Failure};
use anyhow::{Context, anyhow};
use reqwest::Method;
use serde_json::json;

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
    let already_held = |failure: &Failure| {
        matches!(
            failure,
            Failure::Refused {
                status: Some(409),
                ..
            }
        )
    };

    match client.call(Method::POST, "/admin/v1/processes", text.as_bytes().to_vec()) {
        Err(failure) if !already_held(&failure) => return Err(anyhow!("importing {name}: {failure}")),
        _ => {}
    }
    if name == processes::APPROVAL {
        let bindings = json!({ "bindings": { processes::APPROVER_ROLE: processes::APPROVERS_GROUP } });
        client
            .call(
                Method::PUT,
                &format!("/admin/v1/processes/{name}/bindings"),
                bindings.to_string().into_bytes(),
            )
            .map_err(|failure| anyhow!("binding the roles of {name}: {failure}"))?;
    }
    let version = match client.call(
        Method::POST,
        &format!("/admin/v1/processes/{name}/publish"),
        Vec::new(),
    ) {
        Ok(body) => Some(
            body["version"]
                .as_u64()
                .with_context(|| format!("publishing {name}: the answer has no version: {body}"))?,
        ),
        Err(failure) if already_held(&failure) => None,
        Err(failure) => return Err(anyhow!("publishing {name}: {failure}")),
    };
    Ok(Published {
        name: name.to_owned(),
        version,
    })
}
