//! The streamable-HTTP front on real processes: `steadfast proxy --listen` in front of the fake
//! upstream, driven over HTTP. Authentication, Origin checks, unknown sessions, and many
//! sessions sharing one breaker.
#![cfg(feature = "http")]

#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::Duration;

use raw_client::{fake_upstream_command, read_counts};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

const ANSWER: Duration = Duration::from_secs(10);

struct Front {
    _child: Option<tokio::process::Child>,
    url: String,
    /// The front's stderr lines so far (the process's own copy only).
    log: Option<std::sync::Arc<std::sync::Mutex<Vec<String>>>>,
}

/// One HTTP/1.1 exchange over a fresh connection (`Connection: close`), with the headers given:
/// (status, headers lower-cased, body).
async fn exchange(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let mut head = format!(
        "{method} /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let io = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(ANSWER, io).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

async fn front(config: &str, fake_args: &[&str], token: &str) -> (Front, temp::Temp) {
    front_with(config, &[], fake_args, token).await
}

async fn front_with(
    config: &str,
    flags: &[&str],
    fake_args: &[&str],
    token: &str,
) -> (Front, temp::Temp) {
    front_over(config, flags, Some(fake_args), token).await
}

/// The front over the fake upstream on stdio (`fake_args`), or over the config's upstream;
/// with `token` as its one bearer token (none when empty: it listens on loopback).
async fn front_over(
    config: &str,
    flags: &[&str],
    fake_args: Option<&[&str]>,
    token: &str,
) -> (Front, temp::Temp) {
    let file = temp::Temp::new("http-front");
    std::fs::write(&file.0, config).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args(["proxy", "--listen", "127.0.0.1:0", "--config"])
        .arg(&file.0)
        .args(flags);
    if !token.is_empty() {
        cmd.args(["--token-env", "FRONT_TOKEN"]);
    }
    if let Some(args) = fake_args {
        cmd.arg("--").args(fake_upstream_command(args));
    }
    // Info logs: tests wait for "config reloaded" and similar rather than sleep.
    cmd.env("FRONT_TOKEN", token)
        .env("RUST_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(ANSWER, async {
        while let Ok(Some(line)) = err.next_line().await {
            if let Some(u) = line.strip_prefix("steadfast: serving MCP at ") {
                return u.to_owned();
            }
        }
        panic!("the front never said where it listens");
    })
    .await
    .unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = log.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = err.next_line().await {
            sink.lock().unwrap().push(line);
        }
    });
    (
        Front {
            _child: Some(child),
            url,
            log: Some(log),
        },
        file,
    )
}

/// What a client that follows the spec accepts.
const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// What a client that takes only JSON answers accepts: messages related to its requests come
/// on its session's event stream.
const JSON_ONLY: &str = "application/json";

/// The messages in a body of server-sent events.
fn sse_messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

impl Front {
    /// POSTs `body` as a client that accepts both JSON and streams: the answer (a stream's
    /// last message when it is a stream).
    async fn post(
        &self,
        token: Option<&str>,
        session: Option<&str>,
        origin: Option<&str>,
        body: &Value,
    ) -> (u16, Option<String>, Value) {
        let (status, sid, _, answer) = self
            .post_accepting(ACCEPT_BOTH, token, session, origin, body)
            .await;
        (status, sid, answer)
    }

    /// POSTs `body` with `Accept: accept`: (status, session id, content type, the answer —
    /// for a stream, its last message).
    async fn post_accepting(
        &self,
        accept: &str,
        token: Option<&str>,
        session: Option<&str>,
        origin: Option<&str>,
        body: &Value,
    ) -> (u16, Option<String>, String, Value) {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json"), ("Accept", accept)];
        if let Some(a) = &auth {
            headers.push(("Authorization", a));
        }
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        if let Some(o) = origin {
            headers.push(("Origin", o));
        }
        let (status, headers, text) =
            exchange("POST", &self.url, &headers, &body.to_string()).await;
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let kind = header("content-type").unwrap_or_default();
        let answer = if kind == "text/event-stream" {
            sse_messages(&text).pop().unwrap_or(Value::Null)
        } else {
            serde_json::from_str(&text).unwrap_or(Value::Null)
        };
        (status, header("mcp-session-id"), kind, answer)
    }

