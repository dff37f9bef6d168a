//! The rows that name a stored object, with the size and SHA-256 each recorded:
//! `document_versions` (uploaded bytes) and `assets` (thumbnails, texts). What a copy of
//! the whole store to another (`actions::storage_migration`) walks and checks.

use diesel::sql_types::{Int8, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use super::DbError;

/// One row's object: its key and what the row recorded of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, diesel::QueryableByName)]
pub struct NamedObject {
    #[diesel(sql_type = Text)]
    pub storage_key: String,
    #[diesel(sql_type = Int8)]
    pub size_bytes: i64,
    #[diesel(sql_type = Text)]
    pub sha256: String,
    /// `document_version` or `asset`: which table names it.
    #[diesel(sql_type = Text)]
    pub named_by: String,
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = Int8)]
    count: i64,
}

#[derive(diesel::QueryableByName)]
struct Named {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    named: bool,
}

/// How many objects rows name (versions and assets), counted now.
pub async fn count(conn: &mut AsyncPgConnection) -> Result<i64, DbError> {
    let row: Count = diesel::sql_query(
        "SELECT (SELECT count(*) FROM document_versions) + (SELECT count(*) FROM assets) AS count",
    )
    .get_result(conn)
    .await?;
    Ok(row.count)
}

/// Up to `limit` named objects in key order after `after` (`None`: from the first), over
/// both tables at once. Each `storage_key` column is unique, so each side is an index
/// scan and the page a merge of the two: a page costs the same wherever it starts.
pub async fn page_after(
    conn: &mut AsyncPgConnection,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<NamedObject>, DbError> {
    Ok(diesel::sql_query(
        "SELECT storage_key, size_bytes, sha256, named_by FROM ( \
             (SELECT storage_key, size_bytes, sha256, 'document_version' AS named_by \
              FROM document_versions WHERE storage_key > $1 \
              ORDER BY storage_key LIMIT $2) \
             UNION ALL \
             (SELECT storage_key, size_bytes, sha256, 'asset' AS named_by \
              FROM assets WHERE storage_key > $1 \
              ORDER BY storage_key LIMIT $2) \
         ) AS named ORDER BY storage_key LIMIT $2",
    )
    // "" sorts before every key, and keeps `storage_key > $1` an index condition.
    .bind::<Text, _>(after.unwrap_or(""))
    .bind::<Int8, _>(limit)
    .load(conn)
    .await?)
}

/// Whether a row still names `storage_key` (a purge or a newer analysis may have let go
/// of it since a page was read).
pub async fn is_named(conn: &mut AsyncPgConnection, storage_key: &str) -> Result<bool, DbError> {
    let row: Named = diesel::sql_query(
        "SELECT EXISTS (SELECT 1 FROM document_versions WHERE storage_key = $1) \
             OR EXISTS (SELECT 1 FROM assets WHERE storage_key = $1) AS named",
    )
    .bind::<Text, _>(storage_key)
    .get_result(conn)
    .await?;
    Ok(row.named)
}
