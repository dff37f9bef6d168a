//! Integration tests of the dispatcher against real PostgreSQL and Redis started by
//! scripts/test: its publisher and each maintenance service. One binary; a module per
//! feature.

mod claim_recovery;
mod lost_messages;
mod message_shape;
mod moved_rows;
mod plans;
mod redis_outage;
mod rescuer;
mod retention;
mod scheduler;
mod schedules;
mod storage_gc;
mod support;
mod worker_pruning;
