//! One module per job type; registration in one place.

mod analyze_document;
mod bench_noop;
mod delete_tenant;
#[cfg(feature = "fault-injection")]
mod fault_test;
mod guards;
mod integrity;
mod provision_tenant;
mod purge_document;
mod verify_document;

pub use guards::ensure_tenant_status;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use diesel_async::AsyncPgConnection;
use quire_shared::catalogue::JobType;
use quire_shared::config::Settings;
use quire_shared::db::DbError;
use quire_shared::db::jobs::Job;
use tokio_util::sync::CancellationToken;

use crate::context::WorkerContext;
use crate::outcome::JobError;

#[async_trait]
pub trait JobHandler: Send + Sync {
    fn job_type(&self) -> JobType;

    /// Wall-clock limit of one run (the catalogue's); past it the run counts as a
    /// transient failure.
    fn time_limit(&self) -> Duration {
        self.job_type().time_limit()
    }

    /// Does the work. `cancelled` fires when the job was cancelled or taken over; a
    /// handler checks it at step boundaries (the executor also drops the run at once).
    async fn run(
        &self,
        context: &WorkerContext,
        job: &Job,
        cancelled: &CancellationToken,
    ) -> Result<(), JobError>;

    /// True when [`Self::commit_success`] writes anything. Without such writes the fenced
    /// `SUCCEEDED` is one statement on its own: no `BEGIN` and `COMMIT` round trips.
    fn writes_on_success(&self) -> bool {
        false
    }

    /// Writes that must commit with the job's success, in the same transaction as the
    /// fenced `SUCCEEDED` (for example the document's new status). A handler that
    /// overrides it says so in [`Self::writes_on_success`].
    async fn commit_success(
        &self,
        _conn: &mut AsyncPgConnection,
        _job: &Job,
    ) -> Result<(), DbError> {
        Ok(())
    }
}

pub struct Registry(BTreeMap<&'static str, Arc<dyn JobHandler>>);

impl Registry {
    /// Every handler this build has.
    pub fn standard(settings: &Settings) -> Self {
        let mut registry = Self(BTreeMap::new());
        registry.add(Arc::new(analyze_document::AnalyzeDocument {
            analyzer: crate::analysis::Analyzer::new(settings.analysis.clone()),
        }));
        registry.add(Arc::new(verify_document::VerifyDocument));
        registry.add(Arc::new(bench_noop::BenchNoop));
        registry.add(Arc::new(purge_document::PurgeDocument));
        registry.add(Arc::new(provision_tenant::ProvisionTenant {
            search_language: settings.search.language.clone(),
        }));
        registry.add(Arc::new(delete_tenant::DeleteTenant {
            server_secret: settings.auth.jwt_secret.clone(),
            search_language: settings.search.language.clone(),
        }));
        #[cfg(feature = "fault-injection")]
        registry.add(Arc::new(fault_test::FaultTest));
        registry
    }

    fn add(&mut self, handler: Arc<dyn JobHandler>) {
        self.0.insert(handler.job_type().as_str(), handler);
    }

    pub fn get(&self, job_type: &str) -> Option<&Arc<dyn JobHandler>> {
        self.0.get(job_type)
    }

    pub fn job_types(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.keys().copied()
    }
}
