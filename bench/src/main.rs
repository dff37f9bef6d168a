use anyhow::Context;
use clap::Parser;
use quire_bench::BenchArgs;
use quire_shared::config::Settings;

fn main() -> anyhow::Result<()> {
    // Named threads: in perf, the bench's own HTTP client is told apart from the API's
    // blocking threads (tokio's default name).
    quire_shared::runtime::named("quire-bench")
        .context("failed to start the async runtime")?
        .block_on(async {
            let args = BenchArgs::parse();
            let (settings, _) = Settings::load().context("failed to load settings")?;
            quire_shared::telemetry::init("quire-bench", &settings.telemetry);
            quire_bench::run(settings, args).await
        })
}
