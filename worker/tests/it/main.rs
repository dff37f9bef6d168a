//! Integration tests of the worker against real PostgreSQL and Redis started by
//! scripts/test: the batch claim, duplicate and malformed deliveries, retries, handler
//! panics, shutdown, cancellation, a slot freed before its finish commits, job types it no longer runs and the workers registry. One binary; a module per feature.

mod batch_claim;
mod cancellation;
mod duplicate_delivery;
mod panics;
mod presence;
mod retired_job_types;
mod shutdown;
mod slot_release;
mod support;
mod transient_retry;
