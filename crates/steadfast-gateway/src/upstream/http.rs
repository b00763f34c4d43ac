//! A streamable-HTTP upstream: each message is a POST; its answer comes back as JSON or as an
//! SSE stream; server-initiated messages arrive on a GET stream.
//!
//! A server that restarted no longer knows our session: it answers 404 (the spec, and the
//! Python SDK) or 400 naming the session (the TypeScript SDK). Either ends this connection as
//! "session expired", the supervisor opens a new session with the client's own `initialize`,
//! and the request that hit the dead session counts as not sent — the server refused it
//! before running it — so even a non-idempotent call may be retried. A refused connection is
//! an outage, ridden out like a crashed child: the supervisor reconnects with backoff and
//! calls wait `reconnect_wait` for it.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::link::{HttpSession, Link, Transport};
use super::{Reply, Upstream};
use crate::wire::framing::Frame;

const SESSION: &str = "mcp-session-id";
const PROTOCOL: &str = "mcp-protocol-version";
const KEEP: usize = 64 * 1024;

/// One HTTP session with the server.
pub(crate) struct Session {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    session_id: RwLock<Option<String>>,
    protocol: RwLock<Option<String>>,
    up: Weak<Upstream>,
    link: OnceLock<Weak<Link>>,
    close_reason: Mutex<Option<String>>,
    max: usize,
    in_flight: Arc<tokio::sync::Semaphore>,
    /// The bound on an exchange no request waits on (a notification, an answer to the server).
    bound: Duration,
}

/// Opens a connection object (nothing is sent until the handshake).
pub(super) fn open(up: &Arc<Upstream>, generation: u64) -> Result<Arc<Link>, String> {
    let steadfast_mcp::Upstream::Http { url, headers } = &up.spec else {
        return Err("not an HTTP upstream".to_owned());
    };
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("upstream header `{k}` is not a valid header name"))?;
        let value = HeaderValue::from_str(v)
            .map_err(|_| format!("upstream header `{k}` has a value that is not valid"))?;
        map.insert(name, value);
    }
    crate::install_crypto_provider();
    let bound = up.settings.request_timeout;
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10).min(bound))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let session = Arc::new(Session {
        client,
        url: url.clone(),
        headers: map,
        session_id: RwLock::new(None),
        protocol: RwLock::new(None),
        up: Arc::downgrade(up),
        link: OnceLock::new(),
        close_reason: Mutex::new(None),
        max: up.settings.max_message_size,
        in_flight: Arc::new(tokio::sync::Semaphore::new(up.settings.max_queue)),
        bound,
    });
    let link = Link::new(generation, Transport::Http(session.clone()));
    let _ = session.link.set(Arc::downgrade(&link));
    Ok(link)
}

fn session_of(link: &Link) -> Option<Arc<Session>> {
    match &link.transport {
        Transport::Http(s) => {
            let any: Arc<dyn std::any::Any + Send + Sync> = s.clone();
            any.downcast::<Session>().ok()
        }
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// After the handshake: remember the protocol version and open the server's GET stream.
pub(super) fn initialized(link: &Arc<Link>, result: &str) {
    let Some(s) = session_of(link) else { return };
    if let Ok(v) = serde_json::from_str::<Value>(result)
        && let Some(p) = v.get("protocolVersion").and_then(Value::as_str)
    {
        *s.protocol.write().unwrap_or_else(|e| e.into_inner()) = Some(p.to_owned());
    }
    // The stream lives as long as the connection: a server that hangs it (no headers, no
    // events) leaves no task behind after a restart.
    let link = link.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = s.listen() => {}
            _ = link.closed() => {}
        }
    });
}

/// Why the connection ended.
pub(super) fn close_reason(link: &Link) -> String {
    session_of(link)
        .and_then(|s| {
            s.close_reason
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        })
        .unwrap_or_else(|| "the HTTP connection ended".to_owned())
}

/// Ends the session (DELETE, best effort, within `grace`).
pub(super) async fn terminate(link: &Arc<Link>, grace: Duration) {
    link.close();
    let Some(s) = session_of(link) else { return };
    let id = s
        .session_id
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if let Some(id) = id {
        let req = s
            .client
            .delete(&s.url)
            .headers(s.headers.clone())
            .header(SESSION, id);
        let _ = tokio::time::timeout(grace, async {
            // With the gateway's own token, if the upstream takes one (best effort, as the rest).
            if let Ok(req) = s.authorize(req).await {
                let _ = req.send().await;
            }
        })
        .await;
    }
}

impl HttpSession for Session {
    fn send(
        self: Arc<Self>,
        line: Vec<u8>,
        request: Option<u64>,
        exchange: Option<tokio_util::sync::CancellationToken>,
    ) -> Result<(), String> {
        self.post(line, request, exchange)
    }
}

