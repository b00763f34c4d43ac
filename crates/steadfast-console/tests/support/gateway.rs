//! A real gateway in the test's process, for the gateway console's tests: `serve_http` over the
//! CLI tests' fake upstream (whose `flaky` tool fails every call), run under an
//! [`Admin`] handle, with a breaker that opens after two failures and durable calls on SQLite;
//! and a bare MCP client for its HTTP front.
#![allow(dead_code)] // each test file uses a different part

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steadfast_gateway::admin::{Admin, UpstreamStatus};
use steadfast_gateway::{Config, HttpOptions, UpstreamSet};

/// How long the gateway may take to connect its upstream, and a call to be answered.
pub const BOUND: Duration = Duration::from_secs(20);

/// A running gateway: its MCP endpoint and admin handle (the task store lives in `_dir`).
pub struct Gateway {
    pub mcp: String,
    pub admin: Admin,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn fake_upstream() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../steadfast-cli/tests/support/fake_upstream.py")
        .display()
        .to_string()
}

/// Starts the gateway and waits until its upstream is connected.
pub async fn start() -> Gateway {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
[proxy]
init_timeout = "10s"
shutdown_grace = "300ms"

[tasks]
store = "sqlite://{}"
poll_interval = "100ms"
lease = "1s"

[defaults]
retry = {{ max_attempts = 1, attempt_timeout = "60s" }}
breaker = {{ failure_threshold = 2, reset_timeout = "5m" }}

[tools.hang]
durable = true
"#,
        dir.path().join("tasks.db").display()
    );
    let config = Config::parse_toml(&text, "test.toml").expect("the config");
    let upstream = steadfast_mcp::Upstream::command(
        "python3",
        [fake_upstream(), "--flaky-failures".into(), "1000000".into()],
    );
    let options = HttpOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        ..HttpOptions::default()
    };
    let admin = Admin::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let serving = admin.clone();
    let task = tokio::spawn(async move {
        let served = serving.attach(steadfast_gateway::serve_http(
            config,
            UpstreamSet::One(upstream),
            options,
            Some(tx),
            None,
        ));
        served.await.expect("the gateway serves");
    });
    let addr = tokio::time::timeout(BOUND, rx)
        .await
        .expect("the gateway listens in time")
        .expect("its address");
    let start = Instant::now();
    loop {
        let s = admin.snapshot().await;
        if s.upstreams.first().map(|u| u.status) == Some(UpstreamStatus::Connected)
            && !s.tools.is_empty()
        {
            break;
        }
        assert!(
            start.elapsed() < BOUND,
            "the upstream never connected: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Gateway {
        mcp: format!("http://{addr}/mcp"),
        admin,
        task,
        _dir: dir,
    }
}

/// One HTTP exchange on a fresh connection: status, headers (lower-case names), body.
pub async fn exchange(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<(String, String)>, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
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
    let raw = tokio::time::timeout(BOUND, io)
        .await
        .expect("answered in time")
        .expect("an answer");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

/// A client session on the gateway's HTTP front.
pub struct Client {
    url: String,
    session: String,
    next: u64,
}

/// The JSON-RPC message in an answer: the body itself, or the `data:` line of an SSE body.
fn message(body: &str) -> Value {
    serde_json::from_str(body.trim()).unwrap_or_else(|_| {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC answer in {body:?}"))
    })
}

impl Client {
    /// `initialize` (2025-11-25, declaring tasks) and `notifications/initialized`.
    pub async fn connect(url: &str) -> Self {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tasks": {"list": {}, "cancel": {}}},
            "clientInfo": {"name": "console-test", "version": "0"}
        }});
        let (status, headers, text) =
            exchange("POST", url, &Self::headers(None), &body.to_string()).await;
        assert_eq!(status, 200, "initialize: {text}");
        let session = headers
            .iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone())
            .expect("a session id");
        let c = Self {
            url: url.to_owned(),
            session,
            next: 1,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        exchange(
            "POST",
            url,
            &Self::headers(Some(&c.session)),
            &note.to_string(),
        )
        .await;
        c
    }

    fn headers(session: Option<&str>) -> Vec<(&str, &str)> {
        let mut h = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(s) = session {
            h.push(("Mcp-Session-Id", s));
        }
        h
    }

    /// A request; its answer.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (status, _, text) = exchange(
            "POST",
            &self.url,
            &Self::headers(Some(&self.session)),
            &body.to_string(),
        )
        .await;
        assert_eq!(status, 200, "{method}: {text}");
        message(&text)
    }

    /// Calls `flaky`, which fails (a tool error the breaker counts).
    pub async fn fail_once(&mut self) -> Value {
        self.request("tools/call", json!({"name": "flaky", "arguments": {}}))
            .await
    }

    /// Starts a durable call of `hang` (never answers): its task id.
    pub async fn start_task(&mut self) -> String {
        let r = self
            .request(
                "tools/call",
                json!({"name": "hang", "arguments": {}, "task": {"ttl": 60000}}),
            )
            .await;
        r.pointer("/result/task/taskId")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("a task: {r}"))
            .to_owned()
    }
}
