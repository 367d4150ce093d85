//! Organization-level state, used by the actor host, the gateway and the scheduler alike: the
//! process catalog (drafts, role bindings, published versions), notification webhooks and dead
//! letters, uploads and the blob store their bytes live in, the archive of ended runs, and the
//! clock every role reads.
//!
//! ```text
//! archive.rs    ended runs moved out of the hot store: compressed records and the list_runs index
//! catalog.rs    drafts, bindings, publication, versions, published records
//! webhooks.rs   an organization's notification webhooks and dead letters, as stored
//! uploads.rs    BlobStore over a local directory or object storage, upload records, verification
//! clock.rs      Clock: wall time read through tokio's clock, movable in tests
//! error.rs      OrgError: infrastructure failures
//! ```

mod archive;
mod catalog;
mod clock;
mod error;
mod uploads;
mod webhooks;

pub use archive::{Archive, ArchiveEntry, ArchivedRun};
pub use catalog::{
    Catalog, CatalogError, CatalogRefusal, Draft, DraftView, LatestVersion, ProcessEntry, PublishedRecord,
    PublishedVersion, VersionSummary, binding_issues, is_latest_version, unbound_issues,
};
pub use clock::Clock;
pub use error::OrgError;
pub use uploads::{
    BlobStore, BlobUrlError, Folder, LocalBlobs, ObjectBlobs, UploadRecord, Uploads, blob_path,
    blob_store_from_url,
};
pub use webhooks::{
    DeadLetterId, MAX_DEAD_LETTER_RUN_ID_BYTES, MAX_WEBHOOK_ID_CHARS, MAX_WEBHOOK_SECRET_BYTES,
    MAX_WEBHOOK_URL_CHARS, Redelivery, Webhook, WebhookView, configure_webhook, dead_letters,
    discard_dead_letter, redeliver_dead_letter, remove_webhook, webhook_from_request, webhooks,
};
