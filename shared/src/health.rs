//! Readiness, the same for every process: PostgreSQL answers, the schema is current,
//! Redis answers. The report names each check, never an address or an error text.

use serde::Serialize;

use crate::db::{PgPool, migrate};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Readiness {
    pub database: bool,
    pub migrations: bool,
    pub redis: bool,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.database && self.migrations && self.redis
    }

    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "status": if self.is_ready() { "ready" } else { "unavailable" },
            "checks": self,
        })
    }
}

pub async fn check(pool: &PgPool, redis: &crate::redis_client::RedisPool) -> Readiness {
    let (database, migrations) = match pool.get().await {
        Ok(mut conn) => (true, migrate::is_current(&mut conn).await.unwrap_or(false)),
        Err(_) => (false, false),
    };
    let redis = crate::redis_client::ping(redis).await.is_ok();
    Readiness {
        database,
        migrations,
        redis,
    }
}
