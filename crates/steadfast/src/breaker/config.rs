//! Circuit breaker configuration: validated when built, layered like retry policies.

use std::time::Duration;

use crate::PolicyError;

/// How a closed breaker decides to open.
///
/// ```
/// let rule: steadfast::TripRule = serde_json::from_str("\"ratio\"").unwrap();
/// assert_eq!(rule, steadfast::TripRule::Ratio);
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum TripRule {
    /// Open after `failure_threshold` failures within the last `window`.
    #[default]
    Count,
    /// Open when failures are at least `failure_ratio` of the calls in the last `window`, once
    /// at least `minimum_throughput` calls were seen (the Polly / resilience4j rule).
    Ratio,
}

/// A validated circuit breaker configuration. Build one with [`BreakerConfig::builder`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `trip` | count | [`TripRule`] |
/// | `failure_threshold` | 5 | count rule: failures within `window` that open the breaker |
/// | `window` | 60 s | how far back failures (and, for the ratio rule, calls) are counted |
/// | `failure_ratio` | 0.5 | ratio rule: share of failed calls that opens the breaker |
/// | `minimum_throughput` | 10 | ratio rule: calls in the window before the ratio is trusted |
/// | `slow_call_threshold` | none | a success slower than this counts as a failure |
/// | `reset_timeout` | 30 s | how long the breaker stays open before probing |
/// | `reset_timeout_growth` | 1 | each consecutive reopen multiplies the open time by this |
/// | `max_reset_timeout` | 5 min | cap on the grown open time |
/// | `success_threshold` | 1 | consecutive probe successes that close the breaker |
/// | `half_open_max_calls` | 1 | probes admitted at once while half-open |
///
/// The ratio rule counts in ten buckets, so its window forgets in steps of `window / 10`; the
/// count rule keeps exact failure times.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{BreakerConfig, TripRule};
///
/// let config = BreakerConfig::builder()
///     .trip(TripRule::Ratio)
///     .failure_ratio(0.5)
///     .minimum_throughput(20)
///     .window(Duration::from_secs(30))
///     .reset_timeout(Duration::from_secs(10))
///     .reset_timeout_growth(2.0)
///     .max_reset_timeout(Duration::from_secs(120))
///     .build()?;
/// assert_eq!(config.trip(), TripRule::Ratio);
/// # Ok::<(), steadfast::PolicyError>(())
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "BreakerConfigBuilder", into = "BreakerConfigBuilder")]
pub struct BreakerConfig {
    trip: TripRule,
    failure_threshold: u32,
    window: Duration,
    failure_ratio: f64,
    minimum_throughput: u32,
    slow_call_threshold: Option<Duration>,
    reset_timeout: Duration,
    reset_timeout_growth: f64,
    max_reset_timeout: Duration,
    success_threshold: u32,
    half_open_max_calls: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            trip: TripRule::Count,
            failure_threshold: 5,
            window: Duration::from_secs(60),
            failure_ratio: 0.5,
            minimum_throughput: 10,
            slow_call_threshold: None,
            reset_timeout: Duration::from_secs(30),
            reset_timeout_growth: 1.0,
            max_reset_timeout: Duration::from_secs(300),
            success_threshold: 1,
            half_open_max_calls: 1,
        }
    }
}

macro_rules! getters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        impl BreakerConfig {
            $( $(#[$doc])* pub fn $name(&self) -> $ty { self.$name } )*
        }
    };
}

