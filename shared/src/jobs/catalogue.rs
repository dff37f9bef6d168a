//! The job catalogue as data: what `GET /api/jobs/catalogue` serves and `docs/jobs.md`
//! shows, read from each type's [`BackgroundJob`] constants.

use serde::Serialize;

use super::{BackgroundJob, RetryClass};
use crate::states::TenantStatus;

/// Types that once existed and have no handler: the API refuses them and a worker fails
/// such a message with a safe error instead of republishing it forever.
pub const RETIRED_JOB_TYPES: &[&str] = &["generate-thumbnails", "generate-ocr-text"];

/// Everything Quire knows of a job type but its handler.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct JobSpec {
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
    #[serde(skip)]
    pub owns_document_status: bool,
    #[serde(skip)]
    pub public: bool,
    /// Runs only in one of a worker's analysis slots (`BackgroundJob::ANALYSIS_SLOT`).
    #[serde(skip)]
    pub analysis_slot: bool,
}

impl JobSpec {
    pub const fn of<J: BackgroundJob>() -> Self {
        Self {
            job_type: J::JOB_TYPE,
            payload: J::DESCRIPTION.payload,
            enqueued_by: J::DESCRIPTION.enqueued_by,
            required_tenant_status: J::TENANT_GUARD,
            retry: J::RETRY,
            time_limit_seconds: J::TIME_LIMIT.as_secs(),
            work: J::DESCRIPTION.work,
            owns_document_status: J::OWNS_DOCUMENT_STATUS,
            public: J::PUBLIC,
            analysis_slot: J::ANALYSIS_SLOT,
        }
    }

    /// Attempts a new job of this type gets, given the configured default.
    pub fn max_attempts(&self, configured: i32) -> i32 {
        self.retry.max_attempts(configured)
    }
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

/// `docs/jobs.md`, rendered from the catalogue (a test keeps the file equal to this).
pub fn render_markdown() -> String {
    let mut out = String::from(
        "# Job catalogue\n\n\
         Generated from the job types in `shared/src/jobs/types/` (the test \
         `docs_jobs_md_matches_the_catalogue` fails when they differ; \
         `QUIRE_BLESS=1 cargo test -p quire-shared docs_jobs_md` rewrites this file). The \
         same data is served by `GET /api/jobs/catalogue`.\n\n\
         | type | payload | enqueued by | tenant must be | retry | time limit | work |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for spec in super::public_job_types() {
        let payload: Vec<String> = spec
            .payload
            .iter()
            .map(|(field, kind)| format!("`{field}`: {kind}"))
            .collect();
        let retry = match spec.retry {
            RetryClass::Backoff => "backoff, up to `jobs.max_attempts`",
            RetryClass::ShortLived => "backoff, at most 3 attempts",
            RetryClass::Webhook => {
                "`webhooks.retry_backoff_*`, at most 20 attempts within `webhooks.retry_for_seconds`"
            }
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} s | {} |\n",
            spec.job_type,
            payload.join("<br>").replace('|', "\\|"),
            spec.enqueued_by,
            spec.required_tenant_status
                .map_or("any", TenantStatus::as_str),
            retry,
            spec.time_limit_seconds,
            spec.work,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::{AnalyzeDocument, BackgroundJob, DeleteTenant, find, job_types};

    #[test]
    fn job_types_are_stable_unique_strings() {
        let mut seen = std::collections::BTreeSet::new();
        for job_type in job_types() {
            assert!(seen.insert(job_type), "{job_type} is registered twice");
            assert_eq!(find(job_type).map(|r| r.spec().job_type), Some(job_type));
        }
        for retired in RETIRED_JOB_TYPES {
            assert!(find(retired).is_none(), "{retired} is retired");
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
        for spec in crate::jobs::public_job_types() {
            assert!(spec.required_tenant_status.is_some(), "{}", spec.job_type);
            assert!(spec.time_limit_seconds > 0, "{}", spec.job_type);
        }
        assert_eq!(crate::jobs::max_attempts::<DeleteTenant>(5), 3);
        assert_eq!(crate::jobs::max_attempts::<AnalyzeDocument>(5), 5);
    }

    #[test]
    fn only_the_analysis_owns_its_documents_status() {
        let owners: Vec<&str> = crate::jobs::catalogue()
            .filter(|spec| spec.owns_document_status)
            .map(|spec| spec.job_type)
            .collect();
        assert_eq!(owners, [AnalyzeDocument::JOB_TYPE]);
    }
}