    /// Waits (up to `ANSWER`) until the front has logged a line containing `needle` `n` times.
    async fn wait_log(&self, needle: &str, n: usize) {
        let log = self.log.as_ref().expect("the front's own handle");
        let deadline = tokio::time::Instant::now() + ANSWER;
        loop {
            let seen = log
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.contains(needle))
                .count();
            if seen >= n {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the front never logged {needle:?} {n} times: {:?}",
                log.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The parsed `/metrics` text (as the scraper with the token sees it).
    async fn metrics(&self, token: &str) -> String {
        let (status, text) = self.get("/metrics", Some(token)).await;
        assert_eq!(status, 200, "{text}");
        text
    }

    async fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let url = self.url.replace("/mcp", path);
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        let (status, _, body) = exchange("GET", &url, &headers, "").await;
        (status, body)
    }

    async fn initialize(&self, token: &str) -> String {
        let (status, sid, body) = self
            .post(
                Some(token),
                None,
                None,
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert!(body.pointer("/result/protocolVersion").is_some(), "{body}");
        sid.expect("a session id")
    }

    async fn call(&self, token: &str, sid: &str, id: i64, tool: &str) -> Value {
        let (status, _, body) = self
            .post(
                Some(token),
                Some(sid),
                None,
                &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {"text": "hi"}}}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body
    }
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

#[tokio::test]
async fn tokens_origins_and_unknown_sessions_are_refused() {
    let (f, _c) = front("", &[], "s3cret").await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(f.post(None, None, None, &ping).await.0, 401, "no token");
    assert_eq!(
        f.post(Some("wrong"), None, None, &ping).await.0,
        401,
        "wrong token"
    );
    // Each refusal says how to authenticate (RFC 6750), with no token or a wrong one, on the
    // MCP endpoint and on /metrics; a token of the right length but wrong bytes too.
    for (path, auth) in [
        ("/mcp", None),
        ("/mcp", Some("Bearer wrong")),
        ("/mcp", Some("Bearer s3creT")),
        ("/mcp", Some("Basic czNjcmV0")),
        ("/metrics", None),
    ] {
        let url = f.url.replace("/mcp", path);
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(a) = auth {
            headers.push(("Authorization", a));
        }
        let method = if path == "/mcp" { "POST" } else { "GET" };
        let (status, h, _) = exchange(method, &url, &headers, &ping.to_string()).await;
        assert_eq!(status, 401, "{path} {auth:?}");
        let challenge = h
            .iter()
            .find(|(k, _)| k == "www-authenticate")
            .map(|(_, v)| v.as_str());
        assert!(
            challenge.is_some_and(|v| v.starts_with("Bearer")),
            "{path} {auth:?}: {h:?}"
        );
    }
    assert_eq!(
        f.post(Some("s3cret"), None, Some("https://evil.example"), &ping)
            .await
            .0,
        403,
        "a foreign Origin"
    );
    assert_eq!(
        f.post(Some("s3cret"), Some("no-such-session"), None, &ping)
            .await
            .0,
        404
    );
    // An unknown session is answered 404, and a new initialize works.
    let sid = f.initialize("s3cret").await;
    let r = f.call("s3cret", &sid, 2, "echo").await;
    assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");
    let (del, _, _) = exchange(
        "DELETE",
        &f.url,
        &[("Authorization", "Bearer s3cret"), ("Mcp-Session-Id", &sid)],
        "",
    )
    .await;
    assert_eq!(del, 200);
    assert_eq!(
        f.post(Some("s3cret"), Some(&sid), None, &ping).await.0,
        404,
        "an ended session"
    );
    let again = f.initialize("s3cret").await;
    assert_ne!(again, sid);
}

#[tokio::test]
async fn fifty_sessions_share_one_breaker() {
    let counts = temp::Temp::new("counts");
    let config = "[tools.flaky]\nretry = { max_attempts = 1 }\nbreaker = { failure_threshold = 3, reset_timeout = \"60s\" }\n";
    let (f, _c) = front(
        config,
        &["--count-file", counts.path(), "--flaky-failures", "100000"],
        "t",
    )
    .await;
    // Fifty clients open their sessions at once.
    let mut opening = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let url = f.url.clone();
        opening.spawn(async move {
            let f = Front {
                _child: None,
                url,
                log: None,
            };
            f.initialize("t").await
        });
    }
    let sessions: Vec<String> = opening.join_all().await;
    assert_eq!(
        sessions
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len(),
        50,
        "fifty distinct sessions"
    );
    // Three sessions see the dependency fail: the breaker opens once, for everyone.
    for (i, sid) in sessions.iter().take(3).enumerate() {
        assert_ne!(
            llm_code(&f.call("t", sid, 10 + i as i64, "flaky").await),
            "CIRCUIT_OPEN"
        );
    }
    let before = read_counts(&counts.0)["tools"]["flaky"].as_u64().unwrap();
    let mut set = tokio::task::JoinSet::new();
    for (i, sid) in sessions.iter().skip(3).enumerate() {
        let (url, sid) = (f.url.clone(), sid.clone());
        set.spawn(async move {
            let f = Front {
                _child: None,
                url,
                log: None,
            };
            llm_code(&f.call("t", &sid, 100 + i as i64, "flaky").await)
        });
    }
    let codes: Vec<String> = set.join_all().await;
    assert_eq!(codes.len(), 47);
    assert!(codes.iter().all(|c| c == "CIRCUIT_OPEN"), "{codes:?}");
    let after = read_counts(&counts.0)["tools"]["flaky"].as_u64().unwrap();
    assert_eq!(
        before, 3,
        "three calls reached the upstream before the breaker opened"
    );
    assert_eq!(
        after, before,
        "47 sessions failed fast without calling the upstream"
    );
    // The one breaker is open, and /metrics counts what each session saw.
    let text = f.metrics("t").await;
    assert_eq!(
        sample(&text, "steadfast_breaker_state", "tool=\"flaky\""),
        Some(2.0),
        "open: {text}"
    );
    assert_eq!(
        sample(
            &text,
            "steadfast_failures_total",
            "tool=\"flaky\",code=\"CIRCUIT_OPEN\""
        ),
        Some(47.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "steadfast_calls_total", "tool=\"flaky\""),
        Some(50.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "steadfast_sessions", ""),
        Some(50.0),
        "{text}"
    );
}

/// The value of a Prometheus sample `name{labels}` in a text exposition, if present.
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(name) && labels.split(',').all(|kv| l.contains(kv)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn metrics_count_the_calls_made() {
    let config = "[defaults]\nretry = { max_attempts = 3, base_delay = \"10ms\", max_delay = \"20ms\" }\n\
                  [tools.hang]\nretry = { max_attempts = 2, base_delay = \"10ms\", max_delay = \"20ms\", attempt_timeout = \"200ms\" }\n";
    let (f, _c) = front(config, &["--flaky-failures", "2"], "m").await;
    let sid = f.initialize("m").await;
    for i in 0..4 {
        f.call("m", &sid, 10 + i, "echo").await;
    }
    // hang: two attempts, each timed out; one failed call.
    assert_eq!(llm_code(&f.call("m", &sid, 30, "hang").await), "TIMEOUT");
    // flaky: two transient failures absorbed, so one call of three attempts.
    let r = f.call("m", &sid, 20, "flaky").await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        f.get("/metrics", None).await.0,
        401,
        "metrics need the token too"
    );
    let (status, text) = f.get("/metrics", Some("m")).await;
    assert_eq!(status, 200);
    assert_eq!(
        sample(&text, "steadfast_calls_total", "tool=\"echo\""),
        Some(4.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "steadfast_calls_total", "tool=\"flaky\""),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "steadfast_attempts_total", "tool=\"flaky\""),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "steadfast_retries_total", "tool=\"flaky\""),
        Some(2.0),
        "{text}"
    );
    assert_eq!(sample(&text, "steadfast_sessions", ""), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "steadfast_attempts_total", "tool=\"hang\""),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "steadfast_failures_total",
            "tool=\"hang\",code=\"TIMEOUT\""
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "steadfast_failures_total", "tool=\"echo\""),
        None,
        "no echo call failed: {text}"
    );
    assert_eq!(
        sample(&text, "steadfast_requests_in_flight", ""),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "steadfast_upstream_connected", ""),
        Some(1.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            "steadfast_tool_call_duration_seconds_count",
            "tool=\"echo\""
        )
        .is_some()
            || text.contains("steadfast_tool_call_duration_seconds{tool=\"echo\""),
        "{text}"
    );
    assert_eq!(f.get("/readyz", None).await.0, 200);
}

