//! The whole path of a job with every backend link over TLS: a PostgreSQL that admits
//! TLS sessions only (`verify-full`) and a Redis that speaks TLS only (`rediss://`).
//! The template database is migrated, and the API, the dispatcher (its pool and its
//! LISTEN session), the worker and `quire-admin` all connect through the same
//! connectors as in production.

use quire_shared::states::JobStatus;
use quire_shared::test_support::{
    PostgresServer, RedisServer, RedisTls, TestContext, TestDatabase,
};

use super::certs::TestCerts;
use crate::helpers::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_api_dispatcher_worker_and_quire_admin_run_over_tls_only_backends() {
    let certs = TestCerts::new();
    let ca = certs.ca.display().to_string();
    let postgres = PostgresServer::start_tls(&certs.server_cert, &certs.server_key);
    let redis = RedisServer::start_tls(RedisTls {
        cert: certs.server_cert.clone(),
        key: certs.server_key.clone(),
        ca: certs.ca.clone(),
    })
    .await;
    let admin_url = format!(
        "postgres://postgres@localhost:{}/postgres?sslmode=verify-full&sslrootcert={ca}",
        postgres.port
    );
    // Builds and migrates this server's template over TLS, then clones it.
    let database = TestDatabase::create_on(&admin_url).await;
    assert!(
        database
            .url
            .ends_with(&format!("sslmode=verify-full&sslrootcert={ca}"))
    );
    let mut context = TestContext::with_servers(database, &redis.url());
    context.settings.redis.ca_file = ca;
    let app = TestApp::spawn_in(context).await;
    app.start_dispatcher();
    let _worker = app.start_worker();

    let (_document, job) = app.upload(b"A letter that travelled encrypted.").await;
    app.wait_for_job(job, JobStatus::Succeeded).await;

    // quire-admin's pool and its Redis reads (list lengths) over the same links.
    let (ok, out, err) = app.admin_cli(&["stats"]);
    assert!(ok, "quire-admin stats over tls failed: {err}");
    assert!(out.contains("redis lists"), "{out}");
    assert!(!out.contains("unavailable"), "{out}");
}
