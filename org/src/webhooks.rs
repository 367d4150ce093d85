//! An organization's notification webhooks and dead letters as stored: operators configure them
//! through the admin API, the scheduler delivers to them and buries what it cannot deliver;
//! operators put a dead letter back into the outbox or discard it.
//!
//! They live here, next to the catalog, because both the gateway (which configures them) and
//! the scheduler (which reads them) depend on this crate and not on each other. A webhook's
//! SECRET never leaves the server: operators see a [`WebhookView`].

use agentprocess_ids::{OrgId, RunId};
use agentprocess_store::keys::{DeadLetterKey, Keys};
use agentprocess_store::{Compare, RangeRequest, Store, StoreError, Txn, TxnOp};
use agentprocess_vocab::hex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The longest webhook id.
pub const MAX_WEBHOOK_ID_CHARS: usize = 64;
/// The longest webhook URL.
pub const MAX_WEBHOOK_URL_CHARS: usize = 2048;
/// The longest webhook secret.
pub const MAX_WEBHOOK_SECRET_BYTES: usize = 1024;
/// The longest run id a dead-letter id may name (run ids are far shorter).
pub const MAX_DEAD_LETTER_RUN_ID_BYTES: usize = 256;

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
    organization: &OrgId,
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
    organization: &OrgId,
    id: &str,
) -> Result<bool, StoreError> {
    delete_if_present(store, keys.webhook(organization, id)).await
}

/// Deletes `key` in one transaction; `false` when it was not there.
async fn delete_if_present(store: &dyn Store, key: Vec<u8>) -> Result<bool, StoreError> {
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
    organization: &OrgId,
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

/// Names one dead letter of an organization: the creation time, run id and sequence number of
/// its key. Operators see it as an opaque, URL-safe string ([`DeadLetterId::encode`]): lower-case
/// hex of the time and the sequence number (8 bytes each, big-endian) followed by the run id's
/// bytes. The organization is NOT part of it: the key is always built in the caller's own
/// organization, with the run id escaped like every id, so no id reaches another organization's
/// keys or a key that is not a dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterId {
    pub created_at_ms: u64,
    pub run_id: RunId,
    pub seq: u64,
}

impl From<DeadLetterKey> for DeadLetterId {
    fn from(key: DeadLetterKey) -> Self {
        DeadLetterId {
            created_at_ms: key.created_at_ms,
            run_id: key.run_id,
            seq: key.seq,
        }
    }
}

impl DeadLetterId {
    /// The id as operators see it.
    pub fn encode(&self) -> String {
        let mut bytes = Vec::with_capacity(16 + self.run_id.as_str().len());
        bytes.extend_from_slice(&self.created_at_ms.to_be_bytes());
        bytes.extend_from_slice(&self.seq.to_be_bytes());
        bytes.extend_from_slice(self.run_id.as_str().as_bytes());
        hex(&bytes)
    }

    /// An id [`DeadLetterId::encode`] could have written, or `None`: lower-case hex only, the
    /// two numbers, and a run id of 1 to [`MAX_DEAD_LETTER_RUN_ID_BYTES`] bytes of UTF-8.
    pub fn parse(text: &str) -> Option<DeadLetterId> {
        let digits = text.as_bytes();
        if !digits.len().is_multiple_of(2)
            || digits.len() <= 32
            || digits.len() > 2 * (16 + MAX_DEAD_LETTER_RUN_ID_BYTES)
        {
            return None;
        }
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let bytes = digits
            .chunks_exact(2)
            .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
            .collect::<Option<Vec<u8>>>()?;
        let (created_at, rest) = bytes.split_at(8);
        let (seq, run_id) = rest.split_at(8);
        Some(DeadLetterId {
            created_at_ms: u64::from_be_bytes(created_at.try_into().ok()?),
            seq: u64::from_be_bytes(seq.try_into().ok()?),
            run_id: RunId::from(String::from_utf8(run_id.to_vec()).ok()?),
        })
    }

    /// The key of this dead letter in `organization`.
    pub fn key(&self, keys: &Keys, organization: &OrgId) -> Vec<u8> {
        keys.dead_letter(organization, self.created_at_ms, &self.run_id, self.seq)
    }
}

