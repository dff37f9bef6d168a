//! `integrity-scrub`: each slot walks the next `max_per_slot` stored versions and
//! queues their verify jobs (`actions::scrub::step`); a pass starts once per
//! `schedules.integrity_scrub.scrub_days`.

use anyhow::Context;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use quire_shared::actions::scrub::{self, Scrubbed};
use quire_shared::config::IntegrityScrubSchedule;
use quire_shared::db::PgPool;
use quire_shared::db::schedules::Slot;
use quire_shared::schedules::ScheduleName;
use time::format_description::well_known::Rfc3339;

use super::{Scheduled, request_id};

pub struct IntegrityScrub {
    plan: scrub::Scrub,
}

impl IntegrityScrub {
    pub fn new(settings: &IntegrityScrubSchedule, configured_attempts: i32) -> Self {
        Self {
            plan: scrub::Scrub {
                scrub_days: settings.scrub_days,
                max_per_slot: settings.max_per_slot,
                configured_attempts,
            },
        }
    }
}

impl Scheduled for IntegrityScrub {
    fn name(&self) -> ScheduleName {
        ScheduleName::IntegrityScrub
    }

    fn run<'a>(
        &'a self,
        pool: &'a PgPool,
        slot: &'a Slot,
    ) -> BoxFuture<'a, anyhow::Result<String>> {
        async move {
            let mut conn = pool.get().await.context("no database connection")?;
            let scrubbed = scrub::step(&mut conn, slot, &self.plan, request_id(slot))
                .await
                .context("failed to queue the scrub's verify jobs")?;
            Ok(match scrubbed {
                Scrubbed::Walked {
                    walked,
                    queued,
                    pass_done,
                } => format!(
                    "{walked} versions walked, {queued} verify jobs queued{}",
                    if pass_done {
                        "; the pass is complete"
                    } else {
                        ""
                    }
                ),
                Scrubbed::Idle { next_pass_at } => match next_pass_at
                    .and_then(|at| at.format(&Rfc3339).ok())
                {
                    Some(at) => format!("the last pass is complete; the next starts after {at}"),
                    None => "the last pass is complete".to_owned(),
                },
                Scrubbed::Superseded => "a later slot took over".to_owned(),
            })
        }
        .boxed()
    }
}
