//! `quire-admin`: operator commands. Each prints its result on stdout so scripts can use
//! it; logs go to stderr.

mod deletion;
mod inspect;
mod queues;
mod sessions;
mod storage;
mod tenants;

use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use quire_shared::config::Settings;
use quire_shared::db::{self, PgPool, members, migrate};
use uuid::Uuid;

pub use deletion::DeletionArgs;
pub use tenants::TenantCommand;

#[derive(Debug, Parser)]
#[command(name = "quire-admin", about = "Operate a Quire installation", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply pending database migrations (embedded in this binary).
    Migrate,
    /// Manage tenants: create, list, show, suspend, activate, limits, pause, resume,
    /// delete, reset.
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// List, pause and resume queues (one per job type).
    Queue {
        #[command(subcommand)]
        command: queues::QueueCommand,
    },
    /// Inspect, retry and cancel jobs.
    Jobs {
        #[command(subcommand)]
        command: inspect::JobsCommand,
    },
    /// Jobs by type and status, outbox events and lag, Redis list lengths.
    Stats,
    /// Live workers and their busy slots.
    Workers,
    /// List and revoke the dashboard's (/ops) sessions.
    Sessions {
        #[command(subcommand)]
        command: sessions::SessionsCommand,
    },
    /// Move the stored objects to another store: `storage migrate --from-dir PATH`.
    Storage {
        #[command(subcommand)]
        command: storage::StorageCommand,
    },
    /// Mint a bearer token for a member of a tenant.
    Token {
        /// Tenant id or name.
        #[arg(long)]
        tenant: String,
        /// User id (a UUID); must be a member of the tenant.
        #[arg(long)]
        user: Uuid,
        /// Lifetime in seconds (default: auth.token_ttl_seconds).
        #[arg(long)]
        ttl_seconds: Option<u64>,
    },
    /// Mint an operator token for the admin routes (/api/admin/...).
    AdminToken {
        /// Who the token is for; recorded in the API's log of admin actions.
        #[arg(long)]
        operator: String,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 900)]
        ttl_seconds: u64,
    },
}

pub(crate) async fn connect(settings: &Settings) -> anyhow::Result<PgPool> {
    let pool = db::build_pool(&settings.database)?;
    db::ping(&pool)
        .await
        .context("failed to connect to the database")?;
    Ok(pool)
}

pub async fn run(cli: Cli, settings: Settings) -> anyhow::Result<()> {
    match cli.command {
        Command::Migrate => {
            let applied = migrate::run_pending(settings.database.url.expose())
                .await
                .context("failed to migrate")?;
            if applied.is_empty() {
                println!("schema is current");
            }
            for version in applied {
                println!("applied {version}");
            }
        }
        Command::Tenant { command } => tenants::run(command, &settings).await?,
        Command::Queue { command } => queues::run(command, &settings).await?,
        Command::Jobs { command } => inspect::jobs(command, &settings).await?,
        Command::Stats => inspect::stats(&settings).await?,
        Command::Workers => inspect::workers(&settings).await?,
        Command::Sessions { command } => sessions::run(command, &settings).await?,
        Command::Storage { command } => storage::run(command, &settings).await?,
        Command::Token {
            tenant,
            user,
            ttl_seconds,
        } => {
            let pool = connect(&settings).await?;
            let mut conn = pool.get().await?;
            let found = tenants::find(&mut conn, &tenant).await?;
            let access = members::resolve_access(&mut conn, found.id, user).await?;
            if access.and_then(|access| access.permissions).is_none() {
                bail!(
                    "user {user} is not a member of tenant {:?}: add them with POST /api/members \
                     (as an owner) or name them when the tenant is created",
                    found.name
                );
            }
            let ttl = Duration::from_secs(ttl_seconds.unwrap_or(settings.auth.token_ttl_seconds));
            let token = quire_shared::auth::mint(&settings.auth, found.id, user, ttl)?;
            println!("{token}");
        }
        Command::AdminToken {
            operator,
            ttl_seconds,
        } => {
            let operator = operator.trim();
            if operator.is_empty() {
                bail!("--operator names who the token is for");
            }
            let token = quire_shared::auth::mint_admin(
                &settings.auth,
                operator,
                Duration::from_secs(ttl_seconds),
            )?;
            println!("{token}");
        }
    }
    Ok(())
}
