//! Fail fast and tell the truth, on real processes: an upstream that cannot start answers the
//! client's `initialize` at once (and a stdio proxy with one upstream then exits non-zero),
//! `/readyz` is ready without any client, a lower-case `bearer` scheme is accepted, replies
//! the SDKs accept are relayed, and call latency is a Prometheus histogram. (A call to an
//! upstream whose restarts are spent, and the start such a call asks for, are tested in the
//! gateway's own crate: `steadfast-gateway/tests/restarts.rs`.)

#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::{Duration, Instant};

use raw_client::{RawProcess, fake_upstream_command, fake_upstream_script};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(10);

/// `steadfast proxy [--config CONFIG] -- ARGV`, with the default settings unless `config`.
fn proxy(config: Option<&str>, argv: &[String]) -> (RawProcess, Temp) {
    let file = Temp::new("config");
    let mut cmd = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
    ];
    if let Some(c) = config {
        std::fs::write(&file.0, c).expect("write config");
        cmd.extend(["--config".to_owned(), file.path().to_owned()]);
    }
    if !argv.is_empty() {
        cmd.push("--".to_owned());
        cmd.extend(argv.iter().cloned());
    }
    (RawProcess::spawn(&cmd).expect("the proxy starts"), file)
}

fn strings(argv: &[&str]) -> Vec<String> {
    argv.iter().map(|a| (*a).to_owned()).collect()
}

fn error_message(v: &Value) -> String {
    v.pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The initialize answer (an error is expected), how long it took, and the proxy's exit code.
async fn initialize_error(mut p: RawProcess) -> (String, Duration, Option<Option<i32>>) {
    let started = Instant::now();
    let params = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}});
    let answer = p
        .call(json!(1), "initialize", params, Duration::from_secs(30))
        .await
        .expect("initialize is answered");
    let elapsed = started.elapsed();
    (
        error_message(&answer.response),
        elapsed,
        p.wait_exit(Duration::from_secs(5)).await,
    )
}

#[tokio::test]
async fn an_upstream_that_cannot_start_answers_initialize_at_once_and_the_proxy_exits_1() {
    let not_executable = Temp::new("not-executable");
    std::fs::write(&not_executable.0, "#!/bin/sh\necho hi\n").unwrap();
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        (
            "missing command",
            strings(&["/nonexistent/steadfast-no-such-server"]),
            "No such file",
        ),
        (
            "not executable",
            strings(&[not_executable.path()]),
            "ermission denied",
        ),
        (
            "missing node script",
            strings(&["node", "/nonexistent/steadfast-missing.js"]),
            "Cannot find module",
        ),
        (
            "exits at once",
            strings(&[
                "sh",
                "-c",
                "echo 'fatal: no API endpoint configured' >&2; exit 3",
            ]),
            "no API endpoint configured",
        ),
        (
            "garbage then silence",
            fake_upstream_command(&["--mode", "garbage-then-sleep"]),
            "not JSON-RPC",
        ),
    ];
    for (case, argv, expect) in cases {
        let (p, _c) = proxy(None, &argv);
        let (message, elapsed, exit) = initialize_error(p).await;
        // Default settings: the whole init_timeout (25 s) used to pass before any answer.
        assert!(elapsed < Duration::from_secs(4), "{case}: {elapsed:?}");
        assert!(
            message.contains("could not be started"),
            "{case}: {message}"
        );
        assert!(message.contains(expect), "{case}: {message}");
        assert_eq!(exit, Some(Some(1)), "{case}: the proxy exits non-zero");
    }
}

#[tokio::test]
async fn an_http_upstream_refusing_connections_answers_initialize_at_once() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!("[upstream]\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    let (p, _c) = proxy(Some(&config), &[]);
    let (message, elapsed, exit) = initialize_error(p).await;
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
    assert!(message.contains("could not be started"), "{message}");
    assert_eq!(exit, Some(Some(1)));
}

