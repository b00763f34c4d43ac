//! The proxy under deliberate faults: one bounded test per finding of the hardening issue,
//! on real processes (raw client → `steadfast proxy` → the fake upstream). Each asserts the
//! outcome and its bound (answered once, within N s; starts counted; RSS below M). Bounds are
//! configured short so no test waits minutes; generous margins keep a loaded CI machine green.

#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::Duration;

use raw_client::{RawProcess, alive, fake_upstream_command, read_counts, rss_kib};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(10);

/// `steadfast proxy --config CONFIG -- python3 fake.py ARGS`.
fn proxy(config: &str, fake_args: &[&str]) -> (RawProcess, Temp) {
    let file = Temp::new("config");
    std::fs::write(&file.0, config).expect("write config");
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
        "--".to_owned(),
    ];
    argv.extend(fake_upstream_command(fake_args));
    (RawProcess::spawn(&argv).expect("the proxy starts"), file)
}

const FAST: &str = r#"
[proxy]
init_timeout = "2s"
reconnect_wait = "2s"
shutdown_grace = "300ms"
restart = { max_attempts = 4, base_delay = "100ms", max_delay = "1s" }
connect = { max_attempts = 3, base_delay = "100ms", max_delay = "1s" }

[defaults]
retry = { max_attempts = 3, base_delay = "50ms", max_delay = "200ms", attempt_timeout = "3s" }
"#;

async fn init(p: &mut RawProcess) -> Value {
    let r = p.initialize(ANSWER).await.expect("initialize is answered");
    p.notify("notifications/initialized", json!({}))
        .await
        .unwrap();
    r
}

async fn call(p: &mut RawProcess, id: i64, name: &str, args: Value) -> raw_client::Answer {
    p.request(
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": args}),
    )
    .await
    .unwrap();
    p.wait_for(&json!(id), ANSWER)
        .await
        .unwrap_or_else(|| panic!("tools/call {name} answered within {ANSWER:?}"))
}

