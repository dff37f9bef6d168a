//! A document's processing jobs: safe views only.

use actix_web::{HttpRequest, HttpResponse, web};
use quire_shared::actions::jobs::{self as job_actions, JobScope};
use quire_shared::db::{documents, jobs, pauses};
use uuid::Uuid;

use crate::auth::{DocumentReader, DocumentWriter};
use crate::conditional;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{JobList, JobView, ProblemView};

/// `GET /api/documents/{id}/processing-jobs`.
#[utoipa::path(
    get, path = "/api/documents/{document_id}/processing-jobs", tag = "jobs", operation_id = "list_processing_jobs",
    params(("document_id" = Uuid, Path, description = "document id")),
    responses(
        (status = 200, description = "the document's jobs, oldest first", body = JobList),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: DocumentReader,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let mut conn = state.connection().await?;
    documents::find_document(&mut conn, caller.tenant_id, document_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let holds = pauses::holds(&mut conn, caller.tenant_id).await?;
    let jobs: Vec<JobView> = jobs::list_document_jobs(&mut conn, caller.tenant_id, document_id)
        .await?
        .into_iter()
        .map(|job| JobView::held_by(job, &holds))
        .collect();
    Ok(HttpResponse::Ok().json(JobList { jobs }))
}

/// `GET /api/documents/{id}/processing-jobs/{job_id}`: 404 unless the job is this document's.
#[utoipa::path(
    get, path = "/api/documents/{document_id}/processing-jobs/{job_id}", tag = "jobs", operation_id = "get_processing_job",
    params(
        ("document_id" = Uuid, Path, description = "document id"),
        ("job_id" = Uuid, Path, description = "job id"),
        ("If-None-Match" = Option<String>, Header, description = conditional::IF_NONE_MATCH_DESCRIPTION)
    ),
    responses(
        (status = 200, description = "the job", body = JobView,
            headers(("ETag" = String, description = "the job view's version: send it in If-None-Match to poll cheaply (304 while unchanged)"))),
        (status = 304, description = "If-None-Match names the current ETag: no body",
            headers(("ETag" = String, description = "the job view's version"))),
        (status = 404, description = "no such document in this tenant (or it is in the trash), or the job is not this document's", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: DocumentReader,
    request: HttpRequest,
    path: web::Path<(Uuid, Uuid)>,
) -> Result<HttpResponse, ApiError> {
    let (document_id, job_id) = path.into_inner();
    let mut conn = state.connection().await?;
    documents::find_document(&mut conn, caller.tenant_id, document_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let job = jobs::find_document_job(&mut conn, caller.tenant_id, document_id, job_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let holds = pauses::holds(&mut conn, caller.tenant_id).await?;
    let body = serde_json::to_vec(&JobView::held_by(job, &holds))
        .map_err(|error| anyhow::Error::new(error).context("failed to encode the job"))?;
    let etag = conditional::body_etag(&body);
    if conditional::none_match(&request, &etag) {
        return Ok(conditional::not_modified(&etag));
    }
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(conditional::etag_header(etag))
        .body(body))
}

/// `POST /api/documents/{id}/processing-jobs/{job_id}/retry`: `FAILED → QUEUED` with a
/// new event and a fresh budget of automatic attempts; 409 naming the current state for
/// any other job, 404 when the job is not this document's.
#[utoipa::path(
    post, path = "/api/documents/{document_id}/processing-jobs/{job_id}/retry", tag = "jobs", operation_id = "retry_processing_job",
    params(("document_id" = Uuid, Path, description = "document id"), ("job_id" = Uuid, Path, description = "job id")),
    responses(
        (status = 202, description = "queued again with a fresh attempt budget", body = JobView,
            links(
                ("GetProcessingJob" = (operation_id = "get_processing_job", parameters(("document_id" = "$request.path.document_id"), ("job_id" = "$response.body#/id"))))
            )),
        (status = 404, description = "no such document in this tenant (or it is in the trash), or the job is not this document's", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "job_not_failed (with current_status) or job_already_active", body = ProblemView, content_type = "application/problem+json"),
        (status = 429, description = "enqueue_rate_limited: the tenant enqueues faster than its rate; retry after Retry-After; nothing was stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn retry(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    path: web::Path<(Uuid, Uuid)>,
) -> Result<HttpResponse, ApiError> {
    let (document_id, job_id) = path.into_inner();
    let scope = JobScope::Document {
        tenant_id: caller.tenant_id,
        generation: caller.tenant_generation,
        document_id,
    };
    crate::enqueue_limit::admit(&state, caller.tenant_id, 1, "retry").await?;
    let mut conn = state.connection().await?;
    let job =
        job_actions::retry(&mut conn, scope, job_id, state.settings.jobs.max_attempts).await?;
    let holds = pauses::holds(&mut conn, caller.tenant_id).await?;
    Ok(HttpResponse::Accepted().json(JobView::held_by(job, &holds)))
}
