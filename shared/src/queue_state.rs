//! The queue's state as Prometheus gauges, bounded in cost however large the retained
//! history: one dispatcher of the fleet computes it at most once per
//! `dispatcher.queue_state_interval_ms` ([`refresh_if_due`]: an advisory lock and the
//! stored snapshot's age) and stores it; a scrape of the API's admin listener reads the
//! stored snapshot ([`render_stored`], one row by primary key) and never the queue
//! tables. The names are in `metrics`.
//!
//! What is computed: `QUEUED` and `RUNNING` jobs and `PENDING` and `PUBLISHING` events
//! exactly, over their partial indexes; finished jobs and delivered events as estimates
//! from the planner's statistics (`db::stats`, "Bounded"); list lengths from Redis; live
//! workers from their table.
//!
//! Per tenant: queued jobs and the oldest one's age, from the same scan as the per-type
//! counts, for the `top_tenants` tenants with the most queued jobs, and one `other`
//! series for all the rest together ([`top_tenants`]): a scrape carries at most
//! `top_tenants + 1` tenant label values however many tenants there are. Tenants are
//! labelled by id, never by name (a name is text a tenant chose).

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::FutureExt;
use serde::{Deserialize, Serialize};

use crate::db::maintenance::{self, locks};
use crate::db::{DbError, PgPool, queue_state as snapshot, stats, workers};
use crate::metrics::{
    JOBS, LIVE_SLOTS, LIVE_SLOTS_BUSY, OLDEST_QUEUED_SECONDS, OUTBOX_EVENTS, OUTBOX_LAG_SECONDS,
    QUEUE_LENGTH, QUEUE_STATE_AGE_SECONDS, QUEUE_STATE_REFRESHES, TENANT_OLDEST_QUEUED_SECONDS,
    TENANT_QUEUED_JOBS, WORKERS_LIVE,
};
use crate::redis_client::RedisPool;

/// One computed state of the queue, as stored in `queue_state_snapshot.state`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueState {
    /// Jobs by type and status: exact for `QUEUED` and `RUNNING`, estimated for the
    /// finished states.
    pub jobs: Vec<Count>,
    /// Outbox events by status: exact for `PUBLISHING`, for `PENDING` up to
    /// [`stats::PENDING_COUNTED_UP_TO`] and estimated above it, estimated for
    /// `PUBLISHED` and `CANCELLED`.
    pub outbox: Vec<Count>,
    pub outbox_lag_seconds: f64,
    pub oldest_queued_seconds: f64,
    /// Length of each list; `None` when Redis did not answer (left out, never zero).
    pub queue_lengths: Option<Vec<(String, i64)>>,
    pub workers_live: i64,
    pub live_slots: i64,
    pub live_slots_busy: i64,
    /// The tenants with the most queued jobs, most first, then [`OTHER_TENANTS`] for the
    /// rest (see [`top_tenants`]). Snapshots stored before it existed read as empty.
    #[serde(default)]
    pub tenants: Vec<TenantQueue>,
}

/// The label value of the series that sums every tenant outside the top N.
pub const OTHER_TENANTS: &str = "other";

/// One tenant's backlog (or, labelled [`OTHER_TENANTS`], the backlog of all tenants
/// outside the top N together).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantQueue {
    /// The tenant's id, or [`OTHER_TENANTS`].
    pub tenant: String,
    pub queued: i64,
    /// Age of the oldest queued job (for `other`: the oldest of all of them); 0 when
    /// nothing is queued.
    pub oldest_queued_seconds: f64,
}

