//! Storage garbage collection (DESIGN §5, §10): deletes objects that no row names once
//! they are older than the grace — what a crash between store and commit leaves, an
//! upload whose client went away after its bytes were stored, a killed process's
//! `.partial/` file, the assets a cancelled or fenced-out run wrote under its own keys.
//!
//! A pass pages through the store in key order from where the last pass stopped (the
//! cursor in PostgreSQL, so any dispatcher resumes it), checks each page's old keys
//! against every column that names an object in one statement, asks again for each key
//! right before deleting it, and stops after its budget of batches. One dispatcher per
//! interval (an advisory lock). Why an object in flight is safe: docs/decisions.md,
//! "Storage garbage collection".

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures_util::FutureExt;
use quire_shared::db::maintenance::{self, locks};
use quire_shared::db::{DbError, PgPool, storage_gc as db};
use quire_shared::metrics;
use quire_shared::storage::{ListedObject, ObjectStore, StorageKey};
use time::OffsetDateTime;

use futures_util::future::BoxFuture;
use quire_shared::db::schedules::Slot;
use quire_shared::schedules::ScheduleName;

use super::schedules::Scheduled;

/// What a pass may do.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Objects younger than this are never touched.
    pub grace: Duration,
    /// Objects listed, and checked in one statement, per batch.
    pub batch_size: usize,
    /// Batches per pass at most.
    pub batches_per_pass: usize,
}

/// The "now" a pass measures ages against.
#[derive(Debug, Clone, Copy)]
pub enum Now {
    /// The database's clock (production).
    Database,
    /// A given instant: tests age objects past the grace on any backend this way.
    At(OffsetDateTime),
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// Objects listed.
    pub listed: usize,
    /// Objects deleted, and their bytes.
    pub collected: usize,
    pub collected_bytes: u64,
    /// Old objects a row named at the delete-time check (committed after the page check).
    pub named_late: usize,
    /// Listing or delete failures (an object that failed stays for a later sweep).
    pub errors: usize,
    /// The pass reached the end of the store: the next one starts over.
    pub swept: bool,
}

/// Top-level places of the store the GC may collect from: the tenants' objects and the
/// local store's staging folder. Anything else is not Quire's and is left alone.
const COLLECTABLE: &[&str] = &["tenants/", ".partial/"];

/// Runs one pass, unless another dispatcher holds this tick (`None`). Records the
/// metrics and logs one line.
pub async fn run_pass(
    pool: &PgPool,
    store: &Arc<dyn ObjectStore>,
    budget: Budget,
    now: Now,
) -> anyhow::Result<Option<Swept>> {
    let mut conn = pool.get().await.context("no database connection")?;
    let store = Arc::clone(store);
    // The lock is a transaction's: every statement in it still sees what committed
    // before it started (read committed), which the delete-time check relies on.
    let swept = maintenance::once_per_tick(&mut conn, locks::STORAGE_GC, move |conn| {
        async move { sweep(conn, store.as_ref(), budget, now).await }.boxed()
    })
    .await
    .inspect_err(|_| ::metrics::counter!(metrics::STORAGE_GC_ERRORS).increment(1))
    .context("storage gc pass failed")?;
    if let Some(swept) = &swept {
        ::metrics::counter!(metrics::STORAGE_GC_PASSES).increment(1);
        ::metrics::counter!(metrics::STORAGE_GC_OBJECTS).increment(swept.collected as u64);
        ::metrics::counter!(metrics::STORAGE_GC_BYTES).increment(swept.collected_bytes);
        ::metrics::counter!(metrics::STORAGE_GC_ERRORS).increment(swept.errors as u64);
        tracing::info!(
            listed = swept.listed,
            collected = swept.collected,
            collected_bytes = swept.collected_bytes,
            named_late = swept.named_late,
            errors = swept.errors,
            swept = swept.swept,
            "storage gc pass"
        );
    }
    Ok(swept)
}

