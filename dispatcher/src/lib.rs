//! Quire's dispatcher: relays due outbox events from PostgreSQL to Redis (DESIGN §4 step
//! 2) and runs the maintenance services (DESIGN §5). Any number may run at once; none
//! keeps state another needs.

pub mod maintenance;
mod publisher;
mod wakeups;

use std::sync::Arc;

use anyhow::Context;

use quire_shared::config::Settings;
use quire_shared::db::{self, SessionKind};
use quire_shared::redis_client::{self, RedisPool};
use quire_shared::storage::{self, ObjectStore};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use publisher::Publisher;

/// Runs the dispatcher until `shutdown` is cancelled.
pub async fn run(settings: Settings, shutdown: CancellationToken) -> anyhow::Result<()> {
    // One pool of each per process: the publisher, every maintenance service and the
    // probe listener share them (each holds a connection only for a statement or two).
    // Only the LISTEN connection is its own: it must stay open to hear notifications.
    let pool = db::build_pool_with(&settings.database, SessionKind::Dispatcher)?;
    let redis = RedisPool::build(&settings.redis)?;
    redis_client::warn_unless_noeviction(&redis).await;
    // Storage GC's view of the object store, the same the API and the workers write.
    let store: Arc<dyn ObjectStore> =
        storage::build(&settings.storage).context("failed to set up the object store")?;
    quire_shared::probe_listener::spawn(
        &settings.dispatcher.probe_listen,
        pool.clone(),
        redis.clone(),
        Arc::clone(&store),
        quire_shared::probe_listener::Scrape::Process,
        shutdown.clone(),
    )?;
    let publisher = Publisher::new(&settings, pool.clone(), redis.clone());
    let wake = Arc::new(Notify::new());
    // The pools' connector (the URL's sslmode and roots), for the LISTEN session too.
    let connector = db::PgConnector::parse(settings.database.url.expose())?;
    let listener = tokio::spawn(wakeups::listen(
        connector,
        Arc::clone(&wake),
        shutdown.clone(),
    ));
    let maintenance = maintenance::Maintenance::start(&settings, &pool, &redis, &store, &shutdown);
    tracing::info!(dispatcher_id = publisher.id(), "dispatcher started");
    // The publisher finishes the batch it is on, then returns.
    publisher.run(wake, shutdown).await;
    maintenance.stop().await;
    if let Err(error) = listener.await {
        tracing::warn!(%error, "outbox listener ended abnormally");
    }
    tracing::info!("dispatcher stopped");
    Ok(())
}
