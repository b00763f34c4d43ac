//! Tracing of job attempts, and the enqueuer's trace context stored with each job.
//!
//! Every attempt runs in one `tracing` span that follows the OpenTelemetry messaging semantic
//! conventions for a *process* span (`docs/messaging/messaging-spans.md`, status Development):
//! `otel.name = "process {handler}"`, `otel.kind = "consumer"`, `messaging.system`,
//! `messaging.operation.name` / `.type = "process"`, `messaging.destination.name` (the
//! handler, our queue), `messaging.message.id` (the job id), plus Steadfast's attempt number,
//! outcome and events. `tracing-opentelemetry` reads `otel.name` and `otel.kind`, so this crate
//! needs no OpenTelemetry dependency.
//!
//! The W3C `traceparent` / `tracestate` of the context that queued a job is stored with it
//! ([`JobOptions::traceparent`](crate::JobOptions::traceparent), or a [`TracePropagation`]'s
//! [`current`](TracePropagation::current)), and every attempt hands it, with its span, to the
//! propagation's [`attach`](TracePropagation::attach) — where an OpenTelemetry user links the
//! span to it, or parents it on it. Both sides are a few lines over
//! `opentelemetry`'s `TraceContextPropagator` (see `docs/jobs.md`).

use crate::JobsError;

/// The span every attempt runs in, as `tracing` names it (`otel.name` has the full
/// `process {handler}`).
pub const SPAN_NAME: &str = "job.attempt";

/// Event names (the `tracing` message, which `tracing-opentelemetry` uses as the event name).
pub mod event {
    /// The attempt failed and its retry is stored: `steadfast.attempt`, `steadfast.delay_ms`,
    /// `steadfast.reason` (the failure's code), `steadfast.max_attempts`,
    /// `steadfast.retry_after_honoured`. The same name and fields as the library's retries.
    pub const RETRY: &str = "steadfast.retry";
    /// The job became a dead letter: `steadfast.reason` (the code), `steadfast.give_up_reason`.
    pub const DEAD: &str = "steadfast.job.dead";
    /// The job went back to the queue without spending its attempt: `steadfast.reason`
    /// (`busy`, `breaker_open`, `released`, `stale`).
    pub const DEFERRED: &str = "steadfast.job.deferred";
}

/// The W3C trace context (`traceparent`, and `tracestate` when there is one) stored with a
/// job: the trace of whoever queued it.
///
/// ```
/// use steadfast_jobs::TraceContext;
/// let tc = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None).unwrap();
/// assert_eq!(tc.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert_eq!(tc.parent_id(), "00f067aa0ba902b7");
/// assert!(tc.sampled());
/// let err = TraceContext::parse("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None).unwrap_err();
/// assert!(err.to_string().contains("traceparent"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct TraceContext {
    /// `{version}-{trace-id}-{parent-id}-{flags}`, lowercase hex.
    pub traceparent: String,
    /// The vendors' list, passed through unread.
    pub tracestate: Option<String>,
}

/// The most of a `tracestate` stored: W3C lets a vendor truncate beyond 512 characters.
const MAX_TRACESTATE: usize = 512;

impl TraceContext {
    /// Validates a `traceparent` (W3C Trace Context level 1: version `00` exactly, a later
    /// version by its first four fields) and a `tracestate` (printable ASCII, at most 512
    /// characters). The error names the field.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Result<Self, JobsError> {
        check_traceparent(traceparent)?;
        if let Some(ts) = tracestate {
            let printable = ts.bytes().all(|b| (0x20..0x7f).contains(&b));
            if ts.len() > MAX_TRACESTATE || !printable {
                return Err(JobsError::invalid(
                    "tracestate",
                    format!(
                        "be at most {MAX_TRACESTATE} printable ASCII characters (got {} bytes)",
                        ts.len()
                    ),
                ));
            }
        }
        Ok(Self {
            traceparent: traceparent.to_owned(),
            tracestate: tracestate.filter(|s| !s.is_empty()).map(str::to_owned),
        })
    }

    /// The trace id (32 hex digits).
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// The enqueuing span's id (16 hex digits).
    pub fn parent_id(&self) -> &str {
        &self.traceparent[36..52]
    }

    /// Whether the enqueuer sampled its trace (flag bit 0).
    pub fn sampled(&self) -> bool {
        u8::from_str_radix(&self.traceparent[53..55], 16).is_ok_and(|f| f & 1 == 1)
    }
}

