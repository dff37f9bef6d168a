//! The one way Quire connects to PostgreSQL: every pool (API, worker, dispatcher,
//! `quire-admin`, the bench), the migrations and the dispatcher's LISTEN session take a
//! [`PgConnector`] made from the database URL, so they all honour its TLS settings alike.
//!
//! The URL's `sslmode` means what it means to libpq (tokio-postgres knows only three of
//! the modes and no `sslrootcert`; both are taken out of the URL here):
//!
//! | `sslmode` | encrypted | certificate checked |
//! |---|---|---|
//! | `disable` | no | — |
//! | `prefer` (the default) | if the server offers TLS | no |
//! | `require` | always | no; with `sslrootcert`, the chain (as libpq does) |
//! | `verify-ca` | always | the chain ends at `sslrootcert` |
//! | `verify-full` | always | the chain ends at `sslrootcert` and names the host |
//!
//! `sslrootcert` is a PEM file of CA certificates, or `system` for the system store.
//! Any other mode (`allow` included) is refused with a clear error.

use std::str::FromStr;
use std::sync::Arc;

use diesel::ConnectionError;
use diesel_async::AsyncPgConnection;
use percent_encoding::percent_decode_str;
use tokio_postgres::config::SslMode as WireSslMode;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Connection, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::tls::{self, TlsError, Verification};

