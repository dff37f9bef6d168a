//! The HTTP half of the bench: multipart uploads to a `quire-api` process of the bench's
//! own, from concurrent clients (the upload run) or at a fixed rate (the fairness
//! scenario's tenant B), each answered `201` with its document recorded and its job and
//! outbox event committed.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::StreamExt;
use quire_shared::config::Settings;
use quire_shared::process::{QuireProcess, free_port};
use reqwest::multipart::{Form, Part};
use uuid::Uuid;

use crate::stack::{Scope, launch};
use crate::usage::Usage;

pub struct UploadRun {
    pub uploads_per_second: f64,
    pub api_peak_rss: u64,
    /// The analyze-document jobs the uploads enqueued.
    pub job_ids: Vec<Uuid>,
}

pub struct UploadPlan<'a> {
    pub settings: &'a Settings,
    pub scope: &'a Scope,
    pub tenant_id: Uuid,
    pub user_id: Uuid,
    pub count: usize,
    pub clients: usize,
    pub file_size: usize,
}

/// A `quire-api` process of the bench's own on a free loopback port, ready.
pub struct Api {
    process: QuireProcess,
    client: ApiClient,
}

/// A client of the bench's API that a task can own: its connection pool (shared by
/// every clone) and the API's address.
#[derive(Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    base: String,
}

impl ApiClient {
    /// Uploads `bytes` as a tenant's member; the job id of the answer.
    pub async fn upload(&self, token: &str, bytes: Vec<u8>) -> anyhow::Result<Uuid> {
        upload(
            &self.http,
            &format!("{}/api/documents", self.base),
            token,
            bytes,
        )
        .await
    }

    /// `GET path` as a tenant's member, answered 200 with its whole body read: how long
    /// that took from the request's start, and the body.
    pub async fn timed_get(
        &self,
        token: &str,
        path: &str,
    ) -> anyhow::Result<(Duration, bytes::Bytes)> {
        let started = Instant::now();
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .with_context(|| format!("GET {path} failed"))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .with_context(|| format!("GET {path}: body"))?;
        let elapsed = started.elapsed();
        if status != reqwest::StatusCode::OK {
            bail!(
                "GET {path} answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok((elapsed, body))
    }
}

impl Api {
    /// Starts the API in the run's scope (namespace, storage) and the bench's environment
    /// (its settings) and waits until it answers `/readyz`; `clients` idle connections
    /// kept.
    pub async fn start(scope: &Scope, clients: usize) -> anyhow::Result<Self> {
        let port = free_port()?;
        let process = launch("quire-api", scope)?
            .env("QUIRE__SERVER__HOST", "127.0.0.1")
            .env("QUIRE__SERVER__PORT", port.to_string())
            // The enqueue rate limit stays on (its statement is part of an upload's
            // cost), at a rate no run reaches: the bench measures the stack, not the limit.
            .env("QUIRE__ENQUEUE_LIMIT__PER_SECOND", "100000")
            .env("QUIRE__ENQUEUE_LIMIT__BURST", "100000")
            .spawn()?;
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(clients)
            .build()?;
        wait_ready(&http, &base).await?;
        Ok(Self {
            process,
            client: ApiClient { http, base },
        })
    }

    /// Uploads `bytes` as a tenant's member; the job id of the answer.
    pub async fn upload(&self, token: &str, bytes: Vec<u8>) -> anyhow::Result<Uuid> {
        self.client.upload(token, bytes).await
    }

    /// A client of this API for a task of its own.
    pub fn client(&self) -> ApiClient {
        self.client.clone()
    }

    pub fn peak_rss(&self) -> u64 {
        Usage::of(&self.process).peak_rss_bytes
    }

    pub async fn stop(mut self) {
        self.process.kill().await;
    }
}

/// A member's token for `tenant_id`, valid for the bench's run.
pub fn token(settings: &Settings, tenant_id: Uuid, user_id: Uuid) -> anyhow::Result<String> {
    Ok(quire_shared::auth::mint(
        &settings.auth,
        tenant_id,
        user_id,
        Duration::from_secs(3600),
    )?)
}

pub async fn run(plan: UploadPlan<'_>) -> anyhow::Result<UploadRun> {
    let api = Api::start(plan.scope, plan.clients).await?;
    let token = token(plan.settings, plan.tenant_id, plan.user_id)?;
    // Distinct bodies (duplicates answer 409), made before the clock starts.
    let bodies: Vec<Vec<u8>> = (0..plan.count).map(|_| body(plan.file_size)).collect();
    let started = Instant::now();
    let answers: Vec<anyhow::Result<Uuid>> = futures_util::stream::iter(bodies)
        .map(|bytes| api.upload(&token, bytes))
        .buffer_unordered(plan.clients.max(1))
        .collect()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let api_peak_rss = api.peak_rss();
    api.stop().await;
    let job_ids = answers.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    Ok(UploadRun {
        uploads_per_second: job_ids.len() as f64 / seconds.max(f64::EPSILON),
        api_peak_rss,
        job_ids,
    })
}

/// `count` uploads started at `per_second`, each in a task of its own (so a slow answer
/// never delays the next start); the job ids of their answers, in order.
pub async fn paced(
    api: &Api,
    token: &str,
    count: usize,
    per_second: f64,
    file_size: usize,
) -> anyhow::Result<Vec<Uuid>> {
    let bodies: Vec<Vec<u8>> = (0..count).map(|_| body(file_size)).collect();
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second.max(0.001)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut running = Vec::with_capacity(count);
    for bytes in bodies {
        ticks.tick().await;
        let (client, token) = (api.client(), token.to_owned());
        running.push(tokio::spawn(
            async move { client.upload(&token, bytes).await },
        ));
    }
    let mut job_ids = Vec::with_capacity(count);
    for task in running {
        job_ids.push(task.await.context("an upload task panicked")??);
    }
    Ok(job_ids)
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
pub fn body(size: usize) -> Vec<u8> {
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
