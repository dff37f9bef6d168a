//! The async runtime of Quire's binaries.

/// A multi-threaded runtime whose threads carry `name`: `top -H` and perf tell each
/// process's threads from the others' (tokio's default name is the same everywhere).
pub fn named(name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .build()
}
