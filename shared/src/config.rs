//! One typed `Settings` for every process, layered as DESIGN §9 fixes it:
//! `config/default.toml` < `config/$QUIRE_ENV.toml` < `QUIRE__SECTION__KEY` environment
//! variables, with the conventional `DATABASE_URL` and `REDIS_URL` on top.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::analysis::dates::DateLanguage;
use crate::secret::Secret;

/// The development signing secret shipped in `config/default.toml`; production refuses it.
pub const DEVELOPMENT_JWT_SECRET: &str = "quire-development-secret-do-not-use-in-production";
/// Shortest JWT secret the production profile accepts (HS256 wants at least 256 bits).
pub const MIN_PRODUCTION_SECRET_BYTES: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("failed to load settings: {0}")]
    Load(#[from] config::ConfigError),
    #[error("unknown profile {0:?} in QUIRE_ENV (expected development, test or production)")]
    UnknownProfile(String),
    #[error("refusing to start: {0}")]
    Unsafe(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Development,
    Test,
    Production,
}

impl Profile {
    pub fn parse(value: &str) -> Result<Self, SettingsError> {
        match value {
            "development" => Ok(Self::Development),
            "test" => Ok(Self::Test),
            "production" => Ok(Self::Production),
            other => Err(SettingsError::UnknownProfile(other.to_owned())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Development => "development",
            Self::Test => "test",
            Self::Production => "production",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub server: ServerSettings,
    pub database: DatabaseSettings,
    pub redis: RedisSettings,
    pub auth: AuthSettings,
    pub ops: OpsSettings,
    pub storage: StorageSettings,
    pub storage_gc: StorageGcSettings,
    pub jobs: JobSettings,
    pub dispatcher: DispatcherSettings,
    pub scheduling: SchedulingSettings,
    pub retention: RetentionSettings,
    pub schedules: SchedulesSettings,
    pub worker: WorkerSettings,
    pub telemetry: TelemetrySettings,
    pub search: SearchSettings,
    pub analysis: AnalysisSettings,
    pub enqueue_limit: EnqueueLimitSettings,
    pub webhooks: WebhookSettings,
    pub events: EventsSettings,
}

/// Webhook deliveries (the `deliver-webhook` job): timeouts, retries, when a failing
/// subscription is disabled, and which private networks a receiver may be in.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// Longest wait for the TCP (and TLS) connection to a receiver.
    pub connect_timeout_ms: u64,
    /// Longest whole attempt: connect, send, the answer's head and its body prefix.
    pub request_timeout_ms: u64,
    /// Backoff between the attempts of one delivery (full jitter, doubling to the max).
    pub retry_backoff_base_ms: u64,
    pub retry_backoff_max_ms: u64,
    /// A delivery is retried for at most this long after its event, then fails.
    pub retry_for_seconds: u64,
    /// A subscription is disabled after this many failed attempts in a row…
    pub disable_after_failures: i32,
    /// …or once it has failed without a success for this long.
    pub disable_after_failing_seconds: u64,
    /// Networks (CIDR, e.g. `10.20.0.0/16`) a receiver may be in although they are
    /// private, loopback or link-local; every other such address is refused.
    pub allowed_networks: Vec<String>,
}

impl WebhookSettings {
    /// The backoff between attempts of one delivery.
    pub fn retry_backoff(&self) -> crate::retry::Backoff {
        crate::retry::Backoff::new(
            Duration::from_millis(self.retry_backoff_base_ms),
            Duration::from_millis(self.retry_backoff_max_ms),
        )
    }
}

/// The tenant event log as clients read it (`GET /api/events`) and how long it is kept.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsSettings {
    /// Events are kept this long (the dispatcher's retention prunes older ones); a
    /// stream resuming from before a pruned event answers 410.
    pub retention_hours: u64,
    /// A comment line every this many seconds keeps an idle stream (and proxies) open.
    pub heartbeat_seconds: u64,
    /// Each stream reads the log this often without a wake-up: the safety net for a
    /// NOTIFY lost while the listener reconnected.
    pub catch_up_seconds: u64,
    /// Messages buffered per stream at most: the server's memory for a slow client.
    pub buffer_messages: usize,
    /// A client that leaves its buffer full this long is dropped.
    pub slow_client_timeout_ms: u64,
    /// Events read per statement.
    pub page_size: i64,
    /// Open streams per tenant (429 over it) and per API process (503 over it).
    pub max_streams_per_tenant: usize,
    pub max_streams: usize,
    /// A stream is closed after this long; the client reconnects with Last-Event-ID.
    pub max_stream_seconds: u64,
}

impl EventsSettings {
    pub fn retention(&self) -> Duration {
        Duration::from_secs(self.retention_hours.saturating_mul(3600))
    }
}

/// The API's enqueue rate limit per tenant (uploads, bulk re-analyze and verify, retry):
/// over it a request answers 429 with `Retry-After`. A tenant's own
/// `enqueue_rate_per_second` / `enqueue_burst` override these.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnqueueLimitSettings {
    /// Jobs per second a tenant may enqueue on average; 0: no limit (no statement).
    pub per_second: i32,
    /// Jobs a tenant may enqueue at once, on top of the average.
    pub burst: i32,
}

/// How a numeric date with two small parts (`03/04/2024`) is read (Paperless-ngx's
/// `DATE_ORDER`); a tenant may have its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DateOrder {
    /// Day first: 03/04/2024 is 3 April.
    Dmy,
    /// Month first: 03/04/2024 is 4 March.
    Mdy,
    /// Year first: 24/03/04 is 4 March 2024, and 03/04/2024 is read month first.
    Ymd,
}

