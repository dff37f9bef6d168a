//! `empty-trash`: each slot queues the purge of documents trashed longer than
//! `schedules.empty_trash.trash_days` (`actions::trash::empty`).

use anyhow::Context;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use quire_shared::actions::trash;
use quire_shared::config::EmptyTrashSchedule;
use quire_shared::db::PgPool;
use quire_shared::db::schedules::Slot;
use quire_shared::schedules::ScheduleName;

use super::{Scheduled, request_id};

pub struct EmptyTrash {
    plan: trash::EmptyTrash,
}

impl EmptyTrash {
    pub fn new(settings: &EmptyTrashSchedule, configured_attempts: i32) -> Self {
        Self {
            plan: trash::EmptyTrash {
                trash_days: settings.trash_days,
                max_per_slot: settings.max_per_slot,
                configured_attempts,
            },
        }
    }
}

impl Scheduled for EmptyTrash {
    fn name(&self) -> ScheduleName {
        ScheduleName::EmptyTrash
    }

    fn run<'a>(
        &'a self,
        pool: &'a PgPool,
        slot: &'a Slot,
    ) -> BoxFuture<'a, anyhow::Result<String>> {
        async move {
            let mut conn = pool.get().await.context("no database connection")?;
            let emptied = trash::empty(&mut conn, &self.plan, request_id(slot))
                .await
                .context("failed to queue the purge of expired trash")?;
            Ok(format!(
                "{} purge jobs queued for {} tenants; {} documents skipped",
                emptied.queued, emptied.tenants, emptied.skipped
            ))
        }
        .boxed()
    }
}
