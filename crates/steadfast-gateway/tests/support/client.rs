//! Clients of the gateway: [`Client`] on the stdio front's pipes, [`post`] on the HTTP front.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::io::{DuplexStream, ReadHalf, WriteHalf};
use tokio::time::Instant;

use super::ANSWER;

/// A request's answer and what came before it.
#[derive(Debug)]
pub struct Answer {
    /// The response (result or error).
    pub response: Value,
    /// The other messages read while waiting (notifications, server requests).
    pub before: Vec<Value>,
    /// How long it took (virtual time on the paused clock).
    pub elapsed: std::time::Duration,
}

/// A raw JSON-RPC client on the stdio front's pipe.
pub struct Client {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: WriteHalf<DuplexStream>,
    /// Messages read while waiting for something else, not yet handed out.
    backlog: Vec<Value>,
}

impl Client {
    pub(super) fn new(io: DuplexStream) -> Self {
        let (read, writer) = tokio::io::split(io);
        Self {
            lines: BufReader::new(read).lines(),
            writer,
            backlog: Vec::new(),
        }
    }

    /// Writes one message.
    pub async fn send(&mut self, message: &Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .await
            .expect("the gateway reads");
    }

    /// Sends a request.
    pub async fn request(&mut self, id: Value, method: &str, params: Value) {
        let m = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&m).await;
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str, params: Value) {
        let m = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send(&m).await;
    }

    /// The next message, or `None` when none comes within `within` or the gateway closed.
    pub async fn read(&mut self, within: std::time::Duration) -> Option<Value> {
        if !self.backlog.is_empty() {
            return Some(self.backlog.remove(0));
        }
        let line = tokio::time::timeout(within, self.lines.next_line())
            .await
            .ok()?
            .ok()??;
        Some(serde_json::from_str(&line).expect("the gateway writes JSON"))
    }

    /// Waits for the response to `id`, keeping what comes before it.
    pub async fn wait_for(&mut self, id: &Value) -> Answer {
        let started = Instant::now();
        let mut before = Vec::new();
        loop {
            let m = self
                .read(ANSWER.saturating_sub(started.elapsed()))
                .await
                .unwrap_or_else(|| panic!("no answer to {id} (saw {before:?})"));
            if m.get("method").is_none() && &m["id"] == id {
                return Answer {
                    response: m,
                    before,
                    elapsed: started.elapsed(),
                };
            }
            before.push(m);
        }
    }

    /// Sends a request and waits for its answer.
    pub async fn call(&mut self, id: i64, method: &str, params: Value) -> Answer {
        self.request(json!(id), method, params).await;
        self.wait_for(&json!(id)).await
    }

    /// `initialize` (2025-11-25) and `notifications/initialized`: the result.
    pub async fn initialize(&mut self) -> Value {
        let params = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "kit", "version": "0"}});
        let a = self.call(0, "initialize", params).await;
        self.notify("notifications/initialized", json!({})).await;
        a.response
    }

    /// Puts a message back, to be read first.
    pub fn unread(&mut self, m: Value) {
        self.backlog.insert(0, m);
    }
}

/// An HTTP answer: the status, the headers (names lower-case), and every JSON-RPC message of
/// the body (one JSON body, or each SSE event's data).
#[derive(Debug)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: Vec<(String, String)>,
    /// The messages.
    pub messages: Vec<Value>,
}

impl HttpAnswer {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The last message (the response, for a request).
    pub fn last(&self) -> &Value {
        self.messages.last().expect("a message in the body")
    }
}

/// POSTs `body` to `url` with `headers` (besides the content negotiation ones), on a
/// connection of its own.
pub async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> HttpAnswer {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
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
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(authority).await?;
        s.write_all(head.as_bytes()).await?;
        s.write_all(body.as_bytes()).await?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(ANSWER, exchange)
        .await
        .expect("an HTTP answer")
        .expect("the exchange");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line in {head:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    HttpAnswer {
        status,
        headers,
        messages: messages(&body),
    }
}

/// A chunked body's content.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// The JSON-RPC messages of a body: one JSON value, or each SSE event's data.
pub fn messages(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return vec![v];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// A 2026-07-28 POST with its routing headers (`MCP-Protocol-Version`, `Mcp-Method`,
/// `Mcp-Name`).
pub async fn modern_post(url: &str, id: i64, method: &str, params: Value) -> HttpAnswer {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut headers = vec![
        ("MCP-Protocol-Version", super::fake::MODERN),
        ("Mcp-Method", method),
    ];
    if let Some(n) = &name {
        headers.push(("Mcp-Name", n));
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    post(url, &headers, &body).await
}

/// A 2025-11-25 session on the HTTP front: `initialize` and `notifications/initialized`; the
/// session id.
pub async fn http_session(url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "kit", "version": "0"}}});
    let a = post(url, &[], &init).await;
    assert_eq!(a.status, 200, "{a:?}");
    let session = a.header("mcp-session-id").expect("a session id").to_owned();
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(url, &[("Mcp-Session-Id", &session)], &done).await;
    session
}

/// A request in a 2025-11-25 session.
pub async fn session_post(
    url: &str,
    session: &str,
    id: i64,
    method: &str,
    params: Value,
) -> HttpAnswer {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    post(url, &[("Mcp-Session-Id", session)], &body).await
}
