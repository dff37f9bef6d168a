//! Dashboard (`/ops`) sessions: opened, found, closed and revoked here only (the
//! dashboard and `quire-admin sessions` call these).
//!
//! Only a real operator token opens a session, and the session never outlives it: its
//! expiry is the token's `exp` or `ops.session_seconds` from now, whichever comes
//! first, on the database clock. The session is a random secret the cookie carries;
//! the table keeps its SHA-256 only. A secret is not a token: it opens nothing on
//! `/api/admin`, and signing in with it opens no new session, so a session cannot
//! renew itself. Logout and revocation delete the row, so an old cookie opens nothing.

use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use uuid::Uuid;

use super::ActionError;
use crate::auth::verify_admin;
use crate::config::{AuthSettings, OpsSettings};
use crate::db::ops_sessions::{self, NewSession, SessionRow};

/// Random bytes of a session secret (256 bits), hex in the cookie.
const SECRET_BYTES: usize = 32;

/// A session just opened: the secret for the cookie (shown once, never stored) and its row.
#[derive(Debug)]
pub struct Opened {
    pub secret: String,
    pub session: SessionRow,
}

fn invalid_token() -> ActionError {
    ActionError::Invalid {
        code: "invalid_operator_token",
        detail: "that is not a valid operator token".into(),
    }
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether `secret` could be one this module made (so a cookie of any other shape costs
/// no query).
fn well_formed(secret: &str) -> bool {
    secret.len() == 2 * SECRET_BYTES && secret.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Opens a session with the operator token `token`.
pub async fn open(
    conn: &mut diesel_async::AsyncPgConnection,
    auth: &AuthSettings,
    ops: &OpsSettings,
    token: &str,
) -> Result<Opened, ActionError> {
    let claims = verify_admin(auth, token).map_err(|_| invalid_token())?;
    let token_expires_at =
        OffsetDateTime::from_unix_timestamp(claims.exp).map_err(|_| invalid_token())?;
    let secret = hex::encode(rand::random::<[u8; SECRET_BYTES]>());
    let hash = digest(&secret);
    let session = ops_sessions::insert(
        conn,
        &NewSession {
            secret_sha256: &hash,
            operator: &claims.sub,
            token_id: claims.jti.as_deref(),
            token_expires_at,
            lifetime_seconds: i64::try_from(ops.session_seconds).unwrap_or(i64::MAX),
        },
    )
    .await?
    // Within the verifier's leeway but past its `exp`: nothing left to open.
    .ok_or(ActionError::Invalid {
        code: "operator_token_expired",
        detail: "that operator token has expired".into(),
    })?;
    Ok(Opened { secret, session })
}

/// The live session `secret` opens, if any.
pub async fn find(
    conn: &mut diesel_async::AsyncPgConnection,
    secret: &str,
) -> Result<Option<SessionRow>, ActionError> {
    if !well_formed(secret) {
        return Ok(None);
    }
    Ok(ops_sessions::find_live(conn, &digest(secret)).await?)
}

/// Ends the session `secret` opens (a logout); whether there was one.
pub async fn close(
    conn: &mut diesel_async::AsyncPgConnection,
    secret: &str,
) -> Result<bool, ActionError> {
    if !well_formed(secret) {
        return Ok(false);
    }
    Ok(ops_sessions::delete_by_secret(conn, &digest(secret)).await?)
}

/// Live sessions, oldest first (without their secrets, which are not stored).
pub async fn list(
    conn: &mut diesel_async::AsyncPgConnection,
) -> Result<Vec<SessionRow>, ActionError> {
    Ok(ops_sessions::list_live(conn).await?)
}

/// Which sessions a revocation ends.
#[derive(Debug, Clone)]
pub enum Revoke {
    /// One session, by the id `list` shows.
    Session(Uuid),
    /// Every session of one operator (as their tokens name them).
    Operator(String),
    All,
}

/// Ends the sessions `which` names at once; how many.
pub async fn revoke(
    conn: &mut diesel_async::AsyncPgConnection,
    which: &Revoke,
) -> Result<usize, ActionError> {
    Ok(match which {
        Revoke::Session(id) => ops_sessions::delete_by_id(conn, *id).await?,
        Revoke::Operator(operator) => ops_sessions::delete_by_operator(conn, operator).await?,
        Revoke::All => ops_sessions::delete_all(conn).await?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_secrets_of_the_right_shape_are_looked_up() {
        assert!(well_formed(&"ab".repeat(SECRET_BYTES)));
        assert!(
            !well_formed("eyJhbGciOiJIUzI1NiJ9.e30.sig"),
            "a token is no secret"
        );
        assert!(!well_formed(&"ab".repeat(SECRET_BYTES + 1)));
        assert!(!well_formed(&"zz".repeat(SECRET_BYTES)));
    }
}