/// The stream of a connection made by a [`PgConnector`], TLS or not.
pub type PgStream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(
        "unknown sslmode {0:?} in the database url (expected disable, prefer, require, verify-ca or verify-full)"
    )]
    UnknownSslMode(String),
    #[error("sslmode={0} needs sslrootcert=<CA file> (or sslrootcert=system) in the database url")]
    MissingRootCert(&'static str),
    /// tokio-postgres's message names the option, never the password.
    #[error("invalid database url: {0}")]
    Url(String),
    #[error("database tls: {0}")]
    Tls(#[from] TlsError),
}

/// libpq's `sslmode`, the modes Quire supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub fn parse(text: &str) -> Result<Self, ConnectError> {
        match text {
            "disable" => Ok(Self::Disable),
            "prefer" => Ok(Self::Prefer),
            "require" => Ok(Self::Require),
            "verify-ca" => Ok(Self::VerifyCa),
            "verify-full" => Ok(Self::VerifyFull),
            other => Err(ConnectError::UnknownSslMode(other.to_owned())),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    fn wire(self) -> WireSslMode {
        match self {
            Self::Disable => WireSslMode::Disable,
            Self::Prefer => WireSslMode::Prefer,
            Self::Require | Self::VerifyCa | Self::VerifyFull => WireSslMode::Require,
        }
    }
}

/// A parsed database URL and the TLS connector its `sslmode` asks for; cheap to clone.
#[derive(Clone)]
pub struct PgConnector {
    config: Arc<tokio_postgres::Config>,
    tls: MakeRustlsConnect,
    mode: SslMode,
}

impl std::fmt::Debug for PgConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config holds the password: only the mode is shown.
        f.debug_struct("PgConnector")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl PgConnector {
    /// Parses `url` (`postgres://…?sslmode=…&sslrootcert=…`, or libpq's `key=value` form
    /// with tokio-postgres's three modes) and loads the root certificates it names.
    pub fn parse(url: &str) -> Result<Self, ConnectError> {
        let (rest, mode, root) = split_tls_options(url)?;
        let mut config = tokio_postgres::Config::from_str(&rest)
            .map_err(|error| ConnectError::Url(error.to_string()))?;
        let mode = match mode {
            Some(mode) => mode,
            None => match config.get_ssl_mode() {
                WireSslMode::Disable => SslMode::Disable,
                WireSslMode::Require => SslMode::Require,
                _ => SslMode::Prefer,
            },
        };
        config.ssl_mode(mode.wire());
        let roots = match root.as_deref() {
            None => None,
            Some("system") => Some(Arc::new(tls::system_roots()?)),
            Some(path) => Some(Arc::new(tls::roots_from_file(path.as_ref())?)),
        };
        let verification = match (mode, roots) {
            (SslMode::Disable | SslMode::Prefer, _) | (SslMode::Require, None) => {
                Verification::None
            }
            (SslMode::Require | SslMode::VerifyCa, Some(roots)) => Verification::Chain(roots),
            (SslMode::VerifyFull, Some(roots)) => Verification::Full(roots),
            (mode @ (SslMode::VerifyCa | SslMode::VerifyFull), None) => {
                return Err(ConnectError::MissingRootCert(mode.as_str()));
            }
        };
        Ok(Self {
            config: Arc::new(config),
            tls: MakeRustlsConnect::new(tls::client_config(&verification)?),
            mode,
        })
    }

    pub fn ssl_mode(&self) -> SslMode {
        self.mode
    }

    /// A raw tokio-postgres session (the dispatcher's LISTEN).
    pub async fn connect_client(
        &self,
    ) -> Result<(Client, Connection<Socket, PgStream>), tokio_postgres::Error> {
        self.config.connect(self.tls.clone()).await
    }

    /// A diesel connection (pools, migrations).
    pub async fn connect(&self) -> Result<AsyncPgConnection, ConnectionError> {
        let (client, connection) = self
            .connect_client()
            .await
            .map_err(|error| ConnectionError::BadConnection(with_causes(&error)))?;
        AsyncPgConnection::try_from_client_and_connection(client, connection).await
    }
}

/// tokio-postgres's error with its causes: its own text is only "db error" or "error
/// performing TLS handshake"; the server's message or the certificate fault is the
/// cause, and that is what an operator needs. Neither carries the password.
fn with_causes(error: &tokio_postgres::Error) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

/// Takes `sslmode` and `sslrootcert` out of a URL's query: what is left is for
/// tokio-postgres. A `key=value` string is left whole (tokio-postgres reads its
/// `sslmode`; it has no `sslrootcert`).
fn split_tls_options(url: &str) -> Result<(String, Option<SslMode>, Option<String>), ConnectError> {
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let Some((base, query)) = url.split_once('?').filter(|_| is_url) else {
        return Ok((url.to_owned(), None, None));
    };
    let mut mode = None;
    let mut root = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decoded = || percent_decode_str(value).decode_utf8_lossy().into_owned();
        match key {
            "sslmode" => mode = Some(SslMode::parse(&decoded())?),
            "sslrootcert" => root = Some(decoded()),
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, mode, root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_options_leave_the_url_and_the_rest_stays() {
        let (rest, mode, root) = split_tls_options(
            "postgres://u:p@db:5432/quire?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
        )
        .expect("parse");
        assert_eq!(rest, "postgres://u:p@db:5432/quire?application_name=x");
        assert_eq!(mode, Some(SslMode::VerifyFull));
        assert_eq!(root.as_deref(), Some("/etc/ca.pem"));
    }

    #[test]
    fn unknown_modes_are_refused_by_name() {
        for mode in ["allow", "verify_full", "on", ""] {
            let error = PgConnector::parse(&format!("postgres://u@db/quire?sslmode={mode}"))
                .expect_err("an unknown mode is refused");
            let text = error.to_string();
            assert!(text.contains("unknown sslmode"), "{text}");
            assert!(text.contains("verify-full"), "{text}");
        }
    }

    #[test]
    fn verifying_modes_need_a_root_certificate() {
        for mode in ["verify-ca", "verify-full"] {
            let error = PgConnector::parse(&format!("postgres://u@db/quire?sslmode={mode}"))
                .expect_err("no root");
            assert!(error.to_string().contains("sslrootcert"), "{error}");
        }
    }

    #[test]
    fn the_default_is_prefer_and_key_value_strings_keep_their_mode() {
        let url = PgConnector::parse("postgres://u:secret@db/quire").expect("url");
        assert_eq!(url.ssl_mode(), SslMode::Prefer);
        assert!(!format!("{url:?}").contains("secret"));
        let dsn = PgConnector::parse("host=db user=u sslmode=require").expect("dsn");
        assert_eq!(dsn.ssl_mode(), SslMode::Require);
        let off = PgConnector::parse("postgres://u@db/quire?sslmode=disable").expect("off");
        assert_eq!(off.ssl_mode(), SslMode::Disable);
    }
}
