//! Quire's HTTP API. `Application::build` binds and wires everything; tests bind port 0
//! and run the very same server.

mod accept_guard;
mod auth;
pub mod cli;
mod conditional;
mod enqueue_limit;
mod error;
mod events;
mod idempotency;
mod json_object;
mod ops;
mod problem_fallback;
mod request_id;
pub mod routes;
mod sniff;
mod state;
mod upload;
mod views;

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::{App, HttpServer, dev::Server, middleware::from_fn, web};
use anyhow::Context;
use quire_shared::config::Settings;
use tokio_util::sync::CancellationToken;

pub use error::ApiError;
use state::AppState;

/// The entry points of the fuzz targets in `fuzz/` (not an API: nothing else calls
/// them). Re-exports only: the targets run the very code the routes run.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::sniff::{SNIFF_BYTES, sniff};
    pub use crate::upload::{MAX_FILENAME_BYTES, ReceivedUpload, display_filename, receive};
}

/// JSON bodies (edits, bulk actions) are small; anything larger is refused with 413.
const JSON_LIMIT_BYTES: usize = 256 * 1024;

pub struct Application {
    port: u16,
    admin_port: Option<u16>,
    scheme: &'static str,
    server: Server,
    /// Stops the admin listener with the application, however it ends (stopped, or
    /// dropped without running).
    admin_guard: tokio_util::sync::DropGuard,
    /// Closed first at shutdown, so open event streams end and the graceful stop does
    /// not wait for their clients.
    events: Arc<events::EventHub>,
    events_guard: tokio_util::sync::DropGuard,
    /// Its marks are written before the process ends (`Express::flush`).
    express: Option<Arc<quire_shared::publishing::Express>>,
}

impl Application {
    /// Binds `server.host:server.port` (port 0 picks a free one) and builds the server,
    /// and starts the admin listener on `server.admin_listen` (/healthz, /readyz and
    /// /metrics with the queue's state; the public port serves no /metrics).
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let address = (settings.server.host.as_str(), settings.server.port);
        let listener = TcpListener::bind(address)
            .with_context(|| format!("failed to bind {}:{}", address.0, address.1))?;
        Self::with_listener(settings, listener)
    }

    pub fn with_listener(settings: Settings, listener: TcpListener) -> anyhow::Result<Self> {
        let port = listener
            .local_addr()
            .context("listener has no address")?
            .port();
        quire_shared::metrics::install();
        // HTTPS when the settings name a certificate and key (HTTP/1.1 only, as over
        // plain HTTP); read now, so a missing or bad file stops the start, by name.
        let tls = match settings.server.tls() {
            Some((cert, key)) => Some(
                quire_shared::tls::server_config(cert, key)
                    .context("failed to load server.tls_cert / server.tls_key")?,
            ),
            None => None,
        };
        let scheme = settings.server.scheme();
        let pool = quire_shared::db::build_pool_with(
            &settings.database,
            quire_shared::db::SessionKind::Api,
        )?;
        let redis = quire_shared::redis_client::RedisPool::build(&settings.redis)?;
        // Call inside the runtime: the admin listener is spawned at once.
        let admin_stop = CancellationToken::new();
        let store = quire_shared::storage::build(&settings.storage)
            .context("failed to open the object store")?;
        let admin_port = quire_shared::probe_listener::spawn(
            &settings.server.admin_listen,
            pool.clone(),
            redis.clone(),
            Arc::clone(&store),
            quire_shared::probe_listener::Scrape::WithQueueState,
            admin_stop.clone(),
        )?;
        // One LISTEN connection for every event stream of this process; closed with the
        // hub (shutdown, or the application dropped unrun).
        let events = events::EventHub::new(
            settings.events.max_streams_per_tenant,
            settings.events.max_streams,
            settings
                .database
                .pool_size_or(quire_shared::config::DEFAULT_POOL_SIZE),
        );
        let connector = quire_shared::db::PgConnector::parse(settings.database.url.expose())
            .context("invalid database url")?;
        tokio::spawn(events::listen(connector, Arc::clone(&events)));
        let events_guard = events.closing().clone().drop_guard();
        let express = quire_shared::publishing::Express::from_settings(
            &settings,
            "api",
            pool.clone(),
            redis.clone(),
        )
        .map(Arc::new);
        let state = web::Data::new(AppState {
            settings: Arc::new(settings),
            pool,
            store,
            redis,
            express: express.clone(),
            events: Arc::clone(&events),
        });
        let server = HttpServer::new(move || {
            App::new()
                .app_data(state.clone())
                .app_data(
                    web::PathConfig::default().error_handler(|_, _| ApiError::NotFound.into()),
                )
                .app_data(web::QueryConfig::default().error_handler(|error, _| {
                    ApiError::bad_request("invalid_query", error.to_string()).into()
                }))
                .app_data(
                    web::JsonConfig::default()
                        .limit(JSON_LIMIT_BYTES)
                        .error_handler(|error, _| match error {
                            actix_web::error::JsonPayloadError::OverflowKnownLength { .. }
                            | actix_web::error::JsonPayloadError::Overflow { .. } => {
                                ApiError::PayloadTooLarge {
                                    limit: JSON_LIMIT_BYTES as u64,
                                }
                                .into()
                            }
                            _ => ApiError::bad_request(
                                "invalid_json",
                                "the body is not the JSON this route takes",
                            )
                            .into(),
                        }),
                )
                .configure(routes::configure)
                .configure(ops::configure)
                .default_service(web::to(|| async {
                    Err::<actix_web::HttpResponse, _>(ApiError::NotFound)
                }))
                .wrap(from_fn(accept_guard::middleware))
                .wrap(problem_fallback::middleware())
                .wrap(from_fn(request_id::middleware))
        })
        // Signals are the binary's business: it cancels the shutdown token.
        .disable_signals()
        .shutdown_timeout(30);
        let server = match tls {
            Some(mut config) => {
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                server.listen_rustls_0_23(listener, config)
            }
            None => server.listen(listener),
        }
        .context("failed to listen")?
        .run();
        Ok(Self {
            port,
            admin_port,
            scheme,
            server,
            admin_guard: admin_stop.drop_guard(),
            events,
            events_guard,
            express,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The admin listener's port; `None` when `server.admin_listen` is empty.
    pub fn admin_port(&self) -> Option<u16> {
        self.admin_port
    }

    /// `https` when the API serves TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// Serves until `shutdown` is cancelled, then stops gracefully.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let handle = self.server.handle();
        let events = Arc::clone(&self.events);
        tokio::spawn(async move {
            shutdown.cancelled().await;
            events.close();
            handle.stop(true).await;
        });
        tracing::info!(port = self.port, admin_port = ?self.admin_port, scheme = self.scheme, "api listening");
        let served = self.server.await.context("http server failed");
        if let Some(express) = &self.express {
            express.flush().await;
        }
        drop(self.admin_guard);
        drop(self.events_guard);
        served
    }
}

/// Runs the API until `shutdown` is cancelled.
pub async fn run(settings: Settings, shutdown: CancellationToken) -> anyhow::Result<()> {
    Application::build(settings)
        .await?
        .run_until_stopped(shutdown)
        .await
}
