//! One attempt at delivering one message: resolve and check the target once, connect to
//! exactly the addresses checked, POST the signed body, read the status and at most
//! [`MAX_RESPONSE_PREFIX`] bytes of the answer. Redirects are not followed, proxies from
//! the environment are not used (either would send the request somewhere unchecked),
//! and the connection and the whole attempt are bounded in time.

use std::sync::Arc;
use std::time::Duration;

use reqwest_rustls::Url;
use reqwest_rustls::redirect::Policy;

use super::signature;
use super::target::{TargetError, TargetPolicy};
use crate::tls;

/// The most of a receiver's answer that is read, and stored.
pub const MAX_RESPONSE_PREFIX: usize = 1024;

/// A message to deliver: its Standard Webhooks id, the attempt's timestamp (Unix
/// seconds) and the JSON body.
#[derive(Debug, Clone)]
pub struct Message {
    pub id: String,
    pub timestamp: i64,
    pub body: Vec<u8>,
}

/// How long an attempt may take.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub total: Duration,
}

/// What an attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The receiver answered; 2xx is a delivery, anything else a failure.
    Answered { status: u16, body: String },
    /// The target is not allowed (a private address), or its name does not resolve.
    Refused(TargetError),
    /// No answer: the connection failed or the attempt timed out. The reason is safe to
    /// show the tenant (it names no address of ours).
    NoAnswer(&'static str),
}

impl Attempt {
    pub fn delivered(&self) -> bool {
        matches!(self, Self::Answered { status, .. } if (200..300).contains(status))
    }
}

/// Makes one attempt to POST `message` to `url`, signed with `secret`.
pub async fn send(
    policy: &TargetPolicy,
    url: &str,
    secret: &str,
    message: &Message,
    timeouts: Timeouts,
) -> Attempt {
    let url = match policy.check_url(url) {
        Ok(url) => url,
        Err(refused) => return Attempt::Refused(refused),
    };
    // The resolution counts against the attempt's time too.
    let addresses = match tokio::time::timeout(timeouts.total, policy.resolve(&url)).await {
        Ok(Ok(addresses)) => addresses,
        Ok(Err(refused)) => return Attempt::Refused(refused),
        Err(_) => return Attempt::NoAnswer("resolving the receiver's host name timed out"),
    };
    let client = match client(&url, &addresses, timeouts) {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(
                error = format!("{error:#}"),
                "building the webhook client failed"
            );
            return Attempt::NoAnswer("the delivery could not be prepared");
        }
    };
    let signature = signature::sign(secret, &message.id, message.timestamp, &message.body);
    let attempt = async {
        let response = client
            .post(url.clone())
            .header("content-type", "application/json")
            .header("user-agent", "Quire-Webhooks/1")
            .header("webhook-id", &message.id)
            .header("webhook-timestamp", message.timestamp.to_string())
            .header("webhook-signature", signature)
            .body(message.body.clone())
            .send()
            .await?;
        let status = response.status().as_u16();
        Ok::<_, reqwest_rustls::Error>((status, read_prefix(response).await))
    };
    // reqwest's own timeout covers the request; this one also covers the body prefix.
    match tokio::time::timeout(timeouts.total, attempt).await {
        Ok(Ok((status, body))) => Attempt::Answered { status, body },
        Ok(Err(error)) if error.is_timeout() => {
            Attempt::NoAnswer("the receiver did not answer in time")
        }
        Ok(Err(error)) if error.is_connect() => {
            Attempt::NoAnswer("the receiver refused the connection or could not be reached")
        }
        Ok(Err(_)) => Attempt::NoAnswer("the exchange with the receiver failed"),
        Err(_) => Attempt::NoAnswer("the receiver did not answer in time"),
    }
}

/// A client that connects only to `addresses` for the URL's host, with the timeouts,
/// no redirects and no proxy.
fn client(
    url: &Url,
    addresses: &[std::net::SocketAddr],
    timeouts: Timeouts,
) -> anyhow::Result<reqwest_rustls::Client> {
    // An https receiver is verified against the system's roots; a plain http one never
    // uses TLS, but the client still wants a configuration.
    let verification = if url.scheme() == "https" {
        tls::Verification::Full(Arc::new(tls::system_roots()?))
    } else {
        tls::Verification::None
    };
    let mut builder = reqwest_rustls::Client::builder()
        .tls_backend_preconfigured(tls::client_config(&verification)?)
        .redirect(Policy::none())
        .no_proxy()
        .connect_timeout(timeouts.connect)
        .timeout(timeouts.total)
        .pool_max_idle_per_host(0);
    if let Some(url::Host::Domain(domain)) = url.host() {
        builder = builder.resolve_to_addrs(domain, addresses);
    }
    Ok(builder.build()?)
}

/// At most [`MAX_RESPONSE_PREFIX`] bytes of the body, as text safe to store: invalid
/// UTF-8 replaced, NUL bytes (which PostgreSQL's text refuses) dropped, and cut back to
/// the limit on a character boundary. A body that fails half-way keeps what came.
async fn read_prefix(mut response: reqwest_rustls::Response) -> String {
    let mut prefix = Vec::with_capacity(MAX_RESPONSE_PREFIX);
    while prefix.len() < MAX_RESPONSE_PREFIX {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = MAX_RESPONSE_PREFIX - prefix.len();
                prefix.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    // Dropping the response closes the connection: the rest is never read.
    drop(response);
    safe_text(&prefix)
}

/// `bytes` as text of at most [`MAX_RESPONSE_PREFIX`] bytes without NULs.
pub fn safe_text(bytes: &[u8]) -> String {
    let mut text: String = String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| *c != '\0')
        .collect();
    if text.len() > MAX_RESPONSE_PREFIX {
        let mut end = MAX_RESPONSE_PREFIX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_prefix_is_bounded_text_without_nul_bytes() {
        assert_eq!(safe_text(b"ok"), "ok");
        assert_eq!(safe_text(b"a\0b"), "ab");
        // Each invalid byte becomes a three-byte replacement character: cut back.
        let invalid = vec![0xffu8; MAX_RESPONSE_PREFIX];
        let text = safe_text(&invalid);
        assert!(text.len() <= MAX_RESPONSE_PREFIX);
        assert!(text.chars().all(|c| c == char::REPLACEMENT_CHARACTER));
    }
}
