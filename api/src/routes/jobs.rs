//! A document's processing jobs: safe views only.

use actix_web::{HttpResponse, web};
use diesel_async::AsyncConnection;
use quire_shared::catalogue::JobType;
use quire_shared::db::{DbError, documents, jobs};
use uuid::Uuid;

use super::documents::connection;
use crate::auth::{DocumentReader, DocumentWriter};
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{JobView, ProblemView};

/// `GET /api/documents/{id}/processing-jobs`.
#[utoipa::path(
    get, path = "/api/documents/{document_id}/processing-jobs", tag = "jobs", params(("document_id" = Uuid, Path, description = "document id")),
    responses(
        (status = 200, description = "{jobs: [...]}, oldest first"),
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
    let mut conn = connection(&state).await?;
    documents::find_document(&mut conn, caller.tenant_id, document_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let jobs: Vec<JobView> = jobs::list_document_jobs(&mut conn, caller.tenant_id, document_id)
        .await?
        .into_iter()
        .map(JobView::from)
        .collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({ "jobs": jobs })))
}

/// `GET /api/documents/{id}/processing-jobs/{job_id}`: 404 unless the job is this document's.
#[utoipa::path(
    get, path = "/api/documents/{document_id}/processing-jobs/{job_id}", tag = "jobs", params(("document_id" = Uuid, Path, description = "document id"), ("job_id" = Uuid, Path, description = "job id")),
    responses(
        (status = 200, description = "the job", body = JobView),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: DocumentReader,
    path: web::Path<(Uuid, Uuid)>,
) -> Result<HttpResponse, ApiError> {
    let (document_id, job_id) = path.into_inner();
    let mut conn = connection(&state).await?;
    documents::find_document(&mut conn, caller.tenant_id, document_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let job = jobs::find_document_job(&mut conn, caller.tenant_id, document_id, job_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok().json(JobView::from(job)))
}

/// `POST /api/documents/{id}/processing-jobs/{job_id}/retry`: `FAILED → QUEUED` with a
/// new event and a fresh budget of automatic attempts; 409 naming the current state for
/// any other job, 404 when the job is not this document's.
#[utoipa::path(
    post, path = "/api/documents/{document_id}/processing-jobs/{job_id}/retry", tag = "jobs", params(("document_id" = Uuid, Path, description = "document id"), ("job_id" = Uuid, Path, description = "job id")),
    responses(
        (status = 202, description = "queued again with a fresh attempt budget", body = JobView),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "job_not_failed (with current_status) or job_already_active", body = ProblemView, content_type = "application/problem+json"),
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
    let tenant_id = caller.tenant_id;
    let fresh_attempts = state.settings.jobs.max_attempts;
    let mut conn = connection(&state).await?;
    documents::find_document(&mut conn, tenant_id, document_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let retried = conn
        .transaction::<_, DbError, _>(async |conn| {
            if !jobs::retry_failed_job(conn, tenant_id, Some(document_id), job_id, fresh_attempts)
                .await?
            {
                return Ok(false);
            }
            let job = jobs::find_document_job(conn, tenant_id, document_id, job_id).await?;
            // The analysis runs again, so the document is no longer failed.
            if job.is_some_and(|job| job.job_type == JobType::AnalyzeDocument.as_str()) {
                documents::mark_document_pending(conn, tenant_id, document_id).await?;
            }
            Ok(true)
        })
        .await;
    match retried {
        Ok(true) => {}
        Ok(false) => {
            let job = jobs::find_document_job(&mut conn, tenant_id, document_id, job_id)
                .await?
                .ok_or(ApiError::NotFound)?;
            return Err(ApiError::Conflict {
                code: "job_not_failed",
                detail: format!(
                    "only a FAILED job can be retried; this one is {}",
                    job.status
                ),
                extension: Some(("current_status", job.status.as_str().to_owned())),
            });
        }
        Err(error) if error.is_unique_violation() => {
            return Err(ApiError::Conflict {
                code: "job_already_active",
                detail: "another job for this document version is queued or running".to_owned(),
                extension: None,
            });
        }
        Err(error) => return Err(error.into()),
    }
    let job = jobs::find_document_job(&mut conn, tenant_id, document_id, job_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    tracing::info!(%document_id, %job_id, %tenant_id, "failed job retried");
    Ok(HttpResponse::Accepted().json(JobView::from(job)))
}
