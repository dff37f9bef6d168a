//! The job catalogue of DESIGN §7: stable job type strings and their payloads. Job types
//! are strings on the wire and in the database, never Rust type names.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::permissions::MemberSpec;
use crate::states::TenantStatus;

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
    /// Does nothing: the queue's own cost, measured by `quire-bench`.
    #[serde(rename = "bench-noop")]
    BenchNoop,
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
        JobType::BenchNoop,
    ];
    #[cfg(feature = "fault-injection")]
    pub const ALL: &'static [JobType] = &[
        JobType::AnalyzeDocument,
        JobType::VerifyDocument,
        JobType::PurgeDocument,
        JobType::ProvisionTenant,
        JobType::DeleteTenant,
        JobType::BenchNoop,
        JobType::FaultTest,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AnalyzeDocument => "analyze-document",
            Self::VerifyDocument => "verify-document",
            Self::PurgeDocument => "purge-document",
            Self::ProvisionTenant => "provision-tenant",
            Self::DeleteTenant => "delete-tenant",
            Self::BenchNoop => "bench-noop",
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

/// How a job type's transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryClass {
    /// Retried with jittered exponential backoff up to `jobs.max_attempts` attempts.
    Backoff,
    /// At most three attempts: the signed request it carries expires within minutes.
    ShortLived,
}

/// Everything Quire knows of a job type, defined once here: served by the catalogue
/// route, rendered into `docs/jobs.md`, and used by the worker (tenant guard, time limit)
/// and by every enqueue (attempts).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct JobTypeInfo {
    #[serde(rename = "type")]
    pub job_type: &'static str,
    /// Payload fields and their JSON types.
    #[serde(serialize_with = "payload_as_object")]
    pub payload: &'static [(&'static str, &'static str)],
    pub enqueued_by: &'static str,
    /// The tenant state the job needs; the worker fails it at once otherwise.
    pub required_tenant_status: Option<TenantStatus>,
    pub retry: RetryClass,
    /// Wall-clock limit of one attempt; past it the attempt fails transiently.
    pub time_limit_seconds: u64,
    pub work: &'static str,
}

fn payload_as_object<S: serde::Serializer>(
    payload: &&'static [(&'static str, &'static str)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(payload.len()))?;
    for (field, kind) in payload.iter() {
        map.serialize_entry(field, kind)?;
    }
    map.end()
}

impl JobType {
    pub fn info(self) -> JobTypeInfo {
        use TenantStatus::*;
        // What each type is: (payload, enqueued by, tenant state, retry, time limit, work).
        type Spec = (
            &'static [(&'static str, &'static str)],
            &'static str,
            Option<TenantStatus>,
            RetryClass,
            u64,
            &'static str,
        );
        let (payload, enqueued_by, required_tenant_status, retry, time_limit_seconds, work): Spec =
            match self {
                Self::AnalyzeDocument => (
                    &[
                        ("document_id", "uuid"),
                        ("document_version_id", "uuid"),
                        ("force", "boolean"),
                    ],
                    "upload, bulk re-analyze, metadata edit",
                    Some(Active),
                    RetryClass::Backoff,
                    600,
                    "verify integrity, thumbnails, text and OCR, issued-at date, search index",
                ),
                Self::VerifyDocument => (
                    &[("document_id", "uuid"), ("document_version_id", "uuid")],
                    "bulk verify, scheduled scrub",
                    Some(Active),
                    RetryClass::Backoff,
                    300,
                    "integrity check only: document status unchanged on success, FAILED on mismatch",
                ),
                Self::PurgeDocument => (
                    &[("document_id", "uuid")],
                    "DELETE of a trashed document",
                    Some(Active),
                    RetryClass::Backoff,
                    300,
                    "remove every version and asset object, then the rows",
                ),
                Self::ProvisionTenant => (
                    &[("members", "array of uuid or {user_id, capability_set}")],
                    "tenant creation (admin route or quire-admin tenant create)",
                    Some(Creating),
                    RetryClass::Backoff,
                    120,
                    "search index, capability sets, members, then active",
                ),
                Self::DeleteTenant => (
                    &[
                        ("remove_tenant", "boolean"),
                        ("tenant_name", "string"),
                        ("action", "\"delete\" | \"reset\""),
                        ("nonce", "32 lowercase hex digits"),
                        ("issued_at", "RFC 3339 date-time"),
                        ("signature", "64 lowercase hex digits (HMAC-SHA256)"),
                        ("final_status", "\"active\" | \"suspended\" (optional)"),
                    ],
                    "admin deletion or reset request (tenant deleting)",
                    Some(Deleting),
                    RetryClass::ShortLived,
                    1800,
                    "verify the signed request, wipe storage, index and rows, then remove the tenant or leave it in final_status",
                ),
                Self::BenchNoop => (
                    &[],
                    "quire-bench",
                    Some(Active),
                    RetryClass::Backoff,
                    60,
                    "nothing: measures the queue's own cost",
                ),
                #[cfg(feature = "fault-injection")]
                Self::FaultTest => (
                    &[("work_ms", "integer"), ("abort", "boolean")],
                    "the fault suite",
                    None,
                    RetryClass::Backoff,
                    300,
                    "test oracle",
                ),
            };
        JobTypeInfo {
            job_type: self.as_str(),
            payload,
            enqueued_by,
            required_tenant_status,
            retry,
            time_limit_seconds,
            work,
        }
    }

