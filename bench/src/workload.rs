//! The jobs of a bench run: bare no-op jobs, or integrity jobs each with its stored file
//! and its document and version rows, enqueued the way the API records them.

use std::sync::Arc;

use anyhow::Context;
use diesel_async::AsyncPgConnection;
use quire_shared::config::Settings;
use quire_shared::db::documents::NewDocument;
use quire_shared::db::intake::{self, NewIntake};
use quire_shared::db::jobs::{self, NewJob};
use quire_shared::db::tenants::TenantWrite;
use quire_shared::jobs::{AnalyzeDocument, BackgroundJob, BenchNoop, VerifyDocument};
use quire_shared::publishing::Express;
use quire_shared::storage::{self, StorageKey, put_digested};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::args::Workload;
use crate::measure::Committed;

/// The bench's tenant and workload: what its jobs are and how they are enqueued.
pub struct Bench {
    pub settings: Settings,
    pub tenant_id: Uuid,
    pub workload: Workload,
    pub file_size: usize,
    /// The express path, as the API takes it (`scheduling.express`): a lone intake whose
    /// queue has no backlog is published by the bench itself after its commit. `None`
    /// for the scenarios that enqueue backlogs only.
    pub express: Option<Arc<Express>>,
}

impl Bench {
    pub fn job_type(&self) -> &'static str {
        match self.workload {
            Workload::Noop => BenchNoop::JOB_TYPE,
            Workload::Integrity => VerifyDocument::JOB_TYPE,
            Workload::Analyze => AnalyzeDocument::JOB_TYPE,
        }
    }

    /// Stored files and their rows for the integrity workload, made before any timing.
    pub async fn prepare(&self, count: usize) -> anyhow::Result<Vec<NewDocument>> {
        if self.workload != Workload::Integrity {
            return Ok(Vec::new());
        }
        let store =
            storage::build(&self.settings.storage).context("failed to open the object store")?;
        let mut prepared = Vec::with_capacity(count);
        for index in 0..count {
            let (id, version_id) = (Uuid::now_v7(), Uuid::now_v7());
            let key = StorageKey::document_source(self.tenant_id, version_id);
            let mut bytes = vec![0u8; self.file_size];
            bytes[..16].copy_from_slice(id.as_bytes());
            let body = futures_util::stream::once(async move { Ok(bytes::Bytes::from(bytes)) });
            let digest = put_digested(store.as_ref(), &key, Box::pin(body), u64::MAX).await?;
            prepared.push(NewDocument {
                id,
                tenant_id: self.tenant_id,
                title: format!("bench {index}"),
                version_id,
                storage_key: key.as_str().to_owned(),
                size_bytes: i64::try_from(digest.size_bytes)?,
                sha256: digest.sha256,
                content_type: "application/octet-stream".to_owned(),
                original_filename: None,
            });
        }
        Ok(prepared)
    }

    /// Jobs `range` of the run with their outbox events, in ONE statement committed on
    /// its own: bare jobs for the no-op workload, each with its document and version rows
    /// for the integrity workload (`prepared` holds those documents).
    pub async fn enqueue(
        &self,
        conn: &mut AsyncPgConnection,
        range: std::ops::Range<usize>,
        prepared: &[NewDocument],
    ) -> anyhow::Result<Vec<Committed>> {
        let tenant_id = self.tenant_id;
        let job_ids: Vec<Uuid> = match self.workload {
            Workload::Noop => {
                let jobs: Vec<_> = range
                    .map(|_| NewJob::new(tenant_id, BenchNoop {}, 3, None))
                    .collect();
                jobs::enqueue_many(conn, &jobs)
                    .await?
                    .into_iter()
                    .map(|enqueued| {
                        enqueued
                            .map(|enqueued| enqueued.job_id)
                            .context("a bench job collided with an active one")
                    })
                    .collect::<anyhow::Result<_>>()?
            }
            // Its documents are a corpus of real files: `analyze/` enqueues them.
            Workload::Analyze => {
                anyhow::bail!("the analyze workload is not enqueued by the standard scenario")
            }
            Workload::Integrity => {
                let documents = prepared
                    .get(range)
                    .context("fewer documents prepared than jobs")?;
                let intakes: Vec<_> = documents
                    .iter()
                    .map(|document| NewIntake {
                        document: document.clone(),
                        job: NewJob::new(
                            tenant_id,
                            VerifyDocument {
                                document_id: document.id,
                                document_version_id: document.version_id,
                            },
                            3,
                            None,
                        ),
                    })
                    .collect();
                // The bench's own tenant, as an operator's write: any generation.
                let tenant = TenantWrite {
                    tenant_id,
                    generation: None,
                };
                let claim = self.express.as_deref().map(Express::claim);
                let recorded = intake::record(conn, &tenant, &intakes, claim).await??;
                // Committed (the statement ran on its own): publish what it claimed, as
                // the API does after an upload, beside the next enqueue.
                if let Some(express) = &self.express {
                    for event in recorded.iter().filter_map(|r| r.announce.clone()) {
                        let express = Arc::clone(express);
                        tokio::spawn(async move { express.publish(event).await });
                    }
                }
                recorded
                    .into_iter()
                    .map(|recorded| recorded.job.id)
                    .collect()
            }
        };
        // Latency starts when the commit has returned, as the peers harness times its own
        // enqueues (`bench/peers/bench.py`): what a client that just committed waits for.
        let at = OffsetDateTime::now_utc();
        Ok(job_ids
            .into_iter()
            .map(|job_id| Committed { job_id, at })
            .collect())
    }
}
