//! The TypeScript MCP SDK's client (`@modelcontextprotocol/client` 2.x) through the gateway, as
//! users run it: over stdio (the SDK spawns `steadfast proxy`) and over streamable HTTP, in its
//! handshake-era mode and its negotiating (`auto`) mode, to the handshake-era npm
//! `@modelcontextprotocol/server-everything`. What the client sees through the gateway is
//! compared with what it sees talking to the server directly.
//!
//! Needs node and the packages installed by `scripts/ts-sdk.sh --install`, whose output
//! `STEADFAST_TEST_TS_SDK` names (CI sets it); ignored otherwise.

#[path = "support/gateway.rs"]
mod gateway;

use std::time::Duration;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_steadfast");
/// The client script bounds itself at 30 s; this bounds the process around it.
const CLIENT_BOUND: Duration = Duration::from_secs(60);

fn sdk_dir() -> String {
    std::env::var("STEADFAST_TEST_TS_SDK").expect("STEADFAST_TEST_TS_SDK (scripts/ts-sdk.sh)")
}

fn server_everything() -> String {
    format!("{}/node_modules/.bin/mcp-server-everything", sdk_dir())
}

/// Runs the SDK client with `plan` (see support/ts-sdk/client.mjs) and returns what it printed.
async fn client(plan: Value) -> Value {
    let dir = sdk_dir();
    let out = tokio::time::timeout(
        CLIENT_BOUND,
        tokio::process::Command::new("node")
            .arg(format!("{dir}/client.mjs"))
            .arg(plan.to_string())
            .current_dir(&dir)
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finishes within its bound")
    .expect("node runs");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("client printed {text:?}: {e}"))
}

fn echo() -> Value {
    json!({"name": "echo", "arguments": {"message": "through steadfast"}})
}

/// Tools server-everything registers only once `notifications/initialized` has been handled
/// (for clients declaring roots, sampling, elicitation): a client that lists at once may or may
/// not see them, directly or through the gateway, so lists are compared without them.
const REGISTERED_AFTER_INITIALIZED: [&str; 3] = [
    "get-roots-list",
    "trigger-elicitation-request",
    "trigger-sampling-request",
];

fn stable_tools(answer: &Value) -> Vec<String> {
    answer["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|t| !REGISTERED_AFTER_INITIALIZED.contains(t))
        .map(str::to_owned)
        .collect()
}

fn assert_same_server(direct: &Value, proxied: &Value) {
    assert!(proxied.get("error").is_none(), "proxied: {proxied}");
    assert_eq!(
        stable_tools(proxied),
        stable_tools(direct),
        "the tool list passes unchanged"
    );
    assert_eq!(proxied["server"], direct["server"]);
    assert_eq!(
        proxied["call"]["content"][0]["text"], "Echo: through steadfast",
        "{proxied}"
    );
    assert!(proxied["call"].get("isError").is_none_or(|e| e == false));
}

async fn direct(mode: &str) -> Value {
    let d = client(json!({
        "mode": mode,
        "stdio": {"command": server_everything(), "args": []},
        "call": echo(),
    }))
    .await;
    assert!(d.get("error").is_none(), "direct: {d}");
    assert!(d["tools"].as_array().is_some_and(|t| t.len() > 5), "{d}");
    d
}

#[tokio::test]
#[ignore = "needs node and STEADFAST_TEST_TS_SDK (scripts/ts-sdk.sh --install)"]
async fn the_ts_sdk_client_reaches_server_everything_through_the_stdio_front() {
    for mode in ["legacy", "auto"] {
        let direct = direct(mode).await;
        let proxied = client(json!({
            "mode": mode,
            "stdio": {"command": BIN, "args": ["proxy", "--", server_everything()]},
            "call": echo(),
        }))
        .await;
        assert_same_server(&direct, &proxied);
        if mode == "legacy" {
            assert_eq!(proxied["era"], "legacy", "{proxied}");
            assert_eq!(proxied["version"], direct["version"], "{proxied}");
        }
    }
}

#[tokio::test]
#[ignore = "needs node and STEADFAST_TEST_TS_SDK (scripts/ts-sdk.sh --install)"]
async fn the_ts_sdk_client_reaches_server_everything_through_the_http_front() {
    let token = "ts-sdk-test-token";
    let front = gateway::HttpGateway::start(
        &["--token-env", "TS_SDK_TOKEN", "--", &server_everything()],
        &[("TS_SDK_TOKEN", token)],
    )
    .await;
    for mode in ["legacy", "auto"] {
        let direct = direct(mode).await;
        let proxied = client(json!({
            "mode": mode,
            "http": {"url": front.url, "token": token},
            "call": echo(),
        }))
        .await;
        assert_same_server(&direct, &proxied);
    }
    // Without the token the SDK's connect fails, and says so.
    let refused = client(json!({"mode": "legacy", "http": {"url": front.url}})).await;
    assert!(refused["error"].is_string(), "{refused}");
}
