//! Storage GC: each kind of orphan, made for real, is collected once past the grace; an
//! object a row names (however old) and an object younger than the grace (an upload or
//! a run between its put and its commit) are never touched. Written against the
//! `ObjectStore` trait, so it runs on whichever store the test context gives; only the
//! staging-file and file-time cases need the local store.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use diesel_async::AsyncConnection;
use futures_util::StreamExt;
use quire_dispatcher::maintenance::storage_gc::{self, Budget, Now, Swept};
use quire_shared::db::assets::{self, AssetKind, NewAsset, Upserted};
use quire_shared::db::documents::{self, IfMatch};
use quire_shared::db::intake::{self, NewIntake, Recorded};
use quire_shared::db::jobs::Fence;
use quire_shared::db::storage_gc::NAMING_COLUMNS;
use quire_shared::db::tenants::TenantWrite;
use quire_shared::db::{DbError, PgPool};
use quire_shared::jobs::{AnalyzeDocument, JobContext};
use quire_shared::storage::{
    ByteStream, ListedObject, ObjectReader, ObjectStore, StorageError, StorageKey,
};
use quire_shared::test_support::{self, eventually};
use time::OffsetDateTime;
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::support::{DEADLINE, World};

const GRACE: Duration = Duration::from_secs(3600);

fn budget(batch_size: usize, batches_per_pass: usize) -> Budget {
    Budget {
        grace: GRACE,
        batch_size,
        batches_per_pass,
    }
}

async fn database_now(pool: &PgPool) -> OffsetDateTime {
    let mut conn = pool.get().await.expect("connection");
    quire_shared::db::storage_gc::database_now(&mut conn)
        .await
        .expect("now")
}

/// A "now" twice the grace ahead of the database clock: every object stored so far is
/// past the grace, on any backend (a store's modified time cannot be set on S3).
async fn past_the_grace(world: &World) -> Now {
    Now::At(database_now(&world.pool).await + 2 * GRACE)
}

fn body(bytes: &'static [u8]) -> ByteStream<'static> {
    futures_util::stream::once(async move { Ok(Bytes::from_static(bytes)) }).boxed()
}

async fn put(store: &dyn ObjectStore, key: &StorageKey, bytes: &'static [u8]) {
    store.put(key, body(bytes)).await.expect("put");
}

/// Every key of the store, through the trait.
async fn keys(store: &dyn ObjectStore) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.list_after(after.as_deref(), 100).await.expect("list");
        let Some(last) = page.last() else {
            return found;
        };
        after = Some(last.key.clone());
        found.extend(page.into_iter().map(|object| object.key));
    }
}

fn source_key(world: &World) -> StorageKey {
    StorageKey::document_source(world.tenant_id, Uuid::now_v7())
}

/// A document as an upload records it, naming the object stored under `key`.
fn intake(world: &World, key: &StorageKey, size: usize) -> NewIntake<AnalyzeDocument> {
    let version_id = Uuid::parse_str(key.as_str().rsplit('/').next().expect("version"))
        .expect("a source key ends in its version id");
    test_support::analysis_intake(
        world.tenant_id,
        version_id,
        key,
        i64::try_from(size).expect("size"),
        world.context.settings.jobs.max_attempts,
    )
}

fn tenant_write(world: &World) -> TenantWrite {
    TenantWrite {
        tenant_id: world.tenant_id,
        generation: None,
    }
}

/// Stores bytes as an upload does and commits the rows that name them.
async fn uploaded(world: &World, store: &dyn ObjectStore) -> (StorageKey, Recorded) {
    let key = source_key(world);
    put(store, &key, b"an uploaded document").await;
    let recorded = record(world, &key).await;
    (key, recorded)
}

/// Commits the rows naming the object already stored under `key`.
async fn record(world: &World, key: &StorageKey) -> Recorded {
    let mut conn = world.pool.get().await.expect("connection");
    intake::record(
        &mut conn,
        &tenant_write(world),
        &[intake(world, key, 20)],
        None,
    )
    .await
    .expect("record")
    .expect("the tenant takes the write")
    .pop()
    .expect("one document")
}

