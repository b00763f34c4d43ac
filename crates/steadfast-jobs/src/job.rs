//! A stored job as callers see it.

use chrono::{DateTime, Utc};

use crate::clock::from_ms;

/// A job's id: the row's key, stable for the job's whole life (retries and requeues included).
pub type JobId = i64;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum JobState {
    /// Waiting for its `run_at` (queued, scheduled, or in backoff between attempts).
    Available,
    /// Claimed by a worker, under a lease.
    Running,
    /// Succeeded.
    Done,
    /// Failed permanently or exhausted its attempts: a dead letter.
    Dead,
    /// Cancelled before it ran.
    Cancelled,
}

impl JobState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Available => "available",
            Self::Running => "running",
            Self::Done => "done",
            Self::Dead => "dead",
            Self::Cancelled => "cancelled",
        }
    }

    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "running" => Self::Running,
            "done" => Self::Done,
            "dead" => Self::Dead,
            "cancelled" => Self::Cancelled,
            _ => Self::Available,
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A snapshot of a stored job. Its `last_error` was sanitized before it was stored.
#[derive(Debug, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct Job {
    /// The id.
    pub id: JobId,
    /// The handler's name.
    pub handler: String,
    /// The payload, as JSON.
    pub payload: serde_json::Value,
    /// The state.
    pub state: JobState,
    /// Attempts started so far (the first included).
    pub attempts: u32,
    /// The most attempts its policy allows.
    pub max_attempts: u32,
    /// When it runs next (for a job in backoff, when the retry is due).
    pub run_at: DateTime<Utc>,
    /// When its first attempt started.
    pub first_attempt_at: Option<DateTime<Utc>>,
    /// The last failure, sanitized.
    pub last_error: Option<String>,
    /// The last failure's code (`SERVER_ERROR`, `RATE_LIMITED`, `LEASE_EXPIRED`…).
    pub last_error_code: Option<String>,
    /// The dedup key it was queued with.
    pub unique_key: Option<String>,
    /// Its FIFO key.
    pub ordering_key: Option<String>,
    /// The recurring schedule it belongs to.
    pub schedule_id: Option<i64>,
    /// The schedule's fire time this job runs for.
    pub fire_at: Option<DateTime<Utc>>,
    /// When it was queued.
    pub created_at: DateTime<Utc>,
    /// When it was last changed.
    pub updated_at: DateTime<Utc>,
    /// When it reached done, dead or cancelled.
    pub finished_at: Option<DateTime<Utc>>,
    /// Its priority (higher runs first; aging keeps lower ones from starving).
    pub priority: i32,
    /// The key whose limits it runs under.
    pub limit_key: Option<String>,
    /// The W3C `traceparent` of the context that queued it (see
    /// [`JobOptions::traceparent`](crate::JobOptions::traceparent)): continue or link that
    /// trace from whatever finishes the job.
    pub traceparent: Option<String>,
    /// The `tracestate` stored with [`traceparent`](Self::traceparent).
    pub tracestate: Option<String>,
}

impl Job {
    /// The key a handler uses to make its side effect exactly-once: derived from the id only,
    /// so it is the same for every attempt and every worker.
    ///
    /// ```
    /// assert_eq!(steadfast_jobs::idempotency_key_for(42), "steadfast-job-42");
    /// ```
    pub fn idempotency_key(&self) -> String {
        idempotency_key_for(self.id)
    }
}

/// The idempotency key of job `id`.
pub fn idempotency_key_for(id: JobId) -> String {
    format!("steadfast-job-{id}")
}

pub(crate) fn opt_time(ms: Option<i64>) -> Option<DateTime<Utc>> {
    ms.map(from_ms)
}
