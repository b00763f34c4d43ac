//! One upstream attempt of a durable call: the live call's attempt (fresh request id, idle
//! and hard timeouts, a dropped attempt cancels its upstream request), with its outcome
//! mapped by the live call's own code (`tool_call::into_answer`, `RetryOnIsError::judge`).

use rmcp::model::CallToolResult;
use serde_json::Value;
use steadfast_mcp::{CallFailure, ToolPolicy};
use tokio::time::Instant;

use super::Target;
use crate::session::tool_call::{Answer, into_answer, sleep_until, timed_out};
use crate::upstream::{Params, Reply};

/// [`once`] in a CLIENT span `tools/call {tool}` (when someone listens), child of the trace
/// context stored with the task (the SERVER span of the request that created it, kept in the
/// row's params) and linked to it: every attempt of a durable call, before and after a restart,
/// is in the trace of the request that started it.
pub(crate) async fn traced(
    target: &Target,
    params: &Value,
    policy: &ToolPolicy,
    task_id: &str,
    attempt: u32,
) -> Result<Answer, CallFailure> {
    if !steadfast::trace::listening() {
        return once(target, params, policy).await;
    }
    let span = crate::session::span::client(
        "tools/call",
        crate::session::span::Target::Tool(&target.name),
        &target.upstream.name,
        target.upstream.is_http(),
        attempt,
    );
    span.record("steadfast.task.id", task_id);
    if let Some(stored) = crate::wire::trace_context::from_params(params) {
        crate::wire::trace_context::set_remote_parent(&span, &stored);
        crate::wire::trace_context::link(&span, &stored);
    }
    crate::session::tool_call::attempt_in(span, once(target, params, policy)).await
}

/// Sends `params` once; the answer, or why the attempt failed (an `isError` result the policy
/// retries is a failure, as in a live call).
pub(crate) async fn once(
    target: &Target,
    params: &Value,
    policy: &ToolPolicy,
) -> Result<Answer, CallFailure> {
    let link = target.upstream.link().await.map_err(CallFailure::NotSent)?;
    let (guard, rx) = target
        .upstream
        .call(&link, "tools/call", Some(Params::Value(params)), None);
    let started = Instant::now();
    let idle = policy.idle_timeout();
    let max = policy.attempt_max;
    // No progress route (no client is attached to a durable call), so the idle timeout is
    // the time to the answer.
    let reply = tokio::select! {
        r = rx => r.unwrap_or(Reply::Lost("the request was dropped".to_owned())),
        _ = sleep_until(idle.map(|d| started + d)) => return Err(timed_out(idle)),
        _ = sleep_until(max.map(|d| started + d)) => return Err(timed_out(max)),
    };
    guard.finish();
    let max_size = target.upstream.settings().max_message_size;
    let answer = into_answer(reply, max_size)?;
    if !answer.is_error {
        return Ok(answer);
    }
    let Ok(result) = serde_json::from_str::<CallToolResult>(&answer.raw) else {
        return Ok(answer);
    };
    match policy.retry_on_is_error.judge(&result) {
        Some(class) => Err(CallFailure::Tool(Box::new(result), class)),
        None => Ok(answer),
    }
}
