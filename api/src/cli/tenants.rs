//! `quire-admin tenant …`. Create, suspend and activate use the same library functions
//! as the admin routes, straight against the database; delete and reset are signed here
//! and submitted to the API, which checks them before anything changes.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Subcommand;
use diesel_async::AsyncPgConnection;
use quire_shared::actions::ActionError;
use quire_shared::actions::tenants as tenant_actions;
use quire_shared::config::Settings;
use quire_shared::db::members;
use quire_shared::db::tenants::{self, Tenant};
use quire_shared::permissions::{CapabilitySet, MemberSpec};
use quire_shared::signing::DeletionAction;
use quire_shared::states::TenantStatus;
use uuid::Uuid;

use super::DeletionArgs;
use super::connect;

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create a tenant through provisioning (a dispatcher and a worker must run), wait
    /// until it is active, and print its id.
    Create {
        #[arg(long)]
        name: String,
        /// The first member; becomes `owner`.
        #[arg(long)]
        owner: Uuid,
        /// More members, as USER_ID or USER_ID:SET (owner, user, readonly, webdav);
        /// `user` when no set is given.
        #[arg(long = "member", value_parser = parse_member)]
        members: Vec<MemberSpec>,
        /// When the name is taken, succeed with the existing tenant instead, after making
        /// sure it has its capability sets and the named members (members it has keep
        /// their sets): how tenants from before permissions get their owner.
        #[arg(long)]
        if_missing: bool,
        /// Return at once instead of waiting for provisioning.
        #[arg(long)]
        no_wait: bool,
        #[arg(long, default_value_t = 60)]
        timeout_seconds: u64,
    },
    /// List tenants: id, status, name.
    List,
    /// Suspend an active tenant: reads keep working, writes answer 403.
    Suspend {
        /// Tenant id or name.
        #[arg(long)]
        tenant: String,
    },
    /// Activate a suspended tenant.
    Activate {
        /// Tenant id or name.
        #[arg(long)]
        tenant: String,
    },
    /// Delete a tenant: wipe its documents, members and index, then remove it (with
    /// --remove-tenant) or leave it in --final-status. Signed and sent to the API.
    Delete(DeletionArgs),
    /// Reset a tenant: wipe its documents and index, keep its members, leave it in
    /// --final-status (default suspended). Signed and sent to the API.
    Reset(DeletionArgs),
}

fn parse_member(text: &str) -> Result<MemberSpec, String> {
    let (user, set) = match text.split_once(':') {
        Some((user, set)) => (user, Some(set)),
        None => (text, None),
    };
    let user_id = Uuid::parse_str(user).map_err(|_| format!("{user:?} is not a user id"))?;
    let capability_set = match set {
        None => CapabilitySet::User,
        Some(set) => CapabilitySet::parse(set)
            .ok_or_else(|| format!("{set:?} is not one of owner, user, readonly, webdav"))?,
    };
    Ok(MemberSpec::WithSet {
        user_id,
        capability_set,
    })
}

/// A tenant by id or by name.
pub(crate) async fn find(conn: &mut AsyncPgConnection, tenant: &str) -> anyhow::Result<Tenant> {
    let found = match Uuid::parse_str(tenant) {
        Ok(id) => tenants::find_tenant(conn, id).await?,
        Err(_) => tenants::find_tenant_by_name(conn, tenant).await?,
    };
    found.with_context(|| format!("no tenant {tenant:?}"))
}

async fn wait_until_active(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let tenant = tenants::find_tenant(conn, tenant_id)
            .await?
            .context("the tenant disappeared while provisioning")?;
        if tenant.status == TenantStatus::Active {
            return Ok(());
        }
        if tenant.status != TenantStatus::Creating || tokio::time::Instant::now() >= deadline {
            bail!(
                "tenant {tenant_id} is still {} after {}s: is a dispatcher and a worker running? \
                 (quire-admin tenant list shows it; its provision-tenant job is at \
                 GET /api/admin/tenants/{tenant_id})",
                tenant.status,
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Prints the tenant an action moved, or says why it did not move.
fn print_moved(tenant: &str, moved: Result<Tenant, ActionError>) -> anyhow::Result<()> {
    match moved {
        Ok(moved) => println!("{}\t{}\t{}", moved.id, moved.status, moved.name),
        Err(ActionError::TenantState(status)) => bail!("tenant {tenant:?} is {status}"),
        Err(error) => return Err(error).context("change the tenant's status"),
    }
    Ok(())
}

pub async fn run(command: TenantCommand, settings: &Settings) -> anyhow::Result<()> {
    match command {
        TenantCommand::Delete(args) => {
            return super::deletion::submit(settings, DeletionAction::Delete, args).await;
        }
        TenantCommand::Reset(args) => {
            return super::deletion::submit(settings, DeletionAction::Reset, args).await;
        }
        _ => {}
    }
    let pool = connect(settings).await?;
    let mut conn = pool.get().await?;
    match command {
        TenantCommand::Create {
            name,
            owner,
            members,
            if_missing,
            no_wait,
            timeout_seconds,
        } => {
            let name = name.trim();
            let mut all = vec![MemberSpec::WithSet {
                user_id: owner,
                capability_set: CapabilitySet::Owner,
            }];
            all.extend(members);
            let created = tenant_actions::create_tenant(
                &mut conn,
                name,
                all.clone(),
                settings.jobs.max_attempts,
                None,
            )
            .await;
            let tenant_id = match created {
                Ok((tenant, _)) => tenant.id,
                Err(ActionError::TenantNameTaken) if if_missing => {
                    let existing = tenants::find_tenant_by_name(&mut conn, name)
                        .await?
                        .context("the tenant vanished")?;
                    // Provisioning attaches the members of a tenant still being created.
                    if existing.status != TenantStatus::Creating {
                        members::materialize(&mut conn, existing.id, &all).await?;
                    }
                    existing.id
                }
                Err(ActionError::TenantNameTaken) => {
                    bail!("a tenant named {name:?} exists already")
                }
                Err(error) => return Err(error.into()),
            };
            if !no_wait {
                wait_until_active(&mut conn, tenant_id, Duration::from_secs(timeout_seconds))
                    .await?;
            }
            println!("{tenant_id}");
        }
        TenantCommand::List => {
            for tenant in tenants::list_tenants(&mut conn).await? {
                println!("{}\t{}\t{}", tenant.id, tenant.status, tenant.name);
            }
        }
        TenantCommand::Suspend { tenant } => {
            let found = find(&mut conn, &tenant).await?;
            print_moved(&tenant, tenant_actions::suspend(&mut conn, found.id).await)?;
        }
        TenantCommand::Activate { tenant } => {
            let found = find(&mut conn, &tenant).await?;
            print_moved(&tenant, tenant_actions::activate(&mut conn, found.id).await)?;
        }
        TenantCommand::Delete(_) | TenantCommand::Reset(_) => {}
    }
    Ok(())
}
