//! The gateway's OTLP export, received by a real decoder: `scripts/otlp-receiver.py` parses each
//! ExportTraceServiceRequest with the official `opentelemetry-proto` messages (PyPI) and writes
//! one JSON line per span. Each test runs `steadfast proxy` with export on, drives a call, ends
//! the proxy (its exporter flushes on exit) and asserts the span tree it exported.
//!
//! Needs `STEADFAST_TEST_OTLP` (the interpreter of `scripts/otlp-receiver.sh --install`), and
//! for the SDK-client test `STEADFAST_TEST_MCP_PYTHON` (`scripts/tasks-sdk.sh --install`).
#![cfg(feature = "otel")]

#[path = "support/gateway.rs"]
mod gateway;
#[path = "support/http_client.rs"]
mod http_client;
#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::path::Path;
use std::time::Duration;

use raw_client::{RawProcess, fake_upstream_command};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(10);
/// The client's trace: its trace id and the span id the proxy's SERVER span must have as parent.
const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

const FAST: &str = r#"
[proxy]
init_timeout = "5s"
shutdown_grace = "300ms"

[defaults]
retry = { max_attempts = 3, base_delay = "50ms", max_delay = "200ms", attempt_timeout = "3s" }
"#;

/// The receiver process and the file it writes.
struct Receiver {
    _proc: tokio::process::Child,
    out: Temp,
    _port_file: Temp,
    endpoint: String,
}

impl Receiver {
    async fn start(python: &str) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/otlp-receiver.py");
        let (out, port_file) = (Temp::new("otlp-spans"), Temp::new("otlp-port"));
        let proc = tokio::process::Command::new(python)
            .arg(script)
            .args(["--out", out.path(), "--port-file", port_file.path()])
            .kill_on_drop(true)
            .spawn()
            .expect("the receiver starts");
        let deadline = tokio::time::Instant::now() + ANSWER;
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file.0) {
                break p;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the receiver did not listen within {ANSWER:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        Self {
            _proc: proc,
            out,
            _port_file: port_file,
            endpoint: format!("http://127.0.0.1:{}", port.trim()),
        }
    }

    fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out.0)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }
}

fn python(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// `steadfast proxy --config CONFIG -- python3 fake.py ARGS` exporting to `rx`.
fn proxy(rx: &Receiver, config: &str, fake_args: &[&str]) -> (RawProcess, Temp) {
    let file = Temp::new("otel-config");
    std::fs::write(&file.0, config).expect("write config");
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
    ];
    if !fake_args.is_empty() {
        argv.push("--".to_owned());
        argv.extend(fake_upstream_command(fake_args));
    }
    let p = RawProcess::spawn_with(&argv, |cmd| {
        export_env(cmd.as_std_mut(), &rx.endpoint);
    })
    .expect("the proxy starts");
    (p, file)
}

fn export_env(cmd: &mut std::process::Command, endpoint: &str) {
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_SERVICE_NAME", "steadfast-test")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("RUST_LOG");
}

async fn call(p: &mut RawProcess, id: i64, name: &str, meta: Option<&str>) -> Value {
    let mut params = json!({"name": name, "arguments": {}});
    if let Some(tp) = meta {
        params["_meta"] = json!({"traceparent": tp, "tracestate": "client=1"});
    }
    p.request(json!(id), "tools/call", params).await.unwrap();
    p.wait_for(&json!(id), ANSWER)
        .await
        .unwrap_or_else(|| panic!("tools/call {name} answered within {ANSWER:?}"))
        .response
}

