//! Liveness and readiness on the public port (for load balancers). `/metrics` is not
//! here: it is served on the admin listener (`server.admin_listen`), never to tenants.

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;
use crate::views::ProblemView;

/// `GET /healthz`: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "health", operation_id = "healthz", security(()), responses((status = 200, description = "alive")))]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// `GET /readyz`: PostgreSQL, Redis and the object store answer and the schema is
/// current. The body names each check, never an address or an error text.
#[utoipa::path(
    get, path = "/readyz", tag = "health", operation_id = "readyz", security(()),
    responses((status = 200, description = "PostgreSQL, Redis, object store and schema ready"), (status = 503, description = "not_ready: its `checks` names the failing check", body = ProblemView, content_type = "application/problem+json"))
)]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let readiness =
        quire_shared::health::check(&state.pool, &state.redis, state.store.as_ref()).await;
    if !readiness.is_ready() {
        // problem+json like every error of the API, with the checks beside.
        return Err(ApiError::NotReady {
            checks: serde_json::to_value(readiness).unwrap_or_default(),
        });
    }
    Ok(HttpResponse::Ok().json(readiness.to_json()))
}
