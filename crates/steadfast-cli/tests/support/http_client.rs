//! A minimal HTTP/1.1 client for process tests: one exchange per connection, the headers given,
//! and the body of a JSON answer or a stream of server-sent events read as messages.
#![allow(dead_code)] // each test file uses a different part

use std::time::Duration;

use serde_json::Value;

/// The longest one exchange may take.
pub const EXCHANGE_BOUND: Duration = Duration::from_secs(10);

/// What came back: status, headers (names lower-cased) and the body as text.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// The first header called `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC answer: the body, or a stream's last message.
    pub fn answer(&self) -> Value {
        if self.header("content-type") == Some("text/event-stream") {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .next_back()
                .unwrap_or(Value::Null)
        } else {
            serde_json::from_str(&self.body).unwrap_or(Value::Null)
        }
    }
}

/// One exchange over a fresh connection (`Connection: close`); `Err` when the connection is
/// refused or reset, or the answer takes longer than [`EXCHANGE_BOUND`].
pub async fn exchange(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
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
    let raw = tokio::time::timeout(EXCHANGE_BOUND, io)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time"))??;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "no status line"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok(Reply {
        status,
        headers,
        body: body.to_owned(),
    })
}

/// A free loopback port (bound then released: a small race other tests are unlikely to win).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