impl Session {
    fn link(&self) -> Option<Arc<Link>> {
        self.link.get().and_then(Weak::upgrade)
    }

    fn close(&self, why: String) {
        if let Some(link) = self.link() {
            let mut reason = self.close_reason.lock().unwrap_or_else(|e| e.into_inner());
            if reason.is_none() {
                *reason = Some(why);
            }
            drop(reason);
            link.close();
        }
    }

    fn settle(&self, request: Option<u64>, reply: Reply) {
        if let (Some(id), Some(up)) = (request, self.up.upgrade()) {
            up.settle(id, reply);
        }
    }

    /// Hands a message to the upstream; `related` is our request whose answer stream carried
    /// it (the streamable-HTTP transport relates a server's messages to a request that way).
    fn dispatch(&self, frame: Frame, related: Option<u64>) {
        if let (Some(up), Some(link)) = (self.up.upgrade(), self.link()) {
            up.on_frame_related(&link, crate::wire::framing::one_line(frame), related);
        }
    }

    /// `req` with the gateway's own OAuth token for this upstream, if it has one (it replaces
    /// any static `Authorization` header); `Err` says why no token could be had.
    async fn authorize(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, String> {
        let Some(token) = self.up.upgrade().and_then(|u| u.token.get().cloned()) else {
            return Ok(req);
        };
        let token = token.access_token().await.map_err(|e| {
            format!(
                "no OAuth token for the upstream: {}",
                steadfast::sanitize(&e)
            )
        })?;
        let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            .map_err(|_| "the upstream's OAuth token is not a valid header value".to_owned())?;
        value.set_sensitive(true);
        let mut map = HeaderMap::new();
        map.insert(reqwest::header::AUTHORIZATION, value);
        Ok(req.headers(map))
    }

    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .request(method, &self.url)
            .headers(self.headers.clone());
        if let Some(id) = &*self.session_id.read().unwrap_or_else(|e| e.into_inner()) {
            req = req.header(SESSION, id);
        }
        if let Some(p) = &*self.protocol.read().unwrap_or_else(|e| e.into_inner()) {
            req = req.header(PROTOCOL, p);
        }
        req
    }

    /// Sends one message; its answer is dispatched when it arrives.
    /// At most `max_queue` requests are in flight toward the server (the HTTP counterpart of
    /// a stdio child's bounded input queue). Every exchange — connect, headers, body — is
    /// bounded: a request's by `exchange` (cancelled when its reply came or whoever waited for
    /// it gave up at its own bound), any other message's by `request_timeout`; and each ends
    /// when the connection does. A hung server so holds no socket, task or slot for long.
    pub(super) fn post(
        self: &Arc<Self>,
        line: Vec<u8>,
        request: Option<u64>,
        exchange: Option<tokio_util::sync::CancellationToken>,
    ) -> Result<(), String> {
        let permit = self
            .in_flight
            .clone()
            .try_acquire_owned()
            .map_err(|_| "too many requests in flight toward the upstream".to_owned())?;
        let me = self.clone();
        let Some(link) = self.link() else {
            return Err("the upstream connection is closed".to_owned());
        };
        let bound = self.bound;
        tokio::spawn(async move {
            let _permit = permit;
            let over = async {
                match &exchange {
                    Some(t) => t.cancelled().await,
                    None => tokio::time::sleep(bound).await,
                }
            };
            tokio::select! {
                _ = me.post_inner(line, request) => {}
                _ = link.closed() => {}
                _ = over => {
                    // Dropping the exchange closes its connection; whoever waits for the
                    // reply has its own bound and answers the client from it.
                    tracing::debug!(?request, "an HTTP exchange with the upstream was abandoned");
                }
            }
        });
        Ok(())
    }

    async fn post_inner(&self, line: Vec<u8>, request: Option<u64>) {
        let had_session = self
            .session_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        let req = self.post_request(line);
        let req = match self.authorize(req).await {
            Ok(r) => r,
            Err(why) => return self.settle(request, Reply::NotSent(why)),
        };
        let sent = req.send().await;
        let mut resp = match sent {
            Ok(r) => r,
            Err(e) if e.is_connect() => {
                let why = format!(
                    "cannot reach the upstream: {}",
                    steadfast::sanitize(&e.to_string())
                );
                self.settle(request, Reply::NotSent(why.clone()));
                self.close(why);
                return;
            }
            Err(e) => {
                let why = steadfast::sanitize(&e.to_string()).into_owned();
                self.settle(request, Reply::Lost(why));
                return;
            }
        };
        let orphan = resp
            .headers()
            .get(SESSION)
            .and_then(|v| v.to_str().ok())
            .and_then(|id| self.adopt(id, resp.status().is_success()));
        if self.refused(&mut resp, had_session, request).await {
            if let Some(id) = orphan {
                self.forget(id).await;
            }
            return;
        }
        let status = resp.status();
        if status.as_u16() == 202 || status.as_u16() == 204 {
            return;
        }
        let sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if sse {
            self.read_events(&mut resp, request).await;
        } else {
            match read_capped(&mut resp, self.max).await {
                Ok(body) if !body.is_empty() => self.dispatch_body(body, request),
                Ok(_) => {}
                Err(Capped::TooLarge(len)) => self.settle(request, Reply::TooLarge(len)),
                Err(Capped::Io(e)) => self.settle(request, Reply::Lost(e)),
            }
        }
        if let (Some(id), Some(up)) = (request, self.up.upgrade())
            && up.pending().contains_key(&id)
        {
            // A JSON answer, or an event stream that ended, without our reply.
            up.settle(
                id,
                Reply::Lost("the upstream's HTTP answer ended without a reply".to_owned()),
            );
        }
    }

