//! `GET /api/documents`: this tenant's documents, newest first, with filters and an
//! opaque cursor; with `q`, a full-text search instead, best match first.

use std::collections::HashMap;

use actix_web::{HttpResponse, web};
use quire_shared::db::DbFault;
use quire_shared::db::documents::{self, DocumentFilter, PageAfter};
use quire_shared::db::labels;
use quire_shared::search::{MAX_SEARCH_OFFSET, PostgresSearch, SearchEngine, SearchHit};
use quire_shared::states::DocumentStatus;
use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::auth::DocumentReader;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{DocumentView, ProblemView, SearchView};

const DEFAULT_LIMIT: i64 = 50;
const MAX_LIMIT: i64 = 200;

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    status: Option<String>,
    tag: Option<String>,
    correspondent: Option<String>,
    trashed: Option<bool>,
    limit: Option<i64>,
    cursor: Option<String>,
    q: Option<String>,
}

const MAX_QUERY_CHARS: usize = 500;

/// `s1.<offset>`, hex-encoded: search pages are ranked, so they page by position.
fn encode_search_cursor(offset: i64) -> String {
    hex::encode(format!("s1.{offset}"))
}

/// The offset a search cursor names (any position: the caller checks the depth).
fn decode_search_cursor(cursor: &str) -> Option<i64> {
    let text = String::from_utf8(hex::decode(cursor).ok()?).ok()?;
    let offset: i64 = text.strip_prefix("s1.")?.parse().ok()?;
    (offset >= 0).then_some(offset)
}

/// `v1.<created_at unix nanos>.<id>`, hex-encoded: opaque to clients, stable for us.
fn encode_cursor(after: PageAfter) -> String {
    hex::encode(format!(
        "v1.{}.{}",
        after.created_at.unix_timestamp_nanos(),
        after.id
    ))
}

fn decode_cursor(cursor: &str) -> Option<PageAfter> {
    let text = String::from_utf8(hex::decode(cursor).ok()?).ok()?;
    let mut parts = text.splitn(3, '.');
    if parts.next()? != "v1" {
        return None;
    }
    let nanos: i128 = parts.next()?.parse().ok()?;
    Some(PageAfter {
        created_at: OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()?,
        id: Uuid::parse_str(parts.next()?).ok()?,
    })
}

#[utoipa::path(
    get, path = "/api/documents", tag = "documents",
    params(
        ("status" = Option<String>, Query, description = "PENDING, PROCESSING, READY or FAILED"),
        ("tag" = Option<String>, Query, description = "only documents with this tag"),
        ("correspondent" = Option<String>, Query, description = "only documents of this correspondent"),
        ("trashed" = Option<bool>, Query, description = "true lists the trash"),
        ("limit" = Option<i64>, Query, description = "1 to 200, default 50"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
        ("q" = Option<String>, Query, description = "full-text search over title, text, tags and correspondent (web-search syntax: words, \"phrases\", -excluded, or); combines with limit and cursor only"),
    ),
    responses(
        (status = 200, description = "a page of documents, newest first (with q: best match first, each with `search: {rank, snippet}`): {documents, next_cursor}"),
        (status = 400, description = "invalid filter, limit or cursor", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "`search_too_deep`: a search cursor past the deepest page (1000 results); narrow the query", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable (retry after Retry-After); or `search_timeout`: the search ran past its time limit", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: DocumentReader,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_limit",
            format!("limit is between 1 and {MAX_LIMIT}"),
        ));
    }
    if let Some(text) = query.q.as_deref() {
        return search(&state, &caller, text, &query, limit).await;
    }
    let status = match query.status.as_deref() {
        None => None,
        Some(text) => Some(
            DocumentStatus::parse(&text.to_ascii_uppercase()).ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_status",
                    "status is one of PENDING, PROCESSING, READY, FAILED",
                )
            })?,
        ),
    };
    let after = match query.cursor.as_deref() {
        None => None,
        Some(cursor) => Some(decode_cursor(cursor).ok_or_else(|| {
            ApiError::bad_request("invalid_cursor", "the cursor is not one this API returned")
        })?),
    };
    let filter = DocumentFilter {
        status,
        tag: query.tag,
        correspondent: query.correspondent,
        trashed: query.trashed.unwrap_or(false),
    };
    let mut conn = state.connection().await?;
    // One row more than asked tells whether another page exists.
    let mut page =
        documents::list_documents(&mut conn, caller.tenant_id, &filter, after, limit + 1).await?;
    let more = page.len() as i64 > limit;
    page.truncate(limit as usize);
    let next_cursor = more
        .then(|| {
            page.last().map(|last| {
                encode_cursor(PageAfter {
                    created_at: last.created_at,
                    id: last.id,
                })
            })
        })
        .flatten();
    let views = views_of(&mut conn, caller.tenant_id, page).await?;
    Ok(HttpResponse::Ok().json(json!({ "documents": views, "next_cursor": next_cursor })))
}

/// Views of a page of documents, in the page's order, with versions and labels loaded
/// in one query each.
async fn views_of(
    conn: &mut quire_shared::db::PooledConnection,
    tenant_id: Uuid,
    page: Vec<documents::Document>,
) -> Result<Vec<DocumentView>, ApiError> {
    let version_ids: Vec<Uuid> = page
        .iter()
        .filter_map(|document| document.current_version_id)
        .collect();
    let mut versions: HashMap<Uuid, _> = documents::find_versions(conn, tenant_id, &version_ids)
        .await?
        .into_iter()
        .map(|version| (version.id, version))
        .collect();
    let ids: Vec<Uuid> = page.iter().map(|document| document.id).collect();
    let mut labels = labels::labels_of(conn, tenant_id, &ids).await?;
    Ok(page
        .into_iter()
        .map(|document| {
            let version = document
                .current_version_id
                .and_then(|id| versions.remove(&id));
            let document_labels = labels.remove(&document.id);
            DocumentView::new(document, version).with_labels(document_labels)
        })
        .collect())
}

/// `?q=`: ranked full-text search of the tenant's live documents.
async fn search(
    state: &AppState,
    caller: &DocumentReader,
    text: &str,
    query: &ListQuery,
    limit: i64,
) -> Result<HttpResponse, ApiError> {
    let text = text.trim();
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
    if query.status.is_some()
        || query.tag.is_some()
        || query.correspondent.is_some()
        || query.trashed.is_some()
    {
        return Err(ApiError::bad_request(
            "invalid_search",
            "q combines with limit and cursor only (the trash is never searched)",
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
    Ok(HttpResponse::Ok().json(json!({ "documents": views, "next_cursor": next_cursor })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_forgeries() {
        let after = PageAfter {
            created_at: OffsetDateTime::from_unix_timestamp_nanos(1_796_000_000_123_456_000)
                .expect("time"),
            id: Uuid::now_v7(),
        };
        assert_eq!(decode_cursor(&encode_cursor(after)), Some(after));
        assert_eq!(decode_search_cursor(&encode_search_cursor(50)), Some(50));
        assert_eq!(decode_search_cursor(&encode_cursor(after)), None);
        assert_eq!(decode_search_cursor(&hex::encode("s1.-5")), None);
        // Depth is the route's check (a 422), not a forgery (a 400).
        assert_eq!(decode_search_cursor(&hex::encode("s1.5000")), Some(5000));
        for forged in [
            "",
            "zz",
            &hex::encode("v2.1.x"),
            &hex::encode("v1.notanumber.x"),
        ] {
            assert_eq!(decode_cursor(forged), None, "{forged}");
        }
    }
}