fn text_of(r: &Value) -> String {
    r.pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

// 1. Handshakes that never end.
#[tokio::test]
async fn an_upstream_that_never_answers_initialize_gets_a_bounded_error() {
    for mode in ["never-answers-initialize", "garbage-then-sleep"] {
        // Garbage is recognized well before a long init_timeout (a loaded machine can take
        // longer than FAST's 2 s to start the fake and print it).
        let config = match mode {
            "garbage-then-sleep" => FAST.replace("init_timeout = \"2s\"", "init_timeout = \"30s\""),
            _ => FAST.to_owned(),
        };
        let (mut p, _c) = proxy(&config, &["--mode", mode]);
        let started = std::time::Instant::now();
        p.request(
            json!(1),
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await
        .unwrap();
        let a = p.wait_for(&json!(1), ANSWER).await.expect("answered");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{mode}: {:?}",
            started.elapsed()
        );
        let msg = a
            .response
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap();
        assert!(msg.contains("fake_upstream.py"), "{msg}");
        if mode == "garbage-then-sleep" {
            // Garbage and then silence is a server that will not answer: the proxy says so and
            // exits non-zero, as an MCP server that cannot start does.
            assert!(msg.contains("not JSON-RPC"), "{msg}");
            assert_eq!(
                p.wait_exit(Duration::from_secs(5)).await,
                Some(Some(1)),
                "{mode}"
            );
            continue;
        }
        assert!(msg.contains("handshake"), "{msg}");
        // stdin EOF ends the proxy, also while the upstream is still stuck.
        p.close_stdin();
        assert_eq!(
            p.wait_exit(Duration::from_secs(5)).await,
            Some(Some(0)),
            "{mode}"
        );
    }
}

#[tokio::test]
async fn stdin_eof_during_the_handshake_ends_the_proxy() {
    // The initialize read before stdin's end waits for its answer at most drain_timeout.
    let (mut p, _c) = proxy(
        "[proxy]\ninit_timeout = \"60s\"\nshutdown_grace = \"300ms\"\ndrain_timeout = \"1s\"\n",
        &["--mode", "never-answers-initialize"],
    );
    p.request(json!(1), "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    p.close_stdin();
    assert_eq!(p.wait_exit(Duration::from_secs(5)).await, Some(Some(0)));
}

// 2. Hot restart loop, and 3. recovery after giving up: in the gateway's own crate, on its
// test kit and the paused clock (`steadfast-gateway/tests/restarts.rs`).

// 5. Oversized messages.
#[tokio::test]
async fn an_oversized_reply_fails_its_call_at_once_and_an_oversized_request_is_answered() {
    let counts = Temp::new("counts");
    let config = format!("{FAST}\n[proxy_extra]\n")
        .replace("[proxy]\n", "[proxy]\nmax_message_size = 1048576\n");
    let config = config.replace("[proxy_extra]\n", "");
    let (mut p, _c) = proxy(
        &config,
        &[
            "--mode",
            "oversized-reply",
            "--reply-mib",
            "2",
            "--count-file",
            counts.path(),
        ],
    );
    init(&mut p).await;
    let a = call(&mut p, 2, "echo", json!({"text": "x"})).await;
    assert!(a.elapsed < Duration::from_secs(5), "{:?}", a.elapsed);
    let t = text_of(&a.response);
    assert!(t.contains("max_message_size"), "{t}");
    assert_eq!(read_counts(&counts.0)["tools"]["echo"], 1, "not retried");
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
        "y".repeat(1_200_000)
    );
    p.send_raw(&big).await.unwrap();
    let a = p.wait_for(&json!(3), ANSWER).await.expect("answered");
    assert_eq!(a.response["error"]["code"], -32004);
}

// 6. Progress before the result.
#[tokio::test]
async fn every_progress_notification_arrives_before_its_result() {
    let (mut p, _c) = proxy(FAST, &["--mode", "progress-burst", "--burst", "20"]);
    init(&mut p).await;
    for i in 0..100 {
        let id = 100 + i;
        p.request(
            json!(id),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "p"}, "_meta": {"progressToken": format!("tok-{i}")}}),
        )
        .await
        .unwrap();
        let a = p.wait_for(&json!(id), ANSWER).await.expect("answered");
        let progress = a
            .before
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .filter(|m| m["params"]["progressToken"] == format!("tok-{i}"))
            .count();
        assert_eq!(progress, 20, "run {i}: progress lost");
    }
}

// 7. Bounded memory and in-flight.
#[tokio::test]
async fn requests_beyond_max_in_flight_get_an_error_and_memory_returns_after_a_storm() {
    let config = FAST.replace("[proxy]\n", "[proxy]\nmax_in_flight = 500\n");
    let (mut p, _c) = proxy(&config, &[]);
    init(&mut p).await;
    let pid = p.pid().unwrap();
    let _ = call(&mut p, 1, "echo", json!({"text": "warm"})).await;
    let base = rss_kib(pid).unwrap();
    for i in 0..501 {
        p.send(&json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call", "params": {"name": "hang", "arguments": {}}}))
            .await
            .unwrap();
    }
    let over = p
        .wait_for(&json!(1500), ANSWER)
        .await
        .expect("the 501st is answered");
    assert_eq!(over.response["error"]["code"], -32003, "{}", over.response);
    for i in 0..500 {
        p.notify("notifications/cancelled", json!({"requestId": 1000 + i}))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let a = call(&mut p, 2, "echo", json!({"text": "still here"})).await;
    assert_eq!(text_of(&a.response), "still here");
    let after = rss_kib(pid).unwrap();
    assert!(
        after < base + 8 * 1024,
        "RSS {base} KiB → {after} KiB after the storm"
    );
}

#[tokio::test]
async fn a_slow_reader_does_not_make_the_proxy_hold_a_log_flood() {
    let config = FAST.replace("attempt_timeout = \"3s\"", "attempt_timeout = \"60s\"");
    let (mut p, _c) = proxy(&config, &["--mode", "log-flood", "--flood", "100000"]);
    init(&mut p).await;
    let pid = p.pid().unwrap();
    let base = rss_kib(pid).unwrap();
    p.request(
        json!(5),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "f"}}),
    )
    .await
    .unwrap();
    // Do not read for a while: the flood piles up in the proxy, if anywhere.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let peak = rss_kib(pid).unwrap();
    let a = p
        .wait_for(&json!(5), Duration::from_secs(30))
        .await
        .expect("the result is never dropped");
    assert_eq!(text_of(&a.response), "f");
    assert!(
        peak < base + 32 * 1024,
        "RSS {base} KiB → {peak} KiB while not reading"
    );
}

