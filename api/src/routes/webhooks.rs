//! The caller's tenant's webhook subscriptions (`members:manage`: the tenant's owners
//! decide where its events go): create, list, get, change, delete; each one's delivery
//! history and redelivery. The rules are `actions::webhooks`; this file translates.

use actix_web::{HttpResponse, web};
use quire_shared::actions::webhooks::{self as webhook_actions, NewWebhook, WebhookPatch};
use quire_shared::db::webhooks::{Delivery, Subscription};
use quire_shared::webhook::target::TargetPolicy;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::MemberManager;
use crate::error::ApiError;
use crate::state::AppState;
use crate::views::ProblemView;

/// Deliveries a history page shows unless asked otherwise.
const DEFAULT_DELIVERIES: i64 = 50;

/// The event types a subscription can name (`TenantEventType`).
pub struct EventTypeName;

impl utoipa::PartialSchema for EventTypeName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(
                quire_shared::db::tenant_events::TenantEventType::ALL
                    .iter()
                    .map(|event_type| event_type.as_str()),
            ))
            .into()
    }
}

impl ToSchema for EventTypeName {}

/// `{webhooks}`: the tenant's subscriptions, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<WebhookView>,
}

/// `{deliveries}`: a subscription's deliveries, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    pub deliveries: Vec<DeliveryView>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWebhookBody {
    /// `https://` or `http://`, at most 2048 characters, no user name or password; a
    /// private, loopback or link-local target is refused unless the operator allowed it.
    /// The pattern is the part of that a document can say: a host name (an address is
    /// checked against the networks the operator allows, which no pattern knows) of
    /// lowercase letters and digits, each label starting with a letter (so never an
    /// address or punycode), an optional port and path.
    #[schema(
        example = "https://hooks.example.com/quire",
        max_length = 2048,
        pattern = r"^https?://[a-z][a-z0-9]{0,62}(?:\.[a-z][a-z0-9]{0,62}){0,8}(?::[1-9][0-9]{0,3})?(?:/[A-Za-z0-9._~-]*){0,16}$"
    )]
    url: String,
    /// Any of `document.ready`, `document.failed`, `document.trashed`,
    /// `document.purged`, `job.failed` (a type named twice counts once).
    #[schema(example = json!(["document.ready", "document.failed"]), min_items = 1, value_type = Vec<EventTypeName>)]
    event_types: Vec<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookPatchBody {
    #[schema(
        max_length = 2048,
        pattern = r"^https?://[a-z][a-z0-9]{0,62}(?:\.[a-z][a-z0-9]{0,62}){0,8}(?::[1-9][0-9]{0,3})?(?:/[A-Za-z0-9._~-]*){0,16}$"
    )]
    url: Option<String>,
    #[schema(min_items = 1, value_type = Option<Vec<EventTypeName>>)]
    event_types: Option<Vec<String>>,
    /// `true` turns a subscription the server disabled on again (clearing its reason).
    enabled: Option<bool>,
}

/// A subscription as its tenant sees it; the secret only ever in [`CreatedWebhookView`].
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookView {
    pub id: Uuid,
    pub url: String,
    pub event_types: Vec<String>,
    pub enabled: bool,
    /// Why the server disabled it (it kept failing); null otherwise.
    pub disabled_reason: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub disabled_at: Option<OffsetDateTime>,
    /// Failed delivery attempts since the last success.
    pub consecutive_failures: i32,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

impl From<Subscription> for WebhookView {
    fn from(subscription: Subscription) -> Self {
        Self {
            id: subscription.id,
            url: subscription.url,
            event_types: subscription.event_types,
            enabled: subscription.enabled,
            disabled_reason: subscription.disabled_reason,
            disabled_at: subscription.disabled_at,
            consecutive_failures: subscription.consecutive_failures,
            created_at: subscription.created_at,
            updated_at: subscription.updated_at,
        }
    }
}

/// The answer to a creation: the subscription and, this once, its signing secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedWebhookView {
    #[serde(flatten)]
    pub webhook: WebhookView,
    /// `whsec_…`: verify each delivery's `webhook-signature` with it (Standard
    /// Webhooks). Shown only now; it cannot be read again.
    pub secret: String,
}

