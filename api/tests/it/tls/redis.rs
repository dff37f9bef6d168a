//! Redis over TLS: a `rediss://` URL with `redis.ca_file`, against a server whose only
//! port speaks TLS, for the pool (pushes) and the blocking connection (pops) alike.

use deadpool_redis::redis;
use quire_shared::broker;
use quire_shared::config::RedisSettings;
use quire_shared::redis_client::{self, RedisPool};
use quire_shared::test_support::{RedisServer, RedisTls, test_settings};

use super::certs::TestCerts;

fn redis_settings(url: &str, ca_file: &str) -> RedisSettings {
    test_settings(&[("REDIS_URL", url), ("QUIRE__REDIS__CA_FILE", ca_file)]).redis
}

async fn push(settings: &RedisSettings, list: &str, message: &str) -> Result<(), String> {
    let pool = RedisPool::build(settings).map_err(|error| error.to_string())?;
    let mut conn = pool.get().await.map_err(|error| error.to_string())?;
    let mut pipeline = redis::pipe();
    broker::push(&mut pipeline, list, message);
    pipeline
        .query_async::<()>(&mut conn)
        .await
        .map_err(|error| error.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rediss_url_trusting_the_ca_file_pushes_and_pops_and_an_unknown_ca_is_refused() {
    let certs = TestCerts::new();
    let server = RedisServer::start_tls(RedisTls {
        cert: certs.server_cert.clone(),
        key: certs.server_key.clone(),
        ca: certs.ca.clone(),
    })
    .await;
    let url = server.url();
    assert!(url.starts_with("rediss://localhost:"), "{url}");
    let settings = redis_settings(&url, certs.ca.to_str().expect("utf-8 path"));
    let list = broker::queue_key("quire-tls-test", "analyze-document");

    push(&settings, &list, "hello over tls")
        .await
        .expect("push");
    let mut blocking = redis_client::blocking_connection(&settings)
        .await
        .expect("blocking connection over tls");
    let popped = broker::pop(
        &mut blocking,
        std::slice::from_ref(&list),
        std::time::Duration::from_secs(2),
        10,
    )
    .await
    .expect("pop");
    assert_eq!(
        popped,
        Some((list.clone(), vec!["hello over tls".to_owned()]))
    );

    // A server whose certificate does not chain to our CA is not Redis to us.
    let untrusted = redis_settings(&url, certs.other_ca.to_str().expect("utf-8 path"));
    let error = push(&untrusted, &list, "to a stranger")
        .await
        .expect_err("unknown CA refused");
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    let error = redis_client::blocking_connection(&untrusted)
        .await
        .err()
        .expect("the blocking connection refuses the unknown CA too");
    assert!(
        error.to_string().to_lowercase().contains("certificate"),
        "{error}"
    );

    // The TLS port answers nothing in plaintext.
    let plaintext = redis_settings(&format!("redis://127.0.0.1:{}", server.port), "");
    push(&plaintext, &list, "in the clear")
        .await
        .expect_err("plaintext to a TLS port fails");
}

#[test]
fn a_ca_file_without_rediss_or_with_a_cluster_is_refused_at_start() {
    use quire_shared::config::{Profile, Settings, SettingsSource, workspace_config_dir};
    let load = |env: &[(&str, &str)]| {
        Settings::from_source(&SettingsSource {
            config_dir: workspace_config_dir(),
            profile: Profile::Test,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        })
    };
    let error = load(&[
        ("REDIS_URL", "redis://127.0.0.1:6379"),
        ("QUIRE__REDIS__CA_FILE", "/etc/quire/redis-ca.pem"),
    ])
    .expect_err("a CA for a plaintext link is a mistake");
    assert!(error.to_string().contains("not rediss://"), "{error}");
    let error = load(&[
        ("REDIS_URL", "rediss://redis:6379"),
        ("QUIRE__REDIS__CA_FILE", "/etc/quire/redis-ca.pem"),
        (
            "QUIRE__REDIS__CLUSTER_URLS",
            "rediss://a:7000,rediss://b:7001",
        ),
    ])
    .expect_err("no CA file for a cluster");
    assert!(error.to_string().contains("cluster"), "{error}");
}