/// Ends the proxy (stdin closed: it exits and its exporter flushes) and returns every span.
async fn finish(mut p: RawProcess, rx: &Receiver) -> Vec<Value> {
    p.close_stdin();
    assert!(
        p.wait_exit(ANSWER).await.is_some(),
        "the proxy exits within {ANSWER:?}"
    );
    rx.spans()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

/// A number, whether the exporter wrote it as an integer or as its decimal text (`tracing`
/// fields recorded with `Display` arrive as strings).
fn num(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn named<'a>(spans: &'a [Value], name: &str, kind: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .filter(|s| s["name"] == name && s["kind"] == kind)
        .collect()
}

fn children<'a>(spans: &'a [Value], parent: &Value) -> Vec<&'a Value> {
    let mut c: Vec<&Value> = spans
        .iter()
        .filter(|s| s["parent_span_id"] == parent["span_id"] && s["trace_id"] == parent["trace_id"])
        .collect();
    c.sort_by_key(|s| s["start_ns"].as_u64());
    c
}

fn events<'a>(span: &'a Value, name: &str) -> Vec<&'a Value> {
    span["events"]
        .as_array()
        .map(|e| e.iter().filter(|e| e["name"] == name).collect())
        .unwrap_or_default()
}

/// The `execute_tool` span under a SERVER span, and the CLIENT spans under it.
fn tree<'a>(spans: &'a [Value], server: &Value) -> (&'a Value, Vec<&'a Value>) {
    let kids = children(spans, server);
    assert_eq!(
        kids.len(),
        1,
        "one execute_tool under the SERVER span: {kids:#?}"
    );
    let exec = kids[0];
    assert_eq!(exec["kind"], "internal", "{exec}");
    assert!(
        exec["name"].as_str().unwrap().starts_with("execute_tool "),
        "{exec}"
    );
    let attempts = children(spans, exec);
    for a in &attempts {
        assert_eq!(a["kind"], "client", "{a}");
    }
    (exec, attempts)
}

#[tokio::test]
#[ignore = "needs the OTLP receiver (STEADFAST_TEST_OTLP): run scripts/otlp-receiver.sh --install"]
async fn a_call_retried_twice_then_succeeding_is_one_trace_under_the_clients() {
    let py = python("STEADFAST_TEST_OTLP")
        .expect("STEADFAST_TEST_OTLP (scripts/otlp-receiver.sh --install)");
    let rx = Receiver::start(&py).await;
    let trace = Temp::new("otel-upstream-trace");
    let (mut p, _c) = proxy(
        &rx,
        FAST,
        &["--flaky-failures", "2", "--trace-file", trace.path()],
    );
    p.initialize(ANSWER).await.expect("initialize answered");
    let r = call(&mut p, 7, "flaky", Some(TP)).await;
    assert_eq!(r["result"]["content"][0]["text"], "flaky succeeded", "{r}");
    let spans = finish(p, &rx).await;

    let servers = named(&spans, "tools/call flaky", "server");
    assert_eq!(servers.len(), 1, "{spans:#?}");
    let server = servers[0];
    assert_eq!(server["trace_id"], TRACE_ID, "the client's trace continues");
    assert_eq!(
        server["parent_span_id"], CLIENT_SPAN,
        "under the client's span"
    );
    assert_eq!(server["service"], "steadfast-test");
    assert_eq!(attr(server, "mcp.method.name"), "tools/call");
    assert_eq!(attr(server, "gen_ai.tool.name"), "flaky");
    assert_eq!(attr(server, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(server, "jsonrpc.request.id"), "7");
    assert_eq!(attr(server, "network.transport"), "pipe");
    assert_eq!(attr(server, "mcp.protocol.version"), "2025-11-25");
    assert!(
        attr(server, "mcp.session.id").is_null(),
        "stdio: no session id"
    );
    assert!(attr(server, "error.type").is_null(), "succeeded: {server}");

    let (exec, attempts) = tree(&spans, server);
    let retries = events(exec, "steadfast.retry");
    assert_eq!(retries.len(), 2, "{exec:#}");
    assert_eq!(num(&retries[0]["attributes"]["steadfast.attempt"]), Some(1));
    assert_eq!(num(&retries[1]["attributes"]["steadfast.attempt"]), Some(2));
    assert!(
        num(&retries[0]["attributes"]["steadfast.delay_ms"]).is_some(),
        "{exec:#}"
    );
    assert_eq!(attempts.len(), 3, "three attempts: {attempts:#?}");
    for (n, a) in attempts.iter().enumerate() {
        assert_eq!(a["name"], "tools/call flaky");
        assert_eq!(num(attr(a, "steadfast.attempt")), Some(n as u64 + 1));
        assert_eq!(attr(a, "network.transport"), "pipe");
        assert!(attr(a, "jsonrpc.request.id").is_string(), "{a}");
    }
    assert_eq!(attr(attempts[0], "error.type"), "tool_error");
    assert_eq!(attr(attempts[1], "error.type"), "tool_error");
    assert!(attr(attempts[2], "error.type").is_null());
    assert_eq!(
        attempts[0]["status"]["code"], 2,
        "ERROR status: {}",
        attempts[0]
    );

    // The upstream saw each attempt's own CLIENT span as its parent, in the client's trace.
    let seen: Vec<Value> = std::fs::read_to_string(&trace.0)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["method"] == "tools/call")
        .collect();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for (s, a) in seen.iter().zip(&attempts) {
        assert_eq!(
            s["meta"],
            format!("00-{TRACE_ID}-{}-01", a["span_id"].as_str().unwrap()),
            "{s}"
        );
    }
}

