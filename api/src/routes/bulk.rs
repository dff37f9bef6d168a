//! Bulk actions on several documents: `POST /api/documents/reanalyze` and
//! `POST /api/documents/verify`. A job of the same kind already queued or running for a
//! document's version is returned, not duplicated (partial unique indexes decide,
//! race-free).

use actix_web::{HttpResponse, web};
use quire_shared::catalogue::{AnalyzeDocumentPayload, JobType, VerifyDocumentPayload};
use quire_shared::db::documents;
use quire_shared::db::jobs::{self, NewJob};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

use super::documents::connection;
use crate::auth::DocumentWriter;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{JobView, ProblemView};

const MAX_IDS: usize = 100;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReanalyzeRequest {
    ids: Vec<Uuid>,
    #[serde(default)]
    force: bool,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    ids: Vec<Uuid>,
}

/// Enqueues, for each document of the caller's tenant, the job `job_for` builds from its
/// id and current version; missing documents are reported per id, not as an error.
async fn enqueue_each<P: Serialize>(
    state: &AppState,
    caller: &DocumentWriter,
    ids: Vec<Uuid>,
    job_type: JobType,
    job_for: impl Fn(Uuid, Uuid) -> P,
) -> Result<HttpResponse, ApiError> {
    if ids.is_empty() || ids.len() > MAX_IDS {
        return Err(ApiError::unprocessable(
            "invalid_ids",
            format!("send 1 to {MAX_IDS} document ids"),
        ));
    }
    let tenant_id = caller.tenant_id;
    let request_id = crate::request_id::current();
    let mut conn = connection(state).await?;
    let mut results = Vec::with_capacity(ids.len());
    for document_id in ids {
        let document = documents::find_document(&mut conn, tenant_id, document_id).await?;
        let Some(version_id) = document.and_then(|document| document.current_version_id) else {
            results.push(json!({ "document_id": document_id, "job": null, "error": "not_found" }));
            continue;
        };
        let job = NewJob {
            tenant_id,
            document_id: Some(document_id),
            job_type,
            payload: job_for(document_id, version_id),
            max_attempts: job_type.max_attempts(state.settings.jobs.max_attempts),
            request_id: request_id.clone(),
        };
        let job = jobs::enqueue_or_active(&mut conn, &job).await?;
        results.push(
            json!({ "document_id": document_id, "job": job.map(JobView::from), "error": null }),
        );
    }
    Ok(HttpResponse::Accepted().json(json!({ "results": results })))
}

#[utoipa::path(
    post, path = "/api/documents/reanalyze", tag = "documents",
    request_body = ReanalyzeRequest,
    responses(
        (status = 202, description = "{results: [{document_id, job, error}]}: the job of each document, existing or new"),
        (status = 422, description = "no ids, or more than 100", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no documents:write, or the tenant is suspended", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn reanalyze(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    body: web::Json<ReanalyzeRequest>,
) -> Result<HttpResponse, ApiError> {
    let request = body.into_inner();
    let force = request.force;
    enqueue_each(
        &state,
        &caller,
        request.ids,
        JobType::AnalyzeDocument,
        |document_id, document_version_id| AnalyzeDocumentPayload {
            document_id,
            document_version_id,
            force,
        },
    )
    .await
}

/// Integrity check only: the document's status stays as it is unless its bytes no longer
/// match (then it ends `FAILED`).
#[utoipa::path(
    post, path = "/api/documents/verify", tag = "documents",
    request_body = VerifyRequest,
    responses(
        (status = 202, description = "{results: [{document_id, job, error}]}: the verify-document job of each document, existing or new"),
        (status = 422, description = "no ids, or more than 100", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no documents:write, or the tenant is suspended", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn verify(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    body: web::Json<VerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    enqueue_each(
        &state,
        &caller,
        body.into_inner().ids,
        JobType::VerifyDocument,
        |document_id, document_version_id| VerifyDocumentPayload {
            document_id,
            document_version_id,
        },
    )
    .await
}