async fn sweep(
    conn: &mut diesel_async::AsyncPgConnection,
    store: &dyn ObjectStore,
    budget: Budget,
    now: Now,
) -> Result<Swept, DbError> {
    let now = match now {
        Now::Database => db::database_now(conn).await?,
        Now::At(at) => at,
    };
    let cutoff = now - budget.grace;
    let mut after = db::cursor(conn).await?;
    let mut swept = Swept::default();
    for _ in 0..budget.batches_per_pass {
        let page = match store.list_after(after.as_deref(), budget.batch_size).await {
            Ok(page) => page,
            Err(error) => {
                // The cursor stays after the last page done; the next pass retries.
                swept.errors += 1;
                tracing::warn!(%error, "storage gc could not list objects");
                break;
            }
        };
        swept.listed += page.len();
        collect_page(conn, store, &page, cutoff, &mut swept).await?;
        if page.len() < budget.batch_size {
            swept.swept = true;
            after = None;
            break;
        }
        after = page.last().map(|object| object.key.clone());
    }
    db::save_cursor(conn, after.as_deref(), swept.swept).await?;
    Ok(swept)
}

/// Deletes the objects of one page that are older than `cutoff` and that no row names,
/// asking again for each right before its delete.
async fn collect_page(
    conn: &mut diesel_async::AsyncPgConnection,
    store: &dyn ObjectStore,
    page: &[ListedObject],
    cutoff: OffsetDateTime,
    swept: &mut Swept,
) -> Result<(), DbError> {
    let old: Vec<&ListedObject> = page
        .iter()
        .filter(|object| object.modified_at < cutoff)
        .filter(|object| COLLECTABLE.iter().any(|top| object.key.starts_with(top)))
        .collect();
    let keys: Vec<&str> = old.iter().map(|object| object.key.as_str()).collect();
    let unnamed = db::unnamed(conn, &keys).await?;
    for object in old {
        if !unnamed.contains(&object.key) {
            continue;
        }
        // A key that is not made of plain segments is not ours, never guessed at.
        let Some(key) = StorageKey::from_stored(&object.key) else {
            continue;
        };
        // A row that committed since the page's check names it: keep it. (A row that
        // commits after this statement is the grace's to guard, see decisions.md.)
        if db::is_named(conn, key.as_str()).await? {
            swept.named_late += 1;
            continue;
        }
        match store.delete(&key).await {
            Ok(()) => {
                swept.collected += 1;
                swept.collected_bytes += object.size_bytes;
            }
            Err(error) => {
                swept.errors += 1;
                tracing::warn!(%error, "storage gc could not delete an object, trying again next sweep");
            }
        }
    }
    Ok(())
}

/// The service: one pass per interval on the database clock.
/// The `storage-gc` schedule: each slot this dispatcher claims runs one bounded pass
/// (the schedule runner makes it once per slot across the fleet).
pub struct StorageGc {
    store: Arc<dyn ObjectStore>,
    budget: Budget,
}

impl StorageGc {
    pub fn new(store: Arc<dyn ObjectStore>, budget: Budget) -> Self {
        Self { store, budget }
    }
}

impl Scheduled for StorageGc {
    fn name(&self) -> ScheduleName {
        ScheduleName::StorageGc
    }

    fn run<'a>(
        &'a self,
        pool: &'a PgPool,
        _slot: &'a Slot,
    ) -> BoxFuture<'a, anyhow::Result<String>> {
        async move {
            Ok(
                match run_pass(pool, &self.store, self.budget, Now::Database).await? {
                    Some(swept) => format!(
                        "{} objects listed, {} collected ({} bytes), {} errors{}",
                        swept.listed,
                        swept.collected,
                        swept.collected_bytes,
                        swept.errors,
                        if swept.swept {
                            "; the sweep is complete"
                        } else {
                            ""
                        }
                    ),
                    None => "another dispatcher was collecting; nothing done".to_owned(),
                },
            )
        }
        .boxed()
    }
}