impl DateOrder {
    pub const ALL: [DateOrder; 3] = [Self::Dmy, Self::Mdy, Self::Ymd];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dmy => "dmy",
            Self::Mdy => "mdy",
            Self::Ymd => "ymd",
        }
    }

    /// The order a name says, in any case (`"DMY"` is `Dmy`).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|order| order.as_str().eq_ignore_ascii_case(name.trim()))
    }
}

/// How external tools are confined (see `analysis::tools`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// A bubblewrap sandbox: no network, a read-only system, only the job's work folder.
    Bwrap,
    /// The allowlisted environment only; refused by the production profile.
    None,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalysisSettings {
    /// Tesseract languages, `+`-joined (`eng`, `eng+deu`); each needs its
    /// `tesseract-ocr-<lang>` package.
    pub ocr_languages: String,
    /// The date order of tenants without one of their own.
    pub date_order: DateOrder,
    /// The languages month names are read in for tenants without their own (Paperless-ngx's
    /// `DATE_PARSER_LANGUAGES`); at least one.
    pub date_languages: Vec<DateLanguage>,
    /// Pages of a scanned PDF that are read by OCR; a scan with more gets no archive copy.
    pub ocr_max_pages: u32,
    /// The most pixels of one page that orientation detection, straightening and OCR
    /// work on, in millions; a larger page is scaled down first (its resolution with it).
    pub ocr_max_megapixels: u32,
    pub thumbnail_width: u32,
    /// Limits of every external tool run (pdftoppm, pdftotext, tesseract): wall clock,
    /// address space and CPU time. Past them the whole process group is killed.
    pub tool_timeout_seconds: u64,
    pub tool_memory_mb: u64,
    pub tool_cpu_seconds: u64,
    /// How every tool run is confined; the worker refuses to start when `bwrap` does
    /// not work on its machine.
    pub sandbox: SandboxMode,
    /// Images larger than this in either dimension are refused before decoding.
    pub max_image_dimension: u32,
    /// Memory one image may cost the worker, decoded and prepared for the thumbnail and
    /// OCR. A PNG over it at full size is decoded reduced; any other image over it is
    /// refused (`image_too_large`). A worker holds at most `worker.analysis_concurrency`
    /// of these.
    pub image_memory_budget_mb: u64,
    /// A PDF whose streams inflate to more than this is refused (a decompression bomb).
    pub max_pdf_inflated_mb: u64,
    /// Extracted text kept per document.
    pub max_text_chars: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSettings {
    /// The PostgreSQL text search configuration new tenants' indexes use.
    pub language: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    pub max_upload_bytes: u64,
    pub reject_duplicate_uploads: bool,
    /// `host:port` of the API's admin listener (/healthz, /readyz, /metrics with the
    /// queue's state); empty for none. Never the public port: the scrape is for
    /// Prometheus, not for tenants.
    pub admin_listen: String,
    /// PEM certificate chain and private key: the API serves HTTPS instead of HTTP.
    /// Both empty (the default): plain HTTP, for local development or a TLS-terminating
    /// proxy in front.
    pub tls_cert: String,
    pub tls_key: String,
    /// An upload whose body sends nothing for this long (between two chunks) is cut off
    /// with 408 and whatever it stored is removed.
    pub upload_read_timeout_ms: u64,
    /// How long an `Idempotency-Key`'s first answer is replayed (then the key is free
    /// again, and the dispatcher's retention prunes it).
    pub idempotency_ttl_seconds: u64,
}

impl ServerSettings {
    /// The certificate and key files when the API serves HTTPS.
    pub fn tls(&self) -> Option<(&Path, &Path)> {
        (!self.tls_cert.is_empty()).then(|| (Path::new(&self.tls_cert), Path::new(&self.tls_key)))
    }

    /// The URL scheme the API answers on.
    pub fn scheme(&self) -> &'static str {
        if self.tls().is_some() {
            "https"
        } else {
            "http"
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSettings {
    pub url: Secret,
    /// Connections per process at most; unset, each process takes what it needs
    /// ([`DEFAULT_POOL_SIZE`], a worker [`Settings::worker_pool_size`]).
    pub pool_size: Option<usize>,
    pub connect_timeout_seconds: u64,
    /// `statement_timeout` of each kind of session (`db::SessionKind`), set on every
    /// pooled connection when it is opened.
    pub statement_timeout_ms: StatementTimeouts,
    /// `idle_in_transaction_session_timeout` of the api's, the worker's and the
    /// dispatcher's sessions (0: none): the server ends a session whose transaction
    /// waits this long for its client's next statement. A process cut off the network
    /// mid-transaction otherwise holds its row and advisory locks until the server's
    /// TCP notices, hours later, and every process that needs them waits.
    pub idle_in_transaction_timeout_ms: u64,
}

/// Connections per process when `database.pool_size` is unset, but for a worker's.
pub const DEFAULT_POOL_SIZE: usize = 10;

impl DatabaseSettings {
    /// The pool's size: `pool_size`, or `default` when it is unset.
    pub fn pool_size_or(&self, default: usize) -> usize {
        self.pool_size.unwrap_or(default)
    }
}

/// Milliseconds a statement may run, per kind of session; 0 means no limit.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatementTimeouts {
    /// The API's request sessions: a request holds a connection for at most this long
    /// per statement, so one expensive request cannot starve the others.
    pub api: u64,
    /// The worker's sessions: claims, heartbeats, finishes and the handlers' writes.
    pub worker: u64,
    /// The dispatcher's sessions: publishing and the maintenance services.
    pub dispatcher: u64,
    /// `quire-admin` and the bench: migrations and operator commands, run by hand.
    pub admin: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSettings {
    pub url: Secret,
    pub namespace: String,
    pub pool_size: usize,
    /// Seed nodes of a Redis Cluster (`redis://host:port`, …); empty: the single server
    /// at `url`.
    pub cluster_urls: Vec<String>,
    /// A PEM file of the CA certificates a `rediss://` server's certificate must chain
    /// to; empty: the system store. The host name is always checked.
    pub ca_file: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    pub jwt_secret: Secret,
    pub issuer: String,
    pub audience: String,
    pub leeway_seconds: u64,
    pub token_ttl_seconds: u64,
    /// The audience of operator tokens; a user token never carries it, so one kind of
    /// token can never stand in for the other.
    pub admin_audience: String,
}

/// The `/ops` dashboard's sessions.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpsSettings {
    /// The longest a dashboard session lives; it never outlives the operator token
    /// that opened it either.
    pub session_seconds: u64,
    /// Whether the dashboard's cookies are `Secure` (sent over HTTPS only). The
    /// development profile turns it off for plain http on localhost; production refuses
    /// to start without it.
    pub secure_cookies: bool,
}

/// Where document bytes live (`storage::build` makes the store).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageBackend {
    /// Files under `storage.data_dir`: one host (or a shared file system).
    Local,
    /// An S3-compatible object store (`[storage.s3]`): processes on any host.
    S3,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSettings {
    pub backend: StorageBackend,
    /// The local backend's folder (unused with `s3`).
    pub data_dir: PathBuf,
    pub s3: S3Settings,
}

/// Storage garbage collection (dispatcher maintenance): objects no row names, older than
/// the grace, are deleted; see docs/decisions.md "Storage garbage collection".
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageGcSettings {
    /// An object younger than this (by the store's modified time against the database
    /// clock) is never touched: an upload or a run between its put and its commit.
    pub grace_seconds: u64,
    /// Objects listed (and checked against the rows in one statement) per batch.
    pub batch_size: usize,
    /// Batches one pass goes through at most; the next pass resumes after the last.
    pub batches_per_pass: usize,
}

impl StorageGcSettings {
    pub fn grace(&self) -> Duration {
        Duration::from_secs(self.grace_seconds)
    }
}

/// The S3 backend (`storage.backend = "s3"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Settings {
    /// `http(s)://host:port` of an S3-compatible server (SeaweedFS, MinIO, Ceph); empty:
    /// AWS S3 of `region`.
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    /// `host/bucket/key` URLs rather than `bucket.host/key` (what most self-hosted servers
    /// need).
    pub path_style: bool,
    /// Static credentials, set together; both empty: the instance's credentials (EC2/ECS
    /// metadata, web identity).
    pub access_key_id: String,
    pub secret_access_key: Secret,
    /// A key prefix inside the bucket (`quire`, `prod/quire`): Quire's objects live under
    /// it, and listing and wiping never look outside it. Empty: the whole bucket.
    pub prefix: String,
    /// Bodies larger than this are sent as a multipart upload in parts of this size (at
    /// least 5 MiB, S3's smallest part); smaller ones in one request. An upload holds at
    /// most a few parts in memory, never the whole body.
    pub part_size_bytes: u64,
    /// Connecting to the server; past it the attempt fails (and is retried).
    pub connect_timeout_ms: u64,
    /// One whole request, its body included (one part of an upload, one download).
    pub request_timeout_ms: u64,
    /// Retries of a failed request (5xx, connection refused, timeout) with backoff inside
    /// the client, before the fault reaches Quire as `storage unavailable` (an upload
    /// answers 503, a job retries later with its own backoff).
    pub max_retries: usize,
    /// The longest the client keeps retrying one request.
    pub retry_timeout_ms: u64,
}

/// S3's smallest part of a multipart upload (all but the last).
pub const MIN_S3_PART_BYTES: u64 = 5 * 1024 * 1024;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSettings {
    pub max_attempts: i32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatcherSettings {
    pub batch_size: i64,
    pub poll_interval_ms: u64,
    pub claim_timeout_seconds: u64,
    pub publish_backoff_base_ms: u64,
    pub publish_backoff_max_ms: u64,
    /// How often each maintenance service runs (DESIGN §5): every dispatcher runs them
    /// all, each on its own clock; the rescuer, lost-message recovery and retention do
    /// their work in one dispatcher per interval (an advisory lock).
    pub claim_recovery_interval_ms: u64,
    pub rescuer_interval_ms: u64,
    pub lost_messages_interval_ms: u64,
    pub retention_interval_ms: u64,
    pub worker_pruning_interval_ms: u64,
    pub lost_message_grace_seconds: u64,
    pub recovery_batch_size: i64,
    /// The queue's state (the gauges the API's admin listener serves) is computed at
    /// most once per this interval, by one dispatcher of the fleet.
    pub queue_state_interval_ms: u64,
    /// Tenants the per-tenant queue gauges name, those with the most queued jobs; every
    /// other tenant is summed into one `tenant="other"` series.
    pub queue_state_top_tenants: usize,
    /// `host:port` of the probe listener (/healthz, /readyz, /metrics); empty for none.
    pub probe_listen: String,
}

/// The dispatcher as the scheduler (docs/decisions.md, "Fair share"): how many
/// messages wait in Redis per queue, the bulk class's guaranteed share, and the default
/// cap on a tenant's running jobs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulingSettings {
    /// Published-but-unclaimed messages per queue at most: this, or the slots of the
    /// live workers serving the queue when they are more.
    pub in_flight_per_queue: i64,
    /// The share of each queue's in-flight messages the bulk class may always hold,
    /// however much interactive work waits (1 to 100).
    pub bulk_share_percent: i64,
    /// A tenant's running plus in-flight jobs at most, unless `tenants.max_running_jobs`
    /// says otherwise.
    pub max_running_per_tenant: i64,
    /// The express path: a process that records an interactive job while its queue has
    /// no backlog (nothing due waits, in flight below `in_flight_per_queue`, the tenant
    /// below its cap, nothing paused) claims the job's event in the same statement and
    /// publishes it itself after the commit, a dispatcher's round off the job's path.
    /// With a backlog the dispatchers' fair scheduler decides, as always.
    pub express: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionSettings {
    pub events_hours: u64,
    pub finished_jobs_days: u64,
    pub failed_jobs_days: u64,
    pub batch_size: i64,
}

/// Periodic jobs (`[schedules]`), the one place they are configured. Each schedule's
/// slot is claimed once across every dispatcher (`db::schedules::claim`); see
/// `crate::schedules` for the catalogue.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulesSettings {
    /// How often each dispatcher looks for a due slot; a slot runs at most this late.
    pub check_interval_ms: u64,
    pub empty_trash: EmptyTrashSchedule,
    pub integrity_scrub: IntegrityScrubSchedule,
    pub storage_gc: StorageGcSchedule,
}

/// `empty-trash`: purges documents trashed longer than `trash_days`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmptyTrashSchedule {
    pub enabled: bool,
    pub every_seconds: u64,
    pub trash_days: u32,
    /// Most `purge-document` jobs one slot enqueues, taken round-robin over tenants.
    pub max_per_slot: i64,
}

