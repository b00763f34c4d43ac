//! MCP 2026-07-28 ("modern") clients and upstreams on real processes, in raw JSON-RPC: no
//! `initialize`, `server/discover`, the per-request envelope, the HTTP routing headers
//! (-32020), unsupported versions (-32022), over stdio and HTTP; and the gateway speaking each
//! upstream in its era (the fake upstream's `modern-only` mode refuses `initialize` and any
//! request without the envelope).

#[path = "support/gateway.rs"]
mod gateway;
#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::Duration;

use raw_client::{RawProcess, fake_upstream_command, read_counts};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(15);
const MODERN: &str = "2026-07-28";
const CONFIG: &str = "[proxy]\ninit_timeout = \"10s\"\nreconnect_wait = \"5s\"\n";

/// A modern request's params: `extra` with the per-request envelope.
fn modern(extra: Value) -> Value {
    modern_at(MODERN, extra)
}

fn modern_at(version: &str, extra: Value) -> Value {
    let mut p = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "0"},
    }});
    if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    p
}

/// The gateway on stdio over the fake upstream (counting into `counts`).
fn gateway(config: &Temp, counts: &Temp, fake_args: &[&str]) -> RawProcess {
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        config.path().to_owned(),
        "--".to_owned(),
    ];
    let mut args = vec!["--count-file", counts.path()];
    args.extend_from_slice(fake_args);
    argv.extend(fake_upstream_command(&args));
    RawProcess::spawn(&argv).expect("the gateway starts")
}

fn setup() -> (Temp, Temp) {
    let config = Temp::new("modern-config");
    std::fs::write(&config.0, CONFIG).unwrap();
    (config, Temp::new("modern-counts"))
}

async fn ask(p: &mut RawProcess, id: i64, method: &str, params: Value) -> Value {
    p.call(json!(id), method, params, ANSWER)
        .await
        .unwrap_or_else(|| panic!("{method} was not answered"))
        .response
}

#[tokio::test]
async fn stdio_modern_client_needs_no_initialize() {
    let (config, counts) = setup();
    let mut p = gateway(&config, &counts, &[]);
    let d = ask(&mut p, 1, "server/discover", modern(json!({}))).await;
    let r = &d["result"];
    assert_eq!(r["resultType"], "complete", "{d}");
    let versions = r["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!(MODERN)), "{d}");
    assert!(versions.contains(&json!("2025-11-25")), "dual-era: {d}");
    assert!(r["capabilities"]["tools"].is_object(), "{d}");
    assert_eq!(
        r["capabilities"]["tools"]["listChanged"], true,
        "delivered on subscriptions/listen: {d}"
    );
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "fake-upstream"
    );

    let l = ask(&mut p, 2, "tools/list", modern(json!({}))).await;
    assert_eq!(
        l["result"]["resultType"], "complete",
        "added for a handshake-era upstream: {l}"
    );
    assert!(
        l["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo")
    );
    let c = ask(
        &mut p,
        3,
        "tools/call",
        modern(json!({"name": "echo", "arguments": {"text": "hi"}})),
    )
    .await;
    assert_eq!(c["result"]["content"][0]["text"], "hi", "{c}");
    assert_eq!(c["result"]["resultType"], "complete");

    let bad = ask(&mut p, 4, "tools/list", modern_at("1900-01-01", json!({}))).await;
    assert_eq!(bad["error"]["code"], -32022, "{bad}");
    assert_eq!(bad["error"]["data"]["requested"], "1900-01-01");
    assert!(
        bad["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN))
    );
    let half = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}});
    let bad = ask(&mut p, 5, "tools/list", half).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("clientCapabilities")
    );

    // The envelope is the gateway's business: the handshake-era upstream never saw it, and
    // was initialized once (by the gateway, for the modern client).
    let seen = read_counts(&counts.0);
    assert_eq!(seen["methods"]["initialize"], 1, "{seen}");
    assert!(seen.get("envelopes").is_none(), "{seen}");
}

#[tokio::test]
async fn stdio_handshake_client_still_initializes_first() {
    let (config, counts) = setup();
    let mut p = gateway(&config, &counts, &[]);
    let r = ask(&mut p, 1, "tools/list", json!({})).await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(p.initialize(ANSWER).await.is_some());
    let r = ask(&mut p, 2, "tools/list", json!({})).await;
    assert!(r["result"]["tools"].is_array(), "{r}");
    assert!(
        r["result"].get("resultType").is_none(),
        "not added for a handshake-era client: {r}"
    );
}

