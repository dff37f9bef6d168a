//! `TestApp`: the API on port 0 in-process, with a dispatcher and workers started on
//! demand, each on this test's own database, Redis namespace and storage folder.

use std::time::Duration;

use quire_api::Application;
use quire_shared::catalogue::{FaultTestPayload, JobType};
use quire_shared::config::Settings;
use quire_shared::db::PgPool;
use quire_shared::db::jobs::{self, Job};
use quire_shared::states::JobStatus;
use quire_shared::test_support::{TestContext, eventually};
use reqwest::multipart::{Form, Part};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub const DEADLINE: Duration = Duration::from_secs(30);

pub struct TestApp {
    pub context: TestContext,
    pub address: String,
    pub http: reqwest::Client,
    pub pool: PgPool,
    pub tenant_id: Uuid,
    pub token: String,
    shutdown: CancellationToken,
}

/// A started worker: cancel `stop` and await `handle` to drain it.
pub struct RunningWorker {
    pub stop: CancellationToken,
    pub handle: JoinHandle<anyhow::Result<()>>,
}

impl RunningWorker {
    pub async fn drain(self) {
        self.stop.cancel();
        self.handle
            .await
            .expect("worker task panicked")
            .expect("worker failed");
    }
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_in(TestContext::new().await).await
    }

    pub async fn spawn_in(mut context: TestContext) -> Self {
        quire_shared::telemetry::init("quire-tests", &context.settings.telemetry);
        context.settings.server.host = "127.0.0.1".into();
        context.settings.server.port = 0;
        let app = Application::build(context.settings.clone())
            .await
            .expect("build the api");
        let address = format!("http://127.0.0.1:{}", app.port());
        let shutdown = CancellationToken::new();
        tokio::spawn(app.run_until_stopped(shutdown.clone()));
        let pool = context.pool();
        let mut test_app = Self {
            context,
            address,
            http: reqwest::Client::new(),
            pool,
            tenant_id: Uuid::nil(),
            token: String::new(),
            shutdown,
        };
        let (tenant_id, token) = test_app.add_tenant("tenant-a").await;
        test_app.tenant_id = tenant_id;
        test_app.token = token;
        test_app
    }

    /// Creates an active, provisioned tenant and a token of its owner (a new user).
    pub async fn add_tenant(&self, name: &str) -> (Uuid, String) {
        self.context.provisioned_tenant(name, Uuid::now_v7()).await
    }

    pub fn start_dispatcher(&self) {
        tokio::spawn(quire_dispatcher::run(
            self.context.settings.clone(),
            self.shutdown.child_token(),
        ));
    }

    pub fn start_worker(&self) -> RunningWorker {
        let stop = self.shutdown.child_token();
        let handle = tokio::spawn(quire_worker::run(
            self.context.settings.clone(),
            stop.clone(),
        ));
        RunningWorker { stop, handle }
    }

    pub async fn upload_as(
        &self,
        token: &str,
        bytes: Vec<u8>,
        filename: &str,
    ) -> reqwest::Response {
        let form = Form::new().part(
            "file",
            Part::bytes(bytes)
                .file_name(filename.to_owned())
                .mime_str("text/plain")
                .expect("mime"),
        );
        self.http
            .post(format!("{}/api/documents", self.address))
            .bearer_auth(token)
            .multipart(form)
            .send()
            .await
            .expect("upload request")
    }

    /// Uploads as tenant A and returns (document id, job id).
    pub async fn upload(&self, bytes: &[u8]) -> (Uuid, Uuid) {
        let response = self
            .upload_as(&self.token, bytes.to_vec(), "letter.txt")
            .await;
        assert_eq!(
            response.status(),
            201,
            "upload answered {}",
            response.status()
        );
        let body: Value = response.json().await.expect("json");
        (uuid_at(&body, "/document/id"), uuid_at(&body, "/job/id"))
    }

    pub async fn get_as(&self, token: &str, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.address))
            .bearer_auth(token)
            .send()
            .await
            .expect("get request")
    }

    pub async fn post_as(&self, token: &str, path: &str) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.address))
            .bearer_auth(token)
            .send()
            .await
            .expect("post request")
    }

    /// Sends `body` as JSON with `method` and answers the status and the JSON body (Null
    /// when there is none).
    pub async fn json_as(
        &self,
        method: reqwest::Method,
        token: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.address))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("json request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Runs the real `quire-admin` binary against this app's database, Redis, storage
    /// and API; answers (success, stdout, stderr).
    pub fn admin_cli(&self, args: &[&str]) -> (bool, String, String) {
        let port = self.address.rsplit(':').next().unwrap_or_default();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_quire-admin"))
            .args(args)
            .envs(self.context.process_env())
            .env("QUIRE__SERVER__PORT", port)
            .output()
            .expect("run quire-admin");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        )
    }

    /// A connection to this app's Redis.
    pub async fn redis(&self) -> deadpool_redis::redis::aio::MultiplexedConnection {
        deadpool_redis::redis::Client::open(self.context.settings.redis.url.expose())
            .expect("redis client")
            .get_multiplexed_async_connection()
            .await
            .expect("redis connection")
    }

    /// Pushes `raw` onto this app's list of `job_type`, as a dispatcher would.
    pub async fn push_raw(&self, job_type: &str, raw: &str) {
        let key = quire_shared::broker::queue_key(&self.context.namespace, job_type);
        let _: i64 = deadpool_redis::redis::cmd("LPUSH")
            .arg(&key)
            .arg(raw)
            .query_async(&mut self.redis().await)
            .await
            .expect("lpush");
    }

    /// Waits until workers have popped every message of `job_type`'s list.
    pub async fn wait_until_consumed(&self, job_type: &str) {
        let key = quire_shared::broker::queue_key(&self.context.namespace, job_type);
        let redis = self.redis().await;
        eventually(
            DEADLINE,
            &format!("the {job_type} list is consumed"),
            || {
                let mut redis = redis.clone();
                let key = key.clone();
                async move {
                    let length: i64 = deadpool_redis::redis::cmd("LLEN")
                        .arg(&key)
                        .query_async(&mut redis)
                        .await
                        .ok()?;
                    (length == 0).then_some(())
                }
            },
        )
        .await;
    }

    pub async fn job(&self, job_id: Uuid) -> Job {
        let mut conn = self.pool.get().await.expect("connection");
        jobs::find_job(&mut conn, job_id)
            .await
            .expect("query job")
            .expect("job exists")
    }

    /// Waits until the job reaches `status`, failing fast if it ends in another state.
    pub async fn wait_for_job(&self, job_id: Uuid, status: JobStatus) -> Job {
        eventually(DEADLINE, &format!("job {job_id} is {status}"), || async {
            let job = self.job(job_id).await;
            if job.status != status && job.status.is_terminal() {
                panic!(
                    "job ended {} ({:?}), expected {status}",
                    job.status, job.error_code
                );
            }
            (job.status == status).then_some(job)
        })
        .await
    }
}

