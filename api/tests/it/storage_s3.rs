//! The S3 backend against a real S3 server: the suite's shared SeaweedFS (a prefix of its
//! own per test) and, for the faults, a private one this test stops and restarts.

use bytes::Bytes;
use futures_util::StreamExt;
use quire_shared::storage::{
    ByteStream, ObjectStore, S3Store, StorageError, StorageKey, put_digested,
};
use quire_shared::test_support::{SeaweedServer, shared_s3_settings, test_settings};
use tokio::io::AsyncReadExt;
use uuid::Uuid;

const MIB: usize = 1024 * 1024;

fn unique_prefix() -> String {
    format!("storage-test-{}", Uuid::new_v4().simple())
}

fn body(chunks: Vec<Bytes>) -> ByteStream<'static> {
    futures_util::stream::iter(chunks.into_iter().map(Ok)).boxed()
}

/// `size` bytes in 64 KiB chunks, every byte depending on its offset.
fn patterned(size: usize) -> Vec<Bytes> {
    let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    bytes
        .chunks(64 * 1024)
        .map(Bytes::copy_from_slice)
        .collect()
}

async fn read_all(store: &dyn ObjectStore, key: &StorageKey) -> Vec<u8> {
    let mut reader = store.open(key).await.expect("open");
    let mut read = Vec::new();
    reader.read_to_end(&mut read).await.expect("read");
    read
}

#[tokio::test]
async fn objects_round_trip_through_seaweedfs_in_one_request_and_in_many_parts() {
    let mut settings = shared_s3_settings(&unique_prefix());
    settings.part_size_bytes = 5 * MIB as u64;
    let store = S3Store::new(&settings).expect("s3 store");
    let tenant = Uuid::now_v7();
    let small = StorageKey::document_source(tenant, Uuid::now_v7());
    let large = StorageKey::document_source(tenant, Uuid::now_v7());

    let small_digest = put_digested(&store, &small, body(patterned(1000)), u64::MAX)
        .await
        .expect("put a small object");
    // Three parts of 5 MiB, 5 MiB and 2 MiB.
    let large_digest = put_digested(&store, &large, body(patterned(12 * MIB)), u64::MAX)
        .await
        .expect("put a large object");

    assert_eq!(small_digest.size_bytes, 1000);
    assert_eq!(large_digest.size_bytes, 12 * MIB as u64);
    assert_eq!(store.digest(&small).await.expect("digest"), small_digest);
    assert_eq!(store.digest(&large).await.expect("digest"), large_digest);
    assert_eq!(read_all(&store, &large).await, patterned(12 * MIB).concat());
    assert!(matches!(
        store
            .open(&StorageKey::document_source(tenant, Uuid::now_v7()))
            .await,
        Err(StorageError::NotFound)
    ));

    store.delete(&small).await.expect("delete");
    store
        .delete(&small)
        .await
        .expect("a missing object is no error");
    assert!(matches!(
        store.digest(&small).await,
        Err(StorageError::NotFound)
    ));
    store
        .delete_prefix(&StorageKey::tenant_prefix(tenant))
        .await
        .expect("wipe");
    assert!(matches!(
        store.digest(&large).await,
        Err(StorageError::NotFound)
    ));
}

#[tokio::test]
async fn listing_pages_through_the_prefix_in_key_order_and_wiping_stays_inside_the_tenant() {
    let prefix = unique_prefix();
    let store = S3Store::new(&shared_s3_settings(&prefix)).expect("s3 store");
    // A neighbour under another prefix of the same bucket is never listed nor deleted.
    let neighbour = S3Store::new(&shared_s3_settings(&unique_prefix())).expect("s3 store");
    let (wiped, kept) = (Uuid::now_v7(), Uuid::now_v7());
    let mut keys = Vec::new();
    for tenant in [wiped, kept] {
        for _ in 0..5 {
            let key = StorageKey::document_source(tenant, Uuid::now_v7());
            store
                .put(&key, body(vec![Bytes::from(key.as_str().to_owned())]))
                .await
                .expect("put");
            keys.push(key);
        }
    }
    let outside = StorageKey::document_source(wiped, Uuid::now_v7());
    neighbour
        .put(&outside, body(vec![Bytes::from_static(b"next door")]))
        .await
        .expect("put");

    let mut seen: Vec<String> = Vec::new();
    loop {
        let page = store
            .list_after(seen.last().map(String::as_str), 3)
            .await
            .expect("page");
        assert!(page.len() <= 3);
        if page.is_empty() {
            break;
        }
        for object in &page {
            assert_eq!(object.size_bytes, object.key.len() as u64, "{}", object.key);
        }
        seen.extend(page.into_iter().map(|object| object.key));
    }
    let mut expected: Vec<String> = keys.iter().map(|key| key.as_str().to_owned()).collect();
    expected.sort();
    assert_eq!(
        seen, expected,
        "every key, relative to the prefix, in key order"
    );

    store
        .delete_prefix(&StorageKey::tenant_prefix(wiped))
        .await
        .expect("wipe");
    let left: Vec<String> = store
        .list_after(None, 100)
        .await
        .expect("list")
        .into_iter()
        .map(|object| object.key)
        .collect();
    let kept_keys: Vec<String> = expected
        .iter()
        .filter(|key| key.contains(&kept.to_string()))
        .cloned()
        .collect();
    assert_eq!(left, kept_keys);
    assert!(
        neighbour.digest(&outside).await.is_ok(),
        "the neighbour keeps its object"
    );
}