getters! {
    /// The trip rule.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().trip(), steadfast::TripRule::Count);
    /// ```
    trip: TripRule;
    /// Count rule: failures within `window` that open the breaker.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().failure_threshold(), 5);
    /// ```
    failure_threshold: u32;
    /// How far back failures and calls are counted.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().window().as_secs(), 60);
    /// ```
    window: Duration;
    /// Ratio rule: share of failed calls that opens the breaker.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().failure_ratio(), 0.5);
    /// ```
    failure_ratio: f64;
    /// Ratio rule: calls in the window before the ratio is trusted.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().minimum_throughput(), 10);
    /// ```
    minimum_throughput: u32;
    /// A success slower than this counts as a failure.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().slow_call_threshold(), None);
    /// ```
    slow_call_threshold: Option<Duration>;
    /// How long the breaker stays open before its first probe.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().reset_timeout().as_secs(), 30);
    /// ```
    reset_timeout: Duration;
    /// Growth of the open time with each consecutive reopen.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().reset_timeout_growth(), 1.0);
    /// ```
    reset_timeout_growth: f64;
    /// Cap on the grown open time.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().max_reset_timeout().as_secs(), 300);
    /// ```
    max_reset_timeout: Duration;
    /// Consecutive probe successes that close the breaker.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().success_threshold(), 1);
    /// ```
    success_threshold: u32;
    /// Probes admitted at once while half-open.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::default().half_open_max_calls(), 1);
    /// ```
    half_open_max_calls: u32;
}

impl BreakerConfig {
    /// An empty builder: every field unset, falling back to the defaults when built.
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerConfig::builder().build().unwrap(), Default::default());
    /// ```
    pub fn builder() -> BreakerConfigBuilder {
        BreakerConfigBuilder::default()
    }

    /// A builder with every field set to this configuration's values.
    ///
    /// ```
    /// let c = steadfast::BreakerConfig::default();
    /// assert_eq!(c.to_builder().build().unwrap(), c);
    /// ```
    pub fn to_builder(&self) -> BreakerConfigBuilder {
        BreakerConfigBuilder {
            trip: Some(self.trip),
            failure_threshold: Some(self.failure_threshold),
            window: Some(self.window),
            failure_ratio: Some(self.failure_ratio),
            minimum_throughput: Some(self.minimum_throughput),
            slow_call_threshold: Some(self.slow_call_threshold.into()),
            reset_timeout: Some(self.reset_timeout),
            reset_timeout_growth: Some(self.reset_timeout_growth),
            max_reset_timeout: Some(self.max_reset_timeout),
            success_threshold: Some(self.success_threshold),
            half_open_max_calls: Some(self.half_open_max_calls),
        }
    }

    /// How long the breaker stays open after its `n`-th consecutive opening (1-based):
    /// `reset_timeout × reset_timeout_growth^(n−1)`, capped at `max_reset_timeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = steadfast::BreakerConfig::builder()
    ///     .reset_timeout(Duration::from_secs(10))
    ///     .reset_timeout_growth(2.0)
    ///     .max_reset_timeout(Duration::from_secs(30))
    ///     .build()
    ///     .unwrap();
    /// let open: Vec<_> = (1..=4).map(|n| c.open_duration(n).as_secs()).collect();
    /// assert_eq!(open, [10, 20, 30, 30]);
    /// ```
    pub fn open_duration(&self, n: u32) -> Duration {
        let factor = self
            .reset_timeout_growth
            .powi(n.saturating_sub(1).min(i32::MAX as u32) as i32);
        let secs = self.reset_timeout.as_secs_f64() * factor;
        Duration::try_from_secs_f64(secs)
            .unwrap_or(self.max_reset_timeout)
            .min(self.max_reset_timeout)
    }
}

/// A partial breaker configuration: the builder, and the override layer of config files.
///
/// ```
/// let c: steadfast::BreakerConfig = toml::from_str(r#"
///     trip = "count"
///     failure_threshold = 3
///     window = "30s"
///     reset_timeout = "10s"
///     half_open_max_calls = 2
/// "#).unwrap();
/// assert_eq!(c.failure_threshold(), 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerConfigBuilder {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trip: Option<TripRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure_threshold: Option<u32>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    window: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    minimum_throughput: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    slow_call_threshold: Option<crate::Limit>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    reset_timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reset_timeout_growth: Option<f64>,
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    max_reset_timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    success_threshold: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    half_open_max_calls: Option<u32>,
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        impl BreakerConfigBuilder {
            $( $(#[$doc])* pub fn $name(mut self, value: $ty) -> Self { self.$name = Some(value); self } )*
        }
    };
}