/// The analyze job of `recorded`, claimed as a worker claims it: the run's fence.
async fn claimed(world: &World, recorded: &Recorded) -> Fence {
    let enqueued = quire_shared::db::jobs::Enqueued {
        job_id: recorded.job.id,
        event_id: recorded.job.current_event_id.expect("an event"),
    };
    world
        .claim(enqueued, Duration::from_secs(60))
        .await
        .fence()
        .expect("fence")
}

fn job_context(world: &World, store: &Arc<dyn ObjectStore>) -> JobContext {
    JobContext {
        worker_id: "worker-test".to_owned(),
        pool: world.pool.clone(),
        store: Arc::clone(store),
        settings: Arc::new(world.context.settings.clone()),
        claimed_version: None,
    }
}

/// Makes `key` the current asset of `recorded`'s version, fenced as the run's commit.
async fn make_current(
    world: &World,
    fence: &Fence,
    recorded: &Recorded,
    kind: AssetKind,
    key: &StorageKey,
) -> Upserted {
    let mut conn = world.pool.get().await.expect("connection");
    assets::upsert(
        &mut conn,
        fence,
        &NewAsset {
            tenant_id: world.tenant_id,
            document_id: recorded.document.id,
            version_id: recorded.version.id,
            kind,
            storage_key: key.as_str(),
            size_bytes: 5,
            sha256: &"0".repeat(64),
            content_type: "image/png",
        },
    )
    .await
    .expect("upsert")
}

fn asset_key(world: &World, recorded: &Recorded, kind: AssetKind, fence: &Fence) -> StorageKey {
    StorageKey::attempt_asset(
        world.tenant_id,
        recorded.document.id,
        recorded.version.id,
        kind,
        fence,
    )
}

/// Sets a local object's modified time `age` into the past (what a store's clock says
/// of an object stored then).
fn backdate(root: &std::path::Path, key: &str, age: Duration) {
    let file = std::fs::File::options()
        .write(true)
        .open(root.join(key))
        .expect("open the object");
    file.set_modified(std::time::SystemTime::now() - age)
        .expect("set its modified time");
}

