//! One upstream attempt of a durable call: the live call's attempt (`call::attempt::send`:
//! fresh request id, idle and hard timeouts, a dropped attempt cancels its upstream request),
//! judged by the live call's own rule (`call::attempt::judge`).

use serde_json::Value;
use steadfast_mcp::{CallFailure, ToolPolicy};

use super::Destination;
use crate::call::Answer;
use crate::call::attempt::{self, Related, Timeouts};
use crate::call::span;
use crate::upstream::Params;

/// [`once`] in a CLIENT span `tools/call {tool}` (when someone listens), child of the trace
/// context stored with the task (the SERVER span of the request that created it, kept in the
/// row's params) and linked to it: every attempt of a durable call, before and after a restart,
/// is in the trace of the request that started it.
pub(crate) async fn traced(
    to: &Destination,
    params: &Value,
    policy: &ToolPolicy,
    task_id: &str,
    n: u32,
) -> Result<Answer, CallFailure> {
    if !steadfast::trace::listening() {
        return once(to, params, policy).await;
    }
    let client = span::client(
        "tools/call",
        span::Subject::Tool(&to.name),
        &to.upstream.name,
        to.upstream.is_http(),
        n,
    );
    client.record("steadfast.task.id", task_id);
    if let Some(stored) = crate::wire::trace_context::from_params(params) {
        crate::wire::trace_context::set_remote_parent(&client, &stored);
        crate::wire::trace_context::link(&client, &stored);
    }
    attempt::in_span(client, once(to, params, policy)).await
}

/// Sends `params` once; the answer, or why the attempt failed (an `isError` result the policy
/// retries is a failure, as in a live call). No client is attached to a durable call: nothing
/// the server relates to it is relayed, so the idle timeout is the time to the answer.
pub(crate) async fn once(
    to: &Destination,
    params: &Value,
    policy: &ToolPolicy,
) -> Result<Answer, CallFailure> {
    let answer = attempt::send(
        &to.upstream,
        Params::Value(params),
        Related::default(),
        Timeouts::of(policy),
    )
    .await?;
    attempt::judge(policy.retry_on_is_error, answer)
}
