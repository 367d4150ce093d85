//! The operators' admin HTTP API: import `PROCESS.md` drafts, bind roles to groups, publish
//! versions, list processes; configure notification webhooks and read the notifications that
//! could not be delivered, deliver them again or discard them. JSON in and out; behind bearer
//! authentication, operators only, each in their own organization.
//!
//! ```text
//! POST /admin/v1/processes                  raw PROCESS.md bytes → 201 { name, draft }
//! PUT  /admin/v1/processes/{name}/bindings  { bindings: { role: group } } → 200 { name, draft }
//! POST /admin/v1/processes/{name}/publish   → 201 { name, version, contentHash, publishedAt, roles }
//! GET  /admin/v1/processes                  → { processes: [entry] }, by name
//! GET  /admin/v1/processes/{name}           → entry
//! GET  /admin/v1/processes/{name}/diff?from=V&to=W → what changed from version V to W (either
//!                                             may be `draft`): { from, to, diff }
//! PUT  /admin/v1/webhooks/{id}              { url, secret } → 200 { id, url }
//! GET  /admin/v1/webhooks                   → { webhooks: [{ id, url }] }, by id
//! DELETE /admin/v1/webhooks/{id}            → 204
//! GET  /admin/v1/dead-letters?limit=N       → { items: [{ id, notification, attempts, error }] }, oldest first
//! POST /admin/v1/dead-letters/{id}/redeliver → 202 { id, redelivered: true }: back in the outbox
//! DELETE /admin/v1/dead-letters/{id}        → 204
//! GET  /admin/v1/trust?process=NAME&limit=N → the trust report of NAME's checked steps
//! ```
//!
//! The trust report ([`crate::trust`]) reads runs through the tool backend, as the operator who
//! asks, so [`trust_routes`] is mounted beside [`admin_routes`] by whoever holds the backend.
//!
//! A dead letter's `id` is opaque (see [`DeadLetterId`]) and names it within the caller's
//! organization only: another organization's id is simply not found (404), a malformed one is
//! `invalid` (400). Redelivering moves the notification back into the outbox and deletes the
//! dead letter in one store transaction, then wakes the scheduler, which delivers it afresh
//! (first attempt) to the webhooks configured by then.
//!
//! Every error is `{ "error": { code, message, issues? } }`: `invalid` (400 malformed request,
//! 413 body too large, 422 refused with every issue), `forbidden` (403), `not_found` (404),
//! `conflict` (409), `unavailable` (503: the store failed; retry). Each [`AdminError`] becomes an
//! [`HttpFailure`], whose status and code [`crate::respond`] gives. A webhook's secret is
//! write-only: no answer carries it.

use crate::Identity;
use crate::auth::IdentityKind;
use crate::mcp::{ErrorCode, ToolBackend};
use crate::process_diff::{SourceDiff, source_diff};
use crate::respond::HttpFailure;
use crate::trust::{self, DEFAULT_TRUST_RUNS, MAX_TRUST_RUNS, TrustError};
use agentprocess_org::{
    Catalog, CatalogError, CatalogRefusal, DeadLetterId, Draft, OrgError, PublishedVersion, Redelivery,
    WebhookView, configure_webhook, dead_letters, discard_dead_letter, redeliver_dead_letter, remove_webhook,
    webhook_from_request, webhooks,
};
use agentprocess_process::Offer;
use agentprocess_service::Hints;
use agentprocess_store::keys::Keys;
use agentprocess_store::{Store, StoreError};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Extension, Path, RawQuery, Request, State};
use axum::http::StatusCode;
use axum::middleware::{Next, from_fn};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// The largest request body: the process crate's document limit plus a margin, so that a
/// document just over its limit is refused by validation with its issue, not here.
pub const MAX_ADMIN_BODY_BYTES: usize = agentprocess_process::parse::MAX_DOCUMENT_BYTES + 64 * 1024;
/// How many dead letters one `GET /admin/v1/dead-letters` returns without a `limit`.
pub const DEFAULT_DEAD_LETTERS: usize = 50;
/// The largest `limit` of `GET /admin/v1/dead-letters`.
pub const MAX_DEAD_LETTERS: usize = 500;