#[tokio::test]
async fn progress_reaches_a_session_on_its_event_stream() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (f, _c) = front("", &[], "p").await;
    let sid = f.initialize("p").await;
    // Open the session's event stream and keep it open.
    let rest = f.url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let get = format!(
        "GET /{path} HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\n\
         Authorization: Bearer p\r\nMcp-Session-Id: {sid}\r\n\r\n"
    );
    stream.write_all(get.as_bytes()).await.unwrap();
    // A slow call asking for progress from a client that takes only JSON: the result comes
    // in the POST, progress on the session's stream.
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 0.3, "steps": 3},
        "_meta": {"progressToken": "tok-1"}}});
    let (status, _, kind, body) = f
        .post_accepting(JSON_ONLY, Some("p"), Some(&sid), None, &call)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(kind, "application/json");
    assert_eq!(body["result"]["content"][0]["type"], "text", "{body}");
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + ANSWER;
    while !seen.contains("notifications/progress") {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .expect("progress on the event stream in time")
            .unwrap();
        assert!(n > 0, "the stream closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.contains("text/event-stream"), "{seen}");
    assert!(seen.contains("\"tok-1\""), "the client's own token: {seen}");
}

#[tokio::test]
async fn an_idle_session_ends_and_its_client_must_initialize_again() {
    let (f, _c) = front_with("", &["--session-idle", "1s"], &[], "i").await;
    let sid = f.initialize("i").await;
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    assert_eq!(f.post(Some("i"), Some(&sid), None, &ping).await.0, 200);
    // Unused for longer than the configured bound: the reaper ends it (watched through
    // /metrics, which does not touch the session).
    f.wait_log("an idle session ended", 1).await;
    assert_eq!(
        sample(&f.metrics("i").await, "steadfast_sessions", ""),
        Some(0.0)
    );
    assert_eq!(f.post(Some("i"), Some(&sid), None, &ping).await.0, 404);
    // The client initializes again and carries on.
    let again = f.initialize("i").await;
    assert_ne!(again, sid);
    let r = f.call("i", &again, 3, "echo").await;
    assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");
}

#[tokio::test]
async fn sighup_reloads_the_policies_of_every_session() {
    let (f, cfg) = front_with(
        "[tools.flaky]\nretry = { max_attempts = 1 }\n",
        &[],
        &["--flaky-failures", "2"],
        "r",
    )
    .await;
    let sid = f.initialize("r").await;
    assert_eq!(
        llm_code(&f.call("r", &sid, 1, "flaky").await),
        "SERVICE_UNAVAILABLE"
    );
    std::fs::write(
        &cfg.0,
        "[tools.flaky]\nretry = { max_attempts = 3, base_delay = \"10ms\", max_delay = \"20ms\" }\n",
    )
    .unwrap();
    let pid = f._child.as_ref().and_then(|c| c.id()).unwrap() as i32;
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    f.wait_log("config reloaded", 1).await;
    // The same session, the new policy: one failure left upstream, retried to success.
    let r = f.call("r", &sid, 2, "flaky").await;
    assert_eq!(r["result"]["content"][0]["text"], "flaky succeeded", "{r}");
    // A broken file is refused with a located error; the session keeps the last good policy.
    std::fs::write(&cfg.0, "[tools.flaky]\nretry = { max_attempts = 0 }\n").unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    f.wait_log("config not reloaded", 1).await;
    let r = f.call("r", &sid, 3, "flaky").await;
    assert_eq!(r["result"]["content"][0]["text"], "flaky succeeded", "{r}");
}

/// A session's event stream (`GET /mcp`), or the answer to one POST, read message by message.
struct Events {
    stream: tokio::net::TcpStream,
    buf: String,
    /// Everything read so far, the HTTP head included.
    raw: String,
}

impl Events {
    /// POSTs `body` as a client that accepts streams, and reads its answer as it comes.
    async fn post(f: &Front, token: &str, sid: &str, body: &Value) -> Self {
        use tokio::io::AsyncWriteExt;
        let rest = f.url.strip_prefix("http://").unwrap();
        let (authority, path) = rest.split_once('/').unwrap();
        let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
        let body = body.to_string();
        let post = format!(
            "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nAccept: {ACCEPT_BOTH}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\
             Authorization: Bearer {token}\r\nMcp-Session-Id: {sid}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(post.as_bytes()).await.unwrap();
        Self {
            stream,
            buf: String::new(),
            raw: String::new(),
        }
    }

    async fn open(f: &Front, token: &str, sid: &str) -> Self {
        use tokio::io::AsyncWriteExt;
        let rest = f.url.strip_prefix("http://").unwrap();
        let (authority, path) = rest.split_once('/').unwrap();
        let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
        let get = format!(
            "GET /{path} HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\n\
             Authorization: Bearer {token}\r\nMcp-Session-Id: {sid}\r\n\r\n"
        );
        stream.write_all(get.as_bytes()).await.unwrap();
        Self {
            stream,
            buf: String::new(),
            raw: String::new(),
        }
    }

    /// The next message on the stream that satisfies `pred`, within `ANSWER`.
    async fn next_where(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        self.next_after(pred).await.0
    }

    /// As [`Events::next_where`], with the messages skipped on the way.
    async fn next_after(&mut self, pred: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut skipped = Vec::new();
        use tokio::io::AsyncReadExt;
        let deadline = tokio::time::Instant::now() + ANSWER;
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                let event: String = self.buf.drain(..end + 2).collect();
                for data in event.lines().filter_map(|l| l.strip_prefix("data:")) {
                    if let Ok(m) = serde_json::from_str::<Value>(data.trim()) {
                        if pred(&m) {
                            return (m, skipped);
                        }
                        skipped.push(m);
                    }
                }
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout_at(deadline, self.stream.read(&mut chunk))
                .await
                .expect("a matching message on the event stream in time")
                .unwrap();
            assert!(n > 0, "the event stream closed: {}", self.raw);
            let text = String::from_utf8_lossy(&chunk[..n]);
            self.buf.push_str(&text);
            self.raw.push_str(&text);
        }
    }
}

/// Starts `tools/call NAME ARGS` in session `sid` (its POST answers when the call ends) as a
/// client that takes only JSON, so the server's requests come on the session's event stream.
fn spawn_call(
    f: &Front,
    token: &str,
    sid: &str,
    id: i64,
    name: &str,
    args: Value,
) -> tokio::task::JoinHandle<(u16, Value)> {
    let (url, token, sid) = (f.url.clone(), token.to_owned(), sid.to_owned());
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}});
    tokio::spawn(async move {
        let f = Front {
            _child: None,
            url,
            log: None,
        };
        let (status, _, _, v) = f
            .post_accepting(JSON_ONLY, Some(&token), Some(&sid), None, &body)
            .await;
        (status, v)
    })
}

