//! The `execute_tool` span of an MCP tool call, captured on tokio's paused clock.

#[path = "../../steadfast/tests/capture/mod.rs"]
mod capture;

use capture::{Capture, EventRec};
use rmcp::model::{CallToolResult, ContentBlock};
use steadfast::{CancellationToken, RetryPolicy, trace};
use steadfast_mcp::{CallFailure, ToolCall, ToolPolicy};

fn named<'a>(events: &'a [EventRec], message: &str) -> Vec<&'a EventRec> {
    events.iter().filter(|e| e.message() == message).collect()
}

fn policy() -> ToolPolicy {
    let retry = RetryPolicy::builder()
        .max_attempts(3)
        .jitter(steadfast::Jitter::None)
        .build()
        .unwrap();
    ToolPolicy::new(retry).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_non_replayable_call_held_back_says_so_on_its_span() {
    let (capture, _guard) = Capture::install();
    let policy = policy();
    let mut sent = 0;
    let result = ToolCall::new("charge", &policy)
        .call_id(Some("call_9"))
        .run(&CancellationToken::new(), |_| {
            sent += 1;
            async { Err(CallFailure::Lost(rmcp::ServiceError::TransportClosed)) }
        })
        .await;
    assert_eq!((result.is_error, sent), (Some(true), 1));

    let spans: Vec<_> = capture
        .spans()
        .into_iter()
        .filter(|s| s.name == trace::SPAN_NAME)
        .collect();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let span = &spans[0];
    assert_eq!(span.fields["otel.name"], "execute_tool charge");
    assert_eq!(span.fields["otel.kind"], "internal");
    assert_eq!(span.fields["gen_ai.tool.call.id"], "call_9");
    assert_eq!(span.fields["error.type"], "OUTCOME_UNKNOWN");
    assert_eq!(span.fields["steadfast.attempts"], "1");
    let events = capture.events_in(span.id);
    assert_eq!(
        named(&events, trace::event::REPLAY_HELD_BACK).len(),
        1,
        "{events:#?}"
    );
    assert!(named(&events, trace::event::RETRY).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_replayable_call_retried_then_succeeding_has_its_retries_on_one_span() {
    let (capture, _guard) = Capture::install();
    let policy = policy();
    let result = ToolCall::new("weather", &policy)
        .replays_ambiguous(true)
        .run(&CancellationToken::new(), |n| async move {
            if n < 3 {
                Err(CallFailure::Lost(rmcp::ServiceError::TransportClosed))
            } else {
                Ok(CallToolResult::success(vec![ContentBlock::text("sunny")]))
            }
        })
        .await;
    assert_eq!(result.is_error, Some(false));
    let spans: Vec<_> = capture
        .spans()
        .into_iter()
        .filter(|s| s.name == trace::SPAN_NAME)
        .collect();
    assert_eq!(
        spans.len(),
        1,
        "the engine opens no second span: {spans:#?}"
    );
    assert_eq!(spans[0].fields["steadfast.attempts"], "3");
    assert_eq!(spans[0].fields.get("error.type"), None);
    let events = capture.events_in(spans[0].id);
    assert_eq!(named(&events, trace::event::RETRY).len(), 2, "{events:#?}");
    assert!(named(&events, trace::event::REPLAY_HELD_BACK).is_empty());
}
