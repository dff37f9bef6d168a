//! Liveness and readiness.

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::state::AppState;

/// `GET /healthz`: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "health", security(()), responses((status = 200, description = "alive")))]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// `GET /readyz`: PostgreSQL and Redis answer and the schema is current. The body names
/// each check, never an address or an error text.
#[utoipa::path(
    get, path = "/readyz", tag = "health", security(()),
    responses((status = 200, description = "PostgreSQL, Redis and schema ready"), (status = 503, description = "not ready; the body names the failing check"))
)]
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let readiness = quire_shared::health::check(&state.pool, &state.redis).await;
    if readiness.is_ready() {
        HttpResponse::Ok().json(readiness.to_json())
    } else {
        HttpResponse::ServiceUnavailable().json(readiness.to_json())
    }
}

/// `GET /metrics`: the API's own counters and histograms, and the queue's state from
/// PostgreSQL and Redis (jobs by type and status, outbox by status and lag, oldest queued
/// job, list lengths, live workers and slots), exact at scrape time.
#[utoipa::path(
    get, path = "/metrics", tag = "health", security(()),
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain"))
)]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    let mut body = quire_shared::metrics::render();
    body.push_str(
        &quire_shared::queue_state::render(
            &state.pool,
            &state.redis,
            &state.settings.redis.namespace,
        )
        .await,
    );
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(body)
}
