//! Quire's dispatcher: relays due outbox events from PostgreSQL to Redis (DESIGN §4 step
//! 2) and returns abandoned publication claims. Any number may run at once; none keeps
//! state another needs.

mod maintenance;
mod publisher;
mod wakeups;

use std::sync::Arc;

use quire_shared::config::Settings;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use publisher::Publisher;

/// Runs the dispatcher until `shutdown` is cancelled.
pub async fn run(settings: Settings, shutdown: CancellationToken) -> anyhow::Result<()> {
    let publisher = Publisher::new(&settings)?;
    quire_shared::broker::warn_unless_noeviction(publisher.redis()).await;
    quire_shared::admin_listener::spawn(
        &settings.dispatcher.admin_listen,
        quire_shared::db::build_pool(&settings.database)?,
        publisher.redis().clone(),
        shutdown.clone(),
    )?;
    let wake = Arc::new(Notify::new());
    let listener = tokio::spawn(wakeups::listen(
        settings.database.url.expose().to_owned(),
        Arc::clone(&wake),
        shutdown.clone(),
    ));
    let maintenance = tokio::spawn(maintenance::Maintenance::new(&settings)?.run(shutdown.clone()));
    tracing::info!(dispatcher_id = publisher.id(), "dispatcher started");
    // The publisher finishes the batch it is on, then returns.
    publisher.run(wake, shutdown).await;
    if let Err(error) = maintenance.await {
        tracing::warn!(%error, "maintenance ended abnormally");
    }
    if let Err(error) = listener.await {
        tracing::warn!(%error, "outbox listener ended abnormally");
    }
    tracing::info!("dispatcher stopped");
    Ok(())
}
