//! `GET /api/jobs/catalogue`: the job types, their payload shapes, and the retired ones.

use actix_web::HttpResponse;
use quire_shared::catalogue::{JobType, RETIRED_JOB_TYPES};
use serde_json::json;

use crate::auth::Caller;
use crate::views::ProblemView;

#[utoipa::path(
    get, path = "/api/jobs/catalogue", tag = "jobs",
    responses(
        (status = 200, description = "{job_types, retired_job_types}"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn catalogue(_caller: Caller) -> HttpResponse {
    let types: Vec<_> = JobType::ALL
        .iter()
        .map(|job_type| job_type.info())
        .filter(|info| info.job_type != "fault-test")
        .map(|info| {
            let payload: serde_json::Map<String, serde_json::Value> = info
                .payload
                .iter()
                .map(|(field, kind)| ((*field).to_owned(), json!(kind)))
                .collect();
            json!({
                "type": info.job_type,
                "payload": payload,
                "enqueued_by": info.enqueued_by,
                "required_tenant_status": info.required_tenant_status,
                "work": info.work,
            })
        })
        .collect();
    HttpResponse::Ok().json(json!({ "job_types": types, "retired_job_types": RETIRED_JOB_TYPES }))
}
