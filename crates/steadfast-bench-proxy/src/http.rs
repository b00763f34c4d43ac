//! Just enough of a streamable-HTTP MCP client for the driver: POST one JSON-RPC message on a
//! keep-alive HTTP/1.1 connection and read the answer, whether a JSON body or an SSE stream
//! (with `Content-Length` or chunked), keeping the `Mcp-Session-Id`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use serde_json::Value;

/// One HTTP/1.1 connection to an MCP endpoint.
pub struct HttpConn {
    authority: String,
    path: String,
    conn: Option<(BufReader<TcpStream>, TcpStream)>,
    /// The session, once `initialize` has been answered (shared by cloning into other conns).
    pub session: Option<String>,
    /// Extra header lines sent with every POST (each ending in `\r\n`): a modern
    /// (MCP 2026-07-28) client's routing headers.
    pub headers: String,
}

impl HttpConn {
    /// A client for `url` (`http://host:port/path`); connects lazily.
    pub fn new(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("--http: only http:// URLs (got {url:?})"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        Ok(Self {
            authority: authority.to_owned(),
            path: format!("/{path}"),
            conn: None,
            session: None,
            headers: String::new(),
        })
    }

    /// Another connection to the same endpoint and session.
    pub fn fork(&self) -> Self {
        Self {
            authority: self.authority.clone(),
            path: self.path.clone(),
            conn: None,
            session: self.session.clone(),
            headers: self.headers.clone(),
        }
    }

    /// POSTs `body` and returns the JSON-RPC messages of the answer (empty for 202).
    pub fn post(&mut self, body: &str) -> Result<Vec<Value>, String> {
        if self.conn.is_none() {
            let stream = TcpStream::connect(&self.authority)
                .map_err(|e| format!("connect {}: {e}", self.authority))?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            let writer = stream.try_clone().map_err(|e| e.to_string())?;
            self.conn = Some((BufReader::with_capacity(1 << 16, stream), writer));
        }
        let (reader, writer) = self.conn.as_mut().ok_or("no connection")?;
        let mut req = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.path,
            self.authority,
            body.len()
        );
        if let Some(s) = &self.session {
            req.push_str("Mcp-Session-Id: ");
            req.push_str(s);
            req.push_str("\r\nMcp-Protocol-Version: 2025-06-18\r\n");
        }
        req.push_str(&self.headers);
        req.push_str("\r\n");
        req.push_str(body);
        writer
            .write_all(req.as_bytes())
            .map_err(|e| format!("write: {e}"))?;

        let mut line = String::new();
        read_line(reader, &mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad status line {line:?}"))?;
        let (mut length, mut chunked, mut close, mut sse) = (None, false, false, false);
        loop {
            read_line(reader, &mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let Some((k, v)) = l.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                "content-length" => length = v.parse::<usize>().ok(),
                "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
                "connection" => close = v.eq_ignore_ascii_case("close"),
                "content-type" => sse = v.starts_with("text/event-stream"),
                "mcp-session-id" => self.session = Some(v.to_owned()),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                read_line(reader, &mut line)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| format!("bad chunk size {line:?}"))?;
                if size == 0 {
                    read_line(reader, &mut line)?; // the empty trailer line
                    break;
                }
                let start = body.len();
                body.resize(start + size + 2, 0);
                reader
                    .read_exact(&mut body[start..])
                    .map_err(|e| format!("read: {e}"))?;
                body.truncate(start + size);
            }
        } else if let Some(n) = length {
            body.resize(n, 0);
            reader
                .read_exact(&mut body)
                .map_err(|e| format!("read: {e}"))?;
        } else if status != 202 {
            reader
                .read_to_end(&mut body)
                .map_err(|e| format!("read: {e}"))?;
            close = true;
        }
        if close {
            self.conn = None;
        }
        if !(200..300).contains(&status) {
            return Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(200)
                    .collect::<String>()
            ));
        }
        if body.is_empty() {
            return Ok(Vec::new());
        }
        if !sse {
            return serde_json::from_slice(&body)
                .map(|v| vec![v])
                .map_err(|e| format!("bad JSON body: {e}"));
        }
        Ok(String::from_utf8_lossy(&body)
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect())
    }
}

fn read_line(reader: &mut BufReader<TcpStream>, line: &mut String) -> Result<(), String> {
    line.clear();
    match reader.read_line(line) {
        Ok(0) => Err("the server closed the connection".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("read: {e}")),
    }
}

