//! Receiving a multipart upload: the `file` part streams into storage while its size and
//! SHA-256 are computed; the body is never held whole in memory, nor waited for for ever.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use actix_multipart::{Field, Multipart, MultipartError};
use actix_web::error::PayloadError;
use actix_web::{HttpRequest, HttpResponse, web};
use bytes::Bytes;
use diesel_async::AsyncPgConnection;
use futures_util::future::BoxFuture;
use futures_util::{Stream, StreamExt, TryStreamExt};
use quire_shared::actions::documents::{StoredUpload, discard};
use quire_shared::actions::idempotency::{IdempotentRequest, Scope};
use quire_shared::storage::{Digested, ObjectStore, StorageError, StorageKey, put_digested};
use uuid::Uuid;

use crate::error::ApiError;
use crate::idempotency::{self, Answer};
use crate::sniff::{SNIFF_BYTES, sniff};
use crate::state::AppState;

/// Longest title we accept, in characters (the column's bound).
pub use quire_shared::actions::documents::MAX_TITLE_CHARS;
use quire_shared::actions::documents::{TitleFault, checked_title, is_bidi_control};
/// Longest original filename we keep, in bytes.
pub const MAX_FILENAME_BYTES: usize = 255;

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

/// A stored upload and the request's `Idempotency-Key` (checked before a byte of the
/// body was read; its digest is the route's to make, from what it received).
#[derive(Debug)]
pub struct ReceivedRequest {
    pub stored: StoredUpload,
    pub idempotency_key: Option<idempotency::Key>,
}

/// Every upload's way in — a new document's and a new version's alike: a declared
/// oversize body or a body that is not multipart is refused before a byte is read, then
/// a malformed `Idempotency-Key`, then a tenant over its enqueue rate before a byte is
/// stored; then the file streams to the store under a new version's key (size limit,
/// read timeout, content sniffing). The stored file, or the refusal with nothing left
/// stored.
pub async fn receive_request(
    state: &AppState,
    tenant_id: Uuid,
    request: &HttpRequest,
    payload: web::Payload,
) -> Result<ReceivedRequest, ApiError> {
    let limit = state.settings.server.max_upload_bytes;
    // Refuse a declared oversize body before reading (or storing) a byte of it; bodies
    // without a length are cut off while streaming.
    if declared_length(request).is_some_and(|length| length > limit + MULTIPART_OVERHEAD_BYTES) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    if !is_multipart_form(request) {
        return Err(ApiError::NotMultipart);
    }
    // A malformed key is refused before a byte of the body is read.
    let idempotency_key = idempotency::Key::of(request, Scope::Tenant(tenant_id))?;
    // Before a byte of the body is read or stored: a tenant over its rate costs nothing.
    crate::enqueue_limit::admit(state, tenant_id, 1, "upload").await?;
    let timed_out = Rc::new(Cell::new(false));
    let timeout = Duration::from_millis(state.settings.server.upload_read_timeout_ms);
    let body = read_limited(payload, timeout, timed_out.clone());
    let multipart = Multipart::new(request.headers(), body);
    let version_id = Uuid::now_v7();
    let key = StorageKey::document_source(tenant_id, version_id);
    let received = match receive(state.store.as_ref(), &key, limit, multipart).await {
        Ok(received) => received,
        Err(error) => {
            discard(state.store.as_ref(), &key).await;
            // The parser calls a stalled body malformed; it is not.
            return Err(if timed_out.get() {
                ApiError::UploadTimeout
            } else {
                error
            });
        }
    };
    Ok(ReceivedRequest {
        stored: StoredUpload {
            key,
            version_id,
            digest: received.digest,
            content_type: received.content_type,
            original_filename: received.original_filename,
            title: received.title,
        },
        idempotency_key,
    })
}

/// Records a stored upload (`object`) by `work`, once per `Idempotency-Key`
/// (`idempotency::once`), and keeps the object only where a committed row points at it:
/// without a database connection it is removed (503); a replay's copy is nobody's (the
/// first request's row holds its own); with a key a failure committed nothing (the key's
/// transaction rolled back with the rest). Without a key the action removed the object
/// itself if it recorded nothing, and a failure after its commit leaves a row that
/// needs it.
pub async fn record_once<F>(
    state: &AppState,
    keyed: Option<IdempotentRequest>,
    object: &StorageKey,
    work: F,
) -> Result<HttpResponse, ApiError>
where
    F: for<'r> FnOnce(&'r mut AsyncPgConnection) -> BoxFuture<'r, Result<Answer, ApiError>> + Send,
{
    let keyed_request = keyed.is_some();
    let mut conn = match state.connection().await {
        Ok(conn) => conn,
        Err(error) => {
            discard(state.store.as_ref(), object).await;
            return Err(error);
        }
    };
    match idempotency::once(&mut conn, keyed, work).await {
        Ok(answered) => {
            if answered.replayed {
                discard(state.store.as_ref(), object).await;
            }
            Ok(answered.into_response())
        }
        Err(error) => {
            if keyed_request {
                discard(state.store.as_ref(), object).await;
            }
            Err(error)
        }
    }
}

