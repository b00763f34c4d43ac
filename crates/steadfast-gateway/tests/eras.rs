//! The 2026-07-28 rules kept through the gateway, and errors keeping their class (issue 36,
//! items 13 and 14), in raw JSON-RPC on the test kit (moved from `steadfast-cli/tests/eras.rs`,
//! same assertions, in-process):
//!
//! - a modern request without `_meta` log level gets no `notifications/message` (with one, only
//!   logs at that level and above);
//! - the era is locked per connection, as the SDKs' dual-era servers lock it: a connection
//!   that opened modern refuses a request without the envelope (`-32602` naming the keys) and
//!   `initialize` (`-32022`), one that opened with `initialize` refuses modern requests
//!   (`-32600`);
//! - an upstream's JSON-RPC error saying the request was wrong (`-32602` for an unknown tool)
//!   reaches the client as that JSON-RPC error, not as an `isError` result: both eras, both
//!   fronts. The real SDK servers are checked in `steadfast-cli/tests/eras_sdk.rs`.

mod support;

use serde_json::{Value, json};
use support::fake::{Fake, MODERN, Step};
use support::{echo, modern, stdio};

const CONFIG: &str = "[proxy]\ninit_timeout = \"10s\"\nreconnect_wait = \"5s\"\n";

/// A modern request that asks for logs at `level` and above.
fn with_log_level(level: &str, extra: Value) -> Value {
    let mut p = modern(extra);
    p["_meta"]["io.modelcontextprotocol/logLevel"] = json!(level);
    p
}

fn logs(messages: &[Value]) -> Vec<&Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect()
}

/// Three `info` logs before every call's result.
fn logging() -> Fake {
    Fake::new("logging").on(|m| {
        if m["method"] != "tools/call" {
            return Step::Default;
        }
        let logs = (0..3)
            .map(|i| {
                json!({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "logger": "fake", "data": format!("log line {i}")}})
            })
            .collect();
        Step::Send(logs, Box::new(Step::Default))
    })
}

#[tokio::test]
async fn stdio_a_modern_request_gets_logs_only_at_the_level_it_asked_for() {
    let fake = logging();
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    let p = &mut gw.client;
    let a = p.call(1, "tools/call", modern(echo("quiet"))).await;
    assert_eq!(a.response["result"]["content"][0]["text"], "quiet", "{a:?}");
    assert!(
        logs(&a.before).is_empty(),
        "no logLevel, no notifications/message (MCP 2026-07-28): {:?}",
        a.before
    );
    let a = p
        .call(2, "tools/call", with_log_level("info", echo("chatty")))
        .await;
    assert_eq!(a.response["result"]["content"][0]["text"], "chatty");
    assert_eq!(logs(&a.before).len(), 3, "asked for info: {:?}", a.before);
    let a = p
        .call(3, "tools/call", with_log_level("error", echo("errors")))
        .await;
    assert!(
        logs(&a.before).is_empty(),
        "info logs are below error: {:?}",
        a.before
    );
    let bad = p
        .call(4, "tools/call", with_log_level("loud", echo("x")))
        .await;
    assert_eq!(bad.response["error"]["code"], -32602, "{:?}", bad.response);
    let message = bad.response["error"]["message"].as_str().unwrap();
    assert!(message.contains("logLevel"), "names the key: {message}");
}

#[tokio::test]
async fn stdio_a_handshake_client_still_gets_every_log() {
    let fake = logging();
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    gw.client.initialize().await;
    let a = gw.client.call(1, "tools/call", echo("hi")).await;
    assert_eq!(logs(&a.before).len(), 3, "{:?}", a.before);
}

#[tokio::test]
async fn stdio_a_connection_that_opened_modern_refuses_the_handshake_era() {
    let fake = Fake::new("plain");
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    let p = &mut gw.client;
    let a = p.call(1, "tools/list", modern(json!({}))).await;
    assert!(a.response["result"]["tools"].is_array(), "{:?}", a.response);
    // Without the envelope: what the SDKs' servers answer on a modern connection.
    let a = p.call(2, "tools/list", json!({})).await;
    let e = &a.response["error"];
    assert_eq!(e["code"], -32602, "{:?}", a.response);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("io.modelcontextprotocol/protocolVersion")
            && message.contains("io.modelcontextprotocol/clientCapabilities"),
        "names the missing keys: {message}"
    );
    let a = p.call(3, "tools/call", echo("no envelope")).await;
    assert_eq!(a.response["error"]["code"], -32602, "{:?}", a.response);
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "late", "version": "0"}});
    let a = p.call(4, "initialize", init).await;
    let e = &a.response["error"];
    assert_eq!(e["code"], -32022, "{:?}", a.response);
    assert_eq!(e["data"]["supported"], json!([MODERN]), "{:?}", a.response);
    assert_eq!(e["data"]["requested"], "2025-11-25");
    // Still served in its era.
    let a = p.call(5, "tools/call", modern(echo("still modern"))).await;
    assert_eq!(a.response["result"]["content"][0]["text"], "still modern");
}

#[tokio::test]
async fn stdio_a_connection_that_opened_with_initialize_refuses_modern_requests() {
    let fake = Fake::new("plain");
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    let p = &mut gw.client;
    p.initialize().await;
    let a = p.call(1, "tools/call", modern(echo("modern"))).await;
    assert_eq!(a.response["error"]["code"], -32600, "{:?}", a.response);
    let a = p.call(2, "tools/call", echo("handshake")).await;
    assert_eq!(a.response["result"]["content"][0]["text"], "handshake");
}

#[tokio::test]
async fn stdio_a_refused_modern_request_does_not_lock_the_era() {
    let fake = Fake::new("plain");
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    let p = &mut gw.client;
    let mut old = modern(json!({}));
    old["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let a = p.call(1, "server/discover", old).await;
    assert_eq!(a.response["error"]["code"], -32022, "{:?}", a.response);
    // A dual-era client falls back to initialize: served.
    let init = p.initialize().await;
    assert!(init["result"]["protocolVersion"].is_string(), "{init}");
}

/// The fake answers a tool it does not know with `-32602` (as the SDKs' lowlevel servers do):
/// the gateway relays that class.
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
    let fake = Fake::new("plain");
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    gw.client.initialize().await;
    let a = gw.client.call(1, "tools/call", unknown_tool()).await;
    assert_unknown_tool_error(&a.response);
    // A tool's own isError result stays a result.
    let a = gw.client.call(2, "tools/call", echo("fine")).await;
    assert_eq!(a.response["result"]["content"][0]["text"], "fine");

    let fake = Fake::new("plain");
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    let a = gw
        .client
        .call(1, "tools/call", modern(unknown_tool()))
        .await;
    assert_unknown_tool_error(&a.response);
}

#[cfg(feature = "http")]
#[tokio::test]
async fn http_an_upstream_protocol_error_keeps_its_class_in_both_eras() {
    use support::client::{http_session, modern_post, session_post};
    let fake = Fake::new("plain");
    let url = support::http(support::config(CONFIG), fake.upstream()).await;
    // Modern: the JSON-RPC error with the status the revision gives -32602.
    let a = modern_post(&url, 1, "tools/call", modern(unknown_tool())).await;
    assert_eq!(a.status, 400, "{a:?}");
    assert_unknown_tool_error(a.last());
    // Handshake era: a session.
    let session = http_session(&url).await;
    let a = session_post(&url, &session, 2, "tools/call", unknown_tool()).await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_unknown_tool_error(a.last());
}
