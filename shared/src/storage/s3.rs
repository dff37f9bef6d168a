//! The S3 backend: objects in a bucket of an S3-compatible server (AWS S3, SeaweedFS,
//! MinIO, Ceph RGW), through Apache Arrow's `object_store` client, which signs requests
//! (SigV4), streams multipart uploads and retries 5xx, refused connections and timeouts
//! with backoff before a fault reaches Quire.
//!
//! Keys live under `storage.s3.prefix` (when set): a store never lists or deletes outside
//! it, and the keys it reports are relative to it, exactly like the local store's.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore as _, ObjectStoreExt as _, PutPayload, RetryConfig,
    WriteMultipart,
};

use super::{ByteStream, ListedObject, ObjectReader, ObjectStore, StorageError, StorageKey};
use crate::config::S3Settings;

/// Parts of one multipart upload sent at once. With the part being filled and the body
/// read ahead of the first part, an upload holds at most about four parts in memory.
const PARTS_IN_FLIGHT: usize = 2;

/// Keys per delete request of `delete_prefix` (S3's DeleteObjects takes 1,000 at most).
const DELETE_BATCH: usize = 1000;

pub struct S3Store {
    client: AmazonS3,
    /// `prefix/` of every key, or empty.
    root: String,
    part_size: usize,
    /// For `Debug` only: where the store is, never how it signs in.
    endpoint: String,
    bucket: String,
}

/// Names the bucket and prefix, never the credentials (the client's own `Debug` would
/// print its configuration).
impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl S3Store {
    /// A client for `settings` (validated by `Settings`); it connects on first use.
    pub fn new(settings: &S3Settings) -> Result<Self, StorageError> {
        // reqwest's rustls has no provider of its own: ours (ring) must be the default.
        crate::tls::provider();
        let options = ClientOptions::new()
            .with_connect_timeout(Duration::from_millis(settings.connect_timeout_ms))
            .with_timeout(Duration::from_millis(settings.request_timeout_ms))
            .with_allow_http(settings.endpoint.starts_with("http://"));
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: settings.max_retries,
            retry_timeout: Duration::from_millis(settings.retry_timeout_ms),
        };
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&settings.bucket)
            .with_region(&settings.region)
            .with_virtual_hosted_style_request(!settings.path_style)
            .with_client_options(options)
            .with_retry(retry);
        if !settings.endpoint.is_empty() {
            builder = builder.with_endpoint(&settings.endpoint);
        }
        if !settings.access_key_id.is_empty() {
            builder = builder
                .with_access_key_id(&settings.access_key_id)
                .with_secret_access_key(settings.secret_access_key.expose());
        }
        // The builder's errors name a missing or malformed setting, never a credential.
        let client = builder
            .build()
            .map_err(|error| StorageError::Settings(error.to_string()))?;
        let part_size = usize::try_from(settings.part_size_bytes).map_err(|_| {
            StorageError::Settings("storage.s3.part_size_bytes is too large".into())
        })?;
        Ok(Self {
            client,
            root: if settings.prefix.is_empty() {
                String::new()
            } else {
                format!("{}/", settings.prefix)
            },
            part_size,
            endpoint: settings.endpoint.clone(),
            bucket: settings.bucket.clone(),
        })
    }

    fn location(&self, key: &str) -> Path {
        Path::from(format!("{}{key}", self.root))
    }

    /// The listing root: the prefix, or the whole bucket.
    fn root_path(&self) -> Option<Path> {
        (!self.root.is_empty()).then(|| Path::from(self.root.trim_end_matches('/')))
    }

    /// A listed location as a key relative to the prefix.
    fn relative(&self, location: &Path) -> String {
        let full = location.as_ref();
        full.strip_prefix(self.root.as_str())
            .unwrap_or(full)
            .to_owned()
    }

    /// Streams `body` as one multipart upload, `head` first; aborted (no object, no parts
    /// left behind) when the body or a part fails.
    async fn put_multipart(
        &self,
        location: &Path,
        head: Vec<Bytes>,
        mut body: ByteStream<'_>,
    ) -> Result<(), StorageError> {
        let upload = self
            .client
            .put_multipart(location)
            .await
            .map_err(classify)?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, self.part_size);
        for chunk in head {
            writer.put(chunk);
        }
        let failure = loop {
            // Back-pressure: the body is read on only while few parts are in flight.
            if let Err(error) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                break classify(error);
            }
            match body.next().await {
                Some(Ok(chunk)) => writer.put(chunk),
                Some(Err(error)) => break StorageError::Io(error),
                None => return writer.finish().await.map(drop).map_err(classify),
            }
        };
        if let Err(error) = writer.abort().await {
            tracing::warn!(%error, "failed to abort a multipart upload, left to the bucket's lifecycle");
        }
        Err(failure)
    }
}

