//! `quire-admin tenant delete|reset`: builds `v2|tenant_id|tenant_name|action|
//! remove_tenant|final_status|nonce|issued_at`, signs it under the key derived from the server secret, and
//! submits it to the API with a short-lived operator token. The API checks it before it
//! marks the tenant `deleting`; the worker checks it again before it wipes anything.

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use quire_shared::config::Settings;
use quire_shared::signing::{DeletionAction, TenantDeletionRequest, new_nonce};
use quire_shared::states::TenantStatus;
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Debug, Args)]
pub struct DeletionArgs {
    /// The tenant's id.
    #[arg(long)]
    tenant: Uuid,
    /// The tenant's exact name: a second key, so a mistyped id deletes nothing.
    #[arg(long)]
    name: String,
    /// Remove the tenant row too (delete only; the name becomes free).
    #[arg(long)]
    remove_tenant: bool,
    /// The state the tenant is left in: active or suspended (default suspended).
    #[arg(long, value_parser = parse_final_status)]
    final_status: Option<TenantStatus>,
    /// The API's base URL (default: http://<server.host>:<server.port>, https:// when
    /// server.tls_cert is set).
    #[arg(long)]
    api_url: Option<String>,
    /// A PEM file of the CA certificates the API's HTTPS certificate must chain to,
    /// instead of the system store. The host name is always checked.
    #[arg(long)]
    api_ca_file: Option<std::path::PathBuf>,
    /// Return once the API accepted the request, without waiting for the job.
    #[arg(long)]
    no_wait: bool,
    #[arg(long, default_value_t = 300)]
    timeout_seconds: u64,
}

fn parse_final_status(text: &str) -> Result<TenantStatus, String> {
    match TenantStatus::parse(text) {
        Some(status @ (TenantStatus::Active | TenantStatus::Suspended)) => Ok(status),
        _ => Err("a tenant is left active or suspended".into()),
    }
}

fn problem(answer: &Value) -> String {
    format!(
        "{} ({})",
        answer["detail"].as_str().unwrap_or("no detail"),
        answer["code"].as_str().unwrap_or("no code")
    )
}

/// The client to the API: HTTP, or HTTPS verified against the system store or, with
/// `--api-ca-file`, against that file's CAs alone.
fn http_client(ca_file: Option<&std::path::Path>) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .https_only(false);
    if let Some(path) = ca_file {
        let pem = std::fs::read(path)
            .with_context(|| format!("cannot read --api-ca-file {}", path.display()))?;
        let certificates = reqwest::Certificate::from_pem_bundle(&pem)
            .with_context(|| format!("--api-ca-file {} is not PEM", path.display()))?;
        if certificates.is_empty() {
            bail!("--api-ca-file {} holds no certificate", path.display());
        }
        builder = builder.tls_built_in_root_certs(false);
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().context("failed to build the http client")
}

pub async fn submit(
    settings: &Settings,
    action: DeletionAction,
    args: DeletionArgs,
) -> anyhow::Result<()> {
    let request = TenantDeletionRequest::signed(
        settings.auth.jwt_secret.expose().as_bytes(),
        args.tenant,
        &args.name,
        action,
        args.remove_tenant,
        args.final_status,
        new_nonce(),
        OffsetDateTime::now_utc(),
    )
    .map_err(|error| anyhow::anyhow!("{error}"))?;
    let base = args.api_url.unwrap_or_else(|| {
        format!(
            "{}://{}:{}",
            settings.server.scheme(),
            settings.server.host,
            settings.server.port
        )
    });
    let base = base.trim_end_matches('/');
    let token = quire_shared::auth::mint_admin(
        &settings.auth,
        "quire-admin",
        Duration::from_secs(args.timeout_seconds + 60),
    )?;
    let http = http_client(args.api_ca_file.as_deref())?;
    let tenant_url = format!("{base}/api/admin/tenants/{}", args.tenant);
    let response = http
        .post(format!("{tenant_url}/deletion"))
        .bearer_auth(&token)
        .json(&request)
        .send()
        .await
        .with_context(|| format!("failed to reach the API at {base}"))?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        bail!(
            "the API refused the {} request: {}",
            action.as_str(),
            problem(&answer)
        );
    }
    let job_id = answer["job"]["id"].as_str().unwrap_or_default().to_owned();
    eprintln!("accepted: tenant {} is deleting, job {job_id}", args.tenant);
    if args.no_wait {
        println!("{job_id}");
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout_seconds);
    loop {
        let response = http.get(&tenant_url).bearer_auth(&token).send().await?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            println!("{job_id}\tSUCCEEDED\ttenant removed");
            return Ok(());
        }
        let answer: Value = response.json().await.unwrap_or_default();
        let job = answer["jobs"]
            .as_array()
            .and_then(|jobs| jobs.iter().find(|job| job["id"] == job_id.as_str()));
        match job.map(|job| job["status"].as_str().unwrap_or_default()) {
            Some("SUCCEEDED") => {
                println!(
                    "{job_id}\tSUCCEEDED\ttenant {}",
                    answer["tenant"]["status"].as_str().unwrap_or_default()
                );
                return Ok(());
            }
            Some(status @ ("FAILED" | "CANCELLED")) => {
                let job = job.cloned().unwrap_or_default();
                bail!(
                    "job {job_id} ended {status}: {}",
                    job["error_message"].as_str().unwrap_or("no message")
                );
            }
            _ if tokio::time::Instant::now() >= deadline => {
                bail!(
                    "job {job_id} has not finished after {}s",
                    args.timeout_seconds
                )
            }
            _ => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}
