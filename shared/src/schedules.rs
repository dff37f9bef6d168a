//! The catalogue of periodic jobs (issue 16): each schedule's stable name, what it does
//! and its slot interval from `[schedules]`, and the view the job catalogue route and
//! the dashboard show (last and next run, last outcome). The dispatcher's runner
//! (`dispatcher/src/maintenance/schedules.rs`) claims and runs the slots.

use std::time::Duration;

use diesel_async::AsyncPgConnection;
use serde::Serialize;
use time::OffsetDateTime;

use crate::config::SchedulesSettings;
use crate::db::DbError;
use crate::db::schedules::{self, ScheduleRow};

/// Every schedule Quire has. Names are stable strings (rows and logs carry them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleName {
    /// `purge-document` jobs for documents trashed longer than `trash_days`.
    EmptyTrash,
    /// `verify-document` jobs (bulk class) walking every stored version.
    IntegrityScrub,
    /// The storage GC pass (objects no row names). Its runner is the storage GC's
    /// (`dispatcher/src/maintenance/storage_gc.rs`), wired into the dispatcher's
    /// schedule runner beside the two above.
    StorageGc,
}

impl ScheduleName {
    pub const ALL: [Self; 3] = [Self::EmptyTrash, Self::IntegrityScrub, Self::StorageGc];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::EmptyTrash => "empty-trash",
            Self::IntegrityScrub => "integrity-scrub",
            Self::StorageGc => "storage-gc",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Self::EmptyTrash => {
                "purge-document jobs for documents trashed longer than schedules.empty_trash.trash_days, round-robin over tenants, at most max_per_slot per slot"
            }
            Self::IntegrityScrub => {
                "verify-document jobs (bulk class) walking every stored version once per schedules.integrity_scrub.scrub_days, at most max_per_slot per slot"
            }
            Self::StorageGc => "collects stored objects that no row names, after a grace period",
        }
    }

    /// The interval between its slots, or `None` when the configuration turns it off.
    pub fn every(self, settings: &SchedulesSettings) -> Option<Duration> {
        let (enabled, every) = self.configured(settings);
        enabled.then_some(every)
    }

    /// Whether it is on, and its interval.
    fn configured(self, settings: &SchedulesSettings) -> (bool, Duration) {
        let (enabled, seconds) = match self {
            Self::EmptyTrash => (
                settings.empty_trash.enabled,
                settings.empty_trash.every_seconds,
            ),
            Self::IntegrityScrub => (
                settings.integrity_scrub.enabled,
                settings.integrity_scrub.every_seconds,
            ),
            Self::StorageGc => (
                settings.storage_gc.enabled,
                settings.storage_gc.every_seconds,
            ),
        };
        (enabled, Duration::from_secs(seconds))
    }
}

/// One schedule as the catalogue and the dashboard show it.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleView {
    pub name: &'static str,
    pub description: &'static str,
    pub enabled: bool,
    /// The configured interval between slots.
    pub every_seconds: u64,
    /// When the last slot was claimed (its run began); `None`: never ran.
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_run_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_finished_at: Option<OffsetDateTime>,
    /// `running`, `succeeded` or `failed`.
    pub last_outcome: Option<String>,
    /// What the last run did, in safe words.
    pub last_detail: Option<String>,
    /// When the next slot is due; `None`: at the first check of a dispatcher (or never,
    /// when disabled).
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_run_at: Option<OffsetDateTime>,
    /// Slots run so far.
    pub runs: i64,
}

/// Every schedule of the catalogue with its row, in catalogue order.
pub async fn overview(
    conn: &mut AsyncPgConnection,
    settings: &SchedulesSettings,
) -> Result<Vec<ScheduleView>, DbError> {
    let rows = schedules::list(conn).await?;
    Ok(ScheduleName::ALL
        .into_iter()
        .map(|name| {
            let row: Option<&ScheduleRow> = rows.iter().find(|row| row.name == name.as_str());
            let (enabled, every) = name.configured(settings);
            ScheduleView {
                name: name.as_str(),
                description: name.description(),
                enabled,
                every_seconds: every.as_secs(),
                last_run_at: row.and_then(|row| row.last_run_at),
                last_finished_at: row.and_then(|row| row.last_finished_at),
                last_outcome: row.and_then(|row| row.last_outcome.clone()),
                last_detail: row.and_then(|row| row.last_detail.clone()),
                next_run_at: row.filter(|_| enabled).map(|row| row.next_run_at),
                runs: row.map_or(0, |row| row.runs),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_names_are_stable_and_unique() {
        let names: Vec<&str> = ScheduleName::ALL.iter().map(|name| name.as_str()).collect();
        assert_eq!(names, ["empty-trash", "integrity-scrub", "storage-gc"]);
    }
}
