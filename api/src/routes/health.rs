//! Liveness and readiness on the public port (for load balancers). `/metrics` is not
//! here: it is served on the admin listener (`server.admin_listen`), never to tenants.

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::state::AppState;

/// `GET /healthz`: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "health", operation_id = "healthz", security(()), responses((status = 200, description = "alive")))]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// `GET /readyz`: PostgreSQL and Redis answer and the schema is current. The body names
/// each check, never an address or an error text.
#[utoipa::path(
    get, path = "/readyz", tag = "health", operation_id = "readyz", security(()),
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