#[tokio::test]
#[ignore = "needs the OTLP receiver (STEADFAST_TEST_OTLP): run scripts/otlp-receiver.sh --install"]
async fn a_breaker_refusal_and_a_replay_held_back_are_events_without_attempts() {
    let py = python("STEADFAST_TEST_OTLP")
        .expect("STEADFAST_TEST_OTLP (scripts/otlp-receiver.sh --install)");
    let rx = Receiver::start(&py).await;
    let config = format!(
        r#"{FAST}
[tools.hang]
retry = {{ max_attempts = 3, base_delay = "50ms", attempt_timeout = "200ms" }}
retry_ambiguous = false
breaker = {{ failure_threshold = 1, reset_timeout = "60s" }}
"#
    );
    let (mut p, _c) = proxy(&rx, &config, &["--mode", "normal"]);
    p.initialize(ANSWER).await.expect("initialize answered");
    // A timeout may have reached the tool: not replayed (retry_ambiguous = false), and it
    // opens the breaker; the next call is refused before any attempt.
    let first = call(&mut p, 1, "hang", None).await;
    assert_eq!(first["result"]["isError"], true, "{first}");
    let second = call(&mut p, 2, "hang", None).await;
    assert!(
        second.to_string().contains("CIRCUIT_OPEN"),
        "refused by the breaker: {second}"
    );
    let spans = finish(p, &rx).await;
    let mut servers = named(&spans, "tools/call hang", "server");
    servers.sort_by_key(|s| s["start_ns"].as_u64());
    assert_eq!(servers.len(), 2, "{spans:#?}");
    assert_ne!(
        servers[0]["trace_id"], servers[1]["trace_id"],
        "no client trace: one each"
    );

    let (exec, attempts) = tree(&spans, servers[0]);
    assert_eq!(attempts.len(), 1, "held back after one: {attempts:#?}");
    assert_eq!(attr(attempts[0], "error.type"), "timeout");
    assert_eq!(
        events(exec, "steadfast.replay.held_back").len(),
        1,
        "{exec:#}"
    );
    assert_eq!(
        events(exec, "steadfast.breaker.opened").len(),
        1,
        "{exec:#}"
    );
    assert_eq!(attr(servers[0], "error.type"), "tool_error");

    let (exec, attempts) = tree(&spans, servers[1]);
    assert!(
        attempts.is_empty(),
        "the breaker refused before any attempt"
    );
    let refused = events(exec, "steadfast.breaker.refused");
    assert_eq!(refused.len(), 1, "{exec:#}");
    assert_eq!(attr(servers[1], "error.type"), "tool_error");
    assert_eq!(attr(exec, "error.type"), "CIRCUIT_OPEN");
}

