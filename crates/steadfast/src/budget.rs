//! Retry budgets: keep retries a bounded share of the traffic to a dependency.
//!
//! Per-call retry limits bound one caller; they do nothing for the dependency. With 3 attempts
//! per call, an outage triples the load on a service that is already failing. A budget shared by
//! all calls to one dependency caps the *extra* load: each call deposits `retry_ratio` of a
//! retry, each retry withdraws one, and retries stop when the balance is spent. A floor of
//! `min_retries_per_sec` keeps low-traffic callers able to retry at all. Deposits and withdrawals
//! expire after `ttl`, so a quiet hour does not bank a storm of retries. (This is Finagle's
//! `RetryBudget` and the idea behind gRPC's retry throttling.)
//!
//! Lock-free and cheap, because the engine pays it on every call: deposits and withdrawals are
//! counted in rolling, epoch-tagged atomic buckets with a running total of the closed ones, so
//! a deposit is one compare-and-swap and a withdrawal one compare-and-swap plus three loads — no
//! sum over buckets. A withdrawal checks the balance and takes its retry in the same
//! compare-and-swap, so concurrent retries can never spend more than the budget holds. Ratios
//! are kept as `f64`, never truncated to whole percent.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::PolicyError;
use crate::window::RollingCounter;

mod shared;
pub use shared::SharedBudget;

/// A validated retry budget configuration.
///
/// | field | default | meaning |
/// |---|---|---|
/// | `retry_ratio` | 0.2 | retries allowed per call, on average (0.1 = at most ~10% extra load) |
/// | `min_retries_per_sec` | 10 | retries always allowed per second, whatever the traffic |
/// | `ttl` | 10 s | how long a deposit or withdrawal counts |
///
/// ```
/// use std::time::Duration;
/// let config = steadfast::BudgetConfig::builder()
///     .retry_ratio(0.1)
///     .min_retries_per_sec(5.0)
///     .ttl(Duration::from_secs(10))
///     .build()?;
/// assert_eq!(config.retry_ratio(), 0.1);
/// # Ok::<(), steadfast::PolicyError>(())
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "BudgetConfigBuilder", into = "BudgetConfigBuilder")]
pub struct BudgetConfig {
    retry_ratio: f64,
    min_retries_per_sec: f64,
    ttl: Duration,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            retry_ratio: 0.2,
            min_retries_per_sec: 10.0,
            ttl: Duration::from_secs(10),
        }
    }
}

impl BudgetConfig {
    /// An empty builder.
    ///
    /// ```
    /// assert_eq!(steadfast::BudgetConfig::builder().build().unwrap(), Default::default());
    /// ```
    pub fn builder() -> BudgetConfigBuilder {
        BudgetConfigBuilder::default()
    }

    /// Retries allowed per call, on average.
    ///
    /// ```
    /// assert_eq!(steadfast::BudgetConfig::default().retry_ratio(), 0.2);
    /// ```
    pub fn retry_ratio(&self) -> f64 {
        self.retry_ratio
    }

    /// Retries always allowed per second.
    ///
    /// ```
    /// assert_eq!(steadfast::BudgetConfig::default().min_retries_per_sec(), 10.0);
    /// ```
    pub fn min_retries_per_sec(&self) -> f64 {
        self.min_retries_per_sec
    }

    /// How long a deposit or withdrawal counts.
    ///
    /// ```
    /// assert_eq!(steadfast::BudgetConfig::default().ttl().as_secs(), 10);
    /// ```
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The floor: retries allowed within one `ttl` with no traffic at all.
    ///
    /// ```
    /// assert_eq!(steadfast::BudgetConfig::default().reserve(), 100.0);
    /// ```
    pub fn reserve(&self) -> f64 {
        self.min_retries_per_sec * self.ttl.as_secs_f64()
    }
}