impl TestApp {
    /// The fault oracle's tables (see the worker's `fault-test` handler).
    pub async fn create_oracle_tables(&self) {
        create_oracle_tables(&self.pool).await;
    }

    /// Enqueues `count` `fault-test` jobs of tenant A, committed in batches.
    pub async fn enqueue_fault_jobs(&self, count: usize, payload: FaultTestPayload) -> Vec<Uuid> {
        enqueue_fault_jobs(
            &self.pool,
            self.tenant_id,
            count,
            payload,
            self.context.settings.jobs.max_attempts,
        )
        .await
    }

    /// Settings of this app with `change` applied (for a worker or dispatcher that
    /// differs from the others).
    pub fn settings_with(&self, change: impl FnOnce(&mut Settings)) -> Settings {
        let mut settings = self.context.settings.clone();
        change(&mut settings);
        settings
    }

    pub fn start_worker_with(&self, settings: Settings) -> RunningWorker {
        let stop = self.shutdown.child_token();
        let handle = tokio::spawn(quire_worker::run(settings, stop.clone()));
        RunningWorker { stop, handle }
    }
}

pub async fn create_oracle_tables(pool: &PgPool) {
    let mut conn = pool.get().await.expect("connection");
    for statement in [
        "CREATE TABLE IF NOT EXISTS fault_effects ( \
             job_id uuid PRIMARY KEY, duplicates integer NOT NULL DEFAULT 0, \
             at timestamptz NOT NULL DEFAULT now())",
        "CREATE TABLE IF NOT EXISTS fault_starts ( \
             id bigserial PRIMARY KEY, job_id uuid NOT NULL, worker_id text NOT NULL, \
             attempt integer NOT NULL, at timestamptz NOT NULL DEFAULT now())",
    ] {
        diesel_async::RunQueryDsl::execute(diesel::sql_query(statement), &mut conn)
            .await
            .expect("create oracle table");
    }
}

pub async fn enqueue_fault_jobs(
    pool: &PgPool,
    tenant_id: Uuid,
    count: usize,
    payload: FaultTestPayload,
    max_attempts: i32,
) -> Vec<Uuid> {
    use diesel_async::AsyncConnection;
    let mut conn = pool.get().await.expect("connection");
    let mut ids = Vec::with_capacity(count);
    for chunk in (0..count).collect::<Vec<_>>().chunks(250) {
        let batch = conn
            .transaction::<_, quire_shared::db::DbError, _>(async |conn| {
                let mut batch = Vec::with_capacity(chunk.len());
                for _ in chunk {
                    let job = jobs::NewJob {
                        tenant_id,
                        document_id: None,
                        job_type: JobType::FaultTest,
                        payload,
                        max_attempts,
                        request_id: None,
                    };
                    let enqueued = jobs::enqueue(conn, &job)
                        .await?
                        .expect("a fault job never conflicts");
                    batch.push(enqueued.job_id);
                }
                Ok(batch)
            })
            .await
            .expect("enqueue fault jobs");
        ids.extend(batch);
    }
    ids
}

/// How many handler starts the oracle logged.
pub async fn started_runs(pool: &PgPool) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::Int8)]
        count: i64,
    }
    let mut conn = pool.get().await.expect("connection");
    diesel_async::RunQueryDsl::get_result::<Count>(
        diesel::sql_query("SELECT count(*) AS count FROM fault_starts"),
        &mut conn,
    )
    .await
    .expect("count starts")
    .count
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub fn uuid_at(body: &Value, pointer: &str) -> Uuid {
    body.pointer(pointer)
        .and_then(Value::as_str)
        .and_then(|text| Uuid::parse_str(text).ok())
        .unwrap_or_else(|| panic!("no uuid at {pointer} in {body}"))
}
