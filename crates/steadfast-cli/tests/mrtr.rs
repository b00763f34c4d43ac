//! Multi round-trip requests (MCP 2026-07-28) for modern clients in front of a handshake-era
//! upstream, in raw JSON-RPC over stdio and HTTP: the upstream's elicitation during a modern
//! `tools/call` becomes an `input_required` result (`inputRequests`, `requestState`), the
//! retry with `inputResponses` answers the upstream's request and gets the call's result; a
//! state used twice or unknown is refused naming `requestState`; a parked call never resumed
//! is cancelled upstream at the bound (`request_timeout`); a client that did not declare the
//! capability has the upstream hear `-32021`. Real processes: raw client → `steadfast proxy`
//! → the fake upstream (its `ask` tool sends the client a request and returns the answer).

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
/// A parked call not resumed is cancelled after `request_timeout`: 1 s here.
const SHORT: &str =
    "[proxy]\ninit_timeout = \"10s\"\nreconnect_wait = \"5s\"\nrequest_timeout = \"1s\"\n";

/// A modern request's params with `capabilities` in the envelope, and `extra`.
fn modern(capabilities: Value, extra: Value) -> Value {
    let mut p = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-mrtr", "version": "0"},
    }});
    if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    p
}

/// The `ask` tool's arguments: an elicitation with `message`.
fn elicit(message: &str) -> Value {
    json!({"name": "ask", "arguments": {"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    }}})
}

fn elicitation_caps() -> Value {
    json!({"elicitation": {"form": {}}})
}

/// The retry of `call` (its params) with `responses` and `state`.
fn retry(caps: Value, call: &Value, responses: Value, state: &Value) -> Value {
    let mut extra = call.clone();
    extra["inputResponses"] = responses;
    extra["requestState"] = state.clone();
    modern(caps, extra)
}

fn setup(config: &str) -> (Temp, Temp) {
    let file = Temp::new("mrtr-config");
    std::fs::write(&file.0, config).unwrap();
    (file, Temp::new("mrtr-counts"))
}

fn stdio_gateway(config: &Temp, counts: &Temp) -> RawProcess {
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        config.path().to_owned(),
        "--".to_owned(),
    ];
    argv.extend(fake_upstream_command(&["--count-file", counts.path()]));
    RawProcess::spawn(&argv).expect("the gateway starts")
}

async fn ask(p: &mut RawProcess, id: i64, method: &str, params: Value) -> Value {
    p.call(json!(id), method, params, ANSWER)
        .await
        .unwrap_or_else(|| panic!("{method} was not answered"))
        .response
}

/// The JSON text a tool result carries.
fn text_json(r: &Value) -> Value {
    let text = r
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no text in {r}"));
    serde_json::from_str(text).unwrap_or_else(|_| json!(text))
}

/// The one input request of an `input_required` answer: (its key, the request, the state).
fn input_required(r: &Value) -> (String, Value, Value) {
    let res = &r["result"];
    assert_eq!(res["resultType"], "input_required", "{r}");
    let requests = res["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{r}");
    let (key, request) = requests.iter().next().unwrap();
    let state = res["requestState"].clone();
    assert!(
        state
            .as_str()
            .is_some_and(|s| s.starts_with("steadfast-mrtr.") && s.len() > 40),
        "an unguessable state: {r}"
    );
    (key.clone(), request.clone(), state)
}

/// Polls the fake's counters until `key` is at least 1 (within `ANSWER`).
async fn await_count(counts: &Temp, key: &str) -> Value {
    let deadline = tokio::time::Instant::now() + ANSWER;
    loop {
        let c = read_counts(&counts.0);
        if c[key].as_u64().unwrap_or(0) >= 1 {
            return c;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fake never counted {key}: {c}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn assert_invalid_state(r: &Value) {
    let e = &r["error"];
    assert_eq!(e["code"], -32602, "{r}");
    let m = e["message"].as_str().unwrap_or_default();
    assert!(m.contains("requestState"), "names the field: {r}");
    assert!(m.contains("start over"), "says what to do: {r}");
    assert_eq!(e["data"]["field"], "requestState", "{r}");
}

#[tokio::test]
async fn stdio_an_elicitation_becomes_input_required_and_the_retry_completes_the_call() {
    let (config, counts) = setup(CONFIG);
    let mut p = stdio_gateway(&config, &counts);
    let call = elicit("your name?");
    let first = ask(
        &mut p,
        1,
        "tools/call",
        modern(elicitation_caps(), call.clone()),
    )
    .await;
    let (key, request, state) = input_required(&first);
    assert_eq!(request["method"], "elicitation/create", "{first}");
    assert_eq!(request["params"]["message"], "your name?", "{first}");
    assert!(
        request.get("id").is_none(),
        "an embedded request has no id: {first}"
    );
    let answer = json!({key.clone(): {"action": "accept", "content": {"name": "Ada"}}});
    let second = ask(
        &mut p,
        2,
        "tools/call",
        retry(elicitation_caps(), &call, answer.clone(), &state),
    )
    .await;
    assert_eq!(second["result"]["resultType"], "complete", "{second}");
    let seen = text_json(&second);
    assert_eq!(
        seen["result"],
        json!({"action": "accept", "content": {"name": "Ada"}}),
        "the upstream got the client's answer: {second}"
    );
    // A state is used once.
    let again = ask(
        &mut p,
        3,
        "tools/call",
        retry(elicitation_caps(), &call, answer, &state),
    )
    .await;
    assert_invalid_state(&again);
    let c = read_counts(&counts.0);
    assert_eq!(c["tools"]["ask"], 1, "the call ran once: {c}");
    assert_eq!(c["answers"], 1, "{c}");
}

/// Issue 36 item 13c: the progress of a call resumed by its retry carries the retry's token
/// (the token the client now listens for), not the first request's.
#[tokio::test]
async fn stdio_a_resumed_calls_progress_carries_the_retrys_token() {
    let (config, counts) = setup(CONFIG);
    let mut p = stdio_gateway(&config, &counts);
    let mut call = elicit("your name?");
    call["arguments"]["progress_after"] = json!(3);
    let with_token = |token: &str, params: Value| {
        let mut params = params;
        params["_meta"]["progressToken"] = json!(token);
        params
    };
    let first = p
        .call(
            json!(1),
            "tools/call",
            with_token("first", modern(elicitation_caps(), call.clone())),
            ANSWER,
        )
        .await
        .expect("answered");
    let (key, _, state) = input_required(&first.response);
    let answer = json!({key: {"action": "accept", "content": {"name": "Ada"}}});
    let second = p
        .call(
            json!(2),
            "tools/call",
            with_token("retry-1", retry(elicitation_caps(), &call, answer, &state)),
            ANSWER,
        )
        .await
        .expect("the retry is answered");
    assert_eq!(
        second.response["result"]["resultType"], "complete",
        "{}",
        second.response
    );
    let tokens: Vec<&Value> = first
        .before
        .iter()
        .chain(&second.before)
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"]["progressToken"])
        .collect();
    assert_eq!(tokens, [&json!("retry-1"); 3], "{:?}", second.before);
}

/// A state is bound to the request it was issued for: used with another tool it is refused
/// (naming what it was issued for) and stays usable by the request it belongs to.
#[tokio::test]
async fn stdio_a_request_state_used_for_another_tool_is_refused_and_kept() {
    let (config, counts) = setup(CONFIG);
    let mut p = stdio_gateway(&config, &counts);
    let call = elicit("your name?");
    let first = ask(
        &mut p,
        1,
        "tools/call",
        modern(elicitation_caps(), call.clone()),
    )
    .await;
    let (key, _, state) = input_required(&first);
    let answer = json!({key: {"action": "accept", "content": {"name": "Lin"}}});
    let other = json!({"name": "echo", "arguments": {"text": "x"}});
    let wrong = ask(
        &mut p,
        2,
        "tools/call",
        retry(elicitation_caps(), &other, answer.clone(), &state),
    )
    .await;
    assert_invalid_state(&wrong);
    let message = wrong["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("'ask'"),
        "says what it was issued for: {wrong}"
    );
    let right = ask(
        &mut p,
        3,
        "tools/call",
        retry(elicitation_caps(), &call, answer, &state),
    )
    .await;
    assert_eq!(right["result"]["resultType"], "complete", "{right}");
    assert_eq!(
        text_json(&right)["result"]["content"]["name"],
        "Lin",
        "{right}"
    );
    let c = read_counts(&counts.0);
    assert!(
        c["tools"].get("echo").is_none(),
        "the wrong retry ran nothing: {c}"
    );
}

#[tokio::test]
async fn stdio_an_unknown_request_state_is_refused_naming_it() {
    let (config, counts) = setup(CONFIG);
    let mut p = stdio_gateway(&config, &counts);
    let call = elicit("x");
    let state = json!("steadfast-mrtr.00000000000000000000000000000000");
    let r = ask(
        &mut p,
        1,
        "tools/call",
        retry(elicitation_caps(), &call, json!({}), &state),
    )
    .await;
    assert_invalid_state(&r);
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("replica")),
        "says why it may be unknown: {r}"
    );
    assert_eq!(
        read_counts(&counts.0)["tools"]["ask"],
        Value::Null,
        "nothing ran"
    );
}

#[tokio::test]
async fn stdio_without_the_capability_the_upstream_hears_missing_capability() {
    let (config, counts) = setup(CONFIG);
    let mut p = stdio_gateway(&config, &counts);
    let r = ask(&mut p, 1, "tools/call", modern(json!({}), elicit("x"))).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let seen = text_json(&r);
    assert_eq!(seen["error"]["code"], -32021, "{r}");
    assert_eq!(
        seen["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}}),
        "{r}"
    );
    // Declaring another capability is not enough either.
    let r = ask(
        &mut p,
        2,
        "tools/call",
        modern(json!({"roots": {}}), elicit("x")),
    )
    .await;
    assert_eq!(text_json(&r)["error"]["code"], -32021, "{r}");
}

#[tokio::test]
async fn stdio_a_parked_call_never_resumed_is_cancelled_upstream_at_its_bound() {
    let (config, counts) = setup(SHORT);
    let mut p = stdio_gateway(&config, &counts);
    let call = elicit("x");
    let first = ask(
        &mut p,
        1,
        "tools/call",
        modern(elicitation_caps(), call.clone()),
    )
    .await;
    let (key, _, state) = input_required(&first);
    // Not resumed: at `request_timeout` (1 s) the upstream's call is cancelled.
    let c = await_count(&counts, "cancelled").await;
    assert_eq!(
        c["answers"], 1,
        "its request answered (with an error) too: {c}"
    );
    let late = ask(
        &mut p,
        2,
        "tools/call",
        retry(
            elicitation_caps(),
            &call,
            json!({key: {"action": "decline"}}),
            &state,
        ),
    )
    .await;
    assert_invalid_state(&late);
}

struct Front {
    _child: tokio::process::Child,
    url: String,
}

async fn http_front(config: &str) -> (Front, Temp, Temp) {
    let (config, counts) = setup(config);
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--config",
        config.path(),
        "--",
    ]);
    cmd.args(fake_upstream_command(&["--count-file", counts.path()]))
        .env("RUST_LOG", "info");
    let (child, url, _log) = gateway::listening(cmd).await;
    (Front { _child: child, url }, config, counts)
}

/// A modern POST with the routing headers a conforming client sends: (status, the answer —
/// a stream's last message when it is a stream).
async fn modern_post(url: &str, id: i64, method: &str, params: Value) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let name = params["name"].as_str().unwrap_or_default().to_owned();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let head = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\
         MCP-Protocol-Version: {MODERN}\r\nMcp-Method: {method}\r\nMcp-Name: {name}\r\n\r\n",
        body.len()
    );
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
    let answer = raw_client::http_messages(body).pop().unwrap_or(Value::Null);
    (status, answer)
}

