//! The retry policy: how many attempts, how far apart, for how long.
//!
//! A [`RetryPolicy`] is a plain, validated value: cheap to clone, shareable, serializable, and
//! never in an invalid state. It is built from a [`RetryPolicyBuilder`], which is also the
//! *partial* form used for layering: application-wide defaults, then per-tool or per-call
//! overrides, each setting only what it cares about. Validation runs once, after layering, so a
//! per-call `base_delay` of 5 s against a default `max_delay` of 3 s is rejected when built —
//! not discovered at 3 a.m. when the first retry fires.
//!
//! In config files the policy is a table with human durations:
//!
//! ```
//! use steadfast::RetryPolicy;
//! let policy: RetryPolicy = toml::from_str(r#"
//!     max_attempts = 5
//!     backoff = "exponential"
//!     base_delay = "250ms"
//!     max_delay = "5s"
//!     jitter = "full"
//!     max_elapsed = "30s"
//! "#).unwrap();
//! assert_eq!(policy.max_attempts(), 5);
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::backoff::{Backoff, Delays};
use crate::jitter::{Jitter, Rng};
use crate::{ErrorClass, ErrorCode};

/// A validated retry policy. Build one with [`RetryPolicy::builder`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `max_attempts` | 3 | attempts including the first (`max_retries(n)` = `n + 1` attempts) |
/// | `backoff` | exponential | see [`Backoff`] |
/// | `multiplier` | 2 | growth factor of exponential backoff |
/// | `base_delay` | 100 ms | first retry's delay |
/// | `max_delay` | 3 s | cap on any backoff delay, after jitter |
/// | `jitter` | full | see [`Jitter`] |
/// | `max_elapsed` | none | wall-clock budget for the whole call |
/// | `attempt_timeout` | none | limit on each attempt |
/// | `max_retry_after` | 60 s | the longest `Retry-After` honoured |
/// | `retry_unknown` | true | retry failures the classifier does not recognise |
/// | `retry_caps` | none | at most *k* retries after failures of one status, status class or code |
///
/// Attempts are numbered from 1: the first call is attempt 1, the first retry attempt 2.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{Jitter, RetryPolicy};
///
/// let policy = RetryPolicy::builder()
///     .max_retries(4)
///     .base_delay(Duration::from_millis(200))
///     .max_delay(Duration::from_secs(5))
///     .jitter(Jitter::Equal)
///     .max_elapsed(Duration::from_secs(20))
///     .build()?;
/// assert_eq!(policy.max_attempts(), 5);
/// # Ok::<(), steadfast::PolicyError>(())
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "RetryPolicyBuilder", into = "RetryPolicyBuilder")]
pub struct RetryPolicy {
    max_attempts: u32,
    backoff: Backoff,
    multiplier: f64,
    base_delay: Duration,
    max_delay: Duration,
    jitter: Jitter,
    max_elapsed: Option<Duration>,
    attempt_timeout: Option<Duration>,
    max_retry_after: Duration,
    retry_unknown: bool,
    /// Most specific first (status, then status class, then code).
    retry_caps: Vec<(RetryCap, u32)>,
}

impl Default for RetryPolicy {
    /// Three attempts, full-jitter exponential backoff from 100 ms capped at 3 s.
    fn default() -> Self {
        Self {
            max_attempts: 3,
            backoff: Backoff::Exponential,
            multiplier: 2.0,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(3),
            jitter: Jitter::Full,
            max_elapsed: None,
            attempt_timeout: None,
            max_retry_after: Duration::from_secs(60),
            retry_unknown: true,
            retry_caps: Vec::new(),
        }
    }
}

