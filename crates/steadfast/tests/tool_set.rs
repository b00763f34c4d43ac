//! A tool set with a flaky, a permanently failing and a slow tool.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use steadfast::{
    BreakerConfig, BreakerState, ErrorClass, FailureMode, LlmErrorCode, RetryPolicy, ToolOptions,
    ToolSet, ToolSetError,
};

struct Counts {
    flaky: AtomicU32,
    permanent: AtomicU32,
    slow: AtomicU32,
}

fn three_tools(mode: FailureMode) -> (ToolSet<ErrorClass>, Arc<Counts>) {
    let counts = Arc::new(Counts {
        flaky: AtomicU32::new(0),
        permanent: AtomicU32::new(0),
        slow: AtomicU32::new(0),
    });
    let (c1, c2, c3) = (counts.clone(), counts.clone(), counts.clone());
    let set = ToolSet::builder()
        .default_policy(RetryPolicy::builder().max_attempts(4).build().unwrap())
        .default_breaker(
            BreakerConfig::builder()
                .failure_threshold(2)
                .build()
                .unwrap(),
        )
        .mode(mode)
        // Fails twice in every three calls it receives: retries absorb it.
        .tool("flaky", move |args: Value| {
            let n = c1.flaky.fetch_add(1, Ordering::SeqCst);
            async move {
                if n % 3 < 2 {
                    Err(ErrorClass::from_status(503))
                } else {
                    Ok(json!({"echo": args}))
                }
            }
        })
        // A 403 with a token in the message: never retried, never counted by the breaker.
        .tool("permanent", move |_args| {
            c2.permanent.fetch_add(1, Ordering::SeqCst);
            async {
                Err(ErrorClass::from_status(403)
                    .with_message("forbidden: Authorization: Bearer sk-live-abcdefghijklmnopqrstu"))
            }
        })
        // Never answers within its 2 s attempt timeout; its own policy allows two attempts.
        .tool_with(
            "slow",
            ToolOptions::new().policy(
                RetryPolicy::builder()
                    .max_attempts(2)
                    .attempt_timeout(Duration::from_secs(2))
                    .build()
                    .unwrap(),
            ),
            move |_args| {
                c3.slow.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok(json!("late"))
                }
            },
        )
        .build()
        .unwrap();
    (set, counts)
}