/// One keep-alive HTTP/1.1 connection driven by a task (the calls in flight: one task per
/// connection on a current-thread runtime, so the driver costs an event loop, not a thread and
/// a context switch per call). Answers may be JSON or SSE, `Content-Length` or chunked.
pub struct AsyncConn {
    stream: tokio::net::TcpStream,
    /// The request head up to `Content-Length: ` (built once).
    head: Vec<u8>,
    req: Vec<u8>,
    buf: Vec<u8>,
}

impl AsyncConn {
    /// Connects to `like`'s endpoint, with its session and headers.
    pub async fn connect(like: &HttpConn) -> Result<Self, String> {
        let stream = tokio::net::TcpStream::connect(&like.authority)
            .await
            .map_err(|e| format!("connect {}: {e}", like.authority))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n",
            like.path, like.authority
        );
        if let Some(s) = &like.session {
            head.push_str("Mcp-Session-Id: ");
            head.push_str(s);
            head.push_str("\r\nMcp-Protocol-Version: 2025-06-18\r\n");
        }
        head.push_str(&like.headers);
        head.push_str("Content-Length: ");
        Ok(Self {
            stream,
            head: head.into_bytes(),
            req: Vec::with_capacity(1024),
            buf: Vec::with_capacity(1 << 14),
        })
    }

    /// POSTs `body` and checks that the answer is a result for `id`.
    pub async fn call(&mut self, body: &[u8], id: u64) -> Result<(), String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.req.clear();
        self.req.extend_from_slice(&self.head);
        self.req
            .extend_from_slice(format!("{}\r\n\r\n", body.len()).as_bytes());
        self.req.extend_from_slice(body);
        self.stream
            .write_all(&self.req)
            .await
            .map_err(|e| format!("write: {e}"))?;
        // The head.
        let head_end = loop {
            if let Some(i) = memchr::memmem::find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            self.fill().await?;
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad status line in {head:?}"))?;
        let (mut length, mut chunked) = (None, false);
        for l in head.lines().skip(1) {
            let Some((k, v)) = l.split_once(':') else {
                continue;
            };
            let v = v.trim();
            if k.eq_ignore_ascii_case("content-length") {
                length = v.parse::<usize>().ok();
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.eq_ignore_ascii_case("chunked");
            }
        }
        self.buf.drain(..head_end);
        let body = if chunked {
            let mut body = Vec::new();
            loop {
                let line_end = loop {
                    if let Some(i) = memchr::memmem::find(&self.buf, b"\r\n") {
                        break i;
                    }
                    self.fill().await?;
                };
                let size_text = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
                let size =
                    usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                        .map_err(|_| format!("bad chunk size {size_text:?}"))?;
                while self.buf.len() < line_end + 2 + size + 2 {
                    self.fill().await?;
                }
                body.extend_from_slice(&self.buf[line_end + 2..line_end + 2 + size]);
                self.buf.drain(..line_end + 2 + size + 2);
                if size == 0 {
                    break body;
                }
            }
        } else {
            let n = length.ok_or("an answer without Content-Length or chunks")?;
            while self.buf.len() < n {
                let need = n - self.buf.len();
                let at = self.buf.len();
                self.buf.resize(at + need.max(4096), 0);
                let got = self
                    .stream
                    .read(&mut self.buf[at..])
                    .await
                    .map_err(|e| format!("read: {e}"))?;
                self.buf.truncate(at + got);
                if got == 0 {
                    return Err("the server closed the connection".into());
                }
            }
            self.buf.drain(..n).collect()
        };
        if !(200..300).contains(&status) {
            return Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(200)
                    .collect::<String>()
            ));
        }
        answered(&body, id)
    }

    async fn fill(&mut self) -> Result<(), String> {
        use tokio::io::AsyncReadExt;
        let n = self
            .stream
            .read_buf(&mut self.buf)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection".into());
        }
        Ok(())
    }
}

/// Whether `body` (JSON, or SSE `data:` lines) holds a result for `id`: a byte search first,
/// a parse only when it does not settle it.
fn answered(body: &[u8], id: u64) -> Result<(), String> {
    let want = format!("\"id\":{id},");
    if memchr::memmem::find(body, want.as_bytes()).is_some()
        && memchr::memmem::find(body, b"\"result\"").is_some()
        && memchr::memmem::find(body, b"\"error\"").is_none()
    {
        return Ok(());
    }
    let text = String::from_utf8_lossy(body);
    let messages: Vec<Value> = match serde_json::from_str(&text) {
        Ok(v) => vec![v],
        Err(_) => text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect(),
    };
    match messages.iter().find(|m| m["id"] == id) {
        Some(m) if m.get("result").is_some() => Ok(()),
        Some(m) => Err(format!("error answer: {m}")),
        None => Err(format!("no answer to {id} in the HTTP response")),
    }
}
