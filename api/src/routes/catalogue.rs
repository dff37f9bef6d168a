//! `GET /api/jobs/catalogue`: the job types, their payload shapes, the retired ones, and
//! the periodic jobs with their last and next run.

use actix_web::{HttpResponse, web};
use quire_shared::jobs::{RETIRED_JOB_TYPES, public_job_types};
use serde_json::json;

use crate::auth::DocumentReader;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::ProblemView;

#[utoipa::path(
    get, path = "/api/jobs/catalogue", tag = "jobs", operation_id = "job_catalogue",
    responses(
        (status = 200, description = "{job_types: [{type, payload, enqueued_by, required_tenant_status, retry, time_limit_seconds, work}], retired_job_types, schedules: [{name, description, enabled, every_seconds, last_run_at, last_finished_at, last_outcome, last_detail, next_run_at, runs}]}"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn catalogue(
    state: web::Data<AppState>,
    _caller: DocumentReader,
) -> Result<HttpResponse, ApiError> {
    let types: Vec<_> = public_job_types().collect();
    let mut conn = state.connection().await?;
    let schedules = quire_shared::schedules::overview(&mut conn, &state.settings.schedules).await?;
    Ok(HttpResponse::Ok().json(json!({
        "job_types": types,
        "retired_job_types": RETIRED_JOB_TYPES,
        "schedules": schedules,
    })))
}
