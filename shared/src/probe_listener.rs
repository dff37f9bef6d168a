//! The probe listener of every process: a small HTTP server for the orchestrator's
//! liveness and readiness probes (`/healthz`, `/readyz`) and the Prometheus scrape
//! (`/metrics`), on the address its setting names (empty: none): the dispatcher's and
//! the worker's `probe_listen`, the API's `server.admin_listen` (its admin listener,
//! whose `/metrics` adds the stored queue state). Never a public port: the scrape is for
//! Prometheus, not for tenants.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::db::PgPool;
use crate::health;
use crate::storage::ObjectStore;

/// What a listener's `/metrics` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scrape {
    /// The process's own counters and histograms.
    Process,
    /// Those, and the queue's state as stored by the dispatcher that last refreshed it
    /// (`queue_state::render_stored`: one row read, never the queue tables). The API's.
    WithQueueState,
}

struct Probes {
    pool: PgPool,
    redis: crate::redis_client::RedisPool,
    storage: Arc<dyn ObjectStore>,
    scrape: Scrape,
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({ "status": "ok" }))
}

async fn readyz(probes: web::Data<Probes>) -> HttpResponse {
    let readiness = health::check(&probes.pool, &probes.redis, probes.storage.as_ref()).await;
    if readiness.is_ready() {
        HttpResponse::Ok().json(readiness.to_json())
    } else {
        HttpResponse::ServiceUnavailable().json(readiness.to_json())
    }
}

async fn metrics(probes: web::Data<Probes>) -> HttpResponse {
    let mut body = crate::metrics::render();
    if probes.scrape == Scrape::WithQueueState {
        body.push_str(&crate::queue_state::render_stored(&probes.pool).await);
        body.push_str(&crate::pause_gauges::render(&probes.pool).await);
    }
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(body)
}

/// Binds `address` and serves until `shutdown`; returns the bound port (useful with
/// port 0). `None` when `address` is empty.
pub fn spawn(
    address: &str,
    pool: PgPool,
    redis: crate::redis_client::RedisPool,
    storage: Arc<dyn ObjectStore>,
    scrape: Scrape,
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
    let probes = web::Data::new(Probes {
        pool,
        redis,
        storage,
        scrape,
    });
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