fn ask_text(r: &Value) -> Value {
    let text = r
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no text in {r}"));
    serde_json::from_str(text).unwrap_or_default()
}

/// Session `sid` saw no request from the server: a progress notification of a call of its own
/// comes after anything queued for it before, and nothing before it is a request.
async fn assert_no_server_request(f: &Front, token: &str, sid: &str, events: &mut Events) {
    let body = json!({"jsonrpc": "2.0", "id": 90, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 0.05, "steps": 1}, "_meta": {"progressToken": "mark"}}});
    let (status, _, _, r) = f
        .post_accepting(JSON_ONLY, Some(token), Some(sid), None, &body)
        .await;
    assert_eq!(status, 200, "{r}");
    let (_, before) = events
        .next_after(|m| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == "mark"
        })
        .await;
    assert!(
        before.iter().all(|m| m.get("id").is_none()),
        "this session got a request meant for another: {before:?}"
    );
}

async fn answer_roots(f: &Front, token: &str, sid: &str, request: &Value, uri: &str) {
    let answer =
        json!({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": [{"uri": uri}]}});
    let (status, _, _) = f.post(Some(token), Some(sid), None, &answer).await;
    assert_eq!(status, 202);
}

// A request from a stdio server carries no relation: it goes to the session with the newest
// request in flight (the one the server is working for), not to the first session.
#[tokio::test]
async fn a_server_request_goes_to_the_session_whose_call_caused_it() {
    let (f, _c) = front("", &[], "q").await;
    let a = f.initialize("q").await;
    let b = f.initialize("q").await;
    let mut a_events = Events::open(&f, "q", &a).await;
    let mut b_events = Events::open(&f, "q", &b).await;
    let call = spawn_call(&f, "q", &b, 7, "ask", json!({"method": "roots/list"}));
    let req = b_events
        .next_where(|m| m["method"] == "roots/list" && m.get("id").is_some())
        .await;
    answer_roots(&f, "q", &b, &req, "file:///b").await;
    let (status, r) = tokio::time::timeout(ANSWER, call).await.unwrap().unwrap();
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        ask_text(&r)["result"]["roots"][0]["uri"],
        "file:///b",
        "{r}"
    );
    assert_no_server_request(&f, "q", &a, &mut a_events).await;
}

// An HTTP server relates its request to the call whose answer stream carries it: it goes to
// that call's session even while another session's call is newer.
#[tokio::test]
async fn an_http_server_request_goes_to_the_session_of_the_stream_it_came_on() {
    let mut server = tokio::process::Command::new("python3")
        .args(fake_upstream_command(&["--http", "0"]).iter().skip(1))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let upstream = tokio::time::timeout(ANSWER, out.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let config = format!("[upstream]\nurl = \"{}\"\n", upstream.trim());
    let (f, _c) = front_over(&config, &[], None, "h").await;
    let a = f.initialize("h").await;
    let b = f.initialize("h").await;
    let mut a_events = Events::open(&f, "h", &a).await;
    let mut b_events = Events::open(&f, "h", &b).await;
    // B asks once A's call has reached the server too (two tools/call seen): A's call is then
    // the newest in flight, and only the relation says the request is B's.
    let b_call = spawn_call(
        &f,
        "h",
        &b,
        8,
        "ask",
        json!({"method": "roots/list", "after_calls": 2}),
    );
    let a_call = spawn_call(&f, "h", &a, 9, "hang", json!({}));
    let req = b_events
        .next_where(|m| m["method"] == "roots/list" && m.get("id").is_some())
        .await;
    answer_roots(&f, "h", &b, &req, "file:///b").await;
    let (status, r) = tokio::time::timeout(ANSWER, b_call).await.unwrap().unwrap();
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        ask_text(&r)["result"]["roots"][0]["uri"],
        "file:///b",
        "{r}"
    );
    // A cancels its hanging call; its POST ends.
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}});
    assert_eq!(f.post(Some("h"), Some(&a), None, &cancel).await.0, 202);
    tokio::time::timeout(ANSWER, a_call).await.unwrap().unwrap();
    assert_no_server_request(&f, "h", &a, &mut a_events).await;
}

