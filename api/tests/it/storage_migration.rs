//! `quire-admin storage migrate`, the real binary: an install's objects move from its
//! local folder to S3 (the suite's SeaweedFS), every one read back and compared with its row;
//! a run stopped midway (a copy limit, a kill) continues when run again without copying
//! twice; a corrupted or missing source object is reported and the run fails.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use quire_shared::config::{Settings, StorageBackend};
use quire_shared::db::named_objects::{self, NamedObject};
use quire_shared::states::JobStatus;
use quire_shared::storage::{self, Digested, ObjectStore, StorageError, StorageKey};
use quire_shared::test_support::{self, TestContext};
use uuid::Uuid;

use crate::fixtures;
use crate::helpers::TestApp;

/// The store an install moves to (a prefix of its own in the suite's SeaweedFS bucket),
/// and what names it to a process.
struct Target {
    settings: Settings,
    store: Arc<dyn ObjectStore>,
    env: Vec<(String, String)>,
}

fn target(app: &TestApp) -> Target {
    let s3 = test_support::shared_s3_settings(&format!("migrate-{}", Uuid::new_v4().simple()));
    let settings = app.settings_with(|settings| {
        settings.storage.backend = StorageBackend::S3;
        settings.storage.s3 = s3.clone();
    });
    let env = [
        ("BACKEND", "s3".to_owned()),
        ("S3__ENDPOINT", s3.endpoint.clone()),
        ("S3__BUCKET", s3.bucket.clone()),
        ("S3__REGION", s3.region.clone()),
        ("S3__PATH_STYLE", s3.path_style.to_string()),
        ("S3__ACCESS_KEY_ID", s3.access_key_id.clone()),
        (
            "S3__SECRET_ACCESS_KEY",
            s3.secret_access_key.expose().to_owned(),
        ),
        ("S3__PREFIX", s3.prefix.clone()),
    ]
    .into_iter()
    .map(|(key, value)| (format!("QUIRE__STORAGE__{key}"), value))
    .collect();
    Target {
        store: storage::build(&settings.storage).expect("the s3 store"),
        settings,
        env,
    }
}

/// An install on local storage (whichever backend the suite runs on), the source.
async fn local_install() -> TestApp {
    let mut context = TestContext::new().await;
    context.settings.storage.backend = StorageBackend::Local;
    TestApp::spawn_in(context).await
}

/// What a run of `quire-admin storage migrate` said.
struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The summary's count before `what` ("copied", "already present", "problems").
    fn count(&self, what: &str) -> u64 {
        let summary = self
            .stdout
            .lines()
            .find(|line| line.starts_with("examined "))
            .unwrap_or_else(|| panic!("no summary in {:?} ({})", self.stdout, self.stderr));
        summary
            .split([':', ','])
            .map(str::trim)
            .find_map(|part| {
                let (count, rest) = part.split_once(' ')?;
                rest.starts_with(what).then(|| count.parse().ok()).flatten()
            })
            .unwrap_or_else(|| panic!("no {what:?} in {summary:?}"))
    }
}

fn migrate_command(app: &TestApp, target: &Target, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_quire-admin"));
    let source = app.context.data_dir.path().to_str().expect("utf-8 path");
    command
        .args(["storage", "migrate", "--from-dir", source])
        .args(args)
        .envs(app.context.process_env())
        .envs(target.env.iter().map(|(key, value)| (key, value)));
    command
}

