//! Durable tool calls as the admin console shows them (the newest tasks of every client, with
//! their status as `tasks/get` would say it) and its one action, cancelling a task the way
//! `tasks/cancel` does (wherever its attempt runs). Reads the task table; writes nothing else.

use chrono::{DateTime, Utc};

use crate::tasks::Durable;
use crate::tasks::methods::{Cancel, try_cancel};

/// A durable tool call as the console shows it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TaskView {
    /// The task id.
    pub id: String,
    /// The tool, as the client named it (sanitized).
    pub tool: String,
    /// `working`, `completed`, `failed` or `cancelled`.
    pub status: &'static str,
    /// Attempts sent to the upstream so far.
    pub attempts: i64,
    /// When the next attempt runs, while it waits for its retry.
    pub next_attempt: Option<DateTime<Utc>>,
    /// What the status says (the last failure, a result's error), sanitized.
    pub message: Option<String>,
    /// When the task was created.
    pub created: DateTime<Utc>,
    /// When it last changed.
    pub updated: DateTime<Utc>,
}

/// What cancelling a task from the console did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cancelled {
    /// Cancelled (an attempt in flight was dropped, its upstream request cancelled).
    Done,
    /// No such task (or it expired).
    NotFound,
    /// It had ended already, with this status.
    AlreadyEnded(&'static str),
}

fn at(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// The `limit` newest unexpired tasks of every client, newest first.
pub(crate) async fn recent(d: &Durable, limit: i64) -> Result<Vec<TaskView>, String> {
    let now = d.shared.now();
    let rows = d
        .store()
        .recent(now, limit)
        .await
        .map_err(|e| steadfast::sanitize(&e.to_string()).into_owned())?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let view = d
            .view(row)
            .await
            .map_err(|e| steadfast::sanitize(&e.to_string()).into_owned())?;
        let next_attempt = match (view.is_terminal(), row.job_id) {
            (false, Some(job)) => d
                .jobs
                .get(job)
                .await
                .ok()
                .flatten()
                .filter(|j| j.state == steadfast_jobs::JobState::Available && j.attempts > 0)
                .map(|j| j.run_at),
            _ => None,
        };
        let message = view.message.or_else(|| row.last_failure.clone());
        out.push(TaskView {
            id: row.task_id.clone(),
            tool: steadfast::sanitize(&row.tool).into_owned(),
            status: view.status,
            attempts: row.sent,
            next_attempt,
            message: message.map(|m| steadfast::sanitize(&m).into_owned()),
            created: at(row.created_at),
            updated: at(row.updated_at),
        });
    }
    Ok(out)
}

/// Cancels task `id` as `tasks/cancel` would, whoever created it.
pub(crate) async fn cancel(d: &Durable, id: &str) -> Result<Cancelled, String> {
    let row = d
        .store()
        .get(id, d.shared.now())
        .await
        .map_err(|e| steadfast::sanitize(&e.to_string()).into_owned())?;
    let Some(row) = row else {
        return Ok(Cancelled::NotFound);
    };
    Ok(match try_cancel(d, row).await? {
        Cancel::Done(_) => Cancelled::Done,
        Cancel::AlreadyEnded(s) => Cancelled::AlreadyEnded(s),
        Cancel::JustEnded => Cancelled::AlreadyEnded("finished"),
    })
}

/// The task store's kind (`postgres` or `sqlite`): replicas on one PostgreSQL share tasks.
pub(crate) fn backend(d: &Durable) -> &'static str {
    match d.jobs.store().backend() {
        steadfast_jobs::Backend::Postgres => "postgres",
        _ => "sqlite",
    }
}
