//! Analysis slots: of a worker's slots, at most `worker.analysis_concurrency` run jobs
//! that decode images and run the tools (`BackgroundJob::ANALYSIS_SLOT`), so the
//! worker's memory is sized by these and its slots can be many. The fetcher pops from
//! such a type's list only while an analysis slot is free, and never more messages than
//! are free: a worker never claims an analysis it cannot start (another worker of the
//! fleet takes it instead), and a claimed analysis never waits inside its time limit.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub struct AnalysisSlots {
    permits: Arc<Semaphore>,
    /// The lists of the job types that need one.
    lists: HashSet<String>,
}

/// What the next pop may take: from which lists, how many messages at most.
#[derive(Debug, PartialEq, Eq)]
pub struct PopPlan<'a> {
    pub lists: Cow<'a, [String]>,
    pub count: usize,
    /// The analysis lists are left out (every analysis slot is taken): a slot freed
    /// meanwhile is seen only once the pop returns, so it should return soon.
    pub without_analyses: bool,
}

impl AnalysisSlots {
    pub fn new(concurrency: usize, lists: impl IntoIterator<Item = String>) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(concurrency)),
            lists: lists.into_iter().collect(),
        }
    }

    /// The next pop, with `free` slots free, from `keys` (the worker's lists in this
    /// pop's order). A pop takes from one list, unknown beforehand: while an analysis slot
    /// is free, every list, and at most as many messages as there are analysis slots
    /// free; else only the lists that need none. `None` when every list needs one and
    /// none is free: wait for [`Self::freed`].
    pub fn plan<'a>(&self, keys: &'a [String], free: usize) -> Option<PopPlan<'a>> {
        if !keys.iter().any(|key| self.lists.contains(key)) {
            return Some(PopPlan {
                lists: Cow::Borrowed(keys),
                count: free,
                without_analyses: false,
            });
        }
        let analyses = self.permits.available_permits();
        if analyses > 0 {
            return Some(PopPlan {
                lists: Cow::Borrowed(keys),
                count: free.min(analyses),
                without_analyses: false,
            });
        }
        let others: Vec<String> = keys
            .iter()
            .filter(|key| !self.lists.contains(*key))
            .cloned()
            .collect();
        (!others.is_empty()).then_some(PopPlan {
            lists: Cow::Owned(others),
            count: free,
            without_analyses: true,
        })
    }

    /// The analysis slots of `count` messages popped from `list`: one each when its type
    /// needs one, none otherwise. Only the fetcher takes them, and [`Self::plan`] counted
    /// them free, so each is there.
    pub fn take(&self, list: &str, count: usize) -> Vec<Option<OwnedSemaphorePermit>> {
        let needed = self.lists.contains(list);
        (0..count)
            .map(|_| {
                needed
                    .then(|| Arc::clone(&self.permits).try_acquire_owned().ok())
                    .flatten()
            })
            .collect()
    }

    /// Returns once an analysis slot is free.
    pub async fn freed(&self) {
        // Acquired and dropped at once: the fetcher's next plan counts it free.
        let _ = self.permits.acquire().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn without_analysis_lists_every_free_slot_is_popped_for() {
        let slots = AnalysisSlots::new(2, keys(&["analyze"]));
        let lists = keys(&["verify", "purge"]);
        let plan = slots.plan(&lists, 16).expect("a plan");
        assert_eq!(plan.count, 16);
        assert_eq!(plan.lists.as_ref(), lists.as_slice());
        assert!(!plan.without_analyses);
    }

    #[test]
    fn a_pop_that_may_take_analyses_takes_no_more_than_are_free() {
        let slots = AnalysisSlots::new(3, keys(&["analyze"]));
        let lists = keys(&["verify", "analyze"]);
        assert_eq!(slots.plan(&lists, 16).expect("a plan").count, 3);
        let taken = slots.take("analyze", 2);
        assert!(taken.iter().all(Option::is_some));
        assert_eq!(slots.plan(&lists, 16).expect("a plan").count, 1);
        assert_eq!(slots.plan(&lists, 0).expect("a plan").count, 0);
    }

    #[test]
    fn with_every_analysis_slot_taken_only_the_other_lists_are_popped() {
        let slots = AnalysisSlots::new(1, keys(&["analyze"]));
        let _held = slots.take("analyze", 1);
        let lists = keys(&["analyze", "verify"]);
        let plan = slots.plan(&lists, 16).expect("a plan");
        assert_eq!(plan.lists.as_ref(), keys(&["verify"]).as_slice());
        assert_eq!(plan.count, 16);
        assert!(plan.without_analyses);
        assert_eq!(slots.plan(&keys(&["analyze"]), 16), None);
    }

    #[test]
    fn messages_of_other_lists_take_no_analysis_slot() {
        let slots = AnalysisSlots::new(1, keys(&["analyze"]));
        assert!(slots.take("verify", 4).iter().all(Option::is_none));
        assert_eq!(slots.plan(&keys(&["analyze"]), 4).expect("a plan").count, 1);
    }

    #[tokio::test]
    async fn freed_returns_once_a_held_analysis_slot_is_dropped() {
        let slots = Arc::new(AnalysisSlots::new(1, keys(&["analyze"])));
        let held = slots.take("analyze", 1);
        let waiting = tokio::spawn({
            let slots = Arc::clone(&slots);
            async move { slots.freed().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(held);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("freed within the deadline")
            .expect("the waiting task");
    }
}
