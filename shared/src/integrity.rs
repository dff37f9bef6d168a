//! The integrity check: stream the stored object and compare its size and SHA-256 with
//! what the upload recorded.

use uuid::Uuid;

use crate::db::documents::{self, DocumentVersion};
use crate::jobs::{JobContext, JobError};
use crate::storage::{ObjectStore, StorageError, StorageKey};

/// The version a job names, in the job's tenant; a missing one fails the job for good.
/// The one its claim read when that is the one named, else read now.
pub async fn load_version(
    context: &JobContext,
    tenant_id: Uuid,
    document_id: Uuid,
    version_id: Uuid,
) -> Result<DocumentVersion, JobError> {
    let claimed = context.claimed_version.as_ref().filter(|version| {
        version.id == version_id
            && version.document_id == document_id
            && version.tenant_id == tenant_id
    });
    if let Some(version) = claimed {
        return Ok(version.clone());
    }
    let mut conn = context.connection().await?;
    documents::find_version(&mut conn, tenant_id, document_id, version_id)
        .await
        .map_err(JobError::database)?
        .ok_or(JobError::permanent(
            "document_missing",
            "the document version no longer exists",
        ))
}

fn source_key(version: &DocumentVersion) -> Result<StorageKey, JobError> {
    StorageKey::from_stored(&version.storage_key).ok_or(JobError::document_failed(
        "source_unreadable",
        "the stored file cannot be read",
    ))
}

/// A missing object fails the document; any other storage fault is worth a retry.
fn storage_failure(error: StorageError) -> JobError {
    match error {
        StorageError::NotFound => {
            JobError::document_failed("source_missing", "the stored file is missing")
        }
        error => JobError::storage_unavailable(error),
    }
}

/// Copies the stored object to `destination` while hashing it, then checks size and
/// SHA-256 like `verify`: the pipeline reads the bytes once for both.
pub async fn fetch_verified(
    store: &dyn ObjectStore,
    version: &DocumentVersion,
    destination: &std::path::Path,
) -> Result<(), JobError> {
    use sha2::{Digest, Sha256};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let storage_error = |error: std::io::Error| storage_failure(StorageError::Io(error));
    let mut reader = store
        .open(&source_key(version)?)
        .await
        .map_err(storage_failure)?;
    let mut file = tokio::fs::File::create(destination)
        .await
        .map_err(storage_error)?;
    let (mut hasher, mut size) = (Sha256::new(), 0u64);
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = reader.read(&mut buffer).await.map_err(storage_error)?;
        if read == 0 {
            break;
        }
        size += read as u64;
        hasher.update(&buffer[..read]);
        file.write_all(&buffer[..read])
            .await
            .map_err(storage_error)?;
    }
    file.flush().await.map_err(storage_error)?;
    check(version, size, &hex::encode(hasher.finalize()))
}

fn check(version: &DocumentVersion, size: u64, sha256: &str) -> Result<(), JobError> {
    let expected_size = u64::try_from(version.size_bytes).unwrap_or(u64::MAX);
    if size != expected_size || sha256 != version.sha256 {
        return Err(JobError::document_failed(
            "integrity_mismatch",
            "the stored file does not match its recorded size and checksum",
        ));
    }
    Ok(())
}

pub async fn verify(store: &dyn ObjectStore, version: &DocumentVersion) -> Result<(), JobError> {
    let digest = store
        .digest(&source_key(version)?)
        .await
        .map_err(storage_failure)?;
    check(version, digest.size_bytes, &digest.sha256)
}
