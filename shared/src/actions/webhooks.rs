//! A tenant's webhook subscriptions: create (the secret is generated here and shown
//! once), list, get, change (URL, event types, on/off), delete; each subscription's
//! delivery history and redelivery. Writes hold the tenant (`hold_tenant`) like every
//! other write to its data.

use diesel_async::{AsyncConnection, AsyncPgConnection};
use uuid::Uuid;

use super::{ActionError, hold_tenant};
use crate::db::tenant_events::TenantEventType;
use crate::db::tenants::{TenantLock, TenantWrite};
use crate::db::webhooks::{self, Delivery, NewSubscription, Subscription, SubscriptionChange};
use crate::states::TenantStatus;
use crate::webhook::signature;
use crate::webhook::target::TargetPolicy;

/// Most subscriptions a tenant may have: each event fans out to all of them, so the
/// number bounds the work one change can cause.
pub const MAX_SUBSCRIPTIONS: usize = 20;

/// Most deliveries one history page shows.
pub const MAX_DELIVERIES_PAGE: i64 = 100;

/// A new subscription's URL and event types, as the client sent them.
#[derive(Debug, Clone)]
pub struct NewWebhook {
    pub url: String,
    pub event_types: Vec<String>,
}

/// The checked event types: known, at least one, each once, in the catalogue's order.
fn checked_event_types(names: &[String]) -> Result<Vec<String>, ActionError> {
    if names.is_empty() {
        return Err(invalid(
            "invalid_event_types",
            "name at least one event type",
        ));
    }
    for name in names {
        if TenantEventType::parse(name).is_none() {
            let known: Vec<&str> = TenantEventType::ALL.iter().map(|t| t.as_str()).collect();
            return Err(invalid(
                "invalid_event_types",
                format!("unknown event type; the types are {}", known.join(", ")),
            ));
        }
    }
    Ok(TenantEventType::ALL
        .iter()
        .map(|t| t.as_str())
        .filter(|t| names.iter().any(|name| name == t))
        .map(str::to_owned)
        .collect())
}

fn checked_url(policy: &TargetPolicy, url: &str) -> Result<String, ActionError> {
    policy
        .check_url(url)
        .map(|_| url.to_owned())
        .map_err(|refused| invalid(refused.code(), refused.to_string()))
}

fn invalid(code: &'static str, detail: impl Into<String>) -> ActionError {
    ActionError::Invalid {
        code,
        detail: detail.into(),
    }
}

/// Creates an enabled subscription with a new secret; the returned row is the only
/// time the secret leaves the server.
pub async fn create(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    policy: &TargetPolicy,
    new: &NewWebhook,
) -> Result<Subscription, ActionError> {
    let url = checked_url(policy, &new.url)?;
    let event_types = checked_event_types(&new.event_types)?;
    let secret = signature::generate_secret();
    let tenant_id = tenant.tenant_id;
    let created = conn
        .transaction::<_, ActionError, _>(async |conn| {
            // FOR UPDATE: two concurrent creations cannot both pass the count.
            hold_tenant(conn, tenant, TenantStatus::Active, TenantLock::Update).await?;
            let count = webhooks::count_subscriptions(conn, tenant_id).await?;
            if count >= MAX_SUBSCRIPTIONS as i64 {
                return Err(ActionError::conflict(
                    "webhook_limit",
                    format!("a tenant has at most {MAX_SUBSCRIPTIONS} webhook subscriptions"),
                ));
            }
            let new = NewSubscription {
                id: Uuid::now_v7(),
                tenant_id,
                url: &url,
                secret: &secret,
                event_types: &event_types,
            };
            Ok(webhooks::create_subscription(conn, &new).await?)
        })
        .await?;
    tracing::info!(%tenant_id, subscription_id = %created.id, "webhook subscription created");
    Ok(created)
}

/// The tenant's subscriptions.
pub async fn list(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
) -> Result<Vec<Subscription>, ActionError> {
    Ok(webhooks::list_subscriptions(conn, tenant_id).await?)
}

/// One subscription of the tenant.
pub async fn get(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
) -> Result<Subscription, ActionError> {
    webhooks::find_subscription(conn, tenant_id, id)
        .await?
        .ok_or(ActionError::NotFound)
}

/// What a client may change.
#[derive(Debug, Clone, Default)]
pub struct WebhookPatch {
    pub url: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub enabled: Option<bool>,
}

/// Changes a subscription; turning it on again clears the server's reason and count.
pub async fn change(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    policy: &TargetPolicy,
    id: Uuid,
    patch: &WebhookPatch,
) -> Result<Subscription, ActionError> {
    let change = SubscriptionChange {
        url: patch
            .url
            .as_deref()
            .map(|url| checked_url(policy, url))
            .transpose()?,
        event_types: patch
            .event_types
            .as_deref()
            .map(checked_event_types)
            .transpose()?,
        enabled: patch.enabled,
    };
    conn.transaction::<_, ActionError, _>(async |conn| {
        hold_tenant(conn, tenant, TenantStatus::Active, TenantLock::Share).await?;
        webhooks::update_subscription(conn, tenant.tenant_id, id, &change)
            .await?
            .ok_or(ActionError::NotFound)
    })
    .await
}

/// Deletes a subscription and its delivery history.
pub async fn delete(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    id: Uuid,
) -> Result<(), ActionError> {
    conn.transaction::<_, ActionError, _>(async |conn| {
        hold_tenant(conn, tenant, TenantStatus::Active, TenantLock::Share).await?;
        if webhooks::delete_subscription(conn, tenant.tenant_id, id).await? {
            Ok(())
        } else {
            Err(ActionError::NotFound)
        }
    })
    .await?;
    tracing::info!(tenant_id = %tenant.tenant_id, subscription_id = %id, "webhook subscription deleted");
    Ok(())
}

/// The subscription's deliveries, newest first.
pub async fn deliveries(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    subscription_id: Uuid,
    limit: i64,
) -> Result<Vec<Delivery>, ActionError> {
    get(conn, tenant_id, subscription_id).await?;
    let limit = limit.clamp(1, MAX_DELIVERIES_PAGE);
    Ok(webhooks::list_deliveries(conn, tenant_id, subscription_id, limit).await?)
}

/// Sends a delivery's message again (same `webhook-id`) as a new delivery with its own
/// job; the subscription must be enabled.
pub async fn redeliver(
    conn: &mut AsyncPgConnection,
    tenant: &TenantWrite,
    subscription_id: Uuid,
    delivery_id: Uuid,
) -> Result<Delivery, ActionError> {
    let tenant_id = tenant.tenant_id;
    let delivery = conn
        .transaction::<_, ActionError, _>(async |conn| {
            hold_tenant(conn, tenant, TenantStatus::Active, TenantLock::Share).await?;
            let subscription = get(conn, tenant_id, subscription_id).await?;
            if !subscription.enabled {
                return Err(ActionError::conflict(
                    "webhook_disabled",
                    "the subscription is disabled; enable it first",
                ));
            }
            webhooks::redeliver(conn, tenant_id, subscription_id, delivery_id)
                .await?
                .ok_or(ActionError::NotFound)
        })
        .await?;
    tracing::info!(%tenant_id, %subscription_id, delivery_id = %delivery.id, "webhook redelivery queued");
    Ok(delivery)
}
