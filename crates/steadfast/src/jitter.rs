//! Jitter: spreading retries out in time, and the random source behind it.
//!
//! Without jitter, every client that failed at the same moment retries at the same moment, and
//! the dependency sees the original spike again at 1 s, 2 s, 4 s… (the "thundering herd"). The
//! four strategies are those of the AWS Architecture Blog's "Exponential Backoff And Jitter".
//! Each one keeps its result within `[0, max_delay]`: jitter spreads delays, it never lengthens
//! them past the cap.

use std::time::Duration;

/// How a backoff delay is randomised.
///
/// `d` below is the backoff delay for this retry, already capped at `max_delay`.
///
/// | strategy | delay |
/// |---|---|
/// | `None` | `d` |
/// | `Full` | `random(0, d)` |
/// | `Equal` | `d/2 + random(0, d/2)` |
/// | `Decorrelated` | `min(max_delay, random(base_delay, previous × 3))`, the first `previous` being `base_delay` |
///
/// ```
/// use steadfast::Jitter;
/// let j: Jitter = serde_json::from_str("\"decorrelated\"").unwrap();
/// assert_eq!(j, Jitter::Decorrelated);
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Jitter {
    /// The exact backoff delay. Synchronised clients stay synchronised.
    None,
    /// Uniform in `[0, d]`: the fewest calls under contention.
    #[default]
    Full,
    /// Uniform in `[d/2, d]`: never much shorter than the backoff.
    Equal,
    /// Each delay drawn from `[base_delay, previous × 3]`, capped: grows like exponential backoff
    /// without being a function of the retry number.
    Decorrelated,
}

/// The random source for jitter: seedable, so that tests and simulations are reproducible.
///
/// ```
/// use steadfast::Rng;
/// let mut a = Rng::with_seed(7);
/// let mut b = Rng::with_seed(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// ```
#[derive(Debug, Clone)]
pub struct Rng(fastrand::Rng);

impl Rng {
    /// A generator seeded from the thread's random state.
    ///
    /// ```
    /// let _ = steadfast::Rng::new();
    /// ```
    #[allow(clippy::new_without_default)] // `Default` would hide that each call is random.
    pub fn new() -> Self {
        Self(fastrand::Rng::new())
    }

    /// A deterministic generator.
    ///
    /// ```
    /// let mut r = steadfast::Rng::with_seed(1);
    /// let _ = r.next_u64();
    /// ```
    pub fn with_seed(seed: u64) -> Self {
        Self(fastrand::Rng::with_seed(seed))
    }

    /// The next 64 random bits.
    ///
    /// ```
    /// let mut r = steadfast::Rng::with_seed(1);
    /// assert_ne!(r.next_u64(), r.next_u64());
    /// ```
    pub fn next_u64(&mut self) -> u64 {
        self.0.u64(..)
    }

    /// A duration drawn uniformly from `[low, high]` (inclusive, nanosecond resolution).
    /// If `high < low`, returns `low`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut r = steadfast::Rng::with_seed(3);
    /// let d = r.duration_between(Duration::from_millis(10), Duration::from_millis(20));
    /// assert!(d >= Duration::from_millis(10) && d <= Duration::from_millis(20));
    /// ```
    pub fn duration_between(&mut self, low: Duration, high: Duration) -> Duration {
        if high <= low {
            return low;
        }
        let (lo, hi) = (nanos(low), nanos(high));
        Duration::from_nanos(self.0.u64(lo..=hi))
    }
}

/// A duration's nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Jitter {
    /// Applies this jitter to the capped backoff delay `d`.
    ///
    /// `previous` is the delay returned for the previous retry (`base` for the first), used only
    /// by [`Jitter::Decorrelated`]. The result never exceeds `max`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{Jitter, Rng};
    /// let ms = Duration::from_millis;
    /// let mut rng = Rng::with_seed(9);
    /// let d = Jitter::Equal.apply(ms(800), ms(100), ms(800), ms(1000), &mut rng);
    /// assert!(d >= ms(400) && d <= ms(800));
    /// ```
    pub fn apply(
        self,
        d: Duration,
        base: Duration,
        previous: Duration,
        max: Duration,
        rng: &mut Rng,
    ) -> Duration {
        match self {
            Jitter::None => d,
            Jitter::Full => rng.duration_between(Duration::ZERO, d),
            Jitter::Equal => {
                let half = d / 2;
                half + rng.duration_between(Duration::ZERO, d - half)
            }
            Jitter::Decorrelated => {
                let high = previous.max(base).saturating_mul(3).min(max);
                rng.duration_between(base.min(max), high)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn full_and_equal_stay_in_bounds_and_spread() {
        let mut rng = Rng::with_seed(42);
        let (mut min, mut max) = (Duration::MAX, Duration::ZERO);
        for _ in 0..2000 {
            let d = Jitter::Full.apply(MS(1000), MS(100), MS(100), MS(1000), &mut rng);
            assert!(d <= MS(1000));
            min = min.min(d);
            max = max.max(d);
            let e = Jitter::Equal.apply(MS(1000), MS(100), MS(100), MS(1000), &mut rng);
            assert!(e >= MS(500) && e <= MS(1000));
        }
        // Uniform over [0, 1s]: 2000 draws land near both ends.
        assert!(min < MS(10) && max > MS(990), "{min:?} {max:?}");
    }

    #[test]
    fn decorrelated_grows_from_previous_and_respects_cap() {
        let mut rng = Rng::with_seed(1);
        let d = Jitter::Decorrelated.apply(MS(0), MS(100), MS(100), MS(10_000), &mut rng);
        assert!(d >= MS(100) && d <= MS(300));
        let d = Jitter::Decorrelated.apply(MS(0), MS(100), MS(5000), MS(6000), &mut rng);
        assert!(d >= MS(100) && d <= MS(6000));
    }

    #[test]
    fn none_is_identity() {
        let mut rng = Rng::with_seed(1);
        assert_eq!(
            Jitter::None.apply(MS(700), MS(1), MS(1), MS(700), &mut rng),
            MS(700)
        );
    }

    #[test]
    fn seeded_is_reproducible() {
        let draw = |seed| {
            let mut r = Rng::with_seed(seed);
            (0..5)
                .map(|_| Jitter::Full.apply(MS(1000), MS(1), MS(1), MS(1000), &mut r))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }
}