// 8. Lifecycle.
#[tokio::test]
async fn sigterm_ends_the_proxy_and_a_child_that_ignores_eof_and_term() {
    let pidfile = Temp::new("pid");
    let (mut p, _c) = proxy(
        FAST,
        &["--mode", "ignores-eof", "--pid-file", pidfile.path()],
    );
    init(&mut p).await;
    let child: u32 = std::fs::read_to_string(&pidfile.0)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(child));
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(p.pid().unwrap() as i32, libc::SIGTERM) };
    assert_eq!(p.wait_exit(Duration::from_secs(5)).await, Some(Some(143)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!alive(child), "the upstream was not left running");
}

#[tokio::test]
async fn a_notification_before_initialize_is_not_fatal() {
    let (mut p, _c) = proxy(FAST, &[]);
    p.notify("notifications/roots/list_changed", json!({}))
        .await
        .unwrap();
    p.request(json!("early"), "tools/list", json!({}))
        .await
        .unwrap();
    let early = p.wait_for(&json!("early"), ANSWER).await.expect("answered");
    assert!(early.response.get("error").is_some());
    init(&mut p).await;
    let a = call(&mut p, 3, "echo", json!({"text": "ok"})).await;
    assert_eq!(text_of(&a.response), "ok");
}

// 9. Nothing of the protocol stripped.
#[tokio::test]
async fn tasks_and_tool_execution_fields_pass_through_field_for_field() {
    let mut direct = RawProcess::spawn(&fake_upstream_command(&["--mode", "tasks"])).unwrap();
    let (mut p, _c) = proxy(FAST, &["--mode", "tasks"]);
    let d_init = direct.initialize(ANSWER).await.unwrap();
    let p_init = init(&mut p).await;
    assert_eq!(d_init["capabilities"], p_init["capabilities"]);
    direct
        .notify("notifications/initialized", json!({}))
        .await
        .unwrap();
    for (i, method) in ["tools/list", "prompts/list", "resources/list", "tasks/list"]
        .iter()
        .enumerate()
    {
        let id = json!(50 + i);
        direct.request(id.clone(), method, json!({})).await.unwrap();
        p.request(id.clone(), method, json!({})).await.unwrap();
        let d = direct.wait_for(&id, ANSWER).await.unwrap().response;
        let q = p.wait_for(&id, ANSWER).await.unwrap().response;
        assert_eq!(d, q, "{method} through the proxy differs");
    }
    // A task-augmented call comes back as the task handle.
    p.request(
        json!(70),
        "tools/call",
        json!({"name": "research", "arguments": {"topic": "x"}, "task": {"ttl": 60000}}),
    )
    .await
    .unwrap();
    let a = p.wait_for(&json!(70), ANSWER).await.unwrap();
    assert!(
        a.response.pointer("/result/task/taskId").is_some(),
        "{}",
        a.response
    );
}

