//! A session's requests in flight: what lets a client cancel one, a stdio front drain them at
//! its input's end, `max_in_flight` bound them, and what the server relates to one find that
//! request's own stream.
//!
//! Kept apart from the session's dispatch so that its invariants live in one place: an entry
//! is added once per accepted request and removed exactly once (by its task's end, a cancel,
//! or the session's end), the gauge follows, and an emptied table wakes whoever drains it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use crate::wire::outbound::Outbound;

/// The table's capacity above which an emptied table is shrunk (and the heap trimmed). Below
/// it the table is kept: a client that keeps ~100 calls in flight empties it now and then, and
/// shrinking it each time made it grow again (five rehashes per cycle, a few percent of the
/// proxy's work per call at 64 in flight). Kept, it is a few KiB.
const SHRINK_ABOVE: usize = 256;

/// One request in flight: a serial (so a finished task never removes a newer request that
/// reused its id), its cancellation, and its own stream when its front gave it one.
struct Entry {
    serial: u64,
    cancel: CancellationToken,
    stream: Option<Arc<Outbound>>,
}

/// Why a request was not entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// `max_in_flight` requests are in flight already.
    Table(usize),
    /// A request with this id is in flight.
    SameId,
}

/// A request entered in the table: remove it with [`InFlight::remove`] and these.
pub(crate) struct Ticket {
    pub(crate) id: Arc<str>,
    pub(crate) serial: u64,
    pub(crate) cancel: CancellationToken,
}

/// The requests in flight of one session, by the client's id (raw JSON).
#[derive(Default)]
pub(crate) struct InFlight {
    /// (Keyed by the id shared with the request's task: one allocation per request. Ids are
    /// the client's, so the hasher stays a keyed one.)
    map: Mutex<HashMap<Arc<str>, Entry, foldhash::fast::RandomState>>,
    /// Some request has a stream of its own (an HTTP POST answered with events): only then
    /// does [`InFlight::stream`] look one up (the stdio front never does).
    streams: AtomicBool,
    /// Woken when the table empties.
    idle: tokio::sync::Notify,
    serial: AtomicU64,
}

impl InFlight {
    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Entry, foldhash::fast::RandomState>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enters request `id` (its own stream, if any), unless `max` are in flight or the id is.
    pub(crate) fn enter(
        &self,
        id: &str,
        stream: Option<Arc<Outbound>>,
        max: usize,
    ) -> Result<Ticket, Full> {
        let mut map = self.lock();
        if map.len() >= max {
            return Err(Full::Table(max));
        }
        if map.contains_key(id) {
            return Err(Full::SameId);
        }
        let cancel = CancellationToken::new();
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        let id: Arc<str> = id.into();
        if stream.is_some() {
            self.streams.store(true, Ordering::Relaxed);
        }
        let entry = Entry {
            serial,
            cancel: cancel.clone(),
            stream,
        };
        map.insert(id.clone(), entry);
        metrics::gauge!("steadfast_requests_in_flight").increment(1.0);
        Ok(Ticket { id, serial, cancel })
    }

    /// Removes request `id` if it is still the one entered as `serial` (its task ended).
    pub(crate) fn remove(&self, id: &str, serial: u64) {
        let mut map = self.lock();
        if map.get(id).is_some_and(|f| f.serial == serial) {
            map.remove(id);
            metrics::gauge!("steadfast_requests_in_flight").decrement(1.0);
            if map.is_empty() {
                self.idle.notify_waiters();
            }
        }
        if map.is_empty() && map.capacity() > SHRINK_ABOVE {
            // A burst is over: give its memory back rather than keep the high-water mark.
            map.shrink_to_fit();
            drop(map);
            crate::wire::memory::release();
        }
    }

    /// Cancels request `id` if it is in flight (and removes it).
    pub(crate) fn cancel(&self, id: &str) {
        let gone = self.lock().remove(id);
        if let Some(f) = gone {
            metrics::gauge!("steadfast_requests_in_flight").decrement(1.0);
            f.cancel.cancel();
        }
    }

    /// Cancels every request in flight (and empties the table).
    pub(crate) fn cancel_all(&self) {
        let drained: Vec<CancellationToken> = self.lock().drain().map(|(_, f)| f.cancel).collect();
        metrics::gauge!("steadfast_requests_in_flight").decrement(drained.len() as f64);
        for ct in drained {
            ct.cancel();
        }
        self.idle.notify_waiters();
    }

    /// Requests in flight now.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Resolves once no request is in flight (at once if none is).
    pub(crate) async fn drained(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            // Registered before the check: an emptying between the two is not missed.
            idle.as_mut().enable();
            if self.len() == 0 {
                return;
            }
            idle.await;
        }
    }

    /// The own stream of request `id`, if it is in flight with one.
    pub(crate) fn stream(&self, id: &str) -> Option<Arc<Outbound>> {
        if !self.streams.load(Ordering::Relaxed) {
            return None; // the stdio front: no lookup per call
        }
        self.lock().get(id).and_then(|f| f.stream.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn an_id_is_entered_once_and_the_table_is_bounded() {
        let t = InFlight::default();
        let a = t.enter("1", None, 2).unwrap();
        assert_eq!(t.enter("1", None, 2).err(), Some(Full::SameId));
        let _b = t.enter("2", None, 2).unwrap();
        assert_eq!(t.enter("3", None, 2).err(), Some(Full::Table(2)));
        t.remove(&a.id, a.serial);
        assert!(t.enter("3", None, 2).is_ok());
    }

    #[test]
    fn a_finished_task_never_removes_a_newer_request_with_its_id() {
        let t = InFlight::default();
        let old = t.enter("1", None, 8).unwrap();
        t.cancel("1");
        assert!(old.cancel.is_cancelled());
        let new = t.enter("1", None, 8).unwrap();
        t.remove(&old.id, old.serial);
        assert_eq!(t.len(), 1, "the newer request stays");
        t.remove(&new.id, new.serial);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn streams_are_found_by_id_and_drained_waits_for_the_last() {
        let t = InFlight::default();
        assert!(t.stream("1").is_none());
        let s = Arc::new(Outbound::new(4));
        let a = t.enter("1", Some(s.clone()), 8).unwrap();
        let _b = t.enter("2", None, 8).unwrap();
        assert!(Arc::ptr_eq(&t.stream("1").unwrap(), &s));
        assert!(t.stream("2").is_none());
        let mut drained = Box::pin(t.drained());
        assert!(drained.as_mut().now_or_never().is_none());
        t.remove(&a.id, a.serial);
        t.cancel_all();
        assert!(drained.now_or_never().is_some());
    }
}
