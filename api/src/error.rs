//! The one API error type, answered as `application/problem+json` (RFC 9457) with a stable
//! `code` and the request id. Internal detail (SQL, paths, storage keys, broker ids, stack
//! traces) is logged once here and never sent.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use quire_shared::actions::ActionError;
use quire_shared::signing::ProofError;
use quire_shared::states::TenantStatus;
use serde::Serialize;

use crate::request_id;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Every token fault answers the same: no hint about what was wrong.
    #[error("missing or invalid credentials")]
    Unauthorized,
    /// Authenticated, but not allowed: not a member, a missing permission, or a tenant
    /// state that refuses the action.
    #[error("{detail}")]
    Forbidden { code: &'static str, detail: String },
    /// A missing row and another tenant's row answer the same.
    #[error("not found")]
    NotFound,
    /// The document exists, but not what was asked of it (a scan's archive copy of a
    /// document that is no scan): 404 with a code of its own.
    #[error("{detail}")]
    NotAvailable { code: &'static str, detail: String },
    #[error("{detail}")]
    BadRequest { code: &'static str, detail: String },
    #[error("{detail}")]
    Unprocessable { code: &'static str, detail: String },
    /// The request is valid but the resource is not in a state that allows it.
    #[error("{detail}")]
    Conflict {
        code: &'static str,
        detail: String,
        /// One extension member of the problem, e.g. `current_status` or
        /// `existing_document_id`, so a client can act without parsing `detail`.
        extension: Option<(&'static str, String)>,
    },
    #[error(
        "the file is not one of the accepted types: PDF, PNG, JPEG, TIFF, WebP or plain text (UTF-8, UTF-16 with a byte order mark, Windows-1252/Latin-1 and other legacy encodings)"
    )]
    UnsupportedMediaType,
    #[error("the request body must be multipart/form-data")]
    NotMultipart,
    #[error("the upload is larger than {limit} bytes")]
    PayloadTooLarge { limit: u64 },
    /// `If-Match` names a version that is no longer the current one; nothing was written.
    #[error("the document changed since this version was read (If-Match); read it again")]
    PreconditionFailed,
    /// The upload's body stopped arriving (`server.upload_read_timeout_ms` without a byte).
    #[error("the upload's body stopped arriving; send it again")]
    UploadTimeout,
    /// The tenant enqueued more jobs than its rate allows (`enqueue_limit`); nothing was
    /// read or stored. `Retry-After` says when the budget holds this request again.
    #[error(
        "the tenant enqueues jobs faster than its rate allows; retry after {retry_after_seconds} s"
    )]
    RateLimited { retry_after_seconds: u64 },
    /// What the request names existed once and is gone for good (an event id older than
    /// the event retention).
    #[error("{detail}")]
    Gone { code: &'static str, detail: String },
    /// Every event stream this tenant (429) or this process (503) may hold is open.
    #[error("{detail}")]
    StreamsFull { per_tenant: bool, detail: String },
    /// `allow` lists the methods the resource does take, for the `Allow` header RFC 9110
    /// requires on a 405 (`None` only when the framework answered without saying).
    #[error("this route does not take that method")]
    MethodNotAllowed { allow: Option<String> },
    #[error("this route answers application/json only")]
    NotAcceptable,
    /// A status the framework chose for a malformed request.
    #[error("the request was rejected")]
    Rejected { status: StatusCode },
    /// A search ran past its statement timeout: the query costs more than a reader may
    /// spend, so the connection was given back rather than held.
    #[error("the search took longer than Quire allows; try fewer or more specific words")]
    SearchTimeout,
    /// Any other statement ran past the API's statement timeout
    /// (`database.statement_timeout_ms.api`): the database is loaded or a lock is held,
    /// and the request gave its connection back rather than hold it.
    #[error("the database took too long to answer; try again shortly")]
    DatabaseTimeout,
    #[error("a dependency is unavailable")]
    Unavailable(#[source] anyhow::Error),
    /// `/readyz`: a check failed. `checks` names each check and whether it passed (the
    /// shape of `health::Readiness`), never an address or an error text.
    #[error("a dependency of this process does not answer; see checks")]
    NotReady { checks: serde_json::Value },
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: String,
    code: &'a str,
    request_id: String,
}

impl ApiError {
    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> Self {
        Self::BadRequest {
            code,
            detail: detail.into(),
        }
    }

    pub fn forbidden(code: &'static str, detail: impl Into<String>) -> Self {
        Self::Forbidden {
            code,
            detail: detail.into(),
        }
    }

    /// A tenant state that refuses the request: the middleware's answer, and a write's
    /// whose tenant changed while it was on its way (`None`: the tenant is gone).
    pub fn tenant_refuses(status: Option<TenantStatus>) -> Self {
        match status {
            Some(TenantStatus::Suspended) => Self::forbidden(
                "tenant_suspended",
                "the tenant is suspended: it can be read but not changed",
            ),
            // Creating or deleting; or active again in a new generation (a reset came
            // in between), or gone: the request was let in before the tenant changed.
            _ => Self::forbidden(
                "tenant_unavailable",
                "the tenant is being set up or deleted",
            ),
        }
    }

    pub fn unprocessable(code: &'static str, detail: impl Into<String>) -> Self {
        Self::Unprocessable {
            code,
            detail: detail.into(),
        }
    }

    /// A storage fault under a request: 503 with Retry-After when the store is
    /// unavailable (a timeout, a 5xx, a refused connection), 500 otherwise. Missing
    /// objects are each route's own answer and never come here.
    pub fn storage(error: quire_shared::storage::StorageError, doing: &'static str) -> Self {
        let transient = error.is_transient();
        let error = anyhow::Error::new(error).context(doing);
        if transient {
            Self::Unavailable(error)
        } else {
            Self::Internal(error)
        }
    }

    /// The stable, documented code clients branch on.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::NotFound => "not_found",
            Self::Forbidden { code, .. }
            | Self::NotAvailable { code, .. }
            | Self::BadRequest { code, .. }
            | Self::Unprocessable { code, .. }
            | Self::Conflict { code, .. } => code,
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::PreconditionFailed => "precondition_failed",
            Self::UploadTimeout => "upload_timeout",
            Self::RateLimited { .. } => "enqueue_rate_limited",
            Self::Gone { code, .. } => code,
            Self::StreamsFull {
                per_tenant: true, ..
            } => "too_many_streams",
            Self::StreamsFull { .. } => "event_streams_full",
            Self::UnsupportedMediaType => "unsupported_file_type",
            Self::NotMultipart => "unsupported_content_type",
            Self::MethodNotAllowed { .. } => "method_not_allowed",
            Self::NotAcceptable => "not_acceptable",
            Self::Rejected { .. } => "request_rejected",
            Self::SearchTimeout => "search_timeout",
            Self::DatabaseTimeout => "database_timeout",
            Self::Unavailable(_) => "service_unavailable",
            Self::NotReady { .. } => "not_ready",
            Self::Internal(_) => "internal_error",
        }
    }

    fn title(&self) -> &'static str {
        match self {
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden { .. } => "Forbidden",
            Self::NotFound | Self::NotAvailable { .. } => "Not found",
            Self::BadRequest { .. } => "Bad request",
            Self::Unprocessable { .. } => "Unprocessable content",
            Self::Conflict { .. } => "Conflict",
            Self::PayloadTooLarge { .. } => "Payload too large",
            Self::PreconditionFailed => "Precondition failed",
            Self::UploadTimeout => "Request timeout",
            Self::RateLimited { .. }
            | Self::StreamsFull {
                per_tenant: true, ..
            } => "Too many requests",
            Self::StreamsFull { .. } => "Service unavailable",
            Self::Gone { .. } => "Gone",
            Self::UnsupportedMediaType | Self::NotMultipart => "Unsupported media type",
            Self::MethodNotAllowed { .. } => "Method not allowed",
            Self::NotAcceptable => "Not acceptable",
            Self::Rejected { .. } => "Request rejected",
            Self::SearchTimeout
            | Self::DatabaseTimeout
            | Self::Unavailable(_)
            | Self::NotReady { .. } => "Service unavailable",
            Self::Internal(_) => "Internal server error",
        }
    }

    /// The member a problem carries beside the standard ones, for a client to act on
    /// without parsing `detail`.
    fn extension(&self) -> Option<(&'static str, serde_json::Value)> {
        match self {
            Self::Conflict {
                extension: Some((name, value)),
                ..
            } => Some((name, value.clone().into())),
            Self::NotReady { checks } => Some(("checks", checks.clone())),
            _ => None,
        }
    }

    /// What the client may read: fixed text for server faults, the message otherwise.
    fn detail(&self) -> String {
        match self {
            Self::Unavailable(_) => "a dependency is unavailable, try again shortly".to_owned(),
            Self::Internal(_) => "the server failed to handle the request".to_owned(),
            other => other.to_string(),
        }
    }
}

