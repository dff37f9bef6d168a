//! Webhook deliveries, the parts that do not touch the database: where a delivery may
//! go ([`target`]), how it is signed ([`signature`]) and how it is sent ([`sender`]).
//! The subscriptions and deliveries are `db::webhooks`, the actions
//! `actions::webhooks`, the delivery itself the `deliver-webhook` job.

pub mod sender;
pub mod signature;
pub mod target;
