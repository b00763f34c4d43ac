//! Step 4 of a call: what the client is answered, and the call's latency metric.

use std::time::Duration;

use steadfast::LlmError;
use steadfast_mcp::llm_error_result;

use super::Context;
use super::attempt::Answer;
use super::limits::Terms;
use super::resolve::Resolved;
use crate::config::OnLimit;
use crate::wire::jsonrpc;

/// The line answering `ctx`'s request with `outcome`, a call limit's refusal as `on_limit`
/// says (`None` if the client cancelled it), after recording how long the call took.
pub(crate) fn answer(
    ctx: &Context<'_>,
    on_limit: OnLimit,
    call: &Resolved<'_>,
    terms: &Terms,
    took: Duration,
    outcome: Result<Answer, LlmError>,
) -> Option<Vec<u8>> {
    // Labelled by name only for tools the upstream lists (the entry of an unlisted name is the
    // shared one, labelled `unlisted`): made-up names cannot grow the metric's label set.
    let label = metrics::SharedString::from(terms.entry.label.clone());
    metrics::histogram!("steadfast_tool_call_duration_seconds", "tool" => label)
        .record(took.as_secs_f64());
    if ctx.cancel.is_cancelled() {
        return None;
    }
    let result = match outcome {
        Ok(a) if a.is_error => crate::wire::sanitize::sanitize_error_result(&a.raw),
        Ok(a) => a.raw,
        Err(llm)
            if llm.code == steadfast::LlmErrorCode::ToolCallLimit
                && on_limit == OnLimit::JsonrpcError =>
        {
            return Some(jsonrpc::error_response(
                ctx.id,
                jsonrpc::code::CALL_LIMIT,
                &llm.message,
            ));
        }
        Err(mut llm) => {
            call.route.upstream.explain_down(&mut llm);
            // rmcp writes the 2026 `resultType`; a relay adds nothing the server's own
            // results would not have.
            let mut v = serde_json::to_value(llm_error_result(&llm)).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.remove("resultType");
            }
            v.to_string()
        }
    };
    Some(jsonrpc::result_response(ctx.id, &result))
}