// 10. Requests that are never answered.
#[tokio::test]
async fn malformed_requests_are_answered_with_their_id() {
    let (mut p, _c) = proxy(FAST, &[]);
    init(&mut p).await;
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":"d1","method":"tools/call","params":{{"name":"echo","arguments":{{"a":{}1{}}}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let cases: Vec<(String, Value, i64)> = vec![
        (r#"{"jsonrpc":"2.0","id":1180591620717411303424,"method":"ping"}"#.into(), json!(null), -32600),
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.into(), json!(1.5), -32600),
        (r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#.into(), json!(true), -32600),
        (r#"{"jsonrpc":"1.0","id":"v1","method":"ping"}"#.into(), json!("v1"), -32600),
        (r#"[{"jsonrpc":"2.0","id":"b1","method":"ping"}]"#.into(), json!("b1"), -32600),
        (r#"{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"echo","arguments":{"text":"\ud800"}}}"#.into(), json!("s1"), -32602),
        (deep, json!("d1"), -32600),
    ];
    for (line, id, code) in cases {
        p.send_raw(&line).await.unwrap();
        let m = p.read_message(ANSWER).await.expect("answered");
        if !id.is_null() {
            assert_eq!(m["id"], id, "{}", &line[..line.len().min(80)]);
        }
        assert_eq!(m["error"]["code"], code, "{m}");
    }
    // Garbage is ignored, and the proxy keeps serving.
    p.send_raw("this is not json").await.unwrap();
    let a = call(&mut p, 9, "echo", json!({"text": "alive"})).await;
    assert_eq!(text_of(&a.response), "alive");
}

// 4. HTTP upstreams: a lost session, an outage, an upstream that never answers.
async fn http_fake(args: &[&str]) -> (RawProcess, String) {
    let mut all = vec!["--http", "0"];
    all.extend_from_slice(args);
    let mut p = RawProcess::spawn(&fake_upstream_command(&all)).unwrap();
    let url = p.read_line(ANSWER).await.expect("the URL line");
    (p, url.trim().to_owned())
}

fn http_proxy(url: &str, extra: &str) -> (RawProcess, Temp) {
    let config = format!("{FAST}{extra}\n[upstream]\nurl = \"{url}\"\n");
    let file = Temp::new("http-config");
    std::fs::write(&file.0, config).unwrap();
    let p = RawProcess::spawn(&[
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
    ])
    .unwrap();
    (p, file)
}

#[tokio::test]
async fn a_lost_http_session_is_renewed_and_the_call_replayed() {
    for status in ["400", "404"] {
        let counts = Temp::new("counts");
        let (_server, url) = http_fake(&[
            "--mode",
            "session-loss",
            "--session-loss-after",
            "4",
            "--session-loss-status",
            status,
            "--count-file",
            counts.path(),
        ])
        .await;
        let (mut p, _c) = http_proxy(&url, "");
        init(&mut p).await;
        for i in 0..4 {
            // `charge` is not idempotent: it may be replayed only because the dead session
            // proves the request never ran.
            let a = call(&mut p, 10 + i, "charge", json!({"amount": i})).await;
            assert_eq!(
                text_of(&a.response),
                format!("charged {i}"),
                "HTTP {status}, call {i}"
            );
            assert!(a.elapsed < Duration::from_secs(5), "{:?}", a.elapsed);
        }
        assert_eq!(
            read_counts(&counts.0)["tools"]["charge"],
            4,
            "each charge ran once"
        );
        p.request(json!(99), "tools/list", json!({})).await.unwrap();
        let l = p
            .wait_for(&json!(99), ANSWER)
            .await
            .expect("tools/list answered");
        assert!(
            l.response.pointer("/result/tools").is_some(),
            "{}",
            l.response
        );
        let methods = read_counts(&counts.0)["methods"].clone();
        assert!(
            methods["initialize"].as_u64().unwrap() >= 2,
            "a new session: {methods}"
        );
    }
}

#[tokio::test]
async fn an_http_upstream_that_accepts_and_never_answers_gets_a_bounded_error() {
    let (_server, url) = http_fake(&["--mode", "accept-and-never-answer"]).await;
    let (mut p, _c) = http_proxy(&url, "");
    let started = std::time::Instant::now();
    let r = p.initialize(ANSWER).await.expect("answered");
    assert!(r.get("error").is_some(), "{r}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

// Every HTTP exchange with the upstream is bounded: a call's by the call's own bound (its
// connection is closed when the attempt times out), a notification's (the cancel that
// follows) by request_timeout. Before, each hung POST held a socket, a task and a
// max_queue slot until the upstream session ended.
#[tokio::test]
async fn hung_http_exchanges_are_closed_at_their_bound() {
    let counts = Temp::new("counts");
    let (_server, url) =
        http_fake(&["--mode", "hang-exchanges", "--count-file", counts.path()]).await;
    let extra = "[tools.echo]\nretry = { max_attempts = 1, attempt_timeout = \"300ms\" }\nbreaker = { failure_threshold = 100 }\n\
                 [proxy]\nrequest_timeout = \"500ms\"\n";
    let config = format!(
        "{}\n[upstream]\nurl = \"{url}\"\n",
        FAST.replace("[proxy]\n", extra)
    );
    let file = Temp::new("http-config");
    std::fs::write(&file.0, config).unwrap();
    let mut p = RawProcess::spawn(&[
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
    ])
    .unwrap();
    init(&mut p).await;
    // Each call is answered with a timeout at its attempt bound.
    for i in 0..6 {
        let a = call(&mut p, 10 + i, "echo", json!({"text": "x"})).await;
        let text = text_of(&a.response);
        assert!(text.contains("TIMEOUT"), "call {i}: {}", a.response);
        assert!(a.elapsed < Duration::from_secs(3), "{:?}", a.elapsed);
    }
    // A forwarded request times out at request_timeout the same way.
    let a = p
        .call(json!(30), "prompts/list", json!({}), ANSWER)
        .await
        .expect("answered");
    assert_eq!(a.response["error"]["code"], -32001, "{}", a.response);
    // Each hung exchange was closed: 6 calls and 6 cancels, a prompts/list and its cancel.
    let deadline = tokio::time::Instant::now() + ANSWER;
    loop {
        let c = read_counts(&counts.0);
        if c["abandoned"] == 14 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "hung exchanges still open: {c}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// The server's own stream (GET) lives as long as its session: when the session is lost and
// renewed, the old stream is closed even if the server never wrote to it.
#[tokio::test]
async fn a_lost_sessions_hung_event_stream_is_closed() {
    let counts = Temp::new("counts");
    let (server, url) = http_fake(&[
        "--mode",
        "hang-exchanges",
        "--mode",
        "session-loss",
        "--session-loss-status",
        "404",
        "--count-file",
        counts.path(),
    ])
    .await;
    let (mut p, _c) = http_proxy(&url, "");
    init(&mut p).await;
    wait_count(&counts, "streams", 1).await;
    // The server forgets its sessions (a restart): the next request finds the session gone.
    let pid = server.pid().unwrap() as i32;
    // SAFETY: signalling the fake upstream this test started.
    unsafe { libc::kill(pid, libc::SIGUSR1) };
    wait_count(&counts, "forgotten", 1).await;
    p.call(json!(5), "tools/list", json!({}), ANSWER)
        .await
        .expect("tools/list answered");
    wait_count(&counts, "streams_closed", 1).await;
    wait_count(&counts, "streams", 2).await;
}

/// Waits (up to `ANSWER`) until the fake's counter `key` reaches `n`.
async fn wait_count(counts: &Temp, key: &str, n: u64) {
    let deadline = tokio::time::Instant::now() + ANSWER;
    loop {
        let c = read_counts(&counts.0);
        if c[key].as_u64().unwrap_or(0) >= n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{key} never reached {n}: {c}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_brief_http_outage_is_ridden_out() {
    let (mut server, url) = http_fake(&[]).await;
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    // Restarts outlast the outage: once they are spent, calls fail at once (fail_fast.rs).
    let config = format!("{FAST}\n[upstream]\nurl = \"{url}\"\n").replace(
        "restart = { max_attempts = 4,",
        "restart = { max_attempts = 20,",
    );
    let file = Temp::new("http-config");
    std::fs::write(&file.0, config).unwrap();
    let mut p = RawProcess::spawn(&[
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
    ])
    .unwrap();
    init(&mut p).await;
    assert_eq!(
        text_of(&call(&mut p, 1, "echo", json!({"text": "a"})).await.response),
        "a"
    );
    let _ = server.child.start_kill();
    let _ = server.wait_exit(Duration::from_secs(5)).await;
    // The call starts while the server is down; it comes back a second later.
    p.request(
        json!(2),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "b"}}),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let _server = RawProcess::spawn(&fake_upstream_command(&["--http", &port])).unwrap();
    let a = p.wait_for(&json!(2), ANSWER).await.expect("answered");
    assert_eq!(text_of(&a.response), "b", "{}", a.response);
}

// The sanitizer at the proxy's boundary: isError text, a tool's JSON-RPC error, and the nested
// `data` of any relayed error. Secrets are built at run time (no literal token in the source).
const LEAKY: &str = r#"
import json, sys
gh = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
sk = "sk-" + "proj-" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"
pg = "postgres://app:" + "Sup3rS3cret" + "@db.internal:5432/prod"
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    meth, rid = m.get("method"), m["id"]
    if meth == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}, "prompts": {}}, "serverInfo": {"name": "leaky", "version": "1"}}
    elif meth == "tools/list":
        r = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("leak_text", "leak_rpc")]}
    elif meth == "tools/call" and m["params"]["name"] == "leak_text":
        r = {"content": [{"type": "text", "text": f"auth failed with token {gh} at {pg}"}], "isError": True}
    elif meth == "tools/call":
        print(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"bad key {sk}", "data": {"config": {"password": "hunter2", "dsn": pg}, "hint": "check OPENAI_API_KEY=" + sk}}}), flush=True)
        continue
    elif meth == "prompts/get":
        print(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "boom", "data": {"nested": {"deeper": [{"api_key": sk}, "Authorization: Bearer " + gh]}, "count": 3}}}), flush=True)
        continue
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": rid, "result": r}), flush=True)
"#;