/// An action's refusal, as the API answers it.
impl From<ActionError> for ApiError {
    fn from(error: ActionError) -> Self {
        let conflict = |code, detail: &str| ApiError::Conflict {
            code,
            detail: detail.to_owned(),
            extension: None,
        };
        match error {
            ActionError::NotFound => Self::NotFound,
            ActionError::VersionMismatch => Self::PreconditionFailed,
            ActionError::Conflict {
                code,
                detail,
                extension,
            } => Self::Conflict {
                code,
                detail,
                extension,
            },
            ActionError::Invalid { code, detail } => Self::Unprocessable { code, detail },
            ActionError::TenantNameTaken => conflict(
                "tenant_name_taken",
                "a tenant with this name exists already",
            ),
            ActionError::TenantNameMismatch => {
                Self::forbidden("tenant_mismatch", "the signed request names another tenant")
            }
            ActionError::TenantState(status) => Self::Conflict {
                code: "tenant_state",
                detail: format!("the tenant is {status}"),
                extension: Some(("current_status", status.to_string())),
            },
            ActionError::TenantJobActive => conflict(
                "tenant_job_active",
                "a provisioning or deletion of this tenant is queued or running already",
            ),
            ActionError::TenantRefused(refused) => Self::tenant_refuses(refused.0),
            ActionError::NonceReplayed => {
                Self::forbidden("nonce_replayed", "the signed request was used before")
            }
            ActionError::Proof(
                error @ (ProofError::SignatureInvalid
                | ProofError::Stale
                | ProofError::FromTheFuture),
            ) => Self::forbidden(error.code(), error.to_string()),
            ActionError::Proof(error) => Self::unprocessable(error.code(), error.to_string()),
            ActionError::Db(error) => error.into(),
        }
    }
}

