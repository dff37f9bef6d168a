//! One open event stream: a task that reads the tenant's log (a pooled connection per
//! read, given back at once) when its tenant is woken, at each catch-up tick and soon
//! again while an event is held back, and writes SSE messages into a bounded buffer the
//! response body drains. A client that leaves the buffer full for the slow-client timeout
//! is dropped: the task stops and the body ends the connection with an error, so the
//! server holds at most `buffer_messages` messages (plus the socket's own buffers) for a
//! reader that stopped reading.

use std::io;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use quire_shared::config::EventsSettings;
use quire_shared::db::PgPool;
use quire_shared::db::event_stream::{self, StreamError, StreamPage};
use quire_shared::db::tenant_events::{EventCursor, TenantEvent};
use tokio::sync::mpsc::{self, error::SendTimeoutError};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::cursor;
use super::hub::{EventHub, StreamSlot};

/// The first re-read of a held-back event; doubled up to the catch-up interval.
const HELD_BACK_FIRST_RETRY: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Copy)]
pub struct StreamConfig {
    heartbeat: Duration,
    catch_up: Duration,
    buffer: usize,
    slow_client: Duration,
    page_size: i64,
    max_age: Duration,
}

impl From<&EventsSettings> for StreamConfig {
    fn from(settings: &EventsSettings) -> Self {
        Self {
            heartbeat: Duration::from_secs(settings.heartbeat_seconds),
            catch_up: Duration::from_secs(settings.catch_up_seconds),
            buffer: settings.buffer_messages,
            slow_client: Duration::from_millis(settings.slow_client_timeout_ms),
            page_size: settings.page_size,
            max_age: Duration::from_secs(settings.max_stream_seconds),
        }
    }
}

impl StreamConfig {
    pub fn page_size(&self) -> i64 {
        self.page_size
    }
}

/// Why a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    ClientGone,
    SlowClient,
    Pruned,
    Closing,
    MaxAge,
}

/// `id:` only: sets the client's last event id to `position` without an event (the
/// WHATWG rules), so a client that reconnects before any event resumes from here.
fn opening(position: EventCursor) -> Bytes {
    Bytes::from(format!(
        ": quire events\nid: {}\n\n",
        cursor::encode(position)
    ))
}

fn message(event: &TenantEvent) -> Bytes {
    // serde_json writes no raw newline: the payload is one `data:` line.
    let data = serde_json::to_string(&event.payload).unwrap_or_else(|_| "null".to_owned());
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {data}\n\n",
        cursor::encode(EventCursor::of(event)),
        event.event_type
    ))
}

const HEARTBEAT: &[u8] = b": keep-alive\n\n";

/// The stream's start: where it reads from, and the first page the handler read there
/// (so that its errors could still answer a status).
pub struct Start {
    /// The client's Last-Event-ID, or for a new client the log's present.
    pub from: EventCursor,
    pub first: StreamPage,
}

/// Starts the stream's task and returns the response body.
pub fn start(
    pool: PgPool,
    hub: Arc<EventHub>,
    slot: StreamSlot,
    tenant_id: Uuid,
    start: Start,
    config: StreamConfig,
) -> impl Stream<Item = Result<Bytes, io::Error>> + 'static {
    let (tx, mut rx) = mpsc::channel::<Bytes>(config.buffer);
    let dropped = CancellationToken::new();
    let producer = Producer {
        pool,
        hub,
        slot,
        tenant_id,
        config,
        tx,
        dropped: dropped.clone(),
    };
    tokio::spawn(producer.run(start));
    let mut failed = false;
    futures_util::stream::poll_fn(move |cx| {
        if failed {
            return Poll::Ready(None);
        }
        if dropped.is_cancelled() {
            // An error, not an end: the server closes the connection and drops what
            // is still buffered, rather than wait for a client that stopped reading.
            failed = true;
            return Poll::Ready(Some(Err(io::Error::other(
                "event stream dropped: the client did not keep up",
            ))));
        }
        rx.poll_recv(cx).map(|next| next.map(Ok))
    })
}

struct Producer {
    pool: PgPool,
    hub: Arc<EventHub>,
    slot: StreamSlot,
    tenant_id: Uuid,
    config: StreamConfig,
    tx: mpsc::Sender<Bytes>,
    /// Cancelled when the client is dropped for not keeping up.
    dropped: CancellationToken,
}

impl Producer {
    async fn run(mut self, start: Start) {
        let end = self.stream(start).await;
        match end {
            End::SlowClient => {
                tracing::info!(tenant_id = %self.tenant_id, "dropping an event stream whose client does not keep up");
                metrics::counter!(quire_shared::metrics::EVENT_STREAMS_DROPPED, "reason" => "slow_client").increment(1);
                self.dropped.cancel();
            }
            End::Pruned => {
                tracing::info!(tenant_id = %self.tenant_id, "closing an event stream that fell behind the retention window");
                metrics::counter!(quire_shared::metrics::EVENT_STREAMS_DROPPED, "reason" => "pruned").increment(1);
            }
            End::ClientGone | End::Closing | End::MaxAge => {
                tracing::debug!(tenant_id = %self.tenant_id, ?end, "event stream ended");
            }
        }
        // The slot goes with `self`: the tenant's and the process's counts drop now.
    }

