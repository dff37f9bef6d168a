//! The API process's one LISTEN connection for the tenant event log: each NOTIFY names
//! the tenant whose transaction recorded events, and wakes that tenant's open streams.
//! A wake-up is only a hint: a lost one (the connection was down) costs a stream at most
//! its catch-up interval, never an event. Streams hold no connection of their own.

use std::sync::Arc;

use futures_util::StreamExt;
use quire_shared::db::PgConnector;
use quire_shared::db::tenant_events::TENANT_EVENTS_CHANNEL;
use quire_shared::retry::ReconnectBackoff;
use tokio_postgres::AsyncMessage;
use uuid::Uuid;

use super::hub::EventHub;

/// Keeps the LISTEN connection open until the hub closes, reconnecting with backoff.
pub async fn listen(connector: PgConnector, hub: Arc<EventHub>) {
    let mut delays = ReconnectBackoff::new();
    loop {
        match listen_once(&connector, &hub, &mut delays).await {
            Ok(()) => return,
            Err(error) => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "event listener lost its connection, streams catch up by polling meanwhile"
                );
            }
        }
        let delay = delays.next_delay();
        tokio::select! {
            _ = hub.closing().cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

async fn listen_once(
    connector: &PgConnector,
    hub: &Arc<EventHub>,
    delays: &mut ReconnectBackoff,
) -> anyhow::Result<()> {
    let (client, mut connection) = connector.connect_client().await?;
    let forward = Arc::clone(hub);
    let mut driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(note)) => match Uuid::parse_str(note.payload()) {
                    Ok(tenant) => forward.wake(tenant),
                    // Not ours to judge: anything else on the channel wakes everyone.
                    Err(_) => forward.wake_all(),
                },
                Ok(_) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    });
    client
        .batch_execute(&format!("LISTEN {TENANT_EVENTS_CHANNEL}"))
        .await?;
    if delays.reset() {
        tracing::info!("event listener connected again");
    }
    // Whatever was committed while nobody listened.
    hub.wake_all();
    tokio::select! {
        _ = hub.closing().cancelled() => {
            driver.abort();
            Ok(())
        }
        ended = &mut driver => match ended {
            Ok(Err(error)) => Err(error.into()),
            _ => Err(anyhow::anyhow!("event listener connection closed")),
        },
    }
}