/// A partial budget configuration: the builder, and the override layer of config files.
///
/// ```
/// let c: steadfast::BudgetConfig = toml::from_str("retry_ratio = 0.1\nttl = \"30s\"").unwrap();
/// assert_eq!(c.ttl().as_secs(), 30);
/// ```
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfigBuilder {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_retries_per_sec: Option<f64>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    ttl: Option<Duration>,
}

impl BudgetConfigBuilder {
    /// Retries allowed per call, on average: finite and >= 0 (0 leaves only the floor).
    ///
    /// ```
    /// let e = steadfast::BudgetConfig::builder().retry_ratio(-0.1).build().unwrap_err();
    /// assert_eq!(e.to_string(), "invalid retry budget: retry_ratio must be a finite number >= 0 (got -0.1)");
    /// ```
    pub fn retry_ratio(mut self, ratio: f64) -> Self {
        self.retry_ratio = Some(ratio);
        self
    }

    /// Retries always allowed per second: finite and >= 0.
    ///
    /// ```
    /// let c = steadfast::BudgetConfig::builder().min_retries_per_sec(0.5).build().unwrap();
    /// assert_eq!(c.reserve(), 5.0);
    /// ```
    pub fn min_retries_per_sec(mut self, per_sec: f64) -> Self {
        self.min_retries_per_sec = Some(per_sec);
        self
    }

    /// How long a deposit or withdrawal counts: between 1 s and 1 hour.
    ///
    /// ```
    /// let e = steadfast::BudgetConfig::builder().ttl(std::time::Duration::from_millis(10)).build().unwrap_err();
    /// assert_eq!(e.field(), "ttl");
    /// ```
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Stacks `over` on top of `self`.
    ///
    /// ```
    /// let a = steadfast::BudgetConfig::builder().retry_ratio(0.5);
    /// let c = a.layer(&steadfast::BudgetConfig::builder().ttl(std::time::Duration::from_secs(5))).build().unwrap();
    /// assert_eq!((c.retry_ratio(), c.ttl().as_secs()), (0.5, 5));
    /// ```
    pub fn layer(mut self, over: &BudgetConfigBuilder) -> Self {
        self.retry_ratio = over.retry_ratio.or(self.retry_ratio);
        self.min_retries_per_sec = over.min_retries_per_sec.or(self.min_retries_per_sec);
        self.ttl = over.ttl.or(self.ttl);
        self
    }

    /// Validates this layer on top of the defaults.
    ///
    /// ```
    /// assert!(steadfast::BudgetConfig::builder().min_retries_per_sec(f64::NAN).build().is_err());
    /// ```
    pub fn build(&self) -> Result<BudgetConfig, PolicyError> {
        let d = BudgetConfig::default();
        let c = BudgetConfig {
            retry_ratio: self.retry_ratio.unwrap_or(d.retry_ratio),
            min_retries_per_sec: self.min_retries_per_sec.unwrap_or(d.min_retries_per_sec),
            ttl: self.ttl.unwrap_or(d.ttl),
        };
        let err = |field, constraint: String| {
            Err(PolicyError::in_section("retry budget", field, constraint))
        };
        for (field, v) in [
            ("retry_ratio", c.retry_ratio),
            ("min_retries_per_sec", c.min_retries_per_sec),
        ] {
            if !v.is_finite() || v < 0.0 {
                return err(field, format!("be a finite number >= 0 (got {v})"));
            }
        }
        if c.ttl < Duration::from_secs(1) || c.ttl > Duration::from_secs(3600) {
            return err(
                "ttl",
                format!(
                    "be between 1s and 1h (got {})",
                    humantime::format_duration(c.ttl)
                ),
            );
        }
        Ok(c)
    }
}

impl TryFrom<BudgetConfigBuilder> for BudgetConfig {
    type Error = PolicyError;

    fn try_from(b: BudgetConfigBuilder) -> Result<Self, PolicyError> {
        b.build()
    }
}

