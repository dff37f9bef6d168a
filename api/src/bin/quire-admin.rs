use anyhow::Context;
use clap::Parser;
use quire_api::admin::{Cli, run};
use quire_shared::config::Settings;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (settings, _) = Settings::load().context("failed to load settings")?;
    quire_shared::telemetry::init("quire-admin", &settings.telemetry);
    run(cli, settings).await
}
