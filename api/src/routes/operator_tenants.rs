//! Tenant administration (operator token): create (through provision-tenant), list, get
//! (with its lifecycle jobs), suspend, activate, the signed deletion or reset request,
//! its limits, and pausing or resuming its processing.
//! Tenant ids are the operator's to know, so a missing tenant answers 404.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::FutureExt;
use quire_shared::actions::idempotency::Scope;
use quire_shared::actions::scheduling;
use quire_shared::actions::tenants as tenant_actions;
use quire_shared::db::tenants::LimitsChange;
use quire_shared::db::{jobs, pauses, tenants};
use quire_shared::jobs::DeleteTenant as DeleteTenantPayload;
use quire_shared::permissions::MemberSpec;
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

use crate::auth::Operator;
use crate::error::ApiError;
use crate::idempotency::{self, Answer};
use crate::state::AppState;
use crate::views::{JobView, ProblemView, TenantJobView, TenantView};

const MAX_MEMBERS: usize = 1000;

// `Serialize`: the parsed body is the request an Idempotency-Key stands for.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTenant {
    /// 1 to 100 characters, unique.
    name: String,
    /// User ids, or `{user_id, capability_set}`; the first bare id becomes `owner`, the
    /// others `user`.
    #[schema(value_type = Vec<Object>)]
    members: Vec<MemberSpec>,
}

#[utoipa::path(
    post, path = "/api/admin/tenants", tag = "admin", operation_id = "create_tenant",
    params(("Idempotency-Key" = Option<String>, Header, description = idempotency::HEADER_DESCRIPTION)),
    request_body = NewTenant,
    responses(
        (status = 202, description = "tenant `creating`, provisioning queued (or, with Idempotency-Key, the first answer again; keys are per operator)", body = TenantJobView,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replayed answer"))),
        (status = 400, description = "invalid_idempotency_key", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "tenant_name_taken", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "invalid_name or invalid_members; idempotency_key_reused: the key was used for another request", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    operator: Operator,
    http: HttpRequest,
    body: web::Json<NewTenant>,
) -> Result<HttpResponse, ApiError> {
    let new_tenant = body.into_inner();
    let keyed = idempotency::Key::of(&http, Scope::Operator(operator.name.clone()))?.map(|key| {
        let digest = idempotency::json_digest("POST", "/api/admin/tenants", &new_tenant);
        key.for_request(digest, &state.settings)
    });
    let NewTenant { name, members } = new_tenant;
    if members.is_empty() || members.len() > MAX_MEMBERS {
        return Err(ApiError::unprocessable(
            "invalid_members",
            format!("name 1 to {MAX_MEMBERS} members; the first becomes the owner"),
        ));
    }
    let max_attempts = state.settings.jobs.max_attempts;
    let request_id = crate::request_id::current();
    let mut conn = state.connection().await?;
    let answered = idempotency::once(&mut conn, keyed, move |conn| {
        async move {
            let (tenant, job) =
                tenant_actions::create_tenant(conn, &name, members, max_attempts, request_id)
                    .await?;
            tracing::info!(operator = %operator.name, tenant_id = %tenant.id, "tenant created");
            Answer::json(
                StatusCode::ACCEPTED,
                &TenantJobView {
                    tenant: tenant.into(),
                    job: job.into(),
                },
            )
        }
        .boxed()
    })
    .await?;
    Ok(answered.into_response())
}

#[utoipa::path(
    get, path = "/api/admin/tenants", tag = "admin", operation_id = "list_tenants",
    responses(
        (status = 200, description = "{tenants: [...]}, by name"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    _operator: Operator,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let tenants: Vec<TenantView> = tenants::list_tenants(&mut conn)
        .await?
        .into_iter()
        .map(TenantView::from)
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "tenants": tenants })))
}

