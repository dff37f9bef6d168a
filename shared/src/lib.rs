//! Quire's library crate: everything the API, the dispatcher and the worker share.

pub mod auth;
pub mod broker;
pub mod catalogue;
pub mod config;
pub mod db;
pub mod retry;
pub mod secret;
pub mod shutdown;
pub mod states;
pub mod storage;
pub mod telemetry;

#[cfg(feature = "test-support")]
pub mod test_support;
