//! A document's versions: upload a new one, list them, download any of them.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::FutureExt;
use quire_shared::actions::idempotency::RequestDigest;
use quire_shared::actions::versions::{self as version_actions, RecordedVersion};
use quire_shared::db::{documents, versions};
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::{DocumentReader, DocumentWriter};
use crate::error::ApiError;
use crate::idempotency::{self, Answer};
use crate::state::AppState;
use crate::upload;
use crate::views::{
    DocumentVersionView, JobView, ProblemView, VersionForm, VersionListView, VersionUploadView,
};

const DEFAULT_LIMIT: i64 = 50;

/// `POST /api/documents/{id}/versions`: the new version's file is received exactly as an
/// upload's (`upload::receive_request`: limits, timeout, sniffing, rate), then recorded
/// `PENDING` with the next number and an analysis; it becomes current when its analysis
/// succeeds. A version takes no title: a `title` part is refused and nothing is kept.
/// With an `Idempotency-Key` it is recorded once, as an upload is (`upload::record_once`).
#[utoipa::path(
    post, path = "/api/documents/{document_id}/versions", tag = "documents", operation_id = "upload_version",
    params(
        ("document_id" = Uuid, Path, description = "document id"),
        ("Idempotency-Key" = Option<String>, Header, description = idempotency::HEADER_DESCRIPTION),
    ),
    request_body(content = VersionForm, content_type = "multipart/form-data",
        encoding(("file" = (content_type = crate::views::ACCEPTED_FILE_TYPES)))),
    responses(
        (status = 201, description = "recorded with the next number, analysis queued; the previous version stays current until it succeeds (or, with Idempotency-Key, the first answer again: the document, the file's digest and its filename are the request; the repeat's bytes are not kept)", body = VersionUploadView,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replayed answer")),
            links(
                ("DownloadVersion" = (operation_id = "download_version", parameters(("document_id" = "$request.path.document_id"), ("version_id" = "$response.body#/version/id")))),
                ("ListVersions" = (operation_id = "list_versions", parameters(("document_id" = "$request.path.document_id"))))
            )),
        (status = 400, description = "invalid_idempotency_key, invalid multipart, or a part other than \"file\"", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "no documents:write, or the tenant is suspended, reset or deleted; nothing is stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 408, description = "upload_timeout: the body sent nothing for server.upload_read_timeout_ms; nothing is stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "document_trashed: restore the document first; or duplicate_document: the same bytes are the current version of a document of this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 413, description = "larger than the upload limit", body = ProblemView, content_type = "application/problem+json"),
        (status = 415, description = "not multipart, or a file type outside the allowlist", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "empty file; idempotency_key_reused: the key was used for another request", body = ProblemView, content_type = "application/problem+json"),
        (status = 429, description = "enqueue_rate_limited: retry after Retry-After; nothing was stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL or the object storage unavailable; nothing is stored; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn upload(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    path: web::Path<Uuid>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let upload::ReceivedRequest {
        stored,
        idempotency_key,
    } = upload::receive_request(&state, caller.tenant_id, &request, payload).await?;
    if stored.title.is_some() {
        quire_shared::actions::documents::discard(state.store.as_ref(), &stored.key).await;
        return Err(ApiError::bad_request(
            "unknown_part",
            "a version takes only the part \"file\"",
        ));
    }
    // The same request is the same document, bytes and filename.
    let digest = RequestDigest::new("POST", "/api/documents/{document_id}/versions")
        .part(document_id.as_bytes())
        .part(stored.digest.sha256.as_bytes())
        .optional_part(stored.original_filename.as_deref().map(str::as_bytes));
    let keyed = idempotency_key.map(|key| key.for_request(digest, &state.settings));
    let object = stored.key.clone();
    let document_caller = state.document_caller(&caller);
    let reject_duplicates = state.settings.server.reject_duplicate_uploads;
    let store = state.store.clone();
    let tenant_id = caller.tenant_id;
    upload::record_once(&state, keyed, &object, move |conn| {
        async move {
            let RecordedVersion { version, job } = version_actions::upload(
                conn,
                store.as_ref(),
                &document_caller,
                document_id,
                stored,
                reject_duplicates,
            )
            .await?;
            let holds = quire_shared::db::pauses::holds(conn, tenant_id).await?;
            let current = documents::find_document(conn, tenant_id, document_id)
                .await?
                .and_then(|document| document.current_version_id);
            Answer::json(
                StatusCode::CREATED,
                &VersionUploadView {
                    version: DocumentVersionView::new(version, current),
                    job: JobView::held_by(job, &holds),
                },
            )
        }
        .boxed()
    })
    .await
}

#[derive(Debug, Deserialize)]
pub struct VersionsQuery {
    limit: Option<i64>,
    before: Option<i32>,
}

/// `GET /api/documents/{id}/versions`.
#[utoipa::path(
    get, path = "/api/documents/{document_id}/versions", tag = "documents", operation_id = "list_versions",
    params(
        ("document_id" = Uuid, Path, description = "document id"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "1 to 100, default 50"),
        ("before" = Option<i32>, Query, minimum = 1, description = "only versions numbered below this, 1 or more (next_before of the previous page)"),
    ),
    responses(
        (status = 200, description = "the document's versions, newest first: number, size, sha256, created, status, and which is current", body = VersionListView),
        (status = 400, description = "invalid limit or before", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: DocumentReader,
    path: web::Path<Uuid>,
    query: web::Query<VersionsQuery>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=versions::MAX_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_limit",
            format!("limit is between 1 and {}", versions::MAX_PAGE),
        ));
    }
    if query.before.is_some_and(|before| before < 1) {
        return Err(ApiError::bad_request(
            "invalid_before",
            "before is a version number, 1 or more",
        ));
    }
    let mut conn = state.connection().await?;
    let (document, listed) = version_actions::list(
        &mut conn,
        caller.tenant_id,
        document_id,
        query.before,
        limit,
    )
    .await?;
    let next_before = (i64::try_from(listed.len()).ok() == Some(limit))
        .then(|| listed.last().map(|version| version.number))
        .flatten()
        .filter(|number| *number > 1);
    Ok(HttpResponse::Ok().json(VersionListView {
        versions: listed
            .into_iter()
            .map(|version| DocumentVersionView::new(version, document.current_version_id))
            .collect(),
        next_before,
    }))
}

/// `GET /api/documents/{id}/versions/{version_id}/content`: any version's bytes, current
/// or not, pending, failed or superseded.
#[utoipa::path(
    get, path = "/api/documents/{document_id}/versions/{version_id}/content", tag = "documents", operation_id = "download_version",
    params(
        ("document_id" = Uuid, Path, description = "document id"),
        ("version_id" = Uuid, Path, description = "version id"),
    ),
    responses(
        (status = 200, description = "the version's bytes, as an attachment", content_type = "application/octet-stream"),
        (status = 404, description = "no such document in this tenant, or no such version of it", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "content_missing: the stored file is missing", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL or the object storage unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn content(
    state: web::Data<AppState>,
    caller: DocumentReader,
    path: web::Path<(Uuid, Uuid)>,
) -> Result<HttpResponse, ApiError> {
    let (document_id, version_id) = path.into_inner();
    let mut conn = state.connection().await?;
    // A trashed (or missing) document hides its versions, as it hides its content.
    documents::find_document(&mut conn, caller.tenant_id, document_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let version = documents::find_version(&mut conn, caller.tenant_id, document_id, version_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    drop(conn);
    super::content::stream_version(&state, version).await
}
