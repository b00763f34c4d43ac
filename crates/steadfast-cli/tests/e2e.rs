//! End to end over real stdio pipes: an rmcp client → `steadfast proxy` → `steadfast
//! example-server`. These run real processes, so they wait on real time — by polling with
//! generous deadlines, never by asserting on durations.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientConfig, ClientRequest,
    ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_steadfast");

#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<(ProgressToken, f64)>>>,
    logs: Arc<Mutex<Vec<Value>>>,
    list_changed: Arc<AtomicU32>,
}

impl ClientHandler for Recorder {
    async fn on_progress(&self, p: ProgressNotificationParam, _c: NotificationContext<RoleClient>) {
        self.progress
            .lock()
            .unwrap()
            .push((p.progress_token, p.progress));
    }

    async fn on_tool_list_changed(&self, _c: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
    }

    // Logging is deprecated by SEP-2577 but still spoken by current servers; the proxy must relay it.
    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        p: rmcp::model::LoggingMessageNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(p.data);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

struct Session {
    client: RunningService<RoleClient, Recorder>,
    recorder: Recorder,
    _config: TempFile,
}

struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

async fn start(config: &str) -> Session {
    start_with(config, &["--", BIN, "example-server"]).await
}

async fn start_with(config: &str, upstream_args: &[&str]) -> Session {
    static N: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "steadfast-e2e-{}-{}.toml",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::write(&path, config).unwrap();
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("proxy")
        .arg("--config")
        .arg(&path)
        .args(upstream_args)
        .kill_on_drop(true);
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let recorder = Recorder::default();
    let client = recorder.clone().serve(transport).await.unwrap();
    Session {
        client,
        recorder,
        _config: TempFile(path),
    }
}

fn params(name: &str, args: Value) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(name.to_owned());
    if let Value::Object(m) = args {
        p.arguments = Some(m);
    }
    p
}

impl Session {
    async fn call(&self, name: &str, args: Value) -> CallToolResult {
        tokio::time::timeout(
            Duration::from_secs(30),
            self.client.call_tool(params(name, args)),
        )
        .await
        .expect("call finished")
        .expect("call answered")
    }

    /// A call the upstream refuses with a JSON-RPC error: that error, as the client gets it.
    async fn call_refused(&self, name: &str, args: Value) -> rmcp::model::ErrorData {
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            self.client.call_tool(params(name, args)),
        )
        .await
        .expect("call finished");
        match r {
            Err(rmcp::ServiceError::McpError(e)) => e,
            other => panic!("expected a JSON-RPC error, got {other:?}"),
        }
    }

    /// How often the upstream saw each tool (its own counter, since its last start).
    async fn upstream_calls(&self) -> Value {
        let r = self.call("calls", json!({})).await;
        serde_json::from_str(&steadfast_mcp::tool_result_text(&r)).unwrap()
    }

    async fn wait_upstream(&self, key: &str, want: u64) -> Value {
        for _ in 0..100 {
            let calls = self.upstream_calls().await;
            if calls[key].as_u64() == Some(want) {
                return calls;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "upstream never counted {key} = {want}: {}",
            self.upstream_calls().await
        );
    }
}

fn llm_error(r: &CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let text: Value = serde_json::from_str(&steadfast_mcp::tool_result_text(r)).unwrap();
    assert_eq!(Some(&text), r.structured_content.as_ref());
    text
}

