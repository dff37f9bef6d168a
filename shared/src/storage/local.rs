//! The default object store: files under a configured data directory.

use std::path::{Path, PathBuf};

use std::io::Write;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use uuid::Uuid;

use super::{ByteStream, ObjectReader, ObjectStore, StorageError, StorageKey};

#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn path(&self, key: &StorageKey) -> PathBuf {
        self.root.join(key.as_str())
    }
}

/// What the receiving side hands the file writer: a chunk, or the end of a complete body.
enum Piece {
    Chunk(Bytes),
    End,
}

/// Writes a body to `partial`, makes it durable and renames it to `path`, all in ONE
/// blocking task fed by a channel. (tokio's file API runs every call — create, each
/// write, flush, sync, rename — as a blocking task of its own: the profile of uploads
/// showed those thread hand-offs.) Closed without `End`, it removes the partial file.
fn write_file(
    parent: &Path,
    partial: &Path,
    path: &Path,
    pieces: &mut tokio::sync::mpsc::Receiver<Piece>,
) -> std::io::Result<()> {
    std::fs::create_dir_all(parent)?;
    let mut file = std::fs::File::create(partial)?;
    let written = (|| {
        loop {
            match pieces.blocking_recv() {
                Some(Piece::Chunk(chunk)) => file.write_all(&chunk)?,
                // Durable before the row that points at it commits.
                Some(Piece::End) => return file.sync_all(),
                None => return Err(std::io::Error::other("the body ended early")),
            }
        }
    })();
    drop(file);
    match written {
        // Readers never see a half-written object.
        Ok(()) => std::fs::rename(partial, path),
        Err(error) => {
            let _ = std::fs::remove_file(partial);
            Err(error)
        }
    }
}

#[async_trait]
impl ObjectStore for LocalStore {
    async fn put(&self, key: &StorageKey, mut body: ByteStream<'_>) -> Result<(), StorageError> {
        let path = self.path(key);
        let parent = path
            .parent()
            .ok_or_else(|| std::io::Error::other("storage key has no parent"))?
            .to_path_buf();
        let partial = parent.join(format!(".partial-{}", Uuid::new_v4()));
        // A few chunks in flight: back-pressure on the sender, no body held in memory.
        let (pieces, mut received) = tokio::sync::mpsc::channel(4);
        let writer = tokio::task::spawn_blocking(move || {
            write_file(&parent, &partial, &path, &mut received)
        });
        let mut failure = None;
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(chunk) => {
                    if pieces.send(Piece::Chunk(chunk)).await.is_err() {
                        break; // the writer failed; its error is below
                    }
                }
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        if failure.is_none() {
            let _ = pieces.send(Piece::End).await;
        }
        drop(pieces);
        let written = writer
            .await
            .map_err(|error| std::io::Error::other(format!("file writer stopped: {error}")))?;
        match failure {
            Some(error) => Err(error.into()),
            None => Ok(written?),
        }
    }

    async fn open(&self, key: &StorageKey) -> Result<ObjectReader, StorageError> {
        match tokio::fs::File::open(self.path(key)).await {
            Ok(file) => Ok(Box::new(file)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Err(StorageError::NotFound)
            }
            Err(error) => Err(error.into()),
        }
    }

    async fn delete(&self, key: &StorageKey) -> Result<(), StorageError> {
        match tokio::fs::remove_file(self.path(key)).await {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    async fn delete_prefix(&self, prefix: &StorageKey) -> Result<(), StorageError> {
        match tokio::fs::remove_dir_all(self.path(prefix)).await {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}