/// One delivery of one event to the subscription.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryView {
    pub id: Uuid,
    /// The `webhook-id` header: the same for a redelivery of the same message.
    pub message_id: String,
    pub event_type: String,
    /// `pending` (queued or retrying), `delivered` or `failed`.
    pub status: String,
    pub attempts: i32,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_attempt_at: Option<OffsetDateTime>,
    /// The receiver's last answer: its status and at most 1 KiB of its body.
    pub response_status: Option<i32>,
    pub response_body: Option<String>,
    pub last_error: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub delivered_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

impl From<Delivery> for DeliveryView {
    fn from(delivery: Delivery) -> Self {
        Self {
            id: delivery.id,
            message_id: format!("msg_{}", delivery.message_id.simple()),
            event_type: delivery.event_type,
            status: delivery.status,
            attempts: delivery.attempts,
            last_attempt_at: delivery.last_attempt_at,
            response_status: delivery.response_status,
            response_body: delivery.response_body,
            last_error: delivery.last_error,
            delivered_at: delivery.delivered_at,
            created_at: delivery.created_at,
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct DeliveriesQuery {
    limit: Option<i64>,
}

fn policy(state: &AppState) -> TargetPolicy {
    TargetPolicy::new(&state.settings.webhooks.allowed_networks)
}

#[utoipa::path(
    get, path = "/api/webhooks", tag = "webhooks", operation_id = "list_webhooks",
    responses(
        (status = 200, description = "the tenant's subscriptions, oldest first", body = WebhookList),
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
    let webhooks: Vec<WebhookView> = webhook_actions::list(&mut conn, caller.tenant_id)
        .await?
        .into_iter()
        .map(WebhookView::from)
        .collect();
    Ok(HttpResponse::Ok().json(WebhookList { webhooks }))
}

#[utoipa::path(
    post, path = "/api/webhooks", tag = "webhooks", operation_id = "create_webhook",
    request_body = NewWebhookBody,
    responses(
        (status = 201, description = "created; the secret is shown this once", body = CreatedWebhookView,
            links(
                ("GetWebhook" = (operation_id = "get_webhook", parameters(("webhook_id" = "$response.body#/id")))),
                ("EditWebhook" = (operation_id = "edit_webhook", parameters(("webhook_id" = "$response.body#/id")))),
                ("DeleteWebhook" = (operation_id = "delete_webhook", parameters(("webhook_id" = "$response.body#/id")))),
                ("ListWebhookDeliveries" = (operation_id = "list_webhook_deliveries", parameters(("webhook_id" = "$response.body#/id"))))
            )),
        (status = 400, description = "invalid_json: the body is not a JSON object of these fields", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "webhook_limit: the tenant has the most subscriptions it may have", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "invalid_webhook_url, webhook_target_refused (a private, loopback or link-local address), invalid_event_types", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no members:manage, or the tenant is not active", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    caller: MemberManager,
    body: crate::json_object::JsonObject<NewWebhookBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let new = NewWebhook {
        url: body.url,
        event_types: body.event_types,
    };
    let mut conn = state.connection().await?;
    let created =
        webhook_actions::create(&mut conn, &caller.tenant_write(), &policy(&state), &new).await?;
    let secret = created.secret.clone();
    Ok(HttpResponse::Created().json(CreatedWebhookView {
        webhook: WebhookView::from(created),
        secret,
    }))
}

#[utoipa::path(
    get, path = "/api/webhooks/{webhook_id}", tag = "webhooks", operation_id = "get_webhook",
    params(("webhook_id" = Uuid, Path, description = "the subscription's id")),
    responses(
        (status = 200, description = "the subscription (never its secret)", body = WebhookView),
        (status = 404, description = "no such subscription in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, or no members:manage", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    caller: MemberManager,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    let subscription = webhook_actions::get(&mut conn, caller.tenant_id, path.into_inner()).await?;
    Ok(HttpResponse::Ok().json(WebhookView::from(subscription)))
}

#[utoipa::path(
    patch, path = "/api/webhooks/{webhook_id}", tag = "webhooks", operation_id = "edit_webhook",
    params(("webhook_id" = Uuid, Path, description = "the subscription's id")),
    request_body = WebhookPatchBody,
    responses(
        (status = 200, description = "changed", body = WebhookView),
        (status = 400, description = "invalid_json: the body is not a JSON object of these fields", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such subscription in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 422, description = "invalid_webhook_url, webhook_target_refused, invalid_event_types", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no members:manage, or the tenant is not active", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn patch(
    state: web::Data<AppState>,
    caller: MemberManager,
    path: web::Path<Uuid>,
    body: crate::json_object::JsonObject<WebhookPatchBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.0;
    let patch = WebhookPatch {
        url: body.url,
        event_types: body.event_types,
        enabled: body.enabled,
    };
    let mut conn = state.connection().await?;
    let changed = webhook_actions::change(
        &mut conn,
        &caller.tenant_write(),
        &policy(&state),
        path.into_inner(),
        &patch,
    )
    .await?;
    Ok(HttpResponse::Ok().json(WebhookView::from(changed)))
}

#[utoipa::path(
    delete, path = "/api/webhooks/{webhook_id}", tag = "webhooks", operation_id = "delete_webhook",
    params(("webhook_id" = Uuid, Path, description = "the subscription's id")),
    responses(
        (status = 204, description = "deleted, with its delivery history"),
        (status = 404, description = "no such subscription in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no members:manage, or the tenant is not active", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    caller: MemberManager,
    path: web::Path<Uuid>,
) -> Result<HttpResponse, ApiError> {
    let mut conn = state.connection().await?;
    webhook_actions::delete(&mut conn, &caller.tenant_write(), path.into_inner()).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(
    get, path = "/api/webhooks/{webhook_id}/deliveries", tag = "webhooks", operation_id = "list_webhook_deliveries",
    params(
        ("webhook_id" = Uuid, Path, description = "the subscription's id"),
        ("limit" = Option<i64>, Query, description = "1 to 100, default 50", minimum = 1, maximum = 100)
    ),
    responses(
        (status = 200, description = "the subscription's deliveries, newest first", body = DeliveryList),
        (status = 400, description = "invalid limit", body = ProblemView, content_type = "application/problem+json"),
        (status = 404, description = "no such subscription in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, or no members:manage", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn deliveries(
    state: web::Data<AppState>,
    caller: MemberManager,
    path: web::Path<Uuid>,
    query: web::Query<DeliveriesQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_DELIVERIES);
    if !(1..=webhook_actions::MAX_DELIVERIES_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_limit",
            format!(
                "limit is between 1 and {}",
                webhook_actions::MAX_DELIVERIES_PAGE
            ),
        ));
    }
    let mut conn = state.connection().await?;
    let deliveries: Vec<DeliveryView> =
        webhook_actions::deliveries(&mut conn, caller.tenant_id, path.into_inner(), limit)
            .await?
            .into_iter()
            .map(DeliveryView::from)
            .collect();
    Ok(HttpResponse::Ok().json(DeliveryList { deliveries }))
}

#[utoipa::path(
    post, path = "/api/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver", tag = "webhooks", operation_id = "redeliver_webhook_delivery",
    params(
        ("webhook_id" = Uuid, Path, description = "the subscription's id"),
        ("delivery_id" = Uuid, Path, description = "the delivery to send again")
    ),
    responses(
        (status = 202, description = "a new delivery of the same message (same webhook-id) is queued", body = DeliveryView),
        (status = 404, description = "no such subscription or delivery in this tenant", body = ProblemView, content_type = "application/problem+json"),
        (status = 409, description = "webhook_disabled: enable the subscription first", body = ProblemView, content_type = "application/problem+json"),
        (status = 401, description = "missing or invalid token", body = ProblemView, content_type = "application/problem+json"),
        (status = 403, description = "not a member, no members:manage, or the tenant is not active", body = ProblemView, content_type = "application/problem+json"),
        (status = 503, description = "PostgreSQL unavailable; retry after Retry-After", body = ProblemView, content_type = "application/problem+json")
    )
)]
pub async fn redeliver(
    state: web::Data<AppState>,
    caller: MemberManager,
    path: web::Path<(Uuid, Uuid)>,
) -> Result<HttpResponse, ApiError> {
    let (webhook_id, delivery_id) = path.into_inner();
    let mut conn = state.connection().await?;
    let delivery =
        webhook_actions::redeliver(&mut conn, &caller.tenant_write(), webhook_id, delivery_id)
            .await?;
    Ok(HttpResponse::Accepted().json(DeliveryView::from(delivery)))
}
