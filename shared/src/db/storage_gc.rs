//! Storage GC's statements: which listed keys no row names, the same question again for
//! one key right before its delete, the database clock, and the sweep's cursor
//! (`storage_gc_cursor`, one row) that lets a pass resume where the last one stopped.

use diesel::OptionalExtension;
use diesel::sql_types::{Array, Bool, Int8, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;

use super::DbError;

/// Every column that names an object in the store, as `(table, column)`. A table that
/// starts storing keys adds its column here and to [`UNNAMED`] and [`NAMED`], or the GC
/// would collect its objects; `dispatcher/tests/it/storage_gc.rs` compares this list with
/// the schema's columns that hold keys.
pub const NAMING_COLUMNS: &[(&str, &str)] = &[
    ("document_versions", "storage_key"),
    ("assets", "storage_key"),
];

/// The keys of `$1` that no row names (both columns are UNIQUE, so each probe is an
/// index lookup).
const UNNAMED: &str = "SELECT k AS key FROM unnest($1::text[]) AS k \
     WHERE NOT EXISTS (SELECT 1 FROM document_versions WHERE storage_key = k) \
       AND NOT EXISTS (SELECT 1 FROM assets WHERE storage_key = k)";

/// Whether a row names `$1`.
const NAMED: &str = "SELECT EXISTS (SELECT 1 FROM document_versions WHERE storage_key = $1) \
         OR EXISTS (SELECT 1 FROM assets WHERE storage_key = $1) AS named";

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
    let rows: Vec<Key> = diesel::sql_query(UNNAMED)
        .bind::<Array<Text>, _>(keys)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|row| row.key).collect())
}

/// Whether a row names `key` now (committed by the time this statement starts).
pub async fn is_named(conn: &mut AsyncPgConnection, key: &str) -> Result<bool, DbError> {
    Ok(diesel::sql_query(NAMED)
        .bind::<Text, _>(key)
        .get_result::<Named>(conn)
        .await?
        .named)
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
