//! The caller's tenant's members (`members:manage`): list, add, change set, remove. A
//! tenant always keeps an owner: the last one can be neither demoted nor removed.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use futures_util::FutureExt;
use quire_shared::actions::idempotency::Scope;
use quire_shared::actions::members as member_actions;
use quire_shared::db::members;
use quire_shared::permissions::CapabilitySet;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::auth::MemberManager;
use crate::error::ApiError;
use crate::idempotency::{self, Answer};
use crate::state::AppState;
use crate::views::{MemberView, ProblemView};

// `Serialize`: the parsed body is the request an Idempotency-Key stands for.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMember {
    user_id: Uuid,
    #[schema(value_type = crate::views::CapabilitySetName, example = "user")]
    capability_set: CapabilitySet,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberPatch {
    #[schema(value_type = crate::views::CapabilitySetName, example = "readonly")]
    capability_set: CapabilitySet,
}

#[utoipa::path(
    get, path = "/api/members", tag = "members", operation_id = "list_members",
    responses(
        (status = 200, description = "{members: [...]}, oldest first"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, or no members:manage", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn list(
    state: web::Data<AppState>,
    caller: MemberManager,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let members: Vec<MemberView> = members::list_members(&mut conn, caller.tenant_id)
        .await?
        .into_iter()
        .map(MemberView::from)
        .collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({ "members": members })))
}

#[utoipa::path(
    post, path = "/api/members", tag = "members", operation_id = "add_member",
    params(("Idempotency-Key" = Option<String>, Header, description = idempotency::HEADER_DESCRIPTION)),
    request_body = NewMember,
    responses(
        (status = 201, description = "added (or, with Idempotency-Key, the first answer again)", body = MemberView,
            headers(("Idempotent-Replayed" = String, description = "`true` on a replayed answer"))),
        (status = 400, description = "invalid_json: the body is not a JSON object of these fields; invalid_idempotency_key", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "idempotency_key_reused: the key was used for another request", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "already_member", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no members:manage, or the tenant is suspended (tenant_suspended) or was reset or deleted while the request was on its way (tenant_unavailable)", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn add(
    state: web::Data<AppState>,
    caller: MemberManager,
    http: HttpRequest,
    body: crate::json_object::JsonObject<NewMember>,
) -> Result<HttpResponse, ApiError> {
    let member = body.0;
    let keyed = idempotency::Key::of(&http, Scope::Tenant(caller.tenant_id))?.map(|key| {
        let digest = idempotency::json_digest("POST", "/api/members", &member);
        key.for_request(digest, &state.settings)
    });
    let tenant = caller.tenant_write();
    let mut conn = state.connection().await?;
    let answered = idempotency::once(&mut conn, keyed, move |conn| {
        async move {
            let added =
                member_actions::add(conn, &tenant, member.user_id, member.capability_set).await?;
            Answer::json(StatusCode::CREATED, &MemberView::from(added))
        }
        .boxed()
    })
    .await?;
    Ok(answered.into_response())
}

#[utoipa::path(
    patch, path = "/api/members/{user_id}", tag = "members", operation_id = "change_member",
    params(("user_id" = Uuid, Path, description = "the member's user id")),
    request_body = MemberPatch,
    responses(
        (status = 200, description = "changed", body = MemberView),
        (status = 404, description = "no such member", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "last_owner: the tenant's last owner cannot be demoted", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no members:manage, or the tenant is suspended (tenant_suspended) or was reset or deleted while the request was on its way (tenant_unavailable)", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn change(
    state: web::Data<AppState>,
    caller: MemberManager,
    path: web::Path<Uuid>,
    body: crate::json_object::JsonObject<MemberPatch>,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let changed = member_actions::change(
        &mut conn,
        &caller.tenant_write(),
        path.into_inner(),
        body.0.capability_set,
    )
    .await?;
    Ok(HttpResponse::Ok().json(MemberView::from(changed)))
}

#[utoipa::path(
    delete, path = "/api/members/{user_id}", tag = "members", operation_id = "remove_member",
    params(("user_id" = Uuid, Path, description = "the member's user id")),
    responses(
        (status = 204, description = "removed"),
        (status = 404, description = "no such member", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "last_owner: the tenant's last owner cannot be removed", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no members:manage, or the tenant is suspended (tenant_suspended) or was reset or deleted while the request was on its way (tenant_unavailable)", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn remove(
    state: web::Data<AppState>,
    caller: MemberManager,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    member_actions::remove(&mut conn, &caller.tenant_write(), path.into_inner()).await?;
    Ok(HttpResponse::NoContent().finish())
}
