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
