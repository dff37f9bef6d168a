//! `PATCH /api/documents/{id}`: title and issued-at date. A title change analyzes the
//! document again unless an analysis of its version is already queued or running.

use actix_web::{HttpRequest, HttpResponse, web};
use quire_shared::actions::documents::{
    self as document_actions, Edited, LabelEdit, checked_title,
};
use quire_shared::actions::labels::checked_name;
use quire_shared::db::documents::DocumentEdit;
use quire_shared::db::label_catalog::LabelKind;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use crate::auth::DocumentWriter;
use crate::conditional;
use crate::error::ApiError;
use crate::state::AppState;
use crate::upload::MAX_TITLE_CHARS;
use crate::views::{DocumentView, JobView, ProblemView};

/// Fields a client may change. Anything else in the body (status, tenant, attempts…) is
/// server-owned and ignored.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct DocumentPatch {
    title: Option<String>,
    /// Replaces the document's tags (each 1 to 100 characters, at most 50).
    tags: Option<Vec<String>>,
    /// A correspondent's name (1 to 200 characters), or `null` to clear.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>)]
    correspondent: Option<Option<String>>,
    /// `"YYYY-MM-DD"`, or `null` to clear.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(value_type = Option<String>, format = Date)]
    issued_at: Option<Option<String>>,
}

/// Tells an absent field (`None`) from an explicit `null` (`Some(None)`).
fn explicit_null<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(Option::deserialize(deserializer)?))
}

const MAX_TAGS: usize = 50;

fn parse_labels(
    tags: Option<Vec<String>>,
    correspondent: Option<Option<String>>,
) -> Result<LabelEdit, ApiError> {
    let tags = match tags {
        None => None,
        Some(tags) if tags.len() > MAX_TAGS => {
            return Err(ApiError::unprocessable(
                "invalid_tags",
                format!("at most {MAX_TAGS} tags"),
            ));
        }
        Some(tags) => {
            let mut cleaned = tags
                .iter()
                .map(|tag| checked_name(LabelKind::Tag, tag))
                .collect::<Result<Vec<_>, _>>()?;
            cleaned.sort();
            cleaned.dedup();
            Some(cleaned)
        }
    };
    let correspondent = match correspondent {
        None => None,
        Some(None) => Some(None),
        Some(Some(name)) => Some(Some(checked_name(LabelKind::Correspondent, &name)?)),
    };
    Ok(LabelEdit {
        tags,
        correspondent,
    })
}

fn parse_edit(patch: DocumentPatch) -> Result<DocumentEdit, ApiError> {
    let title = match patch.title {
        None => None,
        Some(title) => Some(checked_title(&title).map_err(|_| {
            ApiError::unprocessable(
                "invalid_title",
                format!(
                    "a title has 1 to {MAX_TITLE_CHARS} characters and no control or \
                     bidirectional-control characters"
                ),
            )
        })?),
    };
    let issued_at = match patch.issued_at {
        None => None,
        Some(None) => Some(None),
        Some(Some(text)) => {
            let format = time::macros::format_description!("[year]-[month]-[day]");
            let date = time::Date::parse(&text, &format).map_err(|_| {
                ApiError::unprocessable("invalid_issued_at", "issued_at is a date as YYYY-MM-DD")
            })?;
            Some(Some(date))
        }
    };
    Ok(DocumentEdit { title, issued_at })
}

#[utoipa::path(
    patch, path = "/api/documents/{document_id}", tag = "documents",
    params(
        ("document_id" = Uuid, Path, description = "document id"),
        ("If-Match" = Option<String>, Header, description = conditional::IF_MATCH_DESCRIPTION)
    ),
    request_body = DocumentPatch,
    responses(
        (status = 200, description = "{document, job}: a new title analyzes again once",
            headers(("ETag" = String, description = "the edited document's version"))),
        (status = 412, description = "precondition_failed: If-Match names a version the document is no longer at; nothing changed", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "invalid title or date", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn patch(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    request: HttpRequest,
    path: web::Path<Uuid>,
    body: web::Json<DocumentPatch>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let if_match = conditional::if_match(&request);
    let mut patch = body.into_inner();
    let label_edit = parse_labels(patch.tags.take(), patch.correspondent.take())?;
    let edit = parse_edit(patch)?;
    let document_caller = state.document_caller(&caller);
    let mut conn = state.connection().await?;
    let edited = document_actions::edit_if(
        &mut conn,
        &document_caller,
        document_id,
        &edit,
        &label_edit,
        &if_match,
    )
    .await?;
    let Edited {
        document,
        version,
        job,
        labels: document_labels,
    } = edited;
    let job = match job {
        Some(job) => {
            let holds = quire_shared::db::pauses::holds(&mut conn, caller.tenant_id).await?;
            Some(JobView::held_by(job, &holds))
        }
        None => None,
    };
    let etag = conditional::document_etag(document.row_version);
    Ok(HttpResponse::Ok()
        .insert_header(conditional::etag_header(etag))
        .json(json!({
            "document": DocumentView::new(document, version).with_labels(document_labels),
            "job": job,
        })))
}
