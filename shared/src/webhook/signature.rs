//! Standard Webhooks signing (standardwebhooks.com): the secret is `whsec_` followed by
//! the base64 of its key bytes; a message is signed with HMAC-SHA256 over
//! `{webhook-id}.{webhook-timestamp}.{body}` and the `webhook-signature` header carries
//! `v1,{base64 of the MAC}`. The official libraries of every language verify it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix of a Standard Webhooks secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// Key bytes of a new secret (256 bits, as HMAC-SHA256 wants).
const SECRET_BYTES: usize = 32;

/// A new random secret, `whsec_` + base64 of 32 bytes from the OS's generator.
pub fn generate_secret() -> String {
    let key: [u8; SECRET_BYTES] = rand::random();
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// The key bytes of a secret: the base64 after `whsec_` (a secret without the prefix,
/// or that is not base64, signs with its own bytes, as the reference libraries do not;
/// ours are always generated, so that never happens).
fn key(secret: &str) -> Vec<u8> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    STANDARD
        .decode(encoded)
        .unwrap_or_else(|_| encoded.as_bytes().to_vec())
}

/// The `webhook-signature` header value for this message.
pub fn sign(secret: &str, message_id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key(secret)) else {
        return String::new();
    };
    mac.update(message_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// True when one of the space-separated `v1,` signatures of `header` is this message's,
/// compared in constant time. What a receiver does; the tests use it.
pub fn verify(secret: &str, message_id: &str, timestamp: i64, body: &[u8], header: &str) -> bool {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key(secret)) else {
        return false;
    };
    mac.update(message_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    header.split(' ').any(|candidate| {
        candidate
            .strip_prefix("v1,")
            .and_then(|encoded| STANDARD.decode(encoded).ok())
            .is_some_and(|tag| mac.clone().verify_slice(&tag).is_ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_like_the_standard_webhooks_reference() {
        // The example of the Standard Webhooks specification and its libraries' tests.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn verification_takes_the_right_signature_and_refuses_a_changed_body() {
        let secret = generate_secret();
        assert!(secret.starts_with(SECRET_PREFIX));
        let header = sign(&secret, "m1", 1700000000, b"{}");
        assert!(verify(
            &secret,
            "m1",
            1700000000,
            b"{}",
            &format!("v1,xx {header}")
        ));
        assert!(!verify(&secret, "m1", 1700000000, b"{ }", &header));
        assert!(!verify(&secret, "m1", 1700000001, b"{}", &header));
        assert!(!verify(
            &generate_secret(),
            "m1",
            1700000000,
            b"{}",
            &header
        ));
    }
}
