//! `deliver-webhook`: one delivery of one event to one subscription, signed the Standard
//! Webhooks way. Enqueued with the delivery in the transaction that recorded the event
//! (`db::webhooks::fan_out`) or by a redelivery. Each attempt is recorded on the delivery
//! (status, at most 1 KiB of the answer) fenced by the job's claim; a failed attempt is
//! retried with the webhook backoff until the attempts or `webhooks.retry_for_seconds`
//! run out, and the failure that reaches `webhooks.disable_after_*` disables the
//! subscription, which ends its pending deliveries.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::db::jobs::{Fence, Job};
use crate::db::webhooks::{self, AttemptRecord, DeliveryTarget, DisablePolicy, Recorded};
use crate::jobs::{BackgroundJob, Description, JobContext, JobError, RetryClass};
use crate::states::TenantStatus;
use crate::webhook::sender::{self, Attempt, Message, Timeouts};
use crate::webhook::target::{TargetError, TargetPolicy};

/// Payload of `deliver-webhook`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliverWebhook {
    pub delivery_id: Uuid,
    pub subscription_id: Uuid,
}

#[async_trait]
impl BackgroundJob for DeliverWebhook {
    const JOB_TYPE: &'static str = "deliver-webhook";
    const DESCRIPTION: Description = Description {
        payload: &[("delivery_id", "uuid"), ("subscription_id", "uuid")],
        enqueued_by: "a tenant event with enabled subscriptions of its type, a redelivery",
        work: "POST the signed event to the subscription's URL (private targets refused), record the answer's status and first 1 KiB",
    };
    const RETRY: RetryClass = RetryClass::Webhook;
    const TENANT_GUARD: Option<TenantStatus> = Some(TenantStatus::Active);
    // Above `webhooks.request_timeout_ms` (the settings refuse more): an attempt ends by
    // its own timeout and is recorded.
    const TIME_LIMIT: Duration = Duration::from_secs(60);

    async fn run(
        &self,
        context: &JobContext,
        job: &Job,
        _cancelled: &CancellationToken,
    ) -> Result<(), JobError> {
        let fence = job.fence().ok_or(JobError::FenceLost)?;
        let settings = &context.settings.webhooks;
        let target = {
            let mut conn = context.connection().await?;
            let window = i64::try_from(settings.retry_for_seconds).unwrap_or(i64::MAX);
            webhooks::delivery_target(&mut conn, job.tenant_id, self.delivery_id, window)
                .await
                .map_err(JobError::database)?
        };
        // The connection went back to the pool: none is held while the receiver thinks.
        let Some(target) = target else {
            // The subscription was deleted (its deliveries with it) or the event pruned.
            tracing::info!(delivery_id = %self.delivery_id, "webhook delivery has nothing left to send");
            return Ok(());
        };
        if target.status != webhooks::PENDING {
            // Recorded already by an attempt whose job finish was lost.
            return Ok(());
        }
        if !target.enabled {
            self.end_unsent(context, &fence, job, "the subscription is disabled")
                .await?;
            return Err(ended());
        }
        if target.expired {
            self.end_unsent(context, &fence, job, "the delivery ran out of time to retry")
                .await?;
            return Err(ended());
        }
        let policy = TargetPolicy::new(&settings.allowed_networks);
        let message = message(&target);
        let timeouts = Timeouts {
            connect: Duration::from_millis(settings.connect_timeout_ms),
            total: Duration::from_millis(settings.request_timeout_ms),
        };
        let attempt = sender::send(&policy, &target.url, &target.secret, &message, timeouts).await;
        self.record(context, &fence, job, &attempt).await
    }
}

impl DeliverWebhook {
    /// Records the attempt and says what the job does next: done, retried, or ended.
    async fn record(
        &self,
        context: &JobContext,
        fence: &Fence,
        job: &Job,
        attempt: &Attempt,
    ) -> Result<(), JobError> {
        let settings = &context.settings.webhooks;
        let delivered = attempt.delivered();
        // A refused target stays refused: no retry. A name that does not resolve may
        // resolve later.
        let refused = matches!(attempt, Attempt::Refused(why) if *why != TargetError::Unresolved);
        let last = !delivered && (refused || job.attempts >= job.max_attempts);
        let (response_status, response_body, error) = match attempt {
            Attempt::Answered { status, body } => {
                let error = (!delivered).then(|| format!("the receiver answered {status}"));
                (Some(i32::from(*status)), Some(body.as_str()), error)
            }
            Attempt::Refused(refused) => (None, None, Some(refused.to_string())),
            Attempt::NoAnswer(reason) => (None, None, Some((*reason).to_owned())),
        };
        let record = AttemptRecord {
            delivered,
            last,
            response_status,
            response_body,
            error: error.as_deref(),
        };
        let policy = DisablePolicy {
            after_failures: settings.disable_after_failures,
            after_failing_seconds: i64::try_from(settings.disable_after_failing_seconds)
                .unwrap_or(i64::MAX),
        };
        let recorded = {
            let mut conn = context.connection().await?;
            webhooks::record_attempt(
                &mut conn,
                fence,
                job.tenant_id,
                self.delivery_id,
                &record,
                policy,
            )
            .await
            .map_err(JobError::database)?
        };
        match recorded {
            Recorded::Stale => Err(JobError::FenceLost),
            _ if delivered => Ok(()),
            _ if refused => Err(JobError::permanent(
                "webhook_target_refused",
                "the webhook's target is not allowed or does not resolve",
            )),
            Recorded::Disabled => {
                tracing::warn!(subscription_id = %self.subscription_id, "webhook subscription disabled: it kept failing");
                if !last {
                    self.end_unsent(context, fence, job, "the subscription was disabled")
                        .await?;
                }
                Err(JobError::permanent(
                    "webhook_subscription_disabled",
                    "the subscription kept failing and was disabled",
                ))
            }
            Recorded::Written => Err(JobError::Transient {
                code: "webhook_delivery_failed",
                message: "the receiver did not accept the delivery",
                cause: None,
            }),
        }
    }

    /// Marks the delivery `failed` without (another) attempt.
    async fn end_unsent(
        &self,
        context: &JobContext,
        fence: &Fence,
        job: &Job,
        reason: &str,
    ) -> Result<(), JobError> {
        let mut conn = context.connection().await?;
        webhooks::give_up(&mut conn, fence, job.tenant_id, self.delivery_id, reason)
            .await
            .map_err(JobError::database)?;
        Ok(())
    }
}

/// How a delivery that ended unsent fails its job.
fn ended() -> JobError {
    JobError::permanent(
        "webhook_delivery_ended",
        "the delivery ended unsent: its subscription is disabled or its time ran out",
    )
}

/// The message of this delivery: Standard Webhooks' `{type, timestamp, data}` body, its
/// id (the same for every attempt and redelivery) and this attempt's timestamp.
fn message(target: &DeliveryTarget) -> Message {
    let body = serde_json::json!({
        "type": target.event_type,
        "timestamp": target.occurred_at.format(&Rfc3339).unwrap_or_default(),
        "data": target.payload,
    });
    Message {
        id: format!("msg_{}", target.message_id.simple()),
        timestamp: OffsetDateTime::now_utc().unix_timestamp(),
        body: body.to_string().into_bytes(),
    }
}