#[cfg(feature = "http")]
#[tokio::test]
async fn http_the_parked_call_survives_between_two_posts() {
    let (front, _config, counts) = http_front(CONFIG).await;
    let url = &front.url;
    let call = elicit("your name?");
    let (status, first) = modern_post(
        url,
        1,
        "tools/call",
        modern(elicitation_caps(), call.clone()),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let (key, request, state) = input_required(&first);
    assert_eq!(request["method"], "elicitation/create", "{first}");
    assert_eq!(request["params"]["message"], "your name?", "{first}");
    // The retry is another POST, on another connection: the call waited for it.
    let answer = json!({key: {"action": "accept", "content": {"name": "Grace"}}});
    let (status, second) = modern_post(
        url,
        2,
        "tools/call",
        retry(elicitation_caps(), &call, answer.clone(), &state),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["result"]["resultType"], "complete", "{second}");
    assert_eq!(
        text_json(&second)["result"]["content"]["name"],
        "Grace",
        "{second}"
    );
    let (status, again) = modern_post(
        url,
        3,
        "tools/call",
        retry(elicitation_caps(), &call, answer, &state),
    )
    .await;
    assert_eq!(status, 400, "{again}");
    assert_invalid_state(&again);
    let c = read_counts(&counts.0);
    assert_eq!(c["tools"]["ask"], 1, "the call ran once: {c}");
    // Without the capability: the upstream hears -32021, the client gets the tool's answer.
    let (status, r) = modern_post(url, 4, "tools/call", modern(json!({}), elicit("x"))).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(text_json(&r)["error"]["code"], -32021, "{r}");
}

/// Over a stdio upstream nothing relates the server's request to a call: it goes to the
/// newest call in flight whose client can be asked. A newer call of a modern client that
/// declared no input capability (which cannot be asked) must not make the request refused
/// for the older call whose client can answer it.
#[cfg(feature = "http")]
#[tokio::test]
async fn http_a_capability_less_newer_call_does_not_take_another_clients_request() {
    let (front, _config, counts) = http_front(CONFIG).await;
    let url = front.url.clone();
    // A's call asks only once the upstream has seen two calls (its own and B's).
    let mut call = elicit("your name?");
    call["arguments"]["after_calls"] = json!(2);
    let a = {
        let (url, call) = (url.clone(), call.clone());
        tokio::spawn(async move {
            modern_post(&url, 1, "tools/call", modern(elicitation_caps(), call)).await
        })
    };
    let deadline = tokio::time::Instant::now() + ANSWER;
    while read_counts(&counts.0)["tools"]["ask"] != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "A's call never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // B: a modern call without capabilities that stays in flight, newer than A's.
    let b = {
        let url = url.clone();
        let hang = json!({"name": "hang", "arguments": {}});
        tokio::spawn(
            async move { modern_post(&url, 2, "tools/call", modern(json!({}), hang)).await },
        )
    };
    let (status, first) = tokio::time::timeout(ANSWER, a).await.unwrap().unwrap();
    b.abort();
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        first["result"]["resultType"], "input_required",
        "A's client is asked, not refused for B's: {first}"
    );
    let (_, request, _) = input_required(&first);
    assert_eq!(request["params"]["message"], "your name?", "{first}");
}

