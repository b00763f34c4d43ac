//! The synaptic middleware inside synaptic-middleware 0.4's real `MiddlewareChain`, next to
//! synaptic's own `ToolRetryMiddleware` and `ToolCallLimitMiddleware`.
#![cfg(feature = "synaptic")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use steadfast::{BreakerConfig, CallKeys, CallLimit, FailureMode, RetryPolicy};
use steadfast_agents::Guard;
use steadfast_agents::synaptic::ToolRetry;
use synaptic_core::{SynapticError, Tool, ToolCall};
use synaptic_middleware::{
    AgentMiddleware, MiddlewareChain, ToolCallLimitMiddleware, ToolCallRequest, ToolCaller,
    ToolRetryMiddleware,
};
use tokio::time::Instant;

/// A synaptic tool failing with `error()` on its first `fail` calls.
struct Flaky {
    name: &'static str,
    calls: AtomicU32,
    fail: u32,
    error: fn() -> SynapticError,
}

#[async_trait]
impl Tool for Flaky {
    fn name(&self) -> &'static str {
        self.name
    }
    fn description(&self) -> &'static str {
        "flaky"
    }
    async fn call(&self, _args: Value) -> Result<Value, SynapticError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= self.fail {
            Err((self.error)())
        } else {
            Ok(json!({"ok": n}))
        }
    }
}

fn flaky(name: &'static str, fail: u32, error: fn() -> SynapticError) -> Arc<Flaky> {
    Arc::new(Flaky {
        name,
        calls: AtomicU32::new(0),
        fail,
        error,
    })
}

/// The innermost caller: runs the named tool, as synaptic's tool node does.
struct Tools(Vec<Arc<Flaky>>);

#[async_trait]
impl ToolCaller for Tools {
    async fn call(&self, request: ToolCallRequest) -> Result<Value, SynapticError> {
        let call = &request.call;
        match self.0.iter().find(|t| t.name == call.name) {
            Some(t) => t.call(call.arguments.clone()).await,
            None => Err(SynapticError::ToolNotFound(call.name.clone())),
        }
    }
}

fn request(tool: &str) -> ToolCallRequest {
    ToolCallRequest {
        call: ToolCall {
            id: "call-1".into(),
            name: tool.into(),
            arguments: json!({}),
        },
    }
}

fn chain(middlewares: Vec<Arc<dyn AgentMiddleware>>) -> MiddlewareChain {
    MiddlewareChain::new(middlewares)
}

fn calls(t: &Flaky) -> u32 {
    t.calls.load(Ordering::SeqCst)
}

#[test]
fn the_drop_in_maps_tool_retry_middlewares_defaults() {
    let p = ToolRetry::new(3).policy();
    assert_eq!(
        (p.max_attempts(), p.base_delay(), p.max_delay()),
        (4, Duration::from_millis(100), Duration::from_millis(400))
    );
    let p = ToolRetry::new(3)
        .with_base_delay(Duration::from_millis(500))
        .policy();
    assert_eq!(
        (p.base_delay(), p.max_delay()),
        (Duration::from_millis(500), Duration::from_secs(2))
    );
    assert_eq!(ToolRetry::new(0).policy().max_attempts(), 1);
    // A zero base delay (synaptic allows it) retries at once instead of failing validation.
    assert_eq!(
        ToolRetry::new(2)
            .with_base_delay(Duration::ZERO)
            .policy()
            .max_attempts(),
        3
    );
}