// [tasks] A durable task is the store's, not the session's: made in one HTTP session, awaited
// from another; each session lists its own.
#[tokio::test]
async fn a_durable_task_made_in_one_http_session_is_awaited_from_another() {
    let db = temp::Temp::new("http-tasks-db");
    let config = format!(
        "[tasks]\nstore = \"sqlite://{}\"\npoll_interval = \"100ms\"\n\n[tools.echo]\ndurable = true\n",
        db.path()
    );
    let (f, _c) = front(&config, &[], "tok").await;
    let rpc = |id: i64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let a = f.initialize("tok").await;
    let (status, _, created) = f
        .post(
            Some("tok"),
            Some(&a),
            None,
            &rpc(
                2,
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "hi"}, "task": {"ttl": 60000}}),
            ),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let task = created
        .pointer("/result/task/taskId")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("a task handle: {created}"))
        .to_owned();
    let b = f.initialize("tok").await;
    let (_, _, r) = f
        .post(
            Some("tok"),
            Some(&b),
            None,
            &rpc(3, "tasks/result", json!({"taskId": task})),
        )
        .await;
    assert_eq!(
        r.pointer("/result/content/0/text"),
        Some(&json!("hi")),
        "{r}"
    );
    let listed = |r: &Value| {
        r.pointer("/result/tasks")
            .and_then(Value::as_array)
            .map(|t| t.iter().filter(|t| t["taskId"] == json!(task)).count())
    };
    let (_, _, in_b) = f
        .post(
            Some("tok"),
            Some(&b),
            None,
            &rpc(4, "tasks/list", json!({})),
        )
        .await;
    assert_eq!(listed(&in_b), Some(0), "{in_b}");
    let (_, _, in_a) = f
        .post(
            Some("tok"),
            Some(&a),
            None,
            &rpc(5, "tasks/list", json!({})),
        )
        .await;
    assert_eq!(listed(&in_a), Some(1), "{in_a}");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.path()));
    }
}

