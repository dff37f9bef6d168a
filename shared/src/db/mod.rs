//! PostgreSQL access: the pool, embedded migrations, the schema, and one storage module
//! per concern with every SQL statement of that concern behind a named function.
//!
//! # Lookups by key
//!
//! A hot statement that finds its rows by key writes its state guard
//! `status IS NOT DISTINCT FROM 'QUEUED'`, never `status = 'QUEUED'` (the same for a
//! `NOT NULL` column). After a vacuum of an idle queue, the partial indexes of queued,
//! pending and publishing rows are recorded as empty (no tuples on their remaining pages),
//! and PostgreSQL goes on estimating them empty however many rows they hold again until
//! the next ANALYZE. An `=` guard lets the planner prove such an index applies, and an
//! "empty" index is cheaper than a primary-key lookup: the claim of one job then scanned
//! every queued job (12 ms for 20,000, the whole backlog per claim). `IS NOT DISTINCT
//! FROM` proves no partial index, so the key is the only way (docs/decisions.md,
//! "Lookups by key ignore the statistics").
//!
//! A statement that finds live outbox events by key also says `status IN ('PENDING',
//! 'PUBLISHING')` ([`live_event`]): a list of constants, which prunes the delivered
//! partition of `outbox_events` from the plan (`IS NOT DISTINCT FROM` prunes nothing)
//! and, being a list, proves no partial index either. Without it, a generic plan made
//! while the delivered partition was empty (a new installation's first minute, every
//! bench) read that partition whole on every call once it had filled: 930 blocks a
//! round's claim, the drain at a quarter of its rate (docs/decisions.md, "Live events
//! apart from the history").

/// The guard that keeps a statement on the live partition of `outbox_events` (the
/// module's "Lookups by key"): qualified by the statement's alias where it has one.
macro_rules! live_event {
    () => {
        "status IN ('PENDING', 'PUBLISHING')"
    };
    ($alias:literal) => {
        concat!($alias, ".status IN ('PENDING', 'PUBLISHING')")
    };
}

/// The `heads` member of a `WITH RECURSIVE` clause: every (queue, priority, tenant_id)
/// with a `PENDING` event, found by skipping from one to the next along
/// `outbox_events_fair_idx` (one index descent each, however many events each holds).
/// The scheduler's round plans from it and the outbox lag (`stats`) reads each one's
/// first due event. A macro, so that both statements stay string literals.
macro_rules! pending_heads {
    () => {
        "heads AS ( \
             (SELECT queue, priority, tenant_id FROM outbox_events \
              WHERE status = 'PENDING' ORDER BY queue, priority, tenant_id LIMIT 1) \
             UNION ALL \
             SELECT n.queue, n.priority, n.tenant_id FROM heads AS h CROSS JOIN LATERAL ( \
                 SELECT e.queue, e.priority, e.tenant_id FROM outbox_events AS e \
                 WHERE e.status = 'PENDING' \
                   AND (e.queue, e.priority, e.tenant_id) > (h.queue, h.priority, h.tenant_id) \
                 ORDER BY e.queue, e.priority, e.tenant_id LIMIT 1) AS n)"
    };
}

/// The events being published right now whose message a worker can still claim, as a
/// `FROM` item of `queue`, `tenant_id` and `priority`: `PUBLISHING`, their job still
/// `QUEUED` on them. An event whose job a worker has already claimed is not in flight,
/// though it stays `PUBLISHING` until its mark, which comes a linger after the push
/// (`publishing::Marks`): counted, it would hold a place of its queue and of its tenant's
/// cap twice (running and in flight) until then. The scheduler's round and the express
/// path's claim count in flight with it. Each event's job is looked up by its key in a
/// scalar subquery, which PostgreSQL runs per event and never turns into a join: as a
/// join, the planner hashed every `QUEUED` job of a backlog on every round (a drain of
/// 10,000 jobs fell to a quarter to a half of the old code's in an A/B). The `PUBLISHING` events are few:
/// at most each queue's in-flight bound.
macro_rules! publishing_in_flight {
    () => {
        "(SELECT e.queue, e.tenant_id, e.priority FROM outbox_events AS e \
          WHERE e.status = 'PUBLISHING' \
            AND (SELECT j.status IS NOT DISTINCT FROM 'QUEUED' AND j.current_event_id = e.id \
                 FROM processing_jobs AS j WHERE j.id = e.job_id))"
    };
}

