//! The probe listener of the dispatcher and the worker: a small HTTP server for the
//! orchestrator's liveness and readiness probes (`/healthz`, `/readyz`) and the
//! Prometheus scrape (`/metrics`), on the address their `probe_listen` setting names
//! (empty: none). The API serves the same three routes on its own server.

use std::net::TcpListener;

use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::db::PgPool;
use crate::health;

struct Probes {
    pool: PgPool,
    redis: crate::redis_client::RedisPool,
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({ "status": "ok" }))
}

async fn readyz(probes: web::Data<Probes>) -> HttpResponse {
    let readiness = health::check(&probes.pool, &probes.redis).await;
    if readiness.is_ready() {
        HttpResponse::Ok().json(readiness.to_json())
    } else {
        HttpResponse::ServiceUnavailable().json(readiness.to_json())
    }
}

async fn metrics() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(crate::metrics::render())
}

/// Binds `address` and serves until `shutdown`; returns the bound port (useful with
/// port 0). `None` when `address` is empty.
pub fn spawn(
    address: &str,
    pool: PgPool,
    redis: crate::redis_client::RedisPool,
    shutdown: CancellationToken,
) -> anyhow::Result<Option<u16>> {
    if address.is_empty() {
        return Ok(None);
    }
    crate::metrics::install();
    let listener = TcpListener::bind(address)
        .with_context(|| format!("failed to bind the probe listener {address}"))?;
    let port = listener
        .local_addr()
        .context("probe listener has no address")?
        .port();
    let probes = web::Data::new(Probes { pool, redis });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(probes.clone())
            .route("/healthz", web::get().to(healthz))
            .route("/readyz", web::get().to(readyz))
            .route("/metrics", web::get().to(metrics))
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(1)
    .listen(listener)
    .context("probe listener failed to listen")?
    .run();
    let handle = server.handle();
    tokio::spawn(async move {
        shutdown.cancelled().await;
        handle.stop(true).await;
    });
    tokio::spawn(server);
    tracing::info!(port, "probe listener serving /healthz, /readyz, /metrics");
    Ok(Some(port))
}
