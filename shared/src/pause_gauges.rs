//! The pause gauges of the API's `/metrics`: which queues are paused and how many
//! tenants. Read at each scrape (unlike the queue state, which one dispatcher computes
//! per interval): both are reads of tiny sets, the `queue_pauses` table and a partial
//! index of paused tenants, so a scrape stays cheap however large the tables grow.

use crate::db::{PgPool, pauses};
use crate::metrics::{PAUSED_QUEUES, PAUSED_TENANTS, QUEUE_PAUSED};

/// The gauges in the text format; nothing when the database does not answer (left out,
/// never reported as zero).
pub async fn render(pool: &PgPool) -> String {
    let Ok(mut conn) = pool.get().await else {
        return String::new();
    };
    let (queues, tenants) = match (
        pauses::paused_queues(&mut conn).await,
        pauses::paused_tenant_count(&mut conn).await,
    ) {
        (Ok(queues), Ok(tenants)) => (queues, tenants),
        (Err(error), _) | (_, Err(error)) => {
            tracing::warn!(%error, "failed to read the pauses for the metrics");
            return String::new();
        }
    };
    let mut out = format!(
        "# TYPE {PAUSED_QUEUES} gauge\n{PAUSED_QUEUES} {}\n\
         # TYPE {PAUSED_TENANTS} gauge\n{PAUSED_TENANTS} {tenants}\n\
         # TYPE {QUEUE_PAUSED} gauge\n",
        queues.len()
    );
    // Every registered queue, 0 or 1: a series that exists at 0 can be alerted on. Only
    // job types are labels (a pause row naming no type serves no list).
    for queue in crate::jobs::job_types() {
        let paused = queues.iter().any(|pause| pause.queue == queue);
        out.push_str(&format!(
            "{QUEUE_PAUSED}{{queue=\"{queue}\"}} {}\n",
            u8::from(paused)
        ));
    }
    out
}
