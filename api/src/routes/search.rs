//! `GET /api/documents/search`: ranked full-text search of the tenant's live documents,
//! best match first, paged by position. Apart from the listing because it takes other
//! parameters (no filters, a cursor of its own): a route's parameters never exclude
//! each other, so a client (and its generated code) can send any combination.

use std::collections::HashMap;

use actix_web::{HttpResponse, web};
use quire_shared::db::DbFault;
use quire_shared::db::documents;
use quire_shared::search::{MAX_SEARCH_OFFSET, PostgresSearch, SearchEngine, SearchHit};
use serde::Deserialize;
use uuid::Uuid;

use super::listing::{checked_limit, views_of};
use crate::auth::DocumentReader;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{DocumentPage, ProblemView, SearchView};

/// Anything but these is refused (400 `invalid_query`): a filter of the listing here
/// would otherwise be silently ignored (the trash is never searched).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    q: String,
    limit: Option<i64>,
    cursor: Option<String>,
}

const MAX_QUERY_CHARS: usize = 500;

/// `s1.<offset>`, hex-encoded: search pages are ranked, so they page by position.
fn encode_search_cursor(offset: i64) -> String {
    hex::encode(format!("s1.{offset}"))
}

/// The offset a search cursor names (any position: the caller checks the depth). Only
/// a cursor exactly as `encode_search_cursor` writes it is one.
fn decode_search_cursor(cursor: &str) -> Option<i64> {
    let text = String::from_utf8(hex::decode(cursor).ok()?).ok()?;
    let offset: i64 = text.strip_prefix("s1.")?.parse().ok()?;
    (offset >= 0 && encode_search_cursor(offset) == cursor).then_some(offset)
}

#[utoipa::path(
    get, path = "/api/documents/search", tag = "documents", operation_id = "search_documents",
    params(
        // Trimmed; 1 to 500 characters without control characters.
        ("q" = String, Query, max_length = 500, pattern = r"^[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000](?:[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000])?[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$", description = "full-text search over title, text, tags and correspondent (web-search syntax: words, \"phrases\", -excluded, or): 1 to 500 characters once trimmed, no control characters"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 200, description = "1 to 200, default 50"),
        // `s1.<offset>` hex-encoded, offset 0 to 1000 (deeper is 422 search_too_deep).
        ("cursor" = Option<String>, Query, pattern = r"^73312e(?:30|3[1-9](?:3[0-9]){0,2}|31303030)$", description = "next_cursor of the previous page of this search (opaque; the pattern only says which strings can be one)"),
    ),
    responses(
        (status = 200, description = "a page of hits, best match first, each with `search: {rank, snippet}`", body = DocumentPage),
        (status = 400, description = "invalid_search (q blank, too long or with control characters), invalid_limit, invalid_cursor, or a parameter this route does not take (invalid_query)", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "`search_too_deep`: a search cursor past the deepest page (1000 results); narrow the query", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable (retry after Retry-After); or `search_timeout`: the search ran past its time limit", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn search(
    state: web::Data<AppState>,
    caller: DocumentReader,
    query: web::Query<SearchQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let limit = checked_limit(query.limit)?;
    let text = query.q.trim();
    if text.is_empty() || text.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::bad_request(
            "invalid_search",
            format!("q has 1 to {MAX_QUERY_CHARS} characters"),
        ));
    }
    // PostgreSQL refuses a NUL in text (a data error, not a reader's 500), and no control
    // character is a word anyway.
    if text.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "invalid_search",
            "q has no control characters",
        ));
    }
    let offset = match query.cursor.as_deref() {
        None => 0,
        Some(cursor) => decode_search_cursor(cursor).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_cursor",
                "the cursor is not one this search returned",
            )
        })?,
    };
    if offset > MAX_SEARCH_OFFSET {
        return Err(ApiError::unprocessable(
            "search_too_deep",
            format!(
                "a search pages through its best {MAX_SEARCH_OFFSET} results; narrow the query"
            ),
        ));
    }
    let mut conn = state.connection().await?;
    let mut hits = PostgresSearch
        .search(&mut conn, caller.tenant_id, text, limit + 1, offset)
        .await
        .map_err(|error| match error.fault() {
            DbFault::StatementTimeout => ApiError::SearchTimeout,
            _ => error.into(),
        })?;
    let more = hits.len() as i64 > limit;
    hits.truncate(limit as usize);
    let ids: Vec<Uuid> = hits.iter().map(|hit| hit.document_id).collect();
    let mut found: HashMap<Uuid, documents::Document> =
        documents::find_documents(&mut conn, caller.tenant_id, &ids)
            .await?
            .into_iter()
            .map(|document| (document.id, document))
            .collect();
    // Rank order; a document deleted between the two queries just drops out.
    let page: Vec<documents::Document> = ids.iter().filter_map(|id| found.remove(id)).collect();
    let mut views = views_of(&mut conn, caller.tenant_id, page).await?;
    let mut by_id: HashMap<Uuid, SearchHit> =
        hits.into_iter().map(|hit| (hit.document_id, hit)).collect();
    for view in &mut views {
        view.search = by_id.remove(&view.id).map(|hit| SearchView {
            rank: hit.rank,
            snippet: hit.snippet,
        });
    }
    // Every cursor handed out is one the next request accepts.
    let next_cursor =
        (more && offset + limit <= MAX_SEARCH_OFFSET).then(|| encode_search_cursor(offset + limit));
    Ok(HttpResponse::Ok().json(DocumentPage {
        documents: views,
        next_cursor,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_cursors_round_trip_and_refuse_other_spellings() {
        assert_eq!(decode_search_cursor(&encode_search_cursor(50)), Some(50));
        assert_eq!(decode_search_cursor(&hex::encode("s1.-5")), None);
        assert_eq!(decode_search_cursor(&hex::encode("s1.050")), None);
        assert_eq!(decode_search_cursor(&hex::encode("s1.+5")), None);
        assert_eq!(decode_search_cursor(&hex::encode("v1.5.x")), None);
        assert_eq!(
            decode_search_cursor(&encode_search_cursor(50).to_ascii_uppercase()),
            None
        );
        // Depth is the route's check (a 422), not a forgery (a 400).
        assert_eq!(decode_search_cursor(&hex::encode("s1.5000")), Some(5000));
    }
}