impl RetryPolicy {
    /// An empty builder: every field unset, falling back to the defaults when built.
    ///
    /// ```
    /// let p = steadfast::RetryPolicy::builder().build().unwrap();
    /// assert_eq!(p, steadfast::RetryPolicy::default());
    /// ```
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder::default()
    }

    /// A policy that makes exactly one attempt.
    ///
    /// ```
    /// assert_eq!(steadfast::RetryPolicy::no_retry().max_attempts(), 1);
    /// ```
    pub fn no_retry() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// This policy with `overrides` layered on top, validated again.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::RetryPolicy;
    /// let defaults = RetryPolicy::default(); // max_delay 3s
    /// let err = defaults
    ///     .with_overrides(&RetryPolicy::builder().base_delay(Duration::from_secs(5)))
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "base_delay");
    /// ```
    pub fn with_overrides(&self, overrides: &RetryPolicyBuilder) -> Result<Self, PolicyError> {
        overrides.build_on(self)
    }

    /// A builder with every field set to this policy's values.
    ///
    /// ```
    /// let p = steadfast::RetryPolicy::default();
    /// assert_eq!(p.to_builder().build().unwrap(), p);
    /// ```
    pub fn to_builder(&self) -> RetryPolicyBuilder {
        RetryPolicyBuilder {
            max_attempts: Some(self.max_attempts),
            max_retries: None,
            backoff: Some(self.backoff.clone()),
            multiplier: Some(self.multiplier),
            base_delay: Some(self.base_delay),
            max_delay: Some(self.max_delay),
            jitter: Some(self.jitter),
            max_elapsed: Some(self.max_elapsed.into()),
            attempt_timeout: Some(self.attempt_timeout.into()),
            max_retry_after: Some(self.max_retry_after),
            retry_unknown: Some(self.retry_unknown),
            retry_caps: (!self.retry_caps.is_empty()).then(|| {
                self.retry_caps
                    .iter()
                    .map(|(key, n)| (key.to_string(), *n))
                    .collect()
            }),
        }
    }

    /// Attempts including the first (at least 1).
    ///
    /// ```
    /// assert_eq!(steadfast::RetryPolicy::default().max_attempts(), 3);
    /// ```
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The backoff strategy.
    ///
    /// ```
    /// assert_eq!(*steadfast::RetryPolicy::default().backoff(), steadfast::Backoff::Exponential);
    /// ```
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// Growth factor of exponential backoff (at least 1).
    ///
    /// ```
    /// assert_eq!(steadfast::RetryPolicy::default().multiplier(), 2.0);
    /// ```
    pub fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// The first retry's delay, before jitter: retry *k* waits `base_delay × multiplier^(k−1)`
    /// (exponential backoff), so the first retry waits exactly `base_delay`.
    ///
    /// Cloudflare Agents and the AWS Architecture Blog write `min(cap, base × 2^attempt)`
    /// instead — one doubling ahead, their first retry waits `2 × base`. To get their table,
    /// double the base: Cloudflare's `baseDelayMs: 500, maxDelayMs: 3000` (ceilings 1000, 2000,
    /// 3000, 3000 ms) is `base_delay = "1s", max_delay = "3s"` here.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{Jitter, RetryPolicy, Rng};
    /// assert_eq!(RetryPolicy::default().base_delay().as_millis(), 100);
    ///
    /// // Cloudflare's table for baseDelayMs 500, maxDelayMs 3000: the ceilings of full jitter.
    /// let cloudflare = RetryPolicy::builder()
    ///     .base_delay(Duration::from_secs(1))
    ///     .max_delay(Duration::from_secs(3))
    ///     .max_attempts(5)
    ///     .jitter(Jitter::None)
    ///     .build()
    ///     .unwrap();
    /// let ceilings: Vec<u128> = cloudflare.delays(Rng::with_seed(0)).map(|d| d.as_millis()).collect();
    /// assert_eq!(ceilings, [1000, 2000, 3000, 3000]);
    /// ```
    pub fn base_delay(&self) -> Duration {
        self.base_delay
    }

    /// The cap on any backoff delay, applied after jitter.
    ///
    /// ```
    /// assert_eq!(steadfast::RetryPolicy::default().max_delay().as_secs(), 3);
    /// ```
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// The jitter strategy.
    ///
    /// ```
    /// assert_eq!(steadfast::RetryPolicy::default().jitter(), steadfast::Jitter::Full);
    /// ```
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The wall-clock budget for a whole call, attempts and delays included, if any.
    ///
    /// The engine never starts a delay that would end past it, and cuts an attempt short when
    /// the budget runs out during it.
    ///
    /// ```
    /// assert_eq!(steadfast::RetryPolicy::default().max_elapsed(), None);
    /// ```
    pub fn max_elapsed(&self) -> Option<Duration> {
        self.max_elapsed
    }

    /// The limit on each attempt, if any. An attempt that exceeds it is dropped and counts as a
    /// retriable `TIMEOUT`.
    ///
    /// ```
    /// assert_eq!(steadfast::RetryPolicy::default().attempt_timeout(), None);
    /// ```
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.attempt_timeout
    }

    /// The longest `Retry-After` the engine will honour; a longer one is clamped to this, so a
    /// hostile or confused server cannot park a caller for a day.
    ///
    /// ```
    /// assert_eq!(steadfast::RetryPolicy::default().max_retry_after().as_secs(), 60);
    /// ```
    pub fn max_retry_after(&self) -> Duration {
        self.max_retry_after
    }

    /// Whether failures classified [`ErrorKind::Unknown`](crate::ErrorKind::Unknown) are retried.
    ///
    /// ```
    /// assert!(steadfast::RetryPolicy::default().retry_unknown());
    /// ```
    pub fn retry_unknown(&self) -> bool {
        self.retry_unknown
    }

    /// The per-status and per-code retry caps, most specific first.
    ///
    /// ```
    /// use steadfast::{RetryCap, RetryPolicy};
    /// let p = RetryPolicy::builder().max_attempts(5).retry_cap(500, 2).build().unwrap();
    /// assert_eq!(p.retry_caps(), &[(RetryCap::Status(500), 2)]);
    /// ```
    pub fn retry_caps(&self) -> &[(RetryCap, u32)] {
        &self.retry_caps
    }

    /// The cap that applies to a failure of this class, if any, with its index in
    /// [`retry_caps`](Self::retry_caps): an exact status wins over a status class, which wins
    /// over an error code.
    ///
    /// ```
    /// use steadfast::{ErrorClass, ErrorCode, RetryPolicy};
    /// let p = RetryPolicy::builder().retry_cap("5xx", 3).retry_cap(500, 2).build().unwrap();
    /// assert_eq!(p.retry_cap_for(&ErrorClass::from_status(500)).map(|c| c.1), Some(2));
    /// assert_eq!(p.retry_cap_for(&ErrorClass::from_status(503)).map(|c| c.1), Some(3));
    /// assert_eq!(p.retry_cap_for(&ErrorClass::timeout()), None);
    /// ```
    pub fn retry_cap_for(&self, class: &ErrorClass) -> Option<(usize, u32)> {
        if self.retry_caps.is_empty() {
            return None;
        }
        self.retry_caps
            .iter()
            .position(|(key, _)| key.matches(class))
            .map(|i| (i, self.retry_caps[i].1))
    }

    /// The backoff delay before retry `retry` (1-based): the strategy's delay, capped at
    /// `max_delay`, then jittered (and still within `max_delay`). `previous` is the delay this
    /// function returned for the previous retry (`base_delay` for the first); only decorrelated
    /// jitter reads it.
    ///
    /// A pure function: no clock, no state but the random source.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{Jitter, RetryPolicy, Rng};
    /// let p = RetryPolicy::builder()
    ///     .base_delay(Duration::from_secs(1))
    ///     .max_delay(Duration::from_secs(5))
    ///     .jitter(Jitter::None)
    ///     .build()
    ///     .unwrap();
    /// let mut rng = Rng::with_seed(0);
    /// assert_eq!(p.backoff_delay(3, Duration::ZERO, &mut rng), Duration::from_secs(4));
    /// assert_eq!(p.backoff_delay(4, Duration::ZERO, &mut rng), Duration::from_secs(5));
    /// ```
    pub fn backoff_delay(&self, retry: u32, previous: Duration, rng: &mut Rng) -> Duration {
        if self.backoff == Backoff::None {
            return Duration::ZERO;
        }
        let capped = self
            .backoff
            .raw_delay(retry, self.base_delay, self.multiplier)
            .min(self.max_delay);
        self.jitter
            .apply(capped, self.base_delay, previous, self.max_delay, rng)
    }

    /// The delay the engine sleeps before retry `retry`: the backoff delay, raised to the
    /// failure's `Retry-After` (itself clamped to `max_retry_after`) when that is longer.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{RetryPolicy, Rng};
    /// let p = RetryPolicy::default();
    /// let mut rng = Rng::with_seed(0);
    /// let s = Duration::from_secs;
    /// assert_eq!(p.retry_delay(1, p.base_delay(), Some(s(10)), &mut rng), s(10));
    /// assert_eq!(p.retry_delay(1, p.base_delay(), Some(s(86_400)), &mut rng), s(60));
    /// ```
    pub fn retry_delay(
        &self,
        retry: u32,
        previous: Duration,
        retry_after: Option<Duration>,
        rng: &mut Rng,
    ) -> Duration {
        let backoff = self.backoff_delay(retry, previous, rng);
        self.floor_retry_after(backoff, retry_after)
    }

    /// `backoff`, raised to `retry_after` (clamped to `max_retry_after`) when that is longer.
    pub(crate) fn floor_retry_after(
        &self,
        backoff: Duration,
        retry_after: Option<Duration>,
    ) -> Duration {
        match retry_after {
            Some(after) => backoff.max(after.min(self.max_retry_after)),
            None => backoff,
        }
    }

    /// The backoff delays of every retry this policy allows, as an iterator.
    ///
    /// ```
    /// use steadfast::{RetryPolicy, Rng};
    /// assert_eq!(RetryPolicy::default().delays(Rng::with_seed(1)).count(), 2);
    /// ```
    pub fn delays(&self, rng: Rng) -> Delays<'_> {
        Delays::new(self, rng)
    }
}

