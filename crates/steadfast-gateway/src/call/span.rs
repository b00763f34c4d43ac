//! The gateway's spans, per the OpenTelemetry MCP semantic conventions (`docs/gen-ai/mcp.md`,
//! status Development): a SERVER span per client request (`session/span.rs` makes those) and
//! a CLIENT span per upstream attempt, its child (made here, for live and durable calls).
//!
//! Through `tracing` like the core's `execute_tool` spans (`tracing-opentelemetry` reads
//! `otel.name`, `otel.kind` and `otel.status_code`), at `INFO` under the `steadfast_gateway`
//! target. Built only when [`steadfast::trace::listening`] says someone may want them: the
//! untraced call path pays one atomic load per span site and formats nothing.

use std::time::Duration;

use serde_json::Value;
use tracing::Span;
use tracing::field::Empty;

/// What a request is about, for the span name's `{subject}` and its attribute.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Subject<'a> {
    /// `gen_ai.tool.name`.
    Tool(&'a str),
    /// `gen_ai.prompt.name`.
    Prompt(&'a str),
    /// `mcp.resource.uri` (not in the span name: high cardinality, as the conventions say).
    Resource(&'a str),
    /// Nothing low-cardinality to name.
    None,
}

impl<'a> Subject<'a> {
    /// The subject of `method` read from its decoded `params`.
    pub(crate) fn of(method: &str, params: Option<&'a Value>) -> Self {
        let get = |k: &str| params.and_then(|p| p.get(k)).and_then(|v| v.as_str());
        match method {
            "tools/call" => get("name").map_or(Self::None, Self::Tool),
            "prompts/get" => get("name").map_or(Self::None, Self::Prompt),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                get("uri").map_or(Self::None, Self::Resource)
            }
            _ => Self::None,
        }
    }
}

/// The CLIENT span of one attempt at `method` on upstream `upstream` (`http`: a
/// streamable-HTTP one), numbered `attempt` from 1. `jsonrpc.request.id` is recorded when the
/// request is written (`upstream::Upstream::call_related`). Disabled when nobody listens.
pub(crate) fn client(
    method: &str,
    subject: Subject<'_>,
    upstream: &str,
    http: bool,
    attempt: u32,
) -> Span {
    if !steadfast::trace::listening() {
        return Span::none();
    }
    let span = tracing::info_span!(
        target: "steadfast_gateway",
        "mcp.client",
        otel.name = %SpanName(method, subject),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = method,
        jsonrpc.request.id = Empty,
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        mcp.resource.uri = Empty,
        network.transport = if http { "tcp" } else { "pipe" },
        steadfast.upstream = upstream,
        // Signed: `tracing-opentelemetry` exports unsigned integers as text.
        steadfast.attempt = i64::from(attempt),
        steadfast.task.id = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    record_common(&span, "null", subject);
    span
}

/// Records the request id (raw JSON) and the subject on a span made here.
pub(crate) fn record_common(span: &Span, id: &str, subject: Subject<'_>) {
    // "SHOULD NOT capture this attribute when the id is null": a string id without its quotes.
    if id != "null" {
        span.record("jsonrpc.request.id", id.trim_matches('"'));
    }
    match subject {
        Subject::Tool(t) => {
            span.record("gen_ai.operation.name", "execute_tool");
            span.record("gen_ai.tool.name", t);
        }
        Subject::Prompt(p) => {
            span.record("gen_ai.prompt.name", p);
        }
        Subject::Resource(u) => {
            span.record("mcp.resource.uri", u);
        }
        Subject::None => {}
    }
}

/// How a request ended, for `error.type` and the span status.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome<'a> {
    /// Answered with a result.
    Ok,
    /// Answered with a result saying `isError: true` (`error.type = tool_error`).
    ToolError,
    /// Answered with a JSON-RPC error (`error.type` = its code).
    Rpc(i64),
    /// Failed for a reason of Steadfast's own (a timeout, a breaker…): the code.
    Other(&'a str),
}

/// Records the end of a span made here (a disabled span ignores it).
pub(crate) fn end(span: &Span, outcome: Outcome<'_>) {
    if span.is_disabled() {
        return;
    }
    let code;
    let error = match outcome {
        Outcome::Ok => return,
        Outcome::ToolError => "tool_error",
        Outcome::Rpc(c) => {
            span.record("rpc.response.status_code", c.to_string());
            code = c.to_string();
            &code
        }
        Outcome::Other(e) => e,
    };
    span.record("error.type", error);
    span.record("otel.status_code", "ERROR");
}

/// Records `mcp.server.operation.duration` / `mcp.client.operation.duration` (seconds, by
/// method, tool and error type) through the `metrics` facade, beside the Prometheus ones.
pub(crate) fn record_duration(
    side: Side,
    method: &'static str,
    tool: Option<&str>,
    error: Option<&str>,
    took: Duration,
) {
    let name = match side {
        Side::Server => "mcp.server.operation.duration",
        Side::Client => "mcp.client.operation.duration",
    };
    let mut labels = vec![metrics::Label::new("mcp.method.name", method)];
    if let Some(t) = tool {
        labels.push(metrics::Label::new("gen_ai.tool.name", t.to_owned()));
    }
    if let Some(e) = error {
        labels.push(metrics::Label::new("error.type", e.to_owned()));
    }
    metrics::histogram!(name, labels).record(took.as_secs_f64());
}

/// Which side of the proxy an operation is on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Side {
    /// Answering a client.
    Server,
    /// Asking an upstream.
    Client,
}

/// `{mcp.method.name} {subject}`, formatted only when the span is built.
pub(crate) struct SpanName<'a>(pub(crate) &'a str, pub(crate) Subject<'a>);

impl std::fmt::Display for SpanName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            Subject::Tool(t) | Subject::Prompt(t) => write!(f, "{} {t}", self.0),
            Subject::Resource(_) | Subject::None => f.write_str(self.0),
        }
    }
}