fn check_traceparent(tp: &str) -> Result<(), JobsError> {
    let bad = |why: &str| {
        Err(JobsError::invalid(
            "traceparent",
            format!("be a W3C traceparent, 00-<32 hex>-<16 hex>-<2 hex>: {why}"),
        ))
    };
    let b = tp.as_bytes();
    if b.len() < 55 {
        return bad("too short");
    }
    let lower_hex = |s: &[u8]| s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    let (version, trace, parent, flags) = (&b[0..2], &b[3..35], &b[36..52], &b[53..55]);
    if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
        return bad("fields are separated by '-'");
    }
    if !(lower_hex(version) && lower_hex(trace) && lower_hex(parent) && lower_hex(flags)) {
        return bad("fields are lowercase hex");
    }
    if version == b"ff" {
        return bad("version ff is invalid");
    }
    // Version 00 is exactly 55 characters; a later version may append fields after a '-'.
    if (version == b"00" && b.len() != 55) || (b.len() > 55 && b[55] != b'-') {
        return bad("wrong length");
    }
    if trace.iter().all(|c| *c == b'0') {
        return bad("the trace id is all zeros");
    }
    if parent.iter().all(|c| *c == b'0') {
        return bad("the parent id is all zeros");
    }
    Ok(())
}

/// Connects job attempts to the tracer in use (OpenTelemetry through `tracing-opentelemetry`,
/// or another) without this crate depending on it. Set with
/// [`JobsBuilder::trace_propagation`](crate::JobsBuilder::trace_propagation).
///
/// ```
/// use steadfast_jobs::{TraceContext, TracePropagation};
/// struct Log;
/// impl TracePropagation for Log {
///     fn attach(&self, _span: &tracing::Span, stored: &TraceContext) {
///         // With OpenTelemetry: extract `stored` with a TraceContextPropagator, then
///         // `span.add_link(cx.span().span_context().clone())` or `span.set_parent(cx)`.
///         tracing::info!(trace_id = stored.trace_id(), "queued by");
///     }
/// }
/// ```
pub trait TracePropagation: Send + Sync + 'static {
    /// The context a job queued without an explicit `traceparent` stores: the caller's current
    /// one (with OpenTelemetry, `Span::current().context()` injected by a
    /// `TraceContextPropagator`). `None` (the default) stores nothing.
    fn current(&self) -> Option<TraceContext> {
        None
    }

    /// Called once per attempt of a job that has a stored context, with the attempt's span
    /// before it is first entered (so `tracing-opentelemetry`'s `set_parent` still works) and
    /// only when a subscriber records it: link the span to the enqueuer's trace (`add_link`,
    /// what the messaging conventions ask of a `process` span), or make it its parent, for one
    /// trace from the enqueuing request to the job's last attempt.
    fn attach(&self, span: &tracing::Span, stored: &TraceContext);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_are_checked() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        let tc = TraceContext::parse(ok, Some("")).unwrap();
        assert!(!tc.sampled());
        assert_eq!(tc.tracestate, None, "an empty tracestate is no tracestate");
        // A later version may carry more fields.
        assert!(TraceContext::parse(&format!("01{}-extra", &ok[2..]), None).is_ok());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        ] {
            let e = TraceContext::parse(bad, None).unwrap_err().to_string();
            assert!(e.contains("traceparent"), "{bad:?}: {e}");
        }
        let e = TraceContext::parse(ok, Some("a=1\nb=2")).unwrap_err();
        assert!(e.to_string().contains("tracestate"), "{e}");
        let long = "k=".to_owned() + &"v".repeat(600);
        assert!(TraceContext::parse(ok, Some(&long)).is_err());
    }
}
