use anyhow::Context;
use clap::Parser;
use quire_api::cli::{Cli, run};
use quire_shared::config::Settings;

fn main() -> anyhow::Result<()> {
    // Named threads: in perf, the bench's own HTTP client is told apart from the API's
    // blocking threads (tokio's default name).
    quire_shared::runtime::named("quire-admin")
        .context("failed to start the async runtime")?
        .block_on(async {
            let cli = Cli::parse();
            let (settings, _) = Settings::load().context("failed to load settings")?;
            quire_shared::telemetry::init("quire-admin", &settings.telemetry);
            run(cli, settings).await
        })
}
