//! Full-text search behind a small interface. The PostgreSQL engine keeps a tsvector per
//! document (title A, tags and correspondent B, text C; the tenant's text search
//! configuration) with a GIN index; another engine would implement the same two calls
//! and keep its own index, fed from the same rows.

use async_trait::async_trait;
use diesel::sql_types::{Float4, Int8, Text, Uuid as SqlUuid};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use serde::Serialize;
use uuid::Uuid;

use crate::db::{DbError, analysis};

/// The headline reads at most this many characters of a document's text: ts_headline
/// parses all of its input, so a page of 200 hits over texts of a million characters each
/// cost seconds. The passage shown comes from the start; the match itself is still found
/// anywhere in the text (the index covers it all). See docs/decisions.md.
pub const HEADLINE_SOURCE_CHARS: usize = 20_000;
/// The deepest position a search page may start at: every page ranks every match up to
/// `offset + limit`, so depth is cost. Deeper than this, a reader narrows the query.
pub const MAX_SEARCH_OFFSET: i64 = 1_000;
/// A search statement's time limit (`SET LOCAL statement_timeout`): one reader's query
/// never holds a pooled connection longer.
pub const SEARCH_STATEMENT_TIMEOUT_MS: u64 = 2_000;

/// Marks a matched part of a snippet; never appears in text (a C0 control character).
const START: char = '\u{2}';
const STOP: char = '\u{3}';

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnippetPart {
    pub text: String,
    /// The part matched the query.
    #[serde(rename = "match")]
    pub matched: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub document_id: Uuid,
    pub rank: f32,
    /// The best passages, as plain parts a client renders safely (no markup inside).
    pub snippet: Vec<SnippetPart>,
}

#[async_trait]
pub trait SearchEngine: Send + Sync {
    /// Makes a document's current title, labels and text findable.
    async fn index(&self, conn: &mut AsyncPgConnection, document_id: Uuid) -> Result<(), DbError>;

    /// One page of a tenant's live (not trashed) documents matching `query`, best first;
    /// `offset` is at most [`MAX_SEARCH_OFFSET`]. A search past its time limit fails
    /// with a [`crate::db::DbFault::StatementTimeout`].
    async fn search(
        &self,
        conn: &mut AsyncPgConnection,
        tenant_id: Uuid,
        query: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<SearchHit>, DbError>;
}

pub struct PostgresSearch;

#[derive(diesel::QueryableByName)]
struct HitRow {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Float4)]
    rank: f32,
    #[diesel(sql_type = Text)]
    snippet: String,
}

/// Splits ts_headline's output at the markers into plain parts.
fn snippet_parts(snippet: &str) -> Vec<SnippetPart> {
    let mut parts = Vec::new();
    let mut matched = false;
    let mut current = String::new();
    for ch in snippet.chars() {
        if ch == START || ch == STOP {
            if !current.is_empty() {
                parts.push(SnippetPart {
                    text: std::mem::take(&mut current),
                    matched,
                });
            }
            matched = ch == START;
        } else {
            current.push(ch);
        }
    }
    if !current.is_empty() {
        parts.push(SnippetPart {
            text: current,
            matched,
        });
    }
    parts
}

#[async_trait]
impl SearchEngine for PostgresSearch {
    async fn index(&self, conn: &mut AsyncPgConnection, document_id: Uuid) -> Result<(), DbError> {
        analysis::reindex(conn, document_id).await
    }

    async fn search(
        &self,
        conn: &mut AsyncPgConnection,
        tenant_id: Uuid,
        query: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<SearchHit>, DbError> {
        debug_assert!((0..=MAX_SEARCH_OFFSET).contains(&offset));
        // Ranked ids first (cheap, from the GIN index), headlines only for the page, each
        // over the start of the text only; the whole statement under its own timeout (in
        // a transaction, so the setting ends with it and the pooled session keeps none).
        let sql = format!(
            "WITH cfg AS ( \
                 SELECT coalesce((SELECT language FROM search_indexes WHERE tenant_id = $1), \
                                 'simple')::regconfig AS cfg), \
             q AS (SELECT cfg.cfg, websearch_to_tsquery(cfg.cfg, $2) AS query FROM cfg), \
             page AS ( \
                 SELECT d.id, ts_rank_cd(d.search_vector, q.query) AS rank \
                 FROM documents d, q \
                 WHERE d.tenant_id = $1 AND d.trashed_at IS NULL AND d.search_vector @@ q.query \
                 ORDER BY rank DESC, d.id DESC LIMIT $3 OFFSET $4) \
             SELECT page.id, page.rank, \
                    ts_headline(q.cfg, \
                        left(coalesce(nullif(d.content_text, ''), d.title), {HEADLINE_SOURCE_CHARS}), \
                        q.query, \
                        'StartSel={START}, StopSel={STOP}, MaxWords=24, MinWords=8, \
                         MaxFragments=2, FragmentDelimiter=\" … \"') AS snippet \
             FROM page JOIN documents d ON d.id = page.id, q \
             ORDER BY page.rank DESC, page.id DESC"
        );
        let rows: Vec<HitRow> = conn
            .transaction::<_, DbError, _>(async |conn| {
                diesel::sql_query(format!(
                    "SET LOCAL statement_timeout = {SEARCH_STATEMENT_TIMEOUT_MS}"
                ))
                .execute(conn)
                .await?;
                Ok(diesel::sql_query(&sql)
                    .bind::<SqlUuid, _>(tenant_id)
                    .bind::<Text, _>(query)
                    .bind::<Int8, _>(limit)
                    .bind::<Int8, _>(offset)
                    .load(conn)
                    .await?)
            })
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| SearchHit {
                document_id: row.id,
                rank: row.rank,
                snippet: snippet_parts(&row.snippet),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_split_into_plain_and_matched_parts() {
        let parts = snippet_parts("an \u{2}invoice\u{3} of <b>acme</b>");
        assert_eq!(
            parts,
            [
                SnippetPart {
                    text: "an ".into(),
                    matched: false
                },
                SnippetPart {
                    text: "invoice".into(),
                    matched: true
                },
                SnippetPart {
                    text: " of <b>acme</b>".into(),
                    matched: false
                },
            ]
        );
    }
}
