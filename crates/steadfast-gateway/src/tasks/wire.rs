//! What clients see of a task (MCP 2025-11-25): its `Task` object, derived from the task row
//! and the state of the job that runs it.

use serde_json::{Value, json};
use steadfast::{LlmError, LlmErrorCode};
use steadfast_jobs::{Job, JobState};

use super::store::{TaskRow, status};

/// A task's status as a client sees it, and its result once it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    pub status: &'static str,
    pub message: Option<String>,
    /// The `CallToolResult` for `tasks/result` (terminal tasks only).
    pub result: Option<String>,
}

impl View {
    pub(crate) fn is_terminal(&self) -> bool {
        status::is_terminal(self.status)
    }
}

/// The status of `row`, given its job (`None`: not queued yet, or purged). The row wins when
/// it is terminal; otherwise the job says whether the call is still being tried.
pub(crate) fn derive(row: &TaskRow, job: Option<&Job>) -> View {
    let stored = |s: &'static str| View {
        status: s,
        message: row.result.as_deref().and_then(message_of),
        result: row.result.clone(),
    };
    match row.status.as_str() {
        status::COMPLETED => return stored(status::COMPLETED),
        status::FAILED => return stored(status::FAILED),
        status::CANCELLED => {
            return View {
                status: status::CANCELLED,
                message: cancelled_message(row),
                result: row.result.clone(),
            };
        }
        _ => {}
    }
    let failed = |result: String| View {
        status: status::FAILED,
        message: message_of(&result),
        result: Some(result),
    };
    let Some(job) = job else {
        if row.job_id.is_none() {
            return working(Some("queued".to_owned()));
        }
        return failed(llm_result(&unknown(&row.tool, "the task's job is gone")));
    };
    match job.state {
        // Gave up: the last attempt's failure is the answer (written before the attempt was
        // sent, so a call lost with its worker ends as "outcome unknown").
        JobState::Dead => failed(
            row.last_failure
                .clone()
                .unwrap_or_else(|| llm_result(&unknown(&row.tool, "the call failed"))),
        ),
        JobState::Cancelled => View {
            status: status::CANCELLED,
            message: Some("cancelled".to_owned()),
            result: Some(llm_result(&cancelled(&row.tool))),
        },
        JobState::Done => failed(llm_result(&unknown(
            &row.tool,
            "the call ended without a recorded result",
        ))),
        JobState::Running => working(Some(format!("attempt {} running", job.attempts))),
        _ if job.attempts == 0 => working(Some("queued".to_owned())),
        _ => working(Some(format!(
            "attempt {} of {} failed ({}); retry scheduled",
            job.attempts,
            job.max_attempts,
            last_code(row, job)
        ))),
    }
}

/// What a cancelled task's status message says. A cancel stores a `CANCELLED` result (which
/// says whether an attempt was in flight); when that attempt's answer arrived afterwards, the
/// result is the answer, and the message says the call ran — the task stays `cancelled`, as the
/// protocol requires, without reporting an action that took effect as one that never ran.
fn cancelled_message(row: &TaskRow) -> Option<String> {
    let result = row.result.as_deref()?;
    if code_of(result) == Some(LlmErrorCode::Cancelled.as_str()) {
        return message_of(result);
    }
    let failed = serde_json::from_str::<Value>(result)
        .ok()
        .and_then(|v| v.get("isError").and_then(Value::as_bool))
        == Some(true);
    let n = row.answered;
    Some(if failed {
        let why = message_of(result)
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        format!("cancelled while attempt {n} was running, which then failed{why}")
    } else {
        format!(
            "cancelled while attempt {n} was running, which then completed: the call took \
             effect (tasks/result has its result)"
        )
    })
}

/// The code of the last failed attempt, as the live call would name it: the `LlmError` the
/// attempt recorded (`SERVICE_UNAVAILABLE` for a 503), not the job store's class of it
/// (`SERVER_ERROR`). A job attempt that recorded nothing (a spent retry budget, a lost lease,
/// a store error) is named by the job's own code.
fn last_code<'a>(row: &'a TaskRow, job: &'a Job) -> &'a str {
    let recorded = row.answered == i64::from(job.attempts);
    row.last_failure
        .as_deref()
        .filter(|_| recorded)
        .and_then(code_of)
        .or(job.last_error_code.as_deref())
        .unwrap_or("UNKNOWN")
}

/// The `code` of an `LlmError` result, as one of the fixed code strings.
fn code_of(result: &str) -> Option<&'static str> {
    let v: Value = serde_json::from_str(result).ok()?;
    let code = v.pointer("/structuredContent/code")?;
    serde_json::from_value::<LlmErrorCode>(code.clone())
        .ok()
        .map(LlmErrorCode::as_str)
}

fn working(message: Option<String>) -> View {
    View {
        status: status::WORKING,
        message,
        result: None,
    }
}

