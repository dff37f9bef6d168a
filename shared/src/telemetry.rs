//! Structured logging, set up once per process.

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, TelemetrySettings};

/// Installs the global subscriber: `RUST_LOG` wins over the configured filter. Calling it
/// again (tests start several components in one process) keeps the first subscriber.
pub fn init(service: &'static str, settings: &TelemetrySettings) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&settings.filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        // stdout belongs to command output (quire-admin prints ids and tokens there).
        .with_writer(std::io::stderr);
    let installed = match settings.format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
        LogFormat::Pretty => builder.compact().try_init(),
    };
    if installed.is_ok() {
        tracing::info!(service, "telemetry ready");
    }
}
