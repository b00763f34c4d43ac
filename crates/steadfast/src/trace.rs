//! Tool-execution spans and the engine's span events, through `tracing` only.
//!
//! Why `tracing` and not OpenTelemetry directly: users already have a subscriber, and
//! `tracing-opentelemetry` turns these spans into OpenTelemetry ones with the right name and kind
//! (it reads the `otel.name` and `otel.kind` fields), so the core needs no new dependency.
//!
//! The span follows the OpenTelemetry GenAI semantic conventions for tool execution
//! (`docs/gen-ai/execute-tool.md` in the `semantic-conventions-genai` repository, status
//! "Development"): name `execute_tool {gen_ai.tool.name}`, kind INTERNAL,
//! `gen_ai.operation.name = "execute_tool"`, `gen_ai.tool.name`, `gen_ai.tool.call.id` when
//! known, and `error.type` when the call failed. Steadfast's own decisions — each retry, the
//! breaker, the budget, a replay held back, the final outcome — are events on that span, under
//! names of its own ([`event`]).
//!
//! Zero cost when nobody listens: with no subscriber interested in `INFO` for the `steadfast`
//! target, [`execute_tool_span`] returns a disabled span without formatting anything, the events
//! are skipped at their callsites, and nothing allocates (checked by `tests/alloc.rs`).

use tracing::{Level, Span};

/// The span's name as `tracing` sees it; `otel.name` carries the full
/// `execute_tool {gen_ai.tool.name}`.
pub const SPAN_NAME: &str = "execute_tool";

/// The messages (OpenTelemetry event names, through `tracing-opentelemetry`) of the events the
/// engine records on the current span.
pub mod event {
    /// Before each retry's delay: `steadfast.attempt` (the attempt that failed),
    /// `steadfast.delay_ms`, `steadfast.reason` (the failure's error code),
    /// `steadfast.retry_after_honoured` (a `Retry-After` was given and the delay waits it out).
    pub const RETRY: &str = "steadfast.retry";
    /// A circuit breaker refused the call before any attempt (`steadfast.reason`).
    pub const BREAKER_REFUSED: &str = "steadfast.breaker.refused";
    /// This call's failure opened the breaker.
    pub const BREAKER_OPENED: &str = "steadfast.breaker.opened";
    /// The call is the half-open breaker's probe.
    pub const BREAKER_HALF_OPEN_PROBE: &str = "steadfast.breaker.half_open_probe";
    /// The retry budget refused a retry (`steadfast.attempt`).
    pub const BUDGET_REFUSED: &str = "steadfast.budget.refused";
    /// A retry was not made because the call may not be replayed and its outcome is unknown.
    pub const REPLAY_HELD_BACK: &str = "steadfast.replay.held_back";
    /// A call limit refused the call or one of its retries.
    pub const CALL_LIMIT_REACHED: &str = "steadfast.call_limit.reached";
    /// The call ended: `steadfast.outcome` (`success` or `gave_up`), `steadfast.attempts`, and on
    /// giving up `steadfast.give_up_reason` and `error.type`.
    pub const OUTCOME: &str = "steadfast.outcome";
}

/// An `execute_tool {tool}` span (kind INTERNAL) per the GenAI semantic conventions, at `INFO`
/// under the `steadfast` target. `error.type` and `steadfast.attempts` are recorded when the call
/// ends. Disabled, and free, when no subscriber wants it.
///
/// [`Retry`](crate::Retry) (when named), [`ToolSet`](crate::ToolSet) and `steadfast-mcp` create
/// it for you; call it yourself to wrap a call that runs a [`Retry`](crate::Retry) built with
/// [`in_caller_span`](crate::Retry::in_caller_span).
///
/// ```
/// use tracing::Instrument;
/// let span = steadfast::trace::execute_tool_span("search", Some("call_42"));
/// # let _ = async {}.instrument(span);
/// ```
pub fn execute_tool_span(tool: &str, call_id: Option<&str>) -> Span {
    tracing::info_span!(
        target: "steadfast",
        "execute_tool",
        otel.name = %format_args!("execute_tool {tool}"),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        steadfast.attempts = tracing::field::Empty,
    )
}

/// Records `error.type` on `span` with the ERROR status the conventions pair it with
/// (`otel.status_code`, which `tracing-opentelemetry` turns into the span's status). A span
/// without these fields ignores them.
pub fn record_error(span: &Span, error_type: &str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "ERROR");
}

/// Whether anyone may want the engine's spans, events and fields: one atomic load of the global
/// level filter, so the success path pays nothing more when nobody listens. Check it before
/// building a span whose fields cost something to compute.
///
/// ```
/// // No subscriber installed: nobody listens.
/// assert!(!steadfast::trace::listening());
/// ```
#[inline(always)]
pub fn listening() -> bool {
    use tracing::level_filters::{LevelFilter, STATIC_MAX_LEVEL};
    Level::INFO <= STATIC_MAX_LEVEL && Level::INFO <= LevelFilter::current()
}

/// Records the call's end on the current span (a span without these fields ignores them).
pub(crate) fn record_end(attempts: u32, error_type: Option<&'static str>) {
    if !listening() {
        return;
    }
    let span = Span::current();
    // As a signed integer: `tracing-opentelemetry` exports unsigned ones as text.
    span.record("steadfast.attempts", i64::from(attempts));
    if let Some(e) = error_type {
        record_error(&span, e);
    }
}