    async fn stream(&mut self, start: Start) -> End {
        // The start, not the first page's end: a client that reconnects before it got
        // the first page's events must get them again.
        if let Err(end) = self.send(opening(start.from)).await {
            return end;
        }
        let first_full = self.is_full(&start.first);
        let (mut held_back, mut position) = match self.deliver(start.first).await {
            Ok(reached) => reached,
            Err(end) => return end,
        };
        if first_full {
            // A resume from far back: the rest of the backlog at once, not at a tick.
            match self.read_all(position).await {
                Ok(reached) => (held_back, position) = reached,
                Err(end) => return end,
            }
        }
        let started = Instant::now();
        let mut heartbeat =
            tokio::time::interval_at(started + self.config.heartbeat, self.config.heartbeat);
        heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut catch_up =
            tokio::time::interval_at(started + self.config.catch_up, self.config.catch_up);
        catch_up.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let closes_at = tokio::time::sleep(self.config.max_age);
        tokio::pin!(closes_at);
        let mut retry = HELD_BACK_FIRST_RETRY;
        // One timer, reset only after a read: a heartbeat in between must not restart it.
        let retry_at = tokio::time::sleep(retry);
        tokio::pin!(retry_at);
        loop {
            let read = tokio::select! {
                biased;
                _ = self.hub.closing().cancelled() => return End::Closing,
                _ = self.tx.closed() => return End::ClientGone,
                _ = &mut closes_at => return End::MaxAge,
                changed = self.slot.wake.changed() => match changed {
                    Ok(()) => true,
                    Err(_) => return End::Closing,
                },
                _ = catch_up.tick() => true,
                _ = &mut retry_at, if held_back => {
                    retry = (retry * 2).min(self.config.catch_up);
                    true
                }
                _ = heartbeat.tick() => false,
            };
            if !read {
                if let Err(end) = self.send(Bytes::from_static(HEARTBEAT)).await {
                    return end;
                }
                continue;
            }
            match self.read_all(position).await {
                Ok((still_held_back, reached)) => {
                    if !still_held_back {
                        retry = HELD_BACK_FIRST_RETRY;
                    }
                    retry_at.as_mut().reset(Instant::now() + retry);
                    held_back = still_held_back;
                    position = reached;
                }
                Err(end) => return end,
            }
        }
    }

    /// Reads and sends pages after `position` until a page is not full; answers
    /// (held back, the position reached). A database fault ends the round quietly and
    /// counts as held back: the stream reads again soon from the same position.
    async fn read_all(&mut self, mut position: EventCursor) -> Result<(bool, EventCursor), End> {
        loop {
            let page = match self.read(position).await {
                Ok(page) => page,
                Err(StreamError::Pruned) => return Err(End::Pruned),
                Err(error) => {
                    tracing::debug!(tenant_id = %self.tenant_id, error = format!("{error:#}"), "an event stream read failed; reading again shortly");
                    return Ok((true, position));
                }
            };
            let full = self.is_full(&page);
            let (held_back, reached) = self.deliver(page).await?;
            position = reached;
            if !full {
                return Ok((held_back, position));
            }
        }
    }

    fn is_full(&self, page: &StreamPage) -> bool {
        i64::try_from(page.events.len()).unwrap_or(i64::MAX) >= self.config.page_size
    }

    async fn read(&self, position: EventCursor) -> Result<StreamPage, StreamError> {
        // Never closed: a permit always comes.
        let _permit = self.hub.reads().acquire().await.ok();
        let mut conn = self
            .pool
            .get()
            .await
            .map_err(quire_shared::db::DbError::from)?;
        event_stream::read_page(
            &mut conn,
            self.tenant_id,
            Some(position),
            self.config.page_size,
        )
        .await
    }

    /// Sends a page's events; answers (held back, the position after them).
    async fn deliver(&mut self, page: StreamPage) -> Result<(bool, EventCursor), End> {
        for event in &page.events {
            self.send(message(event)).await?;
        }
        Ok((page.held_back, page.position))
    }

    /// One message into the buffer, waiting at most the slow-client timeout for room.
    async fn send(&self, bytes: Bytes) -> Result<(), End> {
        tokio::select! {
            biased;
            _ = self.hub.closing().cancelled() => Err(End::Closing),
            sent = self.tx.send_timeout(bytes, self.config.slow_client) => match sent {
                Ok(()) => Ok(()),
                Err(SendTimeoutError::Timeout(_)) => Err(End::SlowClient),
                Err(SendTimeoutError::Closed(_)) => Err(End::ClientGone),
            },
        }
    }
}
