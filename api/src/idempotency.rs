//! `Idempotency-Key` at the edge: a client that retries a POST (after a timeout, a
//! dropped connection) with the same key gets the first answer instead of a second
//! document, member or tenant. The rules (what a key is, when a key answers, when it is
//! refused) are `quire_shared::actions::idempotency`; this module reads the header and
//! runs a route's work in the one transaction that claims the key and stores the answer.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use diesel_async::{AsyncConnection, AsyncPgConnection};
use futures_util::future::BoxFuture;
use quire_shared::actions::idempotency::{
    self as rules, IdempotentRequest, RequestDigest, Scope, StoredAnswer,
};
use quire_shared::config::Settings;
use serde::Serialize;

use crate::error::ApiError;

/// The request header.
pub const HEADER: &str = "Idempotency-Key";
/// Set on an answer that is a replay of the first one.
pub const REPLAYED_HEADER: &str = "Idempotent-Replayed";

/// The header as the OpenAPI document describes it on each route that takes it.
pub const HEADER_DESCRIPTION: &str = "1 to 255 visible ASCII characters (400 \
    invalid_idempotency_key otherwise). The same request with the same key within 24 h \
    (server.idempotency_ttl_seconds), concurrently or later, gets the first answer (with \
    Idempotent-Replayed: true) and creates nothing; the same key with another request \
    answers 422 idempotency_key_reused. Keys are per tenant (per operator for tenant \
    creation); a request that failed keeps no key.";

/// A request's checked key and whose namespace it lives in; its digest comes once the
/// body has been read.
#[derive(Debug, Clone)]
pub struct Key {
    scope: Scope,
    key: String,
}

impl Key {
    /// The request's key: `None` without the header; 400 `invalid_idempotency_key` for
    /// a key that is not 1 to 255 visible ASCII characters, or for two headers.
    pub fn of(request: &HttpRequest, scope: Scope) -> Result<Option<Self>, ApiError> {
        let mut values = request.headers().get_all(HEADER);
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(ApiError::bad_request(
                "invalid_idempotency_key",
                "send one Idempotency-Key header",
            ));
        }
        let key = rules::checked_key(value.as_bytes())
            .map_err(|fault| ApiError::bad_request("invalid_idempotency_key", fault.to_string()))?;
        Ok(Some(Self {
            scope,
            key: key.to_owned(),
        }))
    }

    /// The key bound to the request it is sent with.
    pub fn for_request(self, digest: RequestDigest, settings: &Settings) -> IdempotentRequest {
        IdempotentRequest {
            scope: self.scope,
            key: self.key,
            digest: digest.finish(),
            ttl_seconds: i64::try_from(settings.server.idempotency_ttl_seconds).unwrap_or(i64::MAX),
        }
    }
}

/// The digest of a JSON request: method, route and the parsed body serialized again, so
/// that spacing and member order do not make two equal requests differ.
pub fn json_digest(method: &str, route: &str, body: &impl Serialize) -> RequestDigest {
    RequestDigest::new(method, route).part(&serde_json::to_vec(body).unwrap_or_default())
}

/// A route's answer as it is sent, and stored for a replay: status, the headers that
/// matter to a client (content type, `Location`), the body.
#[derive(Debug)]
pub struct Answer(StoredAnswer);

impl Answer {
    pub fn json(status: StatusCode, body: &impl Serialize) -> Result<Self, ApiError> {
        let body = serde_json::to_vec(body)
            .map_err(|error| anyhow::Error::new(error).context("failed to encode the answer"))?;
        Ok(Self(StoredAnswer {
            status: status.as_u16(),
            headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
            body,
        }))
    }

    #[must_use]
    pub fn header(mut self, name: &str, value: String) -> Self {
        self.0.headers.push((name.to_owned(), value));
        self
    }
}

/// What `once` answered: the work's own answer, or the stored first answer.
#[derive(Debug)]
pub struct Answered {
    answer: Answer,
    /// The answer is the first request's: this request ran nothing.
    pub replayed: bool,
}

impl Answered {
    pub fn into_response(self) -> HttpResponse {
        let StoredAnswer {
            status,
            headers,
            body,
        } = self.answer.0;
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = HttpResponse::build(status);
        for (name, value) in headers {
            response.insert_header((name, value));
        }
        if self.replayed {
            response.insert_header((REPLAYED_HEADER, "true"));
        }
        response.body(body)
    }
}

/// Runs `work` as today without a key. With one, runs it inside one transaction that
/// first claims the key (waiting for a concurrent request with the same key to commit
/// or roll back) and stores `work`'s answer before committing: a repeat gets the stored
/// answer and `work` does not run; a failing `work` rolls the key back too. Actions that
/// open their own transaction run in a savepoint of this one.
pub async fn once<F>(
    conn: &mut AsyncPgConnection,
    request: Option<IdempotentRequest>,
    work: F,
) -> Result<Answered, ApiError>
where
    F: for<'r> FnOnce(&'r mut AsyncPgConnection) -> BoxFuture<'r, Result<Answer, ApiError>> + Send,
{
    let Some(request) = request else {
        let answer = work(conn).await?;
        return Ok(Answered {
            answer,
            replayed: false,
        });
    };
    conn.transaction::<_, ApiError, _>(async move |conn| {
        if let Some(stored) = rules::begin(conn, &request).await? {
            return Ok(Answered {
                answer: Answer(stored),
                replayed: true,
            });
        }
        let answer = work(&mut *conn).await?;
        rules::finish(conn, &request, &answer.0).await?;
        Ok(Answered {
            answer,
            replayed: false,
        })
    })
    .await
}
