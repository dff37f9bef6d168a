//! Moving an install's objects from one store to another (`quire-admin storage migrate`:
//! from the local folder to S3): every object a row names is copied and read back from
//! the target, its size and SHA-256 compared with what the row recorded.
//!
//! It keeps no state of its own, so a run stopped anywhere (a crash, ctrl-c, a copy
//! limit) is continued by running it again: an object already at the target with the
//! recorded digest is left there and counted as present, anything else is copied (again).
//! Every run reads back every named object from the target, so a run that ends with no
//! problem has verified the whole target, whatever earlier runs did. Objects no row
//! names (orphans, staging files) are not copied: storage GC would only remove them.
//!
//! Bytes stream through: each copy holds a few 64 KiB chunks (and whatever the target
//! buffers for one multipart part), `concurrency` copies at once.

use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::stream::{self, StreamExt};
use tokio_util::io::ReaderStream;
use tokio_util::sync::CancellationToken;

use crate::db::named_objects::{self, NamedObject};
use crate::db::{DbError, PgPool};
use crate::storage::{Digested, ObjectStore, StorageError, StorageKey, put_digested};

/// Bytes read from the source per chunk.
const CHUNK: usize = 64 * 1024;

/// How one run goes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Objects copied at once.
    pub concurrency: usize,
    /// Rows read per page (in key order).
    pub page_size: i64,
    /// Stop after this many copies (`None`: copy everything); the next run continues.
    pub max_copies: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            concurrency: 4,
            page_size: 500,
            max_copies: None,
        }
    }
}

/// Counts so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Objects rows named when the run began.
    pub total: u64,
    /// Objects looked at: the sum of the counts below.
    pub examined: u64,
    /// Copied in this run, and read back with the recorded digest.
    pub copied: u64,
    pub bytes_copied: u64,
    /// At the target already with the recorded digest (read back): nothing to copy.
    pub present: u64,
    /// Named when its page was read, no longer when the copy began (a purge, a newer
    /// analysis): nothing to copy.
    pub gone: u64,
    /// Reported as [`Event::Problem`].
    pub problems: u64,
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Every named object was examined.
    Complete,
    /// `max_copies` copies were made and more were needed.
    LimitReached,
    /// Stopped by its cancellation token (ctrl-c, SIGTERM).
    Interrupted,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub tally: Tally,
    pub ending: Ending,
}

impl Report {
    /// Every named object is at the target, verified.
    pub fn is_verified_whole(&self) -> bool {
        self.ending == Ending::Complete && self.tally.problems == 0
    }
}

/// What is wrong with one object; the run goes on with the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemKind {
    /// The row's key is not one Quire writes: refused, never used as a path.
    UnusableKey,
    /// A row names it, the source has no such object.
    SourceMissing,
    /// The source's bytes are not what the row recorded (`found`: their size and digest;
    /// `None`: larger than recorded). Nothing is left at the target.
    SourceMismatch { found: Option<Digested> },
    /// Copied, and read back from the target different.
    TargetMismatch { found: Digested },
    /// A store failed (the error's text).
    Failed(String),
}

/// One object that is not at the target, verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub storage_key: String,
    /// What the row recorded.
    pub expected: Digested,
    pub kind: ProblemKind,
}

