//! Upload and read documents.

use actix_web::{HttpRequest, HttpResponse, web};
use quire_shared::actions::documents as document_actions;
use quire_shared::db::documents;
use quire_shared::db::intake::Recorded;
use quire_shared::db::labels;
use uuid::Uuid;

use crate::auth::{DocumentReader, DocumentWriter};
use crate::error::ApiError;
use crate::state::AppState;
use crate::upload;
use crate::views::{DocumentView, JobView, ProblemView, UploadForm, UploadView};

/// `POST /api/documents`: store the file, then record the document, its version, an
/// `analyze-document` job and its outbox event in ONE statement, which re-checks that the
/// tenant still takes the write (a reset or deletion while the body was on its way
/// refuses it, and the stored file is removed). Redis is not involved: an upload
/// succeeds while Redis is down.
#[utoipa::path(
    post, path = "/api/documents", tag = "documents",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "recorded, analysis queued", body = UploadView),
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
    let stored = upload::receive_request(&state, caller.tenant_id, &request, payload).await?;
    let document_caller = state.document_caller(&caller);
    let reject_duplicates = state.settings.server.reject_duplicate_uploads;
    let mut conn = upload::connection_for(&state, &stored).await?;
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
    get, path = "/api/documents/{document_id}", tag = "documents", params(("document_id" = Uuid, Path, description = "document id")),
    responses(
        (status = 200, description = "the document", body = DocumentView),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
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
