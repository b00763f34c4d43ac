//! The `execute_tool` spans and events of `Retry` and `ToolSet`, captured on tokio's paused
//! clock.

mod capture;

use std::time::Duration;

use capture::{Capture, EventRec, SpanRec};
use serde_json::{Value, json};
use steadfast::{
    BreakerConfig, CallKeys, CallLimit, CircuitBreaker, ErrorClass, FailureMode, Jitter, Retry,
    RetryPolicy, ToolSet, trace,
};

fn policy() -> RetryPolicy {
    RetryPolicy::builder()
        .jitter(Jitter::None)
        .max_attempts(3)
        .build()
        .unwrap()
}

/// The only `execute_tool` span captured.
fn only_tool_span(capture: &Capture) -> SpanRec {
    let spans: Vec<_> = capture
        .spans()
        .into_iter()
        .filter(|s| s.name == trace::SPAN_NAME)
        .collect();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    spans[0].clone()
}

fn named<'a>(events: &'a [EventRec], message: &str) -> Vec<&'a EventRec> {
    events.iter().filter(|e| e.message() == message).collect()
}

fn field<'a>(e: &'a EventRec, name: &str) -> &'a str {
    e.fields.get(name).map_or("<missing>", String::as_str)
}

#[tokio::test(start_paused = true)]
async fn a_call_retried_twice_then_succeeding_has_one_span_with_two_retry_events() {
    let (capture, _guard) = Capture::install();
    let retry = Retry::<&str, ErrorClass>::new(policy()).name("search");
    let started = tokio::time::Instant::now();
    let v = retry
        .run(|n| async move {
            match n {
                1 => Err(ErrorClass::from_status(503)),
                2 => Err(ErrorClass::from_status(429).with_retry_after(Duration::from_secs(1))),
                _ => Ok("found"),
            }
        })
        .await
        .unwrap();
    assert_eq!(v, "found");
    // Paused clock: the delays are exactly 100 ms of backoff, then Retry-After's 1 s.
    assert_eq!(started.elapsed(), Duration::from_millis(1100));

    let span = only_tool_span(&capture);
    let f = |k: &str| span.fields.get(k).cloned();
    assert_eq!(f("otel.name").as_deref(), Some("execute_tool search"));
    assert_eq!(f("otel.kind").as_deref(), Some("internal"));
    assert_eq!(f("gen_ai.operation.name").as_deref(), Some("execute_tool"));
    assert_eq!(f("gen_ai.tool.name").as_deref(), Some("search"));
    assert_eq!(f("steadfast.attempts").as_deref(), Some("3"));
    assert_eq!(f("error.type"), None, "a success has no error.type");
    assert_eq!(f("gen_ai.tool.call.id"), None, "no call id was known");

    let events = capture.events_in(span.id);
    let retries = named(&events, trace::event::RETRY);
    assert_eq!(retries.len(), 2, "{events:#?}");
    let got: Vec<_> = retries
        .iter()
        .map(|e| {
            (
                field(e, "steadfast.attempt"),
                field(e, "steadfast.delay_ms"),
                field(e, "steadfast.retry_after_honoured"),
            )
        })
        .collect();
    assert_eq!(got, [("1", "100", "false"), ("2", "1000", "true")]);
    assert_ne!(field(retries[0], "steadfast.reason"), "<missing>");
    let outcome = named(&events, trace::event::OUTCOME);
    assert_eq!(outcome.len(), 1);
    assert_eq!(field(outcome[0], "steadfast.outcome"), "success");
    assert_eq!(field(outcome[0], "steadfast.attempts"), "3");
}

#[tokio::test(start_paused = true)]
async fn a_breaker_refused_call_says_so_on_its_span() {
    let (capture, _guard) = Capture::install();
    let breaker = CircuitBreaker::new(BreakerConfig::default());
    breaker.isolate();
    let retry = Retry::<(), ErrorClass>::new(policy())
        .name("pay")
        .breaker(breaker);
    let mut ran = false;
    let err = retry
        .run_mut(async |_| {
            ran = true;
            Ok(())
        })
        .await
        .unwrap_err();
    assert!(!ran);
    assert_eq!(err.reason(), steadfast::GiveUpReason::CircuitOpen);

    let span = only_tool_span(&capture);
    assert_eq!(span.fields["error.type"], "CIRCUIT_OPEN");
    assert_eq!(span.fields["steadfast.attempts"], "0");
    let events = capture.events_in(span.id);
    assert_eq!(named(&events, trace::event::BREAKER_REFUSED).len(), 1);
    assert!(named(&events, trace::event::RETRY).is_empty());
    let outcome = named(&events, trace::event::OUTCOME);
    assert_eq!(
        field(outcome[0], "steadfast.give_up_reason"),
        "circuit_open"
    );
}

#[tokio::test(start_paused = true)]
async fn the_failure_that_opens_the_breaker_is_on_the_span() {
    let (capture, _guard) = Capture::install();
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .build()
        .unwrap();
    let breaker = CircuitBreaker::new(config);
    let retry = Retry::<(), ErrorClass>::new(RetryPolicy::no_retry())
        .name("pay")
        .breaker(breaker.clone());
    let _ = retry
        .run(|_| async { Err(ErrorClass::from_status(503)) })
        .await;
    assert_eq!(breaker.state(), steadfast::BreakerState::Open);
    let span = only_tool_span(&capture);
    let events = capture.events_in(span.id);
    assert_eq!(
        named(&events, trace::event::BREAKER_OPENED).len(),
        1,
        "{events:#?}"
    );
    assert_eq!(span.fields["error.type"], "SERVICE_UNAVAILABLE");
}

#[tokio::test(start_paused = true)]
async fn tool_set_calls_get_a_span_each_and_the_call_limit_is_on_it() {
    let (capture, _guard) = Capture::install();
    let set = ToolSet::builder()
        .mode(FailureMode::LlmError)
        .tool("echo", |v: Value| async move { Ok::<_, std::io::Error>(v) })
        .build()
        .unwrap();
    let limit = CallLimit::builder()
        .per_tool(1, Duration::from_secs(3600))
        .build()
        .unwrap();
    let keys = CallKeys::new().session("s-1");
    assert_eq!(
        set.call_limited(&limit, &keys, "echo", json!(1))
            .await
            .unwrap(),
        json!(1)
    );
    let refused = set
        .call_limited(&limit, &keys, "echo", json!(2))
        .await
        .unwrap();
    assert_eq!(refused["code"], "TOOL_CALL_LIMIT");

    let spans: Vec<_> = capture
        .spans()
        .into_iter()
        .filter(|s| s.name == trace::SPAN_NAME)
        .collect();
    assert_eq!(spans.len(), 2, "one span per call: {spans:#?}");
    assert!(
        spans
            .iter()
            .all(|s| s.fields["otel.name"] == "execute_tool echo")
    );
    assert_eq!(spans[0].fields["steadfast.attempts"], "1");
    assert_eq!(spans[0].fields.get("error.type"), None);
    assert_eq!(spans[1].fields["error.type"], "TOOL_CALL_LIMIT");
    let events = capture.events_in(spans[1].id);
    assert_eq!(
        named(&events, trace::event::CALL_LIMIT_REACHED).len(),
        1,
        "{events:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unnamed_retry_opens_no_span() {
    let (capture, _guard) = Capture::install();
    let v = steadfast::retry(&policy(), |n| async move {
        if n < 2 {
            Err(ErrorClass::from_status(503))
        } else {
            Ok(n)
        }
    })
    .await
    .unwrap();
    assert_eq!(v, 2);
    assert!(capture.spans().is_empty());
}