#[tokio::test]
async fn no_secret_crosses_the_proxy_and_error_data_keeps_its_shape() {
    let file = Temp::new("leaky-config");
    std::fs::write(&file.0, FAST).unwrap();
    let mut p = RawProcess::spawn(&[
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
        "--".to_owned(),
        "python3".to_owned(),
        "-c".to_owned(),
        LEAKY.to_owned(),
    ])
    .unwrap();
    init(&mut p).await;
    let secrets = [
        "A1b2C3d4E5f6",
        "Zq9Xw8Vu7Ts6",
        "Sup3rS3cret",
        "hunter2",
        "db.internal",
    ];
    let clean = |v: &Value| {
        let text = v.to_string();
        for s in secrets {
            assert!(!text.contains(s), "{s} leaked: {text}");
        }
    };
    let a = call(&mut p, 1, "leak_text", json!({})).await;
    clean(&a.response);
    assert_eq!(a.response["result"]["isError"], true);
    let a = call(&mut p, 2, "leak_rpc", json!({})).await;
    clean(&a.response);
    p.request(json!(3), "prompts/get", json!({"name": "x"}))
        .await
        .unwrap();
    let a = p.wait_for(&json!(3), ANSWER).await.expect("answered");
    clean(&a.response);
    let data = &a.response["error"]["data"];
    assert_eq!(data["count"], 3, "shape kept: {data}");
    assert!(data["nested"]["deeper"].is_array(), "shape kept: {data}");
    assert!(
        data["nested"]["deeper"][0]["api_key"].is_string(),
        "member kept, value redacted: {data}"
    );
}