#[cfg(feature = "http")]
#[tokio::test]
async fn http_a_parked_call_never_resumed_is_cancelled_upstream_at_its_bound() {
    let (front, _config, counts) = http_front(SHORT).await;
    let call = elicit("x");
    let (_, first) = modern_post(
        &front.url,
        1,
        "tools/call",
        modern(elicitation_caps(), call.clone()),
    )
    .await;
    let (key, _, state) = input_required(&first);
    await_count(&counts, "cancelled").await;
    let (status, late) = modern_post(
        &front.url,
        2,
        "tools/call",
        retry(
            elicitation_caps(),
            &call,
            json!({key: {"action": "decline"}}),
            &state,
        ),
    )
    .await;
    assert_eq!(status, 400, "{late}");
    assert_invalid_state(&late);
}

// -- a modern upstream's input_required, to a handshake-era client --------------------------

/// The gateway on stdio over the fake in `modern-only` mode (its `ask` answers
/// `input_required`).
fn stdio_gateway_to_modern(config: &Temp, counts: &Temp) -> RawProcess {
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        config.path().to_owned(),
        "--".to_owned(),
    ];
    argv.extend(fake_upstream_command(&[
        "--count-file",
        counts.path(),
        "--mode",
        "modern-only",
    ]));
    RawProcess::spawn(&argv).expect("the gateway starts")
}

