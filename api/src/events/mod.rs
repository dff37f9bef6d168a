//! The tenant event stream behind `GET /api/events` (`routes/events.rs`): the process's
//! open streams and their caps (`hub.rs`), its one LISTEN connection (`listener.rs`),
//! each stream's reader and bounded buffer (`stream.rs`) and the opaque ids
//! (`cursor.rs`). The log itself and its reads are `quire_shared::db::tenant_events`
//! and `db::event_stream`.

pub mod cursor;
pub mod hub;
mod listener;
pub mod stream;

pub use hub::{EventHub, Refused};
pub use listener::listen;
pub use stream::StreamConfig;