#[tokio::test(start_paused = true)]
async fn a_flaky_tool_is_retried_and_absorbed() {
    let tool = flaky("search", 2, || {
        SynapticError::Tool("HTTP 503 from the search backend".into())
    });
    let base = Tools(vec![tool.clone()]);
    let start = Instant::now();
    let out = chain(vec![Arc::new(ToolRetry::new(3))])
        .call_tool(request("search"), &base)
        .await;
    assert_eq!(out.unwrap(), json!({"ok": 3}));
    assert_eq!(calls(&tool), 3);
    // Jittered within synaptic's envelope (100 ms, then 200 ms).
    assert!(
        start.elapsed() <= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_is_not_retried() {
    let bad = || SynapticError::Validation("`city` is required".into());
    // synaptic's own middleware retries it anyway: 4 calls.
    let theirs = flaky("weather", 9, bad);
    let base = Tools(vec![theirs.clone()]);
    let out = chain(vec![Arc::new(ToolRetryMiddleware::new(3))])
        .call_tool(request("weather"), &base)
        .await;
    assert!(out.is_err());
    assert_eq!(calls(&theirs), 4);
    // The drop-in stops at once and hands the model a sanitized error instead of ending the run.
    let ours = flaky("weather", 9, bad);
    let base = Tools(vec![ours.clone()]);
    let out = chain(vec![Arc::new(ToolRetry::new(3))])
        .call_tool(request("weather"), &base)
        .await;
    let seen = out.unwrap();
    assert_eq!(calls(&ours), 1);
    assert_eq!(
        (seen["code"].as_str(), seen["attemptsMade"].as_u64()),
        (Some("INVALID_REQUEST"), Some(1))
    );
    assert_eq!(seen["tool"], "weather");
}

#[tokio::test(start_paused = true)]
async fn a_breaker_opens_across_the_tools_of_one_dependency() {
    let down = || SynapticError::Tool("connection refused".into());
    let (search, fetch) = (flaky("search", 99, down), flaky("fetch_page", 99, down));
    let base = Tools(vec![search.clone(), fetch.clone()]);
    let guard = Guard::builder()
        .default_dependency("web-api")
        .breaker(
            BreakerConfig::builder()
                .failure_threshold(2)
                .build()
                .unwrap(),
        )
        .build();
    let mw = ToolRetry::new(0).with_guard(guard);
    let chain = chain(vec![Arc::new(mw)]);
    for _ in 0..2 {
        let seen = chain.call_tool(request("search"), &base).await.unwrap();
        assert_eq!(seen["code"], "SERVICE_UNAVAILABLE");
    }
    let seen = chain.call_tool(request("fetch_page"), &base).await.unwrap();
    assert_eq!(seen["code"], "CIRCUIT_OPEN");
    assert_eq!((calls(&search), calls(&fetch)), (2, 0));
}

#[tokio::test(start_paused = true)]
async fn the_model_visible_error_is_sanitized() {
    let leaky = || {
        SynapticError::Tool("HTTP 401 from https://admin:hunter22@api.internal/v1 (Bearer sk-live-abcdefghijklmnopqrstuvwx)".into())
    };
    let tool = flaky("crm", 9, leaky);
    let base = Tools(vec![tool.clone()]);
    let seen = chain(vec![Arc::new(ToolRetry::new(3))])
        .call_tool(request("crm"), &base)
        .await
        .unwrap();
    let text = seen.to_string();
    assert_eq!(seen["code"], "INVALID_REQUEST");
    for secret in ["hunter22", "sk-live-abcdefghijklmnopqrstuvwx"] {
        assert!(!text.contains(secret), "{text}");
    }
    // As an error instead of a value: the same sanitized text.
    let mw = ToolRetry::new(3).with_failure_mode(FailureMode::Error);
    let err = chain(vec![Arc::new(mw)])
        .call_tool(request("crm"), &base)
        .await
        .unwrap_err();
    let SynapticError::Tool(text) = err else {
        panic!("a tool error")
    };
    assert!(
        text.contains("INVALID_REQUEST") && !text.contains("hunter22"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_guards_call_limit_counts_every_retry() {
    let limit = CallLimit::builder()
        .per_session(4, Duration::from_secs(3600))
        .build()
        .unwrap();
    let guard = Guard::builder()
        .no_breaker()
        .call_limit(limit, CallKeys::new().session("thread-1"))
        .build();
    let tool = flaky("search", 99, || SynapticError::Timeout("deadline".into()));
    let base = Tools(vec![tool.clone()]);
    let chain = chain(vec![Arc::new(ToolRetry::new(2).with_guard(guard))]);
    assert_eq!(
        chain.call_tool(request("search"), &base).await.unwrap()["code"],
        "TIMEOUT"
    );
    assert_eq!(calls(&tool), 3);
    let seen = chain.call_tool(request("search"), &base).await.unwrap();
    assert_eq!(
        (calls(&tool), seen["code"].as_str()),
        (4, Some("TOOL_CALL_LIMIT"))
    );
}

#[tokio::test(start_paused = true)]
async fn synaptics_own_limit_counts_retries_when_listed_after() {
    let tool = flaky("search", 99, || SynapticError::RateLimit("429".into()));
    let base = Tools(vec![tool.clone()]);
    let limit = Arc::new(ToolCallLimitMiddleware::new(4));
    let chain = chain(vec![
        Arc::new(
            ToolRetry::new(3).with_policy(RetryPolicy::builder().max_attempts(4).build().unwrap()),
        ),
        limit.clone(),
    ]);
    // Four attempts, four calls through the limit.
    assert_eq!(
        chain.call_tool(request("search"), &base).await.unwrap()["code"],
        "RATE_LIMITED"
    );
    assert_eq!((calls(&tool), limit.call_count()), (4, 4));
    // The limit's refusal (MaxStepsExceeded) is permanent: one refused attempt, no retries.
    let seen = chain.call_tool(request("search"), &base).await.unwrap();
    assert_eq!(seen["code"], "TOOL_CALL_LIMIT");
    assert_eq!((calls(&tool), limit.call_count()), (4, 5));
}

#[tokio::test(start_paused = true)]
async fn listed_before_the_retry_synaptics_limit_counts_one_call() {
    // What synaptic's docs show (limit first, "each retry counts as a separate tool call"):
    // in synaptic 0.4 the first middleware is the outermost, so four attempts count once.
    let tool = flaky("search", 3, || {
        SynapticError::Tool("503 Service Unavailable".into())
    });
    let base = Tools(vec![tool.clone()]);
    let limit = Arc::new(ToolCallLimitMiddleware::new(30));
    let chain = chain(vec![limit.clone(), Arc::new(ToolRetry::new(3))]);
    chain.call_tool(request("search"), &base).await.unwrap();
    assert_eq!((calls(&tool), limit.call_count()), (4, 1));
}
