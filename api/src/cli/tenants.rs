//! `quire-admin tenant …`. Create, suspend, activate, limits, dates, pause and resume use the
//! same library functions as the admin routes, straight against the database; delete and reset are signed here
//! and submitted to the API, which checks them before anything changes.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Subcommand;
use diesel_async::AsyncPgConnection;
use quire_shared::actions::ActionError;
use quire_shared::actions::scheduling;
use quire_shared::actions::settings::{
    self as tenant_settings, Changer, DateSettings, DateSettingsChange,
};
use quire_shared::actions::tenants as tenant_actions;
use quire_shared::analysis::dates::DateLanguage;
use quire_shared::config::Settings;
use quire_shared::db::members;
use quire_shared::db::tenants::{self, LimitsChange, Tenant};
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
    /// Show a tenant with its limits and pause.
    Show {
        /// Tenant id or name.
        #[arg(long)]
        tenant: String,
    },
    /// Set a tenant's limits; those not named stay as they are, "default" gives one back
    /// to the configuration.
    Limits {
        /// Tenant id or name.
        #[arg(long)]
        tenant: String,
        /// Weight in the fair share between tenants, 1 to 1000.
        #[arg(long)]
        share_weight: Option<i32>,
        /// Cap on concurrently running jobs (1 to 100000), or "default".
        #[arg(long, value_parser = parse_limit)]
        max_running_jobs: Option<Limit>,
        /// Enqueue rate on the API in jobs per second (1 to 100000), or "default".
        #[arg(long, value_parser = parse_limit)]
        enqueue_rate_per_second: Option<Limit>,
        /// Jobs enqueued at once (1 to 100000), or "default".
        #[arg(long, value_parser = parse_limit)]
        enqueue_burst: Option<Limit>,
    },
    /// Show or set how a tenant's documents are dated: the languages month names are read
    /// in and the order of an ambiguous numeric date. Those not named stay as they are,
    /// "default" gives one back to the configuration; with neither it only shows them.
    Dates {
        /// Tenant id or name.
        #[arg(long)]
        tenant: String,
        /// Comma-separated codes of en, de, fr, es, it, nl, pt, or "default".
        #[arg(long)]
        languages: Option<String>,
        /// dmy, mdy or ymd, or "default".
        #[arg(long)]
        order: Option<String>,
    },
    /// Pause a tenant's processing: its queued jobs are held (not failed) until resumed.
    Pause {
        /// Tenant id or name.
        #[arg(long)]
        tenant: String,
    },
    /// Resume a tenant's processing: its held jobs continue.
    Resume {
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

/// A nullable limit on the command line: a number, or the configuration's default.
#[derive(Debug, Clone, Copy)]
pub struct Limit(Option<i32>);

fn parse_limit(text: &str) -> Result<Limit, String> {
    if text == "default" {
        return Ok(Limit(None));
    }
    text.parse()
        .map(|value| Limit(Some(value)))
        .map_err(|_| format!("{text:?} is neither a number nor \"default\""))
}

/// Who the pauses and limits name: the command line has no operator token.
const OPERATOR: &str = "quire-admin";

/// One line: id, name, status, then each limit (`default` for the configuration's) and
/// the pause (`-` when not paused).
fn print_controls(tenant: &Tenant) {
    let limit = |value: Option<i32>| value.map_or("default".to_owned(), |value| value.to_string());
    println!(
        "{}\t{}\t{}\tshare_weight={}\tmax_running_jobs={}\tenqueue_rate_per_second={}\tenqueue_burst={}\tpaused_at={}",
        tenant.id,
        tenant.name,
        tenant.status,
        tenant.share_weight,
        limit(tenant.max_running_jobs),
        limit(tenant.enqueue_rate_per_second),
        limit(tenant.enqueue_burst),
        tenant
            .processing_paused_at
            .map_or("-".to_owned(), |at| at.to_string()),
    );
}

/// One line: id, name, the tenant's own date languages and order (`default` for the
/// configuration's), and what the analysis uses.
fn print_dates(tenant: &Tenant, dates: &DateSettings) {
    let codes = |languages: &[DateLanguage]| {
        languages
            .iter()
            .map(|language| language.code())
            .collect::<Vec<_>>()
            .join(",")
    };
    println!(
        "{}\t{}\tdate_languages={}\tdate_order={}\teffective={}/{}",
        tenant.id,
        tenant.name,
        dates
            .languages
            .as_deref()
            .map_or("default".to_owned(), codes),
        dates.order.map_or("default", |order| order.as_str()),
        codes(dates.effective.languages.languages().as_slice()),
        dates.effective.order.as_str(),
    );
}

/// A setting on the command line: absent, "default", or a value.
fn named_setting(value: Option<String>) -> Option<Option<String>> {
    value.map(|value| (value != "default").then_some(value))
}

/// An action's refusal as the command says it.
fn refused(tenant: &str, error: ActionError) -> anyhow::Error {
    match error {
        ActionError::NotFound => anyhow::anyhow!("no tenant {tenant:?}"),
        ActionError::Invalid { detail, .. } => anyhow::anyhow!(detail),
        other => anyhow::Error::from(other).context("change the tenant"),
    }
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
        TenantCommand::Show { tenant } => print_controls(&find(&mut conn, &tenant).await?),
        TenantCommand::Limits {
            tenant,
            share_weight,
            max_running_jobs,
            enqueue_rate_per_second,
            enqueue_burst,
        } => {
            let found = find(&mut conn, &tenant).await?;
            let change = LimitsChange {
                share_weight,
                max_running_jobs: max_running_jobs.map(|limit| limit.0),
                enqueue_rate_per_second: enqueue_rate_per_second.map(|limit| limit.0),
                enqueue_burst: enqueue_burst.map(|limit| limit.0),
            };
            let changed = scheduling::set_limits(&mut conn, found.id, change, OPERATOR)
                .await
                .map_err(|error| refused(&tenant, error))?;
            print_controls(&changed);
        }
        TenantCommand::Dates {
            tenant,
            languages,
            order,
        } => {
            let found = find(&mut conn, &tenant).await?;
            let dates = if languages.is_none() && order.is_none() {
                tenant_settings::date_settings(&mut conn, found.id, &settings.analysis).await
            } else {
                let change = DateSettingsChange {
                    languages: named_setting(languages).map(|named| {
                        named.map(|codes| codes.split(',').map(str::to_owned).collect())
                    }),
                    order: named_setting(order),
                };
                let changer = Changer::Operator {
                    tenant_id: found.id,
                    name: OPERATOR,
                };
                tenant_settings::change_date_settings(
                    &mut conn,
                    changer,
                    change,
                    &settings.analysis,
                )
                .await
            };
            print_dates(&found, &dates.map_err(|error| refused(&tenant, error))?);
        }
        TenantCommand::Pause { tenant } => {
            let found = find(&mut conn, &tenant).await?;
            let paused = scheduling::pause_tenant(&mut conn, found.id, OPERATOR)
                .await
                .map_err(|error| refused(&tenant, error))?;
            print_controls(&paused);
        }
        TenantCommand::Resume { tenant } => {
            let found = find(&mut conn, &tenant).await?;
            let (resumed, _) = scheduling::resume_tenant(&mut conn, found.id, OPERATOR)
                .await
                .map_err(|error| refused(&tenant, error))?;
            print_controls(&resumed);
        }
        TenantCommand::Delete(_) | TenantCommand::Reset(_) => {}
    }
    Ok(())
}
