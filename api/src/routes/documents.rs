//! Upload and read documents.

use std::sync::{Arc, Mutex};

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::FutureExt;
use quire_shared::actions::documents as document_actions;
use quire_shared::actions::idempotency::RequestDigest;
use quire_shared::db::documents;
use quire_shared::db::intake::Recorded;
use quire_shared::db::labels;
use quire_shared::db::outbox::ClaimedEvent;
use quire_shared::publishing::Express;
use uuid::Uuid;

use crate::auth::{DocumentReader, DocumentWriter};
use crate::conditional;
use crate::error::ApiError;
use crate::idempotency::{self, Answer};
use crate::state::AppState;
use crate::upload;
use crate::views::{DocumentView, JobView, ProblemView, UploadForm, UploadView};

/// `POST /api/documents`: store the file, then record the document, its version, an
/// `analyze-document` job and its outbox event in ONE statement, which re-checks that the
/// tenant still takes the write (a reset or deletion while the body was on its way
/// refuses it, and the stored file is removed). Redis is not on the way: an upload
/// succeeds while Redis is down. (When its queue has no backlog the event is born
/// claimed by this process, which publishes it after answering: the express path.)
#[utoipa::path(
    post, path = "/api/documents", tag = "documents", operation_id = "upload_document",
    params(("Idempotency-Key" = Option<String>, Header, description = idempotency::HEADER_DESCRIPTION)),
    // The file's type is decided from its bytes: one of these, whatever the part says.
    request_body(content = UploadForm, content_type = "multipart/form-data",
        encoding(("file" = (content_type = crate::views::ACCEPTED_FILE_TYPES)))),
    responses(
        (status = 201, description = "recorded, analysis queued (or, with Idempotency-Key, the first answer again: the digest of the file and its form fields is the request; the repeat's bytes are not kept)", body = UploadView,
            headers(("Location" = String, description = "the document's URL"), ("Idempotent-Replayed" = String, description = "`true` on a replayed answer")),
            links(
                ("GetDocument" = (operation_id = "get_document", parameters(("document_id" = "$response.body#/document/id")))),
                ("EditDocument" = (operation_id = "edit_document", parameters(("document_id" = "$response.body#/document/id")))),
                ("TrashDocument" = (operation_id = "trash_document", parameters(("document_id" = "$response.body#/document/id")))),
                ("RestoreDocument" = (operation_id = "restore_document", parameters(("document_id" = "$response.body#/document/id")))),
                ("DownloadContent" = (operation_id = "download_content", parameters(("document_id" = "$response.body#/document/id")))),
                ("DownloadThumbnail" = (operation_id = "download_thumbnail", parameters(("document_id" = "$response.body#/document/id")))),
                ("ListProcessingJobs" = (operation_id = "list_processing_jobs", parameters(("document_id" = "$response.body#/document/id")))),
                ("GetProcessingJob" = (operation_id = "get_processing_job", parameters(("document_id" = "$response.body#/document/id"), ("job_id" = "$response.body#/job/id")))),
                ("RetryProcessingJob" = (operation_id = "retry_processing_job", parameters(("document_id" = "$response.body#/document/id"), ("job_id" = "$response.body#/job/id")))),
                ("UploadVersion" = (operation_id = "upload_version", parameters(("document_id" = "$response.body#/document/id")))),
                ("ListVersions" = (operation_id = "list_versions", parameters(("document_id" = "$response.body#/document/id"))))
            )),
        (status = 400, description = "invalid_idempotency_key; not valid multipart/form-data (invalid_multipart), no `file` part (missing_file), a second one (multiple_files), or a part other than `file` and `title` (unknown_part); nothing is stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "no documents:write, or the tenant is suspended (tenant_suspended) or was reset or deleted while the body was on its way (tenant_unavailable); nothing is stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 408, description = "upload_timeout: the body sent nothing for server.upload_read_timeout_ms; nothing is stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "duplicate_document: the same bytes exist in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 413, description = "larger than the upload limit", body = ProblemView, content_type = "application/problem+json"),
        (status = 415, description = "not multipart, or a file type outside the allowlist", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "empty file or invalid title; idempotency_key_reused: the key was used for another request", body = ProblemView, content_type = "application/problem+json"),
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
    let upload::ReceivedRequest {
        stored,
        idempotency_key,
    } = upload::receive_request(&state, caller.tenant_id, &request, payload).await?;
    // The same request is the same bytes with the same form fields.
    let digest = RequestDigest::new("POST", "/api/documents")
        .part(stored.digest.sha256.as_bytes())
        .optional_part(stored.title.as_deref().map(str::as_bytes))
        .optional_part(stored.original_filename.as_deref().map(str::as_bytes));
    let keyed = idempotency_key.map(|key| key.for_request(digest, &state.settings));
    let object = stored.key.clone();
    let document_caller = state.document_caller(&caller);
    let reject_duplicates = state.settings.server.reject_duplicate_uploads;
    let store = state.store.clone();
    let express = state.express.clone();
    // The event the intake claimed for the express path, published once the upload has
    // committed (the work may run inside the idempotency key's transaction).
    let announce = Arc::new(Mutex::new(None));
    let claimed = Arc::clone(&announce);
    let answer = upload::record_once(&state, keyed, &object, move |conn| {
        async move {
            let Recorded {
                document,
                version,
                job,
                holds,
                announce,
            } = document_actions::upload(
                conn,
                store.as_ref(),
                &document_caller,
                stored,
                reject_duplicates,
                express.as_deref().map(Express::claim),
            )
            .await?;
            if let (Some(event), Ok(mut claimed)) = (announce, claimed.lock()) {
                *claimed = Some(event);
            }
            let location = format!("/api/documents/{}", document.id);
            Ok(Answer::json(
                StatusCode::CREATED,
                &UploadView {
                    document: DocumentView::new(document, Some(version)),
                    job: JobView::held_by(job, &holds),
                },
            )?
            .header("Location", location))
        }
        .boxed()
    })
    .await?;
    publish_express(&state, &announce);
    Ok(answer)
}

