//! `quire-admin`: operator commands. Each prints its result on stdout so scripts can use
//! it; logs go to stderr.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use quire_shared::config::Settings;
use quire_shared::db::{self, migrate, tenants};
use quire_shared::states::TenantStatus;
use uuid::Uuid;

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
    /// Manage tenants.
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// Mint a bearer token for a user of a tenant.
    Token {
        /// Tenant id or name.
        #[arg(long)]
        tenant: String,
        /// User id (a UUID).
        #[arg(long)]
        user: Uuid,
        /// Lifetime in seconds (default: auth.token_ttl_seconds).
        #[arg(long)]
        ttl_seconds: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create an active tenant and print its id.
    Create {
        #[arg(long)]
        name: String,
        /// Succeed and print the existing id when the name is taken.
        #[arg(long)]
        if_missing: bool,
    },
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
        Command::Tenant {
            command: TenantCommand::Create { name, if_missing },
        } => {
            let name = name.trim();
            if name.is_empty() || name.chars().count() > 100 {
                bail!("a tenant name has 1 to 100 characters");
            }
            let pool = db::build_pool(&settings.database)?;
            let mut conn = pool
                .get()
                .await
                .context("failed to connect to the database")?;
            if let Some(existing) = tenants::find_tenant_by_name(&mut conn, name).await? {
                if if_missing {
                    println!("{}", existing.id);
                    return Ok(());
                }
                bail!("a tenant named {name:?} exists already ({})", existing.id);
            }
            let tenant = tenants::create_tenant(&mut conn, name, TenantStatus::Active).await?;
            println!("{}", tenant.id);
        }
        Command::Token {
            tenant,
            user,
            ttl_seconds,
        } => {
            let pool = db::build_pool(&settings.database)?;
            let mut conn = pool
                .get()
                .await
                .context("failed to connect to the database")?;
            let found = match Uuid::parse_str(&tenant) {
                Ok(id) => tenants::find_tenant(&mut conn, id).await?,
                Err(_) => tenants::find_tenant_by_name(&mut conn, &tenant).await?,
            };
            let found = found.with_context(|| format!("no tenant {tenant:?}"))?;
            let ttl = Duration::from_secs(ttl_seconds.unwrap_or(settings.auth.token_ttl_seconds));
            let token = quire_shared::auth::mint(&settings.auth, found.id, user, ttl)?;
            println!("{token}");
        }
    }
    Ok(())
}