// Tool-call limits across HTTP sessions: every attempt sent counts (a retry is a call), each
// session has its own count, and the refusal tells the model not to call again.
#[tokio::test]
async fn call_limits_count_retries_per_http_session() {
    let counts = temp::Temp::new("counts");
    let config = "[defaults]\nretry = { max_attempts = 3, base_delay = \"10ms\", max_delay = \"20ms\" }\n\
                  [limits]\nper_session = { max = 3, window = \"1h\" }\n";
    let (f, _c) = front(
        config,
        &["--count-file", counts.path(), "--flaky-failures", "2"],
        "l",
    )
    .await;
    let a = f.initialize("l").await;
    let b = f.initialize("l").await;
    // Two transient failures, then success: three attempts, session A's whole cap.
    let first = f.call("l", &a, 1, "flaky").await;
    assert_eq!(first["result"]["isError"], false, "{first}");
    let refused = f.call("l", &a, 2, "echo").await;
    assert_eq!(llm_code(&refused), "TOOL_CALL_LIMIT", "{refused}");
    let text = refused
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap();
    assert!(text.to_lowercase().contains("do not call"), "{text}");
    // Session B has its own count.
    for i in 0..3 {
        let r = f.call("l", &b, 10 + i, "echo").await;
        assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");
    }
    assert_eq!(
        llm_code(&f.call("l", &b, 20, "echo").await),
        "TOOL_CALL_LIMIT"
    );
    let seen = read_counts(&counts.0);
    assert_eq!(seen["tools"]["flaky"], 3, "{seen}");
    assert_eq!(
        seen["tools"]["echo"], 3,
        "refused calls were not sent: {seen}"
    );
    let text = f.metrics("l").await;
    assert_eq!(
        sample(
            &text,
            "steadfast_failures_total",
            "tool=\"echo\",code=\"TOOL_CALL_LIMIT\""
        ),
        Some(2.0),
        "{text}"
    );
}

// A task's requests go to the session that created it: the server tags an elicitation with
// the task (MCP 2025-11-25 related-task), and it reaches that session even though another
// session's call is newer and the creating call has long been answered.
#[tokio::test]
async fn a_tasks_server_request_goes_to_the_session_that_created_the_task() {
    let (f, _c) = front("", &["--mode", "tasks"], "k").await;
    let a = f.initialize("k").await;
    let b = f.initialize("k").await;
    let mut a_events = Events::open(&f, "k", &a).await;
    let mut b_events = Events::open(&f, "k", &b).await;
    let create = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "research", "arguments": {"topic": "tides", "ask_after_calls": 2},
        "task": {"ttl": 60000}}});
    let (status, _, created) = f.post(Some("k"), Some(&a), None, &create).await;
    assert_eq!(status, 200, "{created}");
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    // B's call is the second tools/call: the task now asks, while B's call is in flight.
    let b_call = spawn_call(&f, "k", &b, 4, "hang", json!({}));
    let req = a_events
        .next_where(|m| m["method"] == "elicitation/create" && m.get("id").is_some())
        .await;
    assert_eq!(
        req["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str()
    );
    let answer =
        json!({"jsonrpc": "2.0", "id": req["id"], "result": {"action": "accept", "content": {}}});
    assert_eq!(f.post(Some("k"), Some(&a), None, &answer).await.0, 202);
    // The answer reached the server: it is the task's result.
    let result =
        json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/result", "params": {"taskId": task}});
    let (status, _, r) = f.post(Some("k"), Some(&a), None, &result).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(ask_text(&r)["result"]["action"], "accept", "{r}");
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}});
    assert_eq!(f.post(Some("k"), Some(&b), None, &cancel).await.0, 202);
    tokio::time::timeout(ANSWER, b_call).await.unwrap().unwrap();
    assert_no_server_request(&f, "k", &b, &mut b_events).await;
}

