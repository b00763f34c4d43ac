//! Requests from the server to the client (sampling, elicitation, roots) through the stdio
//! front: relayed under an id of the proxy's, answered back, and never left waiting — a cancel
//! from the server, a restart of the server, or the proxy's `request_timeout` each end the
//! request at both ends. Real processes: raw client → `steadfast proxy` → the fake upstream.

#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::Duration;

use raw_client::{RawProcess, fake_upstream_command, read_counts};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(10);

const CONFIG: &str = r#"
[proxy]
init_timeout = "3s"
reconnect_wait = "3s"
request_timeout = "1s"
shutdown_grace = "300ms"
restart = { max_attempts = 5, base_delay = "50ms", max_delay = "200ms" }
"#;

fn proxy(fake_args: &[&str]) -> (RawProcess, Temp) {
    let file = Temp::new("config");
    std::fs::write(&file.0, CONFIG).unwrap();
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
        "--".to_owned(),
    ];
    argv.extend(fake_upstream_command(fake_args));
    (RawProcess::spawn(&argv).unwrap(), file)
}

async fn init(p: &mut RawProcess) {
    let r = p.initialize(ANSWER).await.expect("initialize answered");
    assert!(r.pointer("/result/protocolVersion").is_some(), "{r}");
}

/// Reads until a message satisfies `pred` (within `ANSWER`); the messages skipped come back too.
async fn read_until(p: &mut RawProcess, pred: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
    let mut skipped = Vec::new();
    loop {
        let m = p
            .read_message(ANSWER)
            .await
            .unwrap_or_else(|| panic!("nothing matching arrived; saw {skipped:?}"));
        if pred(&m) {
            return (m, skipped);
        }
        skipped.push(m);
    }
}

fn is_request(m: &Value, method: &str) -> bool {
    m["method"] == method && m.get("id").is_some()
}

/// The JSON text a tool result carries.
fn text_json(r: &Value) -> Value {
    let text = r
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no text in {r}"));
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

/// A call to `echo`, answered: everything the proxy wrote to the fake before it has been read.
async fn sync(p: &mut RawProcess, id: i64) {
    p.request(
        json!(id),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "sync"}}),
    )
    .await
    .unwrap();
    let a = p.wait_for(&json!(id), ANSWER).await.expect("echo answered");
    assert_eq!(a.response["result"]["content"][0]["text"], "sync");
}

#[tokio::test]
async fn a_server_request_reaches_the_client_and_its_answer_the_server() {
    let (mut p, _c) = proxy(&[]);
    init(&mut p).await;
    p.request(
        json!(1),
        "tools/call",
        json!({"name": "ask", "arguments": {"method": "roots/list"}}),
    )
    .await
    .unwrap();
    let (req, _) = read_until(&mut p, |m| is_request(m, "roots/list")).await;
    let ours = req["id"].clone();
    assert!(
        ours.as_str().is_some_and(|s| s.starts_with("steadfast-")),
        "the proxy's own id: {req}"
    );
    p.send(&json!({"jsonrpc": "2.0", "id": ours, "result": {"roots": [{"uri": "file:///work", "name": "work"}]}}))
        .await
        .unwrap();
    let a = p.wait_for(&json!(1), ANSWER).await.expect("answered");
    assert_eq!(
        text_json(&a.response)["result"]["roots"][0]["uri"],
        "file:///work",
        "{}",
        a.response
    );
}

