//! What a caller can say about one job or one schedule.

use std::time::Duration;

use chrono::{DateTime, Utc};
use steadfast::RetryPolicyBuilder;

/// Per-job options: the retry layer on top of the handler's and worker's defaults, dedup and
/// ordering.
///
/// ```
/// use steadfast::RetryPolicy;
/// use steadfast_jobs::JobOptions;
/// let opts = JobOptions::new()
///     .retry(RetryPolicy::builder().max_attempts(5))
///     .unique_key("invoice-42")
///     .ordering_key("customer-7");
/// assert_eq!(opts.unique_key.as_deref(), Some("invoice-42"));
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct JobOptions {
    /// Retry settings layered last (they win over handler and worker defaults).
    pub retry: RetryPolicyBuilder,
    /// While a job with this key is queued or running, queueing another returns its id.
    pub unique_key: Option<String>,
    /// Jobs with the same key run one at a time, in the order they were queued; a retrying
    /// head holds back only its own key.
    pub ordering_key: Option<String>,
    /// Higher runs first (-1000 to 1000; the handler's default, else 0). Each step is worth
    /// the store's aging step of waiting ([`JobsBuilder::priority_aging`](crate::JobsBuilder::priority_aging)),
    /// so lower priorities are delayed, never starved.
    pub priority: Option<i32>,
    /// The key (tenant, provider, tool) whose limits and pause apply
    /// ([`Jobs::set_limits`](crate::Jobs::set_limits)); the handler's default when `None`.
    pub limit_key: Option<String>,
    /// The W3C `traceparent` of the context queueing the job, stored with it so each attempt's
    /// span is linked to that trace; when `None`, the
    /// [`TracePropagation`](crate::TracePropagation)'s current context, if one is set.
    /// Checked when queued (the error names `traceparent`).
    pub traceparent: Option<String>,
    /// The W3C `tracestate` going with [`traceparent`](Self::traceparent) (ignored without it).
    pub tracestate: Option<String>,
}

impl JobOptions {
    /// No overrides.
    pub fn new() -> Self {
        Self::default()
    }

    /// Retry settings for this job, layered on the handler's and worker's defaults.
    pub fn retry(mut self, layer: RetryPolicyBuilder) -> Self {
        self.retry = layer;
        self
    }

    /// Deduplicates while a job with this key is queued or running.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// FIFO per key.
    pub fn ordering_key(mut self, key: impl Into<String>) -> Self {
        self.ordering_key = Some(key.into());
        self
    }

    /// Priority: higher runs first (-1000 to 1000).
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = Some(p);
        self
    }

    /// Runs under this key's limits.
    pub fn limit_key(mut self, key: impl Into<String>) -> Self {
        self.limit_key = Some(key.into());
        self
    }

    /// Stores the enqueuer's W3C trace context with the job (`tracestate` may be `None`).
    ///
    /// ```
    /// use steadfast_jobs::JobOptions;
    /// let opts = JobOptions::new()
    ///     .traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Some("vendor=1"));
    /// assert_eq!(opts.tracestate.as_deref(), Some("vendor=1"));
    /// ```
    pub fn traceparent(mut self, traceparent: impl Into<String>, tracestate: Option<&str>) -> Self {
        self.traceparent = Some(traceparent.into());
        self.tracestate = tracestate.map(str::to_owned);
        self
    }
}

/// When a scheduled job runs.
///
/// ```
/// use std::time::Duration;
/// use steadfast_jobs::When;
/// let _ = When::delay(Duration::from_secs(30));
/// let _ = When::at("2030-01-01T09:00:00Z".parse().unwrap());
/// let _ = When::cron("*/5 * * * *");          // every five minutes (UTC)
/// let _ = When::cron("0 0 9 * * MON-FRI").tz("Europe/Paris"); // 6 fields: seconds first
/// let _ = When::every(Duration::from_secs(3600));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum When {
    /// Once, after this delay.
    Delay(Duration),
    /// Once, at this UTC time.
    At(DateTime<Utc>),
    /// On a cron expression (5 fields, or 6 with seconds first), in `tz` (UTC when `None`;
    /// named zones need the `tz` feature).
    Cron {
        /// The expression.
        expr: String,
        /// An IANA time zone name.
        tz: Option<String>,
    },
    /// Every interval, from now.
    Every(Duration),
}

impl When {
    /// Once, after `d`.
    pub fn delay(d: Duration) -> Self {
        Self::Delay(d)
    }

    /// Once, at `at` (UTC).
    pub fn at(at: DateTime<Utc>) -> Self {
        Self::At(at)
    }

    /// On a cron expression, in UTC.
    pub fn cron(expr: impl Into<String>) -> Self {
        Self::Cron {
            expr: expr.into(),
            tz: None,
        }
    }

    /// Every `d`.
    pub fn every(d: Duration) -> Self {
        Self::Every(d)
    }

    /// Sets the time zone of a cron expression (ignored by the other forms).
    pub fn tz(self, zone: impl Into<String>) -> Self {
        match self {
            Self::Cron { expr, .. } => Self::Cron {
                expr,
                tz: Some(zone.into()),
            },
            other => other,
        }
    }
}

/// What a recurring schedule does with fire times missed while no worker ran it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CatchUp {
    /// Drop missed runs; resume at the next fire time.
    Skip,
    /// Run once for all the missed fire times, then resume.
    #[default]
    One,
    /// Run each missed fire time in order, at most `max_catch_up` of them (the latest).
    All,
}

impl CatchUp {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::One => "one",
            Self::All => "all",
        }
    }

    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "skip" => Self::Skip,
            "all" => Self::All,
            _ => Self::One,
        }
    }
}

/// Options of a scheduled job.
///
/// ```
/// use steadfast_jobs::{CatchUp, ScheduleOptions};
/// let opts = ScheduleOptions::new().key("nightly-report").catch_up(CatchUp::Skip);
/// assert_eq!(opts.catch_up, CatchUp::Skip);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ScheduleOptions {
    /// Retry settings of each run, layered on the handler's and worker's defaults.
    pub retry: RetryPolicyBuilder,
    /// Names a recurring schedule: scheduling the same key again keeps the existing schedule
    /// (so a process can declare its schedules on every start).
    pub key: Option<String>,
    /// Missed fire times (default [`CatchUp::One`]).
    pub catch_up: CatchUp,
    /// The most missed runs [`CatchUp::All`] replays (default 100).
    pub max_catch_up: u32,
    /// Let a run start while the previous run of the schedule is still going (default false).
    pub allow_overlap: bool,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        Self {
            retry: RetryPolicyBuilder::default(),
            key: None,
            catch_up: CatchUp::One,
            max_catch_up: 100,
            allow_overlap: false,
        }
    }
}

impl ScheduleOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Retry settings of each run.
    pub fn retry(mut self, layer: RetryPolicyBuilder) -> Self {
        self.retry = layer;
        self
    }

    /// Names the schedule, so declaring it again is a no-op.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// What to do with missed fire times.
    pub fn catch_up(mut self, c: CatchUp) -> Self {
        self.catch_up = c;
        self
    }

    /// The bound of [`CatchUp::All`].
    pub fn max_catch_up(mut self, n: u32) -> Self {
        self.max_catch_up = n;
        self
    }

    /// Allows overlapping runs.
    pub fn allow_overlap(mut self, yes: bool) -> Self {
        self.allow_overlap = yes;
        self
    }
}
