//! An organization's notification webhooks and dead letters as stored: operators configure them
//! through the admin API, the scheduler delivers to them and buries what it cannot deliver.
//!
//! They live here, next to the catalog, because both the gateway (which configures them) and
//! the scheduler (which reads them) depend on this crate and not on each other. A webhook's
//! SECRET never leaves the server: operators see a [`WebhookView`].

use agentprocess_store::keys::Keys;
use agentprocess_store::{Compare, RangeRequest, Store, StoreError, Txn, TxnOp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest webhook id.
pub const MAX_WEBHOOK_ID_CHARS: usize = 64;
/// The longest webhook URL.
pub const MAX_WEBHOOK_URL_CHARS: usize = 2048;
/// The longest webhook secret.
pub const MAX_WEBHOOK_SECRET_BYTES: usize = 1024;

/// A webhook of an organization: where notifications are POSTed, and the key their
/// HMAC-SHA256 signature is made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhook {
    pub url: String,
    pub secret: String,
}

/// What operators see of a webhook: everything but its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WebhookView {
    pub id: String,
    pub url: String,
}

impl Webhook {
    pub fn view(&self, id: &str) -> WebhookView {
        WebhookView {
            id: id.to_owned(),
            url: self.url.clone(),
        }
    }
}

/// Reads a webhook an operator asked to store under `id` from the request's JSON body
/// (`{ "url", "secret" }`), or every problem found at once: the id is 1 to 64 letters, digits,
/// `.`, `_` or `-`; the url an absolute `http` or `https` URL; the secret a non-blank string;
/// no other field.
pub fn webhook_from_request(id: &str, body: &Value) -> Result<Webhook, Vec<String>> {
    let mut issues = Vec::new();
    let id_chars_ok = id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if id.is_empty() || id.chars().count() > MAX_WEBHOOK_ID_CHARS || !id_chars_ok {
        issues.push(format!(
            "id {id:?} must be 1 to {MAX_WEBHOOK_ID_CHARS} letters, digits, '.', '_' or '-'"
        ));
    }
    let Some(fields) = body.as_object() else {
        issues.push("the body must be a JSON object like {\"url\": \"https://…\", \"secret\": \"…\"}".into());
        return Err(issues);
    };
    for name in fields
        .keys()
        .filter(|name| !matches!(name.as_str(), "url" | "secret"))
    {
        issues.push(format!("{name}: unknown field; a webhook has url and secret"));
    }
    let url = match fields.get("url") {
        None => {
            issues.push("url is required".into());
            None
        }
        Some(Value::String(url)) => {
            if url.chars().count() > MAX_WEBHOOK_URL_CHARS {
                issues.push(format!("url is longer than {MAX_WEBHOOK_URL_CHARS} characters"));
            } else if !is_absolute_http_url(url) {
                issues.push(format!("url {url:?} is not an absolute http(s) URL"));
            }
            Some(url.clone())
        }
        Some(_) => {
            issues.push("url must be a string".into());
            None
        }
    };
    let secret = match fields.get("secret") {
        None => {
            issues.push("secret is required: deliveries are signed with it".into());
            None
        }
        Some(Value::String(secret)) => {
            if secret.trim().is_empty() {
                issues.push("secret must not be empty".into());
            } else if secret.len() > MAX_WEBHOOK_SECRET_BYTES {
                issues.push(format!("secret is longer than {MAX_WEBHOOK_SECRET_BYTES} bytes"));
            }
            Some(secret.clone())
        }
        Some(_) => {
            issues.push("secret must be a string".into());
            None
        }
    };
    match (url, secret) {
        (Some(url), Some(secret)) if issues.is_empty() => Ok(Webhook { url, secret }),
        _ => Err(issues),
    }
}

fn is_absolute_http_url(text: &str) -> bool {
    url::Url::parse(text).is_ok_and(|url| {
        matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty())
    })
}

/// Adds or replaces a webhook of an organization.
pub async fn configure_webhook(
    store: &dyn Store,
    keys: &Keys,
    organization: &str,
    id: &str,
    webhook: &Webhook,
) -> Result<(), StoreError> {
    let value = serde_json::to_vec(webhook).expect("a webhook serializes");
    store
        .txn(Txn::new().and_then([TxnOp::put(keys.webhook(organization, id), value)]))
        .await
        .map(|_| ())
}

/// Removes a webhook of an organization; `false` when it had none of that id.
pub async fn remove_webhook(
    store: &dyn Store,
    keys: &Keys,
    organization: &str,
    id: &str,
) -> Result<bool, StoreError> {
    let key = keys.webhook(organization, id);
    let response = store
        .txn(
            Txn::new()
                .when([Compare::present(key.clone())])
                .and_then([TxnOp::delete(key)]),
        )
        .await?;
    Ok(response.succeeded)
}

