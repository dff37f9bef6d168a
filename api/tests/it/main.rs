//! Integration tests of the whole path, against real PostgreSQL and Redis started by
//! scripts/test. One binary; a module per feature.

mod analysis;
mod batch_claim;
mod dashboard;
mod documents_api;
mod duplicate_delivery;
mod faults;
mod fixtures;
mod helpers;
mod hostile;
mod intake;
mod integrity;
mod lost_messages;
mod migrations;
mod observability;
mod openapi;
mod permissions;
mod purge;
mod redis_cluster;
mod redis_outage;
mod rescue_race;
mod retry;
mod route_walk;
mod shutdown;
mod tenancy;
mod tenant_deletion;
mod tenant_isolation;
mod transient_retry;
mod trash;
mod upload_flow;