/// The `n` tenants with the most queued jobs (ties: the older backlog first, then the
/// id, so the choice is stable between refreshes), most first, then one `other` entry
/// summing the rest: its count is their sum and its age the oldest of theirs (zero when
/// there is no rest). Always `min(n, tenants) + 1` entries, and the counts sum to the
/// total backlog.
pub fn top_tenants(mut tenants: Vec<TenantQueue>, n: usize) -> Vec<TenantQueue> {
    tenants.sort_by(|a, b| {
        b.queued
            .cmp(&a.queued)
            .then(b.oldest_queued_seconds.total_cmp(&a.oldest_queued_seconds))
            .then_with(|| a.tenant.cmp(&b.tenant))
    });
    let rest = tenants.split_off(n.min(tenants.len()));
    tenants.push(TenantQueue {
        tenant: OTHER_TENANTS.to_owned(),
        queued: rest.iter().map(|tenant| tenant.queued).sum(),
        oldest_queued_seconds: rest
            .iter()
            .map(|tenant| tenant.oldest_queued_seconds)
            .fold(0.0, f64::max),
    });
    tenants
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Count {
    /// The job type; empty for outbox events.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job_type: String,
    pub status: String,
    pub count: i64,
    /// From the planner's statistics rather than counted.
    pub estimated: bool,
}

/// Computes the state with the bounded queries only (see the module comment), with
/// `top_tenants` tenants labelled by id.
pub async fn compute(
    conn: &mut diesel_async::AsyncPgConnection,
    redis: &RedisPool,
    namespace: &str,
    top_tenants: usize,
) -> Result<QueueState, DbError> {
    // One scan of the backlog by tenant and type, folded both ways.
    let queued = stats::queued_by_tenant_and_type(conn).await?;
    let oldest_queued_seconds = queued
        .iter()
        .map(|group| group.oldest_seconds)
        .fold(0.0, f64::max);
    let mut by_type: BTreeMap<String, i64> = BTreeMap::new();
    let mut by_tenant: BTreeMap<uuid::Uuid, (i64, f64)> = BTreeMap::new();
    for group in queued {
        *by_type.entry(group.job_type).or_default() += group.count;
        let tenant = by_tenant.entry(group.tenant_id).or_insert((0, 0.0));
        tenant.0 += group.count;
        tenant.1 = tenant.1.max(group.oldest_seconds);
    }
    let tenants = self::top_tenants(
        by_tenant
            .into_iter()
            .map(|(tenant, (queued, oldest))| TenantQueue {
                tenant: tenant.to_string(),
                queued,
                oldest_queued_seconds: oldest,
            })
            .collect(),
        top_tenants,
    );
    let queued_jobs: i64 = by_type.values().sum();
    let mut jobs: Vec<Count> = by_type
        .into_iter()
        .map(|(job_type, count)| Count {
            job_type,
            status: "QUEUED".into(),
            count,
            estimated: false,
        })
        .collect();
    jobs.extend(
        stats::running_by_type(conn)
            .await?
            .into_iter()
            .map(|row| Count {
                job_type: row.job_type,
                status: row.status,
                count: row.count,
                estimated: false,
            }),
    );
    jobs.extend(
        stats::finished_jobs_estimate(conn)
            .await?
            .into_iter()
            .map(|row| Count {
                job_type: row.job_type,
                status: row.status,
                count: row.count,
                estimated: true,
            }),
    );
    jobs.sort_by(|a, b| (&a.job_type, &a.status).cmp(&(&b.job_type, &b.status)));

    let events = stats::active_events(conn).await?;
    let (pending, pending_estimated) = events.pending(queued_jobs);
    let mut outbox = vec![
        Count {
            job_type: String::new(),
            status: "PENDING".into(),
            count: pending,
            estimated: pending_estimated,
        },
        Count {
            job_type: String::new(),
            status: "PUBLISHING".into(),
            count: events.publishing,
            estimated: false,
        },
    ];
    outbox.extend(
        stats::finished_events_estimate(conn)
            .await?
            .into_iter()
            .map(|row| Count {
                job_type: String::new(),
                status: row.status,
                count: row.count,
                estimated: true,
            }),
    );

    let live = workers::live(conn).await?;
    let types: Vec<&str> = crate::jobs::job_types().collect();
    let queue_lengths = crate::broker::queue_lengths(redis, namespace, &types)
        .await
        .ok();
    Ok(QueueState {
        jobs,
        outbox,
        outbox_lag_seconds: events.lag_seconds,
        oldest_queued_seconds,
        queue_lengths,
        workers_live: live.len() as i64,
        live_slots: live.iter().map(|worker| i64::from(worker.slots)).sum(),
        live_slots_busy: live.iter().map(|worker| i64::from(worker.busy)).sum(),
        tenants,
    })
}

/// Computes and stores the state if no process of the fleet did within `interval`:
/// under a transaction-scoped advisory lock (a concurrent caller skips at once), and
/// only when the stored snapshot is at least `interval` old on the database clock (a
/// caller right after another skips too). Returns the refresh count when this call
/// refreshed, `None` when it skipped.
pub async fn refresh_if_due(
    conn: &mut diesel_async::AsyncPgConnection,
    redis: &RedisPool,
    namespace: &str,
    interval: Duration,
    top_tenants: usize,
) -> Result<Option<i64>, DbError> {
    let redis = redis.clone();
    let namespace = namespace.to_owned();
    let refreshed = maintenance::once_per_tick(conn, locks::QUEUE_STATE, move |conn| {
        async move {
            if !snapshot::is_due(conn, interval).await? {
                return Ok(None);
            }
            let state = compute(conn, &redis, &namespace, top_tenants).await?;
            let value = serde_json::to_value(&state).unwrap_or_default();
            Ok(Some(snapshot::store(conn, &value).await?))
        }
        .boxed()
    })
    .await?;
    Ok(refreshed.flatten())
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The stored state in the text format, with its age and the fleet's refresh count. A
/// snapshot nobody computed yet (or a database that does not answer) renders nothing:
/// left out, never reported as zero.
pub async fn render_stored(pool: &PgPool) -> String {
    let Ok(mut conn) = pool.get().await else {
        return String::new();
    };
    match snapshot::load(&mut conn).await {
        Ok(Some(stored)) => match serde_json::from_value::<QueueState>(stored.state) {
            Ok(state) => render(&state, stored.age_seconds, stored.refreshes),
            Err(error) => {
                tracing::warn!(%error, "the stored queue state does not parse");
                String::new()
            }
        },
        Ok(None) => String::new(),
        Err(error) => {
            tracing::warn!(%error, "failed to read the queue state snapshot");
            String::new()
        }
    }
}

/// `state` in the text format, computed `age_seconds` ago, after `refreshes` refreshes.
pub fn render(state: &QueueState, age_seconds: f64, refreshes: i64) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# TYPE {QUEUE_STATE_AGE_SECONDS} gauge\n{QUEUE_STATE_AGE_SECONDS} {age_seconds}\n\
         # TYPE {QUEUE_STATE_REFRESHES} counter\n{QUEUE_STATE_REFRESHES} {refreshes}\n"
    ));
    out.push_str(&format!("# TYPE {JOBS} gauge\n"));
    for row in &state.jobs {
        out.push_str(&format!(
            "{JOBS}{{type=\"{}\",status=\"{}\"}} {}\n",
            escape(&row.job_type),
            escape(&row.status),
            row.count
        ));
    }
    out.push_str(&format!("# TYPE {OUTBOX_EVENTS} gauge\n"));
    for row in &state.outbox {
        out.push_str(&format!(
            "{OUTBOX_EVENTS}{{status=\"{}\"}} {}\n",
            escape(&row.status),
            row.count
        ));
    }
    out.push_str(&format!(
        "# TYPE {OUTBOX_LAG_SECONDS} gauge\n{OUTBOX_LAG_SECONDS} {}\n\
         # TYPE {OLDEST_QUEUED_SECONDS} gauge\n{OLDEST_QUEUED_SECONDS} {}\n\
         # TYPE {WORKERS_LIVE} gauge\n{WORKERS_LIVE} {}\n\
         # TYPE {LIVE_SLOTS} gauge\n{LIVE_SLOTS} {}\n\
         # TYPE {LIVE_SLOTS_BUSY} gauge\n{LIVE_SLOTS_BUSY} {}\n",
        state.outbox_lag_seconds,
        state.oldest_queued_seconds,
        state.workers_live,
        state.live_slots,
        state.live_slots_busy
    ));
    out.push_str(&format!("# TYPE {TENANT_QUEUED_JOBS} gauge\n"));
    for tenant in &state.tenants {
        out.push_str(&format!(
            "{TENANT_QUEUED_JOBS}{{tenant=\"{}\"}} {}\n",
            escape(&tenant.tenant),
            tenant.queued
        ));
    }
    out.push_str(&format!("# TYPE {TENANT_OLDEST_QUEUED_SECONDS} gauge\n"));
    for tenant in &state.tenants {
        out.push_str(&format!(
            "{TENANT_OLDEST_QUEUED_SECONDS}{{tenant=\"{}\"}} {}\n",
            escape(&tenant.tenant),
            tenant.oldest_queued_seconds
        ));
    }
    if let Some(lengths) = &state.queue_lengths {
        out.push_str(&format!("# TYPE {QUEUE_LENGTH} gauge\n"));
        for (queue, length) in lengths {
            out.push_str(&format!(
                "{QUEUE_LENGTH}{{queue=\"{}\"}} {length}\n",
                escape(queue)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_state_renders_every_gauge_with_escaped_labels() {
        let state = QueueState {
            jobs: vec![Count {
                job_type: "odd\"type".into(),
                status: "QUEUED".into(),
                count: 3,
                estimated: false,
            }],
            outbox: vec![],
            queue_lengths: Some(vec![("analyze-document".into(), 2)]),
            workers_live: 1,
            ..QueueState::default()
        };
        let value = serde_json::to_value(&state).expect("json");
        let back: QueueState = serde_json::from_value(value).expect("parse");
        assert_eq!(back, state);
        let text = render(&back, 1.5, 7);
        assert!(text.contains("quire_jobs{type=\"odd\\\"type\",status=\"QUEUED\"} 3"));
        assert!(text.contains("quire_queue_length{queue=\"analyze-document\"} 2"));
        assert!(text.contains("quire_queue_state_age_seconds 1.5"));
        assert!(text.contains("quire_queue_state_refreshes_total 7"));
        assert!(text.contains("quire_workers_live 1"));
    }

    fn tenant(tenant: &str, queued: i64, oldest: f64) -> TenantQueue {
        TenantQueue {
            tenant: tenant.into(),
            queued,
            oldest_queued_seconds: oldest,
        }
    }

    #[test]
    fn the_top_tenants_are_the_deepest_and_other_sums_the_rest_with_its_oldest_age() {
        let tenants = vec![
            tenant("a", 5, 1.0),
            tenant("b", 9, 2.0),
            tenant("c", 5, 30.0),
            tenant("d", 1, 99.0),
        ];
        let top = top_tenants(tenants.clone(), 2);
        assert_eq!(
            top,
            vec![
                tenant("b", 9, 2.0),
                // A tie goes to the older backlog.
                tenant("c", 5, 30.0),
                tenant(OTHER_TENANTS, 6, 99.0),
            ]
        );
        // Fewer tenants than N: every one, and an empty `other`.
        let all = top_tenants(tenants.clone(), 10);
        assert_eq!(all.len(), 5);
        assert_eq!(all.last(), Some(&tenant(OTHER_TENANTS, 0, 0.0)));
        // N = 0: only `other`, holding everything.
        assert_eq!(
            top_tenants(tenants, 0),
            vec![tenant(OTHER_TENANTS, 20, 99.0)]
        );
        assert_eq!(
            top_tenants(Vec::new(), 3),
            vec![tenant(OTHER_TENANTS, 0, 0.0)]
        );
    }

    #[test]
    fn tenant_gauges_render_with_their_labels() {
        let state = QueueState {
            tenants: vec![tenant("0190-t", 4, 2.5), tenant(OTHER_TENANTS, 1, 0.5)],
            ..QueueState::default()
        };
        let text = render(&state, 0.0, 1);
        assert!(text.contains("quire_tenant_queued_jobs{tenant=\"0190-t\"} 4"));
        assert!(text.contains("quire_tenant_queued_jobs{tenant=\"other\"} 1"));
        assert!(text.contains("quire_tenant_oldest_queued_job_seconds{tenant=\"0190-t\"} 2.5"));
        // A snapshot stored before these fields existed still parses.
        let old = serde_json::json!({
            "jobs": [], "outbox": [], "outbox_lag_seconds": 0.0, "oldest_queued_seconds": 0.0,
            "queue_lengths": null, "workers_live": 0, "live_slots": 0, "live_slots_busy": 0
        });
        let parsed: QueueState = serde_json::from_value(old).expect("an older snapshot");
        assert!(parsed.tenants.is_empty());
    }
}