#[tokio::test]
async fn with_several_upstreams_one_that_cannot_start_is_reported_and_the_others_served() {
    let fake = fake_upstream_script().display().to_string();
    let config = format!(
        "[proxy]\nhealth_tool = \"health\"\n\n[upstreams.good]\ncommand = \"python3\"\n\
         args = [\"{fake}\"]\n\n[upstreams.bad]\ncommand = \"/nonexistent/steadfast-no-such\"\n"
    );
    let (mut p, _c) = proxy(Some(&config), &[]);
    let started = Instant::now();
    let init = p.initialize(ANSWER).await.expect("initialize is answered");
    // Before: the answer waited list_timeout (5 s) for the upstream that cannot start.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(init.get("result").is_some(), "{init}");
    let list = p
        .call(json!(2), "tools/list", json!({}), ANSWER)
        .await
        .unwrap();
    let names: Vec<&str> = list.response["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"good_echo"), "{names:?}");
    let health = p
        .call(
            json!(3),
            "tools/call",
            json!({"name": "health", "arguments": {}}),
            ANSWER,
        )
        .await
        .unwrap();
    let text = health.response.to_string();
    assert!(
        text.contains("bad") && text.contains("No such file"),
        "{text}"
    );
    assert_eq!(
        p.wait_exit(Duration::from_millis(300)).await,
        None,
        "still serving"
    );
}

#[tokio::test]
async fn a_reply_the_sdks_accept_is_relayed_with_the_default_settings() {
    // 20 MiB of text: a 9.4 MB file read through server-filesystem comes back about this large
    // (text and structured content); the old default cap was 16 MiB.
    let (mut p, _c) = proxy(
        None,
        &fake_upstream_command(&["--mode", "oversized-reply", "--reply-mib", "20"]),
    );
    p.initialize(ANSWER).await.expect("initialize is answered");
    let answer = p
        .call(
            json!(2),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}}),
            Duration::from_secs(30),
        )
        .await
        .expect("answered");
    let text = answer.response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        text.len(),
        20 * 1024 * 1024,
        "{}",
        error_message(&answer.response)
    );
}

/// The HTTP front over the fake upstream (or the config's upstreams), with `token` if not
/// empty; its URL. The process ends when the returned child drops.
#[cfg(feature = "http")]
async fn http_front(
    config: &str,
    fake: Option<&[&str]>,
    token: &str,
) -> (tokio::process::Child, String, Temp) {
    use tokio::io::AsyncBufReadExt;
    let file = Temp::new("http-config");
    std::fs::write(&file.0, config).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args(["proxy", "--listen", "127.0.0.1:0", "--config", file.path()]);
    if !token.is_empty() {
        cmd.args(["--token-env", "FRONT_TOKEN"])
            .env("FRONT_TOKEN", token);
    }
    if let Some(args) = fake {
        cmd.arg("--").args(fake_upstream_command(args));
    }
    cmd.stdin(std::process::Stdio::null())
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
    tokio::spawn(async move { while let Ok(Some(_)) = err.next_line().await {} });
    (child, url, file)
}

/// One HTTP/1.1 exchange on a fresh connection: (status, body, the `Mcp-Session-Id` if any).
#[cfg(feature = "http")]
async fn http_session(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, Option<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut head = format!(
        "{method} /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let io = async {
        let mut stream = tokio::net::TcpStream::connect(authority).await?;
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(ANSWER, io).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap();
    let session = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_owned())
    });
    (status, body.to_owned(), session)
}

/// [`http_session`] without the session: (status, body).
#[cfg(feature = "http")]
async fn http(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let (status, body, _) = http_session(method, url, headers, body).await;
    (status, body)
}