setters! {
    /// The trip rule.
    ///
    /// ```
    /// let c = steadfast::BreakerConfig::builder().trip(steadfast::TripRule::Ratio).build().unwrap();
    /// assert_eq!(c.trip(), steadfast::TripRule::Ratio);
    /// ```
    trip: TripRule;
    /// Count rule: failures within `window` that open the breaker (at least 1).
    ///
    /// ```
    /// let e = steadfast::BreakerConfig::builder().failure_threshold(0).build().unwrap_err();
    /// assert_eq!(e.to_string(), "invalid circuit breaker: failure_threshold must be >= 1 (got 0)");
    /// ```
    failure_threshold: u32;
    /// How far back failures and calls are counted (positive).
    ///
    /// ```
    /// let c = steadfast::BreakerConfig::builder().window(std::time::Duration::from_secs(5)).build().unwrap();
    /// assert_eq!(c.window().as_secs(), 5);
    /// ```
    window: Duration;
    /// Ratio rule: share of failed calls that opens the breaker, in `(0, 1]`.
    ///
    /// ```
    /// let e = steadfast::BreakerConfig::builder().failure_ratio(1.5).build().unwrap_err();
    /// assert_eq!(e.field(), "failure_ratio");
    /// ```
    failure_ratio: f64;
    /// Ratio rule: calls in the window before the ratio is trusted (at least 1).
    ///
    /// ```
    /// let c = steadfast::BreakerConfig::builder().minimum_throughput(50).build().unwrap();
    /// assert_eq!(c.minimum_throughput(), 50);
    /// ```
    minimum_throughput: u32;
    /// How long the breaker stays open before probing (positive).
    ///
    /// ```
    /// let c = steadfast::BreakerConfig::builder().reset_timeout(std::time::Duration::from_secs(5)).build().unwrap();
    /// assert_eq!(c.reset_timeout().as_secs(), 5);
    /// ```
    reset_timeout: Duration;
    /// Growth of the open time per consecutive reopen (finite, at least 1; 1 means no growth).
    ///
    /// ```
    /// let c = steadfast::BreakerConfig::builder().reset_timeout_growth(2.0).build().unwrap();
    /// assert_eq!(c.reset_timeout_growth(), 2.0);
    /// ```
    reset_timeout_growth: f64;
    /// Cap on the grown open time (at least `reset_timeout`).
    ///
    /// ```
    /// let e = steadfast::BreakerConfig::builder().max_reset_timeout(std::time::Duration::from_secs(1)).build().unwrap_err();
    /// assert_eq!(e.field(), "max_reset_timeout");
    /// ```
    max_reset_timeout: Duration;
    /// Consecutive probe successes that close the breaker (at least 1).
    ///
    /// ```
    /// let c = steadfast::BreakerConfig::builder().success_threshold(3).build().unwrap();
    /// assert_eq!(c.success_threshold(), 3);
    /// ```
    success_threshold: u32;
    /// Probes admitted at once while half-open (at least 1).
    ///
    /// ```
    /// let c = steadfast::BreakerConfig::builder().half_open_max_calls(2).build().unwrap();
    /// assert_eq!(c.half_open_max_calls(), 2);
    /// ```
    half_open_max_calls: u32;
}

impl BreakerConfigBuilder {
    /// A success slower than this counts as a failure (positive), or
    /// [`Limit::Unlimited`](crate::Limit::Unlimited) for none.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = steadfast::BreakerConfig::builder().slow_call_threshold(Duration::from_secs(2)).build().unwrap();
    /// assert_eq!(c.slow_call_threshold(), Some(Duration::from_secs(2)));
    /// ```
    pub fn slow_call_threshold(mut self, limit: impl Into<crate::Limit>) -> Self {
        self.slow_call_threshold = Some(limit.into());
        self
    }

