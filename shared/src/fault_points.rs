//! Points where a test can hold a running job (feature `fault-injection` only; without
//! it [`pass`] is an empty function the compiler removes). A hold is armed for one
//! document and one point, and catches the first run that gets there: tests of one
//! binary run in parallel, and each holds only its own document.

use uuid::Uuid;

/// A place in a handler where a test may hold the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// The analysis has computed its assets and stores none yet.
    AnalysisBeforeStore,
    /// The analysis has stored its assets and not yet made them current.
    AnalysisBeforeIndex,
    /// The job's finishing transaction has written the job's end, not yet its document.
    FinishBeforeDocument,
}

#[cfg(feature = "fault-injection")]
mod holds {
    use std::sync::Mutex;

    use tokio::sync::oneshot;
    use uuid::Uuid;

    use super::Point;

    struct Armed {
        point: Point,
        document_id: Uuid,
        reached: oneshot::Sender<()>,
        release: oneshot::Receiver<()>,
    }

    static ARMED: Mutex<Vec<Armed>> = Mutex::new(Vec::new());

    /// A run held (or to be held) at a point, until [`Held::release`] or drop.
    pub struct Held {
        reached: Option<oneshot::Receiver<()>>,
        release: oneshot::Sender<()>,
    }

    impl Held {
        /// Waits until the run is held at the point.
        pub async fn reached(&mut self) {
            if let Some(reached) = self.reached.take() {
                let _ = reached.await;
            }
        }

        /// Lets the run go on.
        pub fn release(self) {
            let _ = self.release.send(());
        }
    }

    /// Arms a hold: the next run that passes `point` for `document_id` waits there.
    pub fn hold(point: Point, document_id: Uuid) -> Held {
        let (reached_tx, reached_rx) = oneshot::channel();
        let (release_tx, release_rx) = oneshot::channel();
        if let Ok(mut armed) = ARMED.lock() {
            armed.push(Armed {
                point,
                document_id,
                reached: reached_tx,
                release: release_rx,
            });
        }
        Held {
            reached: Some(reached_rx),
            release: release_tx,
        }
    }

    pub async fn pass(point: Point, document_id: Uuid) {
        let armed = ARMED.lock().ok().and_then(|mut armed| {
            let found = armed
                .iter()
                .position(|hold| hold.point == point && hold.document_id == document_id)?;
            Some(armed.swap_remove(found))
        });
        if let Some(hold) = armed {
            tracing::warn!(?point, %document_id, "fault point: holding the run");
            let _ = hold.reached.send(());
            // A dropped `Held` releases too.
            let _ = hold.release.await;
        }
    }
}

#[cfg(feature = "fault-injection")]
pub use holds::{Held, hold};

/// Goes past `point` at once, unless a test holds runs of `document_id` there.
#[cfg(feature = "fault-injection")]
pub async fn pass(point: Point, document_id: Uuid) {
    holds::pass(point, document_id).await;
}

/// Goes past `point` at once (no fault injection in this build).
#[cfg(not(feature = "fault-injection"))]
pub async fn pass(_point: Point, _document_id: Uuid) {}
