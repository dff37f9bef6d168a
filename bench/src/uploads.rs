//! The HTTP half of the bench: multipart uploads to a `quire-api` process of the bench's
//! own, from concurrent clients, each answered `201` with its document
//! recorded and its job and outbox event committed.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::StreamExt;
use quire_shared::config::Settings;
use quire_shared::process::free_port;
use reqwest::multipart::{Form, Part};
use uuid::Uuid;

use crate::stack::launch;
use crate::usage::Usage;

pub struct UploadRun {
    pub uploads_per_second: f64,
    pub api_peak_rss: u64,
    /// The analyze-document jobs the uploads enqueued.
    pub job_ids: Vec<Uuid>,
}

pub struct UploadPlan<'a> {
    pub settings: &'a Settings,
    pub namespace: &'a str,
    pub tenant_id: Uuid,
    pub user_id: Uuid,
    pub count: usize,
    pub clients: usize,
    pub file_size: usize,
}

pub async fn run(plan: UploadPlan<'_>) -> anyhow::Result<UploadRun> {
    let port = free_port()?;
    let mut api = launch("quire-api", plan.namespace)?
        .env("QUIRE__SERVER__HOST", "127.0.0.1")
        .env("QUIRE__SERVER__PORT", port.to_string())
        // The enqueue rate limit stays on (its statement is part of an upload's cost),
        // at a rate no run reaches: the bench measures the stack, not the limit.
        .env("QUIRE__ENQUEUE_LIMIT__PER_SECOND", "100000")
        .env("QUIRE__ENQUEUE_LIMIT__BURST", "100000")
        .spawn()?;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(plan.clients)
        .build()?;
    wait_ready(&http, &base).await?;
    let token = quire_shared::auth::mint(
        &plan.settings.auth,
        plan.tenant_id,
        plan.user_id,
        Duration::from_secs(3600),
    )?;
    // Distinct bodies (duplicates answer 409), made before the clock starts.
    let bodies: Vec<Vec<u8>> = (0..plan.count).map(|_| body(plan.file_size)).collect();
    let url = format!("{base}/api/documents");
    let started = Instant::now();
    let answers: Vec<anyhow::Result<Uuid>> = futures_util::stream::iter(bodies)
        .map(|bytes| upload(&http, &url, &token, bytes))
        .buffer_unordered(plan.clients.max(1))
        .collect()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let api_peak_rss = Usage::of(&api).peak_rss_bytes;
    api.kill().await;
    let job_ids = answers.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    Ok(UploadRun {
        uploads_per_second: job_ids.len() as f64 / seconds.max(f64::EPSILON),
        api_peak_rss,
        job_ids,
    })
}

/// Waits until the API answers `/readyz` (it connects to PostgreSQL and Redis first).
async fn wait_ready(http: &reqwest::Client, base: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = http.get(format!("{base}/readyz")).send().await;
        if matches!(&ready, Ok(response) if response.status().is_success()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the bench's quire-api did not become ready in 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A plain-text letter of `size` bytes that no other upload repeats.
fn body(size: usize) -> Vec<u8> {
    let mut text = format!("bench upload {}\n", Uuid::new_v4()).into_bytes();
    let line = b"Quire measures how fast it takes a document in.\n";
    while text.len() < size {
        text.extend_from_slice(line);
    }
    text.truncate(size.max(1));
    text
}

async fn upload(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    bytes: Vec<u8>,
) -> anyhow::Result<Uuid> {
    let part = Part::bytes(bytes)
        .file_name("bench.txt")
        .mime_str("text/plain")?;
    let response = http
        .post(url)
        .bearer_auth(token)
        .multipart(Form::new().part("file", part))
        .send()
        .await
        .context("upload request failed")?;
    let status = response.status();
    if status != reqwest::StatusCode::CREATED {
        bail!("an upload answered {status}");
    }
    let answer: serde_json::Value = response.json().await.context("upload answer")?;
    answer
        .pointer("/job/id")
        .and_then(|id| id.as_str())
        .and_then(|id| Uuid::parse_str(id).ok())
        .context("an upload answer has no job id")
}
