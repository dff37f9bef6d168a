//! One module per job type; registration in one place.

mod analyze_document;
mod integrity;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quire_shared::catalogue::JobType;
use quire_shared::db::jobs::Job;

use crate::context::WorkerContext;
use crate::outcome::JobError;

#[async_trait]
pub trait JobHandler: Send + Sync {
    fn job_type(&self) -> JobType;

    /// Wall-clock limit of one run; past it the run counts as a transient failure.
    fn time_limit(&self) -> Duration {
        Duration::from_secs(300)
    }

    async fn run(&self, context: &WorkerContext, job: &Job) -> Result<(), JobError>;
}

pub struct Registry(BTreeMap<&'static str, Arc<dyn JobHandler>>);

impl Registry {
    /// Every handler this build has.
    pub fn standard() -> Self {
        let mut registry = Self(BTreeMap::new());
        registry.add(Arc::new(analyze_document::AnalyzeDocument));
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
