//! Safe retries (`Idempotency-Key`): the rules of a key, once. A request that carries a
//! key runs its action inside one transaction that first claims the key (`begin`) and,
//! before committing, stores the answer it gives (`finish`). A repeat of the same
//! request with the same key — concurrent or later, until the key expires — gets that
//! answer and writes nothing; the same key with another request is refused. A request
//! that fails rolls its key back with everything else, so its retry runs afresh.

use diesel_async::AsyncPgConnection;
use sha2::{Digest, Sha256};

use super::ActionError;
use crate::db::idempotency::{self, Claim, NewKey};

pub use crate::db::idempotency::Scope;

/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 255;

/// Why a key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyFault {
    #[error("an Idempotency-Key has 1 to 255 characters")]
    Length,
    #[error("an Idempotency-Key is visible ASCII only (no spaces or control characters)")]
    Characters,
}

/// A client's key as sent, or why it is refused: 1 to 255 visible ASCII characters.
pub fn checked_key(raw: &[u8]) -> Result<&str, KeyFault> {
    if raw.is_empty() || raw.len() > MAX_KEY_BYTES {
        return Err(KeyFault::Length);
    }
    if !raw.iter().all(|byte| (0x21..=0x7e).contains(byte)) {
        return Err(KeyFault::Characters);
    }
    std::str::from_utf8(raw).map_err(|_| KeyFault::Characters)
}

/// The SHA-256 of a request: its method, its route and each part of its body, each part
/// length-prefixed so that no two different requests run together into the same bytes.
#[derive(Clone)]
pub struct RequestDigest(Sha256);

impl RequestDigest {
    pub fn new(method: &str, route: &str) -> Self {
        Self(Sha256::new())
            .part(method.as_bytes())
            .part(route.as_bytes())
    }

    #[must_use]
    pub fn part(mut self, bytes: &[u8]) -> Self {
        self.0.update((bytes.len() as u64).to_be_bytes());
        self.0.update(bytes);
        self
    }

    /// An optional part: absent and empty differ.
    #[must_use]
    pub fn optional_part(self, bytes: Option<&[u8]>) -> Self {
        match bytes {
            Some(bytes) => self.part(b"some").part(bytes),
            None => self.part(b"none"),
        }
    }

    pub fn finish(self) -> [u8; 32] {
        self.0.finalize().into()
    }
}

/// A request that carries a key.
#[derive(Debug, Clone)]
pub struct IdempotentRequest {
    pub scope: Scope,
    pub key: String,
    pub digest: [u8; 32],
    /// How long its answer is kept (`server.idempotency_ttl_seconds`).
    pub ttl_seconds: i64,
}

/// An answer as it is stored and replayed: status, the headers that matter, the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Claims the request's key in the caller's transaction. `None`: the key is this
/// request's, go on (and `finish` before committing). `Some`: the answer of the first
/// request with this key, to give instead of running anything. Refused
/// (`idempotency_key_reused`) when the key was first used for another request.
pub async fn begin(
    conn: &mut AsyncPgConnection,
    request: &IdempotentRequest,
) -> Result<Option<StoredAnswer>, ActionError> {
    let claim = idempotency::claim(
        conn,
        &NewKey {
            scope: &request.scope,
            key: &request.key,
            request_digest: &request.digest,
            ttl_seconds: request.ttl_seconds,
        },
    )
    .await?;
    let stored = match claim {
        Claim::Claimed => return Ok(None),
        Claim::Taken(stored) => stored,
    };
    if stored.request_digest != request.digest {
        return Err(ActionError::Invalid {
            code: "idempotency_key_reused",
            detail: "this Idempotency-Key was used for another request; use a new key for a \
                     new request"
                .to_owned(),
        });
    }
    let (Some(status), Some(body)) = (stored.status, stored.body) else {
        // Committed rows always carry their answer; refuse rather than replay nothing.
        return Err(ActionError::conflict(
            "idempotency_key_in_progress",
            "the first request with this Idempotency-Key has no answer yet; try again",
        ));
    };
    let headers = stored
        .headers
        .and_then(|headers| serde_json::from_value::<Vec<(String, String)>>(headers).ok())
        .unwrap_or_default();
    tracing::debug!(key = %request.key, status, "idempotent request replayed");
    Ok(Some(StoredAnswer {
        status: u16::try_from(status).unwrap_or(500),
        headers,
        body,
    }))
}

/// Stores the answer of the request that claimed its key, in its transaction.
pub async fn finish(
    conn: &mut AsyncPgConnection,
    request: &IdempotentRequest,
    answer: &StoredAnswer,
) -> Result<(), ActionError> {
    let headers = serde_json::to_value(&answer.headers).unwrap_or_default();
    idempotency::complete(
        conn,
        &request.scope,
        &request.key,
        i16::try_from(answer.status).unwrap_or(500),
        headers,
        &answer.body,
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_one_to_255_visible_ascii_characters() {
        assert_eq!(checked_key(b"order-42:retry"), Ok("order-42:retry"));
        assert_eq!(checked_key(&[b'k'; 255]).map(str::len), Ok(255));
        assert_eq!(checked_key(b""), Err(KeyFault::Length));
        assert_eq!(checked_key(&[b'k'; 256]), Err(KeyFault::Length));
        assert_eq!(checked_key(b"two words"), Err(KeyFault::Characters));
        assert_eq!(checked_key(b"tab\there"), Err(KeyFault::Characters));
        assert_eq!(checked_key("clé".as_bytes()), Err(KeyFault::Characters));
    }

    #[test]
    fn digests_tell_parts_apart() {
        let ab = RequestDigest::new("POST", "/r")
            .part(b"ab")
            .part(b"")
            .finish();
        let a_b = RequestDigest::new("POST", "/r")
            .part(b"a")
            .part(b"b")
            .finish();
        assert_ne!(ab, a_b);
        let none = RequestDigest::new("POST", "/r")
            .optional_part(None)
            .finish();
        let empty = RequestDigest::new("POST", "/r")
            .optional_part(Some(b""))
            .finish();
        assert_ne!(none, empty);
        assert_eq!(
            RequestDigest::new("POST", "/r").part(b"x").finish(),
            RequestDigest::new("POST", "/r").part(b"x").finish()
        );
    }
}
