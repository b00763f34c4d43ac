//! One upstream attempt, for live and durable calls alike: a fresh request (new id, new
//! progress token) on whatever connection is live, its idle timeout started again on every
//! progress message, a hard cap per attempt; a dropped attempt cancels its upstream request.
//! The reply is mapped to what steadfast-mcp's `ToolCall` judges (`CallFailure`).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResult, ErrorData};
use serde_json::Value;
use steadfast_mcp::{CallFailure, RetryOnIsError};
use tokio::time::Instant;

use super::span;
use crate::upstream::{Downstream, Params, ProgressRoute, Reply, Upstream, UpstreamError};
use crate::wire::outbound::Outbound;

/// A raw result and whether it says `isError: true`.
pub(crate) struct Answer {
    pub(crate) raw: String,
    pub(crate) is_error: bool,
}

/// Where what the server relates to an attempt goes (none of it for a durable call: no client
/// is attached to it).
#[derive(Default)]
pub(crate) struct Related<'a> {
    /// Progress for the client's token (its activity restarts the idle timeout).
    pub(crate) progress: Option<ProgressRoute>,
    /// The client whose request this is: requests the server sends while it works go to it.
    pub(crate) origin: Option<&'a dyn Downstream>,
    /// The client request's own stream (an HTTP POST answered with server-sent events).
    pub(crate) stream: Option<Arc<Outbound>>,
    /// Where the attempt leaves the upstream's JSON-RPC error object (raw), when it answered
    /// with one (cleared by any other outcome): the call's answer keeps its class
    /// (`outcome.rs`). Errors the gateway makes itself (a reply too large, an HTTP status)
    /// never land here.
    pub(crate) upstream_error: Option<&'a std::sync::Mutex<Option<String>>>,
}

/// An attempt's time bounds, from the tool's policy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// Without a reply or progress for this long, the attempt fails.
    pub(crate) idle: Option<Duration>,
    /// The attempt fails after this long whatever it relays.
    pub(crate) max: Option<Duration>,
}

impl Timeouts {
    /// The bounds `policy` sets.
    pub(crate) fn of(policy: &steadfast_mcp::ToolPolicy) -> Self {
        Self {
            idle: policy.idle_timeout(),
            max: policy.attempt_max,
        }
    }
}