/// The organization's webhooks with their ids, by id. Records that do not parse are skipped.
pub async fn webhooks(
    store: &dyn Store,
    keys: &Keys,
    organization: &str,
) -> Result<Vec<(String, Webhook)>, StoreError> {
    let found = store
        .range(RangeRequest::new(keys.webhooks(organization)))
        .await?;
    Ok(found
        .kvs
        .iter()
        .filter_map(|kv| {
            let (_, id) = keys.parse_webhook(&kv.key)?;
            let webhook = serde_json::from_slice::<Webhook>(&kv.value).ok()?;
            Some((id, webhook))
        })
        .collect())
}

/// The organization's dead letters, oldest first: `{ notification, attempts, error }`.
pub async fn dead_letters(
    store: &dyn Store,
    keys: &Keys,
    organization: &str,
    limit: usize,
) -> Result<Vec<Value>, StoreError> {
    let found = store
        .range(RangeRequest::new(keys.dead_letters(organization)).with_limit(limit))
        .await?;
    Ok(found
        .kvs
        .iter()
        .filter_map(|kv| serde_json::from_slice(&kv.value).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentprocess_store::{EmbeddedOptions, EmbeddedStore};
    use serde_json::json;

    #[test]
    fn a_webhook_needs_an_absolute_http_url_and_a_secret() {
        let webhook = webhook_from_request("main", &json!({ "url": "https://hooks.test/a", "secret": "s3" }));
        assert_eq!(
            webhook,
            Ok(Webhook {
                url: "https://hooks.test/a".into(),
                secret: "s3".into()
            })
        );
        assert!(
            webhook_from_request("local", &json!({ "url": "http://127.0.0.1:9/x", "secret": "s" })).is_ok()
        );
        for url in [
            "/relative",
            "ftp://hooks.test/a",
            "mailto:ops@acme.test",
            "https://",
            "not a url",
        ] {
            let issues = webhook_from_request("main", &json!({ "url": url, "secret": "s" })).unwrap_err();
            assert_eq!(issues, [format!("url {url:?} is not an absolute http(s) URL")]);
        }
    }

    #[test]
    fn every_problem_of_a_webhook_is_reported_at_once() {
        let issues =
            webhook_from_request("bad id!", &json!({ "secret": "  ", "events": ["x"] })).unwrap_err();
        assert_eq!(
            issues,
            [
                "id \"bad id!\" must be 1 to 64 letters, digits, '.', '_' or '-'",
                "events: unknown field; a webhook has url and secret",
                "url is required",
                "secret must not be empty",
            ]
        );
        let issues = webhook_from_request("", &json!({ "url": 7, "secret": false })).unwrap_err();
        assert_eq!(
            issues,
            [
                "id \"\" must be 1 to 64 letters, digits, '.', '_' or '-'",
                "url must be a string",
                "secret must be a string",
            ]
        );
        let issues = webhook_from_request("main", &json!({})).unwrap_err();
        assert_eq!(
            issues,
            [
                "url is required",
                "secret is required: deliveries are signed with it"
            ]
        );
        assert_eq!(webhook_from_request("main", &json!([1])).unwrap_err().len(), 1);
        let long = "x".repeat(MAX_WEBHOOK_ID_CHARS + 1);
        assert_eq!(
            webhook_from_request(&long, &json!({ "url": "https://h.test", "secret": "s" }))
                .unwrap_err()
                .len(),
            1
        );
    }

    #[test]
    fn a_view_never_carries_the_secret() {
        let webhook = Webhook {
            url: "https://hooks.test/a".into(),
            secret: "very-secret".into(),
        };
        let view = serde_json::to_value(webhook.view("main")).unwrap();
        assert_eq!(view, json!({ "id": "main", "url": "https://hooks.test/a" }));
    }

    #[tokio::test]
    async fn webhooks_are_configured_listed_and_removed_per_organization() {
        let store = EmbeddedStore::in_memory(EmbeddedOptions::default());
        let keys = Keys::new("test");
        let hook = |url: &str| Webhook {
            url: url.into(),
            secret: "s".into(),
        };
        configure_webhook(&store, &keys, "acme", "b", &hook("https://b.test"))
            .await
            .unwrap();
        configure_webhook(&store, &keys, "acme", "a", &hook("https://a.test"))
            .await
            .unwrap();
        configure_webhook(&store, &keys, "acme", "a", &hook("https://a2.test"))
            .await
            .unwrap();
        configure_webhook(&store, &keys, "globex", "a", &hook("https://g.test"))
            .await
            .unwrap();
        let listed = webhooks(&store, &keys, "acme").await.unwrap();
        assert_eq!(
            listed,
            [
                ("a".to_string(), hook("https://a2.test")),
                ("b".to_string(), hook("https://b.test"))
            ]
        );
        assert!(remove_webhook(&store, &keys, "acme", "a").await.unwrap());
        assert!(!remove_webhook(&store, &keys, "acme", "a").await.unwrap());
        assert!(!remove_webhook(&store, &keys, "acme", "nope").await.unwrap());
        assert_eq!(webhooks(&store, &keys, "acme").await.unwrap().len(), 1);
        assert_eq!(
            webhooks(&store, &keys, "globex").await.unwrap(),
            [("a".to_string(), hook("https://g.test"))]
        );
    }
}
