//! Bearer tokens: HS256 JWTs naming a user (`sub`) and a tenant (`tid`). The algorithm is
//! pinned, so a token signed any other way (or `none`) is refused.

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

/// Signs a token for `user_id` in `tenant_id`, valid for `ttl`.
pub fn mint(
    settings: &AuthSettings,
    tenant_id: Uuid,
    user_id: Uuid,
    ttl: Duration,
) -> Result<String, AuthError> {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let claims = Claims {
        sub: user_id,
        tid: tenant_id,
        iss: settings.issuer.clone(),
        aud: settings.audience.clone(),
        iat: now,
        exp: now.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
    };
    sign(settings, &claims)
}

/// Signs `claims` as they are (HS256).
pub fn sign(settings: &AuthSettings, claims: &Claims) -> Result<String, AuthError> {
    let key = EncodingKey::from_secret(settings.jwt_secret.expose().as_bytes())
        .map_err(AuthError::Signing)?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &key).map_err(AuthError::Signing)
}

/// Verifies signature (HS256 only), expiry, issuer and audience, with the configured leeway.
pub fn verify(settings: &AuthSettings, token: &str) -> Result<Claims, AuthError> {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
    validation.set_issuer(&[&settings.issuer]);
    validation.set_audience(&[&settings.audience]);
    validation.leeway = settings.leeway_seconds;
    validation.validate_nbf = true;
    let key = DecodingKey::from_secret(settings.jwt_secret.expose().as_bytes())
        .map_err(AuthError::Invalid)?;
    let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(AuthError::Invalid)?;
    // A token issued in the future was minted by a skewed or forged clock.
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let leeway = i64::try_from(settings.leeway_seconds).unwrap_or(i64::MAX);
    if claims.iat > now.saturating_add(leeway) {
        return Err(AuthError::IssuedInTheFuture);
    }
    Ok(claims)
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
        }
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
