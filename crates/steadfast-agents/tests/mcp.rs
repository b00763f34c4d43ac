//! The rmcp adapter against a real child process: the repo's example server (`steadfast
//! example-server`), started through a shell that records its pid so a test can kill it.
//!
//! The server is the `steadfast` binary: `cargo test --workspace` builds it before running any
//! test; for this crate alone, `cargo build -p steadfast-cli` first (or set `STEADFAST_BIN`).
#![cfg(feature = "rmcp")]

use std::path::PathBuf;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use serde_json::{Value, json};
use steadfast::{BreakerConfig, CallKeys, CallLimit, RetryPolicy};
use steadfast_agents::Guard;
use steadfast_agents::mcp::McpTools;
use steadfast_mcp::{Reconnecting, Upstream, tool_result_text};

fn example_server() -> PathBuf {
    if let Ok(bin) = std::env::var("STEADFAST_BIN") {
        return bin.into();
    }
    // tests run from target/<profile>/deps; the binary sits one level up.
    let exe = std::env::current_exe().expect("the test's own path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join(format!("steadfast{}", std::env::consts::EXE_SUFFIX)))
        .expect("a target directory");
    assert!(
        bin.exists(),
        "{} is missing: the example server is the `steadfast` binary; run \
         `cargo build -p steadfast-cli` (or set STEADFAST_BIN)",
        bin.display()
    );
    bin
}

struct Server {
    conn: Reconnecting<()>,
    pidfile: PathBuf,
}

impl Server {
    async fn start(name: &str) -> Self {
        let pidfile = std::env::temp_dir().join(format!(
            "steadfast-agents-{name}-{}.pid",
            std::process::id()
        ));
        let script = format!(
            "echo $$ > '{}'; exec '{}' example-server",
            pidfile.display(),
            example_server().display()
        );
        let fast = RetryPolicy::builder()
            .base_delay(Duration::from_millis(20))
            .max_delay(Duration::from_millis(200))
            .max_attempts(10)
            .build()
            .unwrap();
        let conn = Reconnecting::builder(Upstream::command("sh", ["-c", script.as_str()]), || ())
            .reconnect_policy(fast)
            .connect()
            .await
            .expect("the example server starts");
        Self { conn, pidfile }
    }

    fn kill(&self) {
        let pid = std::fs::read_to_string(&self.pidfile).expect("the pid file");
        let status = std::process::Command::new("kill")
            .args(["-9", pid.trim()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    fn tools(&self, guard: Guard) -> McpTools {
        McpTools::reconnecting(&self.conn).guard(guard)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.conn.shutdown();
        let _ = std::fs::remove_file(&self.pidfile);
    }
}

fn params(tool: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    CallToolRequestParams::new(tool.to_owned()).with_arguments(JsonObject::from_iter(args))
}

fn text(r: &CallToolResult) -> String {
    tool_result_text(r)
}

/// How often the server process has been called, per tool (the `calls` tool itself included).
async fn server_calls(tools: &McpTools) -> Value {
    let r = tools.call_tool(params("calls", json!({}))).await;
    serde_json::from_str(&text(&r)).expect("calls answers JSON")
}

fn fast(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .base_delay(Duration::from_millis(10))
        .max_delay(Duration::from_millis(50))
        .build()
        .unwrap()
}

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), Box::pin(f))
        .await
        .expect("the test finishes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flaky_absorbed_permanent_not_retried_errors_sanitized() {
    within(async {
        let server = Server::start("basic").await;
        let tools = server.tools(Guard::builder().policy(fast(3)).no_breaker().build());
        // 503 in an isError result on two calls of three: absorbed.
        let r = tools
            .call_tool(params("flaky_search", json!({"query": "rust"})))
            .await;
        assert_eq!(
            (r.is_error, text(&r).as_str()),
            (Some(false), "results for rust")
        );
        // A JSON-RPC invalid-params error: permanent.
        let r = tools.call_tool(params("strict", json!({}))).await;
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            r.structured_content.as_ref().unwrap()["code"],
            "INVALID_REQUEST"
        );
        // A business failure (file not found) goes to the model once, sanitized.
        let r = tools
            .call_tool(params("read_file", json!({"path": "notes.txt"})))
            .await;
        let seen = text(&r);
        assert!(seen.contains("file not found: notes.txt"), "{seen}");
        assert!(!seen.contains("sk-live-abcdefghijklmnopqrstuvwx"), "{seen}");
        assert!(!seen.contains("/srv/app/node_modules"), "{seen}");
        let calls = server_calls(&tools).await;
        assert_eq!(
            (
                calls["flaky_search"].as_u64(),
                calls["strict"].as_u64(),
                calls["read_file"].as_u64()
            ),
            (Some(3), Some(1), Some(1))
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_opens_across_the_tools_of_one_server() {
    within(async {
        let server = Server::start("breaker").await;
        let guard = Guard::builder()
            .policy(RetryPolicy::no_retry())
            .default_dependency("example-server")
            .breaker(
                BreakerConfig::builder()
                    .failure_threshold(2)
                    .build()
                    .unwrap(),
            )
            .build();
        let tools = server.tools(guard.clone());
        for _ in 0..2 {
            let r = tools.call_tool(params("flaky_search", json!({}))).await;
            assert_eq!(r.structured_content.unwrap()["code"], "SERVICE_UNAVAILABLE");
        }
        let r = tools.call_tool(params("echo", json!({"x": 1}))).await;
        assert_eq!(r.structured_content.unwrap()["code"], "CIRCUIT_OPEN");
        // `echo` never reached the server: ask it without the breaker.
        let direct = server.tools(Guard::builder().no_breaker().build());
        assert_eq!(server_calls(&direct).await.get("echo"), None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_call_limit_counts_retries() {
    within(async {
        let server = Server::start("limit").await;
        let limit = CallLimit::builder()
            .per_session(2, Duration::from_secs(3600))
            .build()
            .unwrap();
        let guard = Guard::builder()
            .policy(fast(3))
            .no_breaker()
            .call_limit(limit, CallKeys::new().session("s-1"))
            .build();
        let r = server
            .tools(guard)
            .call_tool(params("flaky_search", json!({})))
            .await;
        assert_eq!(r.structured_content.unwrap()["code"], "TOOL_CALL_LIMIT");
        let direct = server.tools(Guard::builder().no_breaker().build());
        assert_eq!(server_calls(&direct).await["flaky_search"], 2);
    })
    .await;
}

/// Waits until the server has started `tool` once, so a kill lands mid-call.
async fn wait_until_running(tools: &McpTools, tool: &str) {
    loop {
        if server_calls(tools).await.get(tool).is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_call_a_side_effect_is_not_replayed() {
    within(async {
        let server = Server::start("kill-email").await;
        let tools = server.tools(Guard::builder().policy(fast(5)).no_breaker().build());
        let call = tokio::spawn({
            let tools = tools.clone();
            async move {
                tools
                    .call_tool(params(
                        "send_email",
                        json!({"to": "a@b.c", "delay_ms": 5000}),
                    ))
                    .await
            }
        });
        wait_until_running(&tools, "send_email").await;
        server.kill();
        let r = call.await.unwrap();
        assert_eq!(r.is_error, Some(true));
        let seen = r.structured_content.unwrap();
        assert!(
            seen["message"]
                .as_str()
                .unwrap()
                .contains("outcome of this call is unknown"),
            "{seen}"
        );
        assert_eq!(seen["code"], "OUTCOME_UNKNOWN");
        assert_eq!(seen["attemptsMade"], 1);
        // The new server process never saw a replay.
        let calls = server_calls(&tools).await;
        assert_eq!(calls.get("send_email"), None, "{calls}");
        assert!(server.conn.reconnects() >= 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_call_a_read_only_call_is_replayed_on_the_new_connection() {
    within(async {
        let server = Server::start("kill-report").await;
        let tools = server.tools(Guard::builder().policy(fast(4)).no_breaker().build());
        let call = tokio::spawn({
            let tools = tools.clone();
            async move {
                tools
                    .call_tool(params("slow_report", json!({"seconds": 1})))
                    .await
            }
        });
        wait_until_running(&tools, "slow_report").await;
        server.kill();
        let r = call.await.unwrap();
        assert_eq!(
            (r.is_error, text(&r).as_str()),
            (Some(false), "report done in 1s")
        );
        // Replayed once, on the restarted server.
        assert_eq!(server_calls(&tools).await["slow_report"], 1);
        assert!(server.conn.reconnects() >= 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_running_service_retries_then_fails_fast_once_its_server_is_gone() {
    within(async {
        let pidfile =
            std::env::temp_dir().join(format!("steadfast-agents-plain-{}.pid", std::process::id()));
        let script = format!(
            "echo $$ > '{}'; exec '{}' example-server",
            pidfile.display(),
            example_server().display()
        );
        let upstream = Upstream::command("sh", ["-c", script.as_str()]);
        let running = steadfast_mcp::connect(&upstream, &fast(3), || ())
            .await
            .expect("connects");
        let tools = McpTools::running(&running)
            .guard(Guard::builder().policy(fast(3)).no_breaker().build());
        let r = tools
            .call_tool(params("flaky_search", json!({"query": "q"})))
            .await;
        assert_eq!(r.is_error, Some(false));
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        assert!(
            std::process::Command::new("kill")
                .args(["-9", pid.trim()])
                .status()
                .unwrap()
                .success()
        );
        // No reconnection here: every attempt fails before it is sent, so the policy gives up.
        let r = tools.call_tool(params("echo", json!({}))).await;
        let seen = r.structured_content.unwrap();
        assert_eq!(
            (seen["code"].as_str(), seen["attemptsMade"].as_u64()),
            (Some("SERVICE_UNAVAILABLE"), Some(3))
        );
        let _ = std::fs::remove_file(&pidfile);
    })
    .await;
}
