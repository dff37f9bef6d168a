//! PostgreSQL over TLS: the URL's `sslmode` and `sslrootcert`, against a server that
//! refuses every connection without TLS and serves a certificate for `localhost`.

use diesel::sql_types::Bool;
use diesel_async::RunQueryDsl;
use quire_shared::config::DatabaseSettings;
use quire_shared::db;
use quire_shared::secret::Secret;
use quire_shared::test_support::PostgresServer;

use super::certs::TestCerts;

#[derive(diesel::QueryableByName)]
struct Encrypted {
    #[diesel(sql_type = Bool)]
    ssl: bool,
}

/// Whether the session a pool on `url` opens is encrypted, or why it could not open one.
async fn session_encrypted(url: &str) -> Result<bool, String> {
    let settings = DatabaseSettings {
        url: Secret::new(url.to_owned()),
        pool_size: Some(1),
        connect_timeout_seconds: 10,
        statement_timeout_ms: quire_shared::config::StatementTimeouts {
            api: 0,
            worker: 0,
            dispatcher: 0,
            admin: 0,
        },
        idle_in_transaction_timeout_ms: 0,
    };
    let pool = db::build_pool(&settings).map_err(|error| error.to_string())?;
    let mut conn = pool.get().await.map_err(|error| error.to_string())?;
    let row: Encrypted =
        diesel::sql_query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .get_result(&mut conn)
            .await
            .map_err(|error| error.to_string())?;
    Ok(row.ssl)
}

fn url(host: &str, server: &PostgresServer, query: &str) -> String {
    format!(
        "postgres://postgres@{host}:{}/postgres?{query}",
        server.port
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_and_prefer_encrypt_and_disable_is_refused_by_a_tls_only_server() {
    let certs = TestCerts::new();
    let server = PostgresServer::start_tls(&certs.server_cert, &certs.server_key);

    // `require` encrypts without verifying: the IP is not in the certificate, and no CA
    // is given.
    let require = session_encrypted(&url("127.0.0.1", &server, "sslmode=require")).await;
    assert_eq!(require, Ok(true), "sslmode=require");
    // The default (`prefer`) takes the TLS the server offers.
    let default = session_encrypted(&url("127.0.0.1", &server, "application_name=x")).await;
    assert_eq!(default, Ok(true), "no sslmode (prefer)");
    // Without TLS this server lets nobody in: the test really is about TLS.
    let disable = session_encrypted(&url("127.0.0.1", &server, "sslmode=disable")).await;
    let error = disable.expect_err("a plaintext session is refused by pg_hba.conf");
    assert!(error.contains("no encryption"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_checks_the_chain_and_the_host_name_and_verify_ca_the_chain_only() {
    let certs = TestCerts::new();
    let server = PostgresServer::start_tls(&certs.server_cert, &certs.server_key);
    let ca = certs.ca.display().to_string();
    let other_ca = certs.other_ca.display().to_string();

    let full = url(
        "localhost",
        &server,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    assert_eq!(
        session_encrypted(&full).await,
        Ok(true),
        "verify-full, right host and CA"
    );

    // The certificate names localhost, not 127.0.0.1: a man in the middle with another
    // host's valid certificate is refused.
    let wrong_host = url(
        "127.0.0.1",
        &server,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let error = session_encrypted(&wrong_host)
        .await
        .expect_err("wrong host name");
    assert!(error.contains("certificate"), "{error}");

    // A certificate from a CA we do not trust is refused, whatever its name.
    let unknown = url(
        "localhost",
        &server,
        &format!("sslmode=verify-full&sslrootcert={other_ca}"),
    );
    let error = session_encrypted(&unknown).await.expect_err("unknown CA");
    assert!(error.contains("certificate"), "{error}");

    // verify-ca checks the chain but not the name; require with a root does the same
    // (libpq's rule), so it refuses the unknown CA.
    let chain_only = url(
        "127.0.0.1",
        &server,
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    );
    assert_eq!(session_encrypted(&chain_only).await, Ok(true), "verify-ca");
    let require_other = url(
        "127.0.0.1",
        &server,
        &format!("sslmode=require&sslrootcert={other_ca}"),
    );
    let error = session_encrypted(&require_other)
        .await
        .expect_err("require with a root verifies the chain");
    assert!(error.contains("certificate"), "{error}");
}