/// What a retry cap applies to: failures with one HTTP status, one status class, or one
/// [`ErrorCode`].
///
/// The MCP retry guide's advice for HTTP 500 — "limit to 2 retries before treating as
/// permanent" — is `retry_cap(500, 2)` in code and `retry_caps = { "500" = 2 }` in a config
/// file. Keys are written `"500"`, `"5xx"` or an error code such as `"TIMEOUT"`.
///
/// ```
/// use steadfast::{ErrorCode, RetryCap};
/// assert_eq!("500".parse::<RetryCap>(), Ok(RetryCap::Status(500)));
/// assert_eq!("5xx".parse::<RetryCap>(), Ok(RetryCap::StatusClass(5)));
/// assert_eq!("TIMEOUT".parse::<RetryCap>(), Ok(RetryCap::Code(ErrorCode::TIMEOUT)));
/// assert!("50".parse::<RetryCap>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RetryCap {
    /// Failures with exactly this HTTP status.
    Status(u16),
    /// Failures with a status in this hundred (`5` for 5xx).
    StatusClass(u8),
    /// Failures classified with this code.
    Code(ErrorCode),
}

impl RetryCap {
    fn matches(&self, class: &ErrorClass) -> bool {
        match self {
            RetryCap::Status(s) => class.status == Some(*s),
            RetryCap::StatusClass(c) => class.status.is_some_and(|s| s / 100 == u16::from(*c)),
            RetryCap::Code(code) => class.code == *code,
        }
    }

    fn specificity(&self) -> u8 {
        match self {
            RetryCap::Status(_) => 0,
            RetryCap::StatusClass(_) => 1,
            RetryCap::Code(_) => 2,
        }
    }
}

impl fmt::Display for RetryCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryCap::Status(s) => write!(f, "{s}"),
            RetryCap::StatusClass(c) => write!(f, "{c}xx"),
            RetryCap::Code(code) => f.write_str(code.as_str()),
        }
    }
}

impl std::str::FromStr for RetryCap {
    type Err = String;

    fn from_str(key: &str) -> Result<Self, String> {
        let bytes = key.as_bytes();
        if bytes.len() == 3 && bytes.iter().all(u8::is_ascii_digit) {
            let status: u16 = key.parse().map_err(|_| key.to_owned())?;
            if (100..=599).contains(&status) {
                return Ok(RetryCap::Status(status));
            }
        } else if bytes.len() == 3
            && (b'1'..=b'5').contains(&bytes[0])
            && bytes[1..].eq_ignore_ascii_case(b"xx")
        {
            return Ok(RetryCap::StatusClass(bytes[0] - b'0'));
        } else if bytes.first().is_some_and(u8::is_ascii_uppercase)
            && bytes
                .iter()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
        {
            return Ok(RetryCap::Code(ErrorCode::new(key.to_owned())));
        }
        Err(format!(
            "have keys that are an HTTP status (\"500\"), a status class (\"5xx\") or an error code (\"TIMEOUT\") (got {key:?})"
        ))
    }
}