/// Polls `/readyz` until `done(status, body)` (within 10 s); the last answer.
#[cfg(feature = "http")]
async fn readyz_until(base: &str, done: impl Fn(u16, &str) -> bool) -> (u16, String) {
    let url = base.replace("/mcp", "/readyz");
    let deadline = Instant::now() + ANSWER;
    loop {
        let (status, body) = http("GET", &url, &[], "").await;
        if done(status, &body) || Instant::now() > deadline {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(feature = "http")]
#[tokio::test]
async fn readyz_turns_ready_without_any_client() {
    let (_child, url, _c) = http_front("", Some(&[]), "").await;
    // No client has initialized: before, the upstream started at the first `initialize`.
    let (status, body) = readyz_until(&url, |s, _| s == 200).await;
    assert_eq!(status, 200, "{body}");
}

#[cfg(feature = "http")]
#[tokio::test]
async fn readyz_all_waits_for_every_upstream_and_names_those_down() {
    let fake = fake_upstream_script().display().to_string();
    let upstreams = format!(
        "[upstreams.good]\ncommand = \"python3\"\nargs = [\"{fake}\"]\n\n\
         [upstreams.bad]\ncommand = \"/nonexistent/steadfast-no-such\"\n"
    );
    let (_any, url, _c) = http_front(&upstreams, None, "").await;
    assert_eq!(
        readyz_until(&url, |s, _| s == 200).await.0,
        200,
        "any: one is enough"
    );
    let all = format!("[proxy]\nready = \"all\"\n\n{upstreams}");
    let (_all, url, _d) = http_front(&all, None, "").await;
    // Once the good one is connected, the body names only the one that cannot start.
    let (status, body) = readyz_until(&url, |_, b| !b.contains("good")).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("bad") && !body.contains("good"), "{body}");
}

#[cfg(feature = "http")]
#[tokio::test]
async fn a_lower_case_bearer_scheme_is_accepted_and_latency_is_a_histogram() {
    let (_child, url, _c) = http_front("", Some(&[]), "s3cret-token").await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let json_only = ("Accept", "application/json, text/event-stream");
    let content = ("Content-Type", "application/json");
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let auth = format!("{scheme} s3cret-token");
        let (status, body) = http(
            "POST",
            &url,
            &[("Authorization", &auth), json_only, content],
            &init,
        )
        .await;
        assert_eq!(status, 200, "{scheme}: {body}");
    }
    let (status, _) = http(
        "POST",
        &url,
        &[("Authorization", "bearer wrong"), json_only, content],
        &init,
    )
    .await;
    assert_eq!(status, 401);
    // A call, then its latency on /metrics as histogram buckets (summaries cannot be summed
    // across replicas, and histogram_quantile needs buckets).
    let auth = ("Authorization", "bearer s3cret-token");
    let (_, _, session) = http_session("POST", &url, &[auth, json_only, content], &init).await;
    let session = session.expect("a session id");
    let with_session = [
        auth,
        json_only,
        content,
        ("Mcp-Session-Id", session.as_str()),
    ];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    http("POST", &url, &with_session, &initialized.to_string()).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "echo", "arguments": {"text": "hi"}}});
    let (status, body) = http("POST", &url, &with_session, &call.to_string()).await;
    assert!(status == 200 && body.contains("hi"), "{status}: {body}");
    let (status, text) = http("GET", &url.replace("/mcp", "/metrics"), &[auth], "").await;
    assert_eq!(status, 200);
    assert!(
        text.contains("steadfast_tool_call_duration_seconds_bucket{")
            && text.contains("le=\"0.005\"")
            && !text.contains("steadfast_tool_call_duration_seconds{"),
        "{text}"
    );
}

#[tokio::test]
async fn a_list_change_announced_during_the_gateways_handshake_is_not_relayed() {
    // The server announces a list change as soon as the gateway's handshake is done, before
    // the client's initialize is answered: the client would get a notification the direct
    // server never sent it (and before its initialize result).
    let (mut p, _c) = proxy(
        None,
        &fake_upstream_command(&["--mode", "announce-on-initialized"]),
    );
    let params = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}});
    let init = p
        .call(json!(1), "initialize", params, ANSWER)
        .await
        .unwrap();
    assert!(init.response.get("result").is_some(), "{}", init.response);
    assert!(
        init.before.is_empty(),
        "before the result: {:?}",
        init.before
    );
    p.notify("notifications/initialized", json!({}))
        .await
        .unwrap();
    let list = p
        .call(json!(2), "tools/list", json!({}), ANSWER)
        .await
        .unwrap();
    assert!(list.before.is_empty(), "{:?}", list.before);
}
