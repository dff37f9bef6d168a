use anyhow::Context;
use quire_shared::config::Settings;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (settings, _) = Settings::load().context("failed to load settings")?;
    quire_shared::telemetry::init("quire-dispatcher", &settings.telemetry);
    let shutdown = quire_shared::shutdown::on_signal();
    quire_dispatcher::run(settings, shutdown).await
}
