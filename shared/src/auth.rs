//! Bearer tokens: HS256 JWTs. A user token names a user (`sub`) and a tenant (`tid`) for
//! `auth.audience`; an operator token names an operator for `auth.admin_audience`. The
//! algorithm is pinned, so a token signed any other way (or `none`) is refused.

use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::AuthSettings;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("token is invalid")]
    Invalid(#[source] jsonwebtoken::errors::Error),
    #[error("token is issued in the future")]
    IssuedInTheFuture,
    #[error("token could not be signed")]
    Signing(#[source] jsonwebtoken::errors::Error),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The user.
    pub sub: Uuid,
    /// The tenant every query of this request is scoped to.
    pub tid: Uuid,
    pub iss: String,
    pub aud: String,
    pub iat: i64,
    pub exp: i64,
}

/// An operator's token, for the admin routes only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminClaims {
    /// The operator, as named when the token was minted (for the audit log).
    pub sub: String,
    pub iss: String,
    pub aud: String,
    pub iat: i64,
    pub exp: i64,
    /// This token's own id, recorded by the dashboard sessions it opens (tokens minted
    /// before it existed have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
}

fn now_and_expiry(ttl: Duration) -> (i64, i64) {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    (now, now.saturating_add(ttl))
}

/// Signs an operator token for `operator`, valid for `ttl`.
pub fn mint_admin(
    settings: &AuthSettings,
    operator: &str,
    ttl: Duration,
) -> Result<String, AuthError> {
    let (iat, exp) = now_and_expiry(ttl);
    let claims = AdminClaims {
        sub: operator.to_owned(),
        iss: settings.issuer.clone(),
        aud: settings.admin_audience.clone(),
        iat,
        exp,
        jti: Some(Uuid::now_v7().to_string()),
    };
    encode(settings, &claims)
}

/// Verifies an operator token like [`verify`] does a user token.
pub fn verify_admin(settings: &AuthSettings, token: &str) -> Result<AdminClaims, AuthError> {
    let claims: AdminClaims = decode(settings, &settings.admin_audience, token)?;
    check_issued_at(settings, claims.iat)?;
    Ok(claims)
}

/// Signs a token for `user_id` in `tenant_id`, valid for `ttl`.
pub fn mint(
    settings: &AuthSettings,
    tenant_id: Uuid,
    user_id: Uuid,
    ttl: Duration,
) -> Result<String, AuthError> {
    let (iat, exp) = now_and_expiry(ttl);
    let claims = Claims {
        sub: user_id,
        tid: tenant_id,
        iss: settings.issuer.clone(),
        aud: settings.audience.clone(),
        iat,
        exp,
    };
    sign(settings, &claims)
}

/// Signs `claims` as they are (HS256).
pub fn sign(settings: &AuthSettings, claims: &Claims) -> Result<String, AuthError> {
    encode(settings, claims)
}

fn encode(settings: &AuthSettings, claims: &impl Serialize) -> Result<String, AuthError> {
    let key = EncodingKey::from_secret(settings.jwt_secret.expose().as_bytes())
        .map_err(AuthError::Signing)?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &key).map_err(AuthError::Signing)
}

/// Verifies signature (HS256 only), expiry, issuer and audience, with the configured leeway.
pub fn verify(settings: &AuthSettings, token: &str) -> Result<Claims, AuthError> {
    let claims: Claims = decode(settings, &settings.audience, token)?;
    check_issued_at(settings, claims.iat)?;
    Ok(claims)
}

fn decode<C: serde::de::DeserializeOwned>(
    settings: &AuthSettings,
    audience: &str,
    token: &str,
) -> Result<C, AuthError> {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
    validation.set_issuer(&[&settings.issuer]);
    validation.set_audience(&[audience]);
    validation.leeway = settings.leeway_seconds;
    validation.validate_nbf = true;
    let key = DecodingKey::from_secret(settings.jwt_secret.expose().as_bytes())
        .map_err(AuthError::Invalid)?;
    jsonwebtoken::decode::<C>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(AuthError::Invalid)
}

/// A token issued in the future was minted by a skewed or forged clock.
fn check_issued_at(settings: &AuthSettings, iat: i64) -> Result<(), AuthError> {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let leeway = i64::try_from(settings.leeway_seconds).unwrap_or(i64::MAX);
    if iat > now.saturating_add(leeway) {
        return Err(AuthError::IssuedInTheFuture);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    fn settings() -> AuthSettings {
        AuthSettings {
            jwt_secret: Secret::new("a-test-secret-that-is-long-enough-for-hs256"),
            issuer: "quire".into(),
            audience: "quire-api".into(),
            leeway_seconds: 5,
            token_ttl_seconds: 60,
            admin_audience: "quire-admin".into(),
        }
    }

    #[test]
    fn user_and_operator_tokens_never_stand_in_for_each_other() {
        let user = mint(
            &settings(),
            Uuid::nil(),
            Uuid::nil(),
            Duration::from_secs(60),
        )
        .expect("mint");
        let operator = mint_admin(&settings(), "ops", Duration::from_secs(60)).expect("mint");
        assert_eq!(
            verify_admin(&settings(), &operator).expect("verify").sub,
            "ops"
        );
        assert!(verify_admin(&settings(), &user).is_err());
        assert!(verify(&settings(), &operator).is_err());
    }

    #[test]
    fn a_minted_token_verifies_and_names_user_and_tenant() {
        let (tenant, user) = (Uuid::now_v7(), Uuid::now_v7());
        let token = mint(&settings(), tenant, user, Duration::from_secs(60)).expect("mint");
        let claims = verify(&settings(), &token).expect("verify");
        assert_eq!((claims.tid, claims.sub), (tenant, user));
    }

    #[test]
    fn wrong_secret_audience_or_expired_tokens_are_refused() {
        let token = mint(
            &settings(),
            Uuid::nil(),
            Uuid::nil(),
            Duration::from_secs(60),
        )
        .expect("mint");
        let mut other = settings();
        other.jwt_secret = Secret::new("another-secret-that-is-long-enough-too");
        assert!(verify(&other, &token).is_err());

        let mut other = settings();
        other.audience = "someone-else".into();
        assert!(verify(&other, &token).is_err());

        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let mut claims = verify(&settings(), &token).expect("verify");
        claims.iat = now - 120;
        claims.exp = now - 60;
        let expired = sign(&settings(), &claims).expect("sign");
        assert!(verify(&settings(), &expired).is_err());
    }

    #[test]
    fn tokens_issued_in_the_future_or_not_yet_valid_are_refused() {
        let token = mint(
            &settings(),
            Uuid::nil(),
            Uuid::nil(),
            Duration::from_secs(600),
        )
        .expect("mint");
        let mut claims = verify(&settings(), &token).expect("verify");
        claims.iat += 300;
        assert!(matches!(
            verify(&settings(), &sign(&settings(), &claims).expect("sign")),
            Err(AuthError::IssuedInTheFuture)
        ));
    }

    #[test]
    fn unsigned_tokens_are_refused() {
        // header {"alg":"none","typ":"JWT"} with valid-looking claims and no signature
        let header = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0";
        let token = mint(
            &settings(),
            Uuid::nil(),
            Uuid::nil(),
            Duration::from_secs(60),
        )
        .expect("mint");
        let claims = token.split('.').nth(1).expect("claims part");
        assert!(verify(&settings(), &format!("{header}.{claims}.")).is_err());
    }
}