fn migrate(app: &TestApp, target: &Target, args: &[&str]) -> Run {
    let output = migrate_command(app, target, args)
        .output()
        .expect("run quire-admin");
    Run {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

async fn named(app: &TestApp) -> Vec<NamedObject> {
    let mut conn = app.pool.get().await.expect("connection");
    named_objects::page_after(&mut conn, None, 10_000)
        .await
        .expect("named objects")
}

fn recorded(object: &NamedObject) -> Digested {
    Digested {
        size_bytes: u64::try_from(object.size_bytes).expect("size"),
        sha256: object.sha256.clone(),
    }
}

fn key(object: &NamedObject) -> StorageKey {
    StorageKey::from_stored(&object.storage_key).expect("key")
}

/// How many of `objects` the target holds with their recorded digest.
async fn verified_at(target: &Target, objects: &[NamedObject]) -> usize {
    let mut verified = 0;
    for object in objects {
        match target.store.digest(&key(object)).await {
            Ok(found) if found == recorded(object) => verified += 1,
            Ok(found) => panic!("{} differs at the target: {found:?}", object.storage_key),
            Err(StorageError::NotFound) => {}
            Err(error) => panic!("target: {error}"),
        }
    }
    verified
}

/// Distinct notes (duplicates are refused), `size` bytes each at least.
async fn upload_notes(app: &TestApp, count: usize, size: usize) {
    for index in 0..count {
        let line = format!("note {index} of a migration test, a line of text to fill it\n");
        let body = line.repeat(size / line.len() + 1);
        app.upload(body.as_bytes()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_moves_sources_thumbnails_and_texts_and_the_api_serves_them_from_the_target() {
    let app = local_install().await;
    let pdf = fixtures::text_pdf(&["Migration Invoice", "Rechnungsdatum: 15.03.2024"]);
    let uploads = [
        (pdf, "invoice.pdf"),
        (b"A note that moves to S3.\n".to_vec(), "note.txt"),
    ];
    let mut documents = Vec::new();
    let mut jobs = Vec::new();
    for (bytes, filename) in uploads {
        let response = app.upload_as(&app.token, bytes, filename).await;
        assert_eq!(response.status(), 201, "{filename}");
        let body: serde_json::Value = response.json().await.expect("json");
        documents.push(crate::helpers::uuid_at(&body, "/document/id"));
        jobs.push(crate::helpers::uuid_at(&body, "/job/id"));
    }
    app.start_dispatcher();
    let worker = app.start_worker();
    for job in &jobs {
        app.wait_for_job(*job, JobStatus::Succeeded).await;
    }
    worker.drain().await;
    let objects = named(&app).await;
    for kind in ["document_version", "asset"] {
        assert!(
            objects.iter().any(|object| object.named_by == kind),
            "{kind}"
        );
    }
    // A version, a thumbnail and a text each.
    assert_eq!(objects.len(), 3 * documents.len(), "{objects:?}");
    let mut served = Vec::new();
    for document in &documents {
        for download in ["content", "thumbnail"] {
            let response = app
                .get_as(&app.token, &format!("/api/documents/{document}/{download}"))
                .await;
            assert_eq!(response.status(), 200, "{download}");
            served.push((
                format!("/api/documents/{document}/{download}"),
                response.bytes().await.expect("bytes"),
            ));
        }
    }
    let target = target(&app);
    // Something else left wrong bytes under one key: a run replaces them.
    target
        .store
        .put(
            &key(&objects[0]),
            Box::pin(futures_util::stream::iter([Ok(bytes::Bytes::from_static(
                b"not the document",
            ))])),
        )
        .await
        .expect("seed a wrong object");

    let run = migrate(&app, &target, &[]);
    assert!(run.success, "{} {}", run.stdout, run.stderr);
    assert_eq!(run.count("copied"), objects.len() as u64, "{}", run.stdout);
    assert!(run.stdout.contains("complete"), "{}", run.stdout);
    assert!(run.stderr.contains("progress: "), "{}", run.stderr);
    assert_eq!(verified_at(&target, &objects).await, objects.len());

    // Nothing left where the install stored it until now: the target serves all.
    let source = app.context.data_dir.path();
    std::fs::remove_dir_all(source).expect("empty the source");
    std::fs::create_dir(source).expect("source folder");
    let moved = app.start_api_with(target.settings.clone()).await;
    for (path, bytes) in &served {
        let response = app
            .http
            .get(format!("{moved}{path}"))
            .bearer_auth(&app.token)
            .send()
            .await
            .expect("download");
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(&response.bytes().await.expect("bytes"), bytes, "{path}");
    }

    // Run again: every object is read back and found verified, none copied.
    let again = migrate(&app, &target, &[]);
    assert!(again.success, "{} {}", again.stdout, again.stderr);
    assert_eq!(again.count("copied"), 0);
    assert_eq!(again.count("already present"), objects.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_stopped_at_its_limit_continues_and_copies_nothing_twice() {
    let app = local_install().await;
    upload_notes(&app, 5, 100).await;
    let objects = named(&app).await;
    assert_eq!(objects.len(), 5);
    let target = target(&app);

    let first = migrate(&app, &target, &["--max-objects", "2"]);
    assert!(first.success, "{} {}", first.stdout, first.stderr);
    assert_eq!(first.count("copied"), 2);
    assert!(first.stdout.contains("run again"), "{}", first.stdout);
    assert_eq!(verified_at(&target, &objects).await, 2);

    let second = migrate(&app, &target, &[]);
    assert!(second.success, "{} {}", second.stdout, second.stderr);
    assert_eq!(second.count("already present"), 2);
    assert_eq!(second.count("copied"), 3);
    assert!(second.stdout.contains("complete"), "{}", second.stdout);
    assert_eq!(verified_at(&target, &objects).await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_killed_midway_completes_when_run_again() {
    let app = local_install().await;
    // Large enough that one copy takes a while, each streamed in many chunks.
    upload_notes(&app, 4, 6 * 1024 * 1024).await;
    let objects = named(&app).await;
    let target = target(&app);

    let mut child = migrate_command(&app, &target, &["--concurrency", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start quire-admin");
    // The first progress line comes after the first object was copied and read back.
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let progressed = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|line| line.starts_with("progress: "));
    assert!(progressed, "no progress line");
    let _ = child.kill(); // it may have finished already
    child.wait().expect("reap");

    let resumed = migrate(&app, &target, &[]);
    assert!(resumed.success, "{} {}", resumed.stdout, resumed.stderr);
    assert!(resumed.stdout.contains("complete"), "{}", resumed.stdout);
    let (present, copied) = (resumed.count("already present"), resumed.count("copied"));
    assert!(
        present >= 1,
        "the copy made before the kill is kept: {present}"
    );
    assert_eq!(present + copied, objects.len() as u64);
    assert_eq!(verified_at(&target, &objects).await, objects.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_or_missing_source_object_is_reported_and_the_run_fails() {
    let app = local_install().await;
    upload_notes(&app, 3, 100).await;
    let objects = named(&app).await;
    let source = app.context.data_dir.path();
    let (corrupted, missing, intact) = (&objects[0], &objects[1], &objects[2]);
    // Same size, one byte flipped: only the digest tells.
    let path = source.join(&corrupted.storage_key);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[0] ^= 0x01;
    std::fs::write(&path, bytes).expect("corrupt");
    std::fs::remove_file(source.join(&missing.storage_key)).expect("remove");
    let target = target(&app);

    let run = migrate(&app, &target, &[]);
    assert!(!run.success, "{} {}", run.stdout, run.stderr);
    assert_eq!(run.count("problems"), 2, "{}", run.stdout);
    assert_eq!(run.count("copied"), 1, "{}", run.stdout);
    let problem = |object: &NamedObject| {
        run.stdout
            .lines()
            .find(|line| line.starts_with("problem\t") && line.contains(&object.storage_key))
            .unwrap_or_else(|| panic!("{} not reported: {}", object.storage_key, run.stdout))
            .to_owned()
    };
    assert!(
        problem(corrupted).contains("differs"),
        "{}",
        problem(corrupted)
    );
    assert!(problem(missing).contains("missing"), "{}", problem(missing));
    assert!(
        run.stderr.contains("fix them and run again"),
        "{}",
        run.stderr
    );
    // Nothing of the corrupted bytes stays at the target; the intact object is there.
    for (object, expected) in [(corrupted, false), (missing, false), (intact, true)] {
        let found = target.store.digest(&key(object)).await;
        assert_eq!(found.is_ok(), expected, "{}: {found:?}", object.storage_key);
    }
}