/// What the admin API works with: organization-level state in the store and the scheduler's
/// hints. No runtime: the admin API runs wherever a gateway runs.
#[derive(Debug, Clone)]
pub struct AdminParts {
    pub catalog: Catalog,
    /// The store that holds webhooks and dead letters.
    pub store: Arc<dyn Store>,
    pub keys: Keys,
    /// Told when a redelivered dead letter is back in the outbox.
    pub hints: Arc<dyn Hints>,
}

/// What the handlers share.
#[derive(Debug)]
struct Admin {
    parts: AdminParts,
    /// What this server offers (profiles, optional tools): imports and publications are
    /// validated against it.
    offer: Offer,
}

/// The admin API's routes. Expects the bearer layer in front ([`crate::auth::require_bearer`]),
/// which puts the caller's [`Identity`] in the request extensions; callers without operator
/// rights get 403. `offer` is what this server offers, which imports and publications are
/// validated against: `check-1` only while an evaluator is configured, `parallel-1` always.
///
/// ```text
/// let app = admin_routes(parts, offer).route_layer(from_fn_with_state(authenticator, require_bearer));
/// ```
pub fn admin_routes(parts: AdminParts, offer: Offer) -> Router {
    let admin = Arc::new(Admin { parts, offer });
    Router::new()
        .route("/admin/v1/processes", post(import).get(list))
        .route("/admin/v1/processes/{name}", get(show))
        .route("/admin/v1/processes/{name}/bindings", put(bind))
        .route("/admin/v1/processes/{name}/publish", post(publish))
        .route("/admin/v1/processes/{name}/diff", get(diff))
        .route("/admin/v1/webhooks", get(list_webhooks))
        .route("/admin/v1/webhooks/{id}", put(put_webhook).delete(delete_webhook))
        .route("/admin/v1/dead-letters", get(list_dead_letters))
        .route("/admin/v1/dead-letters/{id}", delete(delete_dead_letter))
        .route("/admin/v1/dead-letters/{id}/redeliver", post(redeliver))
        .route_layer(from_fn(require_operator))
        .layer(DefaultBodyLimit::max(MAX_ADMIN_BODY_BYTES))
        .with_state(admin)
}

/// `GET /admin/v1/trust`: the trust report's route, operators only, behind the same bearer
/// layer as [`admin_routes`]. It reads runs through `backend` as the operator who asks.
pub fn trust_routes<B: ToolBackend>(backend: Arc<B>, catalog: Catalog) -> Router {
    Router::new()
        .route("/admin/v1/trust", get(trust_report::<B>))
        .route_layer(from_fn(require_operator))
        .with_state(Arc::new(TrustParts { backend, catalog }))
}

