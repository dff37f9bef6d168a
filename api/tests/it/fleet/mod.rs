//! The fleet on separate hosts: network namespaces the test makes (`net.rs`), one host
//! with PostgreSQL, Redis and SeaweedFS, one with the API, two with a dispatcher and a
//! worker each (`stack.rs`), the built binaries as child processes. The API and the
//! workers share no folder: they meet only through PostgreSQL, Redis and S3. Needs root
//! (CI and scripts/test run as root) and iproute2.
//!
//! It loads both cores like a fault scenario, so it takes the fault suite's turn.

mod checks;
mod net;
mod partitions;
mod seaweed;
mod stack;
mod uploads;
