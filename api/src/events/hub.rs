//! The API process's open event streams: how many there are (per tenant and in all, each
//! capped), the wake-up of each tenant's streams, and the signal that closes them all at
//! shutdown. One `watch` per tenant with open streams: a burst of commits marks it
//! changed once, so a wake-up costs no memory however many arrive while a stream reads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Why a stream was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The tenant has `max_streams_per_tenant` open already.
    TenantFull,
    /// The process has `max_streams` open already.
    ProcessFull,
    /// The process is shutting down.
    Closing,
}

struct TenantStreams {
    wake: watch::Sender<()>,
    open: usize,
}

#[derive(Default)]
struct Open {
    tenants: HashMap<Uuid, TenantStreams>,
    total: usize,
}

pub struct EventHub {
    open: Mutex<Open>,
    per_tenant: usize,
    per_process: usize,
    closing: CancellationToken,
    /// Page reads at once: streams never take every pooled connection from requests.
    reads: Semaphore,
}

impl EventHub {
    pub fn new(per_tenant: usize, per_process: usize, pool_size: usize) -> Arc<Self> {
        Arc::new(Self {
            open: Mutex::new(Open::default()),
            per_tenant,
            per_process,
            closing: CancellationToken::new(),
            reads: Semaphore::new((pool_size / 2).max(1)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        // The map stays consistent whatever a panicking holder did (counts only).
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for one stream of `tenant`, released when the slot is dropped.
    pub fn open(self: &Arc<Self>, tenant: Uuid) -> Result<StreamSlot, Refused> {
        if self.closing.is_cancelled() {
            return Err(Refused::Closing);
        }
        let mut open = self.lock();
        if open.total >= self.per_process {
            return Err(Refused::ProcessFull);
        }
        let streams = open.tenants.entry(tenant).or_insert_with(|| TenantStreams {
            wake: watch::Sender::new(()),
            open: 0,
        });
        if streams.open >= self.per_tenant {
            return Err(Refused::TenantFull);
        }
        streams.open += 1;
        let wake = streams.wake.subscribe();
        open.total += 1;
        metrics::gauge!(quire_shared::metrics::EVENT_STREAMS_OPEN).increment(1.0);
        Ok(StreamSlot {
            hub: Arc::clone(self),
            tenant,
            wake,
        })
    }

    /// Wakes the open streams of `tenant` (a NOTIFY of its commit); nothing if none.
    pub fn wake(&self, tenant: Uuid) {
        if let Some(streams) = self.lock().tenants.get(&tenant) {
            streams.wake.send_replace(());
        }
    }

    /// Wakes every open stream (the listener reconnected: NOTIFYs may have been lost).
    pub fn wake_all(&self) {
        for streams in self.lock().tenants.values() {
            streams.wake.send_replace(());
        }
    }

    /// Closes every stream and refuses new ones: shutdown must not wait for clients.
    pub fn close(&self) {
        self.closing.cancel();
    }

    pub fn closing(&self) -> &CancellationToken {
        &self.closing
    }

    pub fn reads(&self) -> &Semaphore {
        &self.reads
    }

    /// Streams open in this hub.
    #[cfg(test)]
    fn open_streams(&self) -> usize {
        self.lock().total
    }

    fn release(&self, tenant: Uuid) {
        let mut open = self.lock();
        if let Some(streams) = open.tenants.get_mut(&tenant) {
            streams.open = streams.open.saturating_sub(1);
            if streams.open == 0 {
                open.tenants.remove(&tenant);
            }
        }
        open.total = open.total.saturating_sub(1);
        metrics::gauge!(quire_shared::metrics::EVENT_STREAMS_OPEN).decrement(1.0);
    }
}

/// One open stream's place in the hub and its tenant's wake-ups.
pub struct StreamSlot {
    hub: Arc<EventHub>,
    tenant: Uuid,
    pub wake: watch::Receiver<()>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.hub.release(self.tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_per_tenant_and_per_process_and_freed_on_drop() {
        let hub = EventHub::new(2, 3, 10);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let first = hub.open(a).expect("first");
        let second = hub.open(a).expect("second");
        assert_eq!(hub.open(a).err(), Some(Refused::TenantFull));
        let third = hub.open(b).expect("another tenant");
        assert_eq!(hub.open(b).err(), Some(Refused::ProcessFull));
        drop(first);
        let again = hub.open(a).expect("a freed slot is reused");
        drop((second, third, again));
        assert_eq!(hub.open_streams(), 0);
        assert!(
            hub.lock().tenants.is_empty(),
            "no entry outlives its streams"
        );
        hub.close();
        assert_eq!(hub.open(a).err(), Some(Refused::Closing));
    }

    #[tokio::test]
    async fn a_wake_reaches_the_tenants_streams_only() {
        let hub = EventHub::new(5, 5, 10);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let mut of_a = hub.open(a).expect("a");
        let mut of_b = hub.open(b).expect("b");
        hub.wake(a);
        hub.wake(a);
        assert!(of_a.wake.has_changed().expect("open"));
        assert!(!of_b.wake.has_changed().expect("open"));
        of_a.wake.mark_unchanged();
        hub.wake_all();
        assert!(of_a.wake.has_changed().expect("open"));
        assert!(of_b.wake.has_changed().expect("open"));
        of_b.wake.mark_unchanged();
    }
}
