//! The TypeScript MCP SDK's client (`@modelcontextprotocol/client` 2.x) through the gateway, as
//! users run it: over stdio (the SDK spawns `steadfast proxy`) and over streamable HTTP, in its
//! three modes — handshake era (`legacy`), negotiating (`auto`: probes with `server/discover`,
//! falls back to `initialize`) and pinned to MCP 2026-07-28 (`modern`, no fallback) — to the
//! handshake-era npm `@modelcontextprotocol/server-everything` (the gateway translates between
//! the eras) and to a modern-only Python SDK 2.x server. What the client sees through the
//! gateway is compared with what it sees talking to the server directly.
//!
//! Needs node and the packages installed by `scripts/ts-sdk.sh --install`, whose output
//! `STEADFAST_TEST_TS_SDK` names (CI sets it); the modern-only server also needs
//! `STEADFAST_TEST_MCP2_PYTHON` (`scripts/modern-sdk.sh --install`). Ignored otherwise.

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

/// The client's modes (see support/ts-sdk/client.mjs).
const MODES: [&str; 3] = ["legacy", "auto", "modern"];

/// The era the client ended up in through the gateway, which speaks both: a negotiating
/// client gets the current revision even when the server behind is handshake-era.
fn assert_era(mode: &str, proxied: &Value) {
    let (era, version) = match mode {
        "legacy" => ("legacy", "2025-11-25"),
        _ => ("modern", "2026-07-28"),
    };
    assert_eq!(proxied["era"], era, "{mode}: {proxied}");
    assert_eq!(proxied["version"], version, "{mode}: {proxied}");
}

async fn direct(mode: &str) -> Value {
    // server-everything is handshake-era: asked directly, a modern-only client cannot use it.
    let mode = if mode == "modern" { "auto" } else { mode };
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
    for mode in MODES {
        let direct = direct(mode).await;
        let proxied = client(json!({
            "mode": mode,
            "stdio": {"command": BIN, "args": ["proxy", "--", server_everything()]},
            "call": echo(),
        }))
        .await;
        assert_same_server(&direct, &proxied);
        assert_era(mode, &proxied);
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
    for mode in MODES {
        let direct = direct(mode).await;
        let proxied = client(json!({
            "mode": mode,
            "http": {"url": front.url, "token": token},
            "call": echo(),
        }))
        .await;
        assert_same_server(&direct, &proxied);
        assert_era(mode, &proxied);
    }
    // Without the token the SDK's connect fails, and says so.
    let refused = client(json!({"mode": "legacy", "http": {"url": front.url}})).await;
    assert!(refused["error"].is_string(), "{refused}");
}

fn modern_only_server() -> Option<Vec<String>> {
    let python = std::env::var("STEADFAST_TEST_MCP2_PYTHON").ok()?;
    let script = format!(
        "{}/tests/support/modern_server.py",
        env!("CARGO_MANIFEST_DIR")
    );
    Some(vec![python, script])
}

#[tokio::test]
#[ignore = "needs node, STEADFAST_TEST_TS_SDK (scripts/ts-sdk.sh) and STEADFAST_TEST_MCP2_PYTHON (scripts/modern-sdk.sh)"]
async fn the_ts_sdk_client_reaches_a_modern_only_python_server_in_every_mode() {
    let server = modern_only_server().expect("STEADFAST_TEST_MCP2_PYTHON");
    let call = json!({"name": "echo", "arguments": {"text": "through steadfast"}});
    // Directly, only a client that speaks the current revision can use this server.
    let direct = client(json!({
        "mode": "modern",
        "stdio": {"command": server[0], "args": [server[1]]},
        "call": call,
    }))
    .await;
    assert!(direct.get("error").is_none(), "direct: {direct}");
    let legacy_direct = client(json!({
        "mode": "legacy",
        "stdio": {"command": server[0], "args": [server[1]]},
    }))
    .await;
    assert!(legacy_direct["error"].is_string(), "{legacy_direct}");
    // Through the gateway every mode works: a handshake-era client included.
    let mut args = vec!["proxy".to_owned(), "--".to_owned()];
    args.extend(server.iter().cloned());
    for mode in MODES {
        let proxied = client(json!({
            "mode": mode,
            "stdio": {"command": BIN, "args": args},
            "call": call,
        }))
        .await;
        assert!(proxied.get("error").is_none(), "{mode}: {proxied}");
        assert_eq!(proxied["tools"], direct["tools"], "{mode}: {proxied}");
        assert_eq!(
            proxied["call"]["content"][0]["text"], "through steadfast",
            "{mode}: {proxied}"
        );
        assert_era(mode, &proxied);
    }
}