/// `integrity-scrub`: verifies every stored version once per `scrub_days`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntegrityScrubSchedule {
    pub enabled: bool,
    pub every_seconds: u64,
    pub scrub_days: u32,
    /// Most versions one slot walks (and `verify-document` jobs it enqueues): the rate
    /// limit. A pass covers `max_per_slot × slots per scrub_days` versions at most.
    pub max_per_slot: i64,
}

/// `storage-gc`: the storage issue's collection of objects no row names.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageGcSchedule {
    pub enabled: bool,
    pub every_seconds: u64,
}

impl DispatcherSettings {
    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.poll_interval_ms)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSettings {
    /// Jobs one worker process runs at once (its slots).
    pub concurrency: usize,
    /// Of those, the most that hold an analysis slot (`BackgroundJob::ANALYSIS_SLOT`: they
    /// decode images and run the tools) at once: a worker's memory is sized by these, not
    /// by its slots.
    pub analysis_concurrency: usize,
    pub queues: Vec<String>,
    pub lease_seconds: u64,
    pub pop_timeout_seconds: u64,
    pub drain_timeout_seconds: u64,
    pub retry_backoff_base_ms: u64,
    pub retry_backoff_max_ms: u64,
    /// `host:port` of the probe listener (/healthz, /readyz, /metrics); empty for none.
    pub probe_listen: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySettings {
    pub format: LogFormat,
    pub filter: String,
}

/// Where the layers come from; `Settings::load` fills it from the process environment,
/// tests fill it by hand.
#[derive(Debug, Clone)]
pub struct SettingsSource {
    pub config_dir: PathBuf,
    pub profile: Profile,
    pub env: HashMap<String, String>,
}

impl SettingsSource {
    /// Reads `QUIRE_CONFIG_DIR` (default `config`) and `QUIRE_ENV` (default `development`).
    pub fn from_process_env() -> Result<Self, SettingsError> {
        let env: HashMap<String, String> = std::env::vars().collect();
        let config_dir = env
            .get("QUIRE_CONFIG_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("config"));
        let profile = Profile::parse(env.get("QUIRE_ENV").map_or("development", String::as_str))?;
        Ok(Self {
            config_dir,
            profile,
            env,
        })
    }
}

impl Settings {
    /// A worker's pool: `database.pool_size`, or what it needs when unset: a connection
    /// per slot (a running job may hold one) and one each for the batch claim and the
    /// completer.
    pub fn worker_pool_size(&self) -> usize {
        self.database.pool_size_or(self.worker.concurrency + 2)
    }

    /// Settings for this process, from files and environment.
    pub fn load() -> Result<(Self, Profile), SettingsError> {
        let source = SettingsSource::from_process_env()?;
        let profile = source.profile;
        Ok((Self::from_source(&source)?, profile))
    }

    pub fn from_source(source: &SettingsSource) -> Result<Self, SettingsError> {
        let dir: &Path = &source.config_dir;
        let mut builder = config::Config::builder()
            .add_source(config::File::from(dir.join("default.toml")).required(true))
            .add_source(
                config::File::from(dir.join(format!("{}.toml", source.profile.as_str())))
                    .required(false),
            )
            .add_source(
                config::Environment::with_prefix("QUIRE")
                    .prefix_separator("__")
                    .separator("__")
                    .list_separator(",")
                    .with_list_parse_key("worker.queues")
                    .with_list_parse_key("redis.cluster_urls")
                    .with_list_parse_key("webhooks.allowed_networks")
                    .with_list_parse_key("analysis.date_languages")
                    .try_parsing(true)
                    .source(Some(source.env.clone())),
            );
        for (variable, key) in [("DATABASE_URL", "database.url"), ("REDIS_URL", "redis.url")] {
            builder = builder.set_override_option(key, source.env.get(variable).cloned())?;
        }
        let settings: Settings = builder.build()?.try_deserialize()?;
        settings.validate(source.profile)?;
        Ok(settings)
    }

    /// Checks that no value would make the service unsafe or unable to work.
    fn validate(&self, profile: Profile) -> Result<(), SettingsError> {
        let unsafe_setting = |why: &str| Err(SettingsError::Unsafe(why.to_owned()));
        if profile == Profile::Production {
            let secret = self.auth.jwt_secret.expose();
            if secret == DEVELOPMENT_JWT_SECRET {
                return unsafe_setting("auth.jwt_secret is the development default");
            }
            if secret.len() < MIN_PRODUCTION_SECRET_BYTES {
                return unsafe_setting("auth.jwt_secret is shorter than 32 bytes");
            }
            if !self.ops.secure_cookies {
                return unsafe_setting("ops.secure_cookies must be on in production");
            }
            if self.analysis.sandbox == SandboxMode::None {
                return unsafe_setting("analysis.sandbox = \"none\" runs tools unconfined");
            }
        }
        if self.worker.concurrency == 0 || self.worker.analysis_concurrency == 0 {
            return unsafe_setting(
                "worker.concurrency and worker.analysis_concurrency must be at least 1",
            );
        }
        if self.database.pool_size == Some(0) {
            return unsafe_setting("database.pool_size must be at least 1");
        }
        if self.jobs.max_attempts < 1 {
            return unsafe_setting("jobs.max_attempts must be at least 1");
        }
        if self.worker.lease_seconds < 2 {
            return unsafe_setting("worker.lease_seconds must be at least 2");
        }
        if self.dispatcher.batch_size < 1 {
            return unsafe_setting("dispatcher.batch_size must be at least 1");
        }
        if self.storage_gc.batch_size == 0 || self.storage_gc.batches_per_pass == 0 {
            return unsafe_setting("storage_gc batch sizes must be at least 1");
        }
        // A run's objects are named only at its commit, at most its time limit after
        // its put: a shorter grace could collect the objects of a run in flight.
        let longest_run = crate::jobs::catalogue()
            .map(|spec| spec.time_limit_seconds)
            .max()
            .unwrap_or(0);
        if self.storage_gc.grace_seconds < longest_run {
            return Err(SettingsError::Unsafe(format!(
                "storage_gc.grace_seconds must be at least the longest job time limit ({longest_run} s)"
            )));
        }
        if self.scheduling.in_flight_per_queue < 1 || self.scheduling.max_running_per_tenant < 1 {
            return unsafe_setting(
                "scheduling.in_flight_per_queue and max_running_per_tenant must be at least 1",
            );
        }
        if !(1..=100).contains(&self.scheduling.bulk_share_percent) {
            return unsafe_setting("scheduling.bulk_share_percent must be between 1 and 100");
        }
        self.validate_webhooks()?;
        if self.ops.session_seconds == 0 {
            return unsafe_setting("ops.session_seconds must be at least 1");
        }
        if self.auth.admin_audience == self.auth.audience {
            return unsafe_setting("auth.admin_audience must differ from auth.audience");
        }
        let languages = &self.analysis.ocr_languages;
        if languages.is_empty()
            || !languages
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'_')
        {
            return unsafe_setting("analysis.ocr_languages must look like eng or eng+deu");
        }
        if self.analysis.date_languages.is_empty() {
            return unsafe_setting("analysis.date_languages must name at least one language");
        }
        if self.analysis.thumbnail_width == 0
            || self.analysis.max_image_dimension == 0
            || self.analysis.image_memory_budget_mb == 0
            || self.analysis.ocr_max_megapixels == 0
        {
            return unsafe_setting("analysis sizes must be at least 1");
        }
        let language = &self.search.language;
        if language.is_empty()
            || !language
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_')
        {
            return unsafe_setting("search.language must be a text search configuration name");
        }
        if !self.redis.ca_file.is_empty() {
            if !self.redis.cluster_urls.is_empty() {
                return unsafe_setting(
                    "redis.ca_file is for a single server: a cluster's rediss:// nodes use the system store (SSL_CERT_FILE)",
                );
            }
            if !self.redis.url.expose().starts_with("rediss://") {
                return unsafe_setting(
                    "redis.ca_file is set but redis.url is not rediss://: the link would not be encrypted",
                );
            }
        }
        if self.server.tls_cert.is_empty() != self.server.tls_key.is_empty() {
            return unsafe_setting(
                "server.tls_cert and server.tls_key are set together or not at all",
            );
        }
        let schedules = &self.schedules;
        if schedules.check_interval_ms == 0
            || schedules.empty_trash.every_seconds == 0
            || schedules.integrity_scrub.every_seconds == 0
            || schedules.storage_gc.every_seconds == 0
        {
            return unsafe_setting("schedules intervals must be at least 1");
        }
        if schedules.empty_trash.trash_days == 0 || schedules.integrity_scrub.scrub_days == 0 {
            return unsafe_setting("schedules trash_days and scrub_days must be at least 1");
        }
        if schedules.empty_trash.max_per_slot < 1 || schedules.integrity_scrub.max_per_slot < 1 {
            return unsafe_setting("schedules max_per_slot must be at least 1");
        }
        let events = &self.events;
        if events.retention_hours == 0
            || events.heartbeat_seconds == 0
            || events.catch_up_seconds == 0
            || events.buffer_messages == 0
            || events.slow_client_timeout_ms == 0
            || events.page_size < 1
            || events.max_streams_per_tenant == 0
            || events.max_streams == 0
            || events.max_stream_seconds == 0
        {
            return unsafe_setting("every [events] setting must be at least 1");
        }
        if self.redis.namespace.is_empty() || self.redis.namespace.contains(['{', '}']) {
            return unsafe_setting("redis.namespace must be non-empty and without braces");
        }
        if self.storage.backend == StorageBackend::S3 {
            self.storage.s3.validate()?;
        }
        Ok(())
    }
}

impl Settings {
    /// Refuses webhook settings a delivery cannot work with, by name.
    fn validate_webhooks(&self) -> Result<(), SettingsError> {
        let unsafe_setting = |why: &str| Err(SettingsError::Unsafe(why.to_owned()));
        let webhooks = &self.webhooks;
        if webhooks.connect_timeout_ms == 0 || webhooks.request_timeout_ms == 0 {
            return unsafe_setting("webhooks timeouts must be at least 1 ms");
        }
        // An attempt must end by its own timeout, never by the job's time limit.
        let limit = <crate::jobs::DeliverWebhook as crate::jobs::BackgroundJob>::TIME_LIMIT;
        if Duration::from_millis(webhooks.request_timeout_ms) >= limit {
            return Err(SettingsError::Unsafe(format!(
                "webhooks.request_timeout_ms must be below the delivery's time limit ({} s)",
                limit.as_secs()
            )));
        }
        if webhooks.retry_backoff_base_ms == 0
            || webhooks.retry_backoff_max_ms < webhooks.retry_backoff_base_ms
        {
            return unsafe_setting(
                "webhooks.retry_backoff_base_ms must be at least 1 and at most retry_backoff_max_ms",
            );
        }
        // Bounded, so the windows stay far inside PostgreSQL's interval range.
        const THIRTY_DAYS: u64 = 30 * 24 * 3600;
        if webhooks.retry_for_seconds == 0 || webhooks.retry_for_seconds > THIRTY_DAYS {
            return unsafe_setting("webhooks.retry_for_seconds must be between 1 and 2592000");
        }
        if webhooks.disable_after_failures < 1
            || webhooks.disable_after_failing_seconds == 0
            || webhooks.disable_after_failing_seconds > THIRTY_DAYS
        {
            return unsafe_setting(
                "webhooks.disable_after_failures must be at least 1 and disable_after_failing_seconds between 1 and 2592000",
            );
        }
        if let Err(network) = crate::webhook::target::parse_networks(&webhooks.allowed_networks) {
            return Err(SettingsError::Unsafe(format!(
                "webhooks.allowed_networks: {network:?} is not a network such as 10.0.0.0/8"
            )));
        }
        Ok(())
    }
}

impl S3Settings {
    /// Refuses settings the S3 backend cannot work with, by name.
    fn validate(&self) -> Result<(), SettingsError> {
        let unsafe_setting = |why: &str| Err(SettingsError::Unsafe(why.to_owned()));
        if self.bucket.is_empty() {
            return unsafe_setting("storage.s3.bucket must be set for storage.backend = \"s3\"");
        }
        if !self.endpoint.is_empty()
            && !self.endpoint.starts_with("http://")
            && !self.endpoint.starts_with("https://")
        {
            return unsafe_setting("storage.s3.endpoint must be an http:// or https:// URL");
        }
        if self.access_key_id.is_empty() != self.secret_access_key.expose().is_empty() {
            return unsafe_setting(
                "storage.s3.access_key_id and storage.s3.secret_access_key are set together or not at all",
            );
        }
        if !self.prefix.is_empty()
            && crate::storage::StorageKey::from_stored(&self.prefix).is_none()
        {
            return unsafe_setting(
                "storage.s3.prefix must be plain path segments (letters, digits, - _ .) without a leading or trailing /",
            );
        }
        if self.part_size_bytes < MIN_S3_PART_BYTES {
            return unsafe_setting("storage.s3.part_size_bytes must be at least 5 MiB (5242880)");
        }
        if self.connect_timeout_ms == 0 || self.request_timeout_ms == 0 {
            return unsafe_setting("storage.s3 timeouts must be at least 1 ms");
        }
        Ok(())
    }
}

/// The repository's `config/` folder, for tests and tools that run from a crate folder.
pub fn workspace_config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each variable set alone to its value, on the development profile, is refused.
    fn assert_each_refused(settings: &[(&str, &str)]) {
        for &(key, value) in settings {
            assert!(
                Settings::from_source(&source(Profile::Development, &[(key, value)])).is_err(),
                "{key} = {value} was accepted"
            );
        }
    }

    fn source(profile: Profile, env: &[(&str, &str)]) -> SettingsSource {
        SettingsSource {
            config_dir: workspace_config_dir(),
            profile,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn profile_file_overrides_defaults() {
        let settings = Settings::from_source(&source(Profile::Test, &[])).expect("settings");
        assert_eq!(settings.dispatcher.poll_interval_ms, 200);
        assert_eq!(settings.server.port, 8080);
    }

    #[test]
    fn environment_overrides_files_and_conventional_urls_win() {
        let settings = Settings::from_source(&source(
            Profile::Development,
            &[
                ("QUIRE__WORKER__CONCURRENCY", "3"),
                ("QUIRE__WORKER__QUEUES", "analyze-document,verify-document"),
                ("DATABASE_URL", "postgres://x@db/quire"),
                ("QUIRE__DATABASE__URL", "postgres://ignored@db/quire"),
            ],
        ))
        .expect("settings");
        assert_eq!(settings.worker.concurrency, 3);
        assert_eq!(
            settings.worker.queues,
            vec!["analyze-document", "verify-document"]
        );
        assert_eq!(settings.database.url.expose(), "postgres://x@db/quire");
    }

    #[test]
    fn webhook_settings_are_checked_and_networks_come_from_the_environment() {
        let settings = Settings::from_source(&source(
            Profile::Development,
            &[("QUIRE__WEBHOOKS__ALLOWED_NETWORKS", "10.20.0.0/16,fd00::/8")],
        ))
        .expect("settings");
        assert_eq!(
            settings.webhooks.allowed_networks,
            vec!["10.20.0.0/16", "fd00::/8"]
        );
        assert_each_refused(&[
            ("QUIRE__WEBHOOKS__ALLOWED_NETWORKS", "not-a-network"),
            ("QUIRE__WEBHOOKS__REQUEST_TIMEOUT_MS", "60000"),
            ("QUIRE__WEBHOOKS__CONNECT_TIMEOUT_MS", "0"),
            ("QUIRE__WEBHOOKS__RETRY_FOR_SECONDS", "0"),
            ("QUIRE__WEBHOOKS__DISABLE_AFTER_FAILURES", "0"),
        ]);
    }

    #[test]
    fn date_languages_and_order_come_from_the_files_or_the_environment() {
        use crate::analysis::dates::DateLanguage;
        let defaults = Settings::from_source(&source(Profile::Development, &[])).expect("settings");
        assert_eq!(defaults.analysis.date_order, DateOrder::Dmy);
        assert_eq!(defaults.analysis.date_languages, DateLanguage::ALL.to_vec());
        let settings = Settings::from_source(&source(
            Profile::Development,
            &[
                ("QUIRE__ANALYSIS__DATE_LANGUAGES", "de,en"),
                ("QUIRE__ANALYSIS__DATE_ORDER", "ymd"),
            ],
        ))
        .expect("settings");
        assert_eq!(
            settings.analysis.date_languages,
            vec![DateLanguage::De, DateLanguage::En]
        );
        assert_eq!(settings.analysis.date_order, DateOrder::Ymd);
        assert_each_refused(&[
            ("QUIRE__ANALYSIS__DATE_LANGUAGES", "de,xx"),
            ("QUIRE__ANALYSIS__DATE_ORDER", "dym"),
        ]);
    }

    #[test]
    fn scheduling_settings_are_checked() {
        let defaults = Settings::from_source(&source(Profile::Development, &[])).expect("settings");
        assert_eq!(defaults.scheduling.max_running_per_tenant, 64);
        assert!(defaults.scheduling.express);
        assert_eq!(defaults.scheduling.bulk_share_percent, 20);
        assert_each_refused(&[
            ("QUIRE__SCHEDULING__BULK_SHARE_PERCENT", "0"),
            ("QUIRE__SCHEDULING__BULK_SHARE_PERCENT", "101"),
            ("QUIRE__SCHEDULING__IN_FLIGHT_PER_QUEUE", "0"),
            ("QUIRE__SCHEDULING__MAX_RUNNING_PER_TENANT", "0"),
        ]);
    }

    #[test]
    fn an_unset_pool_is_what_each_process_needs_and_a_set_one_is_the_bound() {
        let defaults = Settings::from_source(&source(Profile::Development, &[])).expect("settings");
        assert_eq!(defaults.database.pool_size, None);
        assert_eq!(defaults.database.pool_size_or(DEFAULT_POOL_SIZE), 10);
        assert_eq!(defaults.worker_pool_size(), defaults.worker.concurrency + 2);
        let set = Settings::from_source(&source(
            Profile::Development,
            &[
                ("QUIRE__DATABASE__POOL_SIZE", "5"),
                ("QUIRE__WORKER__CONCURRENCY", "32"),
            ],
        ))
        .expect("settings");
        assert_eq!(set.worker_pool_size(), 5);
        assert_eq!(set.database.pool_size_or(DEFAULT_POOL_SIZE), 5);
        assert_each_refused(&[
            ("QUIRE__DATABASE__POOL_SIZE", "0"),
            ("QUIRE__WORKER__CONCURRENCY", "0"),
            ("QUIRE__WORKER__ANALYSIS_CONCURRENCY", "0"),
        ]);
    }

    #[test]
    fn event_stream_settings_are_checked() {
        let defaults = Settings::from_source(&source(Profile::Development, &[])).expect("settings");
        assert_eq!(defaults.events.retention(), Duration::from_secs(72 * 3600));
        assert_each_refused(&[
            ("QUIRE__EVENTS__RETENTION_HOURS", "0"),
            ("QUIRE__EVENTS__HEARTBEAT_SECONDS", "0"),
            ("QUIRE__EVENTS__BUFFER_MESSAGES", "0"),
            ("QUIRE__EVENTS__PAGE_SIZE", "0"),
            ("QUIRE__EVENTS__MAX_STREAMS_PER_TENANT", "0"),
        ]);
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let error = Settings::from_source(&source(
            Profile::Development,
            &[("QUIRE__WORKER__CONCURENCY", "3")],
        ))
        .expect_err("a misspelt key must not be ignored");
        assert!(error.to_string().contains("concurency"), "{error}");
    }

    #[test]
    fn production_refuses_the_development_secret_and_short_secrets() {
        let error = Settings::from_source(&source(Profile::Production, &[]))
            .expect_err("development secret in production");
        assert!(error.to_string().contains("development default"), "{error}");

        let error = Settings::from_source(&source(
            Profile::Production,
            &[("QUIRE__AUTH__JWT_SECRET", "short")],
        ))
        .expect_err("short secret in production");
        assert!(error.to_string().contains("32 bytes"), "{error}");

        let long = "x".repeat(MIN_PRODUCTION_SECRET_BYTES);
        Settings::from_source(&source(
            Profile::Production,
            &[("QUIRE__AUTH__JWT_SECRET", long.as_str())],
        ))
        .expect("a long secret is accepted");
    }

    #[test]
    fn dashboard_cookies_are_secure_except_in_development() {
        let long = "x".repeat(MIN_PRODUCTION_SECRET_BYTES);
        let secret = [("QUIRE__AUTH__JWT_SECRET", long.as_str())];
        for (profile, secure) in [
            (Profile::Development, false),
            (Profile::Test, true),
            (Profile::Production, true),
        ] {
            let settings = Settings::from_source(&source(profile, &secret)).expect("settings");
            assert_eq!(settings.ops.secure_cookies, secure, "{profile:?}");
        }
        let error = Settings::from_source(&source(
            Profile::Production,
            &[secret[0], ("QUIRE__OPS__SECURE_COOKIES", "false")],
        ))
        .expect_err("insecure dashboard cookies in production");
        assert!(error.to_string().contains("secure_cookies"), "{error}");
    }

    #[test]
    fn a_storage_gc_grace_shorter_than_the_longest_job_time_limit_is_refused() {
        let longest = crate::jobs::catalogue()
            .map(|spec| spec.time_limit_seconds)
            .max()
            .expect("job types");
        let short = (longest - 1).to_string();
        let error = Settings::from_source(&source(
            Profile::Development,
            &[("QUIRE__STORAGE_GC__GRACE_SECONDS", short.as_str())],
        ))
        .expect_err("a run could still commit the objects it would collect");
        assert!(
            error.to_string().contains("storage_gc.grace_seconds"),
            "{error}"
        );
        let enough = longest.to_string();
        let settings = Settings::from_source(&source(
            Profile::Development,
            &[("QUIRE__STORAGE_GC__GRACE_SECONDS", enough.as_str())],
        ))
        .expect("the longest time limit is enough");
        assert_eq!(settings.storage_gc.grace_seconds, longest);
        let settings = Settings::from_source(&source(Profile::Test, &[])).expect("settings");
        assert_eq!(
            settings.storage_gc.grace(),
            Duration::from_secs(3600),
            "the default"
        );
    }

    #[test]
    fn production_refuses_tools_without_a_sandbox() {
        let long = "x".repeat(MIN_PRODUCTION_SECRET_BYTES);
        let error = Settings::from_source(&source(
            Profile::Production,
            &[
                ("QUIRE__AUTH__JWT_SECRET", long.as_str()),
                ("QUIRE__ANALYSIS__SANDBOX", "none"),
            ],
        ))
        .expect_err("unconfined tools in production");
        assert!(error.to_string().contains("analysis.sandbox"), "{error}");
        let settings = Settings::from_source(&source(
            Profile::Development,
            &[("QUIRE__ANALYSIS__SANDBOX", "none")],
        ))
        .expect("allowed outside production");
        assert_eq!(settings.analysis.sandbox, SandboxMode::None);
        let settings = Settings::from_source(&source(Profile::Test, &[])).expect("settings");
        assert_eq!(settings.analysis.sandbox, SandboxMode::Bwrap, "the default");
    }

    #[test]
    fn the_s3_backend_is_checked_only_when_chosen_and_its_secret_redacted() {
        let settings = Settings::from_source(&source(Profile::Test, &[])).expect("settings");
        assert_eq!(
            settings.storage.backend,
            StorageBackend::Local,
            "the default"
        );
        let s3 = [
            ("QUIRE__STORAGE__BACKEND", "s3"),
            ("QUIRE__STORAGE__S3__BUCKET", "quire"),
            ("QUIRE__STORAGE__S3__ENDPOINT", "http://127.0.0.1:8333"),
            ("QUIRE__STORAGE__S3__ACCESS_KEY_ID", "quire"),
            ("QUIRE__STORAGE__S3__SECRET_ACCESS_KEY", "s3cr3t-key"),
        ];
        let settings = Settings::from_source(&source(Profile::Test, &s3)).expect("settings");
        assert_eq!(settings.storage.backend, StorageBackend::S3);
        assert!(!format!("{settings:?}").contains("s3cr3t-key"));
        for (key, value, named) in [
            ("QUIRE__STORAGE__S3__BUCKET", "", "bucket"),
            ("QUIRE__STORAGE__S3__ENDPOINT", "127.0.0.1:8333", "endpoint"),
            ("QUIRE__STORAGE__S3__SECRET_ACCESS_KEY", "", "set together"),
            ("QUIRE__STORAGE__S3__PREFIX", "/quire/", "prefix"),
            ("QUIRE__STORAGE__S3__PART_SIZE_BYTES", "1024", "5 MiB"),
        ] {
            let mut env = s3.to_vec();
            env.push((key, value));
            let error = Settings::from_source(&source(Profile::Test, &env))
                .expect_err("refused s3 settings");
            assert!(error.to_string().contains(named), "{key}: {error}");
        }
    }

    #[test]
    fn debug_output_redacts_secrets() {
        let settings = Settings::from_source(&source(
            Profile::Development,
            &[("DATABASE_URL", "postgres://user:pa55word@db/quire")],
        ))
        .expect("settings");
        let debug = format!("{settings:?}");
        assert!(!debug.contains("pa55word"));
        assert!(!debug.contains(DEVELOPMENT_JWT_SECRET));
    }
}
