//! A permit that owns its breaker, for futures that must be `'static` (tower services,
//! spawned tasks).

use std::fmt;
use std::time::Duration;

use super::{CircuitBreaker, Rejected};

impl CircuitBreaker {
    /// Like [`try_acquire`](Self::try_acquire), with a permit that holds a clone of the breaker
    /// (one `Arc` increment) instead of borrowing it.
    ///
    /// ```
    /// let breaker = steadfast::CircuitBreaker::new(Default::default());
    /// let permit = breaker.try_acquire_owned().unwrap();
    /// std::thread::spawn(move || permit.success()).join().unwrap();
    /// assert_eq!(breaker.stats().failures_in_window, 0);
    /// ```
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit, Rejected> {
        let mut permit = self.try_acquire()?;
        // The borrowed permit hands its slot over; its drop must not release the probe.
        permit.resolved = true;
        Ok(OwnedPermit {
            breaker: self.clone(),
            word: permit.word,
            probe: permit.probe,
            resolved: false,
        })
    }
}

/// Permission for one call from [`CircuitBreaker::try_acquire_owned`]; the owned form of
/// [`Permit`](super::Permit), with the same rules: resolve it, or drop it to record nothing.
#[must_use = "report the outcome with success(), failure() or record()"]
pub struct OwnedPermit {
    breaker: CircuitBreaker,
    word: u64,
    probe: bool,
    resolved: bool,
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("probe", &self.probe)
            .finish()
    }
}

impl OwnedPermit {
    /// Whether this call is a half-open probe.
    ///
    /// ```
    /// let b = steadfast::CircuitBreaker::new(Default::default());
    /// assert!(!b.try_acquire_owned().unwrap().is_probe());
    /// ```
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    /// The breaker this permit came from.
    ///
    /// ```
    /// let b = steadfast::CircuitBreaker::named("db", Default::default());
    /// let p = b.try_acquire_owned().unwrap();
    /// assert_eq!(p.breaker().name(), Some("db"));
    /// p.success();
    /// ```
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
    }

    /// The call succeeded.
    ///
    /// See [`CircuitBreaker::try_acquire_owned`] for an example.
    pub fn success(self) {
        self.record(false);
    }

    /// The call failed in a way that counts against the breaker.
    ///
    /// ```
    /// let b = steadfast::CircuitBreaker::new(steadfast::BreakerConfig::builder().failure_threshold(1).build().unwrap());
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// b.try_acquire_owned().unwrap().failure();
    /// # });
    /// assert_eq!(b.state(), steadfast::BreakerState::Open);
    /// ```
    pub fn failure(self) {
        self.record(true);
    }

    /// Records the outcome: `failed` says whether it counts against the breaker.
    ///
    /// See [`OwnedPermit::failure`] for an example.
    pub fn record(mut self, failed: bool) {
        self.resolved = true;
        self.breaker.record(self.word, self.probe, failed);
    }

    /// Records a success that took `elapsed`: a failure if it exceeded the configured
    /// `slow_call_threshold`.
    ///
    /// See [`Permit::success_after`](super::Permit::success_after) for an example.
    pub fn success_after(self, elapsed: Duration) {
        let slow = self.breaker.is_slow(elapsed);
        self.record(slow);
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        if !self.resolved && self.probe {
            self.breaker.release_probe();
        }
    }
}
