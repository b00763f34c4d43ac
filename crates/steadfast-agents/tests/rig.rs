//! The rig adapter against rig-core 0.44 and rig-agent's own agent loop over its scripted model.
#![cfg(feature = "rig")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rig_agent::agent::AgentBuilder;
use rig_agent::completion::Message;
use rig_agent::test_utils::{MockCompletionModel, MockTurn};
use rig_core::message::ToolName;
use rig_core::tool::{
    DynamicTool, PortableTool, Tool, ToolContext, ToolErrorKind, ToolExecutionError, ToolOutput,
};
use serde_json::{Value, json};
use steadfast::{BreakerConfig, CallKeys, CallLimit, ErrorClass, RetryPolicy};
use steadfast_agents::Guard;
use tokio::time::Instant;

/// `search`: fails with `error()` on its first `fail` calls, then succeeds.
#[derive(Clone)]
struct Search {
    calls: Arc<AtomicU32>,
    fail: u32,
    error: fn() -> ToolExecutionError,
}

impl Search {
    fn new(fail: u32, error: fn() -> ToolExecutionError) -> Self {
        Self {
            calls: Arc::default(),
            fail,
            error,
        }
    }
    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl PortableTool for Search {
    const NAME: &'static str = "search";
    type Args = Value;
    type Output = String;
    type Error = ToolExecutionError;

    fn description(&self) -> String {
        "Searches the web".into()
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"q": {"type": "string"}}})
    }
    async fn call(&self, args: Value) -> Result<String, ToolExecutionError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= self.fail {
            return Err((self.error)());
        }
        Ok(format!(
            "hits for {} after {n} calls",
            args["q"].as_str().unwrap_or("?")
        ))
    }
}

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .build()
        .unwrap()
}

fn model_output(e: &ToolExecutionError) -> Value {
    match e.model_output().as_json() {
        Some(v) => v.clone(),
        None => panic!(
            "the model-visible output is JSON: {:?}",
            e.model_output().as_text()
        ),
    }
}