impl From<BudgetConfig> for BudgetConfigBuilder {
    fn from(c: BudgetConfig) -> Self {
        Self {
            retry_ratio: Some(c.retry_ratio),
            min_retries_per_sec: Some(c.min_retries_per_sec),
            ttl: Some(c.ttl),
        }
    }
}

struct Inner {
    config: BudgetConfig,
    /// `config.reserve()`, computed once.
    reserve: f64,
    epoch: Instant,
    deposits: RollingCounter,
    withdrawals: RollingCounter,
    /// A budget shared with other processes (`budget/shared.rs`), if any.
    shared: OnceLock<Arc<dyn SharedBudget>>,
}

/// A retry budget shared by every call to one dependency. Cheap to clone: clones share the
/// balance.
///
/// ```
/// use steadfast::{BudgetConfig, RetryBudget};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// // No floor, one retry per ten calls.
/// let budget = RetryBudget::new(BudgetConfig::builder().retry_ratio(0.1).min_retries_per_sec(0.0).build().unwrap());
/// for _ in 0..20 {
///     budget.deposit();
/// }
/// assert!(budget.try_withdraw());
/// assert!(budget.try_withdraw());
/// assert!(!budget.try_withdraw(), "20 calls × 0.1 = 2 retries");
/// # }
/// ```
#[derive(Clone)]
pub struct RetryBudget {
    inner: Arc<Inner>,
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("config", &self.inner.config)
            .field("balance", &self.balance())
            .finish()
    }
}

