//! How MCP failures map onto Steadfast's [`ErrorClass`].
//!
//! Three places a tool call can fail, each with its own vocabulary:
//! - the connection ([`ServiceError`]): a closed transport or a timed-out request passes, so it
//!   is retriable (and counts against a breaker);
//! - a JSON-RPC error response ([`ErrorData`]): the request itself was wrong (invalid params,
//!   unknown method or tool, unsupported protocol version, any code of the range MCP reserves
//!   for protocol conditions, -32020…-32099) and retrying it as is cannot help — except
//!   `-32603 internal error`, which says nothing about the request and is retried, and messages
//!   that carry their own status (`429`, `503`, …), which [`classify_message`] reads. The
//!   reserved range is permanent whatever its text says, and never a breaker failure;
//! - a tool result with `isError: true`: the tool ran and reported failure. Its text decides:
//!   [`classify_tool_result`] finds transient failures (429, 5xx, timeouts, connection resets,
//!   "temporarily unavailable", …); anything else is a business failure for the model to read.

use rmcp::ServiceError;
use rmcp::model::{CallToolResult, ErrorCode as RpcCode, ErrorData};
use steadfast::{ErrorClass, ErrorCode, ErrorKind, classify_message};

/// The class of a failed request to an MCP peer.
///
/// ```
/// use rmcp::ServiceError;
/// use steadfast::ErrorKind;
/// let class = steadfast_mcp::classify_service_error(&ServiceError::TransportClosed);
/// assert_eq!(class.kind, ErrorKind::Retriable);
/// let timeout = ServiceError::Timeout { timeout: std::time::Duration::from_secs(5) };
/// assert_eq!(steadfast_mcp::classify_service_error(&timeout).kind, ErrorKind::Timeout);
/// ```
pub fn classify_service_error(e: &ServiceError) -> ErrorClass {
    match e {
        ServiceError::McpError(data) => classify_error_data(data),
        ServiceError::TransportClosed => {
            ErrorClass::retriable(ErrorCode::NETWORK_ERROR).with_message("transport closed")
        }
        ServiceError::TransportSend(_) => {
            ErrorClass::retriable(ErrorCode::NETWORK_ERROR).with_message("transport send failed")
        }
        ServiceError::Timeout { .. } => ErrorClass::timeout().with_message("request timed out"),
        ServiceError::Cancelled { .. } => ErrorClass::cancelled(),
        _ => ErrorClass::unknown().with_message("MCP service error"),
    }
}

/// The class of a JSON-RPC error response.
///
/// ```
/// use rmcp::model::ErrorData;
/// use steadfast::ErrorKind;
/// let bad = ErrorData::invalid_params("missing field `city`", None);
/// assert_eq!(steadfast_mcp::classify_error_data(&bad).kind, ErrorKind::NonRetriable);
/// let busy = ErrorData::internal_error("upstream returned HTTP 503", None);
/// assert_eq!(steadfast_mcp::classify_error_data(&busy).status, Some(503));
/// ```
pub fn classify_error_data(e: &ErrorData) -> ErrorClass {
    let message = e.message.to_string();
    let by_text = classify_message(&message);
    let class = match e.code {
        RpcCode::INTERNAL_ERROR => {
            by_text.unwrap_or_else(|| ErrorClass::retriable(ErrorCode::SERVER_ERROR))
        }
        RpcCode::PARSE_ERROR => ErrorClass::non_retriable(ErrorCode::PARSE_ERROR),
        // MCP reserves -32020…-32099 for protocol conditions (a header mismatch -32020, a
        // missing client capability -32021, an unsupported protocol version -32022, URL
        // elicitation required, …): the same request fails the same way, whatever the text
        // says, and the server that said so is up — permanent, and no breaker failure.
        RpcCode(code) if (-32099..=-32020).contains(&code) => {
            ErrorClass::non_retriable(ErrorCode::CLIENT_ERROR).with_breaker_failure(false)
        }
        RpcCode::INVALID_REQUEST
        | RpcCode::METHOD_NOT_FOUND
        | RpcCode::INVALID_PARAMS
        | RpcCode::RESOURCE_NOT_FOUND => match by_text {
            // An explicit transient status in the text wins: some servers wrap 429s this way.
            Some(c) if c.kind.is_transient() => c,
            _ => ErrorClass::non_retriable(ErrorCode::CLIENT_ERROR),
        },
        _ => by_text.unwrap_or_else(ErrorClass::unknown),
    };
    class.with_message(message)
}

