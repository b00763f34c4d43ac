//! MCP 2026-07-28 ("modern") clients and upstreams, in raw JSON-RPC on the test kit (moved
//! from `steadfast-cli/tests/modern.rs`, same assertions): no `initialize`,
//! `server/discover`, the per-request envelope, the HTTP routing headers (-32020),
//! unsupported versions (-32022), over stdio and HTTP; and the gateway speaking each upstream
//! in its era ([`Fake::modern`] refuses `initialize` and any request without the envelope).

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::client::{HttpAnswer, post};
use support::fake::{Fake, MODERN};
use support::stdio;

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

fn plain() -> Fake {
    Fake::new("fake-upstream")
}

fn modern_only() -> Fake {
    Fake::modern("fake-modern-upstream")
}

#[tokio::test]
async fn stdio_modern_client_needs_no_initialize() {
    let fake = plain();
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    let p = &mut gw.client;
    let d = p
        .call(1, "server/discover", modern(json!({})))
        .await
        .response;
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

    let l = p.call(2, "tools/list", modern(json!({}))).await.response;
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
    let c = p
        .call(
            3,
            "tools/call",
            modern(json!({"name": "echo", "arguments": {"text": "hi"}})),
        )
        .await
        .response;
    assert_eq!(c["result"]["content"][0]["text"], "hi", "{c}");
    assert_eq!(c["result"]["resultType"], "complete");

    let bad = p
        .call(4, "tools/list", modern_at("1900-01-01", json!({})))
        .await
        .response;
    assert_eq!(bad["error"]["code"], -32022, "{bad}");
    assert_eq!(bad["error"]["data"]["requested"], "1900-01-01");
    assert!(
        bad["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN))
    );
    let half = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}});
    let bad = p.call(5, "tools/list", half).await.response;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("clientCapabilities")
    );

    // The handshake-era upstream was initialized once (by the gateway, for the modern
    // client). (That it never sees the envelope is `a_handshake_era_upstream_never_sees_the_envelope`.)
    assert_eq!(fake.count("initialize"), 1, "{:?}", fake.seen());
}

/// The envelope is the gateway's business: a handshake-era upstream sees it only on the
/// gateway's own `server/discover` probe, never on a client's request. (The CLI test this
/// came from asserted it through `fake_upstream.py`'s envelope count, which that fake keeps
/// only in its modern-only mode: the assertion could not fail there. Here it does.)
#[tokio::test]
async fn a_handshake_era_upstream_never_sees_the_envelope() {
    let fake = plain();
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    let p = &mut gw.client;
    p.call(1, "tools/list", modern(json!({}))).await;
    let c = p
        .call(
            2,
            "tools/call",
            modern(json!({"name": "echo", "arguments": {"text": "hi"}})),
        )
        .await
        .response;
    assert_eq!(c["result"]["content"][0]["text"], "hi", "{c}");
    let leaked: Vec<Value> = fake
        .seen()
        .into_iter()
        .filter(|m| m["method"] != "server/discover")
        .filter(|m| m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].is_string())
        .collect();
    assert!(leaked.is_empty(), "{leaked:?}");
}

#[tokio::test]
async fn stdio_handshake_client_still_initializes_first() {
    let fake = plain();
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    let p = &mut gw.client;
    let r = p.call(1, "tools/list", json!({})).await.response;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(p.initialize().await.get("result").is_some());
    let r = p.call(2, "tools/list", json!({})).await.response;
    assert!(r["result"]["tools"].is_array(), "{r}");
    assert!(
        r["result"].get("resultType").is_none(),
        "not added for a handshake-era client: {r}"
    );
}

#[tokio::test]
async fn handshake_client_through_the_gateway_to_a_modern_only_upstream() {
    let fake = modern_only();
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    let p = &mut gw.client;
    let init = p.initialize().await;
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
    let c = p
        .call(
            7,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "across eras"}}),
        )
        .await
        .response;
    assert_eq!(c["result"]["content"][0]["text"], "across eras", "{c}");
    // What the 2026-07-28 revision added to the result is not relayed to a 2025 client.
    assert!(c["result"].get("resultType").is_none(), "{c}");
    assert!(c["result"].get("_meta").is_none(), "{c}");
    assert_eq!(fake.count("initialize"), 0, "never initialized");
    assert!(fake.envelopes(MODERN) >= 3, "{:?}", fake.seen());
}

#[tokio::test]
async fn modern_client_through_the_gateway_to_a_modern_only_upstream() {
    let fake = modern_only();
    let mut gw = stdio(support::config(CONFIG), fake.upstream());
    let p = &mut gw.client;
    let d = p
        .call(1, "server/discover", modern(json!({})))
        .await
        .response;
    assert_eq!(
        d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "fake-modern-upstream",
        "{d}"
    );
    let c = p
        .call(
            2,
            "tools/call",
            modern(json!({"name": "echo", "arguments": {"text": "modern"}})),
        )
        .await
        .response;
    assert_eq!(c["result"]["content"][0]["text"], "modern", "{c}");
}

