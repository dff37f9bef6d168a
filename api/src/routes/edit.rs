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
use uuid::Uuid;

use crate::auth::DocumentWriter;
use crate::conditional;
use crate::error::ApiError;
use crate::state::AppState;
use crate::upload::MAX_TITLE_CHARS;
use crate::views::{DocumentView, EditView, JobView, ProblemView};

/// Fields a client may change. Anything else in the body (status, tenant, attempts…) is
/// server-owned and ignored.
/// The patterns say what the checks below say: surrounding whitespace is trimmed, and
/// what is left is not empty and has no control characters (a title no bidirectional
/// controls either); the lengths count the characters sent, spaces around them included (they are trimmed).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct DocumentPatch {
    /// at most 500 characters as sent, not blank once trimmed, no control or bidirectional-control character.
    #[schema(
        max_length = 500,
        pattern = r"^[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*[^\u0000-\u0020\u007f-\u00a0\u061c\u1680\u2000-\u200a\u200e\u200f\u2028-\u202f\u205f\u2066-\u2069\u3000](?:[^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]*[^\u0000-\u0020\u007f-\u00a0\u061c\u1680\u2000-\u200a\u200e\u200f\u2028-\u202f\u205f\u2066-\u2069\u3000])?[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$"
    )]
    title: Option<String>,
    /// Replaces the document's tags: at most 50, each at most 100 characters as sent, not blank once trimmed,
    /// without control characters (duplicates are kept once).
    #[schema(max_items = 50, value_type = Option<Vec<TagName>>)]
    tags: Option<Vec<String>>,
    /// A correspondent's name (at most 200 characters as sent, not blank once trimmed, no control characters),
    /// or `null` to clear.
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(
        value_type = Option<String>,
        max_length = 200,
        pattern = r"^[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000](?:[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000])?[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$"
    )]
    correspondent: Option<Option<String>>,
    /// `"YYYY-MM-DD"`, or `null` to clear. The pattern is the calendar (`format` alone
    /// is only a note in JSON Schema 2020-12, and `""` would pass it).
    #[serde(default, deserialize_with = "explicit_null")]
    #[schema(
        value_type = Option<String>,
        format = Date,
        pattern = r"^(?:[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)$"
    )]
    issued_at: Option<Option<String>>,
}

/// A tag's name, as `DocumentPatch::tags` takes it: at most 100 characters, the pattern
/// of the other names (derive cannot give a newtype a length).
pub struct TagName;

impl utoipa::PartialSchema for TagName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .max_length(Some(100))
            .pattern(Some(TAG_PATTERN))
            .into()
    }
}

impl utoipa::ToSchema for TagName {}

/// A correspondent's name, as the label routes take it: at most 200 characters, the
/// pattern of the other names.
pub struct CorrespondentName;

impl utoipa::PartialSchema for CorrespondentName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .max_length(Some(200))
            .pattern(Some(TAG_PATTERN))
            .into()
    }
}

impl utoipa::ToSchema for CorrespondentName {}

const TAG_PATTERN: &str = r"^[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000](?:[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000])?[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$";

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
    patch, path = "/api/documents/{document_id}", tag = "documents", operation_id = "edit_document",
    params(
        ("document_id" = Uuid, Path, description = "document id"),
        ("If-Match" = Option<String>, Header, description = conditional::IF_MATCH_DESCRIPTION)
    ),
    request_body = DocumentPatch,
    responses(
        (status = 200, description = "the document; a new title analyzes again once (the job, else `null`)", body = EditView,
            headers(("ETag" = String, description = "the edited document's version"))),
        (status = 400, description = "invalid_json: the body is not a JSON object of these fields", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such document in this tenant, or it is in the trash", body = ProblemView, content_type = "application/problem+json"),
        (status = 412, description = "precondition_failed: If-Match names a version the document is no longer at; nothing changed", body = ProblemView, content_type = "application/problem+json"),
        (status = 413, description = "the body is larger than 256 KiB", body = ProblemView, content_type = "application/problem+json"),
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
    body: crate::json_object::JsonObject<DocumentPatch>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let if_match = conditional::if_match(&request);
    let mut patch = body.0;
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
        .json(EditView {
            document: DocumentView::new(document, version).with_labels(document_labels),
            job,
        }))
}