/// The fake upstream as a streamable-HTTP server (with `args`): the process (killed on drop)
/// and its URL.
async fn http_fake(args: &[&str]) -> (tokio::process::Child, String) {
    let mut all = vec!["--http", "0"];
    all.extend_from_slice(args);
    let mut server = tokio::process::Command::new("python3")
        .args(fake_upstream_command(&all).iter().skip(1))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(ANSWER, out.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    (server, url.trim().to_owned())
}

// A client that never opens its session's event stream (several do not) still sees progress:
// the POST of a call that reports progress is answered as a stream of events carrying it, with
// the client's own token, and ends with the result; a quick answer stays plain JSON.
#[tokio::test]
async fn progress_arrives_on_the_posts_stream_with_no_event_stream_open() {
    let (f, _c) = front("", &[], "s").await;
    let sid = f.initialize("s").await;
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 0.3, "steps": 3},
        "_meta": {"progressToken": "tok-sse"}}});
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", ACCEPT_BOTH),
        ("Authorization", "Bearer s"),
        ("Mcp-Session-Id", sid.as_str()),
    ];
    let (status, head, text) = exchange("POST", &f.url, &headers, &call.to_string()).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        head.iter()
            .any(|(k, v)| k == "content-type" && v == "text/event-stream"),
        "{head:?}"
    );
    let messages = sse_messages(&text);
    let (last, before) = messages.split_last().expect("messages on the stream");
    assert_eq!(last["id"], 5, "the result ends the stream: {text}");
    assert_eq!(last["result"]["content"][0]["text"], "slept 0.3s", "{text}");
    let progress: Vec<f64> = before
        .iter()
        .map(|m| {
            assert_eq!(m["method"], "notifications/progress", "{m}");
            assert_eq!(m["params"]["progressToken"], "tok-sse", "{m}");
            m["params"]["progress"].as_f64().unwrap()
        })
        .collect();
    assert_eq!(progress, [1.0, 2.0, 3.0], "{text}");
    // Nothing related to come: JSON, as before.
    let echo = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "quick"}}});
    let (status, _, kind, r) = f
        .post_accepting(ACCEPT_BOTH, Some("s"), Some(&sid), None, &echo)
        .await;
    assert_eq!((status, kind.as_str()), (200, "application/json"), "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "quick", "{r}");
}

// A request from the server made while it works on a call reaches a client that has only the
// call's POST stream open, and the client's answer (its own POST) gets back to the server:
// with a stdio upstream (no relation on the wire: the newest call in flight) and an HTTP one
// (the request came on the call's answer stream).
#[tokio::test]
async fn a_server_request_is_answered_by_a_client_with_only_the_posts_stream() {
    let (_server, upstream) = http_fake(&[]).await;
    let over_http = format!("[upstream]\nurl = \"{upstream}\"\n");
    for (label, config, fake) in [
        ("stdio", String::new(), Some(&[][..])),
        ("http", over_http, None),
    ] {
        let (f, _c) = front_over(&config, &[], fake, "a").await;
        let sid = f.initialize("a").await;
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "ask", "arguments": {"method": "roots/list"}}});
        let mut answer = Events::post(&f, "a", &sid, &call).await;
        let req = answer
            .next_where(|m| m["method"] == "roots/list" && m.get("id").is_some())
            .await;
        answer_roots(&f, "a", &sid, &req, "file:///only-post").await;
        let r = answer.next_where(|m| m["id"] == 7).await;
        assert_eq!(
            ask_text(&r)["result"]["roots"][0]["uri"],
            "file:///only-post",
            "{label}: {r}"
        );
        assert!(
            answer.raw.contains("text/event-stream"),
            "{label}: {}",
            answer.raw
        );
    }
}

// A client that goes away in the middle of its call's stream cancels the call upstream: no
// event ids are given, so nobody could ever read its answer.
#[tokio::test]
async fn a_client_that_leaves_its_posts_stream_cancels_the_call() {
    let counts = temp::Temp::new("counts");
    let (f, _c) = front("", &["--count-file", counts.path()], "d").await;
    let sid = f.initialize("d").await;
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 30, "steps": 300},
        "_meta": {"progressToken": "leaving"}}});
    let mut answer = Events::post(&f, "d", &sid, &call).await;
    answer
        .next_where(|m| m["method"] == "notifications/progress")
        .await;
    assert_eq!(read_counts(&counts.0)["cancelled"], 0);
    drop(answer);
    let deadline = tokio::time::Instant::now() + ANSWER;
    while read_counts(&counts.0)["cancelled"] != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call was never cancelled upstream: {}",
            read_counts(&counts.0)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// The Python MCP SDK's own streamable-HTTP client reads progress and answers the server's
