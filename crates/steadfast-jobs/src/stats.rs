//! What the jobs crate reports to the `metrics` facade, and the counts behind its gauge.

use std::time::Duration;

/// Describes this crate's metrics to the installed recorder (the `# HELP` lines of a
/// Prometheus scrape). Call it once, after installing the recorder.
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!("steadfast_jobs_queued_total", "Jobs queued, by handler.");
    describe_counter!(
        "steadfast_jobs_succeeded_total",
        "Jobs that succeeded, by handler."
    );
    describe_counter!(
        "steadfast_jobs_retried_total",
        "Failed job attempts whose retry was stored, by handler."
    );
    describe_counter!(
        "steadfast_jobs_dead_total",
        "Jobs that became dead letters in this process, by handler."
    );
    describe_counter!(
        "steadfast_jobs_deferred_total",
        "Job attempts put back without spending the attempt, by handler and why (busy, breaker_open, released, stale)."
    );
    describe_gauge!(
        "steadfast_jobs_running",
        "Job attempts running in this process, by handler."
    );
    describe_gauge!(
        "steadfast_jobs_stored",
        "The job store's jobs by state (the whole store: aggregate with max across processes); retrying is the part of available waiting for a retry."
    );
    describe_histogram!(
        "steadfast_jobs_queue_lag_seconds",
        metrics::Unit::Seconds,
        "How long a due job waited before a worker claimed it, by handler."
    );
}

/// Job counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Stats {
    /// Waiting (queued, scheduled or in backoff).
    pub available: u64,
    /// Of those, waiting for a retry.
    pub retrying: u64,
    /// Claimed by a worker.
    pub running: u64,
    /// Succeeded.
    pub done: u64,
    /// Dead letters.
    pub dead: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// How long the oldest due job has waited past its run time.
    pub queue_lag: Option<Duration>,
}

impl Stats {
    /// Sets the `steadfast_jobs_stored{state}` gauge: the whole store's jobs by state (so
    /// every process sharing a store reports the same numbers: aggregate with `max`, not
    /// `sum`). `retrying` is the part of `available` waiting for a retry.
    pub(crate) fn export(&self) {
        for (state, n) in [
            ("available", self.available),
            ("retrying", self.retrying),
            ("running", self.running),
            ("done", self.done),
            ("dead", self.dead),
            ("cancelled", self.cancelled),
        ] {
            metrics::gauge!("steadfast_jobs_stored", "state" => state).set(n as f64);
        }
    }
}
