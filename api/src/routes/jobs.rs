//! A document's processing jobs: safe views only.

use actix_web::{HttpResponse, web};
use quire_shared::db::{documents, jobs};
use uuid::Uuid;

use super::documents::connection;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::JobView;

/// `GET /api/documents/{id}/processing-jobs`.
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
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
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
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