    /// Stacks `over` on top of `self`: every field `over` sets wins.
    ///
    /// ```
    /// let a = steadfast::BreakerConfig::builder().failure_threshold(3);
    /// let b = steadfast::BreakerConfig::builder().half_open_max_calls(2);
    /// let c = a.layer(&b).build().unwrap();
    /// assert_eq!((c.failure_threshold(), c.half_open_max_calls()), (3, 2));
    /// ```
    pub fn layer(mut self, over: &BreakerConfigBuilder) -> Self {
        macro_rules! take {
            ($($f:ident),*) => { $( if over.$f.is_some() { self.$f = over.$f; } )* };
        }
        take!(
            trip,
            failure_threshold,
            window,
            failure_ratio,
            minimum_throughput,
            slow_call_threshold,
            reset_timeout,
            reset_timeout_growth,
            max_reset_timeout,
            success_threshold,
            half_open_max_calls
        );
        self
    }

    /// Validates this layer on top of the defaults.
    ///
    /// ```
    /// assert!(steadfast::BreakerConfig::builder().half_open_max_calls(0).build().is_err());
    /// ```
    pub fn build(&self) -> Result<BreakerConfig, PolicyError> {
        self.build_on(&BreakerConfig::default())
    }

    /// Validates this layer on top of `base`.
    ///
    /// ```
    /// let base = steadfast::BreakerConfig::default();
    /// let c = steadfast::BreakerConfig::builder().failure_threshold(2).build_on(&base).unwrap();
    /// assert_eq!(c.failure_threshold(), 2);
    /// ```
    pub fn build_on(&self, base: &BreakerConfig) -> Result<BreakerConfig, PolicyError> {
        let m = base.to_builder().layer(self);
        let c = BreakerConfig {
            trip: m.trip.unwrap_or(base.trip),
            failure_threshold: m.failure_threshold.unwrap_or(base.failure_threshold),
            window: m.window.unwrap_or(base.window),
            failure_ratio: m.failure_ratio.unwrap_or(base.failure_ratio),
            minimum_throughput: m.minimum_throughput.unwrap_or(base.minimum_throughput),
            slow_call_threshold: match m.slow_call_threshold {
                Some(crate::Limit::Max(d)) => Some(d),
                _ => None,
            },
            reset_timeout: m.reset_timeout.unwrap_or(base.reset_timeout),
            reset_timeout_growth: m.reset_timeout_growth.unwrap_or(base.reset_timeout_growth),
            max_reset_timeout: m.max_reset_timeout.unwrap_or(base.max_reset_timeout),
            success_threshold: m.success_threshold.unwrap_or(base.success_threshold),
            half_open_max_calls: m.half_open_max_calls.unwrap_or(base.half_open_max_calls),
        };
        validate(&c)?;
        Ok(c)
    }
}

fn validate(c: &BreakerConfig) -> Result<(), PolicyError> {
    let err = |field, constraint: String| {
        Err(PolicyError::in_section(
            "circuit breaker",
            field,
            constraint,
        ))
    };
    let fmt = |d: Duration| humantime::format_duration(d).to_string();
    for (field, value) in [
        ("failure_threshold", c.failure_threshold),
        ("minimum_throughput", c.minimum_throughput),
        ("success_threshold", c.success_threshold),
        ("half_open_max_calls", c.half_open_max_calls),
    ] {
        if value < 1 {
            return err(field, format!("be >= 1 (got {value})"));
        }
    }
    if c.window.is_zero() {
        return err("window", "be > 0".into());
    }
    if !(c.failure_ratio > 0.0 && c.failure_ratio <= 1.0) {
        return err(
            "failure_ratio",
            format!("be in (0, 1] (got {})", c.failure_ratio),
        );
    }
    if c.slow_call_threshold.is_some_and(|d| d.is_zero()) {
        return err(
            "slow_call_threshold",
            "be > 0 (leave it unset, or \"none\", to not count slow calls)".into(),
        );
    }
    if c.reset_timeout.is_zero() {
        return err("reset_timeout", "be > 0".into());
    }
    if !c.reset_timeout_growth.is_finite() || c.reset_timeout_growth < 1.0 {
        return err(
            "reset_timeout_growth",
            format!("be a finite number >= 1 (got {})", c.reset_timeout_growth),
        );
    }
    if c.max_reset_timeout < c.reset_timeout {
        return err(
            "max_reset_timeout",
            format!(
                "be >= reset_timeout ({} < {})",
                fmt(c.max_reset_timeout),
                fmt(c.reset_timeout)
            ),
        );
    }
    Ok(())
}

