//! Per-tool counters: what a health check shows and what an exporter scrapes.
//!
//! A [`ToolMetrics`] is attached to a [`Retry`](crate::Retry) with
//! [`Retry::metrics`](crate::Retry::metrics); the engine then counts every call, attempt,
//! retry and outcome into it directly — no hook slot is taken, so user hooks still work. Counts
//! are lock-free atomics: lifetime totals, plus a rolling five-minute view of the same events
//! (what a dashboard wants when the process has been up for weeks). A [`Metrics`] registry
//! hands out one `ToolMetrics` per name and takes a serializable [`MetricsSnapshot`] of all of
//! them — the content of a health-check tool.
//!
//! With the `metrics` feature, every count is also sent to the [`metrics`](https://docs.rs/metrics)
//! facade, labelled by tool, so any exporter (Prometheus, StatsD, …) can scrape it:
//! `steadfast_calls_total`, `steadfast_attempts_total`, `steadfast_retries_total`,
//! `steadfast_successes_after_retry_total`, `steadfast_failures_total{code}`,
//! `steadfast_give_ups_total{reason}` (a [`GiveUpReason`](crate::GiveUpReason)), and the gauge
//! `steadfast_breaker_state` (0 closed, 1 half-open, 2 open, 3 isolated).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::window::RollingCounter;
use crate::{BreakerStats, CircuitBreaker, LlmErrorCode};

/// Describes the retry engine's metrics to the installed `metrics` recorder (the `# HELP`
/// lines of a Prometheus scrape). Call it once, after installing the recorder.
#[cfg(feature = "metrics")]
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!(
        "steadfast_calls_total",
        "Calls finished (succeeded or gave up), by tool."
    );
    describe_counter!(
        "steadfast_attempts_total",
        "Attempts made by finished calls, by tool."
    );
    describe_counter!("steadfast_retries_total", "Retries scheduled, by tool.");
    describe_counter!(
        "steadfast_successes_after_retry_total",
        "Calls that succeeded after at least one retry, by tool."
    );
    describe_counter!(
        "steadfast_failures_total",
        "Calls that gave up, by tool and the error code the model is shown."
    );
    describe_counter!(
        "steadfast_give_ups_total",
        "Calls that gave up, by tool and why the engine stopped (exhausted, non_retriable, declined, time_budget, cancelled, circuit_open, budget_exhausted, concurrency_limit)."
    );
    describe_gauge!(
        "steadfast_breaker_state",
        "Circuit breaker state by tool: 0 closed, 1 half-open, 2 open, 3 isolated."
    );
}

/// The rolling view's span.
pub const ROLLING_WINDOW: Duration = Duration::from_secs(300);

const CODES: [LlmErrorCode; 9] = [
    LlmErrorCode::RateLimited,
    LlmErrorCode::ServiceUnavailable,
    LlmErrorCode::Timeout,
    LlmErrorCode::InvalidRequest,
    LlmErrorCode::UnknownError,
    LlmErrorCode::CircuitOpen,
    LlmErrorCode::Cancelled,
    LlmErrorCode::ToolCallLimit,
    LlmErrorCode::OutcomeUnknown,
];

fn code_index(code: LlmErrorCode) -> usize {
    // Exhaustive, so that a new code cannot be counted as another one.
    match code {
        LlmErrorCode::RateLimited => 0,
        LlmErrorCode::ServiceUnavailable => 1,
        LlmErrorCode::Timeout => 2,
        LlmErrorCode::InvalidRequest => 3,
        LlmErrorCode::UnknownError => 4,
        LlmErrorCode::CircuitOpen => 5,
        LlmErrorCode::Cancelled => 6,
        LlmErrorCode::ToolCallLimit => 7,
        LlmErrorCode::OutcomeUnknown => 8,
    }
}

struct Counters {
    name: Arc<str>,
    origin: Instant,
    calls: AtomicU64,
    attempts: AtomicU64,
    retries: AtomicU64,
    successes: AtomicU64,
    retried_calls: AtomicU64,
    successes_after_retry: AtomicU64,
    failures: [AtomicU64; CODES.len()],
    recent_calls: RollingCounter,
    recent_retries: RollingCounter,
    recent_failures: RollingCounter,
    recent_successes_after_retry: RollingCounter,
    breaker: OnceLock<CircuitBreaker>,
}

/// Counters for one tool or dependency. Cheap to clone (one `Arc`); all clones count into the
/// same place.
///
/// ```
/// use steadfast::{ErrorClass, Retry, RetryPolicy, ToolMetrics};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let m = ToolMetrics::new("search");
/// let retry = Retry::new(RetryPolicy::default()).metrics(m.clone());
/// let _ = retry.run(|n| async move { if n < 3 { Err(ErrorClass::from_status(503)) } else { Ok(()) } }).await;
/// let s = m.snapshot();
/// assert_eq!((s.calls, s.attempts, s.retries, s.successes_after_retry), (1, 3, 2, 1));
/// assert_eq!(s.retry_success_rate, Some(1.0));
/// # }
/// ```
#[derive(Clone)]
pub struct ToolMetrics {
    inner: Arc<Counters>,
}