    /// Takes the server's `Mcp-Session-Id` as this connection's session when it has none and
    /// the answer carrying it was a success (the session comes with the `initialize` result).
    /// An id on a refusal is not ours: the Python SDK 1.x's stateful server answers the
    /// `server/discover` probe with 400 "Missing session ID" and a fresh id, and refuses
    /// `initialize` sent with that id as 404 "Session not found". Such an id is returned, to
    /// be deleted ([`Session::forget`]).
    fn adopt(&self, id: &str, success: bool) -> Option<String> {
        let mut current = self.session_id.write().unwrap_or_else(|e| e.into_inner());
        if current.is_some() {
            return None;
        }
        if !success {
            return Some(id.to_owned());
        }
        *current = Some(id.to_owned());
        None
    }

    /// Deletes a session the server opened on a request it refused (best effort, within
    /// `request_timeout`): the server would keep it until it ends.
    async fn forget(&self, id: String) {
        let Ok(value) = HeaderValue::from_str(&id) else {
            return;
        };
        let req = self
            .client
            .delete(&self.url)
            .headers(self.headers.clone())
            .header(SESSION, value);
        let _ = tokio::time::timeout(self.bound, async {
            if let Ok(req) = self.authorize(req).await {
                let _ = req.send().await;
            }
        })
        .await;
    }

    /// A POST of `line`: its routing headers (modern requests), its trace context, the
    /// content types.
    fn post_request(&self, line: Vec<u8>) -> reqwest::RequestBuilder {
        let mut req = self.request(reqwest::Method::POST);
        for (name, value) in modern_headers(&line, self.up.upgrade().as_deref()) {
            req = req.header(name.as_ref(), value);
        }
        // The trace context of the message's `_meta` in the headers too (W3C Trace Context
        // over HTTP), for servers and HTTP middle boxes that read only those.
        if let Some((tp, ts)) = crate::wire::trace_context::scan(&line) {
            req = req.header("traceparent", tp);
            if let Some(ts) = ts {
                req = req.header("tracestate", ts);
            }
        }
        req.header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(line)
    }

    /// An error status answers the request (a JSON-RPC error in the body, else the status), or
    /// ends the upstream session (404, or 400 about the session, on an established one):
    /// whether it did.
    async fn refused(
        &self,
        resp: &mut reqwest::Response,
        had_session: bool,
        request: Option<u64>,
    ) -> bool {
        let status = resp.status();
        if had_session && (status.as_u16() == 404 || status.as_u16() == 400) {
            let body = read_capped(resp, 4096).await.unwrap_or_default();
            let body = String::from_utf8_lossy(&body).to_lowercase();
            if status.as_u16() == 404 || body.contains("session") {
                let why = format!("the upstream session expired (HTTP {})", status.as_u16());
                self.settle(request, Reply::NotSent(why.clone()));
                self.close(why);
                return true;
            }
            self.settle(request, Reply::Http(status.as_u16(), body));
            return true;
        }
        if !status.is_success() {
            let body = read_capped(resp, 4096).await.unwrap_or_default();
            let text = String::from_utf8_lossy(&body).into_owned();
            // A JSON-RPC error in the body is the answer itself.
            if let Some(id) = request
                && let Ok(v) = serde_json::from_slice::<Value>(&body)
                && v.get("error").is_some()
                && v.get("id").and_then(Value::as_u64) == Some(id)
            {
                self.dispatch(Frame::Line(body[..].into()), request);
                return true;
            }
            self.settle(request, Reply::Http(status.as_u16(), text));
            return true;
        }
        false
    }

    fn dispatch_body(&self, body: Vec<u8>, related: Option<u64>) {
        let first = body.iter().find(|b| !b.is_ascii_whitespace()).copied();
        if first == Some(b'[') {
            if let Ok(items) =
                serde_json::from_slice::<Vec<Box<serde_json::value::RawValue>>>(&body)
            {
                for item in items {
                    self.dispatch(Frame::Line(item.get().as_bytes().into()), related);
                }
            }
        } else {
            self.dispatch(Frame::Line(body[..].into()), related);
        }
    }

