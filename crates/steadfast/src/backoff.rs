//! Backoff strategies: how long to wait before retry *k*.
//!
//! Delays are a pure function of the policy, the retry number, the previous delay and a random
//! source — no clock, no future. That is what lets the engine, the simulator and a durable queue
//! (which stores "run at" instead of sleeping) share one implementation. [`Delays`] exposes the
//! same function as a plain iterator.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::jitter::nanos;
use crate::{RetryPolicy, Rng};

/// How the delay grows from one retry to the next, before the `max_delay` cap and jitter.
///
/// For retry `k` (1 for the first retry):
///
/// | strategy | delay |
/// |---|---|
/// | `Exponential` | `base_delay × multiplier^(k−1)` |
/// | `Linear` | `base_delay × k` |
/// | `Constant` | `base_delay` |
/// | `None` | zero: retry at once (jitter does not apply) |
/// | `Custom(f)` | `f(k)`, then capped and jittered like the others |
///
/// ```
/// use std::time::Duration;
/// use steadfast::Backoff;
///
/// let b = Backoff::custom(|k| Duration::from_millis(10 * u64::from(k * k)));
/// assert_eq!(b.raw_delay(3, Duration::ZERO, 2.0), Duration::from_millis(90));
/// assert_eq!(Backoff::Linear.raw_delay(3, Duration::from_secs(1), 2.0), Duration::from_secs(3));
/// ```
#[derive(Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backoff {
    /// Doubling (or the policy's `multiplier`) from `base_delay`.
    #[default]
    Exponential,
    /// Growing by `base_delay` each retry.
    Linear,
    /// `base_delay` every time. (`"fixed"` is accepted as a synonym in config files.)
    #[serde(alias = "fixed")]
    Constant,
    /// No wait at all.
    None,
    /// A function of the retry number. Cannot be written in a config file.
    #[serde(skip)]
    Custom(CustomBackoff),
}

impl Backoff {
    /// A custom strategy from a function of the retry number (1-based).
    ///
    /// ```
    /// use std::time::Duration;
    /// let fib = steadfast::Backoff::custom(|k| Duration::from_millis([0, 100, 100, 200, 300, 500][k.min(5) as usize]));
    /// assert_eq!(fib.raw_delay(4, Duration::ZERO, 1.0), Duration::from_millis(300));
    /// ```
    pub fn custom(f: impl Fn(u32) -> Duration + Send + Sync + 'static) -> Self {
        Self::Custom(CustomBackoff(Arc::new(f)))
    }

    /// Whether this strategy reads `base_delay` (so the policy requires it to be positive).
    ///
    /// ```
    /// assert!(steadfast::Backoff::Linear.uses_base_delay());
    /// assert!(!steadfast::Backoff::None.uses_base_delay());
    /// ```
    pub fn uses_base_delay(&self) -> bool {
        matches!(self, Self::Exponential | Self::Linear | Self::Constant)
    }

    /// The delay before retry `retry` (1-based), before the cap and jitter. Saturates instead
    /// of overflowing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Backoff;
    /// let s = Duration::from_secs;
    /// let d: Vec<_> = (1..=3).map(|k| Backoff::Exponential.raw_delay(k, s(1), 2.0)).collect();
    /// assert_eq!(d, [s(1), s(2), s(4)]);
    /// ```
    pub fn raw_delay(&self, retry: u32, base: Duration, multiplier: f64) -> Duration {
        let k = retry.max(1);
        match self {
            Self::Exponential => exponential(base, multiplier, k - 1),
            Self::Linear => base.saturating_mul(k),
            Self::Constant => base,
            Self::None => Duration::ZERO,
            Self::Custom(f) => (f.0)(k),
        }
    }
}

/// `base × multiplier^exp`, exact for whole multipliers and saturating at `Duration::MAX`.
fn exponential(base: Duration, multiplier: f64, exp: u32) -> Duration {
    let base = nanos(base);
    if multiplier.fract() == 0.0 && multiplier <= u64::MAX as f64 {
        let factor = (multiplier as u64).checked_pow(exp).unwrap_or(u64::MAX);
        return Duration::from_nanos(base.saturating_mul(factor));
    }
    let value = base as f64 * multiplier.powi(exp.min(i32::MAX as u32) as i32);
    if value.is_finite() && value < u64::MAX as f64 {
        Duration::from_nanos(value.round() as u64)
    } else {
        Duration::from_nanos(u64::MAX)
    }
}

impl fmt::Debug for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exponential => f.write_str("Exponential"),
            Self::Linear => f.write_str("Linear"),
            Self::Constant => f.write_str("Constant"),
            Self::None => f.write_str("None"),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// The function behind [`Backoff::Custom`]. Two custom backoffs are equal when they share the
/// same function object.
///
/// ```
/// let b = steadfast::Backoff::custom(|_| std::time::Duration::from_secs(1));
/// assert_eq!(b.clone(), b);
/// ```
#[derive(Clone)]
pub struct CustomBackoff(Arc<dyn Fn(u32) -> Duration + Send + Sync>);

impl PartialEq for CustomBackoff {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for CustomBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CustomBackoff(..)")
    }
}

/// The policy's retry delays as an iterator: one item per retry the policy allows
/// (`max_attempts − 1` of them), jittered with the given random source. `Retry-After` and the
/// time budget are not applied; they depend on what happens at run time.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{Backoff, Jitter, RetryPolicy, Rng};
///
/// let policy = RetryPolicy::builder()
///     .max_attempts(4)
///     .backoff(Backoff::Linear)
///     .base_delay(Duration::from_secs(1))
///     .max_delay(Duration::from_secs(10))
///     .jitter(Jitter::None)
///     .build()
///     .unwrap();
/// let delays: Vec<_> = policy.delays(Rng::with_seed(0)).collect();
/// assert_eq!(delays, [1, 2, 3].map(Duration::from_secs));
/// ```
#[derive(Debug, Clone)]
pub struct Delays<'p> {
    policy: &'p RetryPolicy,
    rng: Rng,
    retry: u32,
    previous: Duration,
}

impl<'p> Delays<'p> {
    pub(crate) fn new(policy: &'p RetryPolicy, rng: Rng) -> Self {
        Self {
            policy,
            rng,
            retry: 0,
            previous: policy.base_delay(),
        }
    }
}

impl Iterator for Delays<'_> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.retry + 1 >= self.policy.max_attempts() {
            return None;
        }
        self.retry += 1;
        let d = self
            .policy
            .backoff_delay(self.retry, self.previous, &mut self.rng);
        self.previous = d;
        Some(d)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.policy.max_attempts() - 1 - self.retry) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Delays<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_saturates_instead_of_overflowing() {
        let d = Backoff::Exponential.raw_delay(u32::MAX, Duration::from_secs(1), 2.0);
        assert_eq!(d, Duration::from_nanos(u64::MAX));
        let d = Backoff::Exponential.raw_delay(5000, Duration::from_secs(1), 1.5);
        assert_eq!(d, Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn fractional_multiplier() {
        let d = Backoff::Exponential.raw_delay(3, Duration::from_millis(100), 1.5);
        assert_eq!(d, Duration::from_millis(225));
    }

    #[test]
    fn linear_and_constant() {
        let s = Duration::from_secs;
        assert_eq!(
            Backoff::Linear.raw_delay(u32::MAX, s(1), 2.0),
            s(u64::from(u32::MAX))
        );
        assert_eq!(Backoff::Constant.raw_delay(9, s(2), 2.0), s(2));
        assert_eq!(Backoff::None.raw_delay(9, s(2), 2.0), Duration::ZERO);
    }
}