#[tokio::test]
async fn handshake_client_through_the_gateway_to_a_modern_only_upstream() {
    let (config, counts) = setup();
    let mut p = gateway(&config, &counts, &["--mode", "modern-only"]);
    let init = p.initialize(ANSWER).await.expect("initialize is answered");
    let v = init["result"]["protocolVersion"]
        .as_str()
        .unwrap_or_default();
    assert!(
        v.starts_with("2025-") || v == "2024-11-05",
        "a handshake revision: {init}"
    );
    assert_eq!(
        init["result"]["serverInfo"]["name"], "fake-modern-upstream",
        "{init}"
    );
    let c = ask(
        &mut p,
        7,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "across eras"}}),
    )
    .await;
    assert_eq!(c["result"]["content"][0]["text"], "across eras", "{c}");
    // What the 2026-07-28 revision added to the result is not relayed to a 2025 client.
    assert!(c["result"].get("resultType").is_none(), "{c}");
    assert!(c["result"].get("_meta").is_none(), "{c}");
    let seen = read_counts(&counts.0);
    assert!(
        seen["methods"].get("initialize").is_none(),
        "never initialized: {seen}"
    );
    assert!(
        seen["envelopes"][MODERN].as_u64().unwrap_or(0) >= 3,
        "{seen}"
    );
}

#[tokio::test]
async fn modern_client_through_the_gateway_to_a_modern_only_upstream() {
    let (config, counts) = setup();
    let mut p = gateway(&config, &counts, &["--mode", "modern-only"]);
    let d = ask(&mut p, 1, "server/discover", modern(json!({}))).await;
    assert_eq!(
        d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "fake-modern-upstream",
        "{d}"
    );
    let c = ask(
        &mut p,
        2,
        "tools/call",
        modern(json!({"name": "echo", "arguments": {"text": "modern"}})),
    )
    .await;
    assert_eq!(c["result"]["content"][0]["text"], "modern", "{c}");
}

/// A modern-only server still starting when the probe's bound runs out (the bound is
/// `init_timeout`, here 2 s, below the server's 3 s start): the gateway falls back to
/// `initialize`, which the now-awake server refuses with -32022, and asks `server/discover`
/// once more instead of giving the start up (seen with Python SDK 2.x servers on a loaded CI
/// machine: the gateway restarted them until it gave up).
#[tokio::test]
async fn a_modern_only_upstream_slower_than_the_probe_is_still_found_modern() {
    let config = Temp::new("modern-slow-config");
    std::fs::write(
        &config.0,
        "[proxy]\ninit_timeout = \"2s\"\nreconnect_wait = \"5s\"\n",
    )
    .unwrap();
    let counts = Temp::new("modern-slow-counts");
    let args = ["--mode", "modern-only", "--start-delay-ms", "3000"];
    let mut p = gateway(&config, &counts, &args);
    let mut served = None;
    for id in 1..=5 {
        let c = ask(
            &mut p,
            id,
            "tools/call",
            modern(json!({"name": "echo", "arguments": {"text": "late"}})),
        )
        .await;
        if c.get("result").is_some() {
            served = Some(c);
            break;
        }
    }
    let c = served.expect("a call answered once the upstream was up");
    assert_eq!(c["result"]["content"][0]["text"], "late", "{c}");
    let seen = std::fs::read_to_string(counts.path()).unwrap_or_default();
    let counted: Value = serde_json::from_str(&seen).unwrap_or_default();
    assert_eq!(counted["starts"], 1, "one start, not restarts: {seen}");
}

// --- HTTP ---------------------------------------------------------------------------------

struct Front {
    _child: tokio::process::Child,
    url: String,
}

async fn http_front(fake_args: &[&str]) -> (Front, Temp, Temp) {
    let (config, counts) = setup();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--config",
        config.path(),
        "--",
    ]);
    let mut args = vec!["--count-file", counts.path()];
    args.extend_from_slice(fake_args);
    cmd.args(fake_upstream_command(&args))
        .env("RUST_LOG", "info");
    let (child, url, _log) = gateway::listening(cmd).await;
    (Front { _child: child, url }, config, counts)
}