/// The organization's dead letters, oldest first: `{ id, notification, attempts, error }`, `id`
/// being the [`DeadLetterId`] to redeliver or discard it with. Records that do not parse are
/// skipped.
pub async fn dead_letters(
    store: &dyn Store,
    keys: &Keys,
    organization: &OrgId,
    limit: usize,
) -> Result<Vec<Value>, StoreError> {
    let found = store
        .range(RangeRequest::new(keys.dead_letters(organization)).with_limit(limit))
        .await?;
    Ok(found
        .kvs
        .iter()
        .filter_map(|kv| {
            let id = DeadLetterId::from(keys.parse_dead_letter(&kv.key)?);
            let Ok(Value::Object(letter)) = serde_json::from_slice(&kv.value) else {
                return None;
            };
            let mut item = Map::new();
            item.insert("id".into(), Value::String(id.encode()));
            item.extend(letter.into_iter().filter(|(name, _)| name != "id"));
            Some(Value::Object(item))
        })
        .collect())
}

/// What became of a dead letter an operator asked to deliver again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivery {
    /// It is back in the outbox and no longer a dead letter.
    Redelivered,
    /// The organization has no such dead letter (any more).
    NotFound,
    /// It is there but holds no notification: nothing was changed.
    Unreadable,
}

/// Puts a dead letter's notification back into the outbox, under the outbox key it was buried
/// from, and deletes the dead letter, in ONE transaction that holds only while the dead letter
/// is still the one read. The scheduler then delivers it as a new entry: first attempt, to the
/// webhooks configured at that time. Callers that can reach the scheduler's hints wake it
/// (an outbox hint); others find it at the scheduler's next look at the outbox.
pub async fn redeliver_dead_letter(
    store: &dyn Store,
    keys: &Keys,
    organization: &OrgId,
    id: &DeadLetterId,
) -> Result<Redelivery, StoreError> {
    let key = id.key(keys, organization);
    let (found, _) = store.get(&key).await?;
    let Some(letter) = found else {
        return Ok(Redelivery::NotFound);
    };
    let notification = match serde_json::from_slice::<Value>(&letter.value) {
        Ok(Value::Object(mut fields)) => match fields.remove("notification") {
            Some(notification @ Value::Object(_)) => notification,
            _ => return Ok(Redelivery::Unreadable),
        },
        _ => return Ok(Redelivery::Unreadable),
    };
    let outbox = keys.outbox(id.created_at_ms, organization, &id.run_id, id.seq);
    let response = store
        .txn(
            Txn::new()
                .when([Compare::mod_revision_is(key.clone(), letter.mod_revision)])
                .and_then([TxnOp::delete(key), TxnOp::put(outbox, notification.to_string())]),
        )
        .await?;
    Ok(if response.succeeded {
        Redelivery::Redelivered
    } else {
        Redelivery::NotFound
    })
}