#[derive(Debug)]
pub struct ReceivedUpload {
    pub title: Option<String>,
    pub original_filename: Option<String>,
    pub content_type: String,
    pub digest: Digested,
}

/// The request body, ended with an error once the client sent nothing for `timeout`
/// between two chunks (or before the first); `timed_out` tells the route so, since the
/// multipart parser reports every body error alike.
pub fn read_limited<S>(
    body: S,
    timeout: Duration,
    timed_out: Rc<Cell<bool>>,
) -> impl Stream<Item = Result<Bytes, PayloadError>> + 'static
where
    S: Stream<Item = Result<Bytes, PayloadError>> + Unpin + 'static,
{
    futures_util::stream::unfold(Some(body), move |body| {
        let timed_out = timed_out.clone();
        async move {
            let mut body = body?;
            match tokio::time::timeout(timeout, body.next()).await {
                Ok(Some(chunk)) => Some((chunk, Some(body))),
                Ok(None) => None,
                Err(_) => {
                    timed_out.set(true);
                    let error = std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the upload body stopped arriving",
                    );
                    Some((Err(PayloadError::Io(error)), None))
                }
            }
        }
    })
    // The multipart parser may poll again after the end.
    .fuse()
}

/// Reads every part: exactly one `file`, an optional `title`, nothing else.
pub async fn receive(
    store: &dyn ObjectStore,
    key: &StorageKey,
    limit: u64,
    mut multipart: Multipart,
) -> Result<ReceivedUpload, ApiError> {
    let mut title = None;
    let mut file: Option<(Option<String>, String, Digested)> = None;
    while let Some(field) = multipart.next().await {
        let field = field.map_err(invalid_multipart)?;
        let name = field.name().unwrap_or_default().to_owned();
        match name.as_str() {
            "file" => {
                if file.is_some() {
                    return Err(ApiError::bad_request(
                        "multiple_files",
                        "send exactly one part named \"file\"",
                    ));
                }
                let filename = field
                    .content_disposition()
                    .and_then(|disposition| disposition.get_filename())
                    .map(display_filename)
                    .filter(|name| !name.is_empty());
                let (content_type, digest) = store_field(store, key, limit, field).await?;
                file = Some((filename, content_type, digest));
            }
            "title" => title = Some(read_title(field).await?),
            _ => {
                return Err(ApiError::bad_request(
                    "unknown_part",
                    "only the parts \"file\" and \"title\" are accepted",
                ));
            }
        }
    }
    let (original_filename, content_type, digest) = file.ok_or_else(|| {
        ApiError::bad_request("missing_file", "the upload has no part named \"file\"")
    })?;
    Ok(ReceivedUpload {
        title,
        original_filename,
        content_type,
        digest,
    })
}