    /// Attempts a new job of this type gets, given the configured default.
    pub fn max_attempts(self, configured: i32) -> i32 {
        match self.info().retry {
            RetryClass::Backoff => configured,
            RetryClass::ShortLived => configured.min(3),
        }
    }

    pub fn time_limit(self) -> std::time::Duration {
        std::time::Duration::from_secs(self.info().time_limit_seconds)
    }

    /// Job types an API client or operator may see (never the fault suite's).
    pub fn public() -> impl Iterator<Item = JobType> {
        Self::ALL
            .iter()
            .copied()
            .filter(|job_type| job_type.as_str() != "fault-test")
    }
}

/// `docs/jobs.md`, rendered from the catalogue (a test keeps the file equal to this).
pub fn render_markdown() -> String {
    let mut out = String::from(
        "# Job catalogue\n\n\
         Generated from `shared/src/catalogue.rs` (the test `docs_jobs_md_matches_the_catalogue` \
         fails when they differ; `QUIRE_BLESS=1 cargo test -p quire-shared docs_jobs_md` \
         rewrites this file). The same data is served by `GET /api/jobs/catalogue`.\n\n\
         | type | payload | enqueued by | tenant must be | retry | time limit | work |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for job_type in JobType::public() {
        let info = job_type.info();
        let payload: Vec<String> = info
            .payload
            .iter()
            .map(|(field, kind)| format!("`{field}`: {kind}"))
            .collect();
        let retry = match info.retry {
            RetryClass::Backoff => "backoff, up to `jobs.max_attempts`",
            RetryClass::ShortLived => "backoff, at most 3 attempts",
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} s | {} |\n",
            info.job_type,
            payload.join("<br>").replace('|', "\\|"),
            info.enqueued_by,
            info.required_tenant_status
                .map_or("any", TenantStatus::as_str),
            retry,
            info.time_limit_seconds,
            info.work,
        ));
    }
    out.push_str(
        "\nRetired types, refused by the API and failed by a worker with `retired_job_type`: ",
    );
    let retired: Vec<String> = RETIRED_JOB_TYPES.iter().map(|t| format!("`{t}`")).collect();
    out.push_str(&retired.join(", "));
    out.push_str(".\n");
    out
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

/// Payload of `verify-document`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyDocumentPayload {
    pub document_id: Uuid,
    pub document_version_id: Uuid,
}

/// Payload of `provision-tenant`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvisionTenantPayload {
    pub members: Vec<MemberSpec>,
}

/// Payload of `delete-tenant`: the signed request as the admin sent it.
pub use crate::signing::TenantDeletionRequest as DeleteTenantPayload;

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
    fn docs_jobs_md_matches_the_catalogue() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/jobs.md");
        let rendered = render_markdown();
        if std::env::var_os("QUIRE_BLESS").is_some() {
            std::fs::write(&path, &rendered).expect("write docs/jobs.md");
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == rendered,
            "docs/jobs.md is out of date: run QUIRE_BLESS=1 cargo test -p quire-shared docs_jobs_md"
        );
    }

    #[test]
    fn every_public_type_needs_a_tenant_state_and_a_time_limit() {
        for job_type in JobType::public() {
            let info = job_type.info();
            assert!(info.required_tenant_status.is_some(), "{job_type}");
            assert!(info.time_limit_seconds > 0, "{job_type}");
        }
        assert_eq!(JobType::DeleteTenant.max_attempts(5), 3);
        assert_eq!(JobType::AnalyzeDocument.max_attempts(5), 5);
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
