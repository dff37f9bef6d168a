//! Downloads: a document's current bytes (any version's: `versions.rs`), its thumbnail
//! once the pipeline made one, and a scan's searchable archive copy.

use actix_web::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use actix_web::{HttpResponse, web};
use anyhow::Context;
use quire_shared::db::assets::{self, AssetKind};
use quire_shared::db::documents::{self, DocumentVersion};
use quire_shared::storage::{StorageError, StorageKey};
use tokio_util::io::ReaderStream;
use uuid::Uuid;

use crate::auth::DocumentReader;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::{FileBytes, ProblemView};

/// `attachment` with an ASCII fallback name and the UTF-8 name percent-encoded
/// (RFC 6266 / 8187): no quote, backslash or control character reaches the header.
fn content_disposition(filename: &str) -> String {
    let ascii: String = filename
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._- ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded: String = filename
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

/// `GET /api/documents/{id}/content`: the current version's bytes (a new version's once its
/// analysis made it current).
#[utoipa::path(
    get, path = "/api/documents/{document_id}/content", tag = "documents", operation_id = "download_content",
    params(("document_id" = Uuid, Path, description = "document id")),
    responses(
        // Served as the type the upload's bytes were found to be (text with its charset).
        (status = 200, description = "the bytes, as an attachment, in the type they were uploaded as",
            content(
                (FileBytes = "application/pdf"),
                (FileBytes = "image/png"),
                (FileBytes = "image/jpeg"),
                (FileBytes = "image/tiff"),
                (FileBytes = "image/webp"),
                (FileBytes = "text/plain")
            ),
            headers(("Content-Disposition" = String, description = "attachment, with the uploaded file's name"))),
        (status = 404, description = "no such document in this tenant, or it is in the trash", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "content_missing: the stored file of this document is missing", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL or the object storage unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn content(
    state: web::Data<AppState>,
    caller: DocumentReader,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let mut conn = state.connection().await?;
    let (_, version) =
        documents::find_document_with_version(&mut conn, caller.tenant_id, document_id)
            .await?
            .ok_or(ApiError::NotFound)?;
    let version = version.ok_or(ApiError::NotFound)?;
    drop(conn);
    stream_version(&state, version).await
}

/// A version's stored bytes as an attachment (the current one's, or any version's):
/// streamed, with the type decided at upload and headers that keep a browser from
/// running it.
pub(super) async fn stream_version(
    state: &AppState,
    version: DocumentVersion,
) -> Result<HttpResponse, ApiError> {
    let key = StorageKey::from_stored(&version.storage_key).context("a stored key is malformed")?;
    let reader = match state.store.open(&key).await {
        Ok(reader) => reader,
        Err(StorageError::NotFound) => {
            return Err(ApiError::Conflict {
                code: "content_missing",
                detail: "the stored file of this document is missing".to_owned(),
                extension: None,
            });
        }
        Err(error) => return Err(ApiError::storage(error, "failed to open content")),
    };
    let filename = version
        .original_filename
        .unwrap_or_else(|| format!("{}", version.document_id));
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, version.content_type))
        .insert_header((CONTENT_DISPOSITION, content_disposition(&filename)))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Content-Security-Policy", "default-src 'none'; sandbox"))
        .no_chunking(u64::try_from(version.size_bytes).unwrap_or(0))
        .streaming(ReaderStream::new(reader)))
}

/// `GET /api/documents/{id}/thumbnail`: the PNG the analysis pipeline made of the
/// current version; 409 until it has made one.
#[utoipa::path(
    get, path = "/api/documents/{document_id}/thumbnail", tag = "documents", operation_id = "download_thumbnail",
    params(("document_id" = Uuid, Path, description = "document id")),
    responses(
        (status = 200, description = "a PNG thumbnail, at most 400 px wide (analysis.thumbnail_width)", body = FileBytes, content_type = "image/png"),
        (status = 404, description = "no such document in this tenant, or it is in the trash", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "thumbnail_not_available: not analyzed yet, or the analysis failed", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL or the object storage unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn thumbnail(
    state: web::Data<AppState>,
    caller: DocumentReader,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let mut conn = state.connection().await?;
    let (_, version) =
        documents::find_document_with_version(&mut conn, caller.tenant_id, document_id)
            .await?
            .ok_or(ApiError::NotFound)?;
    let not_available = || ApiError::Conflict {
        code: "thumbnail_not_available",
        detail: "this document has no thumbnail yet".to_owned(),
        extension: None,
    };
    let version = version.ok_or_else(not_available)?;
    let asset = assets::find(
        &mut conn,
        caller.tenant_id,
        version.id,
        AssetKind::Thumbnail,
    )
    .await?
    .ok_or_else(not_available)?;
    drop(conn);
    let key = StorageKey::from_stored(&asset.storage_key).context("a stored key is malformed")?;
    let reader = match state.store.open(&key).await {
        Ok(reader) => reader,
        Err(StorageError::NotFound) => return Err(not_available()),
        Err(error) => return Err(ApiError::storage(error, "failed to open a thumbnail")),
    };
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, "image/png"))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Cache-Control", "private, max-age=300"))
        .no_chunking(u64::try_from(asset.size_bytes).unwrap_or(0))
        .streaming(ReaderStream::new(reader)))
}

