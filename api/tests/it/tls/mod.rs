//! TLS to every backend, against real servers serving certificates each test makes: a
//! PostgreSQL that accepts TLS connections only, a Redis whose only port speaks TLS,
//! and the API over HTTPS with `quire-admin` as its client.

mod certs;
mod https;
mod pipeline;
mod postgres;
mod redis;
