//! What clients see of documents, jobs, tenants and members: safe views that never carry storage keys,
//! payloads, worker ids or broker task ids (DESIGN §8).

use quire_shared::db::documents::{Document, DocumentVersion};
use quire_shared::db::jobs::Job;
use quire_shared::db::label_catalog::Label;
use quire_shared::db::labels::{AppliedLabel, Labels};
use quire_shared::db::members::Member;
use quire_shared::db::pauses::{Held, Holds};
use quire_shared::db::tenants::Tenant;
use quire_shared::matching::MatchAlgorithm;
use quire_shared::permissions::CapabilitySet;
use quire_shared::states::{DocumentStatus, JobStatus, TenantStatus};
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentView {
    pub id: Uuid,
    pub title: String,
    /// `PENDING`, `PROCESSING`, `READY` or `FAILED`: content readiness, not queue state.
    #[schema(value_type = String, example = "PENDING")]
    pub status: DocumentStatus,
    pub processing_error: Option<String>,
    /// `YYYY-MM-DD`.
    #[schema(value_type = Option<String>, format = Date)]
    pub issued_at: Option<String>,
    /// Tag names, sorted.
    pub tags: Vec<String>,
    pub correspondent: Option<String>,
    /// The same labels with their ids, and whether a matching rule set each
    /// (`automatic`; a rule may take it off again) or the user did.
    pub labels: DocumentLabelsView,
    pub current_version: Option<VersionView>,
    /// Set while the document is in the trash.
    #[serde(with = "time::serde::rfc3339::option")]
    pub trashed_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// Present in search results only: how well the document matched, and where.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchView>,
}

/// Why a document is a search hit.
#[derive(Debug, Serialize, ToSchema)]
pub struct SearchView {
    /// Higher is better; comparable within one result list only.
    pub rank: f32,
    /// The best passages as plain text parts; `match` marks the matched words. Render
    /// the text as text: it is never markup.
    #[schema(value_type = Vec<SnippetPartView>)]
    pub snippet: Vec<quire_shared::search::SnippetPart>,
}

/// A document's labels, each with who set it.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct DocumentLabelsView {
    /// Sorted by name.
    pub tags: Vec<AppliedLabelView>,
    pub correspondent: Option<AppliedLabelView>,
}

/// A tag or correspondent on a document.
#[derive(Debug, Serialize, ToSchema)]
pub struct AppliedLabelView {
    pub id: Uuid,
    pub name: String,
    /// Set by the label's matching rule at the end of an analysis; `false` when a user
    /// set it (no rule changes a user's choice).
    pub automatic: bool,
}

impl From<AppliedLabel> for AppliedLabelView {
    fn from(label: AppliedLabel) -> Self {
        Self {
            id: label.id,
            name: label.name,
            automatic: label.automatic,
        }
    }
}

/// One part of a snippet (`quire_shared::search::SnippetPart`, described here).
#[derive(ToSchema)]
#[allow(dead_code)] // describes snippet parts for the OpenAPI document only
pub struct SnippetPartView {
    text: String,
    /// The part matched the query.
    #[schema(rename = "match")]
    matched: bool,
}

/// `GET /api/documents`: a page of documents.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentPage {
    pub documents: Vec<DocumentView>,
    /// `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<String>,
}

/// `GET /api/documents/{id}/processing-jobs`: the document's jobs, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobList {
    pub jobs: Vec<JobView>,
}

/// `PATCH /api/documents/{id}`: the edited document, and the analysis a new title
/// queued (`null` when nothing was queued).
#[derive(Debug, Serialize, ToSchema)]
pub struct EditView {
    pub document: DocumentView,
    pub job: Option<JobView>,
}

/// `DELETE /api/documents/{id}` of a live document: now in the trash.
#[derive(Debug, Serialize, ToSchema)]
pub struct TrashView {
    pub document: DocumentView,
    /// How many of its unfinished jobs were cancelled.
    pub cancelled_jobs: u64,
}

/// `DELETE /api/documents/{id}` of a trashed document: the job that purges it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PurgeView {
    pub job: JobView,
}

/// A bulk action's answer, one result per id named, in the request's order.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkView {
    pub results: Vec<BulkResultView>,
}

/// A document's job in a bulk action (existing or new), or why it has none.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkResultView {
    pub document_id: Uuid,
    pub job: Option<JobView>,
    /// `not_found`, or `null` with a job.
    #[schema(value_type = Option<String>, example = "not_found")]
    pub error: Option<&'static str>,
}

impl DocumentView {
    pub fn with_labels(mut self, labels: Option<Labels>) -> Self {
        let labels = labels.unwrap_or_default();
        self.tags = labels.tags.iter().map(|tag| tag.name.clone()).collect();
        self.correspondent = labels.correspondent.as_ref().map(|c| c.name.clone());
        self.labels = DocumentLabelsView {
            tags: labels
                .tags
                .into_iter()
                .map(AppliedLabelView::from)
                .collect(),
            correspondent: labels.correspondent.map(AppliedLabelView::from),
        };
        self
    }
}