// request when the front answers its calls as streams of events.
#[tokio::test]
#[ignore = "needs the Python MCP SDK (STEADFAST_TEST_MCP_PYTHON): run scripts/tasks-sdk.sh --install"]
async fn the_python_sdk_reads_progress_and_answers_roots_on_its_calls_streams() {
    let Ok(python) = std::env::var("STEADFAST_TEST_MCP_PYTHON") else {
        panic!("set STEADFAST_TEST_MCP_PYTHON to a python with the mcp SDK (scripts/tasks-sdk.sh)");
    };
    let (f, _c) = front("", &[], "").await;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/sdk_stream_client.py");
    let run = tokio::process::Command::new(python)
        .arg(script)
        .arg(&f.url)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the SDK client ends within its own bound")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let seen: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(seen["progress"], json!([1.0, 2.0, 3.0]), "{seen}");
    assert_eq!(seen["slow"], "slept 0.3s", "{seen}");
    assert_eq!(seen["roots_asked"], 1, "{seen}");
    let ask: Value = serde_json::from_str(seen["ask"].as_str().unwrap()).unwrap();
    assert_eq!(ask["result"]["roots"][0]["uri"], "file:///sdk", "{seen}");
}

// Logs an HTTP server sends on a call's answer stream are that call's: they reach its client on
// the call's own stream, and no other session.
#[tokio::test]
async fn an_http_servers_logs_about_a_call_go_to_that_calls_stream_only() {
    let (_server, upstream) = http_fake(&["--mode", "log-flood", "--flood", "3"]).await;
    let config = format!("[upstream]\nurl = \"{upstream}\"\n");
    let (f, _c) = front_over(&config, &[], None, "g").await;
    let a = f.initialize("g").await;
    let b = f.initialize("g").await;
    let mut b_events = Events::open(&f, "g", &b).await;
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "logged"}}});
    let mut answer = Events::post(&f, "g", &a, &call).await;
    let (r, before) = answer.next_after(|m| m["id"] == 3).await;
    assert_eq!(r["result"]["content"][0]["text"], "logged", "{r}");
    let logs = |ms: &[Value]| {
        ms.iter()
            .filter(|m| m["method"] == "notifications/message")
            .count()
    };
    assert_eq!(logs(&before), 3, "{before:?}");
    // B's own call logs three lines on B's event stream (B takes only JSON); A's are not there.
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 0.05, "steps": 1}, "_meta": {"progressToken": "mark"}}});
    let (status, _, _, r) = f
        .post_accepting(JSON_ONLY, Some("g"), Some(&b), None, &body)
        .await;
    assert_eq!(status, 200, "{r}");
    let (_, before) = b_events
        .next_after(|m| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == "mark"
        })
        .await;
    assert_eq!(logs(&before), 3, "only B's own: {before:?}");
}

// A client that goes away before anything of its call's answer came cancels the call too,
// whether it would have got a stream or JSON.
#[tokio::test]
async fn a_client_that_leaves_before_the_answer_cancels_the_call() {
    use tokio::io::AsyncWriteExt;
    let counts = temp::Temp::new("counts");
    let (f, _c) = front("", &["--count-file", counts.path()], "e").await;
    let sid = f.initialize("e").await;
    let authority = f
        .url
        .strip_prefix("http://")
        .unwrap()
        .split_once('/')
        .unwrap()
        .0;
    for (n, accept) in [(1u64, ACCEPT_BOTH), (2, JSON_ONLY)] {
        let call = json!({"jsonrpc": "2.0", "id": 20 + n, "method": "tools/call", "params": {
            "name": "slow", "arguments": {"seconds": 30, "steps": 1}}})
        .to_string();
        let mut conn = tokio::net::TcpStream::connect(authority).await.unwrap();
        let post = format!(
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: {accept}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\
             Authorization: Bearer e\r\nMcp-Session-Id: {sid}\r\n\r\n{call}",
            call.len()
        );
        conn.write_all(post.as_bytes()).await.unwrap();
        let seen = |key: &str| read_counts(&counts.0).pointer(key).and_then(Value::as_u64);
        let deadline = tokio::time::Instant::now() + ANSWER;
        while seen("/tools/slow") != Some(n) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the call never arrived"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(conn);
        while seen("/cancelled") != Some(n) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{accept}: the call was never cancelled upstream: {}",
                read_counts(&counts.0)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