/// Sends `params` to `upstream` once as a `tools/call`; the answer, or why the attempt failed.
pub(crate) async fn send(
    upstream: &Arc<Upstream>,
    params: Params<'_>,
    related: Related<'_>,
    bounds: Timeouts,
) -> Result<Answer, CallFailure> {
    if let Some(cell) = related.upstream_error {
        *cell.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
    let link = upstream.link().await.map_err(CallFailure::NotSent)?;
    let activity = related.progress.as_ref().map(|r| r.activity.clone());
    let error_cell = related.upstream_error;
    let (guard, mut rx) = upstream.call_related(
        &link,
        "tools/call",
        Some(params),
        related.progress,
        related.origin,
        related.stream,
    );
    let started = Instant::now();
    let mut idle_deadline = bounds.idle.map(|d| started + d);
    let hard_deadline = bounds.max.map(|d| started + d);
    let reply = loop {
        let progressed = async {
            match &activity {
                Some(a) => a.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = &mut rx => break r.unwrap_or(Reply::Lost("the request was dropped".to_owned())),
            _ = progressed => {
                idle_deadline = bounds.idle.map(|d| Instant::now() + d);
            }
            _ = sleep_until(idle_deadline) => return Err(timed_out(bounds.idle)),
            _ = sleep_until(hard_deadline) => return Err(timed_out(bounds.max)),
        }
    };
    guard.finish();
    if let (Some(cell), Reply::Error(raw)) = (error_cell, &reply) {
        *cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(raw.clone());
    }
    into_answer(reply, upstream.settings().max_message_size)
}

/// An answer as the tool's policy judges it: an `isError` result the policy retries is a
/// failure, any other answer stands.
pub(crate) fn judge(mode: RetryOnIsError, answer: Answer) -> Result<Answer, CallFailure> {
    if !answer.is_error {
        return Ok(answer);
    }
    let Ok(result) = serde_json::from_str::<CallToolResult>(&answer.raw) else {
        return Ok(answer);
    };
    match mode.judge(&result) {
        Some(class) => Err(CallFailure::Tool(Box::new(result), class)),
        None => {
            // A tool error that stands ends the call failed: the span the judge runs in (the
            // call's `execute_tool`) says so, as it does for the proxy's own failures.
            if steadfast::trace::listening() {
                steadfast::trace::record_error(&tracing::Span::current(), "tool_error");
            }
            Ok(answer)
        }
    }
}

/// Runs an attempt in its CLIENT span `client` and records how it ended, with
/// `mcp.client.operation.duration`.
pub(crate) async fn in_span(
    client: tracing::Span,
    attempt: impl std::future::Future<Output = Result<Answer, CallFailure>>,
) -> Result<Answer, CallFailure> {
    use tracing::Instrument;
    let started = Instant::now();
    let result = attempt.instrument(client.clone()).await;
    let code;
    let outcome = match &result {
        Ok(a) if a.is_error => span::Outcome::ToolError,
        Ok(_) => span::Outcome::Ok,
        Err(CallFailure::Rpc(e)) => span::Outcome::Rpc(i64::from(e.code.0)),
        Err(CallFailure::Tool(..)) => span::Outcome::ToolError,
        Err(CallFailure::NotSent(_)) => span::Outcome::Other("not_sent"),
        Err(CallFailure::Lost(rmcp::ServiceError::Timeout { .. })) => {
            span::Outcome::Other("timeout")
        }
        Err(CallFailure::Lost(_)) => span::Outcome::Other("connection_lost"),
        Err(CallFailure::Limited(_)) => span::Outcome::Other("call_limit"),
        Err(_) => span::Outcome::Other("_OTHER"),
    };
    span::end(&client, outcome);
    let error = match outcome {
        span::Outcome::Ok => None,
        span::Outcome::ToolError => Some("tool_error"),
        span::Outcome::Rpc(c) => {
            code = c.to_string();
            Some(code.as_str())
        }
        span::Outcome::Other(e) => Some(e),
    };
    span::record_duration(
        span::Side::Client,
        "tools/call",
        None,
        error,
        started.elapsed(),
    );
    result
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn timed_out(after: Option<Duration>) -> CallFailure {
    CallFailure::Lost(rmcp::ServiceError::Timeout {
        timeout: after.unwrap_or_default(),
    })
}

fn into_answer(reply: Reply, max_size: usize) -> Result<Answer, CallFailure> {
    match reply {
        Reply::Result(raw) => {
            // Every result is searched: the searcher is built once, not per result.
            static IS_ERROR: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
                std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"isError\""));
            let is_error = IS_ERROR.find(raw.as_bytes()).is_some()
                && serde_json::from_str::<Value>(&raw)
                    .ok()
                    .and_then(|v| v.get("isError").and_then(Value::as_bool))
                    .unwrap_or(false);
            Ok(Answer { raw, is_error })
        }
        other => Err(failure(other.into_result().err(), max_size)),
    }
}

/// What a call's engine makes of an upstream's error: the server's own error is judged by its
/// code; a request that never left is safe to send again; a lost one or a timeout may have
/// run.
fn failure(error: Option<UpstreamError>, max_size: usize) -> CallFailure {
    match error {
        Some(UpstreamError::Rpc(raw)) => {
            let data: ErrorData = serde_json::from_str(&raw).unwrap_or_else(|_| {
                ErrorData::internal_error("the upstream sent an unreadable error", None)
            });
            CallFailure::Rpc(data)
        }
        Some(UpstreamError::NotSent(why)) => CallFailure::NotSent(why),
        Some(UpstreamError::Lost(_)) | None => {
            CallFailure::Lost(rmcp::ServiceError::TransportClosed)
        }
        Some(UpstreamError::Timeout(after)) => timed_out(Some(after)),
        Some(UpstreamError::TooLarge(len)) => CallFailure::Rpc(ErrorData::invalid_request(
            format!(
                "the tool's reply ({len} bytes) exceeds max_message_size ({max_size} bytes); it cannot be relayed"
            ),
            None,
        )),
        Some(UpstreamError::Http(status, body)) => CallFailure::Rpc(ErrorData::internal_error(
            format!(
                "HTTP {status}: {}",
                body.chars().take(300).collect::<String>()
            ),
            None,
        )),
        Some(e @ UpstreamError::Invalid(_)) => {
            CallFailure::Rpc(ErrorData::internal_error(e.to_string(), None))
        }
    }
}