#[tokio::test(start_paused = true)]
async fn each_tool_gets_its_policy_breaker_and_llm_error() {
    let (set, counts) = three_tools(FailureMode::LlmError);

    // flaky: absorbed by retries, three attempts.
    let out = set.call("flaky", json!({"q": 1})).await.unwrap();
    assert_eq!(out, json!({"echo": {"q": 1}}));
    assert_eq!(counts.flaky.load(Ordering::SeqCst), 3);

    // permanent: one attempt, INVALID_REQUEST, the token redacted, the tool named.
    for _ in 0..3 {
        let e = set.call("permanent", json!({})).await.unwrap();
        assert_eq!(e["error"], true);
        assert_eq!(e["code"], "INVALID_REQUEST");
        assert_eq!(e["tool"], "permanent");
        assert_eq!(e["retriable"], false);
        let text = e.to_string();
        assert!(!text.contains("sk-live"), "{text}");
    }
    assert_eq!(counts.permanent.load(Ordering::SeqCst), 3);
    assert_eq!(
        set.breaker("permanent").unwrap().state(),
        BreakerState::Closed
    );

    // slow: its own policy (2 attempts of 2 s), TIMEOUT; two such calls open its breaker.
    for _ in 0..2 {
        let e = set.call("slow", json!({})).await.unwrap();
        assert_eq!(e["code"], "TIMEOUT");
        assert_eq!(e["attemptsMade"], 2);
    }
    assert_eq!(counts.slow.load(Ordering::SeqCst), 4);
    assert_eq!(set.breaker("slow").unwrap().state(), BreakerState::Open);
    let e = set.call("slow", json!({})).await.unwrap();
    assert_eq!(e["code"], "CIRCUIT_OPEN");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("circuit")
    );
    assert_eq!(
        counts.slow.load(Ordering::SeqCst),
        4,
        "an open breaker makes no call"
    );

    // The other tools' breakers are their own.
    assert_eq!(set.breaker("flaky").unwrap().state(), BreakerState::Closed);
    assert_eq!(
        set.call("flaky", json!(2)).await.unwrap(),
        json!({"echo": 2})
    );

    let snap = set.metrics().snapshot();
    assert_eq!(snap.tools["flaky"].successes_after_retry, 2);
    assert_eq!(
        snap.tools["permanent"].failures[&LlmErrorCode::InvalidRequest],
        3
    );
    assert_eq!(snap.tools["slow"].failures[&LlmErrorCode::Timeout], 2);
    assert_eq!(snap.tools["slow"].failures[&LlmErrorCode::CircuitOpen], 1);
    assert_eq!(set.breaker_stats()["slow"].state, BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn error_mode_keeps_the_original_error_tagged_with_the_tool() {
    let (set, _) = three_tools(FailureMode::Error);
    let err = set.call("permanent", json!({})).await.unwrap_err();
    assert_eq!(err.tool(), "permanent");
    let retry = err.retry_error().unwrap();
    assert_eq!(retry.attempts(), 1);
    assert_eq!(retry.class().status, Some(403));
    assert!(err.to_string().starts_with("tool `permanent`: "), "{err}");
    assert_eq!(err.to_llm_error().code, LlmErrorCode::InvalidRequest);

    let err = set.call("missing", json!({})).await.unwrap_err();
    assert_eq!(err.to_string(), "unknown tool `missing`");
}

#[tokio::test(start_paused = true)]
async fn tools_of_one_dependency_share_a_breaker() {
    let reads = Arc::new(AtomicU32::new(0));
    let r = reads.clone();
    let set = ToolSet::builder()
        .default_policy(RetryPolicy::no_retry())
        .mode(FailureMode::LlmError)
        .tool_with(
            "db_write",
            ToolOptions::new().dependency("postgres").breaker(
                BreakerConfig::builder()
                    .failure_threshold(3)
                    .build()
                    .unwrap(),
            ),
            |_args| async { Err(ErrorClass::from_status(503)) },
        )
        .tool_with(
            "db_read",
            ToolOptions::new().dependency("postgres"),
            move |_args| {
                r.fetch_add(1, Ordering::SeqCst);
                async { Ok(json!("row")) }
            },
        )
        .tool_with("cache", ToolOptions::new().no_breaker(), |_args| async {
            Err(ErrorClass::from_status(503))
        })
        .build()
        .unwrap();

    for _ in 0..3 {
        assert_eq!(
            set.call("db_write", json!({})).await.unwrap()["code"],
            "SERVICE_UNAVAILABLE"
        );
    }
    // The write failures opened the dependency's breaker, so the read fails fast.
    assert_eq!(
        set.call("db_read", json!({})).await.unwrap()["code"],
        "CIRCUIT_OPEN"
    );
    assert_eq!(reads.load(Ordering::SeqCst), 0);
    assert!(set.breaker("cache").is_none());
    for _ in 0..10 {
        assert_eq!(
            set.call("cache", json!({})).await.unwrap()["code"],
            "SERVICE_UNAVAILABLE"
        );
    }
    assert_eq!(set.names(), ["cache", "db_read", "db_write"]);
}

#[test]
fn bad_sets_are_rejected_when_built() {
    let dup = ToolSet::<ErrorClass>::builder()
        .tool("a", |v| async move { Ok(v) })
        .tool("a", |v| async move { Ok(v) })
        .build()
        .unwrap_err();
    assert_eq!(dup, ToolSetError::Duplicate("a".into()));
    assert_eq!(dup.to_string(), "tool set: tool `a` is registered twice");
    let empty = ToolSet::<ErrorClass>::builder()
        .tool("", |v| async move { Ok(v) })
        .build()
        .unwrap_err();
    assert_eq!(empty, ToolSetError::EmptyName);
}

#[tokio::test(start_paused = true)]
async fn calls_are_spawnable() {
    let (set, _) = three_tools(FailureMode::Error);
    let task = tokio::spawn({
        let set = set.clone();
        async move { set.call("flaky", json!(1)).await.unwrap() }
    });
    assert_eq!(task.await.unwrap(), json!({"echo": 1}));
}
