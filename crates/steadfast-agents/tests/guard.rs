//! The framework-neutral guard: per-dependency state, call limits, and bounded state for
//! invented tool names.

use std::time::Duration;

use steadfast::{CallKeys, CallLimit, ErrorClass, GiveUpReason, LlmErrorCode, RetryPolicy};
use steadfast_agents::{Guard, MAX_TRACKED_TOOLS, OTHER_TOOLS};

#[tokio::test(start_paused = true)]
async fn a_dependencys_budget_and_breaker_govern_its_tools() {
    let guard = Guard::builder()
        .dependency("a", "db")
        .dependency("b", "db")
        .budget(
            steadfast::BudgetConfig::builder()
                .retry_ratio(0.0)
                .min_retries_per_sec(0.0)
                .build()
                .unwrap(),
        )
        .build();
    // A budget of zero retries for `db`: `b` fails at once with BudgetExhausted.
    let err = guard
        .run("b", |_| async {
            Err::<(), _>(ErrorClass::from_status(503))
        })
        .await
        .unwrap_err();
    assert_eq!(
        (err.reason(), err.attempts()),
        (GiveUpReason::BudgetExhausted, 1)
    );
    assert_eq!(guard.breaker("a").unwrap().name(), Some("db"));
}

#[tokio::test(start_paused = true)]
async fn a_tool_policy_wins_and_the_limit_stops_retries() {
    let limit = CallLimit::builder()
        .per_tool(2, Duration::from_secs(60))
        .build()
        .unwrap();
    let guard = Guard::builder()
        .policy(RetryPolicy::builder().max_attempts(5).build().unwrap())
        .tool_policy("once", RetryPolicy::no_retry())
        .call_limit(limit, CallKeys::new().session("s"))
        .build();
    let err = guard
        .run("once", |_| async {
            Err::<(), _>(ErrorClass::from_status(503))
        })
        .await
        .unwrap_err();
    assert_eq!(err.attempts(), 1);
    let err = guard
        .run("many", |_| async {
            Err::<(), _>(ErrorClass::from_status(503))
        })
        .await
        .unwrap_err();
    // Two attempts counted, the third refused and not made.
    assert_eq!(err.attempts(), 3);
    assert_eq!(
        guard.llm_error("many", &err).code,
        LlmErrorCode::ToolCallLimit
    );
}

#[tokio::test(start_paused = true)]
async fn invented_tool_names_do_not_grow_state_without_bound() {
    let guard = Guard::default();
    for i in 0..MAX_TRACKED_TOOLS + 50 {
        guard
            .run(&format!("tool-{i}"), |_| async { Ok::<_, ErrorClass>(()) })
            .await
            .unwrap();
    }
    let tools = guard.metrics().snapshot().tools;
    assert_eq!(tools.len(), MAX_TRACKED_TOOLS + 1);
    assert_eq!(tools[OTHER_TOOLS].calls, 50);
}