pub mod analysis;
pub mod assets;
pub mod auto_labels;
pub mod connect;
pub mod date_settings;
pub mod documents;
pub mod enqueue_budget;
pub mod event_stream;
pub mod idempotency;
pub mod intake;
pub mod jobs;
pub mod label_catalog;
pub mod labels;
pub mod maintenance;
pub mod members;
pub mod migrate;
pub mod moved;
pub mod named_objects;
pub mod nonces;
pub mod ops_sessions;
pub mod outbox;
pub mod pauses;
pub mod prepared;
pub mod queue_state;
pub mod scheduler;
pub mod schedules;
pub mod schema;
pub mod search_indexes;
pub mod stats;
pub mod storage_gc;
pub mod tenant_data;
pub mod tenant_events;
pub mod tenants;
pub mod versions;
pub mod webhooks;
pub mod workers;

use std::time::Duration;

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};

use crate::config::{DEFAULT_POOL_SIZE, DatabaseSettings};

pub use connect::{ConnectError, PgConnector, SslMode};

pub type PgPool = Pool<AsyncPgConnection>;
pub type PooledConnection = Object<AsyncPgConnection>;

/// The NOTIFY channel the API signals on commit and dispatchers LISTEN to.
pub const OUTBOX_CHANNEL: &str = "quire_outbox";

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("database query failed")]
    Query(#[from] diesel::result::Error),
    #[error("no database connection available")]
    Pool(#[from] diesel_async::pooled_connection::deadpool::PoolError),
    #[error("failed to build the database pool: {0}")]
    Build(String),
    #[error("failed to run migrations: {0}")]
    Migration(String),
    #[error(transparent)]
    Connect(#[from] ConnectError),
}

/// What a database error says about the next attempt. See [`DbError::fault`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbFault {
    /// The data was refused (SQLSTATE class 22, or a value past one of PostgreSQL's
    /// size limits): the same statement with the same data fails again.
    Data,
    /// The statement ran past its `statement_timeout` (SQLSTATE 57014).
    StatementTimeout,
    /// Anything else: the pool, the connection, a serialization failure or deadlock, a
    /// server shutting down, or a fault we cannot name. Worth another attempt.
    Unavailable,
}

/// The primary messages of the data errors Quire's statements can meet (SQLSTATE class
/// 22, plus tsvector's size limit, class 54). diesel 2.3 and diesel-async 0.9 drop the
/// SQLSTATE when they convert the server's error (diesel-rs/diesel#5232 adds it), so the
/// message is what is left to read; `api/tests/it/analysis.rs` checks each against the
/// real server. A server whose `lc_messages` translates them reads as `Unavailable`: the
/// old, retrying behaviour, never a retryable fault taken for a permanent one.
const DATA_ERROR_MESSAGES: &[&str] = &[
    "invalid byte sequence for encoding",
    "character with byte sequence",
    "unsupported unicode escape sequence",
    "invalid input syntax for",
    "value too long for type",
    "out of range",
    "division by zero",
    "string is too long for tsvector",
    "array size exceeds the maximum",
];

impl DbError {
    /// Whether another attempt could succeed: the one place that decides, for every job
    /// handler and route.
    pub fn fault(&self) -> DbFault {
        use diesel::result::{DatabaseErrorKind, Error};
        let Self::Query(Error::DatabaseError(DatabaseErrorKind::Unknown, info)) = self else {
            return DbFault::Unavailable;
        };
        let message = info.message().to_ascii_lowercase();
        if message.starts_with("canceling statement due to statement timeout") {
            DbFault::StatementTimeout
        } else if DATA_ERROR_MESSAGES
            .iter()
            .any(|known| message.contains(known))
        {
            DbFault::Data
        } else {
            DbFault::Unavailable
        }
    }

    /// A unique or exclusion constraint refused the write.
    pub fn is_unique_violation(&self) -> bool {
        matches!(
            self,
            Self::Query(diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UniqueViolation,
                _
            ))
        )
    }
}

