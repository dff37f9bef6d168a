//! `TestApp`: the API on port 0 in-process, with a dispatcher and workers started on
//! demand, each on this test's own database, Redis namespace and storage folder.

use quire_api::Application;
use quire_shared::config::Settings;
use quire_shared::db::PgPool;
use quire_shared::db::jobs::Job;
use quire_shared::jobs::FaultTest;
use quire_shared::states::JobStatus;
use quire_shared::test_support::{self, RunningService, TestContext};
use reqwest::multipart::{Form, Part};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use quire_shared::test_support::DEADLINE;

pub struct TestApp {
    pub context: TestContext,
    pub address: String,
    /// The admin listener (`server.admin_listen`): /healthz, /readyz, /metrics.
    pub admin_address: String,
    pub http: reqwest::Client,
    pub pool: PgPool,
    pub tenant_id: Uuid,
    pub token: String,
    shutdown: CancellationToken,
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
        // Over HTTPS the name the test certificates carry (`localhost`), not the IP.
        let address = match app.scheme() {
            "https" => format!("https://localhost:{}", app.port()),
            _ => format!("http://127.0.0.1:{}", app.port()),
        };
        let admin_address = format!(
            "http://127.0.0.1:{}",
            app.admin_port()
                .expect("the test profile starts the admin listener")
        );
        let shutdown = CancellationToken::new();
        tokio::spawn(app.run_until_stopped(shutdown.clone()));
        let pool = context.pool();
        let mut test_app = Self {
            context,
            address,
            admin_address,
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

    pub fn start_worker(&self) -> RunningService {
        self.start_worker_with(self.context.settings.clone())
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

    pub async fn job(&self, job_id: Uuid) -> Job {
        test_support::job(&self.pool, job_id).await
    }

    /// Waits until the job reaches `status`, failing fast if it ends in another state.
    pub async fn wait_for_job(&self, job_id: Uuid, status: JobStatus) -> Job {
        test_support::wait_for_job(&self.pool, job_id, status).await
    }
}

impl TestApp {
    /// The fault oracle's tables (see the worker's `fault-test` handler).
    pub async fn create_oracle_tables(&self) {
        test_support::create_oracle_tables(&self.pool).await;
    }

    /// Enqueues `count` `fault-test` jobs of tenant A, committed in batches.
    pub async fn enqueue_fault_jobs(&self, count: usize, payload: FaultTest) -> Vec<Uuid> {
        test_support::enqueue_fault_jobs(
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

    /// Another API instance on `settings` (port 0), stopped with this app; answers its
    /// address. For an API that differs from the first, e.g. in its store.
    pub async fn start_api_with(&self, mut settings: Settings) -> String {
        settings.server.host = "127.0.0.1".into();
        settings.server.port = 0;
        settings.server.admin_listen = String::new();
        let app = Application::build(settings).await.expect("build the api");
        let address = format!("http://127.0.0.1:{}", app.port());
        tokio::spawn(app.run_until_stopped(self.shutdown.child_token()));
        address
    }

    pub fn start_worker_with(&self, settings: Settings) -> RunningService {
        RunningService::spawn(quire_worker::run, settings, &self.shutdown)
    }

    /// A session of its own holding the documents table exclusively until it is
    /// dropped: a request that reads documents can then only finish by its timeout.
    pub async fn lock_documents_table(&self) -> diesel_async::AsyncPgConnection {
        use diesel_async::{AsyncConnection, SimpleAsyncConnection};
        let mut holder =
            diesel_async::AsyncPgConnection::establish(self.context.settings.database.url.expose())
                .await
                .expect("connect");
        holder
            .batch_execute("BEGIN; LOCK TABLE documents IN ACCESS EXCLUSIVE MODE")
            .await
            .expect("lock");
        holder
    }
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

impl TestApp {
    /// A real `quire-worker` process on this app's database, Redis and storage, with
    /// `extra` environment on top (later entries win), its output in `log`. Dropping it
    /// kills it. For what only a separate process shows: its environment, its memory.
    pub fn spawn_worker_process(
        &self,
        extra: &[(&str, &std::ffi::OsStr)],
        log: &std::path::Path,
    ) -> quire_shared::process::QuireProcess {
        quire_shared::process::Launch::new("quire-worker")
            .unwrap_or_else(|error| panic!("{error}"))
            .clean_env()
            .envs(self.context.process_env())
            .env("RUST_LOG", "info")
            .envs(extra.iter().copied())
            .current_dir(self.context.data_dir.path())
            .log_to(log)
            .expect("log file")
            .spawn()
            .expect("start quire-worker")
    }
}