/// A tag or correspondent of the tenant, with its matching rule.
#[derive(Debug, Serialize, ToSchema)]
pub struct LabelView {
    pub id: Uuid,
    pub name: String,
    pub rule: RuleView,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// How a label finds its documents at the end of each analysis.
#[derive(Debug, Serialize, ToSchema)]
pub struct RuleView {
    /// `none`, `any`, `all`, `exact`, `regex` or `fuzzy`.
    #[schema(value_type = String, example = "any")]
    pub algorithm: MatchAlgorithm,
    pub text: String,
    pub case_insensitive: bool,
}

impl From<Label> for LabelView {
    fn from(label: Label) -> Self {
        Self {
            id: label.id,
            name: label.name,
            rule: RuleView {
                algorithm: label.match_algorithm,
                text: label.match_text,
                case_insensitive: label.match_case_insensitive,
            },
            created_at: label.created_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VersionView {
    pub id: Uuid,
    /// 1 for the first version; each new version takes the next.
    pub number: i32,
    pub size_bytes: i64,
    pub sha256: String,
    pub content_type: String,
    pub original_filename: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

impl DocumentView {
    pub fn new(document: Document, version: Option<DocumentVersion>) -> Self {
        Self {
            id: document.id,
            title: document.title,
            status: document.status,
            processing_error: document.processing_error,
            issued_at: document.issued_at.map(|date| date.to_string()),
            tags: Vec::new(),
            correspondent: None,
            labels: DocumentLabelsView::default(),
            current_version: version.map(|version| VersionView {
                id: version.id,
                number: version.number,
                size_bytes: version.size_bytes,
                sha256: version.sha256,
                content_type: version.content_type,
                original_filename: version.original_filename,
                created_at: version.created_at,
            }),
            trashed_at: document.trashed_at,
            created_at: document.created_at,
            updated_at: document.updated_at,
            search: None,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct JobView {
    pub id: Uuid,
    #[serde(rename = "type")]
    pub job_type: String,
    /// `QUEUED`, `RUNNING`, `SUCCEEDED`, `FAILED` or `CANCELLED`.
    #[schema(value_type = String, example = "QUEUED")]
    pub status: JobStatus,
    pub attempts: i32,
    pub max_attempts: i32,
    #[serde(with = "time::serde::rfc3339")]
    pub queued_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub started_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// Why a `QUEUED` job does not run now: `tenant_paused` (its tenant's processing is
    /// paused) or `queue_paused` (its job type's queue is); `null` when nothing holds
    /// it. A held job keeps its place and continues on resume.
    #[schema(value_type = Option<String>, example = "tenant_paused")]
    pub held: Option<&'static str>,
}

impl JobView {
    /// The view with what holds the job, read once for its tenant (`pauses::holds`).
    pub fn held_by(job: Job, holds: &Holds) -> Self {
        let held = holds.of(&job).map(Held::as_str);
        Self {
            held,
            ..Self::from(job)
        }
    }
}

impl From<Job> for JobView {
    fn from(job: Job) -> Self {
        Self {
            id: job.id,
            job_type: job.job_type,
            status: job.status,
            attempts: job.attempts,
            max_attempts: job.max_attempts,
            queued_at: job.queued_at,
            started_at: job.started_at,
            finished_at: job.finished_at,
            error_code: job.error_code,
            error_message: job.error_message,
            held: None,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UploadView {
    pub document: DocumentView,
    pub job: JobView,
}

/// The media types an upload's file may be (decided from its bytes, `api/src/sniff.rs`):
/// the upload's multipart `encoding` names them for clients and tools.
pub const ACCEPTED_FILE_TYPES: &str =
    "application/pdf, image/png, image/jpeg, image/tiff, image/webp, text/plain";

/// A file's bytes, as the downloads serve them.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // describes downloads for the OpenAPI document only
pub struct FileBytes(Vec<u8>);

/// The multipart form of an upload: a `file` part, an optional `title`, nothing else.
#[derive(ToSchema, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // describes the form for the OpenAPI document only
pub struct UploadForm {
    /// The file: PDF, PNG, JPEG, TIFF, WebP or UTF-8 text, decided from its bytes.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// Defaults to the file's name (so does an empty or blank title). At most 500
    /// characters as sent (it is trimmed), none of them a control or bidirectional-control
    /// character.
    #[schema(
        max_length = 500,
        pattern = r"^[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*(?:[^\u0000-\u0020\u007f-\u00a0\u061c\u1680\u2000-\u200a\u200e\u200f\u2028-\u202f\u205f\u2066-\u2069\u3000](?:[^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]*[^\u0000-\u0020\u007f-\u00a0\u061c\u1680\u2000-\u200a\u200e\u200f\u2028-\u202f\u205f\u2066-\u2069\u3000])?[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*)?$"
    )]
    title: Option<String>,
}

/// An RFC 9457 problem: every error answer has this shape.
#[derive(ToSchema)]
#[allow(dead_code)] // describes error bodies for the OpenAPI document only
pub struct ProblemView {
    #[schema(rename = "type", example = "/problems/not-found")]
    kind: String,
    title: String,
    status: u16,
    detail: String,
    /// Stable, documented; clients branch on it.
    #[schema(example = "not_found")]
    code: String,
    request_id: String,
    /// On a 409 about a job's or tenant's state: the state it is in.
    #[schema(nullable = false)]
    current_status: Option<String>,
    /// On a 409 `duplicate_document`: the document with the same bytes.
    #[schema(nullable = false)]
    existing_document_id: Option<Uuid>,
    /// On a 503 `not_ready` (`/readyz`): each check (`database`, `migrations`, `redis`,
    /// `storage`) and whether it passed.
    #[schema(nullable = false)]
    checks: Option<std::collections::BTreeMap<String, bool>>,
}

/// What an operator sees of a tenant.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantView {
    pub id: Uuid,
    pub name: String,
    /// `creating`, `active`, `suspended` or `deleting`.
    #[schema(value_type = String, example = "active")]
    pub status: TenantStatus,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// Its weight in the fair share between tenants (1 to 1000; default 1).
    pub share_weight: i32,
    /// Its cap on concurrently running jobs; `null`: the configuration's
    /// `scheduling.max_running_per_tenant`.
    pub max_running_jobs: Option<i32>,
    /// Its enqueue rate on the API, jobs per second; `null`: `enqueue_limit.per_second`.
    pub enqueue_rate_per_second: Option<i32>,
    /// Jobs it may enqueue at once; `null`: `enqueue_limit.burst`.
    pub enqueue_burst: Option<i32>,
    /// Since when its processing is paused (its queued jobs held); `null`: not paused.
    #[serde(with = "time::serde::rfc3339::option")]
    pub processing_paused_at: Option<OffsetDateTime>,
}

impl From<Tenant> for TenantView {
    fn from(tenant: Tenant) -> Self {
        Self {
            id: tenant.id,
            name: tenant.name,
            status: tenant.status,
            share_weight: tenant.share_weight,
            max_running_jobs: tenant.max_running_jobs,
            enqueue_rate_per_second: tenant.enqueue_rate_per_second,
            enqueue_burst: tenant.enqueue_burst,
            processing_paused_at: tenant.processing_paused_at,
            created_at: tenant.created_at,
            updated_at: tenant.updated_at,
        }
    }
}

/// A tenant with the job that moves it (provisioning or deletion).
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantJobView {
    pub tenant: TenantView,
    pub job: JobView,
}

/// The name of a capability set (`quire_shared::permissions::CapabilitySet`).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // describes capability sets for the OpenAPI document only
pub enum CapabilitySetName {
    Owner,
    User,
    Readonly,
    Webdav,
}

/// A member of the caller's tenant.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberView {
    pub user_id: Uuid,
    #[schema(value_type = CapabilitySetName, example = "user")]
    pub capability_set: CapabilitySet,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

impl From<Member> for MemberView {
    fn from(member: Member) -> Self {
        Self {
            user_id: member.user_id,
            capability_set: member.capability_set,
            created_at: member.created_at,
            updated_at: member.updated_at,
        }
    }
}

/// One version of a document, as its versions listing shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentVersionView {
    pub id: Uuid,
    /// 1 for the first version; each new version takes the next.
    pub number: i32,
    /// `PENDING`, `PROCESSING`, `READY` or `FAILED`: this version's readiness.
    #[schema(value_type = String, example = "READY")]
    pub status: DocumentStatus,
    /// Why its analysis failed, safe to show.
    pub processing_error: Option<String>,
    /// True for the version the document shows, serves and is searched by.
    pub current: bool,
    pub size_bytes: i64,
    pub sha256: String,
    pub content_type: String,
    pub original_filename: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

impl DocumentVersionView {
    pub fn new(version: DocumentVersion, current_version_id: Option<Uuid>) -> Self {
        Self {
            current: current_version_id == Some(version.id),
            id: version.id,
            number: version.number,
            status: version.status,
            processing_error: version.processing_error,
            size_bytes: version.size_bytes,
            sha256: version.sha256,
            content_type: version.content_type,
            original_filename: version.original_filename,
            created_at: version.created_at,
        }
    }
}

/// A page of a document's versions, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionListView {
    pub versions: Vec<DocumentVersionView>,
    /// Pass as `before` for the next (older) page; absent on the last page.
    pub next_before: Option<i32>,
}

/// A new version as recorded, and the analysis that will make it current.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionUploadView {
    pub version: DocumentVersionView,
    pub job: JobView,
}

/// The multipart form of a new version: a `file` part, nothing else.
#[derive(ToSchema, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // describes the form for the OpenAPI document only
pub struct VersionForm {
    /// The file: PDF, PNG, JPEG, TIFF, WebP or UTF-8 text, decided from its bytes.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}