/// How the connections of a pool commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitMode {
    /// The server's `synchronous_commit` (on): an acknowledged commit survives a crash.
    Durable,
    /// `synchronous_commit = off` for every session of the pool: a commit is
    /// acknowledged before its WAL reaches the disk, and a database crash may undo the
    /// last few hundred milliseconds of them. Only for a process all of whose writes a
    /// crash may undo without harm, because a later rule finds and repeats them: the
    /// dispatcher (claims time out, publishing twice is deduplicated by the worker's
    /// claim, the rescuer and the lost-message rule run again). WAL is flushed in order,
    /// so any later durable commit (an upload, a job's finish) makes these durable too.
    Relaxed,
}

/// How the planner treats the prepared statements of a pool's sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanMode {
    /// PostgreSQL's default: custom plans until a generic one looks as cheap.
    Default,
    /// `plan_cache_mode = force_generic_plan`: each prepared statement is planned once
    /// per connection. For pools whose statements all look rows up by key or by arrays
    /// of keys (worker, dispatcher). With an array parameter the planner always finds a
    /// custom plan cheaper — it sees three ids where a generic plan guesses a hundred —
    /// so it planned the batch claim again on every call: 0.86 ms of planning for
    /// 0.6 ms of execution (pg_stat_statements over an integrity drain).
    ///
    /// Also `enable_seqscan = off`. The one plan is made on the tables as they are at
    /// the statement's first run, and kept until an ANALYZE of a table it reads makes
    /// PostgreSQL plan again (autovacuum's next minute, or later). On a new
    /// installation's first jobs, reading `processing_jobs` whole and hashing it is the
    /// cheapest way to find a batch's rows by key, and that plan then read the whole
    /// queue on every call as it grew: the worker's claim and finish, 195 and 189 blocks
    /// a job beside 41,000 jobs, where by key they read 21 and 15
    /// (`plans::plans_made_on_a_small_queue_still_go_by_key_beside_a_large_one`). The
    /// statements of these sessions find their rows by key or along an index, so
    /// without sequential scans their plans are the same at any size. The setting only
    /// prices a sequential scan out of the choice: a statement with no other way still
    /// reads its table whole, and one that reads most of a table goes along an index,
    /// a constant factor dearer, where a plan kept from a small table could cost the
    /// whole table per row. The round sets the same in its own transaction
    /// (`scheduler::begin_round`), whatever session runs it.
    Generic,
}

/// The kinds of session Quire opens, each with its own settings (`SessionMode`): the
/// one place that says how a process's connections behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    /// The API's request sessions: durable, default planning (their listing queries
    /// filter on columns whose selectivity a custom plan can see), a short statement
    /// timeout.
    Api,
    /// The worker's: durable (a finish and a handler's effects must survive a crash),
    /// generic plans.
    Worker,
    /// The dispatcher's, maintenance included: relaxed commits (see
    /// [`CommitMode::Relaxed`]), generic plans.
    Dispatcher,
    /// `quire-admin`, the bench and the tests' own connections: durable, default
    /// planning.
    Admin,
}

/// The session settings of a pool's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionMode {
    pub commit: CommitMode,
    pub plans: PlanMode,
    /// `statement_timeout` in milliseconds; 0 for none.
    pub statement_timeout_ms: u64,
    /// `idle_in_transaction_session_timeout` in milliseconds; 0 for none.
    pub idle_in_transaction_timeout_ms: u64,
}

impl SessionMode {
    /// The settings of `kind`, its statement timeout from `settings`
    /// (`database.statement_timeout_ms`), and for the services' sessions the idle
    /// transaction timeout (`database.idle_in_transaction_timeout_ms`). `quire-admin`,
    /// the bench and the tests may hold a transaction open on purpose: none for them.
    pub fn of(kind: SessionKind, settings: &DatabaseSettings) -> Self {
        let timeouts = &settings.statement_timeout_ms;
        let (commit, plans, statement_timeout_ms) = match kind {
            SessionKind::Api => (CommitMode::Durable, PlanMode::Default, timeouts.api),
            SessionKind::Worker => (CommitMode::Durable, PlanMode::Generic, timeouts.worker),
            SessionKind::Dispatcher => {
                (CommitMode::Relaxed, PlanMode::Generic, timeouts.dispatcher)
            }
            SessionKind::Admin => (CommitMode::Durable, PlanMode::Default, timeouts.admin),
        };
        let idle_in_transaction_timeout_ms = match kind {
            SessionKind::Admin => 0,
            _ => settings.idle_in_transaction_timeout_ms,
        };
        Self {
            commit,
            plans,
            statement_timeout_ms,
            idle_in_transaction_timeout_ms,
        }
    }