impl From<quire_shared::db::DbError> for ApiError {
    fn from(error: quire_shared::db::DbError) -> Self {
        use diesel::result::{DatabaseErrorKind, Error};
        use quire_shared::db::DbError;
        match error {
            DbError::Pool(_)
            | DbError::Query(Error::DatabaseError(
                DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand,
                _,
            )) => Self::Unavailable(error.into()),
            other if other.fault() == quire_shared::db::DbFault::StatementTimeout => {
                Self::DatabaseTimeout
            }
            other => Self::Internal(other.into()),
        }
    }
}

/// A statement's failure outside an action (a transaction the API opens itself).
impl From<diesel::result::Error> for ApiError {
    fn from(error: diesel::result::Error) -> Self {
        quire_shared::db::DbError::from(error).into()
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::NotFound | Self::NotAvailable { .. } => StatusCode::NOT_FOUND,
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            Self::UploadTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::RateLimited { .. }
            | Self::StreamsFull {
                per_tenant: true, ..
            } => StatusCode::TOO_MANY_REQUESTS,
            Self::StreamsFull { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Gone { .. } => StatusCode::GONE,
            Self::UnsupportedMediaType | Self::NotMultipart => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            Self::Rejected { status } => *status,
            Self::SearchTimeout
            | Self::DatabaseTimeout
            | Self::Unavailable(_)
            | Self::NotReady { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let request_id = request_id::current().unwrap_or_default();
        // Handled here, so logged here: once, with the whole chain.
        match self {
            Self::Internal(error) | Self::Unavailable(error) => {
                tracing::error!(%request_id, code = self.code(), error = format!("{error:#}"), "request failed");
            }
            Self::DatabaseTimeout => {
                tracing::warn!(%request_id, code = self.code(), "a statement ran past the api's statement timeout");
            }
            _ => {}
        }
        let status = self.status_code();
        let problem = Problem {
            kind: format!("/problems/{}", self.code().replace('_', "-")),
            title: self.title(),
            status: status.as_u16(),
            detail: self.detail(),
            code: self.code(),
            request_id,
        };
        let mut body = serde_json::to_value(&problem).unwrap_or_default();
        if let (Some((name, value)), Some(object)) = (self.extension(), body.as_object_mut()) {
            object.insert(name.to_owned(), value);
        }
        let mut response = HttpResponse::build(status);
        response.content_type("application/problem+json");
        if matches!(
            self,
            Self::Unavailable(_)
                | Self::DatabaseTimeout
                | Self::StreamsFull { .. }
                | Self::NotReady { .. }
        ) {
            // Long enough for a database restart or failover, short enough to feel live.
            response.insert_header(("Retry-After", "5"));
        }
        if let Self::RateLimited {
            retry_after_seconds,
        } = self
        {
            response.insert_header(("Retry-After", retry_after_seconds.to_string()));
        }
        if let Self::MethodNotAllowed { allow: Some(allow) } = self {
            response.insert_header((actix_web::http::header::ALLOW, allow.clone()));
        }
        if matches!(self, Self::UploadTimeout) {
            // The rest of the body may still come: the connection cannot be reused.
            response.force_close();
        }
        response.json(body)
    }
}