/// What a run tells its caller as it goes.
#[derive(Debug)]
pub enum Event<'a> {
    /// After each object.
    Progress(&'a Tally),
    Problem(&'a Problem),
}

#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error(transparent)]
    Db(#[from] DbError),
}

/// What happened to one object.
enum Outcome {
    Present,
    Copied {
        bytes: u64,
    },
    Gone,
    /// Not looked at: the copy limit was reached or the run was stopped.
    Left,
    Problem(ProblemKind),
}

/// Copies every object a row names from `source` to `target` and reads each back,
/// telling `on_event` of progress and of every problem. `stop` ends the run between
/// objects (copies under way finish).
pub async fn migrate(
    pool: &PgPool,
    source: &dyn ObjectStore,
    target: &dyn ObjectStore,
    options: &Options,
    stop: &CancellationToken,
    on_event: &mut (dyn FnMut(Event<'_>) + Send),
) -> Result<Report, MigrationError> {
    let mut tally = Tally {
        total: {
            let mut conn = pool.get().await.map_err(DbError::from)?;
            u64::try_from(named_objects::count(&mut conn).await?).unwrap_or(0)
        },
        ..Tally::default()
    };
    let copies_left = AtomicU64::new(options.max_copies.unwrap_or(u64::MAX));
    let mut after: Option<String> = None;
    let ending = loop {
        if stop.is_cancelled() {
            break Ending::Interrupted;
        }
        let page = {
            let mut conn = pool.get().await.map_err(DbError::from)?;
            named_objects::page_after(&mut conn, after.as_deref(), options.page_size).await?
        };
        let Some(last) = page.last() else {
            break Ending::Complete;
        };
        after = Some(last.storage_key.clone());
        let copies_left = &copies_left;
        let mut outcomes = stream::iter(&page)
            .map(|object| async move {
                let outcome = if stop.is_cancelled() {
                    Ok(Outcome::Left)
                } else {
                    copy_one(pool, source, target, object, copies_left).await
                };
                (object, outcome)
            })
            .buffer_unordered(options.concurrency.max(1));
        let mut left = false;
        while let Some((object, outcome)) = outcomes.next().await {
            match outcome? {
                Outcome::Left => {
                    left = true;
                    continue;
                }
                Outcome::Present => tally.present += 1,
                Outcome::Copied { bytes } => {
                    tally.copied += 1;
                    tally.bytes_copied += bytes;
                }
                Outcome::Gone => tally.gone += 1,
                Outcome::Problem(kind) => {
                    tally.problems += 1;
                    on_event(Event::Problem(&Problem {
                        storage_key: object.storage_key.clone(),
                        expected: expected(object),
                        kind,
                    }));
                }
            }
            tally.examined += 1;
            on_event(Event::Progress(&tally));
        }
        if left {
            break if stop.is_cancelled() {
                Ending::Interrupted
            } else {
                Ending::LimitReached
            };
        }
    };
    Ok(Report { tally, ending })
}

fn expected(object: &NamedObject) -> Digested {
    Digested {
        size_bytes: u64::try_from(object.size_bytes).unwrap_or(u64::MAX),
        sha256: object.sha256.to_ascii_lowercase(),
    }
}

/// Takes one copy from the budget; false when it is spent.
fn take_copy(copies_left: &AtomicU64) -> bool {
    copies_left
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
            left.checked_sub(1)
        })
        .is_ok()
}

/// One object: present at the target with the recorded digest, or copied (hashed on the
/// way) and read back. Only a database failure ends the run; every store failure is
/// this object's problem.
async fn copy_one(
    pool: &PgPool,
    source: &dyn ObjectStore,
    target: &dyn ObjectStore,
    object: &NamedObject,
    copies_left: &AtomicU64,
) -> Result<Outcome, DbError> {
    let Some(key) = StorageKey::from_stored(&object.storage_key) else {
        return Ok(Outcome::Problem(ProblemKind::UnusableKey));
    };
    let expected = expected(object);
    match target.digest(&key).await {
        Ok(found) if found == expected => return Ok(Outcome::Present),
        // Missing, or left wrong by something else: (re)written below.
        Ok(_) | Err(StorageError::NotFound) => {}
        Err(error) => return Ok(failed("reading the target", &error)),
    }
    if !take_copy(copies_left) {
        return Ok(Outcome::Left);
    }
    let reader = match source.open(&key).await {
        Ok(reader) => reader,
        Err(StorageError::NotFound) => {
            let mut conn = pool.get().await?;
            return Ok(if named_objects::is_named(&mut conn, key.as_str()).await? {
                Outcome::Problem(ProblemKind::SourceMissing)
            } else {
                Outcome::Gone
            });
        }
        Err(error) => return Ok(failed("opening the source", &error)),
    };
    let body = ReaderStream::with_capacity(reader, CHUNK).boxed();
    // The recorded size is the limit: a longer source stops at once, nothing stored.
    match put_digested(target, &key, body, expected.size_bytes).await {
        Ok(copied) if copied == expected => {}
        Ok(copied) => {
            // Never leave bytes at the target that a verified run would not.
            if let Err(error) = target.delete(&key).await {
                return Ok(failed("removing a mismatched copy", &error));
            }
            return Ok(Outcome::Problem(ProblemKind::SourceMismatch {
                found: Some(copied),
            }));
        }
        Err(StorageError::TooLarge { .. }) => {
            return Ok(Outcome::Problem(ProblemKind::SourceMismatch {
                found: None,
            }));
        }
        Err(error) => return Ok(failed("copying", &error)),
    }
    Ok(match target.digest(&key).await {
        Ok(found) if found == expected => Outcome::Copied {
            bytes: expected.size_bytes,
        },
        Ok(found) => Outcome::Problem(ProblemKind::TargetMismatch { found }),
        Err(error) => failed("reading the copy back", &error),
    })
}

fn failed(doing: &str, error: &StorageError) -> Outcome {
    Outcome::Problem(ProblemKind::Failed(format!("{doing}: {error}")))
}