/// The text of a tool result: its text content blocks, joined by newlines.
///
/// ```
/// use rmcp::model::{CallToolResult, ContentBlock};
/// let r = CallToolResult::error(vec![ContentBlock::text("HTTP 503"), ContentBlock::text("retry later")]);
/// assert_eq!(steadfast_mcp::tool_result_text(&r), "HTTP 503\nretry later");
/// ```
pub fn tool_result_text(r: &CallToolResult) -> String {
    let mut out = String::new();
    for block in &r.content {
        if let Some(t) = block.as_text() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&t.text);
        }
    }
    out
}

/// For a result with `isError: true`, how its text classifies; `None` for a success.
/// Unrecognised text classifies as [`ErrorKind::NonRetriable`]: an error the tool reported in
/// words we cannot read is a business failure until proven otherwise.
///
/// ```
/// use rmcp::model::{CallToolResult, ContentBlock};
/// use steadfast::ErrorKind;
/// let busy = CallToolResult::error(vec![ContentBlock::text("service temporarily unavailable")]);
/// assert_eq!(steadfast_mcp::classify_tool_result(&busy).unwrap().kind, ErrorKind::Retriable);
/// let missing = CallToolResult::error(vec![ContentBlock::text("file not found: notes.txt")]);
/// assert_eq!(steadfast_mcp::classify_tool_result(&missing).unwrap().kind, ErrorKind::NonRetriable);
/// assert!(steadfast_mcp::classify_tool_result(&CallToolResult::success(vec![])).is_none());
/// ```
pub fn classify_tool_result(r: &CallToolResult) -> Option<ErrorClass> {
    if r.is_error != Some(true) {
        return None;
    }
    let text = tool_result_text(r);
    Some(match classify_message(&text) {
        Some(c) if c.kind != ErrorKind::Unknown => c,
        _ => ErrorClass::non_retriable(ErrorCode::CLIENT_ERROR),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    fn tool_error(text: &str) -> ErrorClass {
        classify_tool_result(&CallToolResult::error(vec![ContentBlock::text(text)])).unwrap()
    }

    #[test]
    fn transient_tool_texts_are_retriable() {
        for text in [
            "HTTP 503 Service Unavailable",
            "429 Too Many Requests",
            "connection reset by peer",
            "upstream timed out",
            "the service is temporarily unavailable",
            "502 Bad Gateway",
        ] {
            assert!(tool_error(text).kind.is_transient(), "{text}");
        }
    }

    #[test]
    fn business_tool_texts_are_not() {
        for text in [
            "file not found: /tmp/x",
            "invalid city name",
            "permission denied",
            "HTTP 404",
            "the order was already shipped",
        ] {
            assert!(!tool_error(text).kind.is_transient(), "{text}");
        }
    }

    #[test]
    fn json_rpc_codes() {
        let nf = ErrorData::new(RpcCode::METHOD_NOT_FOUND, "tool not found", None);
        assert!(!classify_error_data(&nf).kind.is_transient());
        let internal = ErrorData::internal_error("boom", None);
        assert!(classify_error_data(&internal).kind.is_transient());
        let reserved = ErrorData::new(RpcCode(-32042), "URL elicitation required", None);
        assert_eq!(classify_error_data(&reserved).kind, ErrorKind::NonRetriable);
        for code in [-32020, -32021, -32022, -32099] {
            // Even a text that reads transient does not make a reserved code retriable.
            let e = ErrorData::new(RpcCode(code), "HTTP 503 unsupported version", None);
            let class = classify_error_data(&e);
            assert_eq!(class.kind, ErrorKind::NonRetriable, "{code}");
            assert!(!class.counts_as_breaker_failure(), "{code}");
        }
        let below = ErrorData::new(RpcCode(-32100), "HTTP 503", None);
        assert!(classify_error_data(&below).kind.is_transient());
        let outside = ErrorData::new(RpcCode(-32000), "server exploded", None);
        assert_eq!(classify_error_data(&outside).kind, ErrorKind::Unknown);
        let wrapped = ErrorData::invalid_request("rate limited: 429", None);
        assert_eq!(classify_error_data(&wrapped).kind, ErrorKind::RateLimited);
    }
}