#[tokio::test]
async fn a_body_that_fails_midway_leaves_no_object_in_one_request_or_in_parts() {
    let mut settings = shared_s3_settings(&unique_prefix());
    settings.part_size_bytes = 5 * MIB as u64;
    let store = S3Store::new(&settings).expect("s3 store");
    for size in [4096, 7 * MIB] {
        let key = StorageKey::document_source(Uuid::now_v7(), Uuid::now_v7());
        let failing = futures_util::stream::iter(
            patterned(size)
                .into_iter()
                .map(Ok)
                .chain([Err(std::io::Error::other("client went away"))]),
        )
        .boxed();

        assert!(store.put(&key, failing).await.is_err(), "{size} bytes");

        assert!(
            matches!(store.digest(&key).await, Err(StorageError::NotFound)),
            "{size} bytes: no object"
        );
    }
    assert!(store.list_after(None, 10).await.expect("list").is_empty());
}

#[tokio::test]
async fn a_stopped_server_is_unavailable_and_serves_the_same_objects_after_a_restart() {
    let mut server = SeaweedServer::start().await;
    let store = S3Store::new(&server.s3_settings(&unique_prefix())).expect("s3 store");
    let key = StorageKey::document_source(Uuid::now_v7(), Uuid::now_v7());
    let stored = put_digested(&store, &key, body(patterned(100_000)), u64::MAX)
        .await
        .expect("put");

    server.stop().await;
    let other = StorageKey::document_source(Uuid::now_v7(), Uuid::now_v7());
    let refused = store.put(&other, body(patterned(10))).await;
    assert!(
        matches!(refused, Err(StorageError::Unavailable(_))),
        "{refused:?}"
    );
    assert!(matches!(
        store.open(&key).await,
        Err(StorageError::Unavailable(_))
    ));

    server.restart().await;
    assert_eq!(
        store.digest(&key).await.expect("digest after restart"),
        stored
    );
    assert!(matches!(
        store.digest(&other).await,
        Err(StorageError::NotFound)
    ));
}

/// A server that answers every request 503 (a gateway whose backend is down).
#[tokio::test]
async fn a_server_answering_5xx_is_unavailable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let answering = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut request = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut request).await;
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    let mut settings = test_settings(&[]).storage.s3;
    settings.endpoint = format!("http://127.0.0.1:{port}");
    settings.bucket = "any".to_owned();
    // Static keys: without them the client would ask an instance metadata service.
    settings.access_key_id = "AKIDEXAMPLE".to_owned();
    settings.secret_access_key = quire_shared::secret::Secret::new("example");
    let store = S3Store::new(&settings).expect("s3 store");
    let key = StorageKey::document_source(Uuid::now_v7(), Uuid::now_v7());

    let got = store.open(&key).await.err();
    assert!(matches!(got, Some(StorageError::Unavailable(_))), "{got:?}");
    let put = store.put(&key, body(patterned(10))).await;
    assert!(matches!(put, Err(StorageError::Unavailable(_))), "{put:?}");
    answering.abort();
}

#[test]
fn the_store_never_shows_its_secret() {
    let mut settings = test_settings(&[]).storage.s3;
    settings.endpoint = "http://127.0.0.1:1".to_owned();
    settings.bucket = "any".to_owned();
    settings.access_key_id = "AKIDEXAMPLE".to_owned();
    settings.secret_access_key = quire_shared::secret::Secret::new("s3cr3t-never-shown");
    let store = S3Store::new(&settings).expect("s3 store");
    assert!(!format!("{store:?}").contains("s3cr3t-never-shown"));
    assert!(!format!("{settings:?}").contains("s3cr3t-never-shown"));
}
