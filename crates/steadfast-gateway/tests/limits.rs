//! Tool-call limits through the gateway: every attempt counts, and a limit can answer with a
//! JSON-RPC error (moved from `steadfast-cli/tests/limits_and_state.rs`, same assertions; the
//! state shared through Redis stays there, across two real processes).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use support::fake::{Fake, Step, text_result};
use support::stdio;

fn call_params(name: &str) -> Value {
    json!({"name": name, "arguments": {"text": "x"}})
}

fn llm_code(r: &Value) -> String {
    let text = r
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or("{}");
    serde_json::from_str::<Value>(text).unwrap_or_default()["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `flaky` fails with a transient error its first `failures` calls, then succeeds (as
/// `fake_upstream.py --flaky-failures N`).
fn flaky(failures: usize) -> Fake {
    let left = Arc::new(AtomicUsize::new(failures));
    Fake::new("flaky").on(move |m| {
        if m["method"] != "tools/call" || m["params"]["name"] != "flaky" {
            return Step::Default;
        }
        let failing = left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            let mut r = text_result("503 Service Unavailable: temporarily unavailable, try again");
            r["isError"] = json!(true);
            Step::Result(r)
        } else {
            Step::text("flaky succeeded")
        }
    })
}

const RETRY: &str =
    "[defaults]\nretry = { max_attempts = 3, base_delay = \"20ms\", max_delay = \"50ms\" }\n";

#[tokio::test(start_paused = true)]
async fn retries_count_against_a_tool_call_limit() {
    let config = format!("{RETRY}[limits]\nper_tool = {{ max = 3, window = \"1h\" }}\n");
    let fake = flaky(2);
    let mut gw = stdio(support::config(&config), fake.upstream());
    let p = &mut gw.client;
    let init = p.initialize().await;
    assert!(init.pointer("/result/protocolVersion").is_some(), "{init}");
    // Two transient failures, then success: three attempts, the whole cap.
    let first = p.call(1, "tools/call", call_params("flaky")).await.response;
    assert_eq!(first["result"]["isError"], false, "{first}");
    let second = p.call(2, "tools/call", call_params("flaky")).await.response;
    assert_eq!(llm_code(&second), "TOOL_CALL_LIMIT", "{second}");
    let text = second
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap();
    assert!(text.to_lowercase().contains("do not call"), "{text}");
    assert_eq!(fake.calls("flaky"), 3, "the refused call was not sent");
    // Another tool has its own count.
    let other = p.call(3, "tools/call", call_params("echo")).await.response;
    assert_eq!(other["result"]["content"][0]["text"], "x");
}

#[tokio::test(start_paused = true)]
async fn a_limit_can_answer_with_a_jsonrpc_error() {
    let config =
        "[limits]\nper_session = { max = 1, window = \"1h\" }\non_limit = \"jsonrpc_error\"\n";
    let fake = Fake::new("plain");
    let mut gw = stdio(support::config(config), fake.upstream());
    let p = &mut gw.client;
    let init = p.initialize().await;
    assert!(init.pointer("/result/protocolVersion").is_some(), "{init}");
    let ok = p.call(1, "tools/call", call_params("echo")).await.response;
    assert_eq!(ok["result"]["content"][0]["text"], "x");
    let refused = p.call(2, "tools/call", call_params("echo")).await.response;
    assert_eq!(refused["error"]["code"], -32005, "{refused}");
}
