//! Trash and restore. Trashing cancels the document's unfinished work in the same
//! transaction; restoring brings the document back, not its cancelled jobs.

use actix_web::{HttpResponse, web};
use diesel_async::AsyncConnection;
use quire_shared::catalogue::{JobType, PurgeDocumentPayload};
use quire_shared::db::jobs::NewJob;
use quire_shared::db::{DbError, documents, jobs, labels};
use serde_json::json;
use uuid::Uuid;

use super::documents::connection;
use crate::auth::DocumentWriter;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{DocumentView, JobView, ProblemView};

/// What a `DELETE` did.
enum Deleted {
    Trashed(documents::Document, usize),
    PurgeQueued(Box<jobs::Job>),
}

/// `DELETE /api/documents/{id}`: a live document goes to the trash, and its `QUEUED` /
/// `RUNNING` jobs and their undelivered events are cancelled, atomically (200). A
/// document already in the trash is purged for good by a `purge-document` job (202 with
/// the job; a purge already queued or running is returned, not duplicated).
#[utoipa::path(
    delete, path = "/api/documents/{document_id}", tag = "documents",
    params(("document_id" = Uuid, Path, description = "document id")),
    responses(
        (status = 200, description = "{document, cancelled_jobs}: trashed, unfinished jobs cancelled"),
        (status = 202, description = "{job}: the trashed document will be purged", body = JobView),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn trash(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let tenant_id = caller.tenant_id;
    let max_attempts = state.settings.jobs.max_attempts;
    let request_id = crate::request_id::current();
    let mut conn = connection(&state).await?;
    let deleted = conn
        .transaction::<_, DbError, _>(async |conn| {
            if let Some(document) = documents::trash_document(conn, tenant_id, document_id).await? {
                let cancelled = jobs::cancel_document_jobs(conn, tenant_id, document_id).await?;
                return Ok(Some(Deleted::Trashed(document, cancelled)));
            }
            if documents::find_document_including_trashed(conn, tenant_id, document_id)
                .await?
                .is_none()
            {
                return Ok(None);
            }
            let purge = NewJob {
                tenant_id,
                document_id: Some(document_id),
                job_type: JobType::PurgeDocument,
                payload: PurgeDocumentPayload { document_id },
                max_attempts,
                request_id: request_id.clone(),
            };
            let job = jobs::enqueue_or_active(conn, &purge).await?;
            Ok(job.map(|job| Deleted::PurgeQueued(Box::new(job))))
        })
        .await?;
    match deleted.ok_or(ApiError::NotFound)? {
        Deleted::Trashed(document, cancelled) => {
            tracing::info!(%document_id, %tenant_id, cancelled_jobs = cancelled, "document trashed");
            let view = full_view(&mut conn, document).await?;
            Ok(HttpResponse::Ok().json(json!({ "document": view, "cancelled_jobs": cancelled })))
        }
        Deleted::PurgeQueued(job) => {
            tracing::info!(%document_id, %tenant_id, job_id = %job.id, "document purge queued");
            Ok(HttpResponse::Accepted().json(json!({ "job": JobView::from(*job) })))
        }
    }
}

/// `POST /api/documents/{id}/restore`: takes a document out of the trash.
#[utoipa::path(
    post, path = "/api/documents/{document_id}/restore", tag = "documents", params(("document_id" = Uuid, Path, description = "document id")),
    responses(
        (status = 200, description = "restored", body = DocumentView),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "document_not_trashed", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn restore(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let tenant_id = caller.tenant_id;
    let mut conn = connection(&state).await?;
    let restored = conn
        .transaction::<_, DbError, _>(async |conn| {
            // Locks the row: a running purge holds it until it is done, and then there is
            // nothing left to restore.
            let Some(current) = documents::lock_document(conn, tenant_id, document_id).await?
            else {
                return Ok(Err(ApiError::NotFound));
            };
            if current.trashed_at.is_none() {
                return Ok(Err(ApiError::Conflict {
                    code: "document_not_trashed",
                    detail: "the document is not in the trash".to_owned(),
                    extension: None,
                }));
            }
            // A purge that has not started is withdrawn with the restore.
            jobs::cancel_queued_document_jobs(
                conn,
                tenant_id,
                document_id,
                JobType::PurgeDocument,
                "the document was restored",
            )
            .await?;
            let document = documents::restore_document(conn, tenant_id, document_id).await?;
            Ok(document.ok_or(ApiError::NotFound))
        })
        .await?;
    let document = restored?;
    tracing::info!(%document_id, %tenant_id, "document restored");
    Ok(HttpResponse::Ok().json(full_view(&mut conn, document).await?))
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