#[tokio::test]
#[ignore = "needs the OTLP receiver (STEADFAST_TEST_OTLP) and the Python MCP SDK (STEADFAST_TEST_MCP_PYTHON)"]
async fn the_python_sdk_clients_traceparent_reaches_an_http_upstream() {
    let otlp = python("STEADFAST_TEST_OTLP")
        .expect("STEADFAST_TEST_OTLP (scripts/otlp-receiver.sh --install)");
    let sdk = python("STEADFAST_TEST_MCP_PYTHON")
        .expect("STEADFAST_TEST_MCP_PYTHON (scripts/tasks-sdk.sh --install)");
    let rx = Receiver::start(&otlp).await;
    let trace = Temp::new("otel-http-trace");
    let mut fake = RawProcess::spawn(&fake_upstream_command(&[
        "--http",
        "0",
        "--trace-file",
        trace.path(),
    ]))
    .unwrap();
    let url = fake.read_line(ANSWER).await.expect("the URL line");
    let config = Temp::new("otel-http-config");
    std::fs::write(
        &config.0,
        format!("{FAST}\n[upstream]\nurl = \"{}\"\n", url.trim()),
    )
    .unwrap();
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/otel_sdk_client.py");
    let mut cmd = std::process::Command::new(sdk);
    cmd.arg(client)
        .args([env!("CARGO_BIN_EXE_steadfast"), config.path(), TP]);
    export_env(&mut cmd, &rx.endpoint);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::from(cmd).output(),
    )
    .await
    .expect("the SDK client ends within 60 s")
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(said["text"], "traced", "{said}");

    // The SDK's stdio client ended the proxy; its last spans were flushed on the way out.
    let spans = rx.spans();
    let servers = named(&spans, "tools/call echo", "server");
    assert_eq!(servers.len(), 1, "{spans:#?}");
    assert_eq!(servers[0]["trace_id"], TRACE_ID);
    assert_eq!(servers[0]["parent_span_id"], CLIENT_SPAN);
    let (_, attempts) = tree(&spans, servers[0]);
    assert_eq!(attempts.len(), 1);
    assert_eq!(attr(attempts[0], "network.transport"), "tcp");
    let expected = format!(
        "00-{TRACE_ID}-{}-01",
        attempts[0]["span_id"].as_str().unwrap()
    );
    let seen: Vec<Value> = std::fs::read_to_string(&trace.0)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["method"] == "tools/call")
        .collect();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["meta"], expected.as_str(), "in _meta: {}", seen[0]);
    assert_eq!(
        seen[0]["header"],
        expected.as_str(),
        "in the header: {}",
        seen[0]
    );
    assert_eq!(
        seen[0]["tracestate"], "sdk=1",
        "tracestate relayed: {}",
        seen[0]
    );
}

