//! The SERVER span of each client request (`call/span.rs` has the conventions, the CLIENT
//! spans of upstream attempts, and what both record). Built only when
//! [`steadfast::trace::listening`] says someone may want them.

use serde_json::Value;
use tracing::Span;
use tracing::field::Empty;

use crate::call::span::{Outcome, Side, SpanName, Subject, end, record_common, record_duration};
use crate::session::Session;
use crate::wire::trace_context::{self, TraceParent};

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
    subject: Subject<'_>,
    parent: Option<&TraceParent>,
) -> Span {
    if !steadfast::trace::listening() {
        return Span::none();
    }
    let (transport, session_id) = client_transport(session);
    let span = tracing::info_span!(
        target: "steadfast_gateway",
        "mcp.server",
        otel.name = %SpanName(method, subject),
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
    record_common(&span, id, subject);
    if let Some(p) = parent {
        trace_context::set_remote_parent(&span, p);
    }
    span
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

/// `line`, the answer to a request answered on the spot (`ping`, `server/discover`), after
/// recording the request's SERVER span: every request gets one, as the conventions expect.
pub(crate) fn answered_now(session: &Session, id: &str, method: &str, line: Vec<u8>) -> Vec<u8> {
    if !steadfast::trace::listening() {
        return line;
    }
    let span = server(session, method, id, Subject::None, None);
    end(&span, outcome_of(Some(&line)).1);
    line
}

/// The SERVER span of an `initialize` (raw params: the client's `traceparent` parents it). The
/// handshake answers the client itself, so the span covers it without reading the answer.
pub(crate) fn initialize(session: &Session, id: &str, params: &str) -> Span {
    if !steadfast::trace::listening() {
        return Span::none();
    }
    let decoded = serde_json::from_str::<Value>(params).ok();
    request(session, id, "initialize", decoded.as_ref())
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
        Subject::of(method, params),
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
