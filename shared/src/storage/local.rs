//! The default object store: files under a configured data directory.

use std::path::{Path, PathBuf};

use std::io::{Read, Write};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use uuid::Uuid;

use super::{
    ByteStream, DIGEST_STEP, Digested, Digesting, ObjectReader, ObjectStore, StorageError,
    StorageKey,
};

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

/// Directory entries made durable: a file's data is durable after its own `fsync`, but
/// the name that leads to it (a rename, a new directory) only after an `fsync` of the
/// directory holding that name. Without it a power loss after the upload's row committed
/// could leave the row naming an object whose name never reached the disk. Every rename
/// and directory creation of the store goes through here.
mod durable {
    use std::path::{Path, PathBuf};

    /// Fsyncs the directory that holds `path`'s name.
    fn sync_parent(path: &Path) -> std::io::Result<()> {
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        #[cfg(test)]
        tests::record(parent);
        std::fs::File::open(parent)?.sync_all()
    }

    /// `create_dir_all`, then each directory it created made durable in its parent,
    /// top down (an existing directory is left alone). Returns the created directories.
    pub(super) fn create_dir_all(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut missing = Vec::new();
        let mut cursor = Some(dir);
        while let Some(path) = cursor.filter(|path| !path.as_os_str().is_empty()) {
            if path.is_dir() {
                break;
            }
            missing.push(path.to_path_buf());
            cursor = path.parent();
        }
        std::fs::create_dir_all(dir)?;
        missing.reverse();
        for created in &missing {
            sync_parent(created)?;
        }
        Ok(missing)
    }

    /// `rename`, then the new name made durable in its directory.
    pub(super) fn rename(from: &Path, to: &Path) -> std::io::Result<()> {
        std::fs::rename(from, to)?;
        sync_parent(to)
    }

    #[cfg(test)]
    pub(super) mod tests {
        use std::path::{Path, PathBuf};
        use std::sync::Mutex;

        /// Every directory fsynced, for the tests (each filters its own temporary root).
        static SYNCED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

        pub(super) fn record(dir: &Path) {
            SYNCED.lock().expect("synced").push(dir.to_path_buf());
        }

        pub(in crate::storage) fn synced_under(root: &Path) -> Vec<PathBuf> {
            SYNCED
                .lock()
                .expect("synced")
                .iter()
                .filter(|dir| dir.starts_with(root))
                .cloned()
                .collect()
        }
    }
}

/// What the receiving side hands the file writer: a chunk, or the end of a complete body.
enum Piece {
    Chunk(Bytes),
    End,
}

/// Where objects are written before they are complete: outside every key's folder, so a
/// tenant's wipe (`delete_prefix`) never pulls a file from under a write in flight (the
/// upload then stores its object after the wipe, finds its tenant refusing the write,
/// and removes the object itself). On the same file system, so the rename is atomic.
const PARTIAL_DIR: &str = ".partial";

/// Writes a body to `partial`, makes it durable and renames it to `path`, all in ONE
/// blocking task fed by a channel. (tokio's file API runs every call — create, each
/// write, flush, sync, rename — as a blocking task of its own: the profile of uploads
/// showed those thread hand-offs.) Closed without `End`, it removes the partial file.
fn write_file(
    partial: &Path,
    path: &Path,
    pieces: &mut tokio::sync::mpsc::Receiver<Piece>,
) -> std::io::Result<()> {
    if let Some(staging) = partial.parent() {
        durable::create_dir_all(staging)?;
    }
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
    let written = written.and_then(|()| {
        // The key's folder is made now: a wipe may have removed it meanwhile.
        let parent = path
            .parent()
            .ok_or_else(|| std::io::Error::other("storage key has no parent"))?;
        durable::create_dir_all(parent).map(drop)
    });
    match written {
        // Readers never see a half-written object.
        Ok(()) => durable::rename(partial, path),
        Err(error) => {
            let _ = std::fs::remove_file(partial);
            Err(error)
        }
    }
}

