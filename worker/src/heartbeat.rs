//! The heartbeat beside a running handler: renews the lease every third of it and reads
//! the job's status. When the fence no longer holds — the job was cancelled, or rescued
//! after this worker looked dead — it cancels `lost` and the handler stops at once.

use std::sync::Arc;

use quire_shared::db::jobs::{self, Beat, Fence};
use tokio_util::sync::CancellationToken;

use crate::context::WorkerContext;

pub async fn run(context: Arc<WorkerContext>, fence: Fence, lost: CancellationToken) {
    let interval = context.lease / 3;
    loop {
        tokio::time::sleep(interval).await;
        let beat = async {
            let mut conn = context.pool().get().await?;
            jobs::heartbeat(&mut conn, &fence, context.lease).await
        }
        .await;
        match beat {
            Ok(Beat::Extended) => {}
            Ok(Beat::Lost(status)) => {
                tracing::warn!(
                    job_id = %fence.job_id,
                    attempt = fence.attempt,
                    status = status.map(|status| status.as_str()),
                    "heartbeat found the job moved on without this worker, stopping it"
                );
                lost.cancel();
                return;
            }
            // The lease may run out meanwhile; then the rescuer takes the job and the
            // fenced write-back of this worker changes nothing.
            Err(error) => {
                tracing::warn!(job_id = %fence.job_id, %error, "heartbeat failed, retrying")
            }
        }
    }
}