#[tokio::test]
#[ignore = "needs the OTLP receiver (STEADFAST_TEST_OTLP): run scripts/otlp-receiver.sh --install"]
async fn a_durable_call_across_a_gateway_restart_stays_in_its_requests_trace() {
    let py = python("STEADFAST_TEST_OTLP")
        .expect("STEADFAST_TEST_OTLP (scripts/otlp-receiver.sh --install)");
    let rx = Receiver::start(&py).await;
    let (db, counts) = (Temp::new("otel-tasks-db"), Temp::new("otel-tasks-counts"));
    let config = format!(
        r#"{FAST}
[tasks]
store = "sqlite://{}"
poll_interval = "100ms"
lease = "1s"

[tools.flaky]
durable = true
retry = {{ max_attempts = 3, base_delay = "3s", max_delay = "3s", jitter = "none" }}
"#,
        db.path()
    );
    let fake = [
        "--flaky-failures",
        "1",
        "--flaky-across-restarts",
        "--count-file",
        counts.path(),
    ];
    let (mut g1, c1) = proxy(&rx, &config, &fake);
    init_tasks(&mut g1).await;
    let started = request(
        &mut g1,
        2,
        "tools/call",
        json!({"name": "flaky", "arguments": {}, "task": {"ttl": 60000},
               "_meta": {"traceparent": TP}}),
    )
    .await;
    let task = started
        .pointer("/result/task/taskId")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("a task handle: {started}"))
        .to_owned();
    // The first attempt fails; once its CLIENT span has been exported, the gateway is killed
    // (SIGKILL: nothing more is flushed) during the retry's backoff.
    let deadline = tokio::time::Instant::now() + ANSWER;
    while named(&rx.spans(), "tools/call flaky", "client").is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first attempt's span was exported"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    g1.child.start_kill().expect("SIGKILL");
    assert!(g1.wait_exit(ANSWER).await.is_some(), "the gateway died");

    // A new gateway on the same store finishes the task.
    let (mut g2, _c2) = proxy(&rx, &std::fs::read_to_string(&c1.0).unwrap(), &fake);
    init_tasks(&mut g2).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut id = 100;
    loop {
        id += 1;
        let r = request(&mut g2, id, "tasks/get", json!({"taskId": task})).await;
        if r["result"]["status"] == "completed" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never completed: {r}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let spans = finish(g2, &rx).await;

    let servers = named(&spans, "tools/call flaky", "server");
    assert_eq!(servers.len(), 1, "one request created the task: {spans:#?}");
    let server = servers[0];
    assert_eq!(server["trace_id"], TRACE_ID);
    assert_eq!(server["parent_span_id"], CLIENT_SPAN);
    let mut attempts = named(&spans, "tools/call flaky", "client");
    attempts.sort_by_key(|s| s["start_ns"].as_u64());
    let summary: Vec<String> = attempts
        .iter()
        .map(|a| {
            format!(
                "attempt {} error {} trace {} parent {}",
                attr(a, "steadfast.attempt"),
                attr(a, "error.type"),
                a["trace_id"],
                a["parent_span_id"]
            )
        })
        .collect();
    assert_eq!(attempts.len(), 2, "one attempt per gateway: {summary:#?}");
    for a in &attempts {
        assert_eq!(a["trace_id"], TRACE_ID, "one trace across the restart: {a}");
        assert_eq!(a["parent_span_id"], server["span_id"], "{a}");
        assert_eq!(
            a["links"][0]["span_id"], server["span_id"],
            "linked to the request that queued it: {a}"
        );
        assert_eq!(attr(a, "steadfast.task.id"), task.as_str());
    }
    assert_eq!(num(attr(attempts[0], "steadfast.attempt")), Some(1));
    assert_eq!(attr(attempts[0], "error.type"), "tool_error");
    assert_eq!(num(attr(attempts[1], "steadfast.attempt")), Some(2));
    assert!(attr(attempts[1], "error.type").is_null(), "{}", attempts[1]);
}

async fn init_tasks(p: &mut RawProcess) {
    let params = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"tasks": {"list": {}, "cancel": {}}},
        "clientInfo": {"name": "otel-test", "version": "0"}
    });
    p.call(json!(0), "initialize", params, ANSWER)
        .await
        .expect("initialize is answered");
    p.notify("notifications/initialized", json!({}))
        .await
        .unwrap();
}

async fn request(p: &mut RawProcess, id: i64, method: &str, params: Value) -> Value {
    p.call(json!(id), method, params, ANSWER)
        .await
        .unwrap_or_else(|| panic!("{method} answered within {ANSWER:?}"))
        .response
}

