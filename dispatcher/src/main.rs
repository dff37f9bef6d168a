use anyhow::Context;
use quire_shared::config::Settings;

fn main() -> anyhow::Result<()> {
    quire_shared::runtime::named("quire-dispatcher")
        .context("failed to start the async runtime")?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let (settings, _) = Settings::load().context("failed to load settings")?;
    quire_shared::telemetry::init("quire-dispatcher", &settings.telemetry);
    let shutdown = quire_shared::shutdown::on_signal();
    quire_dispatcher::run(settings, shutdown).await
}
