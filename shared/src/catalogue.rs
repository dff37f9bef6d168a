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

/// What clients and operators may know of a job type (served by the job catalogue
/// route): payload shape, who enqueues it, the tenant state it needs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct JobTypeInfo {
    #[serde(rename = "type")]
    pub job_type: &'static str,
    /// Payload fields and their JSON types.
    pub payload: &'static [(&'static str, &'static str)],
    pub enqueued_by: &'static str,
    pub required_tenant_status: &'static str,
    pub work: &'static str,
}

impl JobType {
    pub fn info(self) -> JobTypeInfo {
        let (payload, enqueued_by, required_tenant_status, work): (
            &'static [(&'static str, &'static str)],
            &'static str,
            &'static str,
            &'static str,
        ) = match self {
            Self::AnalyzeDocument => (
                &[
                    ("document_id", "uuid"),
                    ("document_version_id", "uuid"),
                    ("force", "boolean"),
                ],
                "upload, bulk re-analyze, title edit",
                "active",
                "verify integrity, thumbnails, text and OCR, issued-at date, search index",
            ),
            Self::VerifyDocument => (
                &[("document_id", "uuid"), ("document_version_id", "uuid")],
                "bulk verify, scheduled scrub",
                "active",
                "integrity check only",
            ),
            Self::PurgeDocument => (
                &[("document_id", "uuid")],
                "DELETE of a trashed document",
                "active",
                "remove every version and asset object, then the rows",
            ),
            Self::ProvisionTenant => (
                &[("members", "uuid[]")],
                "tenant creation",
                "creating",
                "search index, capability sets, members, then active",
            ),
            Self::DeleteTenant => (
                &[
                    ("remove_tenant", "boolean"),
                    ("tenant_name", "string"),
                    ("action", "\"delete\" | \"reset\""),
                    ("nonce", "string"),
                    ("issued_at", "RFC 3339 date-time"),
                    ("signature", "hex HMAC-SHA256"),
                    ("final_status", "\"active\" | \"suspended\" (optional)"),
                ],
                "admin, tenant deleting",
                "deleting",
                "verify the signed request, wipe storage, index and rows",
            ),
            #[cfg(feature = "fault-injection")]
            Self::FaultTest => (
                &[("work_ms", "integer"), ("abort", "boolean")],
                "the fault suite",
                "any",
                "test oracle",
            ),
        };
        JobTypeInfo {
            job_type: self.as_str(),
            payload,
            enqueued_by,
            required_tenant_status,
            work,
        }
    }
}

/// Payload of `purge-document`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeDocumentPayload {
    pub document_id: Uuid,
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