async fn handshake_init(p: &mut RawProcess, capabilities: Value) {
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                      "clientInfo": {"name": "raw-handshake", "version": "0"}});
    let r = ask(p, 0, "initialize", init).await;
    assert!(r.pointer("/result/protocolVersion").is_some(), "{r}");
    p.notify("notifications/initialized", json!({}))
        .await
        .unwrap();
}

/// Answers the gateway's `elicitation/create` requests (the n-th with `Ada-n`) until request
/// `id` is answered: (its answer, how many were asked).
async fn answer_until(p: &mut RawProcess, id: i64) -> (Value, usize) {
    let mut asked = 0;
    loop {
        let m = p.read_message(ANSWER).await.expect("a message");
        if m["id"] == id && m.get("method").is_none() {
            return (m, asked);
        }
        if m["method"] == "elicitation/create" && m.get("id").is_some() {
            asked += 1;
            assert!(
                m["id"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("steadfast-")),
                "under the gateway's id: {m}"
            );
            assert_eq!(m["params"]["message"], "name?", "{m}");
            let content = json!({"name": format!("Ada-{asked}")});
            p.send(&json!({"jsonrpc": "2.0", "id": m["id"], "result": {"action": "accept", "content": content}}))
                .await
                .unwrap();
        }
    }
}

