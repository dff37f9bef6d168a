//! The default object store: files under a configured data directory.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
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

async fn write_all(path: &Path, mut body: ByteStream<'_>) -> Result<(), StorageError> {
    let mut file = tokio::fs::File::create(path).await?;
    while let Some(chunk) = body.next().await {
        file.write_all(&chunk?).await?;
    }
    file.flush().await?;
    // Durable before the row that points at it commits.
    file.sync_all().await?;
    Ok(())
}

#[async_trait]
impl ObjectStore for LocalStore {
    async fn put(&self, key: &StorageKey, body: ByteStream<'_>) -> Result<(), StorageError> {
        let path = self.path(key);
        let parent = path
            .parent()
            .ok_or_else(|| std::io::Error::other("storage key has no parent"))?;
        tokio::fs::create_dir_all(parent).await?;
        // Write beside the target and rename: readers never see a half-written object.
        let partial = parent.join(format!(".partial-{}", Uuid::new_v4()));
        match write_all(&partial, body).await {
            Ok(()) => {
                tokio::fs::rename(&partial, &path).await?;
                Ok(())
            }
            Err(error) => {
                let _ = tokio::fs::remove_file(&partial).await;
                Err(error)
            }
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