/// One POST with `headers`: (status, headers lower-cased, the answer — a stream's last
/// message when it is a stream).
async fn post(
    url: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, Vec<(String, String)>, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let body = body.to_string();
    let mut head = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
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
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let answer = raw_client::http_messages(body).pop().unwrap_or(Value::Null);
    (status, headers, answer)
}

/// A modern POST with the routing headers a conforming client sends.
async fn modern_post(
    url: &str,
    id: i64,
    method: &str,
    params: Value,
) -> (u16, Vec<(String, String)>, Value) {
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut headers = vec![("MCP-Protocol-Version", MODERN), ("Mcp-Method", method)];
    if let Some(n) = name.as_deref() {
        headers.push(("Mcp-Name", n));
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    post(url, &headers, &body).await
}

#[cfg(feature = "http")]
#[tokio::test]
async fn http_modern_requests_are_served_without_a_session() {
    let (front, _config, counts) = http_front(&[]).await;
    let url = &front.url;
    let (status, headers, d) = modern_post(url, 1, "server/discover", modern(json!({}))).await;
    assert_eq!(status, 200, "{d}");
    assert!(
        !headers.iter().any(|(k, _)| k == "mcp-session-id"),
        "no session for a modern client: {headers:?}"
    );
    assert!(
        d["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN))
    );

    let call = modern(json!({"name": "echo", "arguments": {"text": "stateless"}}));
    let (status, _, c) = modern_post(url, 2, "tools/call", call.clone()).await;
    assert_eq!(
        (status, &c["result"]["content"][0]["text"]),
        (200, &json!("stateless")),
        "{c}"
    );

    // Headers that disagree with the body, or are missing: -32020 and 400.
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call});
    for headers in [
        vec![
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "other"),
        ],
        vec![
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/list"),
            ("Mcp-Name", "echo"),
        ],
        vec![("MCP-Protocol-Version", MODERN), ("Mcp-Name", "echo")],
        vec![
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "echo"),
        ],
    ] {
        let (status, _, e) = post(url, &headers, &body).await;
        assert_eq!(
            (status, &e["error"]["code"]),
            (400, &json!(-32020)),
            "{headers:?}: {e}"
        );
        assert_eq!(e["id"], 3);
    }
    // The base64 sentinel is decoded before comparing.
    let headers = [
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "=?base64?ZWNobw==?="),
    ];
    let (status, _, ok) = post(url, &headers, &body).await;
    assert_eq!(status, 200, "{ok}");

    // An unsupported version, consistently declared: -32022 naming the supported ones.
    let old = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": modern_at("1900-01-01", json!({}))});
    let (status, _, e) = post(
        url,
        &[
            ("MCP-Protocol-Version", "1900-01-01"),
            ("Mcp-Method", "tools/list"),
        ],
        &old,
    )
    .await;
    assert_eq!((status, &e["error"]["code"]), (400, &json!(-32022)), "{e}");
    assert!(
        e["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN))
    );

    // An unknown method: 404 with the JSON-RPC error (not a legacy server's bare 404).
    let (status, _, e) = modern_post(url, 5, "vendor/unknown", modern(json!({}))).await;
    assert_eq!((status, &e["error"]["code"]), (404, &json!(-32601)), "{e}");

    // A handshake-era client without a session is still told to initialize.
    let (status, _, _) = post(
        url,
        &[],
        &json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 400);
    let seen = read_counts(&counts.0);
    assert_eq!(
        seen["tools"]["echo"], 2,
        "refused requests never reached the upstream: {seen}"
    );
}

#[cfg(feature = "http")]
#[tokio::test]
async fn http_modern_client_to_a_modern_only_upstream() {
    let (front, _config, counts) = http_front(&["--mode", "modern-only"]).await;
    let call = modern(json!({"name": "echo", "arguments": {"text": "both modern"}}));
    let (status, _, c) = modern_post(&front.url, 1, "tools/call", call).await;
    assert_eq!(
        (status, &c["result"]["content"][0]["text"]),
        (200, &json!("both modern")),
        "{c}"
    );
    let seen = read_counts(&counts.0);
    assert!(seen["methods"].get("initialize").is_none(), "{seen}");
}
