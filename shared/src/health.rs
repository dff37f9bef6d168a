//! Readiness, the same for every process: PostgreSQL answers, the schema is current,
//! Redis answers, the object store answers. The report names each check, never an
//! address or an error text.

use std::time::Duration;

use serde::Serialize;

use crate::db::{PgPool, migrate};
use crate::storage::ObjectStore;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Readiness {
    pub database: bool,
    pub migrations: bool,
    pub redis: bool,
    pub storage: bool,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.database && self.migrations && self.redis && self.storage
    }

    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "status": if self.is_ready() { "ready" } else { "unavailable" },
            "checks": self,
        })
    }
}

/// How long the storage check may take: an S3 client retries a refused connection
/// with backoff for far longer than a probe waits.
const STORAGE_PROBE_DEADLINE: Duration = Duration::from_secs(2);

pub async fn check(
    pool: &PgPool,
    redis: &crate::redis_client::RedisPool,
    storage: &dyn ObjectStore,
) -> Readiness {
    // At once, so that a probe waits for the slowest check, not for their sum.
    let ((database, migrations), redis, storage) = tokio::join!(
        async {
            match pool.get().await {
                Ok(mut conn) => (true, migrate::is_current(&mut conn).await.unwrap_or(false)),
                Err(_) => (false, false),
            }
        },
        async { crate::redis_client::ping(redis).await.is_ok() },
        async {
            matches!(
                tokio::time::timeout(STORAGE_PROBE_DEADLINE, storage.probe()).await,
                Ok(Ok(()))
            )
        },
    );
    Readiness {
        database,
        migrations,
        redis,
        storage,
    }
}