#[tokio::test]
async fn made_up_tool_names_cost_no_memory_per_name() {
    let (mut p, _c) = proxy(FAST, &[]);
    init(&mut p).await;
    let pid = p.pid().unwrap();
    // Warm up (caches and the allocator reach their working size), then measure.
    for i in 0..1500 {
        call(&mut p, 100_000 + i, &format!("warm_{i}"), json!({})).await;
    }
    let base = rss_kib(pid).unwrap();
    for i in 0..3000 {
        let a = call(&mut p, 200_000 + i, &format!("no_such_tool_{i}"), json!({})).await;
        // The upstream's unknown-tool error, its class kept (issue 36 item 14).
        assert_eq!(a.response["error"]["code"], -32602, "{}", a.response);
    }
    let after = rss_kib(pid).unwrap();
    // 3000 names at even 1 KB each would be 3 MB.
    assert!(
        after < base + 1024,
        "RSS {base} KiB → {after} KiB for 3000 made-up names"
    );
}

// 12. No chain of proxies can fork without end.
#[tokio::test]
async fn nested_proxies_stop_at_the_depth_guard() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"))
        .args(["proxy", "--", "true"])
        .env("STEADFAST_PROXY_DEPTH", "4")
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(ANSWER, out).await.unwrap().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to start"), "{err}");
}

