//! A lock-free rolling count over a time window, shared by the breaker's ratio rule and the retry
//! budget.
//!
//! The window is split into [`BUCKETS`] buckets. Each bucket is one `AtomicU64` holding the
//! bucket's epoch (which slice of time it counts), a *sealed* flag and its count, so moving a
//! bucket to a new epoch and counting into it is a single compare-and-swap: no lock, and no
//! count lost to a reset racing an increment. The window forgets in steps of `window / BUCKETS`.
//!
//! Reading the count must be cheap — a retry budget reads it on every retry — so it is not a
//! sum over the buckets. The buckets that closed (the `BUCKETS − 1` before the current one) no
//! longer change, so their total is a running figure kept in one word, tagged with the epoch it
//! was taken for: a read is that word plus the current bucket. It is recomputed once per epoch,
//! by the first caller to see the epoch change, which *seals* each bucket it counts. A caller
//! still on the previous epoch (it read the clock just before the change) finds its bucket
//! sealed and is turned away: its add is dropped, and a bounded add ([`RollingCounter::try_add`])
//! fails — so a budget may refuse a retry at the boundary, but never lets one through that the
//! running total would not see.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets per window: the window forgets old counts in tenths.
pub(crate) const BUCKETS: usize = 10;

/// Epochs are 31-bit and compared by wrapping difference.
const TAG_MASK: u32 = 0x7FFF_FFFF;
const SEALED: u64 = 1 << 32;
/// Set in the running total's word once it holds a value.
const VALID: u64 = 1 << 63;

/// An epoch: which `window / BUCKETS` slice of time a moment falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Epoch(u32);

pub(crate) struct RollingCounter {
    buckets: [AtomicU64; BUCKETS],
    /// `VALID | epoch << 32 | total of the closed buckets of that epoch's window`.
    closed: AtomicU64,
    width_nanos: u64,
    /// `u64::MAX / width_nanos`: divides by the width with a multiplication.
    reciprocal: u64,
}

fn pack(epoch: u32, sealed: bool, count: u32) -> u64 {
    (u64::from(epoch) << 33) | if sealed { SEALED } else { 0 } | u64::from(count)
}

fn unpack(word: u64) -> (u32, bool, u32) {
    ((word >> 33) as u32, word & SEALED != 0, word as u32)
}

/// How many epochs `later` is after `earlier`; "negative" differences come out huge.
fn age(later: u32, earlier: u32) -> u32 {
    later.wrapping_sub(earlier) & TAG_MASK
}

/// Whether `tag` is after `e` (by less than half the epoch space).
fn is_after(tag: u32, e: u32) -> bool {
    tag != e && age(tag, e) < (1 << 30)
}

impl RollingCounter {
    /// A counter over `window` (which must be positive).
    pub(crate) fn new(window: Duration) -> Self {
        let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        let width_nanos = (nanos / BUCKETS as u64).max(1);
        Self {
            buckets: Default::default(),
            closed: AtomicU64::new(0),
            width_nanos,
            reciprocal: u64::MAX / width_nanos,
        }
    }

    /// The epoch of `now_nanos` (nanoseconds on the owner's clock). Counters of the same window
    /// share epochs, so one computation serves several.
    #[inline]
    pub(crate) fn epoch(&self, now_nanos: u64) -> Epoch {
        // `now / width` by multiplication; the estimate is at most one short.
        let mut q = ((u128::from(now_nanos) * u128::from(self.reciprocal)) >> 64) as u64;
        if now_nanos - q * self.width_nanos >= self.width_nanos {
            q += 1;
        }
        // Wrapping: epochs only ever compare by difference.
        Epoch(q as u32 & TAG_MASK)
    }

    fn bucket(&self, e: u32) -> &AtomicU64 {
        &self.buckets[e as usize % BUCKETS]
    }

    /// Adds `n` at time `now_nanos`.
    pub(crate) fn add(&self, now_nanos: u64, n: u32) {
        self.add_in(self.epoch(now_nanos), n);
    }

    /// Adds `n` in epoch `e`. Dropped if the bucket was sealed (the caller is late).
    #[inline]
    pub(crate) fn add_in(&self, Epoch(e): Epoch, n: u32) {
        let bucket = self.bucket(e);
        let mut word = bucket.load(Ordering::Acquire);
        loop {
            let (tag, sealed, count) = unpack(word);
            let next = if tag == e && !sealed {
                pack(e, false, count.saturating_add(n))
            } else if tag != e && !is_after(tag, e) {
                // The slot still holds an epoch that has left the window: start it afresh.
                pack(e, false, n)
            } else {
                return;
            };
            match bucket.compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }

    /// Adds one in epoch `e` if `allow(count before the add)` holds: a check and an increment
    /// that no concurrent `try_add` can slip between. False if refused, or if the caller is late.
    #[inline]
    pub(crate) fn try_add(&self, at: Epoch, allow: impl Fn(u64) -> bool) -> bool {
        let Epoch(e) = at;
        let Some(closed) = self.closed_total(e) else {
            return false;
        };
        let bucket = self.bucket(e);
        let mut word = bucket.load(Ordering::Acquire);
        loop {
            let (tag, sealed, count) = unpack(word);
            let current = if tag == e && !sealed {
                count
            } else if tag != e && !is_after(tag, e) {
                0
            } else {
                return false;
            };
            if !allow(closed + u64::from(current)) {
                return false;
            }
            let next = pack(e, false, current.saturating_add(1));
            match bucket.compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(actual) => word = actual,
            }
        }
    }