/// A modern-only server still starting when the probe's bound runs out (the bound is
/// `init_timeout`, here 2 s, below the server's 3 s start): the gateway falls back to
/// `initialize`, which the now-awake server refuses with -32022, and asks `server/discover`
/// once more instead of giving the start up (seen with Python SDK 2.x servers on a loaded CI
/// machine: the gateway restarted them until it gave up). On the paused clock.
#[tokio::test(start_paused = true)]
async fn a_modern_only_upstream_slower_than_the_probe_is_still_found_modern() {
    let config = "[proxy]\ninit_timeout = \"2s\"\nreconnect_wait = \"5s\"\n";
    let fake = modern_only().start_delay(Duration::from_secs(3));
    let mut gw = stdio(support::config(config), fake.upstream());
    let p = &mut gw.client;
    let mut served = None;
    for id in 1..=5 {
        let c = p
            .call(
                id,
                "tools/call",
                modern(json!({"name": "echo", "arguments": {"text": "late"}})),
            )
            .await
            .response;
        if c.get("result").is_some() {
            served = Some(c);
            break;
        }
    }
    let c = served.expect("a call answered once the upstream was up");
    assert_eq!(c["result"]["content"][0]["text"], "late", "{c}");
    assert_eq!(fake.starts(), 1, "one start, not restarts");
}

// --- HTTP ---------------------------------------------------------------------------------

/// A modern POST with the routing headers a conforming client sends (`Mcp-Name` from the
/// params' name or URI).
async fn modern_post(url: &str, id: i64, method: &str, params: Value) -> HttpAnswer {
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

/// The answer's last message, or null.
fn last(a: &HttpAnswer) -> Value {
    a.messages.last().cloned().unwrap_or(Value::Null)
}

#[cfg(feature = "http")]
#[tokio::test]
async fn http_modern_requests_are_served_without_a_session() {
    let fake = plain();
    let url = support::http(support::config(CONFIG), fake.upstream()).await;
    let url = &url;
    let a = modern_post(url, 1, "server/discover", modern(json!({}))).await;
    let d = last(&a);
    assert_eq!(a.status, 200, "{d}");
    assert!(
        a.header("mcp-session-id").is_none(),
        "no session for a modern client: {:?}",
        a.headers
    );
    assert!(
        d["result"]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN))
    );

    let call = modern(json!({"name": "echo", "arguments": {"text": "stateless"}}));
    let a = modern_post(url, 2, "tools/call", call.clone()).await;
    let c = last(&a);
    assert_eq!(
        (a.status, &c["result"]["content"][0]["text"]),
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
        let a = post(url, &headers, &body).await;
        let e = last(&a);
        assert_eq!(
            (a.status, &e["error"]["code"]),
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
    let a = post(url, &headers, &body).await;
    assert_eq!(a.status, 200, "{a:?}");

    // An unsupported version, consistently declared: -32022 naming the supported ones.
    let old = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": modern_at("1900-01-01", json!({}))});
    let a = post(
        url,
        &[
            ("MCP-Protocol-Version", "1900-01-01"),
            ("Mcp-Method", "tools/list"),
        ],
        &old,
    )
    .await;
    let e = last(&a);
    assert_eq!(
        (a.status, &e["error"]["code"]),
        (400, &json!(-32022)),
        "{e}"
    );
    assert!(
        e["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN))
    );

    // An unknown method: 404 with the JSON-RPC error (not a legacy server's bare 404).
    let a = modern_post(url, 5, "vendor/unknown", modern(json!({}))).await;
    let e = last(&a);
    assert_eq!(
        (a.status, &e["error"]["code"]),
        (404, &json!(-32601)),
        "{e}"
    );

    // A handshake-era client without a session is still told to initialize.
    let a = post(
        url,
        &[],
        &json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}),
    )
    .await;
    assert_eq!(a.status, 400);
    assert_eq!(
        fake.calls("echo"),
        2,
        "refused requests never reached the upstream"
    );
}

#[cfg(feature = "http")]
#[tokio::test]
async fn http_modern_client_to_a_modern_only_upstream() {
    let fake = modern_only();
    let url = support::http(support::config(CONFIG), fake.upstream()).await;
    let call = modern(json!({"name": "echo", "arguments": {"text": "both modern"}}));
    let a = modern_post(&url, 1, "tools/call", call).await;
    let c = last(&a);
    assert_eq!(
        (a.status, &c["result"]["content"][0]["text"]),
        (200, &json!("both modern")),
        "{c}"
    );
    assert_eq!(fake.count("initialize"), 0);
}