/// An `object_store` error as Quire's: a missing object, a fault worth another try
/// (what the client gave up on after its own retries: a 5xx or 429, a refused or broken
/// connection, a timeout), or anything else (credentials refused, a malformed answer).
fn classify(error: object_store::Error) -> StorageError {
    match error {
        object_store::Error::NotFound { .. } => StorageError::NotFound,
        error if is_transient(&error) => StorageError::Unavailable(Box::new(error)),
        error => StorageError::Io(std::io::Error::other(error)),
    }
}

/// Walks the error's causes for a transport fault or a server-side status.
fn is_transient(error: &(dyn std::error::Error + 'static)) -> bool {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(http) = error.downcast_ref::<HttpError>() {
            return matches!(
                http.kind(),
                HttpErrorKind::Connect
                    | HttpErrorKind::Request
                    | HttpErrorKind::Timeout
                    | HttpErrorKind::Interrupted
            );
        }
        // The client's request error is private: its status is named only in its text
        // ("… status code: 503 Service Unavailable …").
        if let Some(status) = status_in(&error.to_string()) {
            return status >= 500 || status == 429;
        }
        cause = error.source();
    }
    false
}

/// The HTTP status an `object_store` error text names, if any.
fn status_in(text: &str) -> Option<u16> {
    let (_, after) = text.split_once("status code: ")?;
    after.get(..3)?.parse().ok()
}

#[async_trait]
impl ObjectStore for S3Store {
    /// One request for a body up to the part size; above it a multipart upload, so the
    /// object appears whole at its completion or not at all.
    async fn put(&self, key: &StorageKey, mut body: ByteStream<'_>) -> Result<(), StorageError> {
        let location = self.location(key.as_str());
        let (mut head, mut head_bytes) = (Vec::new(), 0usize);
        while head_bytes <= self.part_size {
            match body.next().await {
                Some(Ok(chunk)) => {
                    head_bytes += chunk.len();
                    head.push(chunk);
                }
                Some(Err(error)) => return Err(error.into()),
                None => {
                    let payload: PutPayload = head.into_iter().collect();
                    return self
                        .client
                        .put(&location, payload)
                        .await
                        .map(drop)
                        .map_err(classify);
                }
            }
        }
        self.put_multipart(&location, head, body).await
    }

    async fn open(&self, key: &StorageKey) -> Result<ObjectReader, StorageError> {
        let got = self
            .client
            .get(&self.location(key.as_str()))
            .await
            .map_err(classify)?;
        let stream = got.into_stream().map_err(|error| match classify(error) {
            StorageError::Io(error) => error,
            other => std::io::Error::other(other),
        });
        Ok(Box::new(tokio_util::io::StreamReader::new(stream)))
    }

    async fn delete(&self, key: &StorageKey) -> Result<(), StorageError> {
        match self.client.delete(&self.location(key.as_str())).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(classify(error)),
        }
    }

    /// Lists the prefix and deletes what it finds in batches, as the listing pages in.
    async fn delete_prefix(&self, prefix: &StorageKey) -> Result<(), StorageError> {
        let under = self.location(prefix.as_str());
        let mut batches = self
            .client
            .list(Some(&under))
            .map_ok(|meta| meta.location)
            .chunks(DELETE_BATCH);
        while let Some(batch) = batches.next().await {
            let batch: Vec<Path> = batch
                .into_iter()
                .collect::<Result<_, _>>()
                .map_err(classify)?;
            let locations = futures_util::stream::iter(batch.into_iter().map(Ok)).boxed();
            let mut deleted = self.client.delete_stream(locations);
            while let Some(result) = deleted.next().await {
                match result {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(error) => return Err(classify(error)),
                }
            }
        }
        Ok(())
    }

    /// S3 lists keys in UTF-8 byte order, the order `list_after` promises; `after` is
    /// pushed down (`start-after`), so a page costs one request per 1,000 keys.
    async fn list_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ListedObject>, StorageError> {
        let root = self.root_path();
        let listing = match after {
            Some(after) => self
                .client
                .list_with_offset(root.as_ref(), &self.location(after)),
            None => self.client.list(root.as_ref()),
        };
        listing
            .take(limit)
            .map(|meta| {
                let meta = meta.map_err(classify)?;
                let modified_at = time::OffsetDateTime::from_unix_timestamp_nanos(
                    i128::from(meta.last_modified.timestamp()) * 1_000_000_000
                        + i128::from(meta.last_modified.timestamp_subsec_nanos()),
                )
                .map_err(|error| StorageError::Io(std::io::Error::other(error)))?;
                Ok(ListedObject {
                    key: self.relative(&meta.location),
                    size_bytes: meta.size,
                    modified_at,
                })
            })
            .try_collect()
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_read_from_the_clients_error_text() {
        assert_eq!(
            status_in(
                "Error performing GET in 1s - Server returned non-2xx status code: 503 Service Unavailable: "
            ),
            Some(503)
        );
        assert_eq!(status_in("connection refused"), None);
        assert_eq!(status_in("status code: 4"), None);
    }
}