impl std::fmt::Debug for ToolMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolMetrics")
            .field("name", &self.inner.name)
            .field("calls", &self.inner.calls.load(Ordering::Relaxed))
            .finish()
    }
}

impl ToolMetrics {
    /// Fresh counters for `name` (the label used in snapshots and by the `metrics` facade).
    ///
    /// See [`ToolMetrics`] for an example.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self {
            inner: Arc::new(Counters {
                name: name.into(),
                origin: Instant::now(),
                calls: AtomicU64::new(0),
                attempts: AtomicU64::new(0),
                retries: AtomicU64::new(0),
                successes: AtomicU64::new(0),
                retried_calls: AtomicU64::new(0),
                successes_after_retry: AtomicU64::new(0),
                failures: Default::default(),
                recent_calls: RollingCounter::new(ROLLING_WINDOW),
                recent_retries: RollingCounter::new(ROLLING_WINDOW),
                recent_failures: RollingCounter::new(ROLLING_WINDOW),
                recent_successes_after_retry: RollingCounter::new(ROLLING_WINDOW),
                breaker: OnceLock::new(),
            }),
        }
    }

    /// The label these counters report under.
    ///
    /// ```
    /// assert_eq!(steadfast::ToolMetrics::new("db").name(), "db");
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Reports `breaker`'s state and rejections in snapshots (and, with the `metrics` feature,
    /// as a gauge). The first breaker attached wins; later calls are ignored.
    ///
    /// ```
    /// use steadfast::{BreakerState, CircuitBreaker, ToolMetrics};
    /// let m = ToolMetrics::new("db");
    /// let b = CircuitBreaker::new(Default::default());
    /// m.attach_breaker(&b);
    /// b.isolate();
    /// assert_eq!(m.snapshot().breaker.unwrap().state, BreakerState::Isolated);
    /// ```
    pub fn attach_breaker(&self, breaker: &CircuitBreaker) {
        let first = self.inner.breaker.set(breaker.clone()).is_ok();
        #[cfg(not(feature = "metrics"))]
        let _ = first;
        #[cfg(feature = "metrics")]
        if first {
            let name = self.inner.name.clone();
            let gauge = move |state: crate::BreakerState| {
                let value = match state {
                    crate::BreakerState::Closed => 0.0,
                    crate::BreakerState::HalfOpen => 1.0,
                    crate::BreakerState::Open => 2.0,
                    crate::BreakerState::Isolated => 3.0,
                };
                metrics::gauge!("steadfast_breaker_state", "tool" => name.to_string()).set(value);
            };
            gauge(breaker.state());
            breaker.subscribe(move |ev| match ev {
                crate::BreakerEvent::Opened { .. } => gauge(crate::BreakerState::Open),
                crate::BreakerEvent::HalfOpened => gauge(crate::BreakerState::HalfOpen),
                crate::BreakerEvent::Closed => gauge(crate::BreakerState::Closed),
                crate::BreakerEvent::Isolated => gauge(crate::BreakerState::Isolated),
                _ => {}
            });
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.inner.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub(crate) fn record_retry(&self) {
        let c = &*self.inner;
        c.retries.fetch_add(1, Ordering::Relaxed);
        c.recent_retries.add(self.now(), 1);
        self.facade("steadfast_retries_total", 1);
    }

    pub(crate) fn record_success(&self, attempts: u32) {
        let c = &*self.inner;
        let now = self.now();
        self.count_call(now, attempts);
        c.successes.fetch_add(1, Ordering::Relaxed);
        if attempts > 1 {
            c.successes_after_retry.fetch_add(1, Ordering::Relaxed);
            c.recent_successes_after_retry.add(now, 1);
            self.facade("steadfast_successes_after_retry_total", 1);
        }
    }

    pub(crate) fn record_failure(
        &self,
        attempts: u32,
        code: LlmErrorCode,
        reason: crate::GiveUpReason,
    ) {
        let c = &*self.inner;
        let now = self.now();
        self.count_call(now, attempts);
        c.failures[code_index(code)].fetch_add(1, Ordering::Relaxed);
        c.recent_failures.add(now, 1);
        #[cfg(feature = "metrics")]
        {
            metrics::counter!("steadfast_failures_total", "tool" => self.inner.name.to_string(), "code" => code.as_str())
                .increment(1);
            // Why the engine stopped (a spent retry budget, an open breaker, the time budget…),
            // which the code the model sees does not always tell.
            metrics::counter!("steadfast_give_ups_total", "tool" => self.inner.name.to_string(), "reason" => reason.as_str())
                .increment(1);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = reason;
    }

    fn count_call(&self, now: u64, attempts: u32) {
        let c = &*self.inner;
        c.calls.fetch_add(1, Ordering::Relaxed);
        c.attempts.fetch_add(u64::from(attempts), Ordering::Relaxed);
        if attempts > 1 {
            c.retried_calls.fetch_add(1, Ordering::Relaxed);
        }
        c.recent_calls.add(now, 1);
        self.facade("steadfast_calls_total", 1);
        self.facade("steadfast_attempts_total", u64::from(attempts));
    }

    #[allow(unused_variables)]
    fn facade(&self, name: &'static str, n: u64) {
        #[cfg(feature = "metrics")]
        metrics::counter!(name, "tool" => self.inner.name.clone()).increment(n);
    }

    /// The counts now.
    ///
    /// See [`ToolMetrics`] for an example.
    pub fn snapshot(&self) -> ToolSnapshot {
        let c = &*self.inner;
        let now = self.now();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let retried = load(&c.retried_calls);
        let after = load(&c.successes_after_retry);
        ToolSnapshot {
            calls: load(&c.calls),
            attempts: load(&c.attempts),
            retries: load(&c.retries),
            successes: load(&c.successes),
            successes_after_retry: after,
            retry_success_rate: (retried > 0).then(|| after as f64 / retried as f64),
            failures: CODES
                .iter()
                .zip(&c.failures)
                .filter_map(|(code, n)| Some((*code, load(n))).filter(|(_, n)| *n > 0))
                .collect(),
            breaker: c.breaker.get().map(CircuitBreaker::stats),
            last_5m: WindowSnapshot {
                calls: c.recent_calls.sum(now),
                retries: c.recent_retries.sum(now),
                failures: c.recent_failures.sum(now),
                successes_after_retry: c.recent_successes_after_retry.sum(now),
            },
        }
    }
}

/// One tool's counts; see [`ToolMetrics::snapshot`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct ToolSnapshot {
    /// Calls finished (succeeded or gave up).
    pub calls: u64,
    /// Attempts made by those calls.
    pub attempts: u64,
    /// Retries scheduled (a call that succeeds on attempt 3 made 2).
    pub retries: u64,
    /// Calls that succeeded.
    pub successes: u64,
    /// Calls that succeeded after at least one retry: failures the retries absorbed.
    pub successes_after_retry: u64,
    /// Of the calls that retried, the share that succeeded; `None` before any retried.
    pub retry_success_rate: Option<f64>,
    /// Calls that gave up, by the code the model was (or would be) shown.
    pub failures: BTreeMap<LlmErrorCode, u64>,
    /// The attached breaker, if any.
    pub breaker: Option<BreakerStats>,
    /// The same events over the last five minutes.
    pub last_5m: WindowSnapshot,
}

/// Counts over the rolling window ([`ROLLING_WINDOW`]), which forgets in 30-second steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct WindowSnapshot {
    /// Calls finished.
    pub calls: u64,
    /// Retries scheduled.
    pub retries: u64,
    /// Calls that gave up.
    pub failures: u64,
    /// Calls that succeeded after a retry.
    pub successes_after_retry: u64,
}

