//! W3C Trace Context (`traceparent`, `tracestate`) in MCP messages.
//!
//! MCP has no propagation mechanism of its own; the OpenTelemetry MCP semantic conventions
//! (`docs/gen-ai/mcp.md`, "Context propagation") put `traceparent` and `tracestate` in a
//! request's `params._meta`. This module reads them from a client's request, writes ours into
//! the upstream request, and finds them in a line about to be POSTed (for the HTTP headers).
//!
//! Everything here is plain text and JSON; turning a `traceparent` into the parent of a span is
//! the `otel` feature's (`remote_parent`, `current`), and without it nothing here runs on the
//! call path.

use serde_json::Value;

/// A `traceparent` and its `tracestate`, as they appear in `params._meta`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent {
    /// `00-{trace id}-{parent id}-{flags}`, validated (`valid`).
    pub traceparent: String,
    /// The vendor list, relayed as it came (bounded by `MAX_TRACESTATE`).
    pub tracestate: Option<String>,
}

/// W3C caps `tracestate` at 32 members; 512 bytes is the length the spec says any vendor may
/// rely on, and a longer one is dropped rather than relayed.
const MAX_TRACESTATE: usize = 512;

/// Whether `tp` is a version-00 `traceparent` with a non-zero trace id and parent id.
pub fn valid(tp: &str) -> bool {
    let b = tp.as_bytes();
    let hex = |s: &[u8]| s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    let nonzero = |s: &[u8]| s.iter().any(|&c| c != b'0');
    b.len() == 55
        && &b[..3] == b"00-"
        && b[35] == b'-'
        && b[52] == b'-'
        && hex(&b[3..35])
        && nonzero(&b[3..35])
        && hex(&b[36..52])
        && nonzero(&b[36..52])
        && hex(&b[53..55])
}

/// The trace context in decoded `params` (`params._meta.traceparent`), if valid.
pub fn from_params(params: &Value) -> Option<TraceParent> {
    let meta = params.get("_meta")?;
    let tp = meta.get("traceparent")?.as_str().filter(|t| valid(t))?;
    Some(TraceParent {
        traceparent: tp.to_owned(),
        tracestate: meta
            .get("tracestate")
            .and_then(Value::as_str)
            .filter(|s| s.len() <= MAX_TRACESTATE)
            .map(str::to_owned),
    })
}

/// The trace context in raw `params` text (decoded only when it names a `traceparent`: a
/// request without one costs one substring search).
pub fn from_raw_params(text: &str) -> Option<TraceParent> {
    memchr::memmem::find(text.as_bytes(), b"\"traceparent\"")?;
    from_params(&serde_json::from_str::<Value>(text).ok()?)
}

/// Finds a `"traceparent":"…"` and `"tracestate":"…"` in a JSON-RPC line without decoding it
/// (for the headers of an HTTP POST: the line's `_meta` is the one we wrote or relayed). A
/// value that is not a valid `traceparent` is ignored.
pub fn scan(line: &[u8]) -> Option<(&str, Option<&str>)> {
    let tp = string_after(line, b"\"traceparent\"").filter(|t| valid(t))?;
    let ts = string_after(line, b"\"tracestate\"").filter(|s| {
        s.len() <= MAX_TRACESTATE && s.bytes().all(|c| c.is_ascii_graphic() || c == b' ')
    });
    Some((tp, ts))
}

/// The string value following `key` and a colon, when it has no escapes (a valid
/// `traceparent` or `tracestate` never has).
fn string_after<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a str> {
    let at = memchr::memmem::find(line, key)? + key.len();
    let rest = &line[at..];
    let colon = rest.iter().position(|c| !c.is_ascii_whitespace())?;
    let rest = rest.get(colon..)?.strip_prefix(b":")?;
    let open = rest.iter().position(|c| !c.is_ascii_whitespace())?;
    let rest = rest.get(open..)?.strip_prefix(b"\"")?;
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    (rest[end] == b'"')
        .then(|| std::str::from_utf8(&rest[..end]).ok())
        .flatten()
}

/// `params` with `_meta.traceparent` (and `tracestate`, or none) replaced by `trace`; other
/// `_meta` members (a progress token, the client's own keys) are kept.
pub fn inject(params: Option<&str>, trace: &TraceParent) -> Option<String> {
    let mut v: Value = match params {
        Some(p) => serde_json::from_str(p).ok()?,
        None => Value::Object(Default::default()),
    };
    let obj = v.as_object_mut()?;
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Default::default()))
        .as_object_mut()?;
    meta.insert(
        "traceparent".into(),
        Value::from(trace.traceparent.as_str()),
    );
    match &trace.tracestate {
        Some(ts) => meta.insert("tracestate".into(), Value::from(ts.as_str())),
        None => meta.remove("tracestate"),
    };
    Some(v.to_string())
}

/// A JSON-RPC request `line` with `trace` (from the HTTP front's `traceparent` header) put in
/// its `params._meta`, so the request's span continues the caller's trace; `None` (relay the
/// line as it is) when it is not a request or already names a `traceparent` of its own.
pub fn adopt(line: &[u8], trace: &TraceParent) -> Option<Vec<u8>> {
    if memchr::memmem::find(line, b"\"traceparent\"").is_some() {
        return None;
    }
    let mut v: Value = serde_json::from_slice(line).ok()?;
    let obj = v.as_object_mut()?;
    if !obj.contains_key("method") || !obj.contains_key("id") {
        return None;
    }
    let params = obj
        .entry("params")
        .or_insert_with(|| Value::Object(Default::default()));
    let text = inject(Some(&params.to_string()), trace)?;
    *params = serde_json::from_str(&text).ok()?;
    serde_json::to_vec(&v).ok()
}