fn ask_rounds(rounds: u64) -> Value {
    json!({"name": "ask", "arguments": {"method": "elicitation/create", "rounds": rounds,
           "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}}})
}

#[tokio::test]
async fn stdio_a_modern_upstreams_input_requests_are_put_to_a_handshake_client() {
    let (config, counts) = setup(CONFIG);
    let mut p = stdio_gateway_to_modern(&config, &counts);
    handshake_init(&mut p, elicitation_caps()).await;
    p.request(json!(1), "tools/call", ask_rounds(2))
        .await
        .unwrap();
    let (r, asked) = answer_until(&mut p, 1).await;
    assert_eq!(asked, 2, "one request per round: {r}");
    let seen = text_json(&r);
    assert_eq!(
        seen["inputResponses"]["q"],
        json!({"action": "accept", "content": {"name": "Ada-2"}}),
        "the upstream got the client's answer under its key: {r}"
    );
    assert_eq!(
        seen["requestState"], "fake-state-2",
        "its state echoed: {r}"
    );
    assert!(
        r["result"].get("resultType").is_none(),
        "a handshake-era result: {r}"
    );
    assert_eq!(read_counts(&counts.0)["input_rounds"], 2);
    // An upstream that keeps asking: the gateway stops after its bound of rounds.
    p.request(json!(2), "tools/call", ask_rounds(50))
        .await
        .unwrap();
    let (r, asked) = answer_until(&mut p, 2).await;
    assert_eq!(asked, 8, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("more than 8 times")),
        "{r}"
    );
}

#[tokio::test]
async fn stdio_a_handshake_client_without_the_capability_is_not_asked() {
    let (config, counts) = setup(CONFIG);
    let mut p = stdio_gateway_to_modern(&config, &counts);
    handshake_init(&mut p, json!({"roots": {}})).await;
    p.request(json!(1), "tools/call", ask_rounds(1))
        .await
        .unwrap();
    let (r, asked) = answer_until(&mut p, 1).await;
    assert_eq!(asked, 0, "{r}");
    assert_eq!(r["error"]["code"], -32021, "{r}");
    assert_eq!(
        r["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}}),
        "{r}"
    );
    assert_eq!(read_counts(&counts.0)["input_rounds"], Value::Null);
}