/// Reads the first bytes of the part, decides its type from them, then pumps the part
/// through a small bounded channel into the store. Nothing is stored for an empty or
/// refused file. actix's multipart stream is not `Send`; the channel hands its chunks to
/// the store's `Send` stream and keeps back-pressure (a few chunks in flight).
async fn store_field(
    store: &dyn ObjectStore,
    key: &StorageKey,
    limit: u64,
    mut field: Field,
) -> Result<(String, Digested), ApiError> {
    let mut head = Vec::new();
    let mut head_len = 0usize;
    // A finished field must not be polled again (actix-multipart panics).
    let mut finished = false;
    while head_len < SNIFF_BYTES {
        match field.next().await {
            Some(Ok(chunk)) => {
                head_len += chunk.len();
                head.push(chunk);
            }
            Some(Err(error)) => return Err(invalid_multipart(error)),
            None => {
                finished = true;
                break;
            }
        }
    }
    if head_len == 0 {
        return Err(ApiError::unprocessable(
            "empty_file",
            "the uploaded file is empty",
        ));
    }
    if head_len as u64 > limit {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    let prefix: Vec<u8> = head
        .iter()
        .flat_map(|chunk| chunk.iter().copied())
        .take(SNIFF_BYTES)
        .collect();
    let content_type = sniff(&prefix)
        .ok_or(ApiError::UnsupportedMediaType)?
        .into_owned();

    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let pump = async move {
        for chunk in head {
            if sender.send(Ok(chunk)).await.is_err() {
                return None;
            }
        }
        if finished {
            return None;
        }
        while let Some(chunk) = field.next().await {
            match chunk {
                Ok(bytes) => {
                    if sender.send(Ok(bytes)).await.is_err() {
                        return None;
                    }
                }
                Err(error) => {
                    let _ = sender
                        .send(Err(std::io::Error::other("client stream failed")))
                        .await;
                    return Some(error);
                }
            }
        }
        None
    };
    let body = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
    .boxed();
    let (client_error, stored) = futures_util::join!(pump, put_digested(store, key, body, limit));
    if let Some(error) = client_error {
        return Err(invalid_multipart(error));
    }
    let digest = stored.map_err(|error| match error {
        StorageError::TooLarge { limit } => ApiError::PayloadTooLarge { limit },
        other => ApiError::storage(other, "failed to store the upload"),
    })?;
    Ok((content_type, digest))
}

async fn read_title(field: Field) -> Result<String, ApiError> {
    // A title is small: refuse anything that could not be one before buffering more.
    let max_bytes = MAX_TITLE_CHARS * 4;
    let bytes = field
        .map_err(invalid_multipart)
        .try_fold(Vec::new(), |mut acc, chunk| async move {
            if acc.len() + chunk.len() > max_bytes {
                return Err(ApiError::unprocessable(
                    "title_too_long",
                    "the title is too long",
                ));
            }
            acc.extend_from_slice(&chunk);
            Ok(acc)
        })
        .await?;
    let title = String::from_utf8(bytes)
        .map_err(|_| ApiError::unprocessable("invalid_title", "the title is not UTF-8"))?;
    match checked_title(&title) {
        Ok(title) => Ok(title),
        // No title: the filename stands in for it.
        Err(TitleFault::Empty) => Ok(String::new()),
        Err(TitleFault::TooLong) => Err(ApiError::unprocessable(
            "title_too_long",
            "the title is too long",
        )),
        Err(TitleFault::Unprintable) => Err(ApiError::unprocessable(
            "invalid_title",
            "a title has no control or bidirectional-control characters",
        )),
    }
}

fn invalid_multipart(error: MultipartError) -> ApiError {
    tracing::debug!(%error, "invalid multipart body");
    ApiError::bad_request(
        "invalid_multipart",
        "the body is not valid multipart/form-data",
    )
}

/// A client's filename made safe to display: no directory part, no control or
/// bidirectional-override characters, at most 255 bytes on a character boundary.
pub fn display_filename(raw: &str) -> String {
    let base = raw.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = base
        .chars()
        .filter(|c| !c.is_control() && !is_bidi_control(*c))
        .collect();
    let cleaned = cleaned.trim();
    let mut end = cleaned.len().min(MAX_FILENAME_BYTES);
    while !cleaned.is_char_boundary(end) {
        end -= 1;
    }
    // The cut may land just after a space: trim again, so a shown name never ends in
    // whitespace and cleaning it again changes nothing.
    cleaned[..end].trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_filenames_lose_paths_controls_and_bidi_overrides() {
        assert_eq!(display_filename("../../etc/passwd"), "passwd");
        assert_eq!(display_filename("C:\\Users\\me\\scan.pdf"), "scan.pdf");
        assert_eq!(display_filename("invoice\u{202E}fdp.exe"), "invoicefdp.exe");
        assert_eq!(display_filename("a\nb\u{0}c.txt"), "abc.txt");
    }

    #[test]
    fn display_filenames_are_bounded_on_a_character_boundary() {
        let long = "é".repeat(300);
        let shown = display_filename(&long);
        assert!(shown.len() <= MAX_FILENAME_BYTES);
        assert!(shown.chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_filename_cut_at_the_limit_ends_without_the_space_before_the_cut() {
        // Found by the `filename` fuzz target (fuzz/corpus/filename/cut_after_space):
        // the cut landed just after a space, and the shown name ended in it.
        let raw = format!("{} tail.pdf", "a".repeat(MAX_FILENAME_BYTES - 1));
        let shown = display_filename(&raw);
        assert_eq!(shown, "a".repeat(MAX_FILENAME_BYTES - 1));
        assert_eq!(display_filename(&shown), shown, "cleaning is idempotent");
    }
}