/// The largest object [`LocalStore::digest`] reads on the async thread: one read step.
/// From the page cache, with the CPU's SHA-256 instructions (sha2 detects them at run
/// time), that is some 40 µs, within the 100 µs a task may run between two awaits; a
/// cold read or a CPU without them costs a few times that, still less than a blocked
/// slot waiting for a blocking thread to wake.
const INLINE_DIGEST_MAX: u64 = DIGEST_STEP as u64;

fn digest_file(path: &Path) -> Result<Digested, StorageError> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(StorageError::NotFound);
        }
        Err(error) => return Err(error.into()),
    };
    let mut digesting = Digesting::default();
    let mut buffer = vec![0u8; DIGEST_STEP];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            return Ok(digesting.finish());
        }
        digesting.update(&buffer[..read]);
    }
}

/// The files under `root` in key order after `after`, at most `limit`. Entries are walked
/// sorted by name with a directory's name followed by `/`, which is exactly the order of
/// the keys under them; a directory wholly before `after` is skipped unread.
fn list_files(
    root: &Path,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<super::ListedObject>, StorageError> {
    fn walk(
        dir: &Path,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        found: &mut Vec<super::ListedObject>,
    ) -> std::io::Result<()> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue; // not a name Quire writes
            };
            let is_dir = entry.file_type()?.is_dir();
            let key = if is_dir {
                format!("{prefix}{name}/")
            } else {
                format!("{prefix}{name}")
            };
            entries.push((key, is_dir, entry.path()));
        }
        entries.sort();
        for (key, is_dir, path) in entries {
            if found.len() >= limit {
                return Ok(());
            }
            if is_dir {
                let wholly_before =
                    after.is_some_and(|after| after > key.as_str() && !after.starts_with(&key));
                if !wholly_before {
                    walk(&path, &key, after, limit, found)?;
                }
            } else if after.is_none_or(|after| key.as_str() > after) {
                let metadata = match std::fs::metadata(&path) {
                    Ok(metadata) => metadata,
                    // Removed since the directory was read.
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(error) => return Err(error),
                };
                found.push(super::ListedObject {
                    key,
                    size_bytes: metadata.len(),
                    modified_at: metadata.modified()?.into(),
                });
            }
        }
        Ok(())
    }
    let mut found = Vec::new();
    match walk(root, "", after, limit, &mut found) {
        Ok(()) => Ok(found),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && found.is_empty() => {
            Ok(found) // nothing stored yet
        }
        Err(error) => Err(error.into()),
    }
}

