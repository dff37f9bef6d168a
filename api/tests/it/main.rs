//! Integration tests of the whole path, against real PostgreSQL and Redis started by
//! scripts/test. One binary; a module per feature.

mod duplicate_delivery;
mod helpers;
mod integrity;
mod migrations;
mod redis_outage;
mod tenant_isolation;
mod upload_flow;