#[tokio::test]
#[ignore = "needs the OTLP receiver (STEADFAST_TEST_OTLP): run scripts/otlp-receiver.sh --install"]
async fn the_http_fronts_traceparent_header_parents_the_server_span() {
    let py = python("STEADFAST_TEST_OTLP")
        .expect("STEADFAST_TEST_OTLP (scripts/otlp-receiver.sh --install)");
    let rx = Receiver::start(&py).await;
    let config = Temp::new("otel-front-config");
    std::fs::write(&config.0, FAST).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args(["proxy", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config.0)
        .arg("--")
        .args(fake_upstream_command(&[]));
    export_env(cmd.as_std_mut(), &rx.endpoint);
    let (_child, url, _log) = gateway::listening(cmd).await;
    let json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let init = http_client::exchange(
        "POST",
        &url,
        &json,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "otel-test", "version": "0"}}})
        .to_string(),
    )
    .await
    .unwrap();
    let session = init.header("mcp-session-id").expect("a session").to_owned();
    let mut headers = json.to_vec();
    headers.extend([
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
        ("traceparent", TP),
    ]);
    let r = http_client::exchange(
        "POST",
        &url,
        &headers,
        &json!({"jsonrpc": "2.0", "id": "call-1", "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}}})
        .to_string(),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // Exported in batches every 100 ms: wait (bounded) for the call's SERVER span.
    let deadline = tokio::time::Instant::now() + ANSWER;
    let server = loop {
        if let Some(s) = named(&rx.spans(), "tools/call echo", "server").first() {
            break (*s).clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no SERVER span exported"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(server["trace_id"], TRACE_ID, "the header's trace: {server}");
    assert_eq!(server["parent_span_id"], CLIENT_SPAN);
    assert_eq!(attr(&server, "network.transport"), "tcp");
    assert_eq!(attr(&server, "mcp.session.id"), session.as_str());
    assert_eq!(attr(&server, "jsonrpc.request.id"), "call-1");
    assert_eq!(attr(&server, "mcp.protocol.version"), "2025-06-18");
    // The MCP duration histograms, beside the Prometheus ones.
    let metrics = http_client::exchange("GET", &url.replace("/mcp", "/metrics"), &[], "")
        .await
        .unwrap();
    for name in [
        "mcp_server_operation_duration_bucket",
        "mcp_client_operation_duration_bucket",
    ] {
        assert!(
            metrics
                .body
                .lines()
                .any(|l| l.starts_with(name) && l.contains("tools/call")),
            "{name} in /metrics: {}",
            metrics.body
        );
    }
}

/// The span of `spans` named `name` of `kind` answering request `id`.
fn answering<'a>(spans: &'a [Value], name: &str, kind: &str, id: &str) -> &'a Value {
    named(spans, name, kind)
        .into_iter()
        .find(|s| attr(s, "jsonrpc.request.id") == id)
        .unwrap_or_else(|| panic!("no {kind} span {name} for request {id}: {spans:#?}"))
}

#[tokio::test]
#[ignore = "needs the OTLP receiver (STEADFAST_TEST_OTLP): run scripts/otlp-receiver.sh --install"]
async fn every_request_has_its_span_and_errors_numbers_events_and_links_are_as_documented() {
    let py = python("STEADFAST_TEST_OTLP")
        .expect("STEADFAST_TEST_OTLP (scripts/otlp-receiver.sh --install)");
    let rx = Receiver::start(&py).await;
    let db = Temp::new("otel-truth-db");
    let config = format!(
        "{FAST}\n[tasks]\nstore = \"sqlite://{}\"\npoll_interval = \"100ms\"\n\n[tools.flaky]\ndurable = true\n",
        db.path()
    );
    // `flaky` fails four times: a live call spends three, a durable call's first attempt the last.
    let (mut p, _c) = proxy(&rx, &config, &["--flaky-failures", "4"]);
    init_tasks(&mut p).await;
    request(&mut p, 1, "ping", json!({})).await;
    let gave_up = call(&mut p, 2, "flaky", None).await;
    assert_eq!(gave_up["result"]["isError"], true, "{gave_up}");
    let business = json!({"name": "echo", "arguments": {"text": "no such file", "is_error": true}});
    let r = request(&mut p, 3, "tools/call", business).await;
    assert_eq!(
        r["result"]["isError"], true,
        "a tool error, as the tool wrote it: {r}"
    );
    let durable = json!({"name": "flaky", "arguments": {}, "task": {"ttl": 60000},
                         "_meta": {"traceparent": TP}});
    let created = request(&mut p, 4, "tools/call", durable).await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = tokio::time::Instant::now() + ANSWER;
    for id in 5.. {
        let r = request(&mut p, id, "tasks/get", json!({"taskId": task})).await;
        if r["result"]["status"] == "completed" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never completed: {r}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let spans = finish(p, &rx).await;
    // Every finding, so one run shows all that is wrong.
    let mut wrong: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            wrong.push(what);
        }
    };

    // (e) One SERVER span per request, `initialize` and `ping` included.
    for (name, id) in [("initialize", "0"), ("ping", "1")] {
        let found = named(&spans, name, "server")
            .iter()
            .any(|s| attr(s, "jsonrpc.request.id") == id);
        check(found, format!("(e) no SERVER span for {name}"));
    }

    // (b) Span events are the named events of the tables, never log lines.
    let stray: Vec<String> = spans
        .iter()
        .flat_map(|s| s["events"].as_array().cloned().unwrap_or_default())
        .map(|e| e["name"].as_str().unwrap_or_default().to_owned())
        .filter(|n| !n.starts_with("steadfast.") || n.contains(' '))
        .collect();
    check(
        stray.is_empty(),
        format!("(b) events not in the tables: {stray:?}"),
    );

    // (c) A call that gave up: `error.type` with the ERROR status. (d) Counts and delays are
    // integers, not text.
    let (exec, attempts) = tree(&spans, answering(&spans, "tools/call flaky", "server", "2"));
    check(
        attr(exec, "error.type").is_string() && exec["status"]["code"] == 2,
        format!("(c) execute_tool gave up: error.type with ERROR status: {exec:#}"),
    );
    check(
        attr(exec, "steadfast.attempts").is_u64(),
        format!("(d) steadfast.attempts as text: {exec:#}"),
    );
    let retries = events(exec, "steadfast.retry");
    check(retries.len() == 2, format!("two retries: {exec:#}"));
    for r in &retries {
        for k in [
            "steadfast.attempt",
            "steadfast.delay_ms",
            "steadfast.max_attempts",
        ] {
            check(r["attributes"][k].is_u64(), format!("(d) {k} as text: {r}"));
        }
    }
    check(
        attempts
            .iter()
            .all(|a| attr(a, "steadfast.attempt").is_u64()),
        "(d) a CLIENT span's steadfast.attempt as text".to_owned(),
    );

    // (f) A tool error that is not retried still marks its `execute_tool` span.
    let (exec, _) = tree(&spans, answering(&spans, "tools/call echo", "server", "3"));
    check(
        attr(exec, "error.type") == "tool_error" && exec["status"]["code"] == 2,
        format!("(f) a tool error left execute_tool unmarked: {exec:#}"),
    );

    // (a) Each job attempt's span is linked to the request that queued the task; (c) the
    // failed one carries `error.type` with the ERROR status.
    let queued = answering(&spans, "tools/call flaky", "server", "4");
    let link = json!({"trace_id": queued["trace_id"], "span_id": queued["span_id"]});
    let mut jobs = named(&spans, "process steadfast.tools_call", "consumer");
    jobs.sort_by_key(|s| s["start_ns"].as_u64());
    assert_eq!(jobs.len(), 2, "two job attempts: {jobs:#?}");
    for j in &jobs {
        check(
            j["links"].as_array().is_some_and(|l| l.contains(&link)),
            format!("(a) a job span not linked to the request that queued it ({link}): {j:#}"),
        );
    }
    check(
        attr(jobs[0], "error.type").is_string() && jobs[0]["status"]["code"] == 2,
        format!(
            "(c) the failed job attempt: error.type with ERROR status: {:#}",
            jobs[0]
        ),
    );
    let job_retry = events(jobs[0], "steadfast.retry");
    check(
        job_retry
            .first()
            .is_some_and(|r| r["attributes"]["steadfast.attempt"].is_u64()),
        format!("(d) the job's retry event: {:#}", jobs[0]),
    );
    check(
        attr(jobs[1], "error.type").is_null(),
        format!("the job attempt that succeeded: {:#}", jobs[1]),
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}
