//! The queue's state as Prometheus gauges, read from PostgreSQL and Redis at each
//! scrape of the API (the one process every deployment has), so they are exact, never
//! stale. The names are in `metrics`.

use crate::db::{PgPool, stats, workers};
use crate::metrics::{
    JOBS, LIVE_SLOTS, LIVE_SLOTS_BUSY, OLDEST_QUEUED_SECONDS, OUTBOX_EVENTS, OUTBOX_LAG_SECONDS,
    QUEUE_LENGTH, WORKERS_LIVE,
};
use crate::redis_client::RedisPool;

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The queue's state from PostgreSQL and Redis, in the text format (gauges, exact at
/// scrape time). A source that does not answer is left out, never reported as zero.
pub async fn render(pool: &PgPool, redis: &RedisPool, namespace: &str) -> String {
    let mut out = String::new();
    if let Ok(mut conn) = pool.get().await {
        if let Ok(counts) = stats::jobs_by_type_and_status(&mut conn).await {
            out.push_str(&format!("# TYPE {JOBS} gauge\n"));
            for row in counts {
                out.push_str(&format!(
                    "{JOBS}{{type=\"{}\",status=\"{}\"}} {}\n",
                    escape(&row.job_type),
                    escape(&row.status),
                    row.count
                ));
            }
        }
        if let Ok(counts) = stats::events_by_status(&mut conn).await {
            out.push_str(&format!("# TYPE {OUTBOX_EVENTS} gauge\n"));
            for row in counts {
                out.push_str(&format!(
                    "{OUTBOX_EVENTS}{{status=\"{}\"}} {}\n",
                    escape(&row.status),
                    row.count
                ));
            }
        }
        if let Ok(ages) = stats::ages(&mut conn).await {
            out.push_str(&format!(
                "# TYPE {OUTBOX_LAG_SECONDS} gauge\n{OUTBOX_LAG_SECONDS} {}\n\
                 # TYPE {OLDEST_QUEUED_SECONDS} gauge\n{OLDEST_QUEUED_SECONDS} {}\n",
                ages.outbox_lag_seconds, ages.oldest_queued_seconds
            ));
        }
        if let Ok(live) = workers::live(&mut conn).await {
            let slots: i64 = live.iter().map(|worker| i64::from(worker.slots)).sum();
            let busy: i64 = live.iter().map(|worker| i64::from(worker.busy)).sum();
            out.push_str(&format!(
                "# TYPE {WORKERS_LIVE} gauge\n{WORKERS_LIVE} {}\n\
                 # TYPE {LIVE_SLOTS} gauge\n{LIVE_SLOTS} {slots}\n\
                 # TYPE {LIVE_SLOTS_BUSY} gauge\n{LIVE_SLOTS_BUSY} {busy}\n",
                live.len()
            ));
        }
    }
    let types: Vec<&str> = crate::jobs::job_types().collect();
    if let Ok(lengths) = crate::broker::queue_lengths(redis, namespace, &types).await {
        out.push_str(&format!("# TYPE {QUEUE_LENGTH} gauge\n"));
        for (queue, length) in lengths {
            out.push_str(&format!(
                "{QUEUE_LENGTH}{{queue=\"{}\"}} {length}\n",
                escape(&queue)
            ));
        }
    }
    out
}
