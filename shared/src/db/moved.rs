//! A statement that writes live outbox events runs again when PostgreSQL refused it
//! because a row it waited for moved to the other partition of `outbox_events`.
//!
//! `outbox_events` is partitioned by status (`outbox_events_live` holds `PENDING` and
//! `PUBLISHING`, `outbox_events_delivered` the rest; docs/decisions.md, "Live events apart
//! from the history"). The mark published and a cancel move a row across. A statement
//! that was waiting for that row's lock does not follow it, as it follows a row updated
//! in place, to re-check its guard: PostgreSQL raises a serialization failure ("tuple to
//! be locked was already moved to another partition due to concurrent update"). Every
//! guard of those statements wants a live row, so the moved row is one the statement
//! would have skipped; the statement runs again with a new snapshot and skips it. A
//! statement inside a transaction runs in a savepoint of its own
//! ([`again_in_savepoint_if_moved`]), since the failure aborts the transaction.
//!
//! Macros, not functions taking an async closure: the future of a generic async closure
//! is not provably `Send`, and these run in spawned tasks.

use diesel::result::{Error, QueryResult};
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, TransactionManager};

/// How many times a statement runs before the refusal is returned. Each further run
/// needs another row of it moved meanwhile by a concurrent mark or cancel.
pub const ATTEMPTS: u32 = 5;

/// Whether `error` is PostgreSQL's refusal to follow a row into another partition
/// (SQLSTATE 40001, read by its message: diesel-async keeps only the class of it).
pub fn is_moved_row(error: &Error) -> bool {
    matches!(error, Error::DatabaseError(_, info)
        if info.message().contains("moved to another partition"))
}

/// Whether a statement that failed with `error` on its `attempt`th run runs again;
/// counts the attempt when it does.
pub fn run_again(error: &Error, attempt: &mut u32) -> bool {
    if *attempt < ATTEMPTS && is_moved_row(error) {
        tracing::debug!(
            attempt = *attempt,
            "a row moved to the other partition; running again"
        );
        *attempt += 1;
        true
    } else {
        false
    }
}

/// A savepoint (a transaction outside one), as diesel's transaction manager nests them.
pub async fn savepoint(conn: &mut AsyncPgConnection) -> QueryResult<()> {
    AnsiTransactionManager::begin_transaction(conn).await
}

pub async fn release(conn: &mut AsyncPgConnection) -> QueryResult<()> {
    AnsiTransactionManager::commit_transaction(conn).await
}

pub async fn roll_back(conn: &mut AsyncPgConnection) -> QueryResult<()> {
    AnsiTransactionManager::rollback_transaction(conn).await
}

/// Evaluates `$statement` (one awaited statement outside a transaction, a
/// `QueryResult`) again while PostgreSQL refuses it for a moved row.
macro_rules! again_if_moved {
    ($statement:expr) => {{
        let mut attempt = 1;
        loop {
            match $statement {
                Err(error) if $crate::db::moved::run_again(&error, &mut attempt) => {}
                result => break result,
            }
        }
    }};
}
pub(crate) use again_if_moved;

/// Evaluates `$statement` (one awaited statement on `$conn`, a `QueryResult`) in a
/// savepoint, again while PostgreSQL refuses it for a moved row: the refusal aborts
/// only the savepoint, and the caller's transaction goes on.
macro_rules! again_in_savepoint_if_moved {
    ($conn:expr, $statement:expr) => {{
        let mut attempt = 1;
        loop {
            if let Err(error) = $crate::db::moved::savepoint($conn).await {
                break Err(error);
            }
            match $statement {
                Ok(value) => break $crate::db::moved::release($conn).await.map(|()| value),
                Err(error) => {
                    let rolled_back = $crate::db::moved::roll_back($conn).await.is_ok();
                    if !(rolled_back && $crate::db::moved::run_again(&error, &mut attempt)) {
                        break Err(error);
                    }
                }
            }
        }
    }};
}
pub(crate) use again_in_savepoint_if_moved;
