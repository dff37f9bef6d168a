//! Trash and restore. Trashing cancels the document's unfinished work in the same
//! transaction; restoring brings the document back, not its cancelled jobs.

use actix_web::{HttpResponse, web};
use diesel_async::AsyncConnection;
use quire_shared::db::{DbError, documents, jobs};
use serde_json::json;
use uuid::Uuid;

use super::documents::connection;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{DocumentView, ProblemView};

/// `DELETE /api/documents/{id}`: moves a live document to the trash and cancels its
/// `QUEUED`/`RUNNING` jobs and their undelivered events, atomically.
#[utoipa::path(
    delete, path = "/api/documents/{document_id}", tag = "documents", params(("document_id" = Uuid, Path, description = "document id")),
    responses(
        (status = 200, description = "{document, cancelled_jobs}: trashed, unfinished jobs cancelled"),
        (status = 404, description = "no such document in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn trash(
    state: web::Data<AppState>,
    caller: Caller,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    caller.require_active_tenant()?;
    let document_id = path.into_inner();
    let tenant_id = caller.tenant_id;
    let mut conn = connection(&state).await?;
    let trashed = conn
        .transaction::<_, DbError, _>(async |conn| {
            let Some(document) = documents::trash_document(conn, tenant_id, document_id).await?
            else {
                return Ok(None);
            };
            let cancelled = jobs::cancel_document_jobs(conn, tenant_id, document_id).await?;
            Ok(Some((document, cancelled)))
        })
        .await?;
    let (document, cancelled) = trashed.ok_or(ApiError::NotFound)?;
    tracing::info!(%document_id, %tenant_id, cancelled_jobs = cancelled, "document trashed");
    Ok(HttpResponse::Ok().json(json!({
        "document": DocumentView::new(document, None),
        "cancelled_jobs": cancelled,
    })))
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
    caller: Caller,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    caller.require_active_tenant()?;
    let document_id = path.into_inner();
    let mut conn = connection(&state).await?;
    if let Some(document) =
        documents::restore_document(&mut conn, caller.tenant_id, document_id).await?
    {
        tracing::info!(%document_id, tenant_id = %caller.tenant_id, "document restored");
        let version = match document.current_version_id {
            Some(version_id) => {
                documents::find_version(&mut conn, caller.tenant_id, document_id, version_id)
                    .await?
            }
            None => None,
        };
        return Ok(HttpResponse::Ok().json(DocumentView::new(document, version)));
    }
    match documents::find_document_including_trashed(&mut conn, caller.tenant_id, document_id)
        .await?
    {
        Some(_) => Err(ApiError::Conflict {
            code: "document_not_trashed",
            detail: "the document is not in the trash".to_owned(),
            extension: None,
        }),
        None => Err(ApiError::NotFound),
    }
}