/// A field that can be explicitly unset in an override layer: `max_elapsed = "none"` in a
/// per-tool table removes a budget that the defaults set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// No limit.
    Unlimited,
    /// At most this long.
    Max(Duration),
}

impl From<Option<Duration>> for Limit {
    fn from(d: Option<Duration>) -> Self {
        d.map_or(Limit::Unlimited, Limit::Max)
    }
}

impl From<Duration> for Limit {
    fn from(d: Duration) -> Self {
        Limit::Max(d)
    }
}

impl Limit {
    fn get(self) -> Option<Duration> {
        match self {
            Limit::Unlimited => None,
            Limit::Max(d) => Some(d),
        }
    }
}

impl serde::Serialize for Limit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Limit::Unlimited => s.serialize_str("none"),
            Limit::Max(d) => s.collect_str(&humantime::format_duration(*d)),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Limit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text.eq_ignore_ascii_case("none") {
            return Ok(Limit::Unlimited);
        }
        humantime::parse_duration(&text)
            .map(Limit::Max)
            .map_err(|e| {
                serde::de::Error::custom(format!(
                    "{e}: expected a duration such as \"5s\" or \"none\""
                ))
            })
    }
}

/// A partial retry policy: the builder, and the override layer of config files.
///
/// Unset fields fall back to the layer below: [`build`](Self::build) layers on the built-in
/// defaults, [`build_on`](Self::build_on) on a policy of yours, and [`layer`](Self::layer)
/// stacks two partial layers. Validation happens in `build*`, after layering.
///
/// ```
/// use std::time::Duration;
/// use steadfast::RetryPolicy;
///
/// // Application-wide defaults, then one tool's override.
/// let app = RetryPolicy::builder().max_attempts(5).max_delay(Duration::from_secs(10));
/// let tool = RetryPolicy::builder().base_delay(Duration::from_secs(1));
/// let policy = app.layer(&tool).build()?;
/// assert_eq!((policy.max_attempts(), policy.base_delay()), (5, Duration::from_secs(1)));
/// # Ok::<(), steadfast::PolicyError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicyBuilder {
    #[serde(
        default,
        deserialize_with = "named::max_attempts",
        skip_serializing_if = "Option::is_none"
    )]
    max_attempts: Option<u32>,
    #[serde(
        default,
        deserialize_with = "named::max_retries",
        skip_serializing_if = "Option::is_none"
    )]
    max_retries: Option<u32>,
    #[serde(
        default,
        deserialize_with = "named::backoff",
        skip_serializing_if = "Option::is_none"
    )]
    backoff: Option<Backoff>,
    #[serde(
        default,
        deserialize_with = "named::multiplier",
        skip_serializing_if = "Option::is_none"
    )]
    multiplier: Option<f64>,
    #[serde(
        default,
        serialize_with = "humantime_serde::serialize",
        deserialize_with = "named::base_delay",
        skip_serializing_if = "Option::is_none"
    )]
    base_delay: Option<Duration>,
    #[serde(
        default,
        serialize_with = "humantime_serde::serialize",
        deserialize_with = "named::max_delay",
        skip_serializing_if = "Option::is_none"
    )]
    max_delay: Option<Duration>,
    #[serde(
        default,
        deserialize_with = "named::jitter",
        skip_serializing_if = "Option::is_none"
    )]
    jitter: Option<Jitter>,
    #[serde(
        default,
        deserialize_with = "named::max_elapsed",
        skip_serializing_if = "Option::is_none"
    )]
    max_elapsed: Option<Limit>,
    #[serde(
        default,
        deserialize_with = "named::attempt_timeout",
        skip_serializing_if = "Option::is_none"
    )]
    attempt_timeout: Option<Limit>,
    #[serde(
        default,
        serialize_with = "humantime_serde::serialize",
        deserialize_with = "named::max_retry_after",
        skip_serializing_if = "Option::is_none"
    )]
    max_retry_after: Option<Duration>,
    #[serde(
        default,
        deserialize_with = "named::retry_unknown",
        skip_serializing_if = "Option::is_none"
    )]
    retry_unknown: Option<bool>,
    /// Keys as written (`"500"`, `"5xx"`, `"TIMEOUT"`); parsed and checked when built.
    #[serde(
        default,
        deserialize_with = "named::retry_caps",
        skip_serializing_if = "Option::is_none"
    )]
    retry_caps: Option<BTreeMap<String, u32>>,
}

/// Deserializers that name their field in errors: serde's own message for a wrong type
/// (`invalid type: floating point `2.5`, expected u32`) says what was wrong but not where, and
/// JSON errors carry only a line and column.
mod named {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, de::Error};

    use super::{Backoff, Jitter, Limit};

    fn plain<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
        T::deserialize(d).map(Some)
    }

    /// `msg` without a trailing " at line L column C": serde_json puts the position in the
    /// inner error and again in the one that carries it out.
    fn without_position(msg: &str) -> &str {
        let Some(at) = msg.rfind(" at line ") else {
            return msg;
        };
        let rest = &msg[at + " at line ".len()..];
        let positional = rest.split_once(" column ").is_some_and(|(line, col)| {
            !line.is_empty()
                && !col.is_empty()
                && line.bytes().chain(col.bytes()).all(|b| b.is_ascii_digit())
        });
        if positional { &msg[..at] } else { msg }
    }

    macro_rules! fields {
        ($($name:ident: $ty:ty => $inner:path;)*) => {$(
            pub(super) fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<$ty>, D::Error> {
                $inner(d).map_err(|e| {
                    let e = e.to_string();
                    D::Error::custom(format_args!(
                        concat!("{} (field `", stringify!($name), "`)"),
                        without_position(e.trim_end())
                    ))
                })
            }
        )*};
    }

    fields! {
        max_attempts: u32 => plain;
        max_retries: u32 => plain;
        backoff: Backoff => plain;
        multiplier: f64 => plain;
        base_delay: Duration => humantime_serde::deserialize;
        max_delay: Duration => humantime_serde::deserialize;
        jitter: Jitter => plain;
        max_elapsed: Limit => plain;
        attempt_timeout: Limit => plain;
        max_retry_after: Duration => humantime_serde::deserialize;
        retry_unknown: bool => plain;
        retry_caps: BTreeMap<String, u32> => plain;
    }
}

