//! Webhook subscriptions and their deliveries (tables `webhook_subscriptions`,
//! `webhook_deliveries`). Every query filters by the tenant. A delivery row is the history
//! of one message to one subscription; the `deliver-webhook` job that makes it is
//! enqueued with it ([`fan_out`], [`redeliver`]) in the caller's transaction.

use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Int4, Int8, Nullable, Text, Uuid as SqlUuid};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;
use uuid::Uuid;

use super::DbError;
use super::jobs::{self, Fence, NewJob};
use super::schema::{webhook_deliveries, webhook_subscriptions};
use super::tenant_events::TenantEventType;
use crate::jobs::DeliverWebhook;

/// A subscription as stored (the secret included: never put it in a view).
#[derive(Debug, Clone, PartialEq, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = webhook_subscriptions, check_for_backend(diesel::pg::Pg))]
pub struct Subscription {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub url: String,
    pub secret: String,
    pub event_types: Vec<String>,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub disabled_at: Option<OffsetDateTime>,
    pub consecutive_failures: i32,
    pub failing_since: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// One message to one subscription and what became of it.
#[derive(Debug, Clone, PartialEq, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = webhook_deliveries, check_for_backend(diesel::pg::Pg))]
pub struct Delivery {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub subscription_id: Uuid,
    pub event_id: i64,
    pub message_id: Uuid,
    pub event_type: String,
    pub status: String,
    pub attempts: i32,
    pub last_attempt_at: Option<OffsetDateTime>,
    pub response_status: Option<i32>,
    pub response_body: Option<String>,
    pub last_error: Option<String>,
    pub delivered_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

/// A delivery's states (the column's CHECK lists the same).
pub const PENDING: &str = "pending";
pub const DELIVERED: &str = "delivered";
pub const FAILED: &str = "failed";

/// A subscription to create; the id and secret come from the action.
#[derive(Debug, Clone)]
pub struct NewSubscription<'a> {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub url: &'a str,
    pub secret: &'a str,
    pub event_types: &'a [String],
}

/// Inserts a subscription, enabled.
pub async fn create_subscription(
    conn: &mut AsyncPgConnection,
    new: &NewSubscription<'_>,
) -> Result<Subscription, DbError> {
    Ok(diesel::insert_into(webhook_subscriptions::table)
        .values((
            webhook_subscriptions::id.eq(new.id),
            webhook_subscriptions::tenant_id.eq(new.tenant_id),
            webhook_subscriptions::url.eq(new.url),
            webhook_subscriptions::secret.eq(new.secret),
            webhook_subscriptions::event_types.eq(new.event_types.to_vec()),
        ))
        .returning(Subscription::as_returning())
        .get_result(conn)
        .await?)
}

/// How many subscriptions the tenant has.
pub async fn count_subscriptions(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
) -> Result<i64, DbError> {
    Ok(webhook_subscriptions::table
        .filter(webhook_subscriptions::tenant_id.eq(tenant_id))
        .count()
        .get_result(conn)
        .await?)
}

/// The tenant's subscriptions, oldest first.
pub async fn list_subscriptions(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
) -> Result<Vec<Subscription>, DbError> {
    Ok(webhook_subscriptions::table
        .filter(webhook_subscriptions::tenant_id.eq(tenant_id))
        .order(webhook_subscriptions::id.asc())
        .select(Subscription::as_select())
        .load(conn)
        .await?)
}

/// One of the tenant's subscriptions.
pub async fn find_subscription(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
) -> Result<Option<Subscription>, DbError> {
    Ok(webhook_subscriptions::table
        .filter(webhook_subscriptions::id.eq(id))
        .filter(webhook_subscriptions::tenant_id.eq(tenant_id))
        .select(Subscription::as_select())
        .first(conn)
        .await
        .optional()?)
}

/// What a client changes of a subscription; `None` keeps the value.
#[derive(Debug, Clone, Default)]
pub struct SubscriptionChange {
    pub url: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub enabled: Option<bool>,
}

/// Applies `change` in one statement. Turning a subscription on clears its failure
/// count and the server's reason; turning it off records when (and no server reason).
pub async fn update_subscription(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
    change: &SubscriptionChange,
) -> Result<Option<Subscription>, DbError> {
    Ok(diesel::sql_query(
        "UPDATE webhook_subscriptions SET \
             url = coalesce($3, url), \
             event_types = coalesce($4, event_types), \
             enabled = coalesce($5, enabled), \
             disabled_reason = CASE WHEN $5 IS NULL THEN disabled_reason ELSE NULL END, \
             disabled_at = CASE WHEN $5 THEN NULL \
                 WHEN NOT $5 THEN coalesce(disabled_at, now()) ELSE disabled_at END, \
             consecutive_failures = CASE WHEN $5 THEN 0 ELSE consecutive_failures END, \
             failing_since = CASE WHEN $5 THEN NULL ELSE failing_since END, \
             updated_at = now() \
         WHERE id = $1 AND tenant_id = $2 \
         RETURNING *",
    )
    .bind::<SqlUuid, _>(id)
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Nullable<Text>, _>(change.url.clone())
    .bind::<Nullable<Array<Text>>, _>(change.event_types.clone())
    .bind::<Nullable<Bool>, _>(change.enabled)
    .get_result::<Subscription>(conn)
    .await
    .optional()?)
}

/// Deletes a subscription and its delivery history; false when there was none. Its
/// queued deliveries then find nothing to send and end.
pub async fn delete_subscription(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    id: Uuid,
) -> Result<bool, DbError> {
    let deleted = diesel::delete(
        webhook_subscriptions::table
            .filter(webhook_subscriptions::id.eq(id))
            .filter(webhook_subscriptions::tenant_id.eq(tenant_id)),
    )
    .execute(conn)
    .await?;
    Ok(deleted == 1)
}

/// The subscription's deliveries, newest first, at most `limit`.
pub async fn list_deliveries(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    subscription_id: Uuid,
    limit: i64,
) -> Result<Vec<Delivery>, DbError> {
    Ok(webhook_deliveries::table
        .filter(webhook_deliveries::subscription_id.eq(subscription_id))
        .filter(webhook_deliveries::tenant_id.eq(tenant_id))
        .order(webhook_deliveries::id.desc())
        .limit(limit)
        .select(Delivery::as_select())
        .load(conn)
        .await?)
}

/// One delivery of one of the tenant's subscriptions.
pub async fn find_delivery(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    subscription_id: Uuid,
    id: Uuid,
) -> Result<Option<Delivery>, DbError> {
    Ok(webhook_deliveries::table
        .filter(webhook_deliveries::id.eq(id))
        .filter(webhook_deliveries::subscription_id.eq(subscription_id))
        .filter(webhook_deliveries::tenant_id.eq(tenant_id))
        .select(Delivery::as_select())
        .first(conn)
        .await
        .optional()?)
}

#[derive(QueryableByName)]
struct DeliveryIds {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    subscription_id: Uuid,
}

/// A delivery of event `event_id` to each of the tenant's ENABLED subscriptions of its
/// type, each with its `deliver-webhook` job, in the caller's transaction (the one that
/// records the event): a change that rolls back delivers nothing, one that commits
/// cannot lose its deliveries. Returns the deliveries' ids.
pub async fn fan_out(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    event_id: i64,
    event_type: TenantEventType,
) -> Result<Vec<Uuid>, DbError> {
    // One insert picks the subscriptions; the ids are minted in SQL from the Rust-made
    // UUIDv7s passed in (at most MAX_SUBSCRIPTIONS per tenant, so a bounded array).
    let ids: Vec<Uuid> = (0..crate::actions::webhooks::MAX_SUBSCRIPTIONS)
        .map(|_| Uuid::now_v7())
        .collect();
    let messages: Vec<Uuid> = (0..crate::actions::webhooks::MAX_SUBSCRIPTIONS)
        .map(|_| Uuid::now_v7())
        .collect();
    let created: Vec<DeliveryIds> = diesel::sql_query(
        "WITH targets AS ( \
             SELECT id, row_number() OVER (ORDER BY id) AS n FROM webhook_subscriptions \
             WHERE tenant_id = $1 AND enabled AND $3 = ANY(event_types)) \
         INSERT INTO webhook_deliveries \
             (id, tenant_id, subscription_id, event_id, message_id, event_type) \
         SELECT ($4::uuid[])[targets.n::int4], $1, targets.id, $2, ($5::uuid[])[targets.n::int4], $3 \
         FROM targets WHERE targets.n <= cardinality($4::uuid[]) \
         RETURNING id, subscription_id",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<Int8, _>(event_id)
    .bind::<Text, _>(event_type.as_str())
    .bind::<Array<SqlUuid>, _>(&ids)
    .bind::<Array<SqlUuid>, _>(&messages)
    .load(conn)
    .await?;
    enqueue_deliveries(conn, tenant_id, &created).await?;
    Ok(created.into_iter().map(|row| row.id).collect())
}

/// The `deliver-webhook` jobs of these new deliveries.
async fn enqueue_deliveries(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    created: &[DeliveryIds],
) -> Result<(), DbError> {
    if created.is_empty() {
        return Ok(());
    }
    let new_jobs: Vec<NewJob<DeliverWebhook>> = created
        .iter()
        .map(|row| {
            // The attempts come from the type's retry class, not `jobs.max_attempts`.
            NewJob::new(
                tenant_id,
                DeliverWebhook {
                    delivery_id: row.id,
                    subscription_id: row.subscription_id,
                },
                0,
                None,
            )
        })
        .collect();
    jobs::enqueue_many(conn, &new_jobs).await?;
    Ok(())
}

/// A new delivery of the same message (same event, same `webhook-id`) to the same
/// subscription, with its job, in the caller's transaction; `None` when the delivery is
/// not the tenant's or its subscription is gone.
pub async fn redeliver(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    subscription_id: Uuid,
    delivery_id: Uuid,
) -> Result<Option<Delivery>, DbError> {
    let delivery: Option<Delivery> = diesel::sql_query(
        "INSERT INTO webhook_deliveries \
             (id, tenant_id, subscription_id, event_id, message_id, event_type) \
         SELECT $4, d.tenant_id, d.subscription_id, d.event_id, d.message_id, d.event_type \
         FROM webhook_deliveries AS d \
         WHERE d.id = $3 AND d.subscription_id = $2 AND d.tenant_id = $1 \
         RETURNING *",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(subscription_id)
    .bind::<SqlUuid, _>(delivery_id)
    .bind::<SqlUuid, _>(Uuid::now_v7())
    .get_result(conn)
    .await
    .optional()?;
    if let Some(delivery) = &delivery {
        let created = [DeliveryIds {
            id: delivery.id,
            subscription_id: delivery.subscription_id,
        }];
        enqueue_deliveries(conn, tenant_id, &created).await?;
    }
    Ok(delivery)
}

/// What a delivery attempt needs: the delivery, its subscription and its event.
#[derive(Debug, Clone, QueryableByName)]
pub struct DeliveryTarget {
    #[diesel(sql_type = Text)]
    pub status: String,
    #[diesel(sql_type = SqlUuid)]
    pub message_id: Uuid,
    /// Made longer ago than the retry window (by the database clock).
    #[diesel(sql_type = Bool)]
    pub expired: bool,
    #[diesel(sql_type = Text)]
    pub url: String,
    #[diesel(sql_type = Text)]
    pub secret: String,
    #[diesel(sql_type = Bool)]
    pub enabled: bool,
    #[diesel(sql_type = Text)]
    pub event_type: String,
    #[diesel(sql_type = diesel::sql_types::Jsonb)]
    pub payload: serde_json::Value,
    #[diesel(sql_type = diesel::sql_types::Timestamptz)]
    pub occurred_at: OffsetDateTime,
}

/// The delivery of the tenant with its subscription and event; `None` when any of
/// them is gone (the subscription was deleted, the event pruned). `retry_for_seconds`
/// decides whether it is `expired`.
pub async fn delivery_target(
    conn: &mut AsyncPgConnection,
    tenant_id: Uuid,
    delivery_id: Uuid,
    retry_for_seconds: i64,
) -> Result<Option<DeliveryTarget>, DbError> {
    Ok(diesel::sql_query(
        "SELECT d.status, d.message_id, \
             d.created_at < now() - $3 * interval '1 second' AS expired, \
             s.url, s.secret, s.enabled, \
             e.event_type, e.payload, e.created_at AS occurred_at \
         FROM webhook_deliveries AS d \
         JOIN webhook_subscriptions AS s ON s.id = d.subscription_id AND s.tenant_id = d.tenant_id \
         JOIN tenant_events AS e ON e.id = d.event_id AND e.tenant_id = d.tenant_id \
         WHERE d.id = $2 AND d.tenant_id = $1",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(delivery_id)
    .bind::<Int8, _>(retry_for_seconds)
    .get_result(conn)
    .await
    .optional()?)
}

/// One attempt's outcome, to record.
#[derive(Debug, Clone)]
pub struct AttemptRecord<'a> {
    pub delivered: bool,
    /// No attempt follows this one (the delivery failed for good).
    pub last: bool,
    pub response_status: Option<i32>,
    pub response_body: Option<&'a str>,
    pub error: Option<&'a str>,
}

/// When a failing subscription is disabled.
#[derive(Debug, Clone, Copy)]
pub struct DisablePolicy {
    pub after_failures: i32,
    pub after_failing_seconds: i64,
}

/// What recording an attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The fence no longer held: nothing was written.
    Stale,
    /// Written; the subscription is enabled still.
    Written,
    /// Written, and the subscription is disabled: by this failure, or before it.
    Disabled,
}

#[derive(QueryableByName)]
struct RecordedRow {
    #[diesel(sql_type = Int8)]
    written: i64,
    #[diesel(sql_type = Int8)]
    disabled: i64,
}

/// Records an attempt on the delivery and its subscription in ONE statement fenced by
/// the job's claim (status, worker, attempt, task): a stale worker writes nothing. A
/// success clears the subscription's failures; a failure counts one, and the failure
/// that reaches `policy` disables the subscription with a reason.
pub async fn record_attempt(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    tenant_id: Uuid,
    delivery_id: Uuid,
    attempt: &AttemptRecord<'_>,
    policy: DisablePolicy,
) -> Result<Recorded, DbError> {
    let status = match (attempt.delivered, attempt.last) {
        (true, _) => DELIVERED,
        (false, true) => FAILED,
        (false, false) => PENDING,
    };
    // Does this failure reach the policy? Read from the row before the update.
    const TRIPS: &str = "(s.consecutive_failures + 1 >= $12 \
         OR coalesce(s.failing_since, now()) < now() - $13 * interval '1 second')";
    let row: RecordedRow = diesel::sql_query(format!(
        "WITH fenced AS ( \
             SELECT 1 FROM processing_jobs \
             WHERE id = $1 AND status IS NOT DISTINCT FROM 'RUNNING' AND worker_id = $2 AND attempts = $3 \
               AND last_task_id = $4), \
         delivery AS ( \
             UPDATE webhook_deliveries SET status = $7, attempts = attempts + 1, \
                 last_attempt_at = now(), response_status = $8, response_body = $9, \
                 last_error = $10, delivered_at = CASE WHEN $11 THEN now() END \
             WHERE id = $6 AND tenant_id = $5 AND EXISTS (SELECT 1 FROM fenced) \
             RETURNING subscription_id), \
         subscription AS ( \
             UPDATE webhook_subscriptions AS s SET \
                 consecutive_failures = CASE WHEN $11 THEN 0 ELSE s.consecutive_failures + 1 END, \
                 failing_since = CASE WHEN $11 THEN NULL ELSE coalesce(s.failing_since, now()) END, \
                 enabled = s.enabled AND ($11 OR NOT {TRIPS}), \
                 disabled_at = CASE WHEN s.enabled AND NOT $11 AND {TRIPS} THEN now() \
                     ELSE s.disabled_at END, \
                 disabled_reason = CASE WHEN s.enabled AND NOT $11 AND {TRIPS} THEN \
                     'disabled by the server: ' || (s.consecutive_failures + 1) || \
                     ' failed delivery attempts in a row, failing since ' || \
                     to_char(coalesce(s.failing_since, now()) AT TIME ZONE 'UTC', \
                         'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') \
                     ELSE s.disabled_reason END, \
                 updated_at = now() \
             FROM delivery \
             WHERE s.id = delivery.subscription_id AND s.tenant_id = $5 \
             RETURNING s.enabled) \
         SELECT (SELECT count(*) FROM delivery) AS written, \
             (SELECT count(*) FROM subscription WHERE NOT enabled) AS disabled"
    ))
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<SqlUuid, _>(fence.task_id)
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(delivery_id)
    .bind::<Text, _>(status)
    .bind::<Nullable<Int4>, _>(attempt.response_status)
    .bind::<Nullable<Text>, _>(attempt.response_body)
    .bind::<Nullable<Text>, _>(attempt.error)
    .bind::<Bool, _>(attempt.delivered)
    .bind::<Int4, _>(policy.after_failures)
    .bind::<Int8, _>(policy.after_failing_seconds)
    .get_result(conn)
    .await?;
    Ok(match (row.written, row.disabled) {
        (0, _) => Recorded::Stale,
        (_, 0) => Recorded::Written,
        _ => Recorded::Disabled,
    })
}

/// Marks a pending delivery `failed` without an attempt (its subscription was disabled
/// or its time ran out before it could be sent), fenced like [`record_attempt`].
pub async fn give_up(
    conn: &mut AsyncPgConnection,
    fence: &Fence,
    tenant_id: Uuid,
    delivery_id: Uuid,
    reason: &str,
) -> Result<bool, DbError> {
    let updated = diesel::sql_query(
        "UPDATE webhook_deliveries SET status = 'failed', last_error = coalesce(last_error, $6) \
         WHERE id = $5 AND tenant_id = $1 AND status = 'pending' AND EXISTS ( \
             SELECT 1 FROM processing_jobs \
             WHERE id = $2 AND status IS NOT DISTINCT FROM 'RUNNING' AND worker_id = $3 AND attempts = $4 \
               AND last_task_id = $7)",
    )
    .bind::<SqlUuid, _>(tenant_id)
    .bind::<SqlUuid, _>(fence.job_id)
    .bind::<Text, _>(&fence.worker_id)
    .bind::<Int4, _>(fence.attempt)
    .bind::<SqlUuid, _>(delivery_id)
    .bind::<Text, _>(reason)
    .bind::<SqlUuid, _>(fence.task_id)
    .execute(conn)
    .await?;
    Ok(updated == 1)
}
