//! The dashboard's session cookie and CSRF protection. Signing in takes an operator
//! token (`quire-admin admin-token`) and opens a server-side session
//! (`quire_shared::actions::ops_sessions`); the cookie carries only the session's
//! random secret, HttpOnly, SameSite=Strict, scoped to `/ops`, and `Secure` unless
//! `ops.secure_cookies` is off (the development profile). Every form carries a CSRF
//! token derived from the session secret with HMAC (and the sign-in form one tied to a
//! pre-session cookie), checked in constant time.

use std::time::Duration;

use actix_web::HttpRequest;
use actix_web::cookie::{Cookie, SameSite};
use hmac::{Hmac, Mac};
use quire_shared::actions::ops_sessions::{self, Opened};
use quire_shared::config::{AuthSettings, OpsSettings};
use quire_shared::db::ops_sessions::SessionRow;
use sha2::Sha256;

use crate::error::ApiError;
use crate::state::AppState;

pub const SESSION_COOKIE: &str = "ops_session";
pub const LOGIN_COOKIE: &str = "ops_login";

/// HMAC under the server secret, for this purpose only (HMAC takes keys of any length,
/// so `None` cannot happen in practice; it fails closed if it did).
fn mac(settings: &AuthSettings, value: &str) -> Option<Hmac<Sha256>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(settings.jwt_secret.expose().as_bytes()).ok()?;
    mac.update(b"quire/ops-csrf|");
    mac.update(value.as_bytes());
    Some(mac)
}

/// The CSRF token of forms shown with `value` (a session, or the pre-session cookie).
pub fn csrf_token(settings: &AuthSettings, value: &str) -> String {
    mac(settings, value)
        .map(|mac| hex::encode(mac.finalize().into_bytes()))
        .unwrap_or_default()
}

/// Whether `token` is the CSRF token for `value` (constant time).
pub fn csrf_matches(settings: &AuthSettings, value: &str, token: &str) -> bool {
    match (hex::decode(token), mac(settings, value)) {
        (Ok(bytes), Some(mac)) => mac.verify_slice(&bytes).is_ok(),
        _ => false,
    }
}

fn cookie<'a>(ops: &OpsSettings, name: &'a str, value: String, max_age: Duration) -> Cookie<'a> {
    Cookie::build(name, value)
        .path("/ops")
        .http_only(true)
        .secure(ops.secure_cookies)
        .same_site(SameSite::Strict)
        .max_age(actix_web::cookie::time::Duration::seconds(
            i64::try_from(max_age.as_secs()).unwrap_or(0),
        ))
        .finish()
}

/// The cookie of a session just opened; the browser drops it when the session ends
/// (the server forgets it then anyway).
pub fn session_cookie(ops: &OpsSettings, opened: &Opened) -> Cookie<'static> {
    let lifetime = opened.session.expires_at - opened.session.created_at;
    let seconds = u64::try_from(lifetime.whole_seconds()).unwrap_or(0);
    cookie(
        ops,
        SESSION_COOKIE,
        opened.secret.clone(),
        Duration::from_secs(seconds),
    )
    .into_owned()
}

pub fn cleared(ops: &OpsSettings, name: &'static str) -> Cookie<'static> {
    cookie(ops, name, String::new(), Duration::ZERO)
}

/// A fresh random value for the sign-in form's cookie.
pub fn login_cookie(ops: &OpsSettings) -> Cookie<'static> {
    cookie(
        ops,
        LOGIN_COOKIE,
        hex::encode(rand::random::<[u8; 16]>()),
        Duration::from_secs(600),
    )
}

/// The session secret the request's cookie carries, if any.
pub fn secret(req: &HttpRequest) -> Option<String> {
    Some(req.cookie(SESSION_COOKIE)?.value().to_owned())
}

/// The signed-in operator's session: the cookie's secret and its live session row.
pub async fn current(
    state: &AppState,
    req: &HttpRequest,
) -> Result<Option<(String, SessionRow)>, ApiError> {
    let Some(secret) = secret(req) else {
        return Ok(None);
    };
    let mut conn = state.connection().await?;
    Ok(ops_sessions::find(&mut conn, &secret)
        .await?
        .map(|session| (secret, session)))
}