    /// The count over the window ending at `now_nanos`.
    pub(crate) fn sum(&self, now_nanos: u64) -> u64 {
        self.sum_in(self.epoch(now_nanos))
    }

    /// The count over the window ending in epoch `e`.
    #[inline]
    pub(crate) fn sum_in(&self, Epoch(e): Epoch) -> u64 {
        let closed = self
            .closed_total(e)
            .unwrap_or_else(|| self.total_of_closed(e, false));
        let (tag, _, count) = unpack(self.bucket(e).load(Ordering::Acquire));
        closed + if tag == e { u64::from(count) } else { 0 }
    }

    /// The total of the closed buckets of epoch `e`'s window, from the running figure; `None`
    /// if the figure is already for a later epoch (the caller is late).
    #[inline]
    fn closed_total(&self, e: u32) -> Option<u64> {
        let word = self.closed.load(Ordering::Acquire);
        if word & VALID != 0 {
            let tag = (word >> 32) as u32 & TAG_MASK;
            if tag == e {
                return Some(u64::from(word as u32));
            }
            if is_after(tag, e) {
                return None;
            }
        }
        Some(self.total_of_closed(e, true))
    }

    /// Counts the closed buckets of epoch `e`'s window, sealing each, and (if `keep`) stores the
    /// total as the running figure unless a later epoch's is already there. Once per epoch.
    #[cold]
    fn total_of_closed(&self, e: u32, keep: bool) -> u64 {
        let mut total = 0u64;
        for bucket in &self.buckets {
            let mut word = bucket.load(Ordering::Acquire);
            loop {
                let (tag, sealed, count) = unpack(word);
                if !(1..BUCKETS as u32).contains(&age(e, tag)) {
                    break; // the current bucket, or one outside the window
                }
                if sealed || !keep {
                    total += u64::from(count);
                    break;
                }
                match bucket.compare_exchange_weak(
                    word,
                    word | SEALED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        total += u64::from(count);
                        break;
                    }
                    Err(actual) => word = actual,
                }
            }
        }
        let total = total.min(u64::from(u32::MAX));
        if keep {
            let next = VALID | (u64::from(e) << 32) | total;
            let mut seen = self.closed.load(Ordering::Acquire);
            loop {
                let newer = seen & VALID != 0 && {
                    let tag = (seen >> 32) as u32 & TAG_MASK;
                    tag == e || is_after(tag, e)
                };
                if newer {
                    break;
                }
                match self.closed.compare_exchange_weak(
                    seen,
                    next,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(actual) => seen = actual,
                }
            }
        }
        total
    }

    /// Forgets everything.
    pub(crate) fn clear(&self) {
        self.closed.store(0, Ordering::Release);
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
    fn epochs_divide_exactly_at_the_edges() {
        let c = RollingCounter::new(Duration::from_secs(10));
        for (nanos, want) in [
            (0, 0),
            (SEC - 1, 0),
            (SEC, 1),
            (7 * SEC - 1, 6),
            (7 * SEC, 7),
            (u64::MAX, (u64::MAX / SEC) as u32 & TAG_MASK),
        ] {
            assert_eq!(c.epoch(nanos), Epoch(want), "{nanos}");
        }
        let odd = RollingCounter::new(Duration::from_nanos(70));
        for n in 0..1000u64 {
            assert_eq!(odd.epoch(n), Epoch((n / 7) as u32), "{n}");
        }
    }

    #[test]
    fn a_late_caller_is_turned_away_once_the_epoch_closed() {
        let c = RollingCounter::new(Duration::from_secs(10));
        c.add(0, 1);
        assert_eq!(c.sum(SEC), 1, "reading epoch 1 seals epoch 0");
        c.add(SEC / 2, 5); // read the clock in epoch 0, arrives after the seal: dropped
        assert_eq!(c.sum(SEC), 1);
        assert!(!c.try_add(c.epoch(SEC / 2), |_| true));
        assert!(c.try_add(c.epoch(SEC), |_| true));
        assert_eq!(c.sum(SEC), 2);
    }

    #[test]
    fn try_add_checks_the_count_before_the_add() {
        let c = RollingCounter::new(Duration::from_secs(10));
        c.add(0, 2);
        let e = c.epoch(3 * SEC);
        assert!(c.try_add(e, |before| before < 3));
        assert!(!c.try_add(e, |before| before < 3));
        assert_eq!(c.sum(3 * SEC), 3);
    }

    #[test]
    fn a_long_idle_gap_forgets_everything() {
        let c = RollingCounter::new(Duration::from_secs(10));
        c.add(0, 4);
        c.add(3 * SEC, 4);
        assert_eq!(c.sum(5 * SEC), 8);
        assert_eq!(c.sum(1000 * SEC), 0);
        c.add(1000 * SEC, 1);
        assert_eq!(c.sum(1001 * SEC), 1);
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

    #[test]
    fn concurrent_bounded_adds_never_exceed_the_bound() {
        let c = std::sync::Arc::new(RollingCounter::new(Duration::from_secs(10)));
        c.add(0, 10);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    let e = c.epoch(2 * SEC);
                    (0..1000).filter(|_| c.try_add(e, |n| n < 110)).count()
                })
            })
            .collect();
        let added: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(added, 100);
        assert_eq!(c.sum(2 * SEC), 110);
    }
}
