//! Connections to Redis, a single server or a Redis Cluster (`redis.cluster_urls`), behind
//! one type each: a pool for short commands and a dedicated connection for blocking
//! pops. Every key Quire uses shares one hash tag, so on a cluster they all live in one
//! slot and multi-key commands (BLMPOP over several lists, pipelines) keep working.
//!
//! What Quire says over these connections (keys, messages, list direction) is the
//! protocol in `broker`; this module only connects and checks the server.
//!
//! TLS: a `rediss://` URL connects over rustls and always verifies the chain and the
//! host name, against `redis.ca_file` when it is set, else the system store.

use std::time::Duration;

use deadpool_redis::redis::aio::{ConnectionLike, MultiplexedConnection};
use deadpool_redis::redis::cluster_async::ClusterConnection;
use deadpool_redis::redis::{self, AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, Value};

use crate::config::RedisSettings;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("redis command failed: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("no redis connection available: {0}")]
    Pool(#[from] deadpool_redis::PoolError),
    #[error("failed to build the redis pool: {0}")]
    Build(String),
    #[error("redis.ca_file: {0}")]
    CaFile(#[from] crate::tls::TlsError),
}

/// The client of the single server at `redis.url`: with `redis.ca_file`, its `rediss://`
/// connections trust that CA instead of the system store.
fn single_client(settings: &RedisSettings) -> Result<redis::Client, BrokerError> {
    let url = settings.url.expose();
    if settings.ca_file.is_empty() {
        return Ok(redis::Client::open(url)?);
    }
    let path = std::path::Path::new(&settings.ca_file);
    // Read through rustls first: a file without a certificate is refused here, by name,
    // rather than at the first connection.
    crate::tls::read_certificates(path)?;
    let pem = std::fs::read(path).map_err(|error| {
        BrokerError::Build(format!(
            "cannot read redis.ca_file {}: {error}",
            path.display()
        ))
    })?;
    crate::tls::provider();
    Ok(redis::Client::build_with_tls(
        url,
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem),
        },
    )?)
}

/// `ConnectionLike` for an enum of a single-server and a cluster connection: every call
/// goes to whichever it holds.
macro_rules! delegate_connection_like {
    ($name:ident) => {
        impl ConnectionLike for $name {
            fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
                match self {
                    Self::Single(conn) => conn.req_packed_command(cmd),
                    Self::Cluster(conn) => conn.req_packed_command(cmd),
                }
            }

            fn req_packed_commands<'a>(
                &'a mut self,
                cmd: &'a Pipeline,
                offset: usize,
                count: usize,
            ) -> RedisFuture<'a, Vec<Value>> {
                match self {
                    Self::Single(conn) => conn.req_packed_commands(cmd, offset, count),
                    Self::Cluster(conn) => conn.req_packed_commands(cmd, offset, count),
                }
            }

            fn get_db(&self) -> i64 {
                match self {
                    Self::Single(conn) => conn.get_db(),
                    Self::Cluster(conn) => conn.get_db(),
                }
            }
        }
    };
}

/// A pool of connections for short commands (pushes, lengths, pings).
#[derive(Clone)]
pub enum RedisPool {
    Single(deadpool_redis::Pool),
    Cluster(deadpool_redis::cluster::Pool),
}

/// One pooled connection, of either kind.
pub enum RedisConnection {
    Single(deadpool_redis::Connection),
    Cluster(deadpool_redis::cluster::Connection),
}

impl RedisPool {
    /// A pool for short commands (pushes, lengths, pings), single server or cluster;
    /// it connects lazily, so a process starts while Redis is still down.
    pub fn build(settings: &RedisSettings) -> Result<Self, BrokerError> {
        // rustls's process default, for the redis crate's own TLS configuration.
        crate::tls::provider();
        if settings.cluster_urls.is_empty() {
            // The manager from the client's connection info keeps its root certificates
            // (deadpool-redis's own config would parse the URL again without them).
            let info = single_client(settings)?.get_connection_info().clone();
            let manager = deadpool_redis::Manager::new(info)?;
            return deadpool_redis::Pool::builder(manager)
                .max_size(settings.pool_size)
                .runtime(deadpool_redis::Runtime::Tokio1)
                .build()
                .map(Self::Single)
                .map_err(|error| BrokerError::Build(error.to_string()));
        }
        let mut config = deadpool_redis::cluster::Config::from_urls(settings.cluster_urls.clone());
        config.pool = Some(deadpool_redis::PoolConfig::new(settings.pool_size));
        config
            .create_pool(Some(deadpool_redis::Runtime::Tokio1))
            .map(Self::Cluster)
            .map_err(|error| BrokerError::Build(error.to_string()))
    }

    pub async fn get(&self) -> Result<RedisConnection, BrokerError> {
        Ok(match self {
            Self::Single(pool) => RedisConnection::Single(pool.get().await?),
            Self::Cluster(pool) => RedisConnection::Cluster(pool.get().await?),
        })
    }
}

delegate_connection_like!(RedisConnection);

/// A dedicated connection for blocking pops, without the client's default response
/// timeout (it would cut every blocking pop short); callers bound the wait themselves.
#[derive(Clone)]
pub enum BlockingConnection {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

/// How long a cluster connection waits for an answer: longer than any pop asks for.
const CLUSTER_RESPONSE_TIMEOUT: Duration = Duration::from_secs(3600);

pub async fn blocking_connection(
    settings: &RedisSettings,
) -> Result<BlockingConnection, BrokerError> {
    crate::tls::provider();
    if settings.cluster_urls.is_empty() {
        let client = single_client(settings)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(None);
        return Ok(BlockingConnection::Single(
            client
                .get_multiplexed_async_connection_with_config(&config)
                .await?,
        ));
    }
    let client = redis::cluster::ClusterClientBuilder::new(settings.cluster_urls.clone())
        .connection_timeout(Duration::from_secs(2))
        .response_timeout(CLUSTER_RESPONSE_TIMEOUT)
        .build()?;
    Ok(BlockingConnection::Cluster(
        client.get_async_connection().await?,
    ))
}

delegate_connection_like!(BlockingConnection);

/// Checks that Redis answers.
pub async fn ping(pool: &RedisPool) -> Result<(), BrokerError> {
    let mut conn = pool.get().await?;
    let _: String = redis::cmd("PING").query_async(&mut conn).await?;
    Ok(())
}

/// Redis must never evict a queued message to make room; warn when it might.
pub async fn warn_unless_noeviction(pool: &RedisPool) {
    let policy: Result<Vec<String>, BrokerError> = async {
        let mut conn = pool.get().await?;
        Ok(redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .query_async(&mut conn)
            .await?)
    }
    .await;
    match policy {
        Ok(pair) if pair.get(1).map(String::as_str) == Some("noeviction") => {}
        Ok(pair) => tracing::warn!(
            policy = pair.get(1).map(String::as_str).unwrap_or("unknown"),
            "redis maxmemory-policy is not noeviction: queued messages may be evicted (the outbox recovers them, late)"
        ),
        Err(error) => tracing::warn!(%error, "could not read redis maxmemory-policy"),
    }
}
