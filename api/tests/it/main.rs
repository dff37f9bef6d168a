//! Integration tests of the whole path, against real PostgreSQL and Redis started by
//! scripts/test. One binary; a module per feature.

mod admin_metrics;
mod analysis;
mod dashboard;
mod documents_api;
mod faults;
mod fixtures;
mod fleet;
mod helpers;
mod hostile;
mod image_memory;
mod intake;
mod integrity;
mod job_actions;
mod migrations;
mod observability;
mod openapi;
mod ops_sessions;
mod permissions;
mod purge;
mod redis_cluster;
mod redis_outage;
mod retry;
mod route_walk;
mod sandbox;
mod search_bounds;
mod stale_runs;
mod statement_timeouts;
mod tenancy;
mod tenant_deletion;
mod tenant_isolation;
mod tls;
mod trash;
mod upload_flow;
mod wipe_races;
