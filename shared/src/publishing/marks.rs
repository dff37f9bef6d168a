//! The `PUBLISHING → PUBLISHED` marks of pushed events, written by one task of the
//! publishing process a short linger after the push, in batches: the dispatcher's and the
//! express path's alike.
//!
//! Why not at once: the worker's claim follows the push by a fraction of a millisecond,
//! and a mark that comes first takes the job row's lock (it records the job's
//! `announced_event_id` while the job is `QUEUED`), so the claim waits for the mark's
//! commit, and both compete for the same two cores. Written after the claim, the mark
//! finds the job `RUNNING` and only flips the event: one write of the job row less, and
//! the job's path holds no bookkeeping (docs/benchmarks.md, the seventeenth comparison:
//! "A/B of the express mark after the claim"). The dispatcher's round no longer waits
//! for its mark either: it plans its next round while the marks linger, and marks of
//! several rounds go out in one statement. Nothing waits for a mark: an event not yet
//! marked is still claimed by this process and counts in flight only while its job is
//! unclaimed (`db::publishing_in_flight`); if the process dies first its claim expires
//! and claim recovery publishes it again (a duplicate the worker's claim refuses).

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::db::PgPool;
use crate::db::outbox::{self, Published};

/// How long the first mark of a batch waits for the worker's claim of its job (0.2–1 ms
/// after the push on this machine at 50 jobs/s) and for other marks to join it. A mark
/// only has to come before `dispatcher.claim_timeout_seconds`.
pub const MARK_LINGER: Duration = Duration::from_millis(3);

/// A statement takes waiting requests until it holds this many marks (a request's marks
/// go whole: a dispatcher's round of up to `dispatcher.batch_size`).
const MAX_MARKS: usize = 256;

/// Whose marks a writer writes: the express path's are counted apart as well
/// (`quire_events_published_express_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishedBy {
    Dispatcher,
    Express,
}

enum Request {
    Mark(Vec<Published>),
    /// Write what is waiting now, then answer.
    Flush(oneshot::Sender<()>),
}

/// The handle publishers send their marks to; the writer task ends when every handle is
/// dropped, after writing what it holds.
pub struct Marks {
    requests: mpsc::Sender<Request>,
}

impl Marks {
    /// Starts the writer on the current runtime, marking as `claimer`.
    pub fn start(pool: PgPool, claimer: String, published_by: PublishedBy) -> Self {
        let (requests, pending) = mpsc::channel(MAX_MARKS * 4);
        tokio::spawn(write_marks(pool, claimer, published_by, pending));
        Self { requests }
    }

    /// Queues the marks of pushed events; waits only while the queue is full.
    pub async fn mark(&self, published: Vec<Published>) {
        if published.is_empty() {
            return;
        }
        let events = published.len();
        if self.requests.send(Request::Mark(published)).await.is_err() {
            tracing::warn!(
                events,
                "the mark writer stopped, claim recovery publishes the events again"
            );
        }
    }

    /// Writes every mark queued before this call, without the linger (a graceful
    /// shutdown, a test that reads the events).
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.requests.send(Request::Flush(done)).await.is_ok() {
            let _ = written.await;
        }
    }
}

async fn write_marks(
    pool: PgPool,
    claimer: String,
    published_by: PublishedBy,
    mut pending: mpsc::Receiver<Request>,
) {
    let mut batch: Vec<Published> = Vec::with_capacity(MAX_MARKS);
    let mut flushed: Vec<oneshot::Sender<()>> = Vec::new();
    while let Some(first) = pending.recv().await {
        let mut linger = true;
        match first {
            Request::Mark(published) => batch.extend(published),
            Request::Flush(done) => {
                flushed.push(done);
                linger = false;
            }
        }
        if linger {
            tokio::time::sleep(MARK_LINGER).await;
        }
        while batch.len() < MAX_MARKS {
            match pending.try_recv() {
                Ok(Request::Mark(published)) => batch.extend(published),
                Ok(Request::Flush(done)) => flushed.push(done),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            write(&pool, &claimer, published_by, &batch).await;
            batch.clear();
        }
        for done in flushed.drain(..) {
            let _ = done.send(());
        }
    }
}

async fn write(pool: &PgPool, claimer: &str, published_by: PublishedBy, batch: &[Published]) {
    let marked = async {
        let mut conn = pool.get().await?;
        outbox::mark_published(&mut conn, claimer, batch).await
    }
    .await;
    match marked {
        Ok(marked) => {
            metrics::counter!(crate::metrics::EVENTS_PUBLISHED).increment(marked as u64);
            if published_by == PublishedBy::Express {
                metrics::counter!(crate::metrics::EVENTS_EXPRESS).increment(marked as u64);
            }
        }
        Err(error) => tracing::warn!(
            %error,
            events = batch.len(),
            "marking events published failed, claim recovery publishes them again"
        ),
    }
}
