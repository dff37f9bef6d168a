//! LISTEN for the API's commit-time NOTIFY, so a new event is published at once instead
//! of at the next poll. Notifications only wake the publisher: a lost one costs at most a
//! poll interval, never an event.

use std::sync::Arc;

use futures_util::StreamExt;
use quire_shared::db::{OUTBOX_CHANNEL, PgConnector};
use quire_shared::retry::ReconnectBackoff;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::CancellationToken;

/// Keeps a LISTEN connection open until shutdown, reconnecting with backoff.
pub async fn listen(connector: PgConnector, wake: Arc<Notify>, shutdown: CancellationToken) {
    let mut delays = ReconnectBackoff::new();
    loop {
        match listen_once(&connector, &wake, &shutdown).await {
            Ok(()) => return,
            Err(error) => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "outbox listener lost its connection, polling meanwhile"
                );
            }
        }
        let delay = delays.next_delay();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

async fn listen_once(
    connector: &PgConnector,
    wake: &Arc<Notify>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let (client, mut connection) = connector.connect_client().await?;
    let forward = Arc::clone(wake);
    let mut driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                // notify_one keeps one permit: a burst of commits wakes the publisher once.
                Ok(AsyncMessage::Notification(_)) => forward.notify_one(),
                Ok(_) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    });
    client
        .batch_execute(&format!("LISTEN {OUTBOX_CHANNEL}"))
        .await?;
    tracing::debug!("listening for outbox notifications");
    // Whatever was committed while we were not listening.
    wake.notify_one();
    tokio::select! {
        _ = shutdown.cancelled() => {
            driver.abort();
            Ok(())
        }
        ended = &mut driver => match ended {
            Ok(Err(error)) => Err(error.into()),
            _ => Err(anyhow::anyhow!("listener connection closed")),
        },
    }
}
