//! `quire-admin queue list|pause|resume`: the same actions as the admin routes and the
//! dashboard, straight against the database.

use clap::Subcommand;
use quire_shared::actions::{ActionError, scheduling};
use quire_shared::config::Settings;
use quire_shared::db::pauses;

use super::connect;

#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Every queue: name, then `paused` with when and by whom, or `running`.
    List,
    /// Pause a queue: its queued jobs are held (not failed) until it is resumed.
    Pause {
        /// The job type, e.g. analyze-document.
        queue: String,
    },
    /// Resume a queue: its held jobs continue.
    Resume {
        /// The job type, e.g. analyze-document.
        queue: String,
    },
}

/// Who the pauses name: the command line has no operator token.
const OPERATOR: &str = "quire-admin";

fn refused(queue: &str, error: ActionError) -> anyhow::Error {
    match error {
        ActionError::NotFound => anyhow::anyhow!(
            "no queue {queue:?}: a queue is a job type (quire-admin queue list names them)"
        ),
        other => anyhow::Error::from(other).context("change the queue"),
    }
}

pub async fn run(command: QueueCommand, settings: &Settings) -> anyhow::Result<()> {
    let pool = connect(settings).await?;
    let mut conn = pool.get().await?;
    match command {
        QueueCommand::List => {
            let paused = pauses::paused_queues(&mut conn).await?;
            let mut names: Vec<&str> = quire_shared::jobs::job_types().collect();
            names.sort_unstable();
            for queue in names {
                match paused.iter().find(|pause| pause.queue == queue) {
                    Some(pause) => {
                        println!("{queue}\tpaused\t{}\t{}", pause.paused_at, pause.paused_by)
                    }
                    None => println!("{queue}\trunning"),
                }
            }
        }
        QueueCommand::Pause { queue } => {
            let pause = scheduling::pause_queue(&mut conn, &queue, OPERATOR)
                .await
                .map_err(|error| refused(&queue, error))?;
            println!(
                "{}\tpaused\t{}\t{}",
                pause.queue, pause.paused_at, pause.paused_by
            );
        }
        QueueCommand::Resume { queue } => {
            let resumed = scheduling::resume_queue(&mut conn, &queue, OPERATOR)
                .await
                .map_err(|error| refused(&queue, error))?;
            if !resumed.was_paused {
                println!("{queue}\trunning\t(was not paused)");
            } else {
                println!("{queue}\trunning\treannounced={}", resumed.reannounced);
            }
        }
    }
    Ok(())
}