/// The `Task` object.
pub(crate) fn task_json(row: &TaskRow, view: &View, poll_ms: u64) -> Value {
    let mut t = json!({
        "taskId": row.task_id,
        "status": view.status,
        "createdAt": iso(row.created_at),
        "lastUpdatedAt": iso(row.updated_at),
        "ttl": row.ttl_ms,
        "pollInterval": poll_ms,
    });
    if let Some(m) = &view.message {
        t["statusMessage"] = Value::String(steadfast::sanitize(m).into_owned());
    }
    t
}

/// A result with the related-task `_meta` the spec asks `tasks/result` to carry.
pub(crate) fn with_related_task(result: &str, task_id: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(result) else {
        return result.to_owned();
    };
    if let Some(o) = v.as_object_mut() {
        let meta = o.entry("_meta").or_insert_with(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            m.insert(
                "io.modelcontextprotocol/related-task".to_owned(),
                json!({ "taskId": task_id }),
            );
        }
    }
    v.to_string()
}

/// An `LlmError` as the `isError` result a live call answers with (no 2026 `resultType`, as
/// in `tool_call`).
pub(crate) fn llm_result(e: &LlmError) -> String {
    let mut v = serde_json::to_value(steadfast_mcp::llm_error_result(e)).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("resultType");
    }
    v.to_string()
}

pub(crate) fn unknown(tool: &str, message: &str) -> LlmError {
    let mut e = LlmError::new(LlmErrorCode::UnknownError).with_tool(tool);
    e.message = message.to_owned();
    e
}

/// A call sent and never answered, to a tool that may not be replayed: the live call's
/// `OUTCOME_UNKNOWN`.
pub(crate) fn outcome_unknown(tool: &str) -> LlmError {
    LlmError::new(LlmErrorCode::OutcomeUnknown).with_tool(tool)
}

pub(crate) fn cancelled(tool: &str) -> LlmError {
    LlmError::new(LlmErrorCode::Cancelled).with_tool(tool)
}

/// A task cancelled while no attempt of it was running: nothing of it is in progress upstream.
pub(crate) fn cancelled_idle(tool: &str) -> LlmError {
    let mut e = cancelled(tool);
    e.message = "The call was cancelled while no attempt of it was running".to_owned();
    e
}

/// A task cancelled while an attempt was in flight: the upstream request is cancelled, but the
/// upstream may have acted on it before the cancel reached it.
pub(crate) fn cancelled_in_flight(tool: &str) -> LlmError {
    let mut e = cancelled(tool);
    e.message = "The call was cancelled while an attempt was in flight; the upstream was told to \
                 stop, but it may have acted before the cancel reached it"
        .to_owned();
    e.suggestion = "Check whether the action took effect before calling the tool again".to_owned();
    e
}

/// A short status message for a terminal result: the `LlmError`'s code and message, if it is
/// one (`OUTCOME_UNKNOWN: The outcome of this call is unknown…`), as the live call names them.
fn message_of(result: &str) -> Option<String> {
    let v: Value = serde_json::from_str(result).ok()?;
    if v.get("isError").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let message = v.pointer("/structuredContent/message")?.as_str()?;
    Some(
        match v.pointer("/structuredContent/code").and_then(Value::as_str) {
            Some(code) => format!("{code}: {message}"),
            None => message.to_owned(),
        },
    )
}

/// RFC 3339 UTC with milliseconds.
pub(crate) fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> TaskRow {
        TaskRow {
            task_id: "t1".into(),
            owner: "stdio".into(),
            job_id: Some(1),
            tool: "charge".into(),
            params: "{}".into(),
            replay: false,
            status: status::WORKING.into(),
            result: None,
            last_failure: None,
            sent: 0,
            answered: 0,
            ttl_ms: 60_000,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn a_terminal_row_wins_and_a_missing_job_fails_the_task() {
        let mut r = row();
        // Not queued yet: working. Queued, and its job gone (purged): failed, not stuck.
        r.job_id = None;
        assert_eq!(derive(&r, None).status, "working");
        r.job_id = Some(1);
        assert_eq!(derive(&r, None).status, "failed");
        r.last_failure = Some(llm_result(&unknown("charge", "outcome unknown")));
        let t = task_json(&r, &derive(&r, None), 500);
        assert_eq!(
            (t["ttl"].as_i64(), t["pollInterval"].as_i64()),
            (Some(60_000), Some(500))
        );
        assert_eq!(t["createdAt"], "1970-01-01T00:00:00.000Z");
        r.status = status::COMPLETED.into();
        r.result = Some(r#"{"content":[]}"#.into());
        let v = derive(&r, None);
        assert_eq!(
            (v.status, v.result.as_deref()),
            ("completed", Some(r#"{"content":[]}"#))
        );
        // Compared as values: key order depends on serde_json's `preserve_order`, which a
        // workspace build turns on (rig-core enables it).
        let tagged: serde_json::Value =
            serde_json::from_str(&with_related_task(r#"{"content":[]}"#, "t1")).unwrap();
        assert_eq!(
            tagged,
            serde_json::json!({"_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}}, "content": []})
        );
    }
}
