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
    let (database, migrations) = match state.pool.get().await {
        Ok(mut conn) => (
            true,
            quire_shared::db::migrate::is_current(&mut conn)
                .await
                .unwrap_or(false),
        ),
        Err(_) => (false, false),
    };
    let redis = quire_shared::broker::ping(&state.redis).await.is_ok();
    let ready = database && migrations && redis;
    let body = json!({
        "status": if ready { "ready" } else { "unavailable" },
        "checks": { "database": database, "migrations": migrations, "redis": redis },
    });
    if ready {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}