#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::TraceParent;

    /// Makes the client's trace context the parent of `span` (before it is first entered).
    pub fn set_remote_parent(span: &tracing::Span, trace: &TraceParent) {
        let tp = &trace.traceparent;
        let (Ok(trace_id), Ok(span_id), Ok(flags)) = (
            TraceId::from_hex(&tp[3..35]),
            SpanId::from_hex(&tp[36..52]),
            u8::from_str_radix(&tp[53..55], 16),
        ) else {
            return;
        };
        let state = trace
            .tracestate
            .as_deref()
            .and_then(|s| s.parse::<TraceState>().ok())
            .unwrap_or_default();
        let sc = SpanContext::new(trace_id, span_id, TraceFlags::new(flags), true, state);
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(sc));
    }

    /// The current span's context as a `traceparent`, if it is an OpenTelemetry span.
    pub fn current() -> Option<TraceParent> {
        let cx = tracing::Span::current().context();
        let sc = cx.span().span_context().clone();
        if !sc.is_valid() {
            return None;
        }
        let state = sc.trace_state().header();
        Some(TraceParent {
            traceparent: format!(
                "00-{}-{}-{:02x}",
                sc.trace_id(),
                sc.span_id(),
                sc.trace_flags().to_u8()
            ),
            tracestate: (!state.is_empty()).then_some(state),
        })
    }

    /// Links `span` to the trace context `trace` (a durable call's attempt to the request that
    /// enqueued it).
    pub fn link(span: &tracing::Span, trace: &TraceParent) {
        let tp = &trace.traceparent;
        if let (Ok(trace_id), Ok(span_id)) =
            (TraceId::from_hex(&tp[3..35]), SpanId::from_hex(&tp[36..52]))
        {
            span.add_link(SpanContext::new(
                trace_id,
                span_id,
                TraceFlags::SAMPLED,
                true,
                TraceState::default(),
            ));
        }
    }
}

#[cfg(feature = "otel")]
pub use otel::{current, link, set_remote_parent};

/// Without the `otel` feature there is no span context to read: the client's own `_meta` goes
/// upstream as it came.
#[cfg(not(feature = "otel"))]
pub fn current() -> Option<TraceParent> {
    None
}

/// Without the `otel` feature spans have no OpenTelemetry parent to set.
#[cfg(not(feature = "otel"))]
pub fn set_remote_parent(_span: &tracing::Span, _trace: &TraceParent) {}

/// Without the `otel` feature spans have no OpenTelemetry links.
#[cfg(not(feature = "otel"))]
pub fn link(_span: &tracing::Span, _trace: &TraceParent) {}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn validates_the_w3c_format() {
        assert!(valid(TP));
        assert!(!valid(&TP.replace("4bf9", "4BF9")), "upper-case hex");
        assert!(!valid(&TP[..54]));
        assert!(!valid(
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
        ));
        assert!(!valid(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
    }

    #[test]
    fn reads_meta_from_raw_and_decoded_params() {
        let p = format!(r#"{{"name":"x","_meta":{{"traceparent":"{TP}","tracestate":"a=1"}}}}"#);
        let t = from_raw_params(&p).unwrap();
        assert_eq!(t.traceparent, TP);
        assert_eq!(t.tracestate.as_deref(), Some("a=1"));
        assert_eq!(from_raw_params(r#"{"name":"x"}"#), None);
        assert_eq!(
            from_raw_params(r#"{"name":"x","_meta":{"traceparent":"bogus"}}"#),
            None
        );
    }

    #[test]
    fn scans_a_line_for_headers() {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"_meta":{{"traceparent": "{TP}","tracestate":"k=v"}}}}}}"#
        );
        assert_eq!(scan(line.as_bytes()), Some((TP, Some("k=v"))));
        assert_eq!(scan(br#"{"traceparent":"x"}"#), None);
        assert_eq!(scan(br#"{"id":1}"#), None);
    }

    #[test]
    fn adopts_a_header_unless_the_request_has_its_own() {
        let t = TraceParent {
            traceparent: TP.into(),
            tracestate: Some("h=1".into()),
        };
        let out = adopt(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, &t).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["params"]["_meta"]["traceparent"], TP);
        assert_eq!(v["params"]["_meta"]["tracestate"], "h=1");
        let own = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"_meta":{{"traceparent":"{TP}"}}}}}}"#
        );
        assert_eq!(adopt(own.as_bytes(), &t), None);
        assert_eq!(
            adopt(br#"{"jsonrpc":"2.0","method":"notifications/x"}"#, &t),
            None
        );
    }

    #[test]
    fn injects_keeping_other_meta() {
        let t = TraceParent {
            traceparent: TP.into(),
            tracestate: None,
        };
        let out = inject(
            Some(r#"{"name":"x","_meta":{"progressToken":7,"tracestate":"old=1"}}"#),
            &t,
        )
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["_meta"]["progressToken"], 7);
        assert_eq!(v["_meta"]["traceparent"], TP);
        assert!(v["_meta"].get("tracestate").is_none());
        let v: Value = serde_json::from_str(&inject(None, &t).unwrap()).unwrap();
        assert_eq!(v["_meta"]["traceparent"], TP);
    }
}
