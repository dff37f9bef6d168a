//! Object storage behind a small trait: local files (the embedded default) or an
//! S3-compatible server, chosen by `storage.backend`; [`build`] is the one constructor
//! every process uses. Keys are generated from ids (`StorageKey`), never derived from
//! anything a client sent.

mod keys;
mod local;
mod s3;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt};
use sha2::{Digest, Sha256};
use tokio::io::AsyncRead;

pub use keys::StorageKey;
pub use local::LocalStore;
pub use s3::S3Store;

use crate::config::{StorageBackend, StorageSettings};

pub type ByteStream<'a> = BoxStream<'a, Result<Bytes, std::io::Error>>;
pub type ObjectReader = Box<dyn AsyncRead + Send + Unpin>;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("object not found")]
    NotFound,
    #[error("object is larger than {limit} bytes")]
    TooLarge { limit: u64 },
    /// A fault worth another try: the store timed out, answered 5xx or refused the
    /// connection (after the client's own retries). Jobs retry it with backoff; the API
    /// answers 503 with Retry-After. Its text names no credential.
    #[error("object storage is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The settings cannot make a store (names the setting, never a credential).
    #[error("storage settings refused: {0}")]
    Settings(String),
    #[error("storage i/o failed: {0}")]
    Io(#[from] std::io::Error),
}

impl StorageError {
    /// Whether another try later may succeed (the store was unavailable).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

/// The object store `settings` name: the one constructor of every process (api,
/// workers, dispatchers, CLI, bench), so all of them read and write the same objects.
pub fn build(settings: &StorageSettings) -> Result<Arc<dyn ObjectStore>, StorageError> {
    Ok(match settings.backend {
        StorageBackend::Local => Arc::new(LocalStore::new(&settings.data_dir)),
        StorageBackend::S3 => Arc::new(S3Store::new(&settings.s3)?),
    })
}

/// Where document bytes live.
#[async_trait]
pub trait ObjectStore: Send + Sync + std::fmt::Debug {
    /// Streams `body` into `key`; the object appears whole or not at all.
    async fn put(&self, key: &StorageKey, body: ByteStream<'_>) -> Result<(), StorageError>;
    /// Opens `key` for streaming reads.
    async fn open(&self, key: &StorageKey) -> Result<ObjectReader, StorageError>;
    /// Removes `key`; a missing object is not an error.
    async fn delete(&self, key: &StorageKey) -> Result<(), StorageError>;
    /// Removes every object under `prefix` (a tenant's whole space, orphans included);
    /// nothing there is not an error.
    async fn delete_prefix(&self, prefix: &StorageKey) -> Result<(), StorageError>;
    /// Up to `limit` objects in key order, starting after the key `after` (`None`: from
    /// the first): every object of the store, whatever names it or not, staging objects
    /// of writes in flight or abandoned included. Storage GC pages through it.
    async fn list_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ListedObject>, StorageError>;
    /// Whether the store answers, for the readiness probes: by default the first object
    /// of a listing (one request to an S3 server, which fails for a missing bucket or
    /// refused credentials). The caller bounds it with its own deadline.
    async fn probe(&self) -> Result<(), StorageError> {
        self.list_after(None, 1).await.map(|_| ())
    }
    /// Size and SHA-256 of `key`, read to its end in 64 KiB steps.
    async fn digest(&self, key: &StorageKey) -> Result<Digested, StorageError> {
        use tokio::io::AsyncReadExt;
        let mut reader = self.open(key).await?;
        let mut digesting = Digesting::default();
        let mut buffer = vec![0u8; DIGEST_STEP];
        loop {
            let read = reader.read(&mut buffer).await?;
            if read == 0 {
                return Ok(digesting.finish());
            }
            digesting.update(&buffer[..read]);
        }
    }
}

/// One object as a listing reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    /// The key relative to the store's root (a `StorageKey`'s text for objects Quire
    /// named; a staging name for a write in flight or abandoned).
    pub key: String,
    pub size_bytes: u64,
    /// When the store last wrote it, by the store's own clock.
    pub modified_at: time::OffsetDateTime,
}

/// Bytes read per step when digesting a stored object.
pub(crate) const DIGEST_STEP: usize = 64 * 1024;

/// Size and SHA-256 of bytes seen so far.
#[derive(Default)]
pub(crate) struct Digesting {
    hasher: Sha256,
    size: u64,
}

impl Digesting {
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.size += bytes.len() as u64;
        self.hasher.update(bytes);
    }

    pub(crate) fn finish(self) -> Digested {
        Digested {
            size_bytes: self.size,
            sha256: hex::encode(self.hasher.finalize()),
        }
    }
}

/// Size and SHA-256 of stored bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digested {
    pub size_bytes: u64,
    pub sha256: String,
}

#[derive(Default)]
struct Tally {
    digesting: Digesting,
    over_limit: bool,
}

/// Streams `body` into the store while counting and hashing it, refusing more than
/// `limit` bytes. The body is never held whole in memory.
pub async fn put_digested(
    store: &dyn ObjectStore,
    key: &StorageKey,
    body: ByteStream<'_>,
    limit: u64,
) -> Result<Digested, StorageError> {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let counted = {
        let tally = Arc::clone(&tally);
        body.map(move |chunk| {
            let chunk = chunk?;
            let mut tally = tally
                .lock()
                .map_err(|_| std::io::Error::other("tally poisoned"))?;
            if tally.digesting.size + chunk.len() as u64 > limit {
                tally.over_limit = true;
                return Err(std::io::Error::other("body exceeds the size limit"));
            }
            tally.digesting.update(&chunk);
            Ok(chunk)
        })
        .boxed()
    };
    let stored = store.put(key, counted).await;
    let tally = std::mem::take(
        &mut *tally
            .lock()
            .map_err(|_| std::io::Error::other("tally poisoned"))?,
    );
    if tally.over_limit {
        return Err(StorageError::TooLarge { limit });
    }
    stored?;
    Ok(tally.digesting.finish())
}
