//! The `upload` tool: the bytes go to the organization's blob store, the record and the
//! idempotency record in one store transaction, so a retried upload answers as the first did.

use crate::actor::Host;
use crate::call::{RuntimeError, ToolOutcome};
use crate::idempotency::{self, IdempotencyRecord};
use crate::machine::{Caller, Refusal, hex};
use agentprocess_org::{UploadRecord, Uploads, blob_path};
use agentprocess_service::Upload;
use agentprocess_store::{Compare, Txn, TxnOp};
use serde_json::json;
use sha2::{Digest, Sha256};

pub(super) async fn upload(
    host: &Host,
    uploads: &Uploads,
    caller: &Caller,
    upload: Upload,
    request_id: &str,
) -> Result<ToolOutcome, RuntimeError> {
    let organization = &caller.organization;
    let max = host.config.max_upload_bytes;
    if upload.bytes.len() > max {
        return Ok(ToolOutcome::Refused(
            Refusal::invalid(format!("the file is larger than maxUploadBytes ({max})"))
                .with_issues(vec![format!("contentBase64: larger than {max} bytes")]),
        ));
    }
    let sha256 = hex(&Sha256::digest(&upload.bytes));
    let fingerprint = idempotency::of_upload(caller, &upload, &sha256);
    if let Some(answer) = idempotency::replay(
        host.store.as_ref(),
        &host.keys,
        &host.pinned,
        organization,
        request_id,
        &fingerprint,
    )
    .await?
    {
        return Ok(answer);
    }
    // The id comes from the request, so a retry writes the same blob and finds the same record.
    let id = {
        let mut hasher = Sha256::new();
        hasher.update(organization.as_str().as_bytes());
        hasher.update([0]);
        hasher.update(request_id.as_bytes());
        format!("f_{}", &hex(&hasher.finalize())[..20])
    };
    let path = blob_path(organization, &id);
    uploads
        .blobs()
        .put(&path, &upload.bytes)
        .await
        .map_err(RuntimeError::Blobs)?;
    let record = UploadRecord {
        id: id.clone(),
        file_name: upload.file_name,
        content_type: upload.content_type,
        sha256: sha256.clone(),
        bytes: upload.bytes.len() as u64,
        path,
        by: caller.name().to_string(),
    };
    let data = json!({ "id": id, "sha256": sha256, "bytes": record.bytes });
    let now = host.clock.now();
    let expires = now.plus_seconds(host.config.idempotency_retention.as_secs());
    let answer = IdempotencyRecord {
        fingerprint: &fingerprint,
        run_id: None,
        at: now,
        data: &data,
        pinned_body: None,
    };
    let txn = Txn::new()
        .when([Compare::absent(host.keys.idempotency(organization, request_id))])
        .and_then([TxnOp::put(
            host.keys.upload(organization, &id),
            serde_json::to_vec(&record).expect("an upload record serializes"),
        )])
        .and_then(answer.puts(&host.keys, organization, request_id, expires));
    if host.store.txn(txn).await?.succeeded {
        return Ok(ToolOutcome::Ok(data));
    }
    Ok(idempotency::replay(
        host.store.as_ref(),
        &host.keys,
        &host.pinned,
        organization,
        request_id,
        &fingerprint,
    )
    .await?
    .unwrap_or(ToolOutcome::Ok(data)))
}
