//! The analysis tools run confined: a hostile `pdftotext`, planted where a real worker
//! process finds its tools, reports what it can reach, and its report becomes the
//! document's text. It must see neither the worker's secrets (in its environment or
//! through /proc), nor the storage root, nor the network.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;

use diesel::{ExpressionMethods, QueryDsl};
use diesel_async::RunQueryDsl;
use quire_shared::db::schema::documents;
use quire_shared::states::JobStatus;
use serde_json::Value;

use crate::fixtures;
use crate::helpers::{TestApp, uuid_at};

const SECRET: &str = "canary-jwt-secret-0123456789abcdef0123456789";
const PASSWORD: &str = "canarydbpassword";

/// The tool: one `name=answer` line per probe, then enough words to count as a text layer.
fn hostile_tool(storage: &std::path::Path, port: u16) -> String {
    let storage = storage.display();
    format!(
        r#"#!/bin/bash
if env | grep -q -e '{SECRET}' -e '{PASSWORD}'; then echo env=seen; else echo env=unseen; fi
if [ -n "$DATABASE_URL$QUIRE__AUTH__JWT_SECRET" ]; then echo vars=seen; else echo vars=unseen; fi
if cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -q '{SECRET}'; then echo proc=seen; else echo proc=unseen; fi
if cat '{storage}/canary.txt' >/dev/null 2>&1; then echo storage=read; else echo storage=unreadable; fi
if touch '{storage}/planted' 2>/dev/null; then echo plant=written; else echo plant=refused; fi
if (echo hello >/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo network=connected; else echo network=refused; fi
echo "the probes of the hostile tool are done"
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_sees_no_secret_no_storage_and_no_network() {
    let app = TestApp::spawn().await;
    let storage = app.context.data_dir.path().to_owned();
    std::fs::write(storage.join("canary.txt"), "another tenant's document").expect("canary");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    listener.set_nonblocking(true).expect("non-blocking");
    let port = listener.local_addr().expect("address").port();

    let tools = tempfile::tempdir().expect("tool folder");
    let tool = tools.path().join("pdftotext");
    std::fs::write(&tool, hostile_tool(&storage, port)).expect("write the tool");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = std::env::join_paths(std::iter::once(tools.path().to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    let url = app.context.settings.database.url.expose().to_owned();
    assert!(url.starts_with("postgres://postgres@"), "{url}");
    // Trust authentication ignores the password; the tool must never see it.
    let url = url.replacen("postgres@", &format!("postgres:{PASSWORD}@"), 1);
    let logs = tempfile::tempdir().expect("log folder");
    let _worker = app.spawn_worker_process(
        &[
            ("PATH", path.as_os_str()),
            ("DATABASE_URL", OsStr::new(&url)),
            ("QUIRE__AUTH__JWT_SECRET", OsStr::new(SECRET)),
        ],
        &logs.path().join("worker.log"),
    );
    app.start_dispatcher();

    let response = app
        .upload_as(&app.token, fixtures::text_pdf(&["A letter"]), "l.pdf")
        .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.expect("json");
    let job = uuid_at(&body, "/job/id");
    let document = uuid_at(&body, "/document/id");
    let finished = app.wait_for_job(job, JobStatus::Succeeded).await;
    assert_eq!(finished.attempts, 1);

    let mut conn = app.pool.get().await.expect("connection");
    let report: Option<String> = documents::table
        .filter(documents::id.eq(document))
        .select(documents::content_text)
        .first(&mut conn)
        .await
        .expect("the document");
    let report = report.unwrap_or_default();
    assert!(
        report.contains("probes of the hostile tool are done"),
        "{report}"
    );
    for line in [
        "env=unseen",
        "vars=unseen",
        "proc=unseen",
        "storage=unreadable",
        "plant=refused",
        "network=refused",
    ] {
        assert!(
            report.contains(line),
            "expected {line} in the tool's report:\n{report}"
        );
    }
    assert!(!storage.join("planted").exists());
    // The tool has exited: a connection it made would be waiting to be accepted.
    assert!(
        matches!(listener.accept(), Err(error) if error.kind() == std::io::ErrorKind::WouldBlock),
        "the tool reached the test's listener"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_sandbox_does_not_work_refuses_to_start() {
    let app = TestApp::spawn().await;
    // A bubblewrap that cannot make its namespaces, as on a host that refuses them.
    let tools = tempfile::tempdir().expect("tool folder");
    let bwrap = tools.path().join("bwrap");
    std::fs::write(
        &bwrap,
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
    )
    .expect("write");
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = std::env::join_paths(std::iter::once(tools.path().to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    let logs = tempfile::tempdir().expect("log folder");
    let log = logs.path().join("worker.log");
    let mut worker = app.spawn_worker_process(&[("PATH", path.as_os_str())], &log);
    assert!(
        worker.wait_exit(crate::helpers::DEADLINE).await,
        "the worker ran without its sandbox"
    );
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains("sandbox"), "{text}");
}