/// Publishes, beside the answer and never in its way, the event an upload's intake
/// claimed for the express path, now that it has committed. (A claim whose transaction
/// failed after the intake statement leaves nothing here: the route answered an error,
/// and a claim that did commit expires into claim recovery.)
fn publish_express(state: &AppState, announce: &Mutex<Option<ClaimedEvent>>) {
    let event = announce.lock().ok().and_then(|mut event| event.take());
    if let (Some(event), Some(express)) = (event, state.express.clone()) {
        actix_web::rt::spawn(async move { express.publish(event).await });
    }
}

/// `GET /api/documents/{id}`.
#[utoipa::path(
    get, path = "/api/documents/{document_id}", tag = "documents", operation_id = "get_document",
    params(
        ("document_id" = Uuid, Path, description = "document id"),
        ("If-None-Match" = Option<String>, Header, description = conditional::IF_NONE_MATCH_DESCRIPTION)
    ),
    responses(
        (status = 200, description = "the document", body = DocumentView,
            headers(("ETag" = String, description = "the document's version: send it in If-None-Match (304 while unchanged) or If-Match (412 once it changed)")),
            links(
                ("DownloadContent" = (operation_id = "download_content", parameters(("document_id" = "$response.body#/id")))),
                ("DownloadThumbnail" = (operation_id = "download_thumbnail", parameters(("document_id" = "$response.body#/id")))),
                ("ListProcessingJobs" = (operation_id = "list_processing_jobs", parameters(("document_id" = "$response.body#/id"))))
            )),
        (status = 304, description = "If-None-Match names the current ETag: no body",
            headers(("ETag" = String, description = "the document's version: send it in If-None-Match (304 while unchanged) or If-Match (412 once it changed)"))),
        (status = 404, description = "no such document in this tenant, or it is in the trash", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: DocumentReader,
    request: HttpRequest,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let mut conn = state.connection().await?;
    let (document, version) =
        documents::find_document_with_version(&mut conn, caller.tenant_id, document_id)
            .await?
            .ok_or(ApiError::NotFound)?;
    let etag = conditional::document_etag(document.row_version);
    if conditional::none_match(&request, &etag) {
        return Ok(conditional::not_modified(&etag));
    }
    let mut labels = labels::labels_of(&mut conn, caller.tenant_id, &[document.id]).await?;
    let view = DocumentView::new(document, version).with_labels(labels.remove(&document_id));
    Ok(HttpResponse::Ok()
        .insert_header(conditional::etag_header(etag))
        .json(view))
}
