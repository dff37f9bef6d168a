//! Quire's library crate: everything the API, the dispatcher and the worker share.

pub mod admin_listener;
pub mod auth;
pub mod broker;
pub mod catalogue;
pub mod config;
pub mod db;
pub mod health;
pub mod metrics;
pub mod permissions;
pub mod process;
pub mod redis_client;
pub mod retry;
pub mod runtime;
pub mod search;
pub mod secret;
pub mod shutdown;
pub mod signing;
pub mod states;
pub mod storage;
pub mod telemetry;
pub mod tenancy;

#[cfg(feature = "test-support")]
pub mod test_support;