    /// The `SET` statements a new connection runs. The timeouts are always set, 0
    /// included, so a server-wide default never stands in for the configured one.
    ///
    /// `jit = off` for every kind: Quire's statements are short lookups and batches, and
    /// a generic plan's estimate over a large table passes the JIT cost thresholds with
    /// nothing to gain. Events retention compiled its generic plan on every pass, 5.9 s
    /// of compilation for a plan that ran in 0.1 ms, beside 20 million events
    /// (docs/benchmarks.md, "Cost at scale").
    fn setup_sql(self) -> String {
        let mut statements = vec![
            "SET jit = off".to_owned(),
            format!("SET statement_timeout = {}", self.statement_timeout_ms),
            format!(
                "SET idle_in_transaction_session_timeout = {}",
                self.idle_in_transaction_timeout_ms
            ),
        ];
        if self.commit == CommitMode::Relaxed {
            statements.push("SET synchronous_commit = off".to_owned());
        }
        if self.plans == PlanMode::Generic {
            statements.push("SET plan_cache_mode = force_generic_plan".to_owned());
            statements.push("SET enable_seqscan = off".to_owned());
        }
        statements.join("; ")
    }
}

/// Builds a lazily connecting pool of admin sessions ([`SessionKind::Admin`]):
/// processes start while PostgreSQL is still coming up and report unreadiness instead of
/// crashing.
pub fn build_pool(settings: &DatabaseSettings) -> Result<PgPool, DbError> {
    build_pool_with(settings, SessionKind::Admin)
}

/// [`build_pool`] for sessions of `kind`.
pub fn build_pool_with(settings: &DatabaseSettings, kind: SessionKind) -> Result<PgPool, DbError> {
    let mode = SessionMode::of(kind, settings);
    let mut config = ManagerConfig::<AsyncPgConnection>::default();
    // The default (`Verified`) runs `SELECT 1` on every checkout: a round trip and a
    // commit per use, about a third of the worker's statements. A connection the server
    // closed is still dropped at checkout (`is_broken` sees the closed socket); one that
    // dies silently fails its next statement, which every caller handles as an error.
    config.recycling_method = RecyclingMethod::Fast;
    // Every connection goes through the URL's connector (its sslmode and root
    // certificates), parsed once here: a bad URL fails the build, not each checkout.
    let connector = PgConnector::parse(settings.url.expose())?;
    let setup = mode.setup_sql();
    config.custom_setup = Box::new(move |_url| {
        let connector = connector.clone();
        let setup = setup.clone();
        Box::pin(async move { connect_with(&connector, &setup).await })
    });
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(
        settings.url.expose(),
        config,
    );
    let timeout = Duration::from_secs(settings.connect_timeout_seconds);
    Pool::builder(manager)
        .max_size(settings.pool_size_or(DEFAULT_POOL_SIZE))
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .runtime(deadpool_runtime())
        .build()
        .map_err(|error| DbError::Build(error.to_string()))
}

async fn connect_with(
    connector: &PgConnector,
    setup: &str,
) -> diesel::ConnectionResult<AsyncPgConnection> {
    use diesel_async::SimpleAsyncConnection;
    let mut conn = connector.connect().await?;
    conn.batch_execute(setup)
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}

/// One connection outside any pool (migrations, test databases), through the same
/// connector as the pools.
pub async fn connect(url: &str) -> Result<AsyncPgConnection, DbError> {
    let connector = PgConnector::parse(url)?;
    connector
        .connect()
        .await
        .map_err(|error| DbError::Build(format!("failed to connect: {error}")))
}

fn deadpool_runtime() -> deadpool::Runtime {
    deadpool::Runtime::Tokio1
}

/// Checks that the database answers.
pub async fn ping(pool: &PgPool) -> Result<(), DbError> {
    use diesel_async::RunQueryDsl;
    let mut conn = pool.get().await?;
    diesel::sql_query("SELECT 1").execute(&mut conn).await?;
    Ok(())
}
