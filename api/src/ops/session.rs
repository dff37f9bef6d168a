//! The dashboard's session and CSRF protection. Signing in takes an operator token
//! (`quire-admin admin-token`); the session is an operator token of its own in an
//! HttpOnly, SameSite=Strict cookie scoped to `/ops`. Every form carries a CSRF token
//! derived from the session with HMAC (and the sign-in form one tied to a pre-session
//! cookie), checked in constant time.

use std::time::Duration;

use actix_web::HttpRequest;
use actix_web::cookie::{Cookie, SameSite};
use hmac::{Hmac, Mac};
use quire_shared::config::AuthSettings;
use sha2::Sha256;

pub const SESSION_COOKIE: &str = "ops_session";
pub const LOGIN_COOKIE: &str = "ops_login";
const SESSION_HOURS: u64 = 8;

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

fn cookie<'a>(name: &'a str, value: String, max_age: Duration) -> Cookie<'a> {
    Cookie::build(name, value)
        .path("/ops")
        .http_only(true)
        .same_site(SameSite::Strict)
        .max_age(actix_web::cookie::time::Duration::seconds(
            i64::try_from(max_age.as_secs()).unwrap_or(0),
        ))
        .finish()
}

/// A new session for `operator`.
pub fn session_cookie(settings: &AuthSettings, operator: &str) -> anyhow::Result<Cookie<'static>> {
    let ttl = Duration::from_secs(SESSION_HOURS * 3600);
    let token = quire_shared::auth::mint_admin(settings, operator, ttl)?;
    Ok(cookie(SESSION_COOKIE, token, ttl).into_owned())
}

pub fn cleared(name: &'static str) -> Cookie<'static> {
    cookie(name, String::new(), Duration::ZERO)
}

/// A fresh random value for the sign-in form's cookie.
pub fn login_cookie() -> Cookie<'static> {
    cookie(
        LOGIN_COOKIE,
        hex::encode(rand::random::<[u8; 16]>()),
        Duration::from_secs(600),
    )
}

/// The signed-in operator: the session cookie's token and name, if valid.
pub fn operator(settings: &AuthSettings, req: &HttpRequest) -> Option<(String, String)> {
    let session = req.cookie(SESSION_COOKIE)?.value().to_owned();
    let claims = quire_shared::auth::verify_admin(settings, &session).ok()?;
    Some((session, claims.sub))
}