/// `GET /api/documents/{id}/archive`: the searchable archive copy the analysis pipeline
/// made of a scanned current version (a PDF of its pages upright, with their text as an
/// invisible layer); 404 `archive_not_available` when it has none.
#[utoipa::path(
    get, path = "/api/documents/{document_id}/archive", tag = "documents", operation_id = "download_archive",
    params(("document_id" = Uuid, Path, description = "document id")),
    responses(
        (status = 200, description = "the archive copy of a scan (an image, or a PDF without a text layer): its pages upright and straightened, with their OCR text as an invisible, searchable layer; as an attachment", body = FileBytes, content_type = "application/pdf",
            headers(("Content-Disposition" = String, description = "attachment, named after the uploaded file with .pdf"))),
        (status = 404, description = "not_found: no such document in this tenant, or it is in the trash; archive_not_available: the document has no archive copy (not a scan, not analyzed yet, the analysis failed, or a scan with more pages than analysis.ocr_max_pages)", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL or the object storage unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn archive(
    state: web::Data<AppState>,
    caller: DocumentReader,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let document_id = path.into_inner();
    let mut conn = state.connection().await?;
    let (_, version) =
        documents::find_document_with_version(&mut conn, caller.tenant_id, document_id)
            .await?
            .ok_or(ApiError::NotFound)?;
    let not_available = || ApiError::NotAvailable {
        code: "archive_not_available",
        detail: "this document has no archive copy: only scans get one, once analyzed".to_owned(),
    };
    let version = version.ok_or_else(not_available)?;
    let asset = assets::find(&mut conn, caller.tenant_id, version.id, AssetKind::Archive)
        .await?
        .ok_or_else(not_available)?;
    drop(conn);
    let key = StorageKey::from_stored(&asset.storage_key).context("a stored key is malformed")?;
    let reader = match state.store.open(&key).await {
        Ok(reader) => reader,
        Err(StorageError::NotFound) => return Err(not_available()),
        Err(error) => return Err(ApiError::storage(error, "failed to open an archive copy")),
    };
    let filename = archive_filename(version.original_filename.as_deref(), document_id);
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, "application/pdf"))
        .insert_header((CONTENT_DISPOSITION, content_disposition(&filename)))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .insert_header(("Content-Security-Policy", "default-src 'none'; sandbox"))
        .no_chunking(u64::try_from(asset.size_bytes).unwrap_or(0))
        .streaming(ReaderStream::new(reader)))
}

/// The archive copy's name: the original's with `.pdf` for its extension (`scan.png`
/// gives `scan.pdf`), or the document id.
fn archive_filename(original: Option<&str>, document_id: Uuid) -> String {
    let stem = original
        .map(|name| name.rsplit_once('.').map_or(name, |(stem, _)| stem))
        .filter(|stem| !stem.is_empty())
        .map_or_else(|| document_id.to_string(), str::to_owned);
    format!("{stem}.pdf")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispositions_never_carry_quotes_or_control_characters() {
        let header = content_disposition("a\"b\\c\r\nd é.pdf");
        assert!(
            header.starts_with("attachment; filename=\"a_b_c__d _.pdf\";"),
            "{header}"
        );
        assert!(
            header.ends_with("filename*=UTF-8''a%22b%5Cc%0D%0Ad%20%C3%A9.pdf"),
            "{header}"
        );
    }

    #[test]
    fn an_archive_copy_is_named_after_the_original_as_a_pdf() {
        let id = Uuid::now_v7();
        assert_eq!(archive_filename(Some("scan.png"), id), "scan.pdf");
        assert_eq!(
            archive_filename(Some("letter.2024.tiff"), id),
            "letter.2024.pdf"
        );
        assert_eq!(archive_filename(Some("scan.pdf"), id), "scan.pdf");
        assert_eq!(archive_filename(Some("noextension"), id), "noextension.pdf");
        assert_eq!(archive_filename(Some(".png"), id), format!("{id}.pdf"));
        assert_eq!(archive_filename(None, id), format!("{id}.pdf"));
    }
}
