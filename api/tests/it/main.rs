//! Integration tests of the whole path, against real PostgreSQL and Redis started by
//! scripts/test. One binary; a module per feature.

mod analysis;
mod dashboard;
mod documents_api;
mod faults;
mod fixtures;
mod helpers;
mod hostile;
mod image_memory;
mod intake;
mod integrity;
mod job_actions;
mod migrations;
mod observability;
mod openapi;
mod permissions;
mod purge;
mod redis_cluster;
mod redis_outage;
mod retry;
mod route_walk;
mod sandbox;
mod search_bounds;
mod tenancy;
mod tenant_deletion;
mod tenant_isolation;
mod trash;
mod upload_flow;
