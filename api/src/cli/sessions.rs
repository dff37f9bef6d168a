//! `quire-admin sessions …`: the dashboard's live sessions, and ending them at once
//! (`quire_shared::actions::ops_sessions`, as the dashboard's logout does).

use anyhow::bail;
use clap::Subcommand;
use quire_shared::actions::ops_sessions::{self, Revoke};
use quire_shared::config::Settings;
use uuid::Uuid;

use super::connect;

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Live dashboard sessions, oldest first: id, operator, token id, opened, expires.
    List,
    /// End dashboard sessions now: one by id, every one of an operator, or all.
    Revoke {
        /// The session id `sessions list` shows.
        id: Option<Uuid>,
        /// Every session of this operator (as their tokens name them).
        #[arg(long, conflicts_with = "id")]
        operator: Option<String>,
        /// Every session.
        #[arg(long, conflicts_with_all = ["id", "operator"])]
        all: bool,
    },
}

pub async fn run(command: SessionsCommand, settings: &Settings) -> anyhow::Result<()> {
    let pool = connect(settings).await?;
    let mut conn = pool.get().await?;
    match command {
        SessionsCommand::List => {
            for session in ops_sessions::list(&mut conn).await? {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    session.id,
                    session.operator,
                    session.token_id.as_deref().unwrap_or("-"),
                    session.created_at,
                    session.expires_at
                );
            }
        }
        SessionsCommand::Revoke { id, operator, all } => {
            let which = match (id, operator, all) {
                (Some(id), None, false) => Revoke::Session(id),
                (None, Some(operator), false) => Revoke::Operator(operator),
                (None, None, true) => Revoke::All,
                _ => bail!("name a session id, --operator NAME or --all"),
            };
            let revoked = ops_sessions::revoke(&mut conn, &which).await?;
            tracing::info!(?which, revoked, "revoked dashboard sessions");
            println!("revoked {revoked}");
        }
    }
    Ok(())
}