// 8. A client that closes the proxy's stdout ends it, and its child.
#[tokio::test]
async fn a_closed_stdout_ends_the_proxy_and_its_child() {
    let pidfile = Temp::new("pid");
    let file = Temp::new("cfg");
    std::fs::write(&file.0, FAST).unwrap();
    let mut argv = vec![
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
        "--".to_owned(),
    ];
    argv.extend(fake_upstream_command(&[
        "--mode",
        "ignores-eof",
        "--pid-file",
        pidfile.path(),
    ]));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"))
        .args(&argv)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    use tokio::io::AsyncWriteExt;
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n")
        .await
        .unwrap();
    // Wait until the upstream runs, then close our end of the proxy's stdout.
    let started = std::time::Instant::now();
    while std::fs::read_to_string(&pidfile.0).map_or(true, |s| s.trim().is_empty()) {
        assert!(started.elapsed() < ANSWER, "the upstream did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let upstream: u32 = std::fs::read_to_string(&pidfile.0)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    drop(child.stdout.take());
    // The proxy finds out when it next writes; a ping makes it write.
    for i in 0..3 {
        let _ = stdin
            .write_all(
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}}\n",
                    10 + i
                )
                .as_bytes(),
            )
            .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    assert!(
        status.is_ok(),
        "the proxy kept running with its stdout closed"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!alive(upstream), "the upstream was left running");
}

// Gateway issue: SIGHUP reloads policies mid-session; a broken file keeps the old ones.
#[tokio::test]
async fn sighup_reloads_a_policy_mid_session_and_keeps_it_when_the_file_is_broken() {
    let file = Temp::new("reload");
    let v1 = "[tools.flaky]\nretry = { max_attempts = 1 }\n";
    std::fs::write(&file.0, v1).unwrap();
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
        "--".to_owned(),
    ];
    argv.extend(fake_upstream_command(&["--flaky-failures", "2"]));
    let mut p = RawProcess::spawn(&argv).unwrap();
    init(&mut p).await;
    // One attempt allowed: the first transient failure is final.
    let a = call(&mut p, 1, "flaky", json!({})).await;
    assert!(
        text_of(&a.response).contains("SERVICE_UNAVAILABLE"),
        "{}",
        a.response
    );
    // Three attempts from now on (one failure left upstream, then success).
    std::fs::write(
        &file.0,
        "[tools.flaky]\nretry = { max_attempts = 3, base_delay = \"10ms\", max_delay = \"20ms\" }\n",
    )
    .unwrap();
    let pid = p.pid().unwrap() as i32;
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let a = call(&mut p, 2, "flaky", json!({})).await;
    assert_eq!(text_of(&a.response), "flaky succeeded", "{}", a.response);
    // A broken file is refused; the session goes on under the last good config.
    std::fs::write(&file.0, "[tools.flaky]\nretry = { max_attempts = 0 }\n").unwrap();
    unsafe { libc::kill(pid, libc::SIGHUP) };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let a = call(&mut p, 3, "flaky", json!({})).await;
    assert_eq!(text_of(&a.response), "flaky succeeded", "{}", a.response);
    assert!(
        p.child.try_wait().unwrap().is_none(),
        "the proxy kept running"
    );
}