impl TryFrom<BreakerConfigBuilder> for BreakerConfig {
    type Error = PolicyError;

    fn try_from(b: BreakerConfigBuilder) -> Result<Self, PolicyError> {
        b.build()
    }
}

impl From<BreakerConfig> for BreakerConfigBuilder {
    fn from(c: BreakerConfig) -> Self {
        c.to_builder()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_validation_message() {
        let b = BreakerConfig::builder;
        let s = Duration::from_secs;
        let rows: Vec<(BreakerConfigBuilder, &str)> = vec![
            (
                b().failure_threshold(0),
                "failure_threshold must be >= 1 (got 0)",
            ),
            (
                b().minimum_throughput(0),
                "minimum_throughput must be >= 1 (got 0)",
            ),
            (
                b().success_threshold(0),
                "success_threshold must be >= 1 (got 0)",
            ),
            (
                b().half_open_max_calls(0),
                "half_open_max_calls must be >= 1 (got 0)",
            ),
            (b().window(s(0)), "window must be > 0"),
            (
                b().failure_ratio(0.0),
                "failure_ratio must be in (0, 1] (got 0)",
            ),
            (
                b().failure_ratio(f64::NAN),
                "failure_ratio must be in (0, 1] (got NaN)",
            ),
            (
                b().slow_call_threshold(s(0)),
                "slow_call_threshold must be > 0 (leave it unset, or \"none\", to not count slow calls)",
            ),
            (b().reset_timeout(s(0)), "reset_timeout must be > 0"),
            (
                b().reset_timeout_growth(0.9),
                "reset_timeout_growth must be a finite number >= 1 (got 0.9)",
            ),
            (
                b().reset_timeout(s(600)),
                "max_reset_timeout must be >= reset_timeout (5m < 10m)",
            ),
        ];
        for (builder, want) in rows {
            assert_eq!(
                builder.build().unwrap_err().to_string(),
                format!("invalid circuit breaker: {want}")
            );
        }
    }

    #[test]
    fn toml_round_trip_and_unknown_keys() {
        let c: BreakerConfig = toml::from_str(
            "trip = \"ratio\"\nfailure_ratio = 0.25\nminimum_throughput = 4\nslow_call_threshold = \"2s\"",
        )
        .unwrap();
        assert_eq!(
            (c.trip(), c.failure_ratio(), c.minimum_throughput()),
            (TripRule::Ratio, 0.25, 4)
        );
        assert_eq!(c.slow_call_threshold(), Some(Duration::from_secs(2)));
        assert_eq!(
            toml::from_str::<BreakerConfig>(&toml::to_string(&c).unwrap()).unwrap(),
            c
        );
        let e = toml::from_str::<BreakerConfig>("treshold = 3").unwrap_err();
        assert!(e.to_string().contains("unknown field `treshold`"), "{e}");
    }

    #[test]
    fn open_duration_grows_and_caps() {
        let c = BreakerConfig::builder()
            .reset_timeout(Duration::from_secs(1))
            .reset_timeout_growth(3.0)
            .max_reset_timeout(Duration::from_secs(20))
            .build()
            .unwrap();
        let got: Vec<_> = (1..=5).map(|n| c.open_duration(n).as_secs()).collect();
        assert_eq!(got, [1, 3, 9, 20, 20]);
        assert_eq!(c.open_duration(u32::MAX), Duration::from_secs(20));
    }
}