#[tokio::test]
async fn an_unanswered_server_request_ends_at_the_request_timeout_at_both_ends() {
    let counts = Temp::new("counts");
    let (mut p, _c) = proxy(&["--count-file", counts.path()]);
    init(&mut p).await;
    p.request(
        json!(1),
        "tools/call",
        json!({"name": "ask", "arguments": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}}),
    )
    .await
    .unwrap();
    let (req, _) = read_until(&mut p, |m| is_request(m, "sampling/createMessage")).await;
    let ours = req["id"].clone();
    // The client never answers: at `request_timeout` (1 s) the server hears an error and the
    // client is told the request is over.
    let (cancel, _) = read_until(&mut p, |m| m["method"] == "notifications/cancelled").await;
    assert_eq!(cancel["params"]["requestId"], ours, "{cancel}");
    let a = p.wait_for(&json!(1), ANSWER).await.expect("answered");
    let seen = text_json(&a.response);
    assert_eq!(seen["error"]["code"], -32001, "{}", a.response);
    assert!(
        seen["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("did not answer sampling/createMessage")),
        "{seen}"
    );
    // A late answer goes nowhere: the entry is gone.
    p.send(&json!({"jsonrpc": "2.0", "id": ours, "result": {"role": "assistant", "content": {"type": "text", "text": "late"}, "model": "m"}}))
        .await
        .unwrap();
    sync(&mut p, 2).await;
    assert_eq!(
        read_counts(&counts.0)["answers"],
        1,
        "the server heard the timeout only"
    );
}

#[tokio::test]
async fn a_cancel_from_the_server_reaches_the_client_and_ends_the_request() {
    let counts = Temp::new("counts");
    let (mut p, _c) = proxy(&["--count-file", counts.path()]);
    init(&mut p).await;
    p.request(
        json!(1),
        "tools/call",
        json!({"name": "ask", "arguments": {"method": "elicitation/create", "cancel_after_ms": 200,
               "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}}}),
    )
    .await
    .unwrap();
    let (req, _) = read_until(&mut p, |m| is_request(m, "elicitation/create")).await;
    let ours = req["id"].clone();
    let (cancel, _) = read_until(&mut p, |m| m["method"] == "notifications/cancelled").await;
    assert_eq!(
        cancel["params"]["requestId"], ours,
        "renamed to our id: {cancel}"
    );
    assert_eq!(cancel["params"]["reason"], "the fake gave up");
    let a = p.wait_for(&json!(1), ANSWER).await.expect("answered");
    assert!(
        text_json(&a.response)["cancelled"].is_string(),
        "{}",
        a.response
    );
    // The client answers anyway: the proxy no longer knows the request, so the server does
    // not get an answer to a request it cancelled.
    p.send(&json!({"jsonrpc": "2.0", "id": ours, "result": {"action": "accept", "content": {}}}))
        .await
        .unwrap();
    sync(&mut p, 2).await;
    let counts = read_counts(&counts.0);
    assert_eq!(counts["stale_answers"], Value::Null, "{counts}");
    assert_eq!(counts["answers"], Value::Null, "{counts}");
}

#[tokio::test]
async fn a_restart_of_the_server_ends_its_requests_at_the_client() {
    let pid_file = Temp::new("pid");
    let (mut p, _c) = proxy(&["--pid-file", pid_file.path()]);
    init(&mut p).await;
    p.request(
        json!(1),
        "tools/call",
        json!({"name": "ask", "arguments": {"method": "roots/list"}}),
    )
    .await
    .unwrap();
    let (req, _) = read_until(&mut p, |m| is_request(m, "roots/list")).await;
    let ours = req["id"].clone();
    let pid: i32 = std::fs::read_to_string(&pid_file.0)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: killing the fake upstream this test started (through the proxy).
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let (cancel, _) = read_until(&mut p, |m| m["method"] == "notifications/cancelled").await;
    assert_eq!(cancel["params"]["requestId"], ours, "{cancel}");
    assert!(
        cancel["params"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("connection ended")),
        "{cancel}"
    );
    // The call itself was lost with the server (ask is not idempotent: not replayed).
    let a = p.wait_for(&json!(1), ANSWER).await.expect("answered");
    assert_eq!(a.response["result"]["isError"], true, "{}", a.response);
    // The restarted server serves the next call.
    sync(&mut p, 2).await;
}