#[tokio::test(start_paused = true)]
async fn a_flaky_tool_is_retried_and_absorbed() {
    let search = Search::new(2, || ToolExecutionError::network("connection reset"));
    let tool = Guard::builder()
        .policy(policy(3))
        .seed(7)
        .build()
        .rig(search.clone());
    let start = Instant::now();
    let out = tool
        .call(&mut ToolContext::new(), json!({"q": "rust"}))
        .await
        .unwrap();
    assert_eq!(out.as_text(), Some("hits for rust after 3 calls"));
    assert_eq!(search.calls(), 3);
    // Two jittered waits within 100 ms and 200 ms: the backoff ran on the (paused) clock.
    assert!(
        start.elapsed() <= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_is_not_retried() {
    let search = Search::new(9, || {
        ToolExecutionError::invalid_args("`q` must not be empty")
    });
    let tool = Guard::builder()
        .policy(policy(5))
        .build()
        .rig(search.clone());
    let err = tool
        .call(&mut ToolContext::new(), json!({}))
        .await
        .unwrap_err();
    assert_eq!(search.calls(), 1);
    assert_eq!(err.kind(), ToolErrorKind::InvalidArgs);
    assert_eq!(err.retryable(), Some(false));
    let seen = model_output(&err);
    assert_eq!(seen["code"], "INVALID_REQUEST");
    assert_eq!(seen["message"], "`q` must not be empty");
    assert_eq!(seen["attemptsMade"], 1);
    // The original error stays reachable for the operator.
    assert_eq!(
        err.downcast_ref::<ToolExecutionError>().unwrap().message(),
        "`q` must not be empty"
    );
}

#[tokio::test(start_paused = true)]
async fn the_tools_explicit_verdict_beats_its_kind() {
    // A network error the tool says is final.
    let final_net = Search::new(9, || {
        ToolExecutionError::network("gone").with_retryable(false)
    });
    let guard = Guard::builder().policy(policy(4)).no_breaker().build();
    guard
        .rig(final_net.clone())
        .call(&mut ToolContext::new(), json!({}))
        .await
        .unwrap_err();
    assert_eq!(final_net.calls(), 1);
    // An `Other` error (no verdict by kind) the tool says is worth retrying.
    let retry_me = Search::new(1, || {
        ToolExecutionError::other("shard moving").with_retryable(true)
    });
    guard
        .rig(retry_me.clone())
        .call(&mut ToolContext::new(), json!({}))
        .await
        .unwrap();
    assert_eq!(retry_me.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_http_status_classifies_and_retry_after_is_honoured() {
    // A 404 from the provider is permanent, whatever the kind's default says.
    let missing = Search::new(9, || {
        ToolExecutionError::provider("no such index").with_http_status(404)
    });
    let guard = Guard::builder().policy(policy(4)).no_breaker().build();
    let err = guard
        .rig(missing.clone())
        .call(&mut ToolContext::new(), json!({}))
        .await
        .unwrap_err();
    assert_eq!((missing.calls(), err.http_status()), (1, Some(404)));

    // A 429 whose source says "retry after 5 s": the engine waits that long, not 100 ms.
    let limited = Search::new(1, || {
        ToolExecutionError::rate_limited("slow down")
            .with_http_status(429)
            .with_source(ErrorClass::from_status(429).with_retry_after(Duration::from_secs(5)))
    });
    let start = Instant::now();
    guard
        .rig(limited.clone())
        .call(&mut ToolContext::new(), json!({}))
        .await
        .unwrap();
    assert_eq!(limited.calls(), 2);
    assert!(
        start.elapsed() >= Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

/// A runtime-defined tool that always fails with a network error, counting its calls.
fn down(name: &str, calls: Arc<AtomicU32>) -> DynamicTool {
    DynamicTool::new(
        ToolName::new(name).unwrap(),
        "Backed by the web API",
        json!({"type": "object"}),
        move |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Err(ToolExecutionError::network("connection refused")) })
        },
    )
}

#[tokio::test(start_paused = true)]
async fn a_breaker_opens_across_the_tools_of_one_dependency() {
    let guard = Guard::builder()
        .policy(RetryPolicy::no_retry())
        .dependency("search", "web-api")
        .dependency("fetch_page", "web-api")
        .breaker(
            BreakerConfig::builder()
                .failure_threshold(2)
                .build()
                .unwrap(),
        )
        .build();
    let (a, b) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    // The whole set, wrapped in one line.
    let tools = guard.rig_all([down("search", a.clone()), down("fetch_page", b.clone())]);
    for _ in 0..2 {
        let err = tools[0].execute(json!({})).await.unwrap_err();
        assert_eq!(model_output(&err)["code"], "SERVICE_UNAVAILABLE");
    }
    // `fetch_page` shares the breaker `search` tripped: it is not even called.
    let err = tools[1].execute(json!({})).await.unwrap_err();
    assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (2, 0));
    assert_eq!(model_output(&err)["code"], "CIRCUIT_OPEN");
    // Not for the model to retry right away: the breaker says when.
    assert_eq!(err.retryable(), Some(false));
    assert_eq!(tools[1].name().as_str(), "fetch_page");
}

#[tokio::test(start_paused = true)]
async fn the_model_visible_error_is_sanitized() {
    let search = Search::new(9, || {
        ToolExecutionError::invalid_args(
            "index rejected key sk-live-abcdefghijklmnopqrstuvwx at http://10.1.2.3:9200/_search",
        )
    });
    let err = Guard::default()
        .rig(search)
        .call(&mut ToolContext::new(), json!({}))
        .await
        .unwrap_err();
    let seen = model_output(&err).to_string();
    assert!(seen.contains("INVALID_REQUEST"), "{seen}");
    for secret in ["sk-live-abcdefghijklmnopqrstuvwx", "10.1.2.3"] {
        assert!(!seen.contains(secret), "{seen}");
        assert!(!err.message().contains(secret), "{}", err.message());
    }
}

#[tokio::test(start_paused = true)]
async fn the_call_limit_counts_every_retry() {
    let limit = CallLimit::builder()
        .per_session(4, Duration::from_secs(3600))
        .build()
        .unwrap();
    let guard = Guard::builder()
        .policy(policy(3))
        .no_breaker()
        .call_limit(limit, CallKeys::new().session("conversation-1"))
        .build();
    let search = Search::new(99, || ToolExecutionError::timeout("took too long"));
    let tool = guard.rig(search.clone());
    // Three attempts: three calls counted.
    let first = tool
        .call(&mut ToolContext::new(), json!({}))
        .await
        .unwrap_err();
    assert_eq!(
        (search.calls(), model_output(&first)["code"].as_str()),
        (3, Some("TIMEOUT"))
    );
    // One left: the retry after it is refused, not made.
    let second = tool
        .call(&mut ToolContext::new(), json!({}))
        .await
        .unwrap_err();
    assert_eq!(search.calls(), 4);
    assert_eq!(model_output(&second)["code"], "TOOL_CALL_LIMIT");
    assert_eq!(second.retryable(), Some(false));
}

/// The agent loop: rig-agent's scripted model calls `search`, and the next request it receives
/// carries what the tool answered.
async fn run_agent(tool: impl Tool + 'static) -> String {
    let model = MockCompletionModel::from_turns([
        MockTurn::tool_call("tc1", "search", json!({"q": "rust"})),
        MockTurn::text("done"),
    ]);
    let answer = AgentBuilder::new(model.clone())
        .tool(tool)
        .build()
        .prompt(Message::user("search for rust"))
        .max_turns(3)
        .run()
        .await
        .expect("the agent run finishes");
    let _ = answer;
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    serde_json::to_string(&requests[1].chat_history).unwrap()
}

#[tokio::test(start_paused = true)]
async fn inside_rigs_agent_loop() {
    let flaky = Search::new(2, || {
        ToolExecutionError::provider("upstream").with_http_status(503)
    });
    let seen = run_agent(
        Guard::builder()
            .policy(policy(3))
            .build()
            .rig(flaky.clone()),
    )
    .await;
    assert_eq!(flaky.calls(), 3);
    assert!(seen.contains("hits for rust after 3 calls"), "{seen}");

    let leaky = Search::new(9, || {
        ToolExecutionError::invalid_args(
            "bad query; Authorization: Bearer sk-live-abcdefghijklmnopqrstuvwx",
        )
    });
    let seen = run_agent(Guard::default().rig(leaky)).await;
    assert!(seen.contains("INVALID_REQUEST"), "{seen}");
    assert!(!seen.contains("sk-live-abcdefghijklmnopqrstuvwx"), "{seen}");
}

#[test]
fn the_wrapper_keeps_the_definition() {
    let tool = Guard::default().rig(Search::new(0, || ToolExecutionError::other("x")));
    assert_eq!(
        <steadfast_agents::rig::Resilient<Search> as Tool>::NAME,
        "search"
    );
    assert_eq!(Tool::description(&tool), "Searches the web");
    assert_eq!(Tool::parameters(&tool)["properties"]["q"]["type"], "string");
    let _: Option<ToolOutput> = None;
}
