//! A document as an upload records it, for tests that need one without the API.

use uuid::Uuid;

use crate::db::documents::NewDocument;
use crate::db::intake::NewIntake;
use crate::db::jobs::NewJob;
use crate::jobs::AnalyzeDocument;
use crate::storage::StorageKey;

/// A new document of `tenant_id` whose first version `version_id` names the object under
/// `key` (`size_bytes` long), with its analysis job: what `intake::record` takes.
pub fn analysis_intake(
    tenant_id: Uuid,
    version_id: Uuid,
    key: &StorageKey,
    size_bytes: i64,
    max_attempts: i32,
) -> NewIntake<AnalyzeDocument> {
    let document_id = Uuid::now_v7();
    NewIntake {
        document: NewDocument {
            id: document_id,
            tenant_id,
            title: "stored".to_owned(),
            version_id,
            storage_key: key.as_str().to_owned(),
            size_bytes,
            sha256: "0".repeat(64),
            content_type: "application/pdf".to_owned(),
            original_filename: None,
        },
        job: NewJob::new(
            tenant_id,
            AnalyzeDocument {
                document_id,
                document_version_id: version_id,
                force: false,
            },
            max_attempts,
            None,
        ),
    }
}
