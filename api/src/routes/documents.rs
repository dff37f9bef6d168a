//! Upload and read documents.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use actix_multipart::Multipart;
use actix_web::{HttpRequest, HttpResponse, web};
use quire_shared::actions::documents::{self as document_actions, StoredUpload};
use quire_shared::db::documents;
use quire_shared::db::intake::Recorded;
use quire_shared::db::labels;
use quire_shared::storage::StorageKey;
use uuid::Uuid;

use crate::auth::{DocumentReader, DocumentWriter};
use crate::error::ApiError;
use crate::state::AppState;
use crate::upload;
use crate::views::{DocumentView, JobView, ProblemView, UploadForm, UploadView};

/// Room for multipart framing and a title around the file itself.
const MULTIPART_OVERHEAD_BYTES: u64 = 64 * 1024;

fn declared_length(request: &HttpRequest) -> Option<u64> {
    request
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

fn is_multipart_form(request: &HttpRequest) -> bool {
    request
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        })
}

/// `POST /api/documents`: store the file, then record the document, its version, an
/// `analyze-document` job and its outbox event in ONE statement, which re-checks that the
/// tenant still takes the write (a reset or deletion while the body was on its way
/// refuses it, and the stored file is removed). Redis is not involved: an upload
/// succeeds while Redis is down.
#[utoipa::path(
    post, path = "/api/documents", tag = "documents", operation_id = "upload_document",
    // The file's type is decided from its bytes: one of these, whatever the part says.
    request_body(content = UploadForm, content_type = "multipart/form-data",
        encoding(("file" = (content_type = crate::views::ACCEPTED_FILE_TYPES)))),
    responses(
        (status = 201, description = "recorded, analysis queued", body = UploadView,
            headers(("Location" = String, description = "the document's URL")),
            links(
                ("GetDocument" = (operation_id = "get_document", parameters(("document_id" = "$response.body#/document/id")))),
                ("EditDocument" = (operation_id = "edit_document", parameters(("document_id" = "$response.body#/document/id")))),
                ("TrashDocument" = (operation_id = "trash_document", parameters(("document_id" = "$response.body#/document/id")))),
                ("RestoreDocument" = (operation_id = "restore_document", parameters(("document_id" = "$response.body#/document/id")))),
                ("DownloadContent" = (operation_id = "download_content", parameters(("document_id" = "$response.body#/document/id")))),
                ("DownloadThumbnail" = (operation_id = "download_thumbnail", parameters(("document_id" = "$response.body#/document/id")))),
                ("ListProcessingJobs" = (operation_id = "list_processing_jobs", parameters(("document_id" = "$response.body#/document/id")))),
                ("GetProcessingJob" = (operation_id = "get_processing_job", parameters(("document_id" = "$response.body#/document/id"), ("job_id" = "$response.body#/job/id")))),
                ("RetryProcessingJob" = (operation_id = "retry_processing_job", parameters(("document_id" = "$response.body#/document/id"), ("job_id" = "$response.body#/job/id"))))
            )),
        (status = 400, description = "not valid multipart/form-data (invalid_multipart), no `file` part (missing_file), a second one (multiple_files), or a part other than `file` and `title` (unknown_part); nothing is stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "no documents:write, or the tenant is suspended (tenant_suspended) or was reset or deleted while the body was on its way (tenant_unavailable); nothing is stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 408, description = "upload_timeout: the body sent nothing for server.upload_read_timeout_ms; nothing is stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "duplicate_document: the same bytes exist in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 413, description = "larger than the upload limit", body = ProblemView, content_type = "application/problem+json"),
        (status = 415, description = "not multipart, or a file type outside the allowlist", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "empty file or invalid title", body = ProblemView, content_type = "application/problem+json"),
        (status = 429, description = "enqueue_rate_limited: the tenant enqueues faster than its rate; retry after Retry-After; nothing was stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL or the object storage unavailable; nothing is stored; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn upload(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let limit = state.settings.server.max_upload_bytes;
    // Refuse a declared oversize body before reading (or storing) a byte of it; bodies
    // without a length are cut off while streaming.
    if declared_length(&request).is_some_and(|length| length > limit + MULTIPART_OVERHEAD_BYTES) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    if !is_multipart_form(&request) {
        return Err(ApiError::NotMultipart);
    }
    // Before a byte of the body is read or stored: a tenant over its rate costs nothing.
    crate::enqueue_limit::admit(&state, caller.tenant_id, 1, "upload").await?;
    let timed_out = Rc::new(Cell::new(false));
    let timeout = Duration::from_millis(state.settings.server.upload_read_timeout_ms);
    let body = upload::read_limited(payload, timeout, timed_out.clone());
    let multipart = Multipart::new(request.headers(), body);
    let version_id = Uuid::now_v7();
    let key = StorageKey::document_source(caller.tenant_id, version_id);
    let received = match upload::receive(state.store.as_ref(), &key, limit, multipart).await {
        Ok(received) => received,
        Err(error) => {
            document_actions::discard(state.store.as_ref(), &key).await;
            // The parser calls a stalled body malformed; it is not.
            return Err(if timed_out.get() {
                ApiError::UploadTimeout
            } else {
                error
            });
        }
    };
    let stored = StoredUpload {
        key,
        version_id,
        digest: received.digest,
        content_type: received.content_type,
        original_filename: received.original_filename,
        title: received.title,
    };
    let document_caller = state.document_caller(&caller);
    let reject_duplicates = state.settings.server.reject_duplicate_uploads;
    let mut conn = match state.connection().await {
        Ok(conn) => conn,
        Err(error) => {
            document_actions::discard(state.store.as_ref(), &stored.key).await;
            return Err(error);
        }
    };
    let Recorded {
        document,
        version,
        job,
    } = document_actions::upload(
        &mut conn,
        state.store.as_ref(),
        &document_caller,
        stored,
        reject_duplicates,
    )
    .await?;
    let holds = quire_shared::db::pauses::holds(&mut conn, caller.tenant_id).await?;
    Ok(HttpResponse::Created()
        .insert_header(("Location", format!("/api/documents/{}", document.id)))
        .json(UploadView {
            document: DocumentView::new(document, Some(version)),
            job: JobView::held_by(job, &holds),
        }))
}

/// `GET /api/documents/{id}`.
#[utoipa::path(
    get, path = "/api/documents/{document_id}", tag = "documents", operation_id = "get_document",
    params(("document_id" = Uuid, Path, description = "document id")),
    responses(
        (status = 200, description = "the document", body = DocumentView),
        (status = 404, description = "no such document in this tenant, or it is in the trash", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: DocumentReader,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let mut conn = state.connection().await?;
    let (document, version) =
        documents::find_document_with_version(&mut conn, caller.tenant_id, document_id)
            .await?
            .ok_or(ApiError::NotFound)?;
    let mut labels = labels::labels_of(&mut conn, caller.tenant_id, &[document.id]).await?;
    let view = DocumentView::new(document, version).with_labels(labels.remove(&document_id));
    Ok(HttpResponse::Ok().json(view))
}
