//! A test's Redis lists: what a dispatcher would push, and waiting for workers to pop it.
//! Both go through the protocol in `broker`, so no test names a list direction.

use super::{DEADLINE, TestContext, eventually};
use crate::broker;
use crate::redis_client::RedisPool;

impl TestContext {
    /// A pool on this test's Redis (it connects lazily, like the binaries').
    fn redis_pool(&self) -> RedisPool {
        RedisPool::build(&self.settings.redis).expect("redis pool")
    }

    /// Pushes `raw` onto this test's list of `job_type`, as a dispatcher would: a copy of
    /// a real message, or one no dispatcher would ever send.
    pub async fn push_raw(&self, job_type: &str, raw: &str) {
        let key = broker::queue_key(&self.namespace, job_type);
        let mut pipeline = deadpool_redis::redis::pipe();
        broker::push(&mut pipeline, &key, raw);
        let mut conn = self.redis_pool().get().await.expect("redis connection");
        pipeline.query_async::<()>(&mut conn).await.expect("push");
    }

    /// Waits until workers have popped every message of `job_type`'s list.
    pub async fn wait_until_consumed(&self, job_type: &str) {
        self.wait_for_queue_length(job_type, 0).await;
    }

    /// Waits until `job_type`'s list holds exactly `length` messages.
    pub async fn wait_for_queue_length(&self, job_type: &str, length: usize) {
        let redis = self.redis_pool();
        eventually(
            DEADLINE,
            &format!("the {job_type} list holds {length} messages"),
            || async {
                // A failed read (Redis restarting) is one more poll, not a failure.
                let lengths = broker::queue_lengths(&redis, &self.namespace, &[job_type])
                    .await
                    .ok()?;
                lengths
                    .iter()
                    .all(|(_, found)| usize::try_from(*found).ok() == Some(length))
                    .then_some(())
            },
        )
        .await;
    }
}
