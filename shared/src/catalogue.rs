//! The job catalogue of DESIGN §7: stable job type strings and their payloads. Job types
//! are strings on the wire and in the database, never Rust type names.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A job type Quire knows how to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobType {
    #[serde(rename = "analyze-document")]
    AnalyzeDocument,
    #[serde(rename = "verify-document")]
    VerifyDocument,
    #[serde(rename = "purge-document")]
    PurgeDocument,
    #[serde(rename = "provision-tenant")]
    ProvisionTenant,
    #[serde(rename = "delete-tenant")]
    DeleteTenant,
    /// The fault suite's oracle job (feature `fault-injection`, never in a release build).
    #[cfg(feature = "fault-injection")]
    #[serde(rename = "fault-test")]
    FaultTest,
}

/// Types that once existed and have no handler: the API refuses them and a worker fails
/// such a message with a safe error instead of republishing it forever.
pub const RETIRED_JOB_TYPES: &[&str] = &["generate-thumbnails", "generate-ocr-text"];

impl JobType {
    #[cfg(not(feature = "fault-injection"))]
    pub const ALL: &'static [JobType] = &[
        JobType::AnalyzeDocument,
        JobType::VerifyDocument,
        JobType::PurgeDocument,
        JobType::ProvisionTenant,
        JobType::DeleteTenant,
    ];
    #[cfg(feature = "fault-injection")]
    pub const ALL: &'static [JobType] = &[
        JobType::AnalyzeDocument,
        JobType::VerifyDocument,
        JobType::PurgeDocument,
        JobType::ProvisionTenant,
        JobType::DeleteTenant,
        JobType::FaultTest,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AnalyzeDocument => "analyze-document",
            Self::VerifyDocument => "verify-document",
            Self::PurgeDocument => "purge-document",
            Self::ProvisionTenant => "provision-tenant",
            Self::DeleteTenant => "delete-tenant",
            #[cfg(feature = "fault-injection")]
            Self::FaultTest => "fault-test",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|job_type| job_type.as_str() == text)
    }
}

impl std::fmt::Display for JobType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Payload of `analyze-document`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeDocumentPayload {
    pub document_id: Uuid,
    pub document_version_id: Uuid,
    pub force: bool,
}

/// Payload of the fault suite's `fault-test` job.
#[cfg(feature = "fault-injection")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultTestPayload {
    /// How long the handler works, in steps of at most 100 ms.
    pub work_ms: u64,
    /// Abort the whole worker process mid-run (a poison pill).
    pub abort: bool,
    /// Fail transiently on this many first attempts, then succeed.
    #[serde(default)]
    pub transient_failures: i32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_types_are_stable_strings() {
        for &job_type in JobType::ALL {
            assert_eq!(JobType::parse(job_type.as_str()), Some(job_type));
            let json = serde_json::to_string(&job_type).expect("serialize");
            assert_eq!(json, format!("\"{}\"", job_type.as_str()));
        }
        for retired in RETIRED_JOB_TYPES {
            assert_eq!(JobType::parse(retired), None);
        }
    }

    #[test]
    fn analyze_payload_has_the_catalogue_shape() {
        let payload = AnalyzeDocumentPayload {
            document_id: Uuid::nil(),
            document_version_id: Uuid::nil(),
            force: false,
        };
        let value = serde_json::to_value(payload).expect("serialize");
        let mut keys: Vec<_> = value.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["document_id", "document_version_id", "force"]);
    }
}