/// What the trust report's route reads through.
struct TrustParts<B> {
    backend: Arc<B>,
    catalog: Catalog,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustQuery {
    process: String,
    limit: Option<usize>,
}

/// `GET /admin/v1/trust?process=NAME&limit=N`: up to `limit` runs (default
/// [`DEFAULT_TRUST_RUNS`], at most [`MAX_TRUST_RUNS`]) in start order.
async fn trust_report<B: ToolBackend>(
    State(parts): State<Arc<TrustParts<B>>>,
    Extension(identity): Extension<Identity>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, AdminError> {
    let query: TrustQuery = serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
        .map_err(|e| AdminError::Malformed(format!("the query must be ?process=NAME[&limit=N]: {e}")))?;
    let limit = query.limit.unwrap_or(DEFAULT_TRUST_RUNS);
    if limit == 0 || limit > MAX_TRUST_RUNS {
        return Err(AdminError::Malformed(format!(
            "limit must be from 1 to {MAX_TRUST_RUNS}"
        )));
    }
    if parts
        .catalog
        .process(&identity.organization, &query.process)
        .await?
        .is_none()
    {
        return Err(AdminError::NoProcess(query.process));
    }
    let report = trust::collect(
        parts.backend.as_ref(),
        &parts.catalog,
        &identity,
        &query.process,
        limit,
    )
    .await
    .map_err(AdminError::Trust)?;
    Ok(Json(json!(report)))
}

/// Lets only operators through.
pub(crate) async fn require_operator(request: Request, next: Next) -> Response {
    match request.extensions().get::<Identity>() {
        Some(identity) if identity.operator => next.run(request).await,
        Some(_) => AdminError::Forbidden.into_response(),
        // Mounted without the bearer layer: a wiring bug, and still no way in.
        None => AdminError::Unauthenticated.into_response(),
    }
}

/// Why an admin request failed. [`crate::respond`] writes it as a status and an error body.
#[derive(Debug)]
pub enum AdminError {
    /// The request itself is malformed.
    Malformed(String),
    /// The body is larger than [`MAX_ADMIN_BODY_BYTES`].
    TooLarge,
    Unauthenticated,
    Forbidden,
    /// The catalog said no.
    Refused(CatalogRefusal),
    NoProcess(String),
    /// A diff named a version (or the draft) the process does not have.
    NoVersion {
        name: String,
        version: String,
    },
    /// A webhook an operator asked to store breaks a rule: every issue found (422).
    InvalidWebhook(Vec<String>),
    NoWebhook(String),
    NoDeadLetter(String),
    /// A dead letter that holds no notification cannot be delivered, only discarded (409).
    UnreadableDeadLetter(String),
    /// The store failed: nothing is known to have changed; retry.
    Unavailable(OrgError),
    /// The trust report could not read the runs: a tool refused, or something did not read.
    Trust(TrustError),
}

impl From<CatalogError> for AdminError {
    fn from(error: CatalogError) -> Self {
        match error {
            CatalogError::Refused(refusal) => AdminError::Refused(refusal),
            CatalogError::Failed(error) => AdminError::Unavailable(error),
        }
    }
}

impl From<OrgError> for AdminError {
    fn from(error: OrgError) -> Self {
        AdminError::Unavailable(error)
    }
}

impl From<StoreError> for AdminError {
    fn from(error: StoreError) -> Self {
        AdminError::Unavailable(OrgError::Store(error))
    }
}

impl From<BytesRejection> for AdminError {
    fn from(rejection: BytesRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            AdminError::TooLarge
        } else {
            AdminError::Malformed(format!(
                "the request body cannot be read: {}",
                rejection.body_text()
            ))
        }
    }
}

impl From<AdminError> for HttpFailure {
    fn from(error: AdminError) -> Self {
        match error {
            AdminError::Malformed(message) => HttpFailure::Malformed(message),
            AdminError::TooLarge => HttpFailure::TooLarge(format!(
                "the request body is larger than the limit of {MAX_ADMIN_BODY_BYTES} bytes"
            )),
            AdminError::Unauthenticated => HttpFailure::Unauthenticated("a bearer token is required".into()),
            AdminError::Forbidden => HttpFailure::Forbidden(
                "the admin API needs an operator: this token has no operator rights".into(),
            ),
            AdminError::Refused(refusal) => {
                let message = refusal.to_string();
                match refusal {
                    CatalogRefusal::Invalid(issues) => HttpFailure::Refused {
                        message: format!("{} issue(s) found; nothing was changed", issues.len()),
                        issues: issues.iter().map(ToString::to_string).collect(),
                    },
                    CatalogRefusal::NoDraft(_) => HttpFailure::NotFound(message),
                    CatalogRefusal::Unchanged { .. } | CatalogRefusal::Raced(_) => {
                        HttpFailure::Conflict(message)
                    }
                }
            }
            AdminError::NoProcess(name) => {
                HttpFailure::NotFound(format!("there is no process {name:?} in this organization"))
            }
            AdminError::NoVersion { name, version } => HttpFailure::NotFound(match version.as_str() {
                "draft" => format!("process {name:?} has no draft"),
                _ => format!("process {name:?} has no version {version}"),
            }),
            AdminError::InvalidWebhook(issues) => HttpFailure::Refused {
                message: format!("{} issue(s) found; nothing was changed", issues.len()),
                issues,
            },
            AdminError::NoWebhook(id) => {
                HttpFailure::NotFound(format!("there is no webhook {id:?} in this organization"))
            }
            AdminError::NoDeadLetter(id) => {
                HttpFailure::NotFound(format!("there is no dead letter {id:?} in this organization"))
            }
            AdminError::UnreadableDeadLetter(id) => HttpFailure::Conflict(format!(
                "dead letter {id:?} holds no notification that can be delivered; nothing was changed (it can be deleted)"
            )),
            AdminError::Unavailable(error) => {
                tracing::error!(%error, "admin request failed");
                HttpFailure::Unavailable(format!("{error}; try again"))
            }
            AdminError::Trust(TrustError::Refused { tool, error }) => {
                let message = format!("{tool}: {}", error.message);
                match error.code {
                    ErrorCode::NotFound => HttpFailure::NotFound(message),
                    ErrorCode::Forbidden => HttpFailure::Forbidden(message),
                    ErrorCode::Invalid => HttpFailure::Malformed(message),
                    _ => HttpFailure::Unavailable(format!("{message}; try again")),
                }
            }
            AdminError::Trust(TrustError::Catalog(error)) => AdminError::Unavailable(error).into(),
            AdminError::Trust(error @ TrustError::Corrupt(_)) => {
                tracing::error!(%error, "trust report failed");
                HttpFailure::Unavailable(error.to_string())
            }
        }
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let failure = HttpFailure::from(self);
        if failure.status() != StatusCode::SERVICE_UNAVAILABLE {
            tracing::debug!(
                status = failure.status().as_u16(),
                code = failure.code().as_str(),
                detail = failure.body()["error"]["message"].as_str().unwrap_or_default(),
                "admin request refused"
            );
        }
        failure.into_response()
    }
}

/// Who did it, as recorded on drafts and versions: a person's email or an agent's id.
fn who(identity: &Identity) -> &str {
    match &identity.kind {
        IdentityKind::Person { email, .. } => email,
        IdentityKind::Agent { id } => id,
    }
}

fn draft_response(draft: &Draft) -> Value {
    json!({ "name": draft.name, "draft": draft.view() })
}

/// `POST /admin/v1/processes`: the body is the PROCESS.md, whatever its content type.
async fn import(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    let source = body?;
    let draft = import_process(&admin.parts, &admin.offer, &identity, &source).await?;
    Ok((StatusCode::CREATED, Json(draft_response(&draft))))
}

/// Imports `source` as the draft of its process, validated against `offer`.
pub async fn import_process(
    parts: &AdminParts,
    offer: &Offer,
    identity: &Identity,
    source: &[u8],
) -> Result<Draft, AdminError> {
    Ok(parts
        .catalog
        .import_draft(&identity.organization, source, offer, who(identity))
        .await?)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BindingsBody {
    bindings: IndexMap<String, String>,
}

/// `PUT /admin/v1/processes/{name}/bindings`.
async fn bind(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, AdminError> {
    let body = body?;
    let request: BindingsBody = serde_json::from_slice(&body).map_err(|e| {
        AdminError::Malformed(format!(
            "the body must be JSON like {{\"bindings\": {{\"role\": \"group\"}}}}: {e}"
        ))
    })?;
    let draft = bind_process_roles(&admin.parts, &identity, &name, &request.bindings).await?;
    Ok(Json(draft_response(&draft)))
}

/// Binds roles of the draft of `name` to groups; roles not named keep theirs.
pub async fn bind_process_roles(
    parts: &AdminParts,
    identity: &Identity,
    name: &str,
    bindings: &IndexMap<String, String>,
) -> Result<Draft, AdminError> {
    Ok(parts
        .catalog
        .bind_roles(&identity.organization, name, bindings)
        .await?)
}

/// `POST /admin/v1/processes/{name}/publish`.
async fn publish(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    let published = publish_process(&admin.parts, &admin.offer, &identity, &name).await?;
    Ok((StatusCode::CREATED, Json(json!(published))))
}

/// Publishes the draft of `name` as its next version, validated again against `offer`.
pub async fn publish_process(
    parts: &AdminParts,
    offer: &Offer,
    identity: &Identity,
    name: &str,
) -> Result<PublishedVersion, AdminError> {
    let published = parts
        .catalog
        .publish_draft(&identity.organization, name, offer, who(identity))
        .await?;
    tracing::info!(
        organization = %identity.organization,
        process = %published.name,
        version = published.version.version,
        content_hash = %published.version.content_hash,
        by = %who(identity),
        "process published"
    );
    Ok(published)
}

/// `GET /admin/v1/processes`.
async fn list(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
) -> Result<Json<Value>, AdminError> {
    let processes = admin.parts.catalog.processes(&identity.organization).await?;
    Ok(Json(json!({ "processes": processes })))
}

/// `GET /admin/v1/processes/{name}`.
async fn show(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
    Path(name): Path<String>,
) -> Result<Json<Value>, AdminError> {
    match admin.parts.catalog.process(&identity.organization, &name).await? {
        Some(entry) => Ok(Json(json!(entry))),
        None => Err(AdminError::NoProcess(name)),
    }
}

/// What a diff's sides must be.
const DIFF_QUERY_RULE: &str = "the query must be ?from=V&to=W, each a published version number or draft";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiffQuery {
    from: String,
    to: String,
}

/// One side of a diff: a published version or the draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiffSide {
    Version(u64),
    Draft,
}

impl DiffSide {
    fn parse(text: &str) -> Option<DiffSide> {
        match text {
            "draft" => Some(DiffSide::Draft),
            _ => text.parse().ok().filter(|v| *v > 0).map(DiffSide::Version),
        }
    }
}

/// `GET /admin/v1/processes/{name}/diff?from=V&to=W`: the line diff of the two texts as
/// imported, each side named with its content hash.
async fn diff(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, AdminError> {
    let query: DiffQuery = serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
        .map_err(|_| AdminError::Malformed(DIFF_QUERY_RULE.to_owned()))?;
    let diff = process_diff(&admin.parts.catalog, &identity, &name, &query.from, &query.to).await?;
    Ok(Json(json!(diff)))
}

/// What changed in a process between two of its texts.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessDiff {
    pub name: String,
    /// `{ version, contentHash, publishedAt }` or `{ draft: true, contentHash, importedAt }`.
    pub from: Value,
    pub to: Value,
    pub diff: SourceDiff,
}

/// What changed in process `name` from `from` to `to` (each a version number or `draft`), each
/// side named with its content hash.
pub async fn process_diff(
    catalog: &Catalog,
    identity: &Identity,
    name: &str,
    from: &str,
    to: &str,
) -> Result<ProcessDiff, AdminError> {
    let (Some(from_side), Some(to_side)) = (DiffSide::parse(from), DiffSide::parse(to)) else {
        return Err(AdminError::Malformed(DIFF_QUERY_RULE.to_owned()));
    };
    if catalog.process(&identity.organization, name).await?.is_none() {
        return Err(AdminError::NoProcess(name.to_owned()));
    }
    let mut sides = Vec::with_capacity(2);
    for (side, text) in [(from_side, from), (to_side, to)] {
        sides.push(diff_side(catalog, identity, name, side, text).await?);
    }
    let label = |side: DiffSide| match side {
        DiffSide::Version(version) => format!("{name} v{version}"),
        DiffSide::Draft => format!("{name} draft"),
    };
    let diff = source_diff(&sides[0].0, &sides[1].0, &label(from_side), &label(to_side));
    let [(_, from), (_, to)]: [(String, Value); 2] = sides.try_into().expect("two sides");
    Ok(ProcessDiff {
        name: name.to_owned(),
        from,
        to,
        diff,
    })
}

/// One side's text and how it is described (version or draft, with its content hash).
async fn diff_side(
    catalog: &Catalog,
    identity: &Identity,
    name: &str,
    side: DiffSide,
    text: &str,
) -> Result<(String, Value), AdminError> {
    let no_version = || AdminError::NoVersion {
        name: name.to_owned(),
        version: text.to_owned(),
    };
    match side {
        DiffSide::Version(version) => {
            let record = catalog
                .published_record(&identity.organization, name, version)
                .await?
                .ok_or_else(no_version)?;
            let described = json!({ "version": version, "contentHash": record.content_hash,
                                    "publishedAt": record.published_at });
            Ok((record.source, described))
        }
        DiffSide::Draft => {
            let draft = catalog
                .draft(&identity.organization, name)
                .await?
                .ok_or_else(no_version)?;
            let described = json!({ "draft": true, "contentHash": draft.content_hash,
                                    "importedAt": draft.imported_at });
            Ok((draft.source, described))
        }
    }
}

/// `PUT /admin/v1/webhooks/{id}`: adds or replaces a webhook; answers it without its secret.
async fn put_webhook(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<WebhookView>, AdminError> {
    let body = body?;
    let request: Value = serde_json::from_slice(&body).map_err(|e| {
        AdminError::Malformed(format!(
            "the body must be JSON like {{\"url\": \"https://…\", \"secret\": \"…\"}}: {e}"
        ))
    })?;
    Ok(Json(store_webhook(&admin.parts, &identity, &id, &request).await?))
}

/// Adds or replaces webhook `id` from `{ url, secret }`; its view carries no secret.
pub async fn store_webhook(
    parts: &AdminParts,
    identity: &Identity,
    id: &str,
    request: &Value,
) -> Result<WebhookView, AdminError> {
    let webhook = webhook_from_request(id, request).map_err(AdminError::InvalidWebhook)?;
    configure_webhook(
        parts.store.as_ref(),
        &parts.keys,
        &identity.organization,
        id,
        &webhook,
    )
    .await?;
    Ok(webhook.view(id))
}

/// `GET /admin/v1/webhooks`: the organization's webhooks by id, without their secrets.
async fn list_webhooks(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
) -> Result<Json<Value>, AdminError> {
    let views = webhook_views(&admin.parts, &identity).await?;
    Ok(Json(json!({ "webhooks": views })))
}

/// The organization's webhooks by id, without their secrets.
pub async fn webhook_views(parts: &AdminParts, identity: &Identity) -> Result<Vec<WebhookView>, AdminError> {
    let found = webhooks(parts.store.as_ref(), &parts.keys, &identity.organization).await?;
    Ok(found.iter().map(|(id, webhook)| webhook.view(id)).collect())
}

/// `DELETE /admin/v1/webhooks/{id}`.
async fn delete_webhook(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
    Path(id): Path<String>,
) -> Result<StatusCode, AdminError> {
    delete_webhook_of(&admin.parts, &identity, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Removes webhook `id`; [`AdminError::NoWebhook`] when there is none.
pub async fn delete_webhook_of(parts: &AdminParts, identity: &Identity, id: &str) -> Result<(), AdminError> {
    if remove_webhook(parts.store.as_ref(), &parts.keys, &identity.organization, id).await? {
        Ok(())
    } else {
        Err(AdminError::NoWebhook(id.to_owned()))
    }
}

/// `GET /admin/v1/dead-letters?limit=N`: notifications that could not be delivered, oldest first.
async fn list_dead_letters(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, AdminError> {
    let limit = dead_letters_limit(query.as_deref()).ok_or_else(|| AdminError::Malformed(
        format!(
            "the only parameter is limit, an integer from 1 to {MAX_DEAD_LETTERS} (default {DEFAULT_DEAD_LETTERS})"
        ),
    ))?;
    let items = dead_letter_items(&admin.parts, &identity, limit).await?;
    Ok(Json(json!({ "items": items })))
}

/// Up to `limit` dead letters, oldest first: `{ id, notification, attempts, error }` each.
pub async fn dead_letter_items(
    parts: &AdminParts,
    identity: &Identity,
    limit: usize,
) -> Result<Vec<Value>, AdminError> {
    Ok(dead_letters(parts.store.as_ref(), &parts.keys, &identity.organization, limit).await?)
}

/// The dead letter an id in a path names, or 400 when it is not an id this server gives.
fn dead_letter_id(id: &str) -> Result<DeadLetterId, AdminError> {
    DeadLetterId::parse(id).ok_or_else(|| {
        AdminError::Malformed(format!(
            "{id:?} is not a dead letter id: use an id from GET /admin/v1/dead-letters"
        ))
    })
}

/// `POST /admin/v1/dead-letters/{id}/redeliver`: the notification goes back into the outbox
/// and the scheduler is woken to deliver it.
async fn redeliver(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), AdminError> {
    redeliver_letter(&admin.parts, &identity, &id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "id": id, "redelivered": true })),
    ))
}

/// Moves dead letter `id` back into the outbox and wakes the scheduler to deliver it.
pub async fn redeliver_letter(parts: &AdminParts, identity: &Identity, id: &str) -> Result<(), AdminError> {
    let letter = dead_letter_id(id)?;
    match redeliver_dead_letter(parts.store.as_ref(), &parts.keys, &identity.organization, &letter).await? {
        Redelivery::Redelivered => {
            parts.hints.outbox_written();
            Ok(())
        }
        Redelivery::NotFound => Err(AdminError::NoDeadLetter(id.to_owned())),
        Redelivery::Unreadable => Err(AdminError::UnreadableDeadLetter(id.to_owned())),
    }
}

/// `DELETE /admin/v1/dead-letters/{id}`.
async fn delete_dead_letter(
    State(admin): State<Arc<Admin>>,
    Extension(identity): Extension<Identity>,
    Path(id): Path<String>,
) -> Result<StatusCode, AdminError> {
    discard_letter(&admin.parts, &identity, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes dead letter `id`; [`AdminError::NoDeadLetter`] when there is none.
pub async fn discard_letter(parts: &AdminParts, identity: &Identity, id: &str) -> Result<(), AdminError> {
    let letter = dead_letter_id(id)?;
    if discard_dead_letter(parts.store.as_ref(), &parts.keys, &identity.organization, &letter).await? {
        Ok(())
    } else {
        Err(AdminError::NoDeadLetter(id.to_owned()))
    }
}

/// The `limit` of a dead-letters query string; `None` when the query is not `limit=N` with N
/// from 1 to [`MAX_DEAD_LETTERS`] (or empty).
fn dead_letters_limit(query: Option<&str>) -> Option<usize> {
    let mut limit = DEFAULT_DEAD_LETTERS;
    let mut seen = false;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
    {
        let value = pair.strip_prefix("limit=")?;
        if seen {
            return None;
        }
        seen = true;
        limit = value.parse().ok()?;
    }
    (1..=MAX_DEAD_LETTERS).contains(&limit).then_some(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dead_letters_limit_defaults_to_50_and_stays_within_1_to_500() {
        assert_eq!(dead_letters_limit(None), Some(DEFAULT_DEAD_LETTERS));
        assert_eq!(dead_letters_limit(Some("")), Some(DEFAULT_DEAD_LETTERS));
        assert_eq!(dead_letters_limit(Some("limit=1")), Some(1));
        assert_eq!(dead_letters_limit(Some("limit=500")), Some(500));
        for refused in [
            "limit=0",
            "limit=501",
            "limit=x",
            "limit=",
            "limit=-1",
            "limit=2&limit=3",
            "cursor=a",
        ] {
            assert_eq!(dead_letters_limit(Some(refused)), None, "{refused}");
        }
    }
}