/// Deletes a dead letter of an organization; `false` when it had none of that id.
pub async fn discard_dead_letter(
    store: &dyn Store,
    keys: &Keys,
    organization: &OrgId,
    id: &DeadLetterId,
) -> Result<bool, StoreError> {
    delete_if_present(store, id.key(keys, organization)).await
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
        configure_webhook(&store, &keys, &OrgId::from("acme"), "b", &hook("https://b.test"))
            .await
            .unwrap();
        configure_webhook(&store, &keys, &OrgId::from("acme"), "a", &hook("https://a.test"))
            .await
            .unwrap();
        configure_webhook(&store, &keys, &OrgId::from("acme"), "a", &hook("https://a2.test"))
            .await
            .unwrap();
        configure_webhook(
            &store,
            &keys,
            &OrgId::from("globex"),
            "a",
            &hook("https://g.test"),
        )
        .await
        .unwrap();
        let listed = webhooks(&store, &keys, &OrgId::from("acme")).await.unwrap();
        assert_eq!(
            listed,
            [
                ("a".to_string(), hook("https://a2.test")),
                ("b".to_string(), hook("https://b.test"))
            ]
        );
        assert!(
            remove_webhook(&store, &keys, &OrgId::from("acme"), "a")
                .await
                .unwrap()
        );
        assert!(
            !remove_webhook(&store, &keys, &OrgId::from("acme"), "a")
                .await
                .unwrap()
        );
        assert!(
            !remove_webhook(&store, &keys, &OrgId::from("acme"), "nope")
                .await
                .unwrap()
        );
        assert_eq!(
            webhooks(&store, &keys, &OrgId::from("acme")).await.unwrap().len(),
            1
        );
        assert_eq!(
            webhooks(&store, &keys, &OrgId::from("globex")).await.unwrap(),
            [("a".to_string(), hook("https://g.test"))]
        );
    }

    fn letter_id(created_at_ms: u64, run_id: &RunId, seq: u64) -> DeadLetterId {
        DeadLetterId {
            created_at_ms,
            run_id: run_id.clone(),
            seq,
        }
    }

    #[test]
    fn a_dead_letter_id_round_trips_and_is_url_safe() {
        for id in [
            letter_id(0, &RunId::from("r"), 0),
            letter_id(1_700_000_000_000, &RunId::from("r_0123456789abcdef0123"), 7),
            letter_id(u64::MAX, &RunId::from("run/with%odd chars\u{e9}"), u64::MAX),
        ] {
            let text = id.encode();
            assert!(
                text.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{text}"
            );
            assert_eq!(DeadLetterId::parse(&text), Some(id));
        }
        let keys = Keys::new("test");
        let key = keys.dead_letter(&OrgId::from("acme"), 5, &RunId::from("r_1"), 3);
        let id = DeadLetterId::from(keys.parse_dead_letter(&key).unwrap());
        assert_eq!(id, letter_id(5, &RunId::from("r_1"), 3));
        assert_eq!(id.key(&keys, &OrgId::from("acme")), key);
    }

    #[test]
    fn a_forged_dead_letter_id_is_refused_or_stays_a_dead_letter_of_the_caller() {
        let good = letter_id(5, &RunId::from("r_1"), 3).encode();
        let longest = letter_id(5, &RunId::from("r".repeat(MAX_DEAD_LETTER_RUN_ID_BYTES)), 3).encode();
        assert!(DeadLetterId::parse(&longest).is_some());
        let too_long = letter_id(5, &RunId::from("r".repeat(MAX_DEAD_LETTER_RUN_ID_BYTES + 1)), 3).encode();
        let mut invalid_utf8 = good[..32].to_string();
        invalid_utf8.push_str("ff");
        for forged in [
            String::new(),
            good[..32].to_string(),
            good[..good.len() - 1].to_string(),
            good.to_uppercase(),
            format!("{good}0"),
            format!("{good}zz"),
            good.replace('0', "g"),
            format!("{good}/.."),
            format!("+{}", &good[1..]),
            invalid_utf8,
            too_long,
        ] {
            assert_eq!(DeadLetterId::parse(&forged), None, "{forged:?}");
        }

        // Whatever run id an id carries, its key is a dead letter of the caller's organization.
        let keys = Keys::new("test");
        for run_id in [
            "../../globex/deadletter/x",
            "r/00000000000000000001",
            "%2F",
            "x/../../webhook/main",
        ] {
            let text = letter_id(1, &RunId::from(run_id), 2).encode();
            let key = DeadLetterId::parse(&text)
                .unwrap()
                .key(&keys, &OrgId::from("acme"));
            assert!(keys.dead_letters(&OrgId::from("acme")).contains(&key), "{run_id}");
            assert!(
                !keys.dead_letters(&OrgId::from("globex")).contains(&key),
                "{run_id}"
            );
            let parsed = keys.parse_dead_letter(&key).unwrap();
            assert_eq!((parsed.org.as_str(), parsed.run_id.as_str()), ("acme", run_id));
            assert_eq!(keys.parse_webhook(&key), None);
        }
    }

    async fn bury(
        store: &EmbeddedStore,
        keys: &Keys,
        organization: &OrgId,
        created_at_ms: u64,
        run_id: &RunId,
    ) {
        let letter = json!({
            "notification": { "id": format!("{run_id}.1"), "organization": organization, "runId": run_id },
            "attempts": 8,
            "error": "https://hooks.test/a: HTTP 500",
        });
        store
            .txn(Txn::new().and_then([TxnOp::put(
                keys.dead_letter(organization, created_at_ms, run_id, 1),
                letter.to_string(),
            )]))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_redelivered_dead_letter_moves_back_to_the_outbox_in_one_step() {
        let store = EmbeddedStore::in_memory(EmbeddedOptions::default());
        let keys = Keys::new("test");
        bury(&store, &keys, &OrgId::from("acme"), 10, &RunId::from("r1")).await;
        bury(&store, &keys, &OrgId::from("acme"), 20, &RunId::from("r2")).await;
        bury(&store, &keys, &OrgId::from("globex"), 10, &RunId::from("r1")).await;

        let listed = dead_letters(&store, &keys, &OrgId::from("acme"), 10)
            .await
            .unwrap();
        assert_eq!(listed.len(), 2);
        let first = listed[0]["id"].as_str().unwrap();
        assert_eq!(first, letter_id(10, &RunId::from("r1"), 1).encode());
        assert_eq!(
            listed[0].as_object().unwrap().keys().collect::<Vec<_>>(),
            ["id", "notification", "attempts", "error"]
        );
        let id = DeadLetterId::parse(first).unwrap();

        assert_eq!(
            redeliver_dead_letter(&store, &keys, &OrgId::from("acme"), &id)
                .await
                .unwrap(),
            Redelivery::Redelivered
        );
        let outbox = store
            .range(RangeRequest::new(keys.outbox_entries()))
            .await
            .unwrap();
        assert_eq!(outbox.kvs.len(), 1);
        assert_eq!(
            outbox.kvs[0].key,
            keys.outbox(10, &OrgId::from("acme"), &RunId::from("r1"), 1)
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&outbox.kvs[0].value).unwrap(),
            json!({ "id": "r1.1", "organization": "acme", "runId": "r1" })
        );
        let left = dead_letters(&store, &keys, &OrgId::from("acme"), 10)
            .await
            .unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0]["notification"]["runId"], "r2");
        // Once only; globex's letter of the same parts is untouched.
        assert_eq!(
            redeliver_dead_letter(&store, &keys, &OrgId::from("acme"), &id)
                .await
                .unwrap(),
            Redelivery::NotFound
        );
        assert_eq!(
            dead_letters(&store, &keys, &OrgId::from("globex"), 10)
                .await
                .unwrap()
                .len(),
            1
        );

        let second = DeadLetterId::parse(left[0]["id"].as_str().unwrap()).unwrap();
        assert!(
            !discard_dead_letter(&store, &keys, &OrgId::from("globex"), &second)
                .await
                .unwrap()
        );
        assert!(
            discard_dead_letter(&store, &keys, &OrgId::from("acme"), &second)
                .await
                .unwrap()
        );
        assert!(
            !discard_dead_letter(&store, &keys, &OrgId::from("acme"), &second)
                .await
                .unwrap()
        );
        assert!(
            dead_letters(&store, &keys, &OrgId::from("acme"), 10)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store
                .range(RangeRequest::new(keys.outbox_entries()))
                .await
                .unwrap()
                .kvs
                .len(),
            1
        );
    }

    #[tokio::test]
    async fn a_dead_letter_without_a_notification_is_not_redelivered() {
        let store = EmbeddedStore::in_memory(EmbeddedOptions::default());
        let keys = Keys::new("test");
        let id = letter_id(1, &RunId::from("r1"), 1);
        store
            .txn(Txn::new().and_then([TxnOp::put(
                id.key(&keys, &OrgId::from("acme")),
                r#"{"attempts": 1}"#,
            )]))
            .await
            .unwrap();
        assert_eq!(
            redeliver_dead_letter(&store, &keys, &OrgId::from("acme"), &id)
                .await
                .unwrap(),
            Redelivery::Unreadable
        );
        assert!(
            store
                .get(&id.key(&keys, &OrgId::from("acme")))
                .await
                .unwrap()
                .0
                .is_some()
        );
        assert!(
            store
                .range(RangeRequest::new(keys.outbox_entries()))
                .await
                .unwrap()
                .kvs
                .is_empty()
        );
        assert!(
            discard_dead_letter(&store, &keys, &OrgId::from("acme"), &id)
                .await
                .unwrap()
        );
    }
}
