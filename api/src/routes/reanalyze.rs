//! `POST /api/documents/reanalyze`: analyze several documents again. An analysis already
//! queued or running for a document's version is returned, not duplicated (the partial
//! unique index decides, race-free).

use actix_web::{HttpResponse, web};
use quire_shared::catalogue::{AnalyzeDocumentPayload, JobType};
use quire_shared::db::documents;
use quire_shared::db::jobs::{self, NewJob};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::documents::connection;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{JobView, ProblemView};

const MAX_IDS: usize = 100;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct ReanalyzeRequest {
    ids: Vec<Uuid>,
    #[serde(default)]
    force: bool,
}

#[utoipa::path(
    post, path = "/api/documents/reanalyze", tag = "documents",
    request_body = ReanalyzeRequest,
    responses(
        (status = 202, description = "{results: [{document_id, job, error}]}: the job of each document, existing or new"),
        (status = 422, description = "no ids, or more than 100", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn reanalyze(
    state: web::Data<AppState>,
    caller: Caller,
    body: web::Json<ReanalyzeRequest>,
) -> Result<HttpResponse, ApiError> {
    caller.require_active_tenant()?;
    let request = body.into_inner();
    if request.ids.is_empty() || request.ids.len() > MAX_IDS {
        return Err(ApiError::unprocessable(
            "invalid_ids",
            format!("send 1 to {MAX_IDS} document ids"),
        ));
    }
    let tenant_id = caller.tenant_id;
    let request_id = crate::request_id::current();
    let mut conn = connection(&state).await?;
    let mut results = Vec::with_capacity(request.ids.len());
    for document_id in request.ids {
        let document = documents::find_document(&mut conn, tenant_id, document_id).await?;
        let Some(version_id) = document.and_then(|document| document.current_version_id) else {
            results.push(json!({ "document_id": document_id, "job": null, "error": "not_found" }));
            continue;
        };
        let job = NewJob {
            tenant_id,
            document_id: Some(document_id),
            job_type: JobType::AnalyzeDocument,
            payload: AnalyzeDocumentPayload {
                document_id,
                document_version_id: version_id,
                force: request.force,
            },
            max_attempts: state.settings.jobs.max_attempts,
            request_id: request_id.clone(),
        };
        let job = jobs::enqueue_or_active(&mut conn, &job).await?;
        results.push(
            json!({ "document_id": document_id, "job": job.map(JobView::from), "error": null }),
        );
    }
    Ok(HttpResponse::Accepted().json(json!({ "results": results })))
}