const FAST: &str = r#"
[defaults]
retry = { max_attempts = 4, base_delay = "10ms", max_delay = "50ms", attempt_timeout = "5s" }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failures_are_absorbed() {
    let s = start(FAST).await;
    for i in 0..3 {
        let r = s
            .call("flaky_search", json!({"query": format!("q{i}")}))
            .await;
        assert_eq!(r.is_error, Some(false), "{r:?}");
        assert_eq!(
            steadfast_mcp::tool_result_text(&r),
            format!("results for q{i}")
        );
    }
    // Every call failed twice upstream before succeeding.
    assert_eq!(s.upstream_calls().await["flaky_search"], 9);
    let r = s.call("rate_limited", json!({})).await;
    assert_eq!(r.is_error, Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_idempotent_tool_is_not_replayed_after_a_timeout() {
    let s = start(
        r#"
[defaults]
retry = { max_attempts = 4, base_delay = "10ms", attempt_timeout = "300ms" }
"#,
    )
    .await;
    let r = s
        .call(
            "send_email",
            json!({"to": "a@example.com", "delay_ms": 3000}),
        )
        .await;
    let e = llm_error(&r);
    assert_eq!(e["code"], "OUTCOME_UNKNOWN");
    assert_eq!(e["retriable"], false);
    assert_eq!(e["attemptsMade"], 1);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("outcome of this call is unknown"),
        "{e}"
    );
    assert_eq!(s.upstream_calls().await["send_email"], 1);

    // A read-only tool is replayed after the same kind of failure.
    let r = s.call("hang", json!({})).await;
    assert_eq!(llm_error(&r)["attemptsMade"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_failures_arrive_as_sanitized_errors() {
    let s = start(FAST).await;
    // The upstream's `invalid params` keeps its class (issue 36 item 14): a JSON-RPC error, as
    // direct, its text sanitized.
    let e = s.call_refused("strict", json!({})).await;
    assert_eq!(e.code.0, -32602, "{e:?}");
    assert_eq!(s.upstream_calls().await["strict"], 1, "not retried");

    // A business failure reaches the model as the tool wrote it, minus secrets and internals.
    let r = s.call("read_file", json!({"path": "/etc/app.yml"})).await;
    assert_eq!(r.is_error, Some(true));
    let text = steadfast_mcp::tool_result_text(&r);
    assert!(text.starts_with("file not found: /etc/app.yml"), "{text}");
    assert!(!text.contains("sk-live"), "{text}");
    assert!(!text.contains("node_modules"), "{text}");
    assert_eq!(
        s.upstream_calls().await["read_file"],
        1,
        "business failures are not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_opens_and_fails_fast() {
    let s = start(
        r#"
[tools.hang]
retry = { max_attempts = 1, attempt_timeout = "200ms" }
breaker = { failure_threshold = 2, reset_timeout = "60s" }
"#,
    )
    .await;
    for _ in 0..2 {
        assert_eq!(
            llm_error(&s.call("hang", json!({})).await)["code"],
            "TIMEOUT"
        );
    }
    let e = llm_error(&s.call("hang", json!({})).await);
    assert_eq!(e["code"], "CIRCUIT_OPEN");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("circuit"),
        "{e}"
    );
    assert_eq!(
        s.upstream_calls().await["hang"],
        2,
        "the open breaker made no call"
    );
    // Other tools have their own breakers.
    assert_eq!(s.call("echo", json!({})).await.is_error, Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_reach_the_client_with_its_token() {
    let s = start(FAST).await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params(
        "slow_report",
        json!({"seconds": 2}),
    )));
    let handle = s
        .client
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    let token = handle.progress_token.clone();
    let r = handle.await_response().await.unwrap();
    assert!(
        matches!(r, rmcp::model::ServerResult::CallToolResult(ref c) if c.is_error != Some(true)),
        "{r:?}"
    );
    let seen = s.recorder.progress.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter().all(|(t, _)| *t == token),
        "the client's own token: {seen:?} vs {token:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cancel_reaches_the_upstream() {
    let s = start(FAST).await;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params("hang", json!({}))));
    let handle = s
        .client
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    s.wait_upstream("hang", 1).await;
    handle
        .cancel(Some("user pressed stop".into()))
        .await
        .unwrap();
    let calls = s.wait_upstream("hang:cancelled", 1).await;
    assert_eq!(calls["hang"], 1, "a cancelled call is not retried: {calls}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_upstream_is_restarted_and_the_next_call_succeeds() {
    let s = start(
        r#"
[proxy]
health_tool = "steadfast_health"
[defaults]
retry = { max_attempts = 4, base_delay = "10ms", max_delay = "50ms", attempt_timeout = "5s" }
"#,
    )
    .await;
    assert_eq!(s.call("echo", json!({"n": 1})).await.is_error, Some(false));
    let e = llm_error(&s.call("crash", json!({})).await);
    assert!(
        e["message"].as_str().unwrap().contains("unknown"),
        "crash is not idempotent: {e}"
    );
    let r = s.call("echo", json!({"n": 2})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(
        s.upstream_calls().await["echo"],
        1,
        "a fresh upstream process"
    );
    for _ in 0..100 {
        if s.recorder.list_changed.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        s.recorder.list_changed.load(Ordering::SeqCst) >= 1,
        "tools/list_changed sent"
    );
    let health = s
        .call("steadfast_health", json!({}))
        .await
        .structured_content
        .unwrap();
    assert_eq!(health["upstream"]["restarts"], 1);
    assert_eq!(health["upstream"]["connected"], true);
    // Counted as what the model was told (a replay held back: the outcome is unknown), not as
    // the failure the engine stopped on.
    assert_eq!(
        health["tools"]["crash"]["failures"],
        json!({"OUTCOME_UNKNOWN": 1}),
        "{health}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_mirrors_the_upstream_and_adds_the_health_tool() {
    let s = start("[proxy]\nhealth_tool = \"health\"\n").await;
    let tools = s.client.list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"flaky_search".to_owned()), "{names:?}");
    assert_eq!(names.last().map(String::as_str), Some("health"));
    let info = s.client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().unwrap().name,
        "steadfast-example-server"
    );
    assert_eq!(
        info.instructions.as_deref(),
        Some("An unreliable server for trying steadfast")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_the_upstream_does_not_stop_the_proxy() {
    let s = start(FAST).await;
    let r = s.call("garbage", json!({})).await;
    assert_eq!(
        steadfast_mcp::tool_result_text(&r),
        "ok after garbage",
        "{r:?}"
    );
    assert_eq!(s.call("echo", json!({"x": 1})).await.is_error, Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_the_client_gets_an_error_and_the_proxy_keeps_serving() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut child = tokio::process::Command::new(BIN)
        .args(["proxy", "--", BIN, "example-server"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |v: &str| {
        stdin.write_all(v.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    };
    send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#).await;
    let init: Value = serde_json::from_str(&next_line(&mut lines).await).unwrap();
    assert_eq!(init["id"], 1);
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    // Not JSON at all: ignored, as rmcp and the other official SDKs do (answering unparsable
    // input can start an error storm with a peer that echoes it).
    send("this is not json").await;
    // JSON that is not a JSON-RPC message: a protocol error.
    send(r#"{"jsonrpc":"2.0","id":7,"params":3}"#).await;
    send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"ok":true}}}"#).await;
    let error: Value = serde_json::from_str(&next_line(&mut lines).await).unwrap();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    let v: Value = serde_json::from_str(&next_line(&mut lines).await).unwrap();
    assert_eq!(v["id"], 2, "{v}");
    assert_eq!(v["result"]["isError"], false, "the proxy kept serving: {v}");
}

async fn next_line(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) -> String {
    tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("a line within 20 s")
        .unwrap()
        .expect("stdout open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_and_logging_pass_through() {
    let s = start(FAST).await;
    let prompts = s.client.list_all_prompts().await.unwrap();
    assert_eq!(
        prompts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["triage"]
    );
    assert!(
        s.client.peer_info().unwrap().capabilities.prompts.is_some(),
        "capabilities mirrored"
    );
    s.call("log", json!({"note": "disk almost full"})).await;
    for _ in 0..100 {
        if !s.recorder.logs.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        *s.recorder.logs.lock().unwrap(),
        [json!({"note": "disk almost full"})]
    );
    // Upstream error text is sanitized on the way through, code kept.
    let err = s
        .client
        .get_prompt(rmcp::model::GetPromptRequestParams::new("triage"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("prompt `triage` failed"), "{err}");
    for secret in ["hunter22", "sk-live", "ghp_"] {
        assert!(!err.contains(secret), "{secret} leaked: {err}");
    }
    // A method the upstream does not serve fails as the upstream says, and nothing breaks.
    assert!(s.client.list_all_resources().await.is_err());
    assert_eq!(s.call("echo", json!({})).await.is_error, Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_safe_call_in_flight_when_the_upstream_dies_is_replayed_after_the_restart() {
    let s = start(
        r#"
[proxy]
health_tool = "steadfast_health"
[defaults]
retry = { max_attempts = 3, base_delay = "10ms", max_delay = "50ms", attempt_timeout = "10s" }
"#,
    )
    .await;
    let peer = s.client.peer().clone();
    let slow = tokio::spawn(async move {
        peer.call_tool(params("slow_report", json!({"seconds": 1})))
            .await
    });
    s.wait_upstream("slow_report", 1).await;
    let crashed = s.call("crash", json!({})).await;
    assert_eq!(crashed.is_error, Some(true));
    let r = tokio::time::timeout(Duration::from_secs(30), slow)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        r.is_error,
        Some(false),
        "the read-only call was replayed: {r:?}"
    );
    assert_eq!(steadfast_mcp::tool_result_text(&r), "report done in 1s");
    // The fresh process saw it once: the replay.
    assert_eq!(s.upstream_calls().await["slow_report"], 1);
    let health = s
        .call("steadfast_health", json!({}))
        .await
        .structured_content
        .unwrap();
    assert_eq!(health["upstream"]["restarts"], 1);
    assert_eq!(health["tools"]["slow_report"]["successes_after_retry"], 1);
}

#[cfg(feature = "http")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_upstream_gets_the_same_treatment() {
    use tokio::io::AsyncBufReadExt;
    let mut server = tokio::process::Command::new(BIN)
        .args(["example-server", "--http", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let url = first.strip_prefix("listening on ").unwrap().to_owned();
    let config = format!("[upstream]\nurl = \"{url}\"\n{FAST}");
    let s = start_with(&config, &[]).await;
    for i in 0..2 {
        let r = s
            .call("flaky_search", json!({"query": format!("h{i}")}))
            .await;
        assert_eq!(
            steadfast_mcp::tool_result_text(&r),
            format!("results for h{i}"),
            "{r:?}"
        );
    }
    assert_eq!(
        s.upstream_calls().await["flaky_search"],
        6,
        "retries went over HTTP"
    );
    let e = s.call_refused("strict", json!({})).await;
    assert_eq!(e.code.0, -32602, "{e:?}");
    let info = s.client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().unwrap().name,
        "steadfast-example-server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_of_one_dependency_share_a_breaker() {
    let s = start(
        r#"
[tools."*"]
dependency = "backend"
breaker = { failure_threshold = 1, reset_timeout = "60s" }
[tools.hang]
retry = { max_attempts = 1, attempt_timeout = "200ms" }
[tools.calls]
breaker = false
"#,
    )
    .await;
    assert_eq!(
        llm_error(&s.call("hang", json!({})).await)["code"],
        "TIMEOUT"
    );
    // The dependency's breaker is open: another of its tools fails fast, without a call.
    assert_eq!(
        llm_error(&s.call("echo", json!({})).await)["code"],
        "CIRCUIT_OPEN"
    );
    let calls = s.upstream_calls().await;
    assert!(calls.get("echo").is_none(), "{calls}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_keeps_rising_across_a_retry() {
    let s = start(FAST).await;
    let r = s.call("flaky_report", json!({})).await;
    assert_eq!(steadfast_mcp::tool_result_text(&r), "report done", "{r:?}");
    assert_eq!(s.upstream_calls().await["flaky_report"], 2, "one retry");
    // Attempt 1 reported 0, 1; attempt 2 reported 0, 1, 2. The client sees only rises.
    let values: Vec<f64> = s
        .recorder
        .progress
        .lock()
        .unwrap()
        .iter()
        .map(|p| p.1)
        .collect();
    assert_eq!(values, [0.0, 1.0, 2.0]);
}