#[async_trait]
impl ObjectStore for LocalStore {
    async fn put(&self, key: &StorageKey, mut body: ByteStream<'_>) -> Result<(), StorageError> {
        let path = self.path(key);
        let partial = self
            .root
            .join(PARTIAL_DIR)
            .join(format!(".partial-{}", Uuid::new_v4()));
        // A few chunks in flight: back-pressure on the sender, no body held in memory.
        let (pieces, mut received) = tokio::sync::mpsc::channel(4);
        let writer =
            tokio::task::spawn_blocking(move || write_file(&partial, &path, &mut received));
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

    /// The root exists as a folder, or can be made one (the first write makes it too): a
    /// listing would walk the tree down to its first file.
    async fn probe(&self) -> Result<(), StorageError> {
        tokio::fs::create_dir_all(&self.root).await?;
        Ok(())
    }

    /// In one blocking task: open, read and hash (the streaming default would hop to a
    /// blocking thread for the open and for every read). An object of at most
    /// [`INLINE_DIGEST_MAX`] bytes (one read) is read and hashed on the calling thread
    /// instead: that takes less than the hop to an idle blocking thread and back
    /// (docs/benchmarks.md, "Where commit → finish goes").
    async fn digest(&self, key: &StorageKey) -> Result<Digested, StorageError> {
        let path = self.path(key);
        if std::fs::metadata(&path).is_ok_and(|meta| meta.len() <= INLINE_DIGEST_MAX) {
            return digest_file(&path);
        }
        tokio::task::spawn_blocking(move || digest_file(&path))
            .await
            .map_err(|error| std::io::Error::other(format!("digest task stopped: {error}")))?
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

    async fn list_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<super::ListedObject>, StorageError> {
        let root = self.root.clone();
        let after = after.map(str::to_owned);
        tokio::task::spawn_blocking(move || list_files(&root, after.as_deref(), limit))
            .await
            .map_err(|error| std::io::Error::other(format!("listing task stopped: {error}")))?
    }
}

#[cfg(test)]
mod tests {
    use futures_util::stream;

    use super::*;
    use crate::storage::put_digested;

    /// The store without its own `digest`: the trait's streaming default.
    #[derive(Debug)]
    struct Streaming(LocalStore);

    #[async_trait]
    impl ObjectStore for Streaming {
        async fn put(&self, key: &StorageKey, body: ByteStream<'_>) -> Result<(), StorageError> {
            self.0.put(key, body).await
        }
        async fn open(&self, key: &StorageKey) -> Result<ObjectReader, StorageError> {
            self.0.open(key).await
        }
        async fn delete(&self, key: &StorageKey) -> Result<(), StorageError> {
            self.0.delete(key).await
        }
        async fn delete_prefix(&self, prefix: &StorageKey) -> Result<(), StorageError> {
            self.0.delete_prefix(prefix).await
        }
        async fn list_after(
            &self,
            after: Option<&str>,
            limit: usize,
        ) -> Result<Vec<crate::storage::ListedObject>, StorageError> {
            self.0.list_after(after, limit).await
        }
    }

    /// The readiness probe makes a missing root (as the first write would) and fails
    /// where none can be made: here, under a file.
    #[tokio::test]
    async fn the_probe_makes_the_root_or_says_it_cannot() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("documents");
        LocalStore::new(&root)
            .probe()
            .await
            .expect("a root it can make");
        assert!(root.is_dir());
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"not a folder").expect("write");
        assert!(
            LocalStore::new(file.join("documents"))
                .probe()
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn listing_pages_through_every_file_in_key_order() {
        let root = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(root.path());
        assert!(store.list_after(None, 10).await.expect("empty").is_empty());
        // Names where a directory walk and key order disagree ('-' sorts before '/').
        let names = ["a/b", "a-c", "a/a/z", "b", ".partial/.partial-1", "a0"];
        for name in names {
            let path = root.path().join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, name).expect("write");
        }
        let mut expected: Vec<&str> = names.to_vec();
        expected.sort();
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = store.list_after(after.as_deref(), 2).await.expect("page");
            assert!(page.len() <= 2);
            let Some(last) = page.last() else { break };
            after = Some(last.key.clone());
            for object in &page {
                assert_eq!(object.size_bytes, object.key.len() as u64);
            }
            seen.extend(page.into_iter().map(|object| object.key));
        }
        assert_eq!(seen, expected);
    }

