//! The 2026-07-28 rules kept through the gateway, and errors keeping their class, on real
//! processes in raw JSON-RPC (issue 36, items 13 and 14):
//!
//! - a modern request without `_meta` log level gets no `notifications/message` (with one, only
//!   logs at that level and above);
//! - the era is locked per connection, as the SDKs' dual-era servers lock it: a connection
//!   that opened modern refuses a request without the envelope (`-32602` naming the keys) and
//!   `initialize` (`-32022`), one that opened with `initialize` refuses modern requests
//!   (`-32600`);
//! - an upstream's JSON-RPC error saying the request was wrong (`-32602` for an unknown tool)
//!   reaches the client as that JSON-RPC error, not as an `isError` result: both eras, both
//!   fronts. The real SDK servers are checked in `eras_sdk.rs`.

#[path = "support/gateway.rs"]
mod gateway;
#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::Duration;

use raw_client::{RawProcess, fake_upstream_command, http_messages, http_post};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(15);
const MODERN: &str = "2026-07-28";
const CONFIG: &str = "[proxy]\ninit_timeout = \"10s\"\nreconnect_wait = \"5s\"\n";

/// A modern request's params: `extra` with the per-request envelope.
fn modern(extra: Value) -> Value {
    let mut p = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "0"},
    }});
    if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            if k == "_meta" {
                let meta = p["_meta"].as_object_mut().unwrap();
                meta.extend(v.as_object().unwrap().clone());
            } else {
                p.insert(k.clone(), v.clone());
            }
        }
    }
    p
}

/// A modern request that asks for logs at `level` and above.
fn with_log_level(level: &str, extra: Value) -> Value {
    let mut p = modern(extra);
    p["_meta"]["io.modelcontextprotocol/logLevel"] = json!(level);
    p
}

fn config() -> Temp {
    let c = Temp::new("eras-config");
    std::fs::write(&c.0, CONFIG).unwrap();
    c
}

/// The gateway on stdio over the fake upstream started with `fake_args`.
fn stdio_gateway(config: &Temp, fake_args: &[&str]) -> RawProcess {
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        config.path().to_owned(),
        "--".to_owned(),
    ];
    argv.extend(fake_upstream_command(fake_args));
    RawProcess::spawn(&argv).expect("the gateway starts")
}

async fn ask(p: &mut RawProcess, id: i64, method: &str, params: Value) -> raw_client::Answer {
    p.call(json!(id), method, params, ANSWER)
        .await
        .unwrap_or_else(|| panic!("{method} was not answered"))
}

fn logs(messages: &[Value]) -> Vec<&Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect()
}

/// Three `info` logs before every call's result.
const LOGGING: [&str; 6] = ["--mode", "log-flood", "--flood", "3", "--flood-bytes", "1"];

fn echo(text: &str) -> Value {
    json!({"name": "echo", "arguments": {"text": text}})
}

#[tokio::test]
async fn stdio_a_modern_request_gets_logs_only_at_the_level_it_asked_for() {
    let config = config();
    let mut p = stdio_gateway(&config, &LOGGING);
    let a = ask(&mut p, 1, "tools/call", modern(echo("quiet"))).await;
    assert_eq!(a.response["result"]["content"][0]["text"], "quiet", "{a:?}");
    assert!(
        logs(&a.before).is_empty(),
        "no logLevel, no notifications/message (MCP 2026-07-28): {:?}",
        a.before
    );
    let a = ask(
        &mut p,
        2,
        "tools/call",
        with_log_level("info", echo("chatty")),
    )
    .await;
    assert_eq!(a.response["result"]["content"][0]["text"], "chatty");
    assert_eq!(logs(&a.before).len(), 3, "asked for info: {:?}", a.before);
    let a = ask(
        &mut p,
        3,
        "tools/call",
        with_log_level("error", echo("errors")),
    )
    .await;
    assert!(
        logs(&a.before).is_empty(),
        "info logs are below error: {:?}",
        a.before
    );
    let bad = ask(&mut p, 4, "tools/call", with_log_level("loud", echo("x"))).await;
    assert_eq!(bad.response["error"]["code"], -32602, "{:?}", bad.response);
    let message = bad.response["error"]["message"].as_str().unwrap();
    assert!(message.contains("logLevel"), "names the key: {message}");
}

#[tokio::test]
async fn stdio_a_handshake_client_still_gets_every_log() {
    let config = config();
    let mut p = stdio_gateway(&config, &LOGGING);
    p.initialize(ANSWER).await.expect("initialized");
    let a = ask(&mut p, 1, "tools/call", echo("hi")).await;
    assert_eq!(logs(&a.before).len(), 3, "{:?}", a.before);
}

/// The gateway's HTTP front over the stdio fake with `fake_args`: (the process, its MCP URL).
async fn http_front(config: &Temp, fake_args: &[&str]) -> (tokio::process::Child, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--config",
        config.path(),
    ])
    .arg("--")
    .args(fake_upstream_command(fake_args))
    .env("RUST_LOG", "info");
    let (child, url, _log) = gateway::listening(cmd).await;
    (child, url)
}

