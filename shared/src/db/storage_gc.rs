//! Storage GC's statements: which listed keys no row names, the same question again for
//! one key right before its delete, the database clock, and the sweep's cursor
//! (`storage_gc_cursor`, one row) that lets a pass resume where the last one stopped.

use diesel::OptionalExtension;
use diesel::sql_types::{Array, Bool, Int8, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;

use super::DbError;

/// Every column that names an object in the store, as `(table, column)`; both
/// statements below are built from it. A table that starts storing keys adds its column
/// here, or the GC would collect its objects: `dispatcher/tests/it/storage_gc.rs`
/// compares this list with the schema's columns that look like they hold keys.
pub const NAMING_COLUMNS: &[(&str, &str)] = &[
    ("document_versions", "storage_key"),
    ("assets", "storage_key"),
];

/// `NOT EXISTS (…) AND …` over every naming column, for the key `{key}` (each column is
/// UNIQUE, so each probe is an index lookup).
fn named_nowhere(key: &str) -> String {
    NAMING_COLUMNS
        .iter()
        .map(|(table, column)| format!("NOT EXISTS (SELECT 1 FROM {table} WHERE {column} = {key})"))
        .collect::<Vec<_>>()
        .join(" AND ")
}

#[derive(diesel::QueryableByName)]
struct Key {
    #[diesel(sql_type = Text)]
    key: String,
}

#[derive(diesel::QueryableByName)]
struct Named {
    #[diesel(sql_type = Bool)]
    named: bool,
}

#[derive(diesel::QueryableByName)]
struct Now {
    #[diesel(sql_type = Timestamptz)]
    now: OffsetDateTime,
}

#[derive(diesel::QueryableByName)]
struct After {
    #[diesel(sql_type = Nullable<Text>)]
    after_key: Option<String>,
}

/// The keys among `keys` that no row names: one statement for a whole page.
pub async fn unnamed(conn: &mut AsyncPgConnection, keys: &[&str]) -> Result<Vec<String>, DbError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<Key> = diesel::sql_query(format!(
        "SELECT k AS key FROM unnest($1::text[]) AS k WHERE {}",
        named_nowhere("k")
    ))
    .bind::<Array<Text>, _>(keys)
    .load(conn)
    .await?;
    Ok(rows.into_iter().map(|row| row.key).collect())
}

/// Whether a row names `key` now (committed by the time this statement starts).
pub async fn is_named(conn: &mut AsyncPgConnection, key: &str) -> Result<bool, DbError> {
    Ok(
        diesel::sql_query(format!("SELECT NOT ({}) AS named", named_nowhere("$1")))
            .bind::<Text, _>(key)
            .get_result::<Named>(conn)
            .await?
            .named,
    )
}

/// The database's clock, which every age the GC compares is measured against.
pub async fn database_now(conn: &mut AsyncPgConnection) -> Result<OffsetDateTime, DbError> {
    Ok(diesel::sql_query("SELECT now() AS now")
        .get_result::<Now>(conn)
        .await?
        .now)
}

/// The key the last pass stopped after; `None`: start from the first key.
pub async fn cursor(conn: &mut AsyncPgConnection) -> Result<Option<String>, DbError> {
    Ok(
        diesel::sql_query("SELECT after_key FROM storage_gc_cursor WHERE id")
            .get_result::<After>(conn)
            .await
            .optional()?
            .and_then(|row| row.after_key),
    )
}

/// Stores where the pass stopped (`None` after it reached the end of the store: the next
/// pass starts over) and counts the pass, and the sweep when `swept`.
pub async fn save_cursor(
    conn: &mut AsyncPgConnection,
    after_key: Option<&str>,
    swept: bool,
) -> Result<(), DbError> {
    diesel::sql_query(
        "INSERT INTO storage_gc_cursor (id, after_key, passes, sweeps) \
         VALUES (true, $1, 1, $2) \
         ON CONFLICT (id) DO UPDATE SET after_key = EXCLUDED.after_key, \
             passes = storage_gc_cursor.passes + 1, \
             sweeps = storage_gc_cursor.sweeps + EXCLUDED.sweeps, updated_at = now()",
    )
    .bind::<Nullable<Text>, _>(after_key)
    .bind::<Int8, _>(i64::from(swept))
    .execute(conn)
    .await?;
    Ok(())
}