    fn chunks(parts: Vec<Result<Bytes, std::io::Error>>) -> ByteStream<'static> {
        stream::iter(parts).boxed()
    }

    fn files_under(root: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).expect("read dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    pending.push(path);
                } else {
                    found.push(path);
                }
            }
        }
        found
    }

    #[tokio::test]
    async fn a_stored_object_reads_back_whole_and_digests_alike_both_ways() {
        let root = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(root.path());
        let key = StorageKey::document_source(Uuid::now_v7(), Uuid::now_v7());
        // Three chunks, the last one crossing a digest step.
        let parts: Vec<Bytes> = vec![
            Bytes::from(vec![1u8; 1000]),
            Bytes::from(vec![2u8; DIGEST_STEP]),
            Bytes::from(vec![3u8; 10]),
        ];
        let body = chunks(parts.iter().cloned().map(Ok).collect());
        let stored = put_digested(&store, &key, body, u64::MAX)
            .await
            .expect("put");

        assert_eq!(stored.size_bytes, 1000 + DIGEST_STEP as u64 + 10);
        assert_eq!(store.digest(&key).await.expect("digest"), stored);
        let streaming = Streaming(store.clone());
        assert_eq!(streaming.digest(&key).await.expect("digest"), stored);
        let on_disk = std::fs::read(root.path().join(key.as_str())).expect("read");
        assert_eq!(on_disk, parts.concat());
        assert_eq!(files_under(root.path()).len(), 1, "no partial file left");
    }

    #[test]
    fn new_directories_are_synced_in_their_parents_top_down_and_old_ones_left_alone() {
        let root = tempfile::tempdir().expect("temp dir");
        let root = root.path();
        std::fs::create_dir(root.join("a")).expect("an existing directory");

        let created = durable::create_dir_all(&root.join("a/b/c")).expect("create");

        assert_eq!(created, [root.join("a/b"), root.join("a/b/c")]);
        assert!(root.join("a/b/c").is_dir());
        assert_eq!(
            durable::tests::synced_under(root),
            [root.join("a"), root.join("a/b")],
            "the parent of each new directory, and no other"
        );
        assert!(
            durable::create_dir_all(&root.join("a/b/c"))
                .expect("again")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_put_syncs_every_directory_it_created_and_the_one_it_renamed_into() {
        let root = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(root.path().join("data"));
        let key = StorageKey::document_source(Uuid::now_v7(), Uuid::now_v7());

        store
            .put(&key, chunks(vec![Ok(Bytes::from_static(b"bytes"))]))
            .await
            .expect("put");

        let object = root.path().join("data").join(key.as_str());
        let folder = object.parent().expect("folder").to_path_buf();
        let synced = durable::tests::synced_under(root.path());
        // First the staging folder `data/.partial` (new, with `data`): each synced in its
        // parent. Then, at the rename, `data/tenants/{t}/sources/{bucket}` (all new):
        // each synced in its parent; the object's own folder again after the rename.
        let data = root.path().join("data");
        let mut expected = vec![root.path().to_path_buf(), data.clone()];
        let mut key_folders: Vec<PathBuf> = folder
            .ancestors()
            .skip(1)
            .take_while(|dir| dir.starts_with(&data))
            .map(Path::to_path_buf)
            .collect();
        key_folders.reverse();
        expected.extend(key_folders);
        expected.push(folder);
        assert_eq!(synced, expected);
    }

    #[tokio::test]
    async fn a_body_that_fails_midway_leaves_nothing_behind() {
        let root = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(root.path());
        let key = StorageKey::document_source(Uuid::now_v7(), Uuid::now_v7());
        let body = chunks(vec![
            Ok(Bytes::from(vec![1u8; 4096])),
            Err(std::io::Error::other("client went away")),
        ]);

        assert!(store.put(&key, body).await.is_err());

        assert!(
            files_under(root.path()).is_empty(),
            "no object, no partial file"
        );
        assert!(matches!(
            store.digest(&key).await,
            Err(StorageError::NotFound)
        ));
    }

    /// A tenant's wipe while one of its objects is being written (an upload in flight)
    /// takes nothing from under the write: the object lands whole after it, where the
    /// upload that wrote it can remove it again.
    #[tokio::test]
    async fn an_object_written_across_its_prefix_deletion_still_lands_whole() {
        let root = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(root.path());
        let tenant = Uuid::now_v7();
        let earlier = StorageKey::document_source(tenant, Uuid::now_v7());
        store
            .put(
                &earlier,
                chunks(vec![Ok(Bytes::from_static(b"stored before"))]),
            )
            .await
            .expect("put");
        let key = StorageKey::document_source(tenant, Uuid::now_v7());
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
        let body = stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|chunk| (chunk, receiver))
        })
        .boxed();
        let writing = {
            let store = store.clone();
            let key = key.clone();
            tokio::spawn(async move { store.put(&key, body).await })
        };
        sender
            .send(Ok(Bytes::from_static(b"half ")))
            .await
            .expect("send");
        sender
            .send(Ok(Bytes::from_static(b"and ")))
            .await
            .expect("send");
        // Wait (with a deadline) until the writer has its partial file open.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !files_under(root.path()).iter().any(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(".partial-"))
        }) {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never started"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }

        store
            .delete_prefix(&StorageKey::tenant_prefix(tenant))
            .await
            .expect("wipe");
        sender
            .send(Ok(Bytes::from_static(b"whole")))
            .await
            .expect("send");
        drop(sender);

        writing.await.expect("task").expect("the write lands");
        let on_disk = std::fs::read(root.path().join(key.as_str())).expect("read");
        assert_eq!(on_disk, b"half and whole");
        assert!(matches!(
            store.digest(&earlier).await,
            Err(StorageError::NotFound)
        ));
        assert_eq!(files_under(root.path()).len(), 1, "no partial file left");
    }
}