/// A modern POST with its routing headers: (status, every message of the answer).
async fn modern_post(url: &str, id: i64, method: &str, params: Value) -> (u16, Vec<Value>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    let mut head = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\
         MCP-Protocol-Version: {MODERN}\r\nMcp-Method: {method}\r\n",
        body.len()
    );
    if let Some(n) = params.get("name").and_then(Value::as_str) {
        head.push_str(&format!("Mcp-Name: {n}\r\n"));
    }
    head.push_str("\r\n");
    let io = async {
        let mut s = tokio::net::TcpStream::connect(authority).await?;
        s.write_all(head.as_bytes()).await?;
        s.write_all(body.as_bytes()).await?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(ANSWER, io).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    (status, http_messages(body))
}

#[tokio::test]
async fn stdio_a_connection_that_opened_modern_refuses_the_handshake_era() {
    let config = config();
    let mut p = stdio_gateway(&config, &[]);
    let a = ask(&mut p, 1, "tools/list", modern(json!({}))).await;
    assert!(a.response["result"]["tools"].is_array(), "{:?}", a.response);
    // Without the envelope: what the SDKs' servers answer on a modern connection.
    let a = ask(&mut p, 2, "tools/list", json!({})).await;
    let e = &a.response["error"];
    assert_eq!(e["code"], -32602, "{:?}", a.response);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("io.modelcontextprotocol/protocolVersion")
            && message.contains("io.modelcontextprotocol/clientCapabilities"),
        "names the missing keys: {message}"
    );
    let a = ask(&mut p, 3, "tools/call", echo("no envelope")).await;
    assert_eq!(a.response["error"]["code"], -32602, "{:?}", a.response);
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "late", "version": "0"}});
    let a = ask(&mut p, 4, "initialize", init).await;
    let e = &a.response["error"];
    assert_eq!(e["code"], -32022, "{:?}", a.response);
    assert_eq!(e["data"]["supported"], json!([MODERN]), "{:?}", a.response);
    assert_eq!(e["data"]["requested"], "2025-11-25");
    // Still served in its era.
    let a = ask(&mut p, 5, "tools/call", modern(echo("still modern"))).await;
    assert_eq!(a.response["result"]["content"][0]["text"], "still modern");
}

#[tokio::test]
async fn stdio_a_connection_that_opened_with_initialize_refuses_modern_requests() {
    let config = config();
    let mut p = stdio_gateway(&config, &[]);
    p.initialize(ANSWER).await.expect("initialized");
    let a = ask(&mut p, 1, "tools/call", modern(echo("modern"))).await;
    assert_eq!(a.response["error"]["code"], -32600, "{:?}", a.response);
    let a = ask(&mut p, 2, "tools/call", echo("handshake")).await;
    assert_eq!(a.response["result"]["content"][0]["text"], "handshake");
}

#[tokio::test]
async fn stdio_a_refused_modern_request_does_not_lock_the_era() {
    let config = config();
    let mut p = stdio_gateway(&config, &[]);
    let mut old = modern(json!({}));
    old["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let a = ask(&mut p, 1, "server/discover", old).await;
    assert_eq!(a.response["error"]["code"], -32022, "{:?}", a.response);
    // A dual-era client falls back to initialize: served.
    let init = p.initialize(ANSWER).await.expect("initialized");
    assert!(init["result"]["protocolVersion"].is_string(), "{init}");
}

/// The fake upstream answers a tool it does not know with `-32602` (as the SDKs' lowlevel
/// servers do): the gateway relays that class.
fn assert_unknown_tool_error(answer: &Value) {
    let e = &answer["error"];
    assert_eq!(
        e["code"], -32602,
        "a JSON-RPC error, not a result: {answer}"
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("Unknown tool: no_such_tool"),
        "{answer}"
    );
    assert!(answer.get("result").is_none(), "{answer}");
}

fn unknown_tool() -> Value {
    json!({"name": "no_such_tool", "arguments": {}})
}

#[tokio::test]
async fn stdio_an_upstream_protocol_error_keeps_its_class_in_both_eras() {
    let config = config();
    let mut p = stdio_gateway(&config, &[]);
    p.initialize(ANSWER).await.expect("initialized");
    let a = ask(&mut p, 1, "tools/call", unknown_tool()).await;
    assert_unknown_tool_error(&a.response);
    // A tool's own isError result stays a result.
    let a = ask(&mut p, 2, "tools/call", echo("fine")).await;
    assert_eq!(a.response["result"]["content"][0]["text"], "fine");

    let mut p = stdio_gateway(&config, &[]);
    let a = ask(&mut p, 1, "tools/call", modern(unknown_tool())).await;
    assert_unknown_tool_error(&a.response);
}

#[cfg(feature = "http")]
#[tokio::test]
async fn http_an_upstream_protocol_error_keeps_its_class_in_both_eras() {
    let config = config();
    let (_gw, url) = http_front(&config, &[]).await;
    // Modern: the JSON-RPC error with the status the revision gives -32602.
    let (status, messages) = modern_post(&url, 1, "tools/call", modern(unknown_tool())).await;
    assert_eq!(status, 400, "{messages:?}");
    assert_unknown_tool_error(messages.last().unwrap());
    // Handshake era: a session.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, headers, _) = http_post(&url, None, &init, ANSWER).await.unwrap();
    assert_eq!(status, 200);
    let session = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .expect("a session id");
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    http_post(&url, Some(&session), &done, ANSWER)
        .await
        .unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": unknown_tool()});
    let (status, _, body) = http_post(&url, Some(&session), &call, ANSWER)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_unknown_tool_error(http_messages(&body).last().unwrap());
}
