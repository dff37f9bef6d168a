//! The upload's multipart path on any body: the real actix-multipart parser on an
//! in-memory stream with a fixed boundary, through the upload's own checks (part names,
//! title, filename, sizes, sniffing) into a store that keeps nothing. Whatever the body,
//! the answer is an upload that passed every check or a client error (4xx) — never a
//! panic, never a 500.

#![no_main]

use std::sync::LazyLock;

use actix_multipart::Multipart;
use actix_web::error::PayloadError;
use actix_web::http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use libfuzzer_sys::fuzz_target;
use quire_api::ApiError;
use quire_api::fuzzing::{MAX_FILENAME_BYTES, receive};
use quire_shared::actions::documents::checked_title;
use quire_shared::storage::{
    ByteStream, ListedObject, ObjectReader, ObjectStore, StorageError, StorageKey,
};
use uuid::Uuid;

/// The seeds use it; the fuzzer finds it in them.
const CONTENT_TYPE_VALUE: &str = "multipart/form-data; boundary=quire-fuzz";
/// Small, so a short input reaches the size checks.
const LIMIT: u64 = 2048;

/// Reads a body to its end like a real store (so the size limit and the client's
/// stream errors surface where they do in production) and keeps nothing.
#[derive(Debug)]
struct Discard;

#[async_trait]
impl ObjectStore for Discard {
    async fn put(&self, _key: &StorageKey, mut body: ByteStream<'_>) -> Result<(), StorageError> {
        while let Some(chunk) = body.next().await {
            chunk?;
        }
        Ok(())
    }

    async fn open(&self, _key: &StorageKey) -> Result<ObjectReader, StorageError> {
        Err(StorageError::NotFound)
    }

    async fn delete(&self, _key: &StorageKey) -> Result<(), StorageError> {
        Ok(())
    }

    async fn delete_prefix(&self, _prefix: &StorageKey) -> Result<(), StorageError> {
        Ok(())
    }
    async fn list_after(
        &self,
        _after: Option<&str>,
        _limit: usize,
    ) -> Result<Vec<ListedObject>, StorageError> {
        Ok(Vec::new())
    }
}

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime")
});

fuzz_target!(|data: &[u8]| {
    // The first byte picks the size of the chunks the body arrives in, so part
    // boundaries, headers and the sniffed prefix fall anywhere across chunks.
    let Some((&split, body)) = data.split_first() else {
        return;
    };
    let chunk_len = usize::from(split) * 4 + 1;
    let chunks: Vec<Result<Bytes, PayloadError>> = body
        .chunks(chunk_len)
        .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
        .collect();
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE_VALUE));
    let multipart = Multipart::new(&headers, futures_util::stream::iter(chunks));
    let key = StorageKey::document_source(Uuid::nil(), Uuid::nil());

    let received = RUNTIME.block_on(receive(&Discard, &key, LIMIT, multipart));
    match received {
        Ok(upload) => {
            assert!(
                (1..=LIMIT).contains(&upload.digest.size_bytes),
                "{upload:?}"
            );
            if let Some(filename) = &upload.original_filename {
                assert!(
                    !filename.is_empty() && filename.len() <= MAX_FILENAME_BYTES,
                    "{upload:?}"
                );
            }
            if let Some(title) = upload.title.as_deref().filter(|title| !title.is_empty()) {
                assert_eq!(checked_title(title).as_deref(), Ok(title), "{upload:?}");
            }
        }
        Err(
            ApiError::BadRequest { .. }
            | ApiError::Unprocessable { .. }
            | ApiError::UnsupportedMediaType
            | ApiError::PayloadTooLarge { .. },
        ) => {}
        Err(other) => panic!("a body answered with {other:?}"),
    }
});
