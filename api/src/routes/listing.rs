//! `GET /api/documents`: this tenant's documents, newest first, with filters and a
//! cursor (the search, `GET /api/documents/search`, is `search.rs`).

use std::collections::HashMap;

use actix_web::{HttpResponse, web};
use quire_shared::db::documents::{self, DocumentFilter, PageAfter};
use quire_shared::db::labels;
use quire_shared::states::DocumentStatus;
use serde::Deserialize;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::auth::DocumentReader;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{DocumentPage, DocumentView, ProblemView};

pub(super) const DEFAULT_LIMIT: i64 = 50;
pub(super) const MAX_LIMIT: i64 = 200;

/// A parameter the route does not take is refused (400 `invalid_query`), never ignored:
/// `?q=` here would otherwise list everything instead of searching.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    status: Option<String>,
    tag: Option<String>,
    correspondent: Option<String>,
    trashed: Option<bool>,
    limit: Option<i64>,
    cursor: Option<String>,
}

/// The limit a page asks for, or 400 `invalid_limit`.
pub(super) fn checked_limit(limit: Option<i64>) -> Result<i64, ApiError> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_limit",
            format!("limit is between 1 and {MAX_LIMIT}"),
        ));
    }
    Ok(limit)
}

/// A tag or correspondent to filter by. No label has a control character (edits refuse
/// them), and PostgreSQL refuses a NUL in text: such a name is the client's mistake, 400
/// `invalid_filter`, never a database error.
fn checked_name(name: Option<String>, what: &str) -> Result<Option<String>, ApiError> {
    if name
        .as_deref()
        .is_some_and(|name| name.chars().any(char::is_control))
    {
        return Err(ApiError::bad_request(
            "invalid_filter",
            format!("a {what} has no control characters"),
        ));
    }
    Ok(name)
}

/// `v1.<created_at unix nanos>.<id>`, hex-encoded: opaque to clients, stable for us.
fn encode_cursor(after: PageAfter) -> String {
    hex::encode(format!(
        "v1.{}.{}",
        after.created_at.unix_timestamp_nanos(),
        after.id
    ))
}

/// The page a cursor continues after. Only a cursor exactly as `encode_cursor` writes it
/// is one (lower-case hex, no sign or leading zero, a time from 1970 on with at most 20
/// digits of nanoseconds): the language `LIST_CURSOR_PATTERN` documents.
fn decode_cursor(cursor: &str) -> Option<PageAfter> {
    let text = String::from_utf8(hex::decode(cursor).ok()?).ok()?;
    let mut parts = text.splitn(3, '.');
    if parts.next()? != "v1" {
        return None;
    }
    let nanos: i128 = parts.next()?.parse().ok()?;
    if !(0..100_000_000_000_000_000_000).contains(&nanos) {
        return None;
    }
    let after = PageAfter {
        created_at: OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()?,
        id: Uuid::parse_str(parts.next()?).ok()?,
    };
    (encode_cursor(after) == cursor).then_some(after)
}

#[utoipa::path(
    get, path = "/api/documents", tag = "documents", operation_id = "list_documents",
    params(
        ("status" = Option<String>, Query, pattern = "^(?:[Pp][Ee][Nn][Dd][Ii][Nn][Gg]|[Pp][Rr][Oo][Cc][Ee][Ss][Ss][Ii][Nn][Gg]|[Rr][Ee][Aa][Dd][Yy]|[Ff][Aa][Ii][Ll][Ee][Dd])$", description = "PENDING, PROCESSING, READY or FAILED, in any letter case"),
        ("tag" = Option<String>, Query, pattern = r"^[^\u0000-\u001f\u007f-\u009f]*$", description = "only documents with this tag (no control characters: no tag has one)"),
        ("correspondent" = Option<String>, Query, pattern = r"^[^\u0000-\u001f\u007f-\u009f]*$", description = "only documents of this correspondent (no control characters: no name has one)"),
        ("trashed" = Option<bool>, Query, description = "true lists the trash"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 200, description = "1 to 200, default 50"),
        ("cursor" = Option<String>, Query, pattern = r"^76312e(?:30|3[1-9](?:3[0-9]){0,19})2e(?:3[0-9]|6[1-6]){8}2d(?:3[0-9]|6[1-6]){4}2d(?:3[0-9]|6[1-6]){4}2d(?:3[0-9]|6[1-6]){4}2d(?:3[0-9]|6[1-6]){12}$", description = "next_cursor of the previous page (opaque; the pattern only says which strings can be one)"),
    ),
    responses(
        (status = 200, description = "a page of documents, newest first", body = DocumentPage),
        (status = 400, description = "invalid filter, limit or cursor, or a parameter this route does not take (invalid_query)", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: DocumentReader,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let limit = checked_limit(query.limit)?;
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
        tag: checked_name(query.tag, "tag")?,
        correspondent: checked_name(query.correspondent, "correspondent")?,
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
    let documents = views_of(&mut conn, caller.tenant_id, page).await?;
    Ok(HttpResponse::Ok().json(DocumentPage {
        documents,
        next_cursor,
    }))
}

/// Views of a page of documents, in the page's order, with versions and labels loaded
/// in one query each.
pub(super) async fn views_of(
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
        let canonical = encode_cursor(after);
        for forged in [
            "",
            "zz",
            &hex::encode("v2.1.x"),
            &hex::encode("v1.notanumber.x"),
            // Another spelling of the same page is not a cursor this API wrote.
            &canonical.to_ascii_uppercase(),
            &hex::encode(format!("v1.+1796000000123456000.{}", after.id)),
            &hex::encode(format!("v1.-1.{}", after.id)),
        ] {
            assert_eq!(decode_cursor(forged), None, "{forged}");
        }
    }
}
