//! Step 4 of a call: what the client is answered, and the call's latency metric.
//!
//! A failure the gateway judged (timeouts, a lost connection, an open breaker, retries spent)
//! is answered as an `isError` result a model can read (`LlmError`). An upstream's JSON-RPC
//! error that says the request itself was wrong keeps its class: the client gets a JSON-RPC
//! error with the upstream's code, as it would direct (hosts act on the class, e.g. "unknown
//! tool"), its message and data through the sanitizer.

use std::time::Duration;

use serde_json::Value;
use steadfast::LlmError;
use steadfast_mcp::llm_error_result;

use super::Context;
use super::attempt::Answer;
use super::limits::Terms;
use super::resolve::Resolved;
use crate::config::OnLimit;
use crate::wire::jsonrpc;

/// What the engine's answer does not say about a failed call.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Failed<'a> {
    /// The last attempt's upstream JSON-RPC error object (raw JSON), if it answered with one.
    pub(crate) upstream_error: Option<&'a str>,
}

/// The line answering `ctx`'s request with `outcome`, a call limit's refusal as `on_limit`
/// says (`None` if the client cancelled it), after recording how long the call took.
pub(crate) fn answer(
    ctx: &Context<'_>,
    on_limit: OnLimit,
    call: &Resolved<'_>,
    terms: &Terms,
    took: Duration,
    outcome: Result<Answer, LlmError>,
    failed: Failed<'_>,
) -> Option<Vec<u8>> {
    // Labelled by name only for tools the upstream lists (the entry of an unlisted name is the
    // shared one, labelled `unlisted`): made-up names cannot grow the metric's label set.
    let label = metrics::SharedString::from(terms.entry.label.clone());
    metrics::histogram!("steadfast_tool_call_duration_seconds", "tool" => label)
        .record(took.as_secs_f64());
    if ctx.cancel.is_cancelled() {
        return None;
    }
    // The upstream said the request was wrong: answered as it said it (a call limit that
    // refused a later attempt is the call's own answer).
    if let Err(llm) = &outcome
        && llm.code != steadfast::LlmErrorCode::ToolCallLimit
        && let Some(error) = failed.upstream_error.and_then(protocol_error)
    {
        return Some(jsonrpc::raw_error_response(ctx.id, &error));
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

/// An upstream's JSON-RPC error object (raw) as the client gets it when its class is kept: one
/// that says the request was wrong (`classify_error_data` calls it permanent: parse error,
/// invalid request, method not found, invalid params, resource not found, the range MCP
/// reserves for protocol conditions), with its code, its message and data sanitized. `None`
/// for an error that may pass (internal error, a text carrying 429 or 5xx, unknown codes): the
/// engine retried it, and the model-safe result says how the call ended.
fn protocol_error(raw: &str) -> Option<String> {
    let data: rmcp::model::ErrorData = serde_json::from_str(raw).ok()?;
    let class = steadfast_mcp::classify_error_data(&data);
    if class.kind != steadfast::ErrorKind::NonRetriable {
        return None;
    }
    let mut error = serde_json::json!({
        "code": data.code.0,
        "message": steadfast::sanitize(&data.message),
    });
    if let Some(mut d) = data.data.filter(|d| !d.is_null()) {
        crate::wire::sanitize::sanitize_value(&mut d);
        error["data"] = d;
    }
    Some(Value::to_string(&error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstream_protocol_error_keeps_its_code_sanitized() {
        let raw = r#"{"code":-32602,"message":"Unknown tool: nope (api_key=sk-live-abcdefghijklmnop1234)","data":{"password":"hunter2","field":"name"}}"#;
        let e: Value = serde_json::from_str(&protocol_error(raw).unwrap()).unwrap();
        assert_eq!(e["code"], -32602);
        let message = e["message"].as_str().unwrap();
        assert!(message.starts_with("Unknown tool: nope"), "{e}");
        assert!(!message.contains("sk-live"), "sanitized: {e}");
        assert_eq!(e["data"]["field"], "name");
        assert_ne!(e["data"]["password"], "hunter2", "sanitized: {e}");
        for code in [-32700, -32600, -32601, -32002, -32020, -32042, -32099] {
            let raw = format!(r#"{{"code":{code},"message":"no"}}"#);
            let e: Value = serde_json::from_str(&protocol_error(&raw).unwrap()).unwrap();
            assert_eq!(e["code"], code);
            assert!(e.get("data").is_none(), "{e}");
        }
    }

    #[test]
    fn errors_that_may_pass_are_the_calls_to_judge() {
        for raw in [
            r#"{"code":-32603,"message":"internal error"}"#,
            r#"{"code":-32602,"message":"HTTP 503 Service Unavailable"}"#,
            r#"{"code":-32000,"message":"server exploded"}"#,
            "not json",
        ] {
            assert_eq!(protocol_error(raw), None, "{raw}");
        }
    }
}
