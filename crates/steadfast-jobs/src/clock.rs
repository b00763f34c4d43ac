//! Where workers read the time.
//!
//! Every stored time is UTC milliseconds, read from a [`Clock`]. Production uses the system
//! clock; tests inject a [`ManualClock`] and move it forward, so backoff, leases, cron and
//! catch-up are checked without sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// A source of the current UTC time.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Now, in UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
///
/// ```
/// use steadfast_jobs::{Clock, SystemClock};
/// assert!(SystemClock.now().timestamp() > 0);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told to; clones share one time.
///
/// ```
/// use std::time::Duration;
/// use steadfast_jobs::{Clock, ManualClock};
/// let clock = ManualClock::at("2030-01-01T00:00:00Z".parse().unwrap());
/// clock.advance(Duration::from_secs(90));
/// assert_eq!(clock.now().to_rfc3339(), "2030-01-01T00:01:30+00:00");
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    millis: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock stopped at `at` (millisecond precision).
    pub fn at(at: DateTime<Utc>) -> Self {
        Self {
            millis: Arc::new(AtomicI64::new(at.timestamp_millis())),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.millis.fetch_add(duration_ms(by), Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, at: DateTime<Utc>) {
        self.millis.store(at.timestamp_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        from_ms(self.millis.load(Ordering::SeqCst))
    }
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A stored time back as a `DateTime` (out-of-range values clamp to the epoch).
pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}
