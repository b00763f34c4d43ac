//! Call limits: every attempt counts, the limit sits outside the retry loop, and the model is
//! told plainly to stop. On tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use steadfast::{
    CallKeys, CallLimit, CallScope, ErrorClass, FailureMode, GiveUpReason, Limited, LlmError,
    LlmErrorCode, Retry, RetryPolicy, ToolErrorKind, ToolSet,
};

const HOUR: Duration = Duration::from_secs(3600);

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .base_delay(Duration::from_millis(10))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn retries_count_as_calls_and_a_refused_attempt_is_not_made() {
    let limit = CallLimit::builder().per_tool(5, HOUR).build().unwrap();
    let keys = CallKeys::new().session("s").tool("search");
    let retry = Retry::<u32, Limited<ErrorClass>>::new(policy(4));
    let made = AtomicU32::new(0);
    let failing = || async {
        made.fetch_add(1, Ordering::SeqCst);
        Err::<u32, _>(ErrorClass::from_status(503))
    };
    let first = retry
        .run(|_| limit.attempt(&keys, failing()))
        .await
        .unwrap_err();
    assert_eq!(first.attempts(), 4);
    let second = retry
        .run(|_| limit.attempt(&keys, failing()))
        .await
        .unwrap_err();
    // One attempt left in the window, then the limit refuses the retry: no further call.
    assert_eq!(made.load(Ordering::SeqCst), 5);
    assert_eq!(second.attempts(), 2);
    assert_eq!(second.reason(), GiveUpReason::NonRetriable);
    let e = second.to_llm_error("search");
    assert_eq!(e.code, LlmErrorCode::ToolCallLimit);
    assert!(!e.retriable);
    assert!(
        e.suggestion
            .starts_with("Do not call this tool again in this session")
    );
    assert_eq!(
        e.retry_after_ms, None,
        "the model is not invited to come back"
    );
}

#[tokio::test(start_paused = true)]
async fn windows_end_and_scopes_are_counted_apart() {
    let limit = CallLimit::builder()
        .per_session(3, Duration::from_secs(60))
        .per_tool(2, Duration::from_secs(60))
        .per_upstream(100, Duration::from_secs(60))
        .build()
        .unwrap();
    let a = CallKeys::new().session("s1").tool("a").upstream("u");
    let b = CallKeys::new().session("s1").tool("b").upstream("u");
    limit.acquire(&a).await.unwrap();
    limit.acquire(&a).await.unwrap();
    let refused = limit.acquire(&a).await.unwrap_err();
    assert_eq!(refused.scope, CallScope::Tool);
    assert_eq!(refused.retry_in, Some(Duration::from_secs(60)));
    // The refusal took nothing from the session: b still has the session's third call.
    limit.acquire(&b).await.unwrap();
    assert_eq!(
        limit.acquire(&b).await.unwrap_err().scope,
        CallScope::Session
    );
    // Another session is apart, and a session id cannot collide with a tool name.
    limit
        .acquire(&CallKeys::new().session("s1:a").tool("x"))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(60)).await;
    limit.acquire(&a).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_upstream_cap_spans_sessions() {
    let limit = CallLimit::builder()
        .per_upstream(2, Duration::from_secs(1))
        .build()
        .unwrap();
    for s in ["a", "b"] {
        limit
            .acquire(&CallKeys::new().session(s).upstream("db"))
            .await
            .unwrap();
    }
    let refused = limit
        .acquire(&CallKeys::new().session("c").upstream("db"))
        .await
        .unwrap_err();
    assert_eq!(refused.scope, CallScope::Upstream);
    assert_eq!(
        refused.to_string(),
        "tool call limit reached: at most 2 calls per 1s to this upstream"
    );
}

#[tokio::test(start_paused = true)]
async fn a_tool_set_counts_retries_and_stops_at_the_cap() {
    let made = Arc::new(AtomicU32::new(0));
    let m = made.clone();
    let set = ToolSet::builder()
        .default_policy(policy(3))
        .tool("flaky", move |_: Value| {
            let m = m.clone();
            async move {
                m.fetch_add(1, Ordering::SeqCst);
                Err::<Value, _>(ErrorClass::from_status(503))
            }
        })
        .build()
        .unwrap();
    let limit = CallLimit::builder().per_session(4, HOUR).build().unwrap();
    let session = CallKeys::new().session("s");
    let first = set
        .call_limited(&limit, &session, "flaky", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(first.kind(), ToolErrorKind::Failed(_)));
    assert_eq!(made.load(Ordering::SeqCst), 3);
    // One call left: the first attempt goes out, its retry is refused.
    let second = set
        .call_limited(&limit, &session, "flaky", json!({}))
        .await
        .unwrap_err();
    assert_eq!(made.load(Ordering::SeqCst), 4);
    assert!(matches!(second.kind(), ToolErrorKind::CallLimit(_)));
    // Nothing left: refused before the loop, no attempt.
    let third = set
        .call_limited(&limit, &session, "flaky", json!({}))
        .await
        .unwrap_err();
    assert_eq!(made.load(Ordering::SeqCst), 4);
    let e: LlmError = third.to_llm_error();
    assert_eq!(
        (e.code, e.tool.as_deref()),
        (LlmErrorCode::ToolCallLimit, Some("flaky"))
    );
    // A refusal is not a dependency failure: the breaker stays closed.
    assert_eq!(
        set.breaker("flaky").unwrap().state(),
        steadfast::BreakerState::Closed
    );
}

#[tokio::test(start_paused = true)]
async fn a_tool_set_in_llm_mode_answers_with_the_limit_error() {
    let set = ToolSet::builder()
        .mode(FailureMode::LlmError)
        .tool("echo", |v: Value| async move { Ok::<_, std::io::Error>(v) })
        .build()
        .unwrap();
    let limit = CallLimit::builder().per_tool(1, HOUR).build().unwrap();
    let s1 = CallKeys::new().session("s1");
    assert_eq!(
        set.call_limited(&limit, &s1, "echo", json!(1))
            .await
            .unwrap(),
        json!(1)
    );
    let refused = set
        .call_limited(&limit, &s1, "echo", json!(2))
        .await
        .unwrap();
    assert_eq!(refused["code"], "TOOL_CALL_LIMIT");
    assert_eq!(refused["retriable"], false);
    // The cap is per session.
    let s2 = CallKeys::new().session("s2");
    assert_eq!(
        set.call_limited(&limit, &s2, "echo", json!(3))
            .await
            .unwrap(),
        json!(3)
    );
    // Unknown tools are still unknown, and cost nothing.
    let unknown = set
        .call_limited(&limit, &s2, "nope", json!(0))
        .await
        .unwrap();
    assert_eq!(unknown["code"], "INVALID_REQUEST");
}

#[test]
fn bad_caps_name_the_field() {
    let err = CallLimit::builder()
        .per_session(10, Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid call limit: session.window must be between 1ms and 30days (got 0s)"
    );
}

#[tokio::test(start_paused = true)]
async fn memory_stays_proportional_to_live_keys() {
    let limit = CallLimit::builder()
        .per_session(1, Duration::from_secs(1))
        .build()
        .unwrap();
    for i in 0..10_000 {
        limit
            .acquire(&CallKeys::new().session(i.to_string()))
            .await
            .unwrap();
        if i % 100 == 99 {
            tokio::time::advance(Duration::from_secs(1)).await;
        }
    }
    assert!(limit.counter().len() < 400, "{}", limit.counter().len());
}
