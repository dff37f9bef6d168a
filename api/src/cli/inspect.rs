//! `quire-admin jobs …`, `stats`, `workers`: the numbers the metrics and the dashboard
//! show, from the same queries, and the operator's two actions on a job.

use anyhow::{Context, bail};
use clap::Subcommand;
use quire_shared::actions::ActionError;
use quire_shared::actions::jobs::{self as job_actions, CANCELLED_BY_OPERATOR, JobScope};
use quire_shared::config::Settings;
use quire_shared::db::jobs::{self, Job, JobFilter};
use quire_shared::db::{stats, workers};
use quire_shared::states::JobStatus;
use uuid::Uuid;

use super::connect;

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Jobs, newest first: id, type, status, attempts, queued at, error code.
    List {
        /// QUEUED, RUNNING, SUCCEEDED, FAILED or CANCELLED.
        #[arg(long, value_parser = parse_status)]
        status: Option<JobStatus>,
        #[arg(long = "type")]
        job_type: Option<String>,
        #[arg(long)]
        tenant: Option<Uuid>,
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
    /// One job as JSON (its payload included: operators may see it, clients never do).
    Show { id: Uuid },
    /// Queue a FAILED job again with a fresh attempt budget.
    Retry { id: Uuid },
    /// Cancel a QUEUED or RUNNING job (a running handler stops at its next heartbeat).
    Cancel { id: Uuid },
}

fn parse_status(text: &str) -> Result<JobStatus, String> {
    JobStatus::parse(&text.to_ascii_uppercase())
        .ok_or_else(|| "one of QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED".to_owned())
}

fn line(job: &Job) -> String {
    format!(
        "{}\t{}\t{}\t{}/{}\t{}\t{}",
        job.id,
        job.job_type,
        job.status,
        job.attempts,
        job.max_attempts,
        job.queued_at,
        job.error_code.as_deref().unwrap_or("-")
    )
}

pub async fn jobs(command: JobsCommand, settings: &Settings) -> anyhow::Result<()> {
    let pool = connect(settings).await?;
    let mut conn = pool.get().await?;
    match command {
        JobsCommand::List {
            status,
            job_type,
            tenant,
            limit,
        } => {
            let filter = JobFilter {
                statuses: status.into_iter().collect(),
                oldest_first: false,
                job_type,
                tenant_id: tenant,
                limit: limit.clamp(1, 10_000),
            };
            for job in jobs::list_jobs(&mut conn, &filter).await? {
                println!("{}", line(&job));
            }
        }
        JobsCommand::Show { id } => {
            let job = jobs::find_job(&mut conn, id)
                .await?
                .context("no such job")?;
            let view = serde_json::json!({
                "id": job.id, "tenant_id": job.tenant_id, "document_id": job.document_id,
                "type": job.job_type, "status": job.status, "attempts": job.attempts,
                "max_attempts": job.max_attempts, "worker_id": job.worker_id,
                "payload": job.payload, "queued_at": job.queued_at.to_string(),
                "started_at": job.started_at.map(|at| at.to_string()),
                "finished_at": job.finished_at.map(|at| at.to_string()),
                "lease_expires_at": job.lease_expires_at.map(|at| at.to_string()),
                "error_code": job.error_code, "error_message": job.error_message,
            });
            println!("{}", serde_json::to_string_pretty(&view)?);
        }
        JobsCommand::Retry { id } => {
            match job_actions::retry(&mut conn, JobScope::Any, id, settings.jobs.max_attempts).await
            {
                Ok(job) => println!("{id}\t{}", job.status),
                Err(ActionError::NotFound) => bail!("no such job"),
                Err(error) => match error.current_status() {
                    Some(status) => bail!("job {id} is {status}, not FAILED: nothing to retry"),
                    None => return Err(error).context("retry the job"),
                },
            }
        }
        JobsCommand::Cancel { id } => {
            match job_actions::cancel(&mut conn, JobScope::Any, id, CANCELLED_BY_OPERATOR).await {
                Ok(job) => println!("{id}\t{}", job.status),
                Err(ActionError::NotFound) => bail!("no such job"),
                Err(error) => match error.current_status() {
                    Some(status) => {
                        bail!("job {id} is {status}: only QUEUED or RUNNING jobs can be cancelled")
                    }
                    None => return Err(error).context("cancel the job"),
                },
            }
        }
    }
    Ok(())
}

/// Jobs by type and status, the outbox, list lengths and lags.
pub async fn stats(settings: &Settings) -> anyhow::Result<()> {
    let pool = connect(settings).await?;
    let mut conn = pool.get().await?;
    println!("jobs");
    for row in stats::jobs_by_type_and_status(&mut conn).await? {
        println!("  {}\t{}\t{}", row.job_type, row.status, row.count);
    }
    println!("outbox events");
    for row in stats::events_by_status(&mut conn).await? {
        println!("  {}\t{}", row.status, row.count);
    }
    let events = stats::active_events(&mut conn).await?;
    let ages = stats::ages(&mut conn, &events).await?;
    println!("outbox lag\t{:.3}s", ages.outbox_lag_seconds);
    println!("oldest queued job\t{:.3}s", ages.oldest_queued_seconds);
    let redis = quire_shared::redis_client::RedisPool::build(&settings.redis)?;
    let types: Vec<&str> = quire_shared::jobs::public_job_types()
        .map(|spec| spec.job_type)
        .collect();
    match quire_shared::broker::queue_lengths(&redis, &settings.redis.namespace, &types).await {
        Ok(lengths) => {
            println!("redis lists");
            for (queue, length) in lengths {
                println!("  {queue}\t{length}");
            }
        }
        Err(error) => println!("redis lists\tunavailable ({error})"),
    }
    Ok(())
}

/// Live workers: id, host, pid, busy/total slots, analysis slots ("-" from a worker of
/// before they existed), queues, last seen.
pub async fn workers(settings: &Settings) -> anyhow::Result<()> {
    let pool = connect(settings).await?;
    let mut conn = pool.get().await?;
    for worker in workers::live(&mut conn).await? {
        println!(
            "{}\t{}\t{}\t{}/{}\t{}\t{}\t{}",
            worker.id,
            worker.host,
            worker.pid,
            worker.busy,
            worker.slots,
            worker.analysis_slots_label(),
            worker.queues.join(","),
            worker.last_seen_at
        );
    }
    Ok(())
}
