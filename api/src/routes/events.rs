//! `GET /api/events`: the caller's tenant's events as server-sent events, resumable
//! with `Last-Event-ID` (or `since`). Everything that can refuse the stream (a bad or
//! expired id, the caps, the database) answers problem+json before the first byte.

use actix_web::{HttpRequest, HttpResponse, web};
use quire_shared::db::event_stream::{self, StreamError};
use quire_shared::db::tenant_events::EventCursor;
use serde::Deserialize;

use crate::auth::DocumentReader;
use crate::error::ApiError;
use crate::events::{Refused, StreamConfig, cursor, stream};
use crate::state::AppState;
use crate::views::ProblemView;

/// One message of the stream as a client's parser reads it (the OpenAPI 3.1 way to
/// describe a `text/event-stream`: the schema is one event's). A message without
/// `data` (the opening `id`, the heartbeats) is no event.
#[derive(Debug, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct StreamEvent {
    /// An opaque cursor: send it as Last-Event-ID (or `since`) to resume after it.
    #[schema(pattern = r"^65312e(?:30|3[1-9](?:3[0-9]){0,18})2e(?:30|3[1-9](?:3[0-9]){0,18})$")]
    id: String,
    #[schema(value_type = super::webhooks::EventTypeName)]
    event: String,
    /// The event's payload, one line of JSON (`document_id`, and `job_id` for a job's).
    #[schema(content_media_type = "application/json")]
    data: String,
}

#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    since: Option<String>,
}

fn invalid_id() -> ApiError {
    ApiError::bad_request(
        "invalid_event_id",
        "Last-Event-ID (or since) is not the id of an event of this stream",
    )
}

/// `GET /api/events`.
#[utoipa::path(
    get, path = "/api/events", tag = "events", operation_id = "subscribe_events",
    params(
        // The patterns: empty (or only whitespace: start now), or an `id` as the stream
        // writes it (`cursor::encode`, which `cursor::decode` alone takes back); a
        // header value is ASCII.
        ("Last-Event-ID" = Option<String>, Header, pattern = r"^(?:[\t ]*|65312e(?:30|3[1-9](?:3[0-9]){0,17})2e(?:30|3[1-9](?:3[0-9]){0,17}))$", description = "the `id` of the last message received: the stream resumes after it (EventSource sends it when it reconnects); wins over `since`; 400 invalid_event_id for an id the stream did not write"),
        ("since" = Option<String>, Query, pattern = r"^(?:[\t\n\u000b\u000c\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*|65312e(?:30|3[1-9](?:3[0-9]){0,17})2e(?:30|3[1-9](?:3[0-9]){0,17}))$", description = "the same, for clients that cannot set the header; without either the stream starts now"),
    ),
    responses(
        (status = 200, description = "an endless text/event-stream of the tenant's events, oldest first: each message has `id` (an opaque cursor to resume from), `event` (document.ready, document.failed, document.trashed, document.purged or job.failed) and `data` (the event's JSON payload); the first message carries only an `id`, and a comment line is sent every `[events] heartbeat_seconds`. The server closes the stream at shutdown, after `[events] max_stream_seconds`, or when the client does not keep up; reconnect with Last-Event-ID.", content_type = "text/event-stream", body = StreamEvent),
        (status = 400, description = "`invalid_event_id`: Last-Event-ID or since is not an id of this stream", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, or without documents:read", body = ProblemView, content_type = "application/problem+json"),
        (status = 410, description = "`event_id_expired`: events after this id were pruned (older than `[events] retention_hours`); resynchronise and reconnect without an id", body = ProblemView, content_type = "application/problem+json"),
        (status = 429, description = "`too_many_streams`: the tenant has `[events] max_streams_per_tenant` streams open; retry after Retry-After", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "`event_streams_full`: this API process holds `[events] max_streams` streams, or it is shutting down, or PostgreSQL is unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn subscribe(
    state: web::Data<AppState>,
    caller: DocumentReader,
    req: HttpRequest,
    query: web::Query<EventsQuery>,
) -> Result<HttpResponse, ApiError> {
    // EventSource sends an empty Last-Event-ID when it has none yet: empty names no
    // position. Both are checked when sent, so neither passes unread beside the other.
    let position = |text: &str| -> Result<Option<EventCursor>, ApiError> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        cursor::decode(text).map(Some).ok_or_else(invalid_id)
    };
    let header = match req.headers().get("last-event-id") {
        Some(value) => position(value.to_str().map_err(|_| invalid_id())?)?,
        None => None,
    };
    let since = match query.since.as_deref() {
        Some(text) => position(text)?,
        None => None,
    };
    let from = header.or(since);
    let slot = state.events.open(caller.tenant_id).map_err(|refused| {
        let reason = match refused {
            Refused::TenantFull => "refused_tenant",
            Refused::ProcessFull | Refused::Closing => "refused_process",
        };
        metrics::counter!(quire_shared::metrics::EVENT_STREAMS_DROPPED, "reason" => reason)
            .increment(1);
        match refused {
            Refused::TenantFull => ApiError::StreamsFull {
                per_tenant: true,
                detail: "the tenant has as many event streams open as it may".to_owned(),
            },
            Refused::ProcessFull => ApiError::StreamsFull {
                per_tenant: false,
                detail: "this server holds as many event streams as it may".to_owned(),
            },
            Refused::Closing => ApiError::StreamsFull {
                per_tenant: false,
                detail: "this server is shutting down".to_owned(),
            },
        }
    })?;
    let config = StreamConfig::from(&state.settings.events);
    let mut conn = state.connection().await?;
    let first = event_stream::read_page(&mut conn, caller.tenant_id, from, config.page_size())
        .await
        .map_err(|error| match error {
            StreamError::Pruned => ApiError::Gone {
                code: "event_id_expired",
                detail: "events after this id were pruned (older than the event retention): \
                         resynchronise and reconnect without an id"
                    .to_owned(),
            },
            StreamError::Beyond => invalid_id(),
            StreamError::Db(error) => ApiError::from(error),
        })?;
    drop(conn);
    let start = stream::Start {
        from: from.unwrap_or(first.position),
        first,
    };
    let body = stream::start(
        state.pool.clone(),
        state.events.clone(),
        slot,
        caller.tenant_id,
        start,
        config,
    );
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        // nginx and the like would buffer the stream otherwise.
        .insert_header(("X-Accel-Buffering", "no"))
        // The connection ends with the stream: a dropped client's socket is not kept.
        .force_close()
        .streaming(body))
}