impl RetryBudget {
    /// A budget with this configuration, starting with only its floor.
    ///
    /// ```
    /// let b = steadfast::RetryBudget::new(Default::default());
    /// assert_eq!(b.config().retry_ratio(), 0.2);
    /// ```
    pub fn new(config: BudgetConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                deposits: RollingCounter::new(config.ttl),
                withdrawals: RollingCounter::new(config.ttl),
                reserve: config.reserve(),
                config,
                epoch: Instant::now(),
                shared: OnceLock::new(),
            }),
        }
    }

    /// The configuration.
    ///
    /// ```
    /// assert_eq!(steadfast::RetryBudget::new(Default::default()).config().ttl().as_secs(), 10);
    /// ```
    pub fn config(&self) -> &BudgetConfig {
        &self.inner.config
    }

    #[inline]
    fn nanos(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.inner.epoch);
        // Not `as_nanos()`: its u128 arithmetic costs more than the rest of a deposit.
        d.as_secs()
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(d.subsec_nanos()))
    }

    /// Records one call (not a retry). Lock-free.
    ///
    /// See [`RetryBudget`] for an example.
    pub fn deposit(&self) {
        self.deposit_at(Instant::now());
    }

    /// [`deposit`](Self::deposit) at a time the caller already read (the engine reuses the
    /// timestamp it takes at the start of each call, so the budget costs it no clock read).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let b = steadfast::RetryBudget::new(Default::default());
    /// b.deposit_at(tokio::time::Instant::now());
    /// # }
    /// ```
    pub fn deposit_at(&self, now: Instant) {
        let i = &self.inner;
        i.deposits.add_in(i.deposits.epoch(self.nanos(now)), 1);
        self.share_deposit();
    }

    /// Takes one retry from the budget if it has one. Lock-free; never overdraws, even under
    /// concurrent withdrawals.
    ///
    /// See [`RetryBudget`] for an example.
    pub fn try_withdraw(&self) -> bool {
        self.try_withdraw_at(Instant::now())
    }

    /// [`try_withdraw`](Self::try_withdraw) at a time the caller already read (the engine has
    /// one in hand when it decides to retry).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let b = steadfast::RetryBudget::new(Default::default());
    /// assert!(b.try_withdraw_at(tokio::time::Instant::now()));
    /// # }
    /// ```
    pub fn try_withdraw_at(&self, now: Instant) -> bool {
        if let Some(allowed) = self.shared_withdraw() {
            return allowed;
        }
        let i = &self.inner;
        // Both counters span `ttl`, so one epoch serves both.
        let epoch = i.deposits.epoch(self.nanos(now));
        let allowed = i.deposits.sum_in(epoch) as f64 * i.config.retry_ratio + i.reserve;
        // Check and take in one compare-and-swap: two racing withdrawals cannot both take the
        // last retry.
        i.withdrawals
            .try_add(epoch, |taken| (taken + 1) as f64 <= allowed)
    }

    /// Retries currently available (may be fractional).
    ///
    /// ```
    /// let b = steadfast::RetryBudget::new(Default::default());
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// assert_eq!(b.balance(), 100.0); // the floor: 10 per second × 10s
    /// # });
    /// ```
    pub fn balance(&self) -> f64 {
        let now = self.nanos(Instant::now());
        let i = &self.inner;
        let allowed = i.deposits.sum(now) as f64 * i.config.retry_ratio + i.config.reserve();
        (allowed - i.withdrawals.sum(now) as f64).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    fn budget(ratio: f64, floor: f64) -> RetryBudget {
        RetryBudget::new(
            BudgetConfig::builder()
                .retry_ratio(ratio)
                .min_retries_per_sec(floor)
                .ttl(Duration::from_secs(10))
                .build()
                .unwrap(),
        )
    }

    fn drain(b: &RetryBudget) -> usize {
        std::iter::from_fn(|| b.try_withdraw().then_some(()))
            .take(1_000_000)
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn ratio_bounds_retries() {
        let b = budget(0.1, 0.0);
        for _ in 0..1000 {
            b.deposit();
        }
        assert_eq!(drain(&b), 100);
    }

    #[tokio::test(start_paused = true)]
    async fn fractional_ratios_are_not_truncated() {
        // tower's TpsBudget works in whole percent; 0.5% of 10_000 calls must be 50 retries.
        let b = budget(0.005, 0.0);
        for _ in 0..10_000 {
            b.deposit();
        }
        assert_eq!(drain(&b), 50);
    }

    #[tokio::test(start_paused = true)]
    async fn the_floor_allows_retries_without_traffic() {
        let b = budget(0.1, 2.0);
        assert_eq!(drain(&b), 20, "2 per second over a 10s ttl");
    }

    #[tokio::test(start_paused = true)]
    async fn deposits_and_withdrawals_expire_after_ttl() {
        let b = budget(0.5, 0.0);
        for _ in 0..10 {
            b.deposit();
        }
        assert_eq!(drain(&b), 5);
        advance(Duration::from_secs(10)).await;
        assert_eq!(b.balance(), 0.0, "old deposits no longer count");
        for _ in 0..4 {
            b.deposit();
        }
        assert_eq!(drain(&b), 2, "old withdrawals no longer count either");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_withdrawals_never_overdraw() {
        let b = budget(0.1, 0.0);
        for _ in 0..1000 {
            b.deposit();
        }
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || (0..100).filter(|_| b.try_withdraw()).count())
            })
            .collect();
        let taken: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(taken, 100);
    }

    #[test]
    fn validation_messages() {
        let b = BudgetConfig::builder;
        for (builder, want) in [
            (
                b().retry_ratio(f64::INFINITY),
                "retry_ratio must be a finite number >= 0 (got inf)",
            ),
            (
                b().min_retries_per_sec(-1.0),
                "min_retries_per_sec must be a finite number >= 0 (got -1)",
            ),
            (
                b().ttl(Duration::from_secs(7200)),
                "ttl must be between 1s and 1h (got 2h)",
            ),
        ] {
            assert_eq!(
                builder.build().unwrap_err().to_string(),
                format!("invalid retry budget: {want}")
            );
        }
        let e = toml::from_str::<BudgetConfig>("ratio = 0.1").unwrap_err();
        assert!(e.to_string().contains("unknown field `ratio`"), "{e}");
    }
}
