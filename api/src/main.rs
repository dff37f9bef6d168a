use anyhow::Context;
use quire_shared::config::Settings;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (settings, _) = Settings::load().context("failed to load settings")?;
    quire_shared::telemetry::init("quire-api", &settings.telemetry);
    let shutdown = quire_shared::shutdown::on_signal();
    quire_api::run(settings, shutdown).await
}
