//! `GET /api/jobs/catalogue`: the job types, their payload shapes, and the retired ones.

use actix_web::HttpResponse;
use quire_shared::jobs::{RETIRED_JOB_TYPES, public_job_types};
use serde_json::json;

use crate::auth::DocumentReader;
use crate::views::ProblemView;

#[utoipa::path(
    get, path = "/api/jobs/catalogue", tag = "jobs",
    responses(
        (status = 200, description = "{job_types: [{type, payload, enqueued_by, required_tenant_status, retry, time_limit_seconds, work}], retired_job_types}"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn catalogue(_caller: DocumentReader) -> HttpResponse {
    let types: Vec<_> = public_job_types().collect();
    HttpResponse::Ok().json(json!({ "job_types": types, "retired_job_types": RETIRED_JOB_TYPES }))
}