async fn pass(world: &World, store: &Arc<dyn ObjectStore>, budget: Budget, now: Now) -> Swept {
    storage_gc::run_pass(&world.pool, store, budget, now)
        .await
        .expect("pass")
        .expect("no other dispatcher holds the tick")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_orphan_is_collected_and_every_named_object_survives() {
    let world = World::new().await;
    let store = world.context.store();
    let mut named = BTreeSet::new();
    let mut orphans = Vec::new();

    // Named: an upload that committed.
    let (source, recorded) = uploaded(&world, store.as_ref()).await;
    named.insert(source.as_str().to_owned());

    // A crash between store and commit: the object stored, the transaction rolled back.
    let rolled_back = source_key(&world);
    put(store.as_ref(), &rolled_back, b"rolled back").await;
    {
        let mut conn = world.pool.get().await.expect("connection");
        let intakes = [intake(&world, &rolled_back, 11)];
        let tenant = tenant_write(&world);
        let outcome = conn
            .transaction::<(), DbError, _>(async |conn| {
                intake::record(conn, &tenant, &intakes, None)
                    .await?
                    .expect("the tenant takes the write");
                Err(DbError::Build("the process dies before commit".to_owned()))
            })
            .await;
        assert!(outcome.is_err(), "rolled back");
    }
    orphans.push(rolled_back);

    // A client that went away after its bytes were stored: no transaction ever ran.
    let abandoned = source_key(&world);
    put(store.as_ref(), &abandoned, b"client gone").await;
    orphans.push(abandoned);

    // An object whose rows were deleted (a purge that removed the rows but whose delete
    // of the object never happened).
    let (unrowed, gone) = uploaded(&world, store.as_ref()).await;
    {
        let mut conn = world.pool.get().await.expect("connection");
        documents::trash_document(&mut conn, world.tenant_id, gone.document.id, &IfMatch::Any)
            .await
            .expect("trash")
            .expect("trashed");
        assert!(
            documents::delete_trashed_document(&mut conn, world.tenant_id, gone.document.id)
                .await
                .expect("delete rows")
        );
    }
    orphans.push(unrowed);

    // A run's assets: the thumbnail it made current survives; the text it stored before
    // it lost its job (cancelled while it ran) is named by nothing.
    let fence = claimed(&world, &recorded).await;
    let context = job_context(&world, &store);
    let thumbnail = asset_key(&world, &recorded, AssetKind::Thumbnail, &fence);
    context
        .put_fenced(&fence, &thumbnail, body(b"thumb"))
        .await
        .expect("fenced put");
    assert!(matches!(
        make_current(&world, &fence, &recorded, AssetKind::Thumbnail, &thumbnail).await,
        Upserted::Current { .. }
    ));
    named.insert(thumbnail.as_str().to_owned());
    let text = asset_key(&world, &recorded, AssetKind::Text, &fence);
    context
        .put_fenced(&fence, &text, body(b"text"))
        .await
        .expect("fenced put");
    world
        .execute(
            "UPDATE processing_jobs SET status = 'CANCELLED', finished_at = now() WHERE id = $1",
            fence.job_id,
        )
        .await;
    assert_eq!(
        make_current(&world, &fence, &recorded, AssetKind::Text, &text).await,
        Upserted::Stale,
        "the fenced-out run's commit is refused"
    );
    orphans.push(text);

    // A staging file of a process killed mid-write (the local store's own).
    let mut partial = None;
    if let Some(root) = world.context.local_store_root() {
        let staged = format!(".partial/.partial-{}", Uuid::new_v4());
        std::fs::create_dir_all(root.join(".partial")).expect("staging folder");
        std::fs::write(root.join(&staged), b"half an upl").expect("staging file");
        partial = Some(staged);
    }

    let mut expected: BTreeSet<String> = named.clone();
    expected.extend(orphans.iter().map(|key| key.as_str().to_owned()));
    expected.extend(partial.clone());
    assert_eq!(keys(store.as_ref()).await, expected, "every object listed");

    let swept = pass(
        &world,
        &store,
        budget(100, 10),
        past_the_grace(&world).await,
    )
    .await;

    assert_eq!(
        keys(store.as_ref()).await,
        named,
        "only the named objects are left"
    );
    assert_eq!(
        swept.collected,
        orphans.len() + usize::from(partial.is_some())
    );
    let bytes: u64 =
        [11u64, 11, 20, 4].iter().sum::<u64>() + if partial.is_some() { 11 } else { 0 };
    assert_eq!(swept.collected_bytes, bytes);
    assert_eq!(swept.errors, 0);
    assert!(swept.swept, "the pass went through the whole store");

    // Nothing more to collect: the next pass deletes nothing.
    let again = pass(
        &world,
        &store,
        budget(100, 10),
        past_the_grace(&world).await,
    )
    .await;
    assert_eq!((again.collected, again.listed), (0, named.len()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_younger_than_the_grace_is_never_touched_and_is_safe_once_named() {
    let world = World::new().await;
    let store = world.context.store();

    // An upload between its put and its commit: stored, no row yet.
    let stored = source_key(&world);
    put(store.as_ref(), &stored, b"committing soon").await;
    // An upload whose body is still arriving.
    let streaming = source_key(&world);
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let streamed = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    })
    .boxed();
    let writing = {
        let store = Arc::clone(&store);
        let key = streaming.clone();
        tokio::spawn(async move { store.put(&key, streamed).await })
    };
    sender
        .send(Ok(Bytes::from_static(b"first half ")))
        .await
        .expect("send");
    // On the local store its staging file exists now; wait for it (and old orphans
    // there, by file time, are collected in the same pass).
    let mut old_orphan = None;
    if let Some(root) = world.context.local_store_root() {
        let root = root.to_path_buf();
        eventually(DEADLINE, "the upload's staging file", || {
            let root = root.clone();
            async move {
                std::fs::read_dir(root.join(".partial"))
                    .ok()
                    .and_then(|mut entries| entries.next())
                    .map(drop)
            }
        })
        .await;
        let orphan = source_key(&world);
        put(store.as_ref(), &orphan, b"old orphan").await;
        backdate(&root, orphan.as_str(), 2 * GRACE);
        old_orphan = Some(orphan);
    }

    let swept = pass(&world, &store, budget(100, 10), Now::Database).await;

    let left = keys(store.as_ref()).await;
    assert!(
        left.contains(stored.as_str()),
        "a stored, uncommitted upload"
    );
    assert_eq!(swept.collected, usize::from(old_orphan.is_some()));
    if let Some(orphan) = &old_orphan {
        assert!(
            !left.contains(orphan.as_str()),
            "the old orphan beside them"
        );
        assert!(
            left.iter().any(|key| key.starts_with(".partial/")),
            "the staging file of the upload in flight"
        );
    }

    // Both uploads commit their rows; past the grace, named objects stay.
    sender
        .send(Ok(Bytes::from_static(b"second half")))
        .await
        .expect("send");
    drop(sender);
    writing.await.expect("task").expect("the upload lands");
    record(&world, &stored).await;
    record(&world, &streaming).await;

    let later = pass(
        &world,
        &store,
        budget(100, 10),
        past_the_grace(&world).await,
    )
    .await;

    assert_eq!(later.collected, 0);
    let expected: BTreeSet<String> = [stored.as_str(), streaming.as_str()]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(keys(store.as_ref()).await, expected);
}

/// The real store, committing the rows that name `late` (an upload's commit) when the
/// GC deletes `first`: between the GC's check of the page and its delete of `late`.
#[derive(Debug)]
struct CommitsDuringDelete {
    store: Arc<dyn ObjectStore>,
    first: StorageKey,
    commit: tokio::sync::mpsc::UnboundedSender<tokio::sync::oneshot::Sender<()>>,
}

#[async_trait]
impl ObjectStore for CommitsDuringDelete {
    async fn put(&self, key: &StorageKey, body: ByteStream<'_>) -> Result<(), StorageError> {
        self.store.put(key, body).await
    }
    async fn open(&self, key: &StorageKey) -> Result<ObjectReader, StorageError> {
        self.store.open(key).await
    }
    async fn delete(&self, key: &StorageKey) -> Result<(), StorageError> {
        if key == &self.first {
            let (done, committed) = tokio::sync::oneshot::channel();
            self.commit.send(done).expect("the committer listens");
            committed.await.expect("committed");
        }
        self.store.delete(key).await
    }
    async fn delete_prefix(&self, prefix: &StorageKey) -> Result<(), StorageError> {
        self.store.delete_prefix(prefix).await
    }
    async fn list_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ListedObject>, StorageError> {
        self.store.list_after(after, limit).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_committed_between_the_check_and_the_delete_keeps_its_object() {
    let world = World::new().await;
    let store = world.context.store();
    // Two old unnamed objects of one page, in key order: the first collected, the
    // second's row commits while the GC deletes the first.
    let mut pair = [source_key(&world), source_key(&world)];
    pair.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let [first, late] = pair;
    put(store.as_ref(), &first, b"orphan").await;
    put(store.as_ref(), &late, b"committing late").await;
    let (commit, mut requests) = tokio::sync::mpsc::unbounded_channel();
    let committer = {
        let pool = world.pool.clone();
        let rows = intake(&world, &late, 15);
        let tenant = tenant_write(&world);
        tokio::spawn(async move {
            let done: tokio::sync::oneshot::Sender<()> =
                requests.recv().await.expect("the gc deletes the first");
            let mut conn = pool.get().await.expect("connection");
            intake::record(&mut conn, &tenant, &[rows], None)
                .await
                .expect("record")
                .expect("the tenant takes the write");
            done.send(()).expect("the gc waits");
        })
    };
    let hooked: Arc<dyn ObjectStore> = Arc::new(CommitsDuringDelete {
        store: Arc::clone(&store),
        first: first.clone(),
        commit,
    });

    let swept = pass(
        &world,
        &hooked,
        budget(100, 1),
        past_the_grace(&world).await,
    )
    .await;

    committer.await.expect("committer");
    assert_eq!((swept.collected, swept.named_late), (1, 1));
    let left = keys(store.as_ref()).await;
    assert_eq!(left, BTreeSet::from([late.as_str().to_owned()]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_bounded_per_batch_covers_the_whole_store_over_several_passes() {
    let world = World::new().await;
    let store = world.context.store();
    let mut named = BTreeSet::new();
    for _ in 0..2 {
        let (key, _) = uploaded(&world, store.as_ref()).await;
        named.insert(key.as_str().to_owned());
    }
    for _ in 0..7 {
        put(store.as_ref(), &source_key(&world), b"orphan").await;
    }
    let now = past_the_grace(&world).await;

    // Two objects per pass: nine objects take five passes, the last one short.
    let mut passes = Vec::new();
    loop {
        let swept = pass(&world, &store, budget(2, 1), now).await;
        assert!(swept.listed <= 2, "a pass stays within its budget");
        let done = swept.swept;
        passes.push(swept);
        if done {
            break;
        }
        assert!(passes.len() < 10, "the sweep ends");
    }
    assert_eq!(passes.len(), 5);
    assert_eq!(passes.iter().map(|swept| swept.listed).sum::<usize>(), 9);
    assert_eq!(passes.iter().map(|swept| swept.collected).sum::<usize>(), 7);
    assert_eq!(keys(store.as_ref()).await, named);

    // The next sweep starts over from the first key.
    let next = pass(&world, &store, budget(2, 1), now).await;
    assert_eq!((next.listed, next.collected, next.swept), (2, 0, false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dispatchers_racing_a_pass_collect_each_object_once() {
    let world = World::new().await;
    let store = world.context.store();
    const ORPHANS: usize = 30;
    for _ in 0..ORPHANS {
        put(store.as_ref(), &source_key(&world), b"orphan").await;
    }
    let now = past_the_grace(&world).await;
    const DISPATCHERS: usize = 4;
    let barrier = Arc::new(Barrier::new(DISPATCHERS));
    let mut racing = Vec::new();
    for _ in 0..DISPATCHERS {
        // Each its own pool and its own view of the store, as separate processes.
        let pool = world.context.pool();
        let store = world.context.store();
        let barrier = Arc::clone(&barrier);
        racing.push(tokio::spawn(async move {
            barrier.wait().await;
            storage_gc::run_pass(&pool, &store, budget(5, 100), now)
                .await
                .expect("pass")
        }));
    }
    let mut collected = 0;
    for task in racing {
        if let Some(swept) = task.await.expect("task") {
            collected += swept.collected;
        }
    }
    assert_eq!(collected, ORPHANS, "each object collected exactly once");
    assert!(keys(store.as_ref()).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_dispatcher_collects_orphans_on_its_schedule() {
    let world = World::new().await;
    let store = world.context.store();
    let (named, _) = uploaded(&world, store.as_ref()).await;
    let orphan = source_key(&world);
    put(store.as_ref(), &orphan, b"orphan").await;
    // No grace (the settings refuse it; a test may): the orphan is old at once.
    world.start_dispatcher_with(|settings| {
        settings.storage_gc.grace_seconds = 0;
        settings.schedules.storage_gc.enabled = true;
        settings.schedules.storage_gc.every_seconds = 1;
    });

    eventually(DEADLINE, "the orphan collected", || {
        let store = Arc::clone(&store);
        let orphan = orphan.as_str().to_owned();
        async move { (!keys(store.as_ref()).await.contains(&orphan)).then_some(()) }
    })
    .await;

    assert_eq!(
        keys(store.as_ref()).await,
        BTreeSet::from([named.as_str().to_owned()])
    );
}

#[derive(diesel::QueryableByName, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Column {
    #[diesel(sql_type = diesel::sql_types::Text)]
    table_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    column_name: String,
}

/// A table that starts storing object keys must be checked by the GC, or the GC would
/// delete the objects it names: every text column of the schema named like a key is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_column_that_names_an_object_is_checked() {
    use diesel_async::RunQueryDsl;
    let world = World::new().await;
    let mut conn = world.pool.get().await.expect("connection");
    // idempotency_keys.key is a client's Idempotency-Key: it names no object.
    let mut columns: Vec<Column> = diesel::sql_query(
        "SELECT table_name::text, column_name::text FROM information_schema.columns \
         WHERE table_schema = 'public' AND data_type IN ('text', 'character varying') \
           AND (column_name LIKE '%key%' OR column_name LIKE '%object%' \
                OR column_name LIKE '%path%') \
           AND table_name NOT IN ('__diesel_schema_migrations', 'storage_gc_cursor') \
           AND (table_name, column_name) <> ('idempotency_keys', 'key')",
    )
    .load(&mut conn)
    .await
    .expect("columns");
    columns.sort();
    let mut checked: Vec<Column> = NAMING_COLUMNS
        .iter()
        .map(|(table, column)| Column {
            table_name: (*table).to_owned(),
            column_name: (*column).to_owned(),
        })
        .collect();
    checked.sort();
    assert_eq!(columns, checked);
}
