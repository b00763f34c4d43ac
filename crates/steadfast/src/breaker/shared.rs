//! A breaker whose state is shared with other processes.
//!
//! Replicas of a gateway (or several agents) that call the same dependency each learn an outage
//! on their own unless they tell one another. The shared version must not put the shared store
//! on the hot path, so this module adds only two seams to a [`CircuitBreaker`]:
//!
//! - **outcomes out**: every outcome the breaker counts (failures and probe results; under the
//!   ratio rule, successes too) is handed to a [`SharedState`], which must queue it and return —
//!   a closed breaker's successes under the count rule never reach it, so the closed path stays
//!   one atomic load;
//! - **decisions in**: [`CircuitBreaker::open_shared`] and [`CircuitBreaker::close_shared`]
//!   apply a state another process decided, and [`SharedState::may_probe`] lets a shared store
//!   grant the half-open probe to one process at a time.
//!
//! The `steadfast-redis` crate implements [`SharedState`] on Redis.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{CLOSED, CircuitBreaker, HALF_OPEN, ISOLATED, OPEN, STATE_MASK};

/// One outcome a breaker counted, as a [`SharedState`] receives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedOutcome {
    /// Whether the call counts as a failure.
    pub failed: bool,
    /// Whether the call was a half-open probe.
    pub probe: bool,
}

/// Where a breaker's outcomes go and who may probe: a store shared with other processes.
///
/// Both methods run inside calls (`may_probe` with the breaker's lock held): they must not
/// block or wait on I/O. Queue the outcome; answer `may_probe` from state kept up to date in
/// the background.
pub trait SharedState: Send + Sync + 'static {
    /// The breaker counted an outcome.
    fn outcome(&self, outcome: SharedOutcome);

    /// The open time has passed: may this process go half-open and send a probe? `false` keeps
    /// the breaker open here (the call is rejected) — another process holds the probe slot, or
    /// the slot is being asked for. The default grants it.
    fn may_probe(&self) -> bool {
        true
    }
}

/// [`CircuitBreaker::share`] was called twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this circuit breaker already shares its state")]
pub struct AlreadyShared;

impl CircuitBreaker {
    /// Connects this breaker to a shared store. Once per breaker (clones share it).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use steadfast::{BreakerConfig, CircuitBreaker, SharedOutcome, SharedState};
    ///
    /// #[derive(Default)]
    /// struct Log(Mutex<Vec<SharedOutcome>>);
    /// impl SharedState for Log {
    ///     fn outcome(&self, o: SharedOutcome) { self.0.lock().unwrap().push(o) }
    /// }
    ///
    /// let log = Arc::new(Log::default());
    /// let breaker = CircuitBreaker::new(BreakerConfig::default());
    /// breaker.share(log.clone()).unwrap();
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// breaker.try_acquire().unwrap().success(); // closed, count rule: nothing to share
    /// breaker.try_acquire().unwrap().failure();
    /// # });
    /// assert_eq!(log.0.lock().unwrap().len(), 1);
    /// assert!(log.0.lock().unwrap()[0].failed);
    /// ```
    pub fn share(&self, state: Arc<dyn SharedState>) -> Result<(), AlreadyShared> {
        self.inner.shared.set(state).map_err(|_| AlreadyShared)
    }

    /// Whether [`share`](Self::share) connected a store.
    pub fn is_shared(&self) -> bool {
        self.inner.shared.get().is_some()
    }

    #[inline]
    pub(super) fn share_outcome(&self, probe: bool, failed: bool) {
        if let Some(s) = self.inner.shared.get() {
            s.outcome(SharedOutcome { failed, probe });
        }
    }

    pub(super) fn shared_may_probe(&self) -> bool {
        self.inner.shared.get().is_none_or(|s| s.may_probe())
    }

    /// Opens the breaker for `open_for` because another process decided so (the shared failure
    /// figure crossed the rule there). Does nothing if the breaker is isolated or already open
    /// at least that long. Subscribers see [`BreakerEvent::Opened`](super::BreakerEvent::Opened). Returns whether it opened.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::CircuitBreaker::new(Default::default());
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// assert!(b.open_shared(Duration::from_secs(5)));
    /// assert_eq!(b.state(), steadfast::BreakerState::Open);
    /// assert!(!b.open_shared(Duration::from_secs(1)), "already open longer");
    /// # });
    /// ```
    pub fn open_shared(&self, open_for: Duration) -> bool {
        let opened = {
            let mut slow = self.lock();
            let word = self.inner.word.load(Ordering::Acquire);
            let until = self
                .now()
                .saturating_add(u64::try_from(open_for.as_nanos()).unwrap_or(u64::MAX));
            match word & STATE_MASK {
                ISOLATED => false,
                OPEN if self.inner.open_until.load(Ordering::Acquire) >= until => false,
                state => {
                    if state != OPEN {
                        slow.consecutive_opens = slow.consecutive_opens.saturating_add(1);
                    }
                    self.enter_open(&mut slow, word, open_for, until, "shared state");
                    true
                }
            }
        };
        self.deliver();
        opened
    }

    /// Closes an open or half-open breaker because another process's probe succeeded. An
    /// isolated or closed breaker is left alone. Returns whether it closed.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::CircuitBreaker::new(Default::default());
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// b.open_shared(Duration::from_secs(5));
    /// assert!(b.close_shared());
    /// assert_eq!(b.state(), steadfast::BreakerState::Closed);
    /// # });
    /// ```
    pub fn close_shared(&self) -> bool {
        let closed = {
            let mut slow = self.lock();
            let word = self.inner.word.load(Ordering::Acquire);
            match word & STATE_MASK {
                OPEN | HALF_OPEN => {
                    self.inner.open_until.store(0, Ordering::Release);
                    self.close(&mut slow, word);
                    true
                }
                CLOSED | ISOLATED => false,
                _ => false,
            }
        };
        self.deliver();
        closed
    }
}
