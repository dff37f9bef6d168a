//! The API over HTTPS (`server.tls_cert` / `server.tls_key`), with the real
//! `quire-admin` as its client (`--api-ca-file`).

use quire_shared::db::tenants;
use quire_shared::states::TenantStatus;
use quire_shared::test_support::TestContext;
use uuid::Uuid;

use super::certs::TestCerts;
use crate::helpers::TestApp;

async fn tenant_status(app: &TestApp) -> TenantStatus {
    let mut conn = app.pool.get().await.expect("connection");
    tenants::find_tenant(&mut conn, app.tenant_id)
        .await
        .expect("query tenant")
        .expect("tenant exists")
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quire_admin_reaches_the_api_over_https_with_its_ca_and_refuses_an_unknown_ca() {
    let certs = TestCerts::new();
    let mut context = TestContext::new().await;
    context.settings.server.tls_cert = certs.server_cert.display().to_string();
    context.settings.server.tls_key = certs.server_key.display().to_string();
    let app = TestApp::spawn_in(context).await;
    assert!(
        app.address.starts_with("https://localhost:"),
        "{}",
        app.address
    );
    let tenant = app.tenant_id.to_string();
    let ca = certs.ca.display().to_string();
    let other_ca = certs.other_ca.display().to_string();
    let reset = |api_url: &str, ca_file: &str| {
        app.admin_cli(&[
            "tenant",
            "reset",
            "--tenant",
            &tenant,
            "--name",
            "tenant-a",
            "--no-wait",
            "--api-url",
            api_url,
            "--api-ca-file",
            ca_file,
        ])
    };

    // A certificate that does not chain to the given CA: refused before anything is
    // sent, and said so.
    let (ok, _, err) = reset(&app.address, &other_ca);
    assert!(!ok, "an unknown CA must be refused");
    assert!(err.contains("failed to reach the API"), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    // Plain HTTP to the HTTPS port gets no answer a client could take for the API's.
    let plain = app.address.replacen("https://", "http://", 1);
    let (ok, _, err) = reset(&plain, &ca);
    assert!(!ok, "plain http to the https port: {err}");
    assert_eq!(tenant_status(&app).await, TenantStatus::Active);

    // With the API's CA the signed reset goes through.
    let (ok, out, err) = reset(&app.address, &ca);
    assert!(ok, "quire-admin over https failed: {err}");
    let job_id = Uuid::parse_str(out.trim()).unwrap_or_else(|_| panic!("a job id: {out}"));
    assert_eq!(app.job(job_id).await.job_type, "delete-tenant");
    assert_eq!(tenant_status(&app).await, TenantStatus::Deleting);
}