#[utoipa::path(
    get, path = "/api/admin/tenants/{tenant_id}", tag = "admin", operation_id = "get_tenant",
    params(("tenant_id" = Uuid, Path, description = "tenant id")),
    responses(
        (status = 200, description = "{tenant, jobs}: the tenant and its provisioning and deletion jobs, oldest first"),
        (status = 404, description = "no such tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    _operator: Operator,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let tenant_id = path.into_inner();
    let mut conn = state.connection().await?;
    let tenant = tenants::find_tenant(&mut conn, tenant_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let holds = pauses::holds(&mut conn, tenant_id).await?;
    let jobs: Vec<JobView> = jobs::list_tenant_jobs(&mut conn, tenant_id)
        .await?
        .into_iter()
        .map(|job| JobView::held_by(job, &holds))
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "tenant": TenantView::from(tenant), "jobs": jobs })))
}

#[utoipa::path(
    post, path = "/api/admin/tenants/{tenant_id}/suspend", tag = "admin", operation_id = "suspend_tenant",
    params(("tenant_id" = Uuid, Path, description = "tenant id")),
    responses(
        (status = 200, description = "suspended: reads still work, writes answer 403 tenant_suspended", body = TenantView),
        (status = 409, description = "tenant_state: the tenant is not active", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn suspend(
    state: web::Data<AppState>,
    operator: Operator,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let tenant_id = path.into_inner();
    let mut conn = state.connection().await?;
    let tenant = tenant_actions::suspend(&mut conn, tenant_id).await?;
    tracing::info!(operator = %operator.name, %tenant_id, "tenant suspended");
    Ok(HttpResponse::Ok().json(TenantView::from(tenant)))
}

#[utoipa::path(
    post, path = "/api/admin/tenants/{tenant_id}/activate", tag = "admin", operation_id = "activate_tenant",
    params(("tenant_id" = Uuid, Path, description = "tenant id")),
    responses(
        (status = 200, description = "active again", body = TenantView),
        (status = 409, description = "tenant_state: the tenant is not suspended", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn activate(
    state: web::Data<AppState>,
    operator: Operator,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let tenant_id = path.into_inner();
    let mut conn = state.connection().await?;
    let tenant = tenant_actions::activate(&mut conn, tenant_id).await?;
    tracing::info!(operator = %operator.name, %tenant_id, "tenant activated");
    Ok(HttpResponse::Ok().json(TenantView::from(tenant)))
}

/// The body is what `quire-admin tenant delete|reset` signs: see `docs/jobs.md`.
#[utoipa::path(
    post, path = "/api/admin/tenants/{tenant_id}/deletion", tag = "admin", operation_id = "request_tenant_deletion",
    params(("tenant_id" = Uuid, Path, description = "tenant id")),
    request_body(content = Object, description = "{version: 2, remove_tenant, tenant_name, action, nonce, issued_at, signature, final_status?}"),
    responses(
        (status = 202, description = "tenant `deleting`, delete-tenant queued", body = TenantJobView),
        (status = 403, description = "signature_invalid, request_stale, request_from_the_future, tenant_mismatch or nonce_replayed", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "version_unsupported (a v1 request), signature_malformed, nonce_malformed, issued_at_malformed or flags_inconsistent", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "tenant_state (still creating) or tenant_job_active", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn request_deletion(
    state: web::Data<AppState>,
    operator: Operator,
    path: web::Path<Uuid>,
    body: web::Json<DeleteTenantPayload>,
) -> Result<HttpResponse, ApiError> {
    let tenant_id = path.into_inner();
    let request = body.into_inner();
    let action = request.action;
    let mut conn = state.connection().await?;
    let (tenant, job) = tenant_actions::request_deletion(
        &mut conn,
        tenant_id,
        request,
        state.settings.auth.jwt_secret.expose().as_bytes(),
        state.settings.jobs.max_attempts,
        crate::request_id::current(),
    )
    .await?;
    tracing::warn!(operator = %operator.name, %tenant_id, action = action.as_str(), job_id = %job.id, "tenant deletion accepted");
    Ok(HttpResponse::Accepted().json(TenantJobView {
        tenant: tenant.into(),
        job: job.into(),
    }))
}

/// Absent: unchanged; `null`: back to the configuration's default.
fn named<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<i32>>, D::Error> {
    Option::<i32>::deserialize(deserializer).map(Some)
}

/// The limits to change; every member is optional, at least one is needed.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsPatch {
    /// Weight in the fair share between tenants, 1 to 1000.
    share_weight: Option<i32>,
    /// Cap on concurrently running jobs, 1 to 100000; `null`: the configuration's
    /// `scheduling.max_running_per_tenant`.
    #[serde(default, deserialize_with = "named")]
    #[schema(value_type = Option<i32>)]
    max_running_jobs: Option<Option<i32>>,
    /// Enqueue rate on the API, jobs per second, 1 to 100000; `null`:
    /// `enqueue_limit.per_second`.
    #[serde(default, deserialize_with = "named")]
    #[schema(value_type = Option<i32>)]
    enqueue_rate_per_second: Option<Option<i32>>,
    /// Jobs enqueued at once, 1 to 100000; `null`: `enqueue_limit.burst`.
    #[serde(default, deserialize_with = "named")]
    #[schema(value_type = Option<i32>)]
    enqueue_burst: Option<Option<i32>>,
}

#[utoipa::path(
    patch, path = "/api/admin/tenants/{tenant_id}/limits", tag = "admin", operation_id = "set_tenant_limits",
    params(("tenant_id" = Uuid, Path, description = "tenant id")),
    request_body = LimitsPatch,
    responses(
        (status = 200, description = "the tenant with its limits", body = TenantView),
        (status = 422, description = "invalid_limits: a value out of bounds, or nothing named", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn limits(
    state: web::Data<AppState>,
    operator: Operator,
    path: web::Path<Uuid>,
    body: web::Json<LimitsPatch>,
) -> Result<HttpResponse, ApiError> {
    let LimitsPatch {
        share_weight,
        max_running_jobs,
        enqueue_rate_per_second,
        enqueue_burst,
    } = body.into_inner();
    let change = LimitsChange {
        share_weight,
        max_running_jobs,
        enqueue_rate_per_second,
        enqueue_burst,
    };
    let mut conn = state.connection().await?;
    let tenant =
        scheduling::set_limits(&mut conn, path.into_inner(), change, &operator.name).await?;
    Ok(HttpResponse::Ok().json(TenantView::from(tenant)))
}

#[utoipa::path(
    post, path = "/api/admin/tenants/{tenant_id}/pause", tag = "admin", operation_id = "pause_tenant",
    params(("tenant_id" = Uuid, Path, description = "tenant id")),
    responses(
        (status = 200, description = "paused (or paused already): its queued jobs are held, running ones finish", body = TenantView),
        (status = 404, description = "no such tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn pause(
    state: web::Data<AppState>,
    operator: Operator,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let tenant = scheduling::pause_tenant(&mut conn, path.into_inner(), &operator.name).await?;
    Ok(HttpResponse::Ok().json(TenantView::from(tenant)))
}

#[utoipa::path(
    post, path = "/api/admin/tenants/{tenant_id}/resume", tag = "admin", operation_id = "resume_tenant",
    params(("tenant_id" = Uuid, Path, description = "tenant id")),
    responses(
        (status = 200, description = "{tenant, reannounced}: processing again (or never paused); its held jobs continue", body = TenantView),
        (status = 404, description = "no such tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid operator token", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn resume(
    state: web::Data<AppState>,
    operator: Operator,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let (tenant, resumed) =
        scheduling::resume_tenant(&mut conn, path.into_inner(), &operator.name).await?;
    Ok(HttpResponse::Ok().json(json!({
        "tenant": TenantView::from(tenant),
        "reannounced": resumed.reannounced,
    })))
}
