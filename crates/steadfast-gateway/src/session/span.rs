//! The gateway's spans, per the OpenTelemetry MCP semantic conventions (`docs/gen-ai/mcp.md`,
//! status Development): a SERVER span per client request and a CLIENT span per upstream
//! attempt, its child.
//!
//! Through `tracing` like the core's `execute_tool` spans (`tracing-opentelemetry` reads
//! `otel.name`, `otel.kind` and `otel.status_code`), at `INFO` under the `steadfast_gateway`
//! target. Built only when [`steadfast::trace::listening`] says someone may want them: the
//! untraced call path pays one atomic load per span site and formats nothing.

use std::time::Duration;

use serde_json::Value;
use tracing::Span;
use tracing::field::Empty;

use crate::session::Session;
use crate::wire::trace_context::{self, TraceParent};

/// What a request is about, for the span name's `{target}` and its attribute.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// `gen_ai.tool.name`.
    Tool(&'a str),
    /// `gen_ai.prompt.name`.
    Prompt(&'a str),
    /// `mcp.resource.uri` (not in the span name: high cardinality, as the conventions say).
    Resource(&'a str),
    /// Nothing low-cardinality to name.
    None,
}

impl<'a> Target<'a> {
    /// The target of `method` read from its decoded `params`.
    pub(crate) fn of(method: &str, params: Option<&'a serde_json::Value>) -> Self {
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

/// `pipe` for a stdio client, `tcp` for an HTTP one (the HTTP front's sessions carry the
/// `Mcp-Session-Id` it handed out; stdio sessions are named `stdio-…`).
fn client_transport(session: &Session) -> (&'static str, Option<&str>) {
    if session.id.starts_with("stdio-") {
        ("pipe", None)
    } else if session.id.starts_with("modern-") {
        // A modern (2026-07-28) request over HTTP: no session exists, so none is named.
        ("tcp", None)
    } else {
        ("tcp", Some(session.id.as_str()))
    }
}

/// The SERVER span of a client's request `id` (raw JSON) to `method`, child of the client's
/// `traceparent` when it sent one. Disabled when nobody listens.
pub(crate) fn server(
    session: &Session,
    method: &str,
    id: &str,
    target: Target<'_>,
    parent: Option<&TraceParent>,
) -> Span {
    if !steadfast::trace::listening() {
        return Span::none();
    }
    let (transport, session_id) = client_transport(session);
    let span = tracing::info_span!(
        target: "steadfast_gateway",
        "mcp.server",
        otel.name = %SpanName(method, target),
        otel.kind = "server",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = method,
        mcp.protocol.version = session.protocol_version(),
        mcp.session.id = session_id,
        jsonrpc.request.id = Empty,
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        mcp.resource.uri = Empty,
        network.transport = transport,
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    record_common(&span, id, target);
    if let Some(p) = parent {
        trace_context::set_remote_parent(&span, p);
    }
    span
}

/// The CLIENT span of one attempt at `method` on upstream `upstream` (`http`: a
/// streamable-HTTP one), numbered `attempt` from 1. `jsonrpc.request.id` is recorded when the
/// request is written (`upstream::Upstream::call_related`). Disabled when nobody listens.
pub(crate) fn client(
    method: &str,
    target: Target<'_>,
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
        otel.name = %SpanName(method, target),
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
        steadfast.attempt = attempt,
        steadfast.task.id = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    record_common(&span, "null", target);
    span
}

fn record_common(span: &Span, id: &str, target: Target<'_>) {
    // "SHOULD NOT capture this attribute when the id is null": a string id without its quotes.
    if id != "null" {
        span.record("jsonrpc.request.id", id.trim_matches('"'));
    }
    match target {
        Target::Tool(t) => {
            span.record("gen_ai.operation.name", "execute_tool");
            span.record("gen_ai.tool.name", t);
        }
        Target::Prompt(p) => {
            span.record("gen_ai.prompt.name", p);
        }
        Target::Resource(u) => {
            span.record("mcp.resource.uri", u);
        }
        Target::None => {}
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

/// `error.type` of an answer line: its JSON-RPC error code, or `tool_error` for a result with
/// `isError: true` (the proxy's own failures are such results).
pub(crate) fn outcome_of(line: Option<&[u8]>) -> (Option<String>, Outcome<'static>) {
    let Some(v) = line.and_then(|l| serde_json::from_slice::<Value>(l).ok()) else {
        return (None, Outcome::Ok);
    };
    if let Some(code) = v.pointer("/error/code").and_then(Value::as_i64) {
        return (Some(code.to_string()), Outcome::Rpc(code));
    }
    if v.pointer("/result/isError").and_then(Value::as_bool) == Some(true) {
        return (Some("tool_error".into()), Outcome::ToolError);
    }
    (None, Outcome::Ok)
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

/// `answer` (the line answering the client's request `id` to `method`) in its SERVER span,
/// with `mcp.server.operation.duration`; `answer` itself when nobody listens.
pub(crate) fn serve<'a>(
    session: &'a Session,
    id: &'a str,
    method: &'a str,
    params: Option<&'a str>,
    answer: impl std::future::Future<Output = Vec<u8>> + 'a,
) -> impl std::future::Future<Output = Vec<u8>> + 'a {
    use futures::future::Either;
    if !steadfast::trace::listening() {
        return Either::Left(answer);
    }
    Either::Right(async move {
        let decoded = params.and_then(|p| serde_json::from_str::<Value>(p).ok());
        let span = request(session, id, method, decoded.as_ref());
        answered(span, method, answer).await
    })
}

/// The SERVER span of a request whose params are decoded (disabled when nobody listens).
pub(crate) fn request(session: &Session, id: &str, method: &str, params: Option<&Value>) -> Span {
    if !steadfast::trace::listening() {
        return Span::none();
    }
    let parent = params.and_then(trace_context::from_params);
    server(
        session,
        method,
        id,
        Target::of(method, params),
        parent.as_ref(),
    )
}

/// Runs `answer` in `span` and records how it ended (just `answer` for a disabled span).
pub(crate) async fn answered(
    span: Span,
    method: &str,
    answer: impl std::future::Future<Output = Vec<u8>>,
) -> Vec<u8> {
    use tracing::Instrument;
    if span.is_disabled() {
        return answer.await;
    }
    let started = std::time::Instant::now();
    let line = answer.instrument(span.clone()).await;
    let (error, outcome) = outcome_of(Some(&line));
    end(&span, outcome);
    // By method only: the other methods' targets (prompt names, URIs) are the client's
    // to choose, and would grow the label set without bound.
    if let Some(m) = KNOWN.iter().find(|m| **m == method) {
        record_duration(Side::Server, m, None, error.as_deref(), started.elapsed());
    }
    line
}

/// Methods whose `mcp.server.operation.duration` is recorded outside `tools/call` (a fixed
/// list: method names are the client's to choose).
const KNOWN: &[&str] = &[
    "tools/call",
    "tools/list",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
];

/// `{mcp.method.name} {target}`, formatted only when the span is built.
struct SpanName<'a>(&'a str, Target<'a>);

impl std::fmt::Display for SpanName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            Target::Tool(t) | Target::Prompt(t) => write!(f, "{} {t}", self.0),
            Target::Resource(_) | Target::None => f.write_str(self.0),
        }
    }
}