impl RetryPolicyBuilder {
    /// Attempts including the first; must be at least 1.
    ///
    /// ```
    /// let p = steadfast::RetryPolicy::builder().max_attempts(1).build().unwrap();
    /// assert_eq!(p.max_attempts(), 1);
    /// ```
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self.max_retries = None;
        self
    }

    /// Retries after the first attempt: `max_retries(n)` means `n + 1` attempts.
    ///
    /// ```
    /// let p = steadfast::RetryPolicy::builder().max_retries(3).build().unwrap();
    /// assert_eq!(p.max_attempts(), 4);
    /// ```
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = Some(n);
        self.max_attempts = None;
        self
    }

    /// The backoff strategy.
    ///
    /// ```
    /// let p = steadfast::RetryPolicy::builder().backoff(steadfast::Backoff::Constant).build().unwrap();
    /// assert_eq!(*p.backoff(), steadfast::Backoff::Constant);
    /// ```
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// A custom backoff: shorthand for `.backoff(Backoff::custom(f))`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = steadfast::RetryPolicy::builder()
    ///     .custom_backoff(|k| Duration::from_millis(50 * u64::from(k)))
    ///     .build()
    ///     .unwrap();
    /// assert!(matches!(p.backoff(), steadfast::Backoff::Custom(_)));
    /// ```
    pub fn custom_backoff(self, f: impl Fn(u32) -> Duration + Send + Sync + 'static) -> Self {
        self.backoff(Backoff::custom(f))
    }

    /// Growth factor of exponential backoff; finite and at least 1. Ignored by other strategies.
    ///
    /// ```
    /// let err = steadfast::RetryPolicy::builder().multiplier(0.5).build().unwrap_err();
    /// assert_eq!(err.field(), "multiplier");
    /// ```
    pub fn multiplier(mut self, m: f64) -> Self {
        self.multiplier = Some(m);
        self
    }

    /// The first retry's delay; must be positive for exponential, linear and constant backoff
    /// and for decorrelated jitter, and at most `max_delay`.
    ///
    /// ```
    /// let err = steadfast::RetryPolicy::builder().base_delay(std::time::Duration::ZERO).build().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid retry policy: base_delay must be > 0 for exponential backoff");
    /// ```
    pub fn base_delay(mut self, d: Duration) -> Self {
        self.base_delay = Some(d);
        self
    }

    /// The cap on any backoff delay, after jitter; must be at least `base_delay`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = steadfast::RetryPolicy::builder().max_delay(Duration::from_secs(30)).build().unwrap();
    /// assert_eq!(p.max_delay(), Duration::from_secs(30));
    /// ```
    pub fn max_delay(mut self, d: Duration) -> Self {
        self.max_delay = Some(d);
        self
    }

    /// The jitter strategy.
    ///
    /// ```
    /// let p = steadfast::RetryPolicy::builder().jitter(steadfast::Jitter::None).build().unwrap();
    /// assert_eq!(p.jitter(), steadfast::Jitter::None);
    /// ```
    pub fn jitter(mut self, j: Jitter) -> Self {
        self.jitter = Some(j);
        self
    }

    /// A wall-clock budget for the whole call (positive), or [`Limit::Unlimited`] to remove one
    /// set by a lower layer.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{Limit, RetryPolicy};
    /// let base = RetryPolicy::builder().max_elapsed(Duration::from_secs(10)).build().unwrap();
    /// let lifted = base.with_overrides(&RetryPolicy::builder().max_elapsed(Limit::Unlimited)).unwrap();
    /// assert_eq!(lifted.max_elapsed(), None);
    /// ```
    pub fn max_elapsed(mut self, limit: impl Into<Limit>) -> Self {
        self.max_elapsed = Some(limit.into());
        self
    }

    /// A limit on each attempt (positive), or [`Limit::Unlimited`].
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = steadfast::RetryPolicy::builder().attempt_timeout(Duration::from_secs(5)).build().unwrap();
    /// assert_eq!(p.attempt_timeout(), Some(Duration::from_secs(5)));
    /// ```
    pub fn attempt_timeout(mut self, limit: impl Into<Limit>) -> Self {
        self.attempt_timeout = Some(limit.into());
        self
    }

    /// The longest `Retry-After` honoured.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = steadfast::RetryPolicy::builder().max_retry_after(Duration::from_secs(5)).build().unwrap();
    /// assert_eq!(p.max_retry_after(), Duration::from_secs(5));
    /// ```
    pub fn max_retry_after(mut self, d: Duration) -> Self {
        self.max_retry_after = Some(d);
        self
    }

    /// Whether unrecognised failures are retried.
    ///
    /// ```
    /// let p = steadfast::RetryPolicy::builder().retry_unknown(false).build().unwrap();
    /// assert!(!p.retry_unknown());
    /// ```
    pub fn retry_unknown(mut self, yes: bool) -> Self {
        self.retry_unknown = Some(yes);
        self
    }

    /// At most `retries` retries after failures with this HTTP status (`500`), status class
    /// (`"5xx"`) or error code (`"TIMEOUT"`, or an [`ErrorCode`]); the next such failure ends
    /// the call ([`GiveUpReason::Exhausted`](crate::GiveUpReason::Exhausted)). `max_attempts`
    /// still bounds every call. Keys are checked when the policy is built.
    ///
    /// ```
    /// use steadfast::{ErrorCode, RetryPolicy};
    /// // The MCP retry guide: "HTTP 500: limit to 2 retries before treating as permanent".
    /// let p = RetryPolicy::builder()
    ///     .max_attempts(5)
    ///     .retry_cap(500, 2)
    ///     .retry_cap(ErrorCode::TIMEOUT, 1)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(p.retry_caps().len(), 2);
    /// let err = RetryPolicy::builder().retry_cap("50", 1).build().unwrap_err();
    /// assert_eq!(err.field(), "retry_caps");
    /// ```
    pub fn retry_cap(mut self, key: impl fmt::Display, retries: u32) -> Self {
        self.retry_caps
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), retries);
        self
    }

    /// Stacks `over` on top of `self`: every field `over` sets wins, the rest come from `self`.
    ///
    /// ```
    /// let a = steadfast::RetryPolicy::builder().max_attempts(5);
    /// let b = steadfast::RetryPolicy::builder().max_retries(1);
    /// assert_eq!(a.layer(&b).build().unwrap().max_attempts(), 2);
    /// ```
    pub fn layer(mut self, over: &RetryPolicyBuilder) -> Self {
        // The two spellings of the attempt count are one setting: whichever layer names
        // either replaces both below it.
        if over.max_attempts.is_some() || over.max_retries.is_some() {
            self.max_attempts = over.max_attempts;
            self.max_retries = over.max_retries;
        }
        macro_rules! take {
            ($($f:ident),*) => { $( if over.$f.is_some() { self.$f = over.$f.clone(); } )* };
        }
        take!(
            backoff,
            multiplier,
            base_delay,
            max_delay,
            jitter,
            max_elapsed,
            attempt_timeout,
            max_retry_after,
            retry_unknown
        );
        // Caps merge key by key: a tool's `"500" = 1` keeps the defaults' other caps.
        if let Some(over) = &over.retry_caps {
            let caps = self.retry_caps.get_or_insert_with(BTreeMap::new);
            caps.extend(over.iter().map(|(k, v)| (k.clone(), *v)));
        }
        self
    }

    /// Validates this layer on top of the built-in defaults.
    ///
    /// ```
    /// let err = steadfast::RetryPolicy::builder().max_attempts(0).build().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid retry policy: max_attempts must be >= 1 (got 0)");
    /// ```
    pub fn build(&self) -> Result<RetryPolicy, PolicyError> {
        self.build_on(&RetryPolicy::default())
    }

    /// Validates this layer on top of `base`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::RetryPolicy;
    /// let base = RetryPolicy::builder().max_delay(Duration::from_secs(3)).build().unwrap();
    /// let err = RetryPolicy::builder().base_delay(Duration::from_secs(5)).build_on(&base).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid retry policy: base_delay must be <= max_delay (5s > 3s)");
    /// ```
    pub fn build_on(&self, base: &RetryPolicy) -> Result<RetryPolicy, PolicyError> {
        if let (Some(a), Some(r)) = (self.max_attempts, self.max_retries) {
            return Err(PolicyError::new(
                "max_retries",
                format!(
                    "not be set together with max_attempts (got max_attempts = {a}, max_retries = {r}); max_retries = n means max_attempts = n + 1"
                ),
            ));
        }
        let merged = base.to_builder().layer(self);
        let max_attempts = match (merged.max_attempts, merged.max_retries) {
            (Some(n), _) => n,
            (None, Some(r)) => r.checked_add(1).ok_or_else(|| {
                PolicyError::new("max_retries", format!("be < {} (got {r})", u32::MAX))
            })?,
            (None, None) => base.max_attempts,
        };
        let policy = RetryPolicy {
            max_attempts,
            backoff: merged.backoff.unwrap_or_default(),
            multiplier: merged.multiplier.unwrap_or(base.multiplier),
            base_delay: merged.base_delay.unwrap_or(base.base_delay),
            max_delay: merged.max_delay.unwrap_or(base.max_delay),
            jitter: merged.jitter.unwrap_or(base.jitter),
            max_elapsed: merged.max_elapsed.and_then(Limit::get),
            attempt_timeout: merged.attempt_timeout.and_then(Limit::get),
            max_retry_after: merged.max_retry_after.unwrap_or(base.max_retry_after),
            retry_unknown: merged.retry_unknown.unwrap_or(base.retry_unknown),
            retry_caps: parse_caps(merged.retry_caps.as_ref())?,
        };
        validate(&policy)?;
        Ok(policy)
    }
}

