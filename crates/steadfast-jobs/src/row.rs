//! The raw job row: the columns a query selects, their decoding, and what a row is read as
//! (the public [`Job`], its stored trace context, the span of one of its attempts).

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::JobsError;
use crate::clock::from_ms;
use crate::job::{Job, JobState, opt_time};
use crate::trace::TraceContext;

pub(crate) const JOB_COLS: &str = "id, handler, payload, policy, state, attempts, run_at, \
    first_attempt_at, last_delay_ms, lease_until, locked_by, last_error, last_error_code, unique_key, \
    ordering_key, schedule_id, fire_at, created_at, updated_at, finished_at, priority, limit_key, \
    traceparent, tracestate";

/// A raw job row.
#[derive(Debug, Clone)]
pub(crate) struct JobRow {
    pub id: i64,
    pub handler: String,
    pub payload: String,
    pub policy: String,
    pub state: String,
    pub attempts: i64,
    pub run_at: i64,
    pub first_attempt_at: Option<i64>,
    pub last_delay_ms: i64,
    pub last_error: Option<String>,
    pub last_error_code: Option<String>,
    pub unique_key: Option<String>,
    pub ordering_key: Option<String>,
    pub schedule_id: Option<i64>,
    pub fire_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
    pub priority: i64,
    pub limit_key: Option<String>,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

impl JobRow {
    pub(crate) fn from_row(r: &AnyRow) -> Result<Self, JobsError> {
        Ok(Self {
            id: r.try_get("id")?,
            handler: r.try_get("handler")?,
            payload: r.try_get("payload")?,
            policy: r.try_get("policy")?,
            state: r.try_get("state")?,
            attempts: r.try_get("attempts")?,
            run_at: r.try_get("run_at")?,
            first_attempt_at: r.try_get("first_attempt_at")?,
            last_delay_ms: r.try_get("last_delay_ms")?,
            last_error: r.try_get("last_error")?,
            last_error_code: r.try_get("last_error_code")?,
            unique_key: r.try_get("unique_key")?,
            ordering_key: r.try_get("ordering_key")?,
            schedule_id: r.try_get("schedule_id")?,
            fire_at: r.try_get("fire_at")?,
            created_at: r.try_get("created_at")?,
            updated_at: r.try_get("updated_at")?,
            finished_at: r.try_get("finished_at")?,
            priority: r.try_get("priority")?,
            limit_key: r.try_get("limit_key")?,
            traceparent: r.try_get("traceparent")?,
            tracestate: r.try_get("tracestate")?,
        })
    }

    pub(crate) fn to_job(&self) -> Job {
        let max_attempts = serde_json::from_str::<steadfast::RetryPolicy>(&self.policy)
            .map(|p| p.max_attempts())
            .unwrap_or(0);
        Job {
            id: self.id,
            handler: self.handler.clone(),
            payload: serde_json::from_str(&self.payload).unwrap_or(serde_json::Value::Null),
            state: JobState::parse(&self.state),
            attempts: u32::try_from(self.attempts).unwrap_or(0),
            max_attempts,
            run_at: from_ms(self.run_at),
            first_attempt_at: opt_time(self.first_attempt_at),
            last_error: self.last_error.clone(),
            last_error_code: self.last_error_code.clone(),
            unique_key: self.unique_key.clone(),
            ordering_key: self.ordering_key.clone(),
            schedule_id: self.schedule_id,
            fire_at: opt_time(self.fire_at),
            created_at: from_ms(self.created_at),
            updated_at: from_ms(self.updated_at),
            finished_at: opt_time(self.finished_at),
            priority: i32::try_from(self.priority).unwrap_or(0),
            limit_key: self.limit_key.clone(),
            traceparent: self.traceparent.clone(),
            tracestate: self.tracestate.clone(),
        }
    }

    /// The stored trace context, when it is one (it was checked when queued; a row written
    /// by hand that fails the check is ignored rather than failing the attempt).
    pub(crate) fn trace(&self) -> Option<TraceContext> {
        let tp = self.traceparent.as_deref()?;
        TraceContext::parse(tp, self.tracestate.as_deref()).ok()
    }
}

/// The span of one attempt of `row` (disabled, and nothing formatted, unless a subscriber
/// wants `INFO` from this crate).
pub(crate) fn attempt_span(row: &JobRow) -> tracing::Span {
    tracing::info_span!(
        "job.attempt",
        otel.name = %format_args!("process {}", row.handler),
        otel.kind = "consumer",
        messaging.system = "steadfast",
        messaging.operation.name = "process",
        messaging.operation.type = "process",
        messaging.destination.name = %row.handler,
        messaging.message.id = %row.id,
        steadfast.job.attempt = row.attempts,
        steadfast.job.outcome = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}
