//! Prometheus metrics: every metric's name, and the process's recorder. Every process
//! records counters and histograms of what it does itself through the `metrics` facade;
//! the queue's state (the gauges below "Queue state") is computed by one dispatcher at
//! most once per interval and stored, and the API's admin listener renders the stored
//! snapshot (`queue_state`). Names follow Prometheus conventions.
//!
//! Counters are recorded when the statement that makes the change succeeded; a
//! transaction rolled back afterwards (rare: the caller's own later failure) still
//! counts once.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

pub const JOBS_ENQUEUED: &str = "quire_jobs_enqueued_total";
pub const JOBS_CLAIMED: &str = "quire_jobs_claimed_total";
/// Label `outcome`: succeeded, failed, retried, cancelled.
pub const JOBS_FINISHED: &str = "quire_jobs_finished_total";
pub const JOBS_CANCELLED: &str = "quire_jobs_cancelled_total";
pub const JOB_RUN_SECONDS: &str = "quire_job_run_seconds";
pub const JOB_QUEUE_WAIT_SECONDS: &str = "quire_job_queue_wait_seconds";
pub const DUPLICATES_SKIPPED: &str = "quire_duplicate_deliveries_skipped_total";
/// Messages a worker popped and claimed in one statement.
pub const CLAIM_BATCH_SIZE: &str = "quire_claim_batch_size";
/// Successes a worker wrote in one statement.
pub const FINISH_BATCH_SIZE: &str = "quire_finish_batch_size";
pub const PUBLISH_BATCH_SIZE: &str = "quire_publish_batch_size";
pub const PUBLISH_FAILURES: &str = "quire_publish_failures_total";
pub const EVENTS_PUBLISHED: &str = "quire_events_published_total";
/// Events the process that recorded them published itself (the express path), a part of
/// `EVENTS_PUBLISHED`.
pub const EVENTS_EXPRESS: &str = "quire_events_published_express_total";
pub const RESCUES: &str = "quire_rescued_jobs_total";
pub const REPUBLISHED: &str = "quire_lost_messages_republished_total";
/// Label `job_type`: lost-message passes that skipped a list whose oldest message does
/// not parse, so nothing before it could be told lost.
pub const LOST_MESSAGES_UNKNOWN_TAIL: &str = "quire_lost_messages_unknown_tail_total";
// Storage GC (one dispatcher per interval runs a pass).
/// Objects no row named, older than the grace, deleted; and their bytes.
pub const STORAGE_GC_OBJECTS: &str = "quire_storage_gc_objects_collected_total";
pub const STORAGE_GC_BYTES: &str = "quire_storage_gc_bytes_collected_total";
/// Passes run (by the dispatcher that held the interval).
pub const STORAGE_GC_PASSES: &str = "quire_storage_gc_passes_total";
/// Failed listings, failed deletes and failed passes: rising means objects are piling up.
pub const STORAGE_GC_ERRORS: &str = "quire_storage_gc_errors_total";
pub const WORKER_SLOTS: &str = "quire_worker_slots";
pub const WORKER_SLOTS_BUSY: &str = "quire_worker_slots_busy";
// Queue state: computed by one dispatcher per interval, stored, and rendered from the
// stored snapshot by the API's admin listener (`queue_state`).
/// Seconds since the stored queue state was computed: rising past a few intervals means
/// no dispatcher refreshes it.
pub const QUEUE_STATE_AGE_SECONDS: &str = "quire_queue_state_age_seconds";
/// Refreshes of the stored queue state, by any dispatcher of the fleet.
pub const QUEUE_STATE_REFRESHES: &str = "quire_queue_state_refreshes_total";
pub const JOBS: &str = "quire_jobs";
pub const OUTBOX_EVENTS: &str = "quire_outbox_events";
pub const OUTBOX_LAG_SECONDS: &str = "quire_outbox_lag_seconds";
pub const OLDEST_QUEUED_SECONDS: &str = "quire_oldest_queued_job_seconds";
pub const QUEUE_LENGTH: &str = "quire_queue_length";
pub const WORKERS_LIVE: &str = "quire_workers_live";
pub const LIVE_SLOTS: &str = "quire_live_worker_slots";
pub const LIVE_SLOTS_BUSY: &str = "quire_live_worker_slots_busy";
// Pauses: read at each scrape by the API's admin listener (`pause_gauges`), two reads of
// tiny sets (the `queue_pauses` table, a partial index of paused tenants).
/// Label `queue`: 1 while that queue (a registered job type: bounded) is paused, else 0.
pub const QUEUE_PAUSED: &str = "quire_queue_paused";
pub const PAUSED_QUEUES: &str = "quire_paused_queues";
pub const PAUSED_TENANTS: &str = "quire_paused_tenants";
/// Requests the enqueue rate limit refused (429).
pub const ENQUEUE_RATE_LIMITED: &str = "quire_enqueue_rate_limited_total";
/// Event streams (`GET /api/events`) open in this API process.
pub const EVENT_STREAMS_OPEN: &str = "quire_event_streams_open";
/// Label `reason`: `slow_client` (its buffer stayed full), `pruned` (it fell behind the
/// retention window), `refused_tenant` / `refused_process` (a cap answered 429 / 503).
pub const EVENT_STREAMS_DROPPED: &str = "quire_event_streams_dropped_total";
/// Label `tenant`: a tenant's id for the top N by queued jobs, `other` for the rest.
pub const TENANT_QUEUED_JOBS: &str = "quire_tenant_queued_jobs";
/// Label `tenant`, as for `TENANT_QUEUED_JOBS`.
pub const TENANT_OLDEST_QUEUED_SECONDS: &str = "quire_tenant_oldest_queued_job_seconds";

/// Seconds, from a millisecond to ten minutes.
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 600.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process's recorder once and returns the handle that renders it.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets(SECONDS_BUCKETS)
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            // Another recorder may be installed already (tests embed several components
            // in one process): this handle then renders an empty registry.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// The process's own metrics in the text format.
pub fn render() -> String {
    let handle = install();
    handle.run_upkeep();
    handle.render()
}