fn parse_caps(caps: Option<&BTreeMap<String, u32>>) -> Result<Vec<(RetryCap, u32)>, PolicyError> {
    let mut parsed = Vec::new();
    for (key, retries) in caps.into_iter().flatten() {
        let cap = key
            .parse::<RetryCap>()
            .map_err(|constraint| PolicyError::new("retry_caps", constraint))?;
        parsed.push((cap, *retries));
    }
    parsed.sort_by_key(|(cap, _)| cap.specificity());
    Ok(parsed)
}

fn validate(p: &RetryPolicy) -> Result<(), PolicyError> {
    let fmt = |d: Duration| humantime::format_duration(d).to_string();
    if p.max_attempts < 1 {
        return Err(PolicyError::new(
            "max_attempts",
            format!("be >= 1 (got {})", p.max_attempts),
        ));
    }
    if !p.multiplier.is_finite() || p.multiplier < 1.0 {
        return Err(PolicyError::new(
            "multiplier",
            format!("be a finite number >= 1 (got {})", p.multiplier),
        ));
    }
    let needs_base = if p.backoff.uses_base_delay() {
        Some(format!("{:?} backoff", p.backoff).to_lowercase())
    } else if p.jitter == Jitter::Decorrelated && p.backoff != Backoff::None {
        Some("decorrelated jitter".to_owned())
    } else {
        None
    };
    if let Some(user) = needs_base
        && p.base_delay.is_zero()
    {
        return Err(PolicyError::new("base_delay", format!("be > 0 for {user}")));
    }
    if p.base_delay > p.max_delay {
        return Err(PolicyError::new(
            "base_delay",
            format!(
                "be <= max_delay ({} > {})",
                fmt(p.base_delay),
                fmt(p.max_delay)
            ),
        ));
    }
    if p.max_elapsed.is_some_and(|d| d.is_zero()) {
        return Err(PolicyError::new(
            "max_elapsed",
            "be > 0 (leave it unset, or \"none\", for no time budget)",
        ));
    }
    if p.attempt_timeout.is_some_and(|d| d.is_zero()) {
        return Err(PolicyError::new(
            "attempt_timeout",
            "be > 0 (leave it unset, or \"none\", for no per-attempt limit)",
        ));
    }
    Ok(())
}