    /// Reads an SSE stream, dispatching each event's data; events larger than `max` are
    /// reported as too large. `related`: the request whose answer this stream is.
    async fn read_events(&self, resp: &mut reqwest::Response, related: Option<u64>) {
        let mut line = Vec::new();
        let mut data: Vec<u8> = Vec::new();
        let mut oversized: Option<(Vec<u8>, usize)> = None;
        loop {
            let chunk = match resp.chunk().await {
                Ok(Some(c)) => c,
                _ => return,
            };
            for &b in chunk.iter() {
                if b != b'\n' {
                    if line.len() <= self.max + 16 {
                        line.push(b);
                    }
                    continue;
                }
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.is_empty() {
                    // End of an event.
                    if let Some((head, len)) = oversized.take() {
                        let tail = data[data.len().saturating_sub(KEEP)..].to_vec();
                        self.dispatch(Frame::TooLarge { head, tail, len }, related);
                    } else if !data.is_empty() {
                        self.dispatch(Frame::Line(data[..].into()), related);
                    }
                    data.clear();
                } else if let Some(rest) = line.strip_prefix(b"data:") {
                    let rest = rest.strip_prefix(b" ").unwrap_or(rest);
                    if !data.is_empty() {
                        data.push(b'\n');
                    }
                    data.extend_from_slice(rest);
                    if data.len() > self.max {
                        let (head, len) = oversized
                            .get_or_insert_with(|| (data[..KEEP.min(data.len())].to_vec(), 0));
                        let _ = head;
                        *len += data.len();
                        let keep = data[data.len().saturating_sub(KEEP)..].to_vec();
                        data = keep;
                    }
                }
                line.clear();
            }
        }
    }

    /// The server's own stream (notifications and requests outside any POST).
    async fn listen(self: Arc<Self>) {
        let mut failures = 0u32;
        while let Some(link) = self.link() {
            if link.is_closed() {
                return;
            }
            drop(link);
            let req = self
                .request(reqwest::Method::GET)
                .header(ACCEPT, "text/event-stream");
            let resp = match self.authorize(req).await {
                Ok(req) => req.send().await.map_err(|e| e.to_string()),
                Err(why) => Err(why),
            };
            match resp {
                Ok(mut r) if r.status().is_success() => {
                    failures = 0;
                    self.read_events(&mut r, None).await;
                }
                // 405: the server offers no stream.
                Ok(r) if r.status().as_u16() == 405 => return,
                _ => failures += 1,
            }
            if failures > 5 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500 * u64::from(failures.max(1)))).await;
        }
    }
}

/// The routing headers MCP 2026-07-28 asks of a modern request (`MCP-Protocol-Version`,
/// `Mcp-Method`, `Mcp-Name` for the methods that name something), from the request itself;
/// with a `tools/call`'s `Mcp-Param-*` headers (`param_headers.rs`, as `up` learned them); none
/// for a handshake-era message (no envelope in it: one search, no parse).
fn modern_headers(line: &[u8], up: Option<&super::Upstream>) -> Vec<(Cow<'static, str>, String)> {
    use crate::wire::era;
    if memchr::memmem::find(line, era::PROTOCOL_VERSION.as_bytes()).is_none() {
        return Vec::new();
    }
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Vec::new();
    };
    let (Some(method), Some(params)) = (v.get("method").and_then(Value::as_str), v.get("params"))
    else {
        return Vec::new();
    };
    let Some(version) = era::version_of(params) else {
        return Vec::new();
    };
    let mut h = vec![
        (Cow::Borrowed(PROTOCOL), version.to_owned()),
        (Cow::Borrowed("mcp-method"), method.to_owned()),
    ];
    let name = era::name_key(method).and_then(|k| params.get(k)?.as_str());
    if let Some(name) = name {
        h.push((Cow::Borrowed("mcp-name"), era::encode_header_value(name)));
    }
    if let (Some(up), Some(tool), "tools/call") = (up, name, method) {
        let arguments = params.get("arguments").unwrap_or(&Value::Null);
        h.extend(
            up.param_headers(tool, arguments)
                .into_iter()
                .map(|(n, v)| (Cow::Owned(n), v)),
        );
    }
    h
}

enum Capped {
    TooLarge(usize),
    Io(String),
}

async fn read_capped(resp: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, Capped> {
    let mut body = Vec::new();
    let mut len = 0usize;
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                len += c.len();
                if len > max {
                    while let Ok(Some(c)) = resp.chunk().await {
                        len += c.len();
                    }
                    return Err(Capped::TooLarge(len));
                }
                body.extend_from_slice(&c);
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(Capped::Io(steadfast::sanitize(&e.to_string()).into_owned())),
        }
    }
}
