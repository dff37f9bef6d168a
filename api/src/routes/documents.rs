//! Upload and read documents.

use actix_multipart::Multipart;
use actix_web::{HttpRequest, HttpResponse, web};
use anyhow::Context;
use diesel_async::AsyncConnection;
use quire_shared::db::documents::{self, NewDocument};
use quire_shared::db::intake::{self, NewIntake, Recorded};
use quire_shared::db::jobs::NewJob;
use quire_shared::db::labels;
use quire_shared::db::{DbError, PooledConnection};
use quire_shared::jobs::AnalyzeDocument;
use quire_shared::storage::StorageKey;
use uuid::Uuid;

use crate::auth::{DocumentReader, DocumentWriter};
use crate::error::ApiError;
use crate::state::AppState;
use crate::upload::{self, MAX_TITLE_CHARS};
use crate::views::{DocumentView, ProblemView, UploadForm, UploadView};

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

pub(crate) async fn connection(state: &AppState) -> Result<PooledConnection, ApiError> {
    Ok(state.pool.get().await.map_err(DbError::from)?)
}

/// `POST /api/documents`: store the file, then record the document, its version, an
/// `analyze-document` job and its outbox event in ONE transaction. Redis is not involved:
/// an upload succeeds while Redis is down.
#[utoipa::path(
    post, path = "/api/documents", tag = "documents",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "recorded, analysis queued", body = UploadView),
        (status = 409, description = "duplicate_document: the same bytes exist in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 413, description = "larger than the upload limit", body = ProblemView, content_type = "application/problem+json"),
        (status = 415, description = "not multipart, or a file type outside the allowlist", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "empty file or invalid title", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
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
    let multipart = Multipart::new(request.headers(), payload);
    let document_id = Uuid::now_v7();
    let version_id = Uuid::now_v7();
    let key = StorageKey::document_source(caller.tenant_id, version_id);
    let received = match upload::receive(state.store.as_ref(), &key, limit, multipart).await {
        Ok(received) => received,
        Err(error) => {
            discard(&state, &key, document_id).await;
            return Err(error);
        }
    };

    let title = received
        .title
        .clone()
        .filter(|title| !title.is_empty())
        .or_else(|| received.original_filename.clone())
        .unwrap_or_else(|| "Untitled".to_owned())
        .chars()
        .take(MAX_TITLE_CHARS)
        .collect();
    let new = NewDocument {
        id: document_id,
        tenant_id: caller.tenant_id,
        title,
        version_id,
        storage_key: key.as_str().to_owned(),
        size_bytes: i64::try_from(received.digest.size_bytes).context("size overflows i64")?,
        sha256: received.digest.sha256.clone(),
        content_type: received.content_type.clone(),
        original_filename: received.original_filename.clone(),
    };
    let analyze = AnalyzeDocument {
        document_id,
        document_version_id: version_id,
        force: false,
    };
    let job = NewJob::new(
        caller.tenant_id,
        analyze,
        state.settings.jobs.max_attempts,
        crate::request_id::current(),
    );

    let size_bytes = new.size_bytes;
    let intake = NewIntake { document: new, job };
    let reject_duplicates = state.settings.server.reject_duplicate_uploads;
    let recorded = record_upload(&state, intake, reject_duplicates).await;
    let Recorded {
        document,
        version,
        job,
    } = match recorded {
        Ok(rows) => rows,
        Err(error) => {
            discard(&state, &key, document_id).await;
            return Err(error);
        }
    };
    tracing::info!(%document_id, job_id = %job.id, tenant_id = %caller.tenant_id, user_id = %caller.user_id, size_bytes, "document uploaded");
    Ok(HttpResponse::Created()
        .insert_header(("Location", format!("/api/documents/{document_id}")))
        .json(UploadView {
            document: DocumentView::new(document, Some(version)),
            job: job.into(),
        }))
}

/// Nothing points at the object of a refused upload: remove it now rather than wait for
/// the storage GC.
async fn discard(state: &AppState, key: &StorageKey, document_id: Uuid) {
    if let Err(error) = state.store.delete(key).await {
        tracing::warn!(%error, %document_id, "failed to remove an unrecorded upload");
    }
}

/// Why recording an upload stopped.
enum RecordError {
    Db(DbError),
    Duplicate(Uuid),
}

impl From<diesel::result::Error> for RecordError {
    fn from(error: diesel::result::Error) -> Self {
        Self::Db(error.into())
    }
}

impl From<DbError> for RecordError {
    fn from(error: DbError) -> Self {
        Self::Db(error)
    }
}

async fn record_upload(
    state: &AppState,
    intake: NewIntake<AnalyzeDocument>,
    reject_duplicates: bool,
) -> Result<Recorded, ApiError> {
    let mut conn = connection(state).await?;
    let intakes = [intake];
    let recorded = if reject_duplicates {
        conn.transaction::<_, RecordError, _>(async |conn| {
            let document = &intakes[0].document;
            if let Some(existing) =
                documents::lock_and_find_same_content(conn, document.tenant_id, &document.sha256)
                    .await?
            {
                return Err(RecordError::Duplicate(existing));
            }
            Ok(intake::record(conn, &intakes).await?)
        })
        .await
    } else {
        // One statement, atomic on its own: no transaction needed.
        intake::record(&mut conn, &intakes)
            .await
            .map_err(RecordError::Db)
    }
    .map(|recorded| recorded.into_iter().next());
    match recorded {
        Ok(Some(recorded)) => Ok(recorded),
        Ok(None) => Err(DbError::Query(diesel::result::Error::NotFound).into()),
        Err(RecordError::Duplicate(existing)) => Err(ApiError::Conflict {
            code: "duplicate_document",
            detail: "a document with the same content exists already".to_owned(),
            extension: Some(("existing_document_id", existing.to_string())),
        }),
        Err(RecordError::Db(error)) => Err(error.into()),
    }
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
    let mut conn = connection(&state).await?;
    let (document, version) =
        documents::find_document_with_version(&mut conn, caller.tenant_id, document_id)
            .await?
            .ok_or(ApiError::NotFound)?;
    let mut labels = labels::labels_of(&mut conn, caller.tenant_id, &[document.id]).await?;
    let view = DocumentView::new(document, version).with_labels(labels.remove(&document_id));
    Ok(HttpResponse::Ok().json(view))
}
