//! Bulk actions on several documents: `POST /api/documents/reanalyze` and
//! `POST /api/documents/verify`. A job of the same kind already queued or running for a
//! document's version is returned, not duplicated (partial unique indexes decide,
//! race-free).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::FutureExt;
use quire_shared::actions::documents::{self as document_actions, BulkResult};
use quire_shared::actions::idempotency::Scope;
use quire_shared::db::pauses::{self, Holds};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::auth::DocumentWriter;
use crate::error::ApiError;
use crate::idempotency::{self, Answer};
use crate::state::AppState;
use crate::views::{BulkResultView, BulkView, JobView, ProblemView};

// `Serialize`: the parsed body is the request an Idempotency-Key stands for.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReanalyzeRequest {
    /// 1 to 100 documents.
    #[schema(min_items = 1, max_items = 100)]
    ids: Vec<Uuid>,
    #[serde(default)]
    force: bool,
}

#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    /// 1 to 100 documents.
    #[schema(min_items = 1, max_items = 100)]
    ids: Vec<Uuid>,
}

/// The bulk answer: each document's job, or `not_found`.
fn answer(results: Vec<BulkResult>, holds: &Holds) -> Result<Answer, ApiError> {
    let results = results
        .into_iter()
        .map(|(document_id, job)| BulkResultView {
            document_id,
            error: job.is_none().then_some("not_found"),
            job: job.map(|job| JobView::held_by(job, holds)),
        })
        .collect();
    Answer::json(StatusCode::ACCEPTED, &BulkView { results })
}

#[utoipa::path(
    post, path = "/api/documents/reanalyze", tag = "documents", operation_id = "reanalyze_documents",
    params(("Idempotency-Key" = Option<String>, Header, description = idempotency::HEADER_DESCRIPTION)),
    request_body = ReanalyzeRequest,
    responses(
        (status = 202, description = "the job of each document, existing or new (or, with Idempotency-Key, the first answer again)", body = BulkView,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replayed answer"))),
        (status = 400, description = "invalid_json: the body is not a JSON object of these fields; invalid_idempotency_key", body = ProblemView, content_type = "application/problem+json"),
        (status = 413, description = "the body is larger than 256 KiB", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "no ids, or more than 100; idempotency_key_reused: the key was used for another request", body = ProblemView, content_type = "application/problem+json"),
        (status = 429, description = "enqueue_rate_limited: the tenant enqueues faster than its rate; retry after Retry-After; nothing was stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no documents:write, or the tenant is suspended", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn reanalyze(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    http: HttpRequest,
    body: crate::json_object::JsonObject<ReanalyzeRequest>,
) -> Result<HttpResponse, ApiError> {
    let request = body.0;
    let keyed = idempotency::Key::of(&http, Scope::Tenant(caller.tenant_id))?.map(|key| {
        let digest = idempotency::json_digest("POST", "/api/documents/reanalyze", &request);
        key.for_request(digest, &state.settings)
    });
    // One job per document named (at most the burst: see `enqueue_budget::take`).
    crate::enqueue_limit::admit(&state, caller.tenant_id, request.ids.len(), "reanalyze").await?;
    let document_caller = state.document_caller(&caller);
    let tenant_id = caller.tenant_id;
    let mut conn = state.connection().await?;
    let answered = idempotency::once(&mut conn, keyed, move |conn| {
        async move {
            let results =
                document_actions::reanalyze(conn, &document_caller, &request.ids, request.force)
                    .await?;
            let holds = pauses::holds(conn, tenant_id).await?;
            answer(results, &holds)
        }
        .boxed()
    })
    .await?;
    Ok(answered.into_response())
}

/// Integrity check only: the document's status stays as it is unless its bytes no longer
/// match (then it ends `FAILED`).
#[utoipa::path(
    post, path = "/api/documents/verify", tag = "documents", operation_id = "verify_documents",
    params(("Idempotency-Key" = Option<String>, Header, description = idempotency::HEADER_DESCRIPTION)),
    request_body = VerifyRequest,
    responses(
        (status = 202, description = "the verify-document job of each document, existing or new (or, with Idempotency-Key, the first answer again)", body = BulkView,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replayed answer"))),
        (status = 400, description = "invalid_json: the body is not a JSON object of these fields; invalid_idempotency_key", body = ProblemView, content_type = "application/problem+json"),
        (status = 413, description = "the body is larger than 256 KiB", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "no ids, or more than 100; idempotency_key_reused: the key was used for another request", body = ProblemView, content_type = "application/problem+json"),
        (status = 429, description = "enqueue_rate_limited: the tenant enqueues faster than its rate; retry after Retry-After; nothing was stored", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no documents:write, or the tenant is suspended", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn verify(
    state: web::Data<AppState>,
    caller: DocumentWriter,
    http: HttpRequest,
    body: crate::json_object::JsonObject<VerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    let request = body.0;
    let keyed = idempotency::Key::of(&http, Scope::Tenant(caller.tenant_id))?.map(|key| {
        let digest = idempotency::json_digest("POST", "/api/documents/verify", &request);
        key.for_request(digest, &state.settings)
    });
    crate::enqueue_limit::admit(&state, caller.tenant_id, request.ids.len(), "verify").await?;
    let document_caller = state.document_caller(&caller);
    let tenant_id = caller.tenant_id;
    let mut conn = state.connection().await?;
    let answered = idempotency::once(&mut conn, keyed, move |conn| {
        async move {
            let results = document_actions::verify(conn, &document_caller, &request.ids).await?;
            let holds = pauses::holds(conn, tenant_id).await?;
            answer(results, &holds)
        }
        .boxed()
    })
    .await?;
    Ok(answered.into_response())
}
