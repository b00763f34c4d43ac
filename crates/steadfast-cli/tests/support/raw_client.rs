//! A raw-pipe JSON-RPC client for process-level tests: no MCP library between the test and the
//! bytes, so a test sees exactly what a process wrote — a second answer to one id, a
//! notification after the result, a line that is not JSON — and every wait has a bound.
//!
//! Use it from a test file with `#[path = "support/raw_client.rs"] mod raw_client;`.
#![allow(dead_code)] // each test file uses a different part

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::{Instant, timeout};

/// The fake upstream script (see `fake_upstream.py` next to this file).
pub fn fake_upstream_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake_upstream.py")
}

/// `python3 fake_upstream.py ARGS…` as a command line.
pub fn fake_upstream_command(args: &[&str]) -> Vec<String> {
    let mut cmd = vec![
        "python3".to_owned(),
        fake_upstream_script().display().to_string(),
    ];
    cmd.extend(args.iter().map(|a| (*a).to_owned()));
    cmd
}

/// A child process spoken to over raw newline-delimited JSON.
pub struct RawProcess {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Messages read while waiting for something else, in arrival order.
    seen: VecDeque<Value>,
}

/// What came back for one request.
#[derive(Debug)]
pub struct Answer {
    /// The response (with `result` or `error`).
    pub response: Value,
    /// Notifications (and server requests) read before it, in order.
    pub before: Vec<Value>,
    /// How long it took from the call.
    pub elapsed: Duration,
}

impl RawProcess {
    /// Spawns `argv` with piped stdin/stdout; stderr is inherited so a failing test shows it.
    /// The process is killed when this value drops.
    pub fn spawn(argv: &[String]) -> std::io::Result<Self> {
        Self::spawn_with(argv, |_| {})
    }

    /// As [`RawProcess::spawn`], with a hook to set environment, directory, …
    pub fn spawn_with(argv: &[String], tweak: impl FnOnce(&mut Command)) -> std::io::Result<Self> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("empty command line"))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        tweak(&mut cmd);
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().map(BufReader::new);
        let stdout = stdout.ok_or_else(|| std::io::Error::other("no stdout"))?;
        Ok(Self {
            child,
            stdin,
            stdout,
            seen: VecDeque::new(),
        })
    }

    /// The process id (None once it has been reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Writes one line (a newline is added).
    pub async fn send_raw(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("stdin is closed"))?;
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        stdin.write_all(&bytes).await?;
        stdin.flush().await
    }

    /// Writes one JSON message as a line.
    pub async fn send(&mut self, message: &Value) -> std::io::Result<()> {
        self.send_raw(&message.to_string()).await
    }

    /// Sends a request `{id, method, params}`.
    pub async fn request(&mut self, id: Value, method: &str, params: Value) -> std::io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str, params: Value) -> std::io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Closes the process's stdin (EOF).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next raw line, or None on EOF or after `within`.
    pub async fn read_line(&mut self, within: Duration) -> Option<String> {
        let mut line = String::new();
        match timeout(within, self.stdout.read_line(&mut line)).await {
            Ok(Ok(n)) if n > 0 => {
                while line.ends_with('\n') || line.ends_with('\r') {
                    line.pop();
                }
                Some(line)
            }
            _ => None,
        }
    }

    /// The next message: one already read, or the next line that parses as JSON (other lines
    /// are skipped) — None on EOF or when `within` runs out.
    pub async fn read_message(&mut self, within: Duration) -> Option<Value> {
        if let Some(m) = self.seen.pop_front() {
            return Some(m);
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let line = self.read_line(left).await?;
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                return Some(v);
            }
        }
    }

    /// Reads until the response to `id` arrives (within `within`), keeping what came before.
    pub async fn wait_for(&mut self, id: &Value, within: Duration) -> Option<Answer> {
        let start = Instant::now();
        let deadline = start + within;
        let mut before = Vec::new();
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let m = self.read_message(left).await?;
            if is_response_to(&m, id) {
                return Some(Answer {
                    response: m,
                    before,
                    elapsed: start.elapsed(),
                });
            }
            before.push(m);
        }
    }

    /// Sends a request and waits for its response.
    pub async fn call(
        &mut self,
        id: Value,
        method: &str,
        params: Value,
        within: Duration,
    ) -> Option<Answer> {
        self.request(id.clone(), method, params).await.ok()?;
        self.wait_for(&id, within).await
    }

    /// Asserts that `id` is answered within `within`, and not again during `quiet` after that
    /// (messages read meanwhile are kept for later reads). Panics with what was seen.
    pub async fn assert_answered_once(
        &mut self,
        id: &Value,
        within: Duration,
        quiet: Duration,
    ) -> Answer {
        let Some(answer) = self.wait_for(id, within).await else {
            panic!("request {id} was not answered within {within:?}");
        };
        let deadline = Instant::now() + quiet;
        let mut later = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Some(m) = self.read_message(left).await else {
                break;
            };
            assert!(
                !is_response_to(&m, id),
                "request {id} was answered twice: {} then {m}",
                answer.response
            );
            later.push(m);
        }
        self.seen.extend(later);
        answer
    }

    /// The MCP handshake: `initialize` (answered within `within`), then `initialized`.
    pub async fn initialize(&mut self, within: Duration) -> Option<Value> {
        let params = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw-client", "version": "0"}
        });
        let answer = self.call(json!(0), "initialize", params, within).await?;
        self.notify("notifications/initialized", json!({}))
            .await
            .ok()?;
        Some(answer.response)
    }

    /// Waits up to `within` for the process to exit; its exit code (None: still running, or
    /// ended by a signal).
    pub async fn wait_exit(&mut self, within: Duration) -> Option<Option<i32>> {
        match timeout(within, self.child.wait()).await {
            Ok(Ok(status)) => Some(status.code()),
            _ => None,
        }
    }

    /// Resident memory of the process, in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        rss_kib(self.pid()?)
    }
}

/// Whether `m` is a response (result or error) to request `id`.
pub fn is_response_to(m: &Value, id: &Value) -> bool {
    m.get("id") == Some(id) && (m.get("result").is_some() || m.get("error").is_some())
}

/// Resident memory (`VmRSS`) of process `pid`, in KiB, from `/proc/PID/status`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Whether process `pid` exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(s) => !s
            .lines()
            .any(|l| l.starts_with("State:") && l.contains("zombie")),
        Err(_) => false,
    }
}

/// The fake upstream's counter file, parsed (`{}` when missing).
pub fn read_counts(path: &Path) -> Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_else(|| json!({}))
}

/// One HTTP/1.1 exchange, enough to drive a streamable-HTTP server by hand: POST a JSON body
/// and return (status, headers lower-cased, body), all within `within`.
pub async fn http_post(
    url: &str,
    session: Option<&str>,
    body: &Value,
    within: Duration,
) -> std::io::Result<(u16, Vec<(String, String)>, String)> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| std::io::Error::other("only http:// URLs"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let exchange = async {
        let mut stream = TcpStream::connect(authority).await?;
        let body = body.to_string();
        let mut head = format!(
            "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n",
            body.len()
        );
        if let Some(s) = session {
            head.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Ok((status, headers, body.to_owned()))
    };
    timeout(within, exchange)
        .await
        .map_err(|_| std::io::Error::other(format!("no HTTP answer within {within:?}")))?
}

/// The JSON-RPC messages of an HTTP body: one JSON document, or the `data:` lines of SSE.
pub fn http_messages(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return vec![v];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}
