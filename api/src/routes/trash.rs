//! Trash and restore. Trashing cancels the document's unfinished work in the same
//! transaction; restoring brings the document back, not its cancelled jobs.

use actix_web::{HttpRequest, HttpResponse, web};
use quire_shared::actions::documents::{self as document_actions, Deleted};
use quire_shared::db::{documents, labels};
use uuid::Uuid;

use crate::auth::DocumentWriter;
use crate::conditional;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{DocumentView, JobView, ProblemView, PurgeView, TrashView};

/// `DELETE /api/documents/{id}`: a live document goes to the trash, and its `QUEUED` /
/// `RUNNING` jobs and their undelivered events are cancelled, atomically (200). A
/// document already in the trash is purged for good by a `purge-document` job (202 with
/// the job; a purge already queued or running is returned, not duplicated).
#[utoipa::path(
    delete, path = "/api/documents/{document_id}", tag = "documents", operation_id = "trash_document",
    params(
        ("document_id" = Uuid, Path, description = "document id"),
        ("If-Match" = Option<String>, Header, description = conditional::IF_MATCH_DESCRIPTION)
    ),
    responses(
        (status = 200, description = "trashed, unfinished jobs cancelled", body = TrashView,
            headers(("ETag" = String, description = "the trashed document's version (If-Match of a restore)")),
            links(
                ("RestoreDocument" = (operation_id = "restore_document", parameters(("document_id" = "$response.body#/document/id")))),
                ("PurgeDocument" = (operation_id = "trash_document", parameters(("document_id" = "$response.body#/document/id"))))
            )),
        (status = 202, description = "the trashed document will be purged by this job", body = PurgeView),
        (status = 412, description = "precondition_failed: If-Match names a version the document is no longer at; nothing changed (and nothing is purged)", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn trash(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    request: HttpRequest,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let if_match = conditional::if_match(&request);
    let document_caller = state.document_caller(&caller);
    let mut conn = state.connection().await?;
    match document_actions::delete_if(&mut conn, &document_caller, document_id, &if_match).await? {
        Deleted::Trashed(document, cancelled) => {
            let etag = conditional::document_etag(document.row_version);
            let view = full_view(&mut conn, document).await?;
            Ok(HttpResponse::Ok()
                .insert_header(conditional::etag_header(etag))
                .json(TrashView {
                    document: view,
                    cancelled_jobs: cancelled as u64,
                }))
        }
        Deleted::PurgeQueued(job) => {
            let holds = quire_shared::db::pauses::holds(&mut conn, caller.tenant_id).await?;
            Ok(HttpResponse::Accepted().json(PurgeView {
                job: JobView::held_by(*job, &holds),
            }))
        }
    }
}

/// `POST /api/documents/{id}/restore`: takes a document out of the trash.
#[utoipa::path(
    post, path = "/api/documents/{document_id}/restore", tag = "documents", operation_id = "restore_document",
    params(
        ("document_id" = Uuid, Path, description = "document id"),
        ("If-Match" = Option<String>, Header, description = conditional::IF_MATCH_DESCRIPTION)
    ),
    responses(
        (status = 200, description = "restored", body = DocumentView,
            headers(("ETag" = String, description = "the restored document's version")),
            links(
                ("GetDocument" = (operation_id = "get_document", parameters(("document_id" = "$response.body#/id")))),
                ("TrashDocument" = (operation_id = "trash_document", parameters(("document_id" = "$response.body#/id"))))
            )),
        (status = 412, description = "precondition_failed: If-Match names a version the document is no longer at; nothing changed", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "document_not_trashed", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn restore(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    request: HttpRequest,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let if_match = conditional::if_match(&request);
    let mut conn = state.connection().await?;
    let document = document_actions::restore_if(
        &mut conn,
        &caller.tenant_write(),
        path.into_inner(),
        &if_match,
    )
    .await?;
    let etag = conditional::document_etag(document.row_version);
    Ok(HttpResponse::Ok()
        .insert_header(conditional::etag_header(etag))
        .json(full_view(&mut conn, document).await?))
}

/// The document as a read shows it: current version and labels.
async fn full_view(
    conn: &mut diesel_async::AsyncPgConnection,
    document: documents::Document,
) -> Result<DocumentView, ApiError> {
    let version = documents::current_version(conn, &document).await?;
    let mut labels = labels::labels_of(conn, document.tenant_id, &[document.id]).await?;
    let document_labels = labels.remove(&document.id);
    Ok(DocumentView::new(document, version).with_labels(document_labels))
}
