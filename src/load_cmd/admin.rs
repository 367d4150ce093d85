//! Publishing the benchmark processes through the admin API before the load starts.

use super::processes;
use anyhow::{Context, bail};
use serde_json::{Value, json};

/// The admin API's base path.
const ADMIN_PATH: &str = "/admin/v1";

/// A process version the server published (or already had).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub name: String,
    /// `None` when the server already had this content published and said so.
    pub version: Option<u64>,
}

/// Imports `name`, binds its roles (the approver role to the people's group) and publishes it.
///
/// Running the load generator again against the same server is fine: an import or publication of
/// content the server already holds (`409 Conflict`) is not an error.
pub async fn publish(
    http: &reqwest::Client,
    server: &str,
    operator_token: &str,
    name: &str,
) -> anyhow::Result<Published> {
    let text = processes::text(name).with_context(|| format!("{name} is not a benchmark process"))?;
    let base = format!("{}{ADMIN_PATH}/processes", server.trim_end_matches('/'));

    let import = http
        .post(&base)
        .bearer_auth(operator_token)
        .header(reqwest::header::CONTENT_TYPE, "text/markdown; charset=utf-8")
        .body(text)
        .send()
        .await
        .with_context(|| format!("POST {base}"))?;
    expect_status(import, &[200, 201, 409], &format!("importing {name}")).await?;

    if name == processes::APPROVAL {
        let url = format!("{base}/{name}/bindings");
        let bindings = json!({ "bindings": { processes::APPROVER_ROLE: processes::APPROVERS_GROUP } });
        let response = http
            .put(&url)
            .bearer_auth(operator_token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(bindings.to_string())
            .send()
            .await
            .with_context(|| format!("PUT {url}"))?;
        expect_status(
            response,
            &[200, 201, 204],
            &format!("binding the roles of {name}"),
        )
        .await?;
    }

    let url = format!("{base}/{name}/publish");
    let response = http
        .post(&url)
        .bearer_auth(operator_token)
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let (status, body) = expect_status(response, &[200, 201, 409], &format!("publishing {name}")).await?;
    let version = if status == 409 {
        None
    } else {
        let body: Value = serde_json::from_str(&body)
            .with_context(|| format!("publishing {name}: the answer is not JSON: {body}"))?;
        Some(
            body.get("version")
                .and_then(Value::as_u64)
                .with_context(|| format!("publishing {name}: the answer has no version: {body}"))?,
        )
    };
    Ok(Published {
        name: name.to_owned(),
        version,
    })
}

/// The status and body of `response`, or an error quoting both when the status is not `allowed`.
async fn expect_status(
    response: reqwest::Response,
    allowed: &[u16],
    what: &str,
) -> anyhow::Result<(u16, String)> {
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    if !allowed.contains(&status) {
        bail!("{what}: HTTP {status}: {}", body.trim());
    }
    Ok((status, body))
}
