//! A lock-free rolling count over a time window, shared by the breaker's ratio rule and the retry
//! budget.
//!
//! The window is split into [`BUCKETS`] buckets. Each bucket is one `AtomicU64` holding the
//! bucket's epoch (which slice of time it counts, high 32 bits) and its count (low 32 bits), so
//! moving a bucket to a new epoch and counting into it is a single compare-and-swap: no lock, and
//! no count lost to a reset racing an increment. A sum covers the current bucket and the
//! `BUCKETS − 1` before it, so the window forgets in steps of `window / BUCKETS`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets per window: the window forgets old counts in tenths.
pub(crate) const BUCKETS: usize = 10;

pub(crate) struct RollingCounter {
    buckets: [AtomicU64; BUCKETS],
    width_nanos: u64,
}

fn pack(epoch: u32, count: u32) -> u64 {
    (u64::from(epoch) << 32) | u64::from(count)
}

fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

impl RollingCounter {
    /// A counter over `window` (which must be positive).
    pub(crate) fn new(window: Duration) -> Self {
        let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        Self {
            buckets: Default::default(),
            width_nanos: (nanos / BUCKETS as u64).max(1),
        }
    }

    fn epoch(&self, now_nanos: u64) -> u32 {
        // Wrapping: epochs only ever compare by difference.
        (now_nanos / self.width_nanos) as u32
    }

    /// Adds `n` at time `now_nanos` (nanoseconds on the owner's clock).
    pub(crate) fn add(&self, now_nanos: u64, n: u32) {
        let epoch = self.epoch(now_nanos);
        let bucket = &self.buckets[epoch as usize % BUCKETS];
        let mut word = bucket.load(Ordering::Relaxed);
        loop {
            let (e, count) = unpack(word);
            let next = if e == epoch {
                pack(epoch, count.saturating_add(n))
            } else {
                pack(epoch, n)
            };
            match bucket.compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }

    /// Takes back `n` added at `now_nanos`, if its bucket still counts that epoch.
    pub(crate) fn undo(&self, now_nanos: u64, n: u32) {
        let epoch = self.epoch(now_nanos);
        let bucket = &self.buckets[epoch as usize % BUCKETS];
        let mut word = bucket.load(Ordering::Relaxed);
        loop {
            let (e, count) = unpack(word);
            if e != epoch {
                return;
            }
            let next = pack(epoch, count.saturating_sub(n));
            match bucket.compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }

    /// The count over the window ending at `now_nanos`.
    pub(crate) fn sum(&self, now_nanos: u64) -> u64 {
        let epoch = self.epoch(now_nanos);
        self.buckets
            .iter()
            .map(|b| unpack(b.load(Ordering::Acquire)))
            .filter(|(e, _)| (epoch.wrapping_sub(*e) as usize) < BUCKETS)
            .map(|(_, count)| u64::from(count))
            .sum()
    }

    /// Forgets everything.
    pub(crate) fn clear(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn counts_within_the_window_and_forgets_in_tenths() {
        let c = RollingCounter::new(Duration::from_secs(10));
        c.add(0, 3);
        c.add(5 * SEC, 2);
        assert_eq!(c.sum(5 * SEC), 5);
        assert_eq!(c.sum(9 * SEC + SEC / 2), 5);
        // At 10s the bucket holding t=0 has left the window.
        assert_eq!(c.sum(10 * SEC), 2);
        assert_eq!(c.sum(15 * SEC), 0);
    }

    #[test]
    fn a_reused_bucket_starts_from_zero() {
        let c = RollingCounter::new(Duration::from_secs(10));
        c.add(0, 7);
        c.add(10 * SEC, 1); // same slot, next lap
        assert_eq!(c.sum(10 * SEC), 1);
    }

    #[test]
    fn undo_only_touches_the_current_epoch() {
        let c = RollingCounter::new(Duration::from_secs(10));
        c.add(0, 2);
        c.undo(0, 1);
        assert_eq!(c.sum(0), 1);
        c.undo(10 * SEC, 1); // the slot now belongs to a later epoch: nothing to undo
        assert_eq!(c.sum(0), 1);
    }

    #[test]
    fn concurrent_adds_are_not_lost() {
        let c = std::sync::Arc::new(RollingCounter::new(Duration::from_secs(10)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        c.add(SEC, 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(c.sum(SEC), 40_000);
    }
}