/// A registry of [`ToolMetrics`] by name. Cloning shares the registry.
///
/// ```
/// let metrics = steadfast::Metrics::new();
/// let a = metrics.tool("search");
/// assert_eq!(metrics.tool("search").name(), a.name());
/// let json = serde_json::to_value(metrics.snapshot()).unwrap();
/// assert_eq!(json["tools"]["search"]["calls"], 0);
/// ```
#[derive(Clone, Default)]
pub struct Metrics {
    tools: Arc<Mutex<BTreeMap<String, ToolMetrics>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("tools", &self.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Metrics {
    /// An empty registry.
    ///
    /// See [`Metrics`] for an example.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ToolMetrics>> {
        self.tools.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counters for `name`, created on first use.
    ///
    /// See [`Metrics`] for an example.
    pub fn tool(&self, name: &str) -> ToolMetrics {
        let mut tools = self.lock();
        // Looked up on every call: no key allocation when the tool is known.
        if let Some(m) = tools.get(name) {
            return m.clone();
        }
        tools
            .entry(name.to_owned())
            .or_insert_with(|| ToolMetrics::new(name))
            .clone()
    }

    /// Every tool's counts, by name.
    ///
    /// See [`Metrics`] for an example.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            tools: self
                .lock()
                .iter()
                .map(|(k, m)| (k.clone(), m.snapshot()))
                .collect(),
        }
    }
}

/// All tools' counts; see [`Metrics::snapshot`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Counts by tool name.
    pub tools: BTreeMap<String, ToolSnapshot>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_counted_under_itself() {
        for code in CODES {
            assert_eq!(CODES[code_index(code)], code);
        }
        let m = ToolMetrics::new("t");
        m.record_failure(
            1,
            LlmErrorCode::OutcomeUnknown,
            crate::GiveUpReason::Declined,
        );
        let s = m.snapshot();
        assert_eq!(s.failures.get(&LlmErrorCode::OutcomeUnknown), Some(&1));
        assert_eq!(s.failures.len(), 1, "{:?}", s.failures);
    }
}