impl TryFrom<RetryPolicyBuilder> for RetryPolicy {
    type Error = PolicyError;

    fn try_from(b: RetryPolicyBuilder) -> Result<Self, PolicyError> {
        b.build()
    }
}

impl From<RetryPolicy> for RetryPolicyBuilder {
    fn from(p: RetryPolicy) -> Self {
        p.to_builder()
    }
}

/// A policy or configuration was rejected when built: names the section, the field and the
/// constraint it broke.
///
/// ```
/// let err = steadfast::RetryPolicy::builder().multiplier(f64::NAN).build().unwrap_err();
/// assert_eq!(err.field(), "multiplier");
/// assert!(err.constraint().contains(">= 1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {section}: {field} must {constraint}")]
pub struct PolicyError {
    section: &'static str,
    field: &'static str,
    constraint: String,
}

impl PolicyError {
    fn new(field: &'static str, constraint: impl Into<String>) -> Self {
        Self::in_section("retry policy", field, constraint)
    }

    pub(crate) fn in_section(
        section: &'static str,
        field: &'static str,
        constraint: impl Into<String>,
    ) -> Self {
        Self {
            section,
            field,
            constraint: constraint.into(),
        }
    }

    /// What was being validated: `"retry policy"`, `"circuit breaker"`, `"retry budget"`…
    ///
    /// ```
    /// let e = steadfast::RetryPolicy::builder().max_attempts(0).build().unwrap_err();
    /// assert_eq!(e.section(), "retry policy");
    /// ```
    pub fn section(&self) -> &'static str {
        self.section
    }

    /// The offending field, as spelled in config files (`"base_delay"`).
    ///
    /// ```
    /// let e = steadfast::RetryPolicy::builder().max_attempts(0).build().unwrap_err();
    /// assert_eq!(e.field(), "max_attempts");
    /// ```
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// What the field must be, with the value found.
    ///
    /// ```
    /// let e = steadfast::RetryPolicy::builder().max_attempts(0).build().unwrap_err();
    /// assert_eq!(e.constraint(), "be >= 1 (got 0)");
    /// ```
    pub fn constraint(&self) -> &str {
        &self.constraint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn err(b: RetryPolicyBuilder) -> String {
        b.build().unwrap_err().to_string()
    }

    #[test]
    fn every_validation_message() {
        let b = RetryPolicy::builder;
        let rows: Vec<(RetryPolicyBuilder, &str)> = vec![
            (b().max_attempts(0), "max_attempts must be >= 1 (got 0)"),
            (
                b().max_retries(u32::MAX),
                "max_retries must be < 4294967295 (got 4294967295)",
            ),
            (
                b().multiplier(0.5),
                "multiplier must be a finite number >= 1 (got 0.5)",
            ),
            (
                b().multiplier(f64::INFINITY),
                "multiplier must be a finite number >= 1 (got inf)",
            ),
            (
                b().base_delay(MS(0)),
                "base_delay must be > 0 for exponential backoff",
            ),
            (
                b().backoff(Backoff::Linear).base_delay(MS(0)),
                "base_delay must be > 0 for linear backoff",
            ),
            (
                b().backoff(Backoff::Constant).base_delay(MS(0)),
                "base_delay must be > 0 for constant backoff",
            ),
            (
                b().custom_backoff(|_| MS(1))
                    .jitter(Jitter::Decorrelated)
                    .base_delay(MS(0)),
                "base_delay must be > 0 for decorrelated jitter",
            ),
            (
                b().base_delay(MS(5000)),
                "base_delay must be <= max_delay (5s > 3s)",
            ),
            (
                b().max_delay(MS(50)),
                "base_delay must be <= max_delay (100ms > 50ms)",
            ),
            (
                b().max_elapsed(MS(0)),
                "max_elapsed must be > 0 (leave it unset, or \"none\", for no time budget)",
            ),
            (
                b().attempt_timeout(MS(0)),
                "attempt_timeout must be > 0 (leave it unset, or \"none\", for no per-attempt limit)",
            ),
        ];
        for (builder, want) in rows {
            assert_eq!(err(builder), format!("invalid retry policy: {want}"));
        }
    }

    #[test]
    fn zero_base_is_fine_when_nothing_reads_it() {
        let p = RetryPolicy::builder()
            .backoff(Backoff::None)
            .base_delay(MS(0))
            .build()
            .unwrap();
        assert_eq!(p.base_delay(), MS(0));
    }

    #[test]
    fn both_attempt_spellings_in_one_layer_is_an_error() {
        let b: RetryPolicyBuilder = toml::from_str("max_attempts = 3\nmax_retries = 2").unwrap();
        assert_eq!(b.build().unwrap_err().field(), "max_retries");
    }

    #[test]
    fn layering_validates_after_merge() {
        // Cloudflare's example: baseDelayMs 5000 against a default maxDelayMs of 3000.
        let defaults = RetryPolicy::builder().max_attempts(10);
        let call = RetryPolicy::builder().base_delay(MS(5000));
        let e = defaults.clone().layer(&call).build().unwrap_err();
        assert_eq!(e.field(), "base_delay");
        // …and is accepted once the defaults raise the cap.
        let defaults = defaults.max_delay(MS(10_000));
        let p = defaults.layer(&call).build().unwrap();
        assert_eq!(
            (p.max_attempts(), p.base_delay(), p.max_delay()),
            (10, MS(5000), MS(10_000))
        );
    }

    #[test]
    fn unset_fields_fall_back_layer_by_layer() {
        let app = RetryPolicy::builder()
            .max_attempts(7)
            .jitter(Jitter::Equal)
            .max_elapsed(MS(9000));
        let app = app.build().unwrap();
        let p = app
            .with_overrides(&RetryPolicy::builder().max_attempts(2))
            .unwrap();
        assert_eq!(p.max_attempts(), 2);
        assert_eq!(p.jitter(), Jitter::Equal);
        assert_eq!(p.max_elapsed(), Some(MS(9000)));
        assert_eq!(p.base_delay(), RetryPolicy::default().base_delay());
    }

    #[test]
    fn toml_with_human_durations() {
        let p: RetryPolicy = toml::from_str(
            r#"
            max_retries = 4
            backoff = "linear"
            base_delay = "250ms"
            max_delay = "1m"
            jitter = "decorrelated"
            max_elapsed = "30s"
            attempt_timeout = "2s"
            max_retry_after = "10s"
            retry_unknown = false
            "#,
        )
        .unwrap();
        assert_eq!(p.max_attempts(), 5);
        assert_eq!(*p.backoff(), Backoff::Linear);
        assert_eq!(p.base_delay(), MS(250));
        assert_eq!(p.max_delay(), MS(60_000));
        assert_eq!(p.jitter(), Jitter::Decorrelated);
        assert_eq!(p.max_elapsed(), Some(MS(30_000)));
        assert_eq!(p.attempt_timeout(), Some(MS(2000)));
        assert_eq!(p.max_retry_after(), MS(10_000));
        assert!(!p.retry_unknown());
    }

    #[test]
    fn fixed_is_a_synonym_for_constant() {
        let p: RetryPolicy = toml::from_str("backoff = \"fixed\"").unwrap();
        assert_eq!(*p.backoff(), Backoff::Constant);
    }

    #[test]
    fn config_errors_name_the_field() {
        let e = toml::from_str::<RetryPolicy>("base_delay = \"5s\"").unwrap_err();
        assert!(
            e.to_string()
                .contains("base_delay must be <= max_delay (5s > 3s)"),
            "{e}"
        );
        let e = toml::from_str::<RetryPolicy>("max_atempts = 3").unwrap_err();
        assert!(e.to_string().contains("unknown field `max_atempts`"), "{e}");
        let e = toml::from_str::<RetryPolicy>("max_attempts = 2.5").unwrap_err();
        assert!(e.to_string().contains("max_attempts"), "{e}");
        let e = toml::from_str::<RetryPolicy>("base_delay = 250").unwrap_err();
        assert!(e.to_string().contains("base_delay"), "{e}");
        let e = toml::from_str::<RetryPolicy>("max_elapsed = \"soon\"").unwrap_err();
        assert!(e.to_string().contains("expected a duration"), "{e}");
        let e = toml::from_str::<RetryPolicy>("backoff = \"custom\"").unwrap_err();
        assert!(e.to_string().contains("unknown variant `custom`"), "{e}");
    }

    #[test]
    fn none_lifts_a_limit_from_a_lower_layer() {
        let base: RetryPolicy =
            toml::from_str("max_elapsed = \"10s\"\nattempt_timeout = \"1s\"").unwrap();
        let over: RetryPolicyBuilder = toml::from_str("max_elapsed = \"none\"").unwrap();
        let p = base.with_overrides(&over).unwrap();
        assert_eq!(
            (p.max_elapsed(), p.attempt_timeout()),
            (None, Some(MS(1000)))
        );
    }

    #[test]
    fn serde_round_trip() {
        let p = RetryPolicy::builder()
            .max_attempts(4)
            .backoff(Backoff::Linear)
            .max_elapsed(MS(1500))
            .build()
            .unwrap();
        let text = toml::to_string(&p).unwrap();
        assert!(text.contains("max_elapsed = \"1s 500ms\""), "{text}");
        assert_eq!(toml::from_str::<RetryPolicy>(&text).unwrap(), p);
    }

    #[test]
    fn max_delay_holds_after_every_jitter() {
        for jitter in [
            Jitter::None,
            Jitter::Full,
            Jitter::Equal,
            Jitter::Decorrelated,
        ] {
            let p = RetryPolicy::builder()
                .max_attempts(30)
                .base_delay(MS(100))
                .max_delay(MS(1000))
                .jitter(jitter)
                .build()
                .unwrap();
            let delays: Vec<_> = p.delays(Rng::with_seed(11)).collect();
            assert_eq!(delays.len(), 29);
            assert!(
                delays.iter().all(|d| *d <= MS(1000)),
                "{jitter:?}: {delays:?}"
            );
        }
    }
}
