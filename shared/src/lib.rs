//! Quire's library crate: everything the API, the dispatcher and the worker share.

pub mod actions;
pub mod analysis;
pub mod auth;
pub mod broker;
pub mod config;
pub mod db;
pub mod events;
pub mod fault_points;
pub mod health;
pub mod integrity;
pub mod jobs;
pub mod matching;
pub mod metrics;
pub mod pause_gauges;
pub mod permissions;
pub mod probe_listener;
pub mod process;
pub mod publishing;
pub mod queue_state;
pub mod redis_client;
pub mod retry;
pub mod runtime;
pub mod schedules;
pub mod scheduling;
pub mod search;
pub mod secret;
pub mod shutdown;
pub mod signing;
pub mod states;
pub mod storage;
pub mod telemetry;
pub mod tls;
pub mod webhook;

#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
