//! The streamable-HTTP front: many clients, one upstream, shared breakers and budgets.
//!
//! `POST /mcp` carries one message: `initialize` (without a session) opens a session and
//! answers with its `Mcp-Session-Id`; a request is answered in the POST's body (JSON, or a
//! stream of server-sent events, see `post_stream`); a notification or a response gets 202.
//! `GET /mcp` streams the session's messages that belong to no request of it (notifications,
//! the server's requests it relates to no request) as server-sent events; `DELETE /mcp` ends
//! the session. An unknown or ended session is answered 404, so a client re-initializes.
//!
//! Security, as the MCP spec asks of HTTP servers: bind to loopback by default; bearer tokens
//! compared in constant time (401 with `WWW-Authenticate` otherwise); an `Origin` header must
//! be on the allow-list (403 otherwise: the DNS-rebinding warning); request bodies are capped
//! at `max_message_size` (413); sessions are capped (503 when full); a connection that does not
//! send a request's headers within `header_read_timeout` (idle keep-alive ones too) is closed.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Frame as BodyFrame, Incoming};
use hyper::{Request, Response, StatusCode};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::route::router::{Router, UpstreamSet};
use crate::session::Session;
use crate::session::client::Client;
use crate::wire::framing::Frame;
use crate::wire::jsonrpc::{Envelope, Kind};
use crate::wire::outbound::Outbound;

/// How the HTTP front listens and whom it lets in.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen (loopback unless you mean otherwise).
    pub listen: SocketAddr,
    /// Bearer tokens accepted; empty = no authentication (only sensible on loopback).
    pub tokens: Vec<String>,
    /// `Origin` values accepted besides loopback ones (`http://localhost:*`, `http://127.0.0.1:*`).
    pub allowed_origins: Vec<String>,
    /// Sessions open at once.
    pub max_sessions: usize,
    /// A session unused this long (and with nothing in flight) is ended.
    pub session_idle: Duration,
    /// A connection must send a request's headers within this (also when idle between
    /// requests), so clients that connect and stall cannot hold sockets and tasks for ever.
    pub header_read_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            tokens: Vec::new(),
            allowed_origins: Vec::new(),
            max_sessions: 1024,
            session_idle: Duration::from_secs(30 * 60),
            header_read_timeout: Duration::from_secs(30),
        }
    }
}

struct Front {
    prometheus: Option<metrics_exporter_prometheus::PrometheusHandle>,
    router: Arc<Router>,
    config: Arc<Config>,
    options: HttpOptions,
    /// Open sessions and when each was last used.
    sessions: Mutex<HashMap<String, (Arc<Session>, tokio::time::Instant)>>,
    /// Initializes under way: they count against `max_sessions` until answered.
    opening: std::sync::atomic::AtomicUsize,
    /// `[tasks]` Durable tool calls, shared by every session (when some tool is durable).
    durable: Option<Arc<crate::tasks::Durable>>,
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r
}

/// Serves MCP over streamable HTTP until a signal arrives; returns the address it bound.
pub async fn serve_http(
    config: Config,
    upstreams: impl Into<UpstreamSet>,
    options: HttpOptions,
    bound: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
    reload: Option<crate::Reload>,
) -> std::io::Result<crate::Exit> {
    let config = Arc::new(config);
    let shared = crate::route::shared::Shared::connect(&config).await;
    let router = Router::build(upstreams.into(), &config, &shared)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // Upstreams start with the gateway, not at the first client's `initialize`: a readiness
    // probe behind a load balancer turns 200 without any client.
    router.start_early();
    let prometheus = install_prometheus();
    // [tasks]
    let durable = crate::tasks::Durable::open(&config, router.clone())
        .await
        .map_err(std::io::Error::other)?;
    let front = Arc::new(Front {
        prometheus,
        router: router.clone(),
        durable,
        config,
        options: options.clone(),
        sessions: Mutex::default(),
        opening: std::sync::atomic::AtomicUsize::new(0),
    });
    let reaper = Arc::downgrade(&front);
    let every =
        (options.session_idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match reaper.upgrade() {
                Some(f) => f.reap(),
                None => return,
            }
        }
    });
    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "serving MCP over streamable HTTP at /mcp");
    if let Some(tx) = bound {
        let _ = tx.send(addr);
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let exit = loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let front = front.clone();
                let header_read_timeout = options.header_read_timeout;
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let front = front.clone();
                        async move { Ok::<_, Infallible>(front.handle(req).await) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    // hyper enforces its header read timeout only with a timer.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(header_read_timeout)
                        .serve_connection(io, svc)
                        .await;
                });
            }
            _ = term.recv() => break crate::Exit::Signal(libc::SIGTERM),
            _ = int.recv() => break crate::Exit::Signal(libc::SIGINT),
            _ = hup.recv() => match reload.as_ref().map(|r| r()) {
                Some(Ok(new)) => crate::route::router::log_reload(&front.router, new),
                Some(Err(errors)) => {
                    for e in errors {
                        tracing::error!("config not reloaded (the old one stays): {e}");
                    }
                }
                None => tracing::info!("SIGHUP: no config file to reload"),
            },
        }
    };
    for (_, (s, _)) in front
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
    {
        end(&s);
    }
    if let Some(d) = &front.durable {
        d.shutdown().await; // [tasks] attempts in flight are cancelled, leases released
    }
    router.shutdown().await;
    Ok(exit)
}

/// Bucket bounds of the call-latency histogram, in seconds: from a fast local tool to a call
/// that spent its whole default budget (170 s).
const LATENCY_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0,
];

/// The process's metrics recorder, unless one is installed already (a library user's).
/// Latencies are histograms (buckets), not summaries: `histogram_quantile` works on them and
/// replicas' series can be summed.
fn install_prometheus() -> Option<metrics_exporter_prometheus::PrometheusHandle> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(&LATENCY_BUCKETS)
        .ok()?
        .install_recorder()
        .ok()
}

/// The credentials of an `Authorization` header with the `Bearer` scheme, which is
/// case-insensitive (RFC 9110 §11.1).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

/// Ends a session: what it has in flight is cancelled, its event streams end.
fn end(s: &Session) {
    s.cancel_all();
    s.client.forget_all();
    s.client.out.close();
    if let Some(stop) = s
        .client
        .stream
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        stop.cancel();
    }
}

/// Constant-time equality, so a token cannot be guessed byte by byte from timings.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether an `Accept` header lists `text/event-stream` (a `q=0` parameter refuses it). `*/*`
/// does not count: a client that never asked for a stream (curl's default) gets JSON.
fn accepts_sse(accept: Option<&hyper::header::HeaderValue>) -> bool {
    let Some(accept) = accept.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let kind = parts.next().unwrap_or("").trim();
        let refused = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
        });
        kind.eq_ignore_ascii_case("text/event-stream") && !refused
    })
}

/// A message as one server-sent event.
fn sse_event(line: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(line.len() + 24);
    event.extend_from_slice(b"event: message\ndata: ");
    event.extend_from_slice(line.strip_suffix(b"\n").unwrap_or(line));
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// A response whose body is the events sent on `rx`.
fn sse_response(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let mut r = Response::new(BodyExt::boxed(SseBody(rx)));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    r.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    r
}

/// A JSON answer.
fn json_response(line: Vec<u8>) -> Response<Body> {
    let mut r = full(StatusCode::OK, line);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// How long a POST waits for its answer at most: a tool call is bounded by its own policy;
/// this only keeps a lost answer from holding the connection for ever.
const ANSWER_BOUND: Duration = Duration::from_secs(600);

/// Cancels the client's request when dropped armed: its POST went away before the answer
/// (hyper drops the handler's future, or the stream's body, when the connection closes).
struct CancelUnlessAnswered {
    session: Arc<Session>,
    id: String,
    armed: bool,
}

impl CancelUnlessAnswered {
    /// The request is over (answered, cancelled, or given up): nothing to cancel.
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelUnlessAnswered {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(session = %self.session.id, "a client left its request's stream: the request is cancelled");
            self.session.cancel_request(&self.id);
        }
    }
}

fn loopback_origin(origin: &str) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    let host = rest.split(['/', ':']).next().unwrap_or("");
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

impl Front {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        match req.uri().path() {
            "/healthz" => return full(StatusCode::OK, "ok\n"),
            "/readyz" => {
                return match self.router.ready(self.router.config().ready) {
                    Ok(()) => full(StatusCode::OK, "ready\n"),
                    Err(down) => full(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("not connected: {}\n", down.join(", ")),
                    ),
                };
            }
            "/mcp" | "/metrics" => {}
            _ => return full(StatusCode::NOT_FOUND, "not found\n"),
        }
        if !self.options.tokens.is_empty() {
            let given = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(bearer)
                .unwrap_or("");
            let ok = self
                .options
                .tokens
                .iter()
                .fold(false, |acc, t| acc | same(t.as_bytes(), given.as_bytes()));
            if !ok {
                let mut r = full(
                    StatusCode::UNAUTHORIZED,
                    "a valid bearer token is required\n",
                );
                r.headers_mut().insert(
                    hyper::header::WWW_AUTHENTICATE,
                    hyper::header::HeaderValue::from_static("Bearer realm=\"steadfast\""),
                );
                return r;
            }
        }
        if req.uri().path() == "/metrics" {
            let sessions = self
                .sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .len();
            metrics::gauge!("steadfast_sessions").set(sessions as f64);
            return match &self.prometheus {
                Some(p) => {
                    let mut r = full(StatusCode::OK, p.render());
                    r.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
                    );
                    r
                }
                None => full(
                    StatusCode::NOT_FOUND,
                    "another metrics recorder is installed\n",
                ),
            };
        }
        if let Some(origin) = req.headers().get(hyper::header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !loopback_origin(origin) && !self.options.allowed_origins.iter().any(|o| o == origin)
            {
                return full(StatusCode::FORBIDDEN, "this Origin is not allowed\n");
            }
        }
        let session_id = req
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        match *req.method() {
            hyper::Method::POST => self.post(session_id, req).await,
            hyper::Method::GET => self.stream(session_id),
            hyper::Method::DELETE => {
                let gone = session_id.and_then(|id| {
                    self.sessions
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&id)
                });
                match gone {
                    Some((s, _)) => {
                        end(&s);
                        full(StatusCode::OK, "")
                    }
                    None => full(StatusCode::NOT_FOUND, "no such session\n"),
                }
            }
            _ => full(StatusCode::METHOD_NOT_ALLOWED, "use POST, GET or DELETE\n"),
        }
    }

    /// The session, marked as used now.
    fn session(&self, id: &str) -> Option<Arc<Session>> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let (s, seen) = sessions.get_mut(id)?;
        *seen = tokio::time::Instant::now();
        Some(s.clone())
    }

    /// Ends sessions unused for `session_idle` that have nothing in flight.
    fn reap(&self) {
        let idle = self.options.session_idle;
        let gone: Vec<Arc<Session>> = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, (s, seen))| seen.elapsed() >= idle && s.in_flight() == 0)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter()
                .filter_map(|id| sessions.remove(id))
                .map(|(s, _)| s)
                .collect()
        };
        for s in gone {
            tracing::info!(session = %s.id, "an idle session ended");
            end(&s);
        }
    }

    async fn post(
        self: &Arc<Self>,
        session_id: Option<String>,
        req: Request<Incoming>,
    ) -> Response<Body> {
        let sse = accepts_sse(req.headers().get(hyper::header::ACCEPT));
        let trace = trace_header(req.headers());
        let max = self.config.upstream_settings().max_message_size;
        let body = match Limited::new(req.into_body(), max).collect().await {
            Ok(b) => {
                let b = b.to_bytes();
                // (Rewritten only when traced and the header is set: `trace_header`.)
                match trace.and_then(|t| crate::wire::trace_context::adopt(&b, &t)) {
                    Some(line) => Bytes::from(line),
                    None => b,
                }
            }
            Err(_) => {
                return full(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the message exceeds max_message_size ({max} bytes)\n"),
                );
            }
        };
        let parsed = Envelope::parse(&body).map(|(env, kind)| {
            (
                kind,
                env.method.as_deref().map(str::to_owned),
                env.id.map(|i| i.get().to_owned()),
            )
        });
        let (session, new) = match (&session_id, &parsed) {
            (Some(id), _) => match self.session(id) {
                Some(s) => (s, false),
                None => return full(StatusCode::NOT_FOUND, "no such session: initialize again\n"),
            },
            (None, Ok((Kind::Request, Some(m), _))) if m == "initialize" => {
                {
                    // The check and the reservation under one lock: concurrent initializes
                    // cannot all pass it.
                    let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
                    let opening = self.opening.load(std::sync::atomic::Ordering::Relaxed);
                    if sessions.len() + opening >= self.options.max_sessions {
                        return full(StatusCode::SERVICE_UNAVAILABLE, "too many sessions\n");
                    }
                    self.opening
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                let id = format!("{:032x}", random_u128());
                let limits = self.config.limits;
                let client = Client::new(limits.max_queued_notifications);
                let s = Session::with_id(id, client, self.router.clone(), limits);
                if let Some(d) = &self.durable {
                    s.extend(crate::tasks::SessionTasks::new(d.clone())); // [tasks]
                }
                (s, true)
            }
            (None, _) => {
                return full(
                    StatusCode::BAD_REQUEST,
                    "no Mcp-Session-Id: send initialize first\n",
                );
            }
        };
        // Released however this request ends (answered, timed out, or the client gone).
        struct Opening<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Opening<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let _opening = new.then(|| Opening(&self.opening));
        // `initialize` is always answered with JSON: nothing relates to it, and the session
        // is kept only once its answer is known to be a success.
        let streamed = sse && !new;
        let waiting = match &parsed {
            Ok((Kind::Request, _, Some(id))) if streamed => {
                let cap = self.config.limits.max_queued_notifications;
                let stream = session.client.open_stream(id, cap);
                session.on_frame(crate::wire::framing::one_line(Frame::Line(
                    bytes::BytesMut::from(&body[..]),
                )));
                return post_stream(session, id.clone(), stream).await;
            }
            Ok((Kind::Request, _, Some(id))) => {
                Some((id.clone(), session.client.await_response(id)))
            }
            _ => None,
        };
        session.on_frame(crate::wire::framing::one_line(Frame::Line(
            bytes::BytesMut::from(&body[..]),
        )));
        let Some((id, rx)) = waiting else {
            return full(StatusCode::ACCEPTED, "");
        };
        // If the client goes away (hyper drops this future), the request is cancelled, as on
        // a stream (see `post_stream`): nobody could receive its answer.
        let mut guard = CancelUnlessAnswered {
            session: session.clone(),
            id,
            armed: true,
        };
        let answer = tokio::time::timeout(ANSWER_BOUND, rx).await;
        guard.disarm();
        let Ok(Ok(line)) = answer else {
            session.client.forget_response(&guard.id);
            return full(StatusCode::GATEWAY_TIMEOUT, "no answer\n");
        };
        // A session whose initialize failed is not kept: it would hold a slot for nothing.
        let failed = serde_json::from_slice::<serde_json::Value>(&line)
            .ok()
            .is_some_and(|v| v.get("error").is_some());
        let mut r = json_response(line);
        if new && !failed {
            if let Ok(v) = hyper::header::HeaderValue::from_str(&session.id) {
                r.headers_mut().insert("mcp-session-id", v);
            }
            self.sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(
                    session.id.clone(),
                    (session.clone(), tokio::time::Instant::now()),
                );
        }
        r
    }

    /// The session's own stream: every message queued for it, as server-sent events.
    fn stream(&self, session_id: Option<String>) -> Response<Body> {
        let Some(session) = session_id.and_then(|id| self.session(&id)) else {
            return full(StatusCode::NOT_FOUND, "no such session\n");
        };
        // One message in the channel at a time: when the client goes away, what could not be
        // delivered goes back to the queue for its next stream, not into a dead buffer.
        let (tx, rx) = mpsc::channel::<Bytes>(1);
        let out = session.client.out.clone();
        let stop = tokio_util::sync::CancellationToken::new();
        // A new stream replaces the old one (a reconnecting client).
        let previous = session
            .client
            .stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(stop.clone());
        if let Some(p) = previous {
            p.cancel();
        }
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    m = out.next_message() => m,
                    _ = stop.cancelled() => None,
                };
                let Some((line, notification)) = next else {
                    break;
                };
                let delivered = tokio::select! {
                    r = tx.send(sse_event(&line)) => r.is_ok(),
                    _ = stop.cancelled() => false,
                };
                if !delivered {
                    out.unpop(line, notification);
                    break;
                }
            }
        });
        sse_response(rx)
    }
}

/// Answers request `id` of a client that accepts server-sent events, from its own `stream`.
///
/// The answer's form is decided by what comes first: the response itself → one JSON body (a
/// quick answer costs no stream, and every client must take JSON); a message related to the
/// request (progress, a request from the server, a log) → a stream of events carrying it and
/// everything after, ending with the response. The official SDKs choose once per server
/// (`enableJsonResponse` / `json_response`, streams by default); choosing per answer gives a
/// client the stream exactly when there is something to put on it, so progress and the
/// server's requests reach clients that never open the session's `GET` stream.
///
/// A client that goes away before the response cancels the request, as if it had sent
/// `notifications/cancelled`: the spec asks servers not to read a disconnection as a cancel
/// so that a client can resume the stream by `Last-Event-ID`, but this front gives no event
/// ids (it keeps no history), so an answer nobody can receive would be work for nothing —
/// and a tool call running for no one is a side effect nobody sees.
async fn post_stream(session: Arc<Session>, id: String, stream: Arc<Outbound>) -> Response<Body> {
    let deadline = tokio::time::Instant::now() + ANSWER_BOUND;
    let mut guard = CancelUnlessAnswered {
        session,
        id,
        armed: true,
    };
    let first = tokio::time::timeout_at(deadline, stream.next_message()).await;
    let (line, related) = match first {
        Ok(Some(m)) => m,
        // Cancelled by the client, or the session ended: nothing will answer it.
        Ok(None) => {
            guard.disarm();
            return full(StatusCode::GATEWAY_TIMEOUT, "no answer\n");
        }
        Err(_) => {
            guard.disarm();
            guard.session.client.forget_response(&guard.id);
            return full(StatusCode::GATEWAY_TIMEOUT, "no answer\n");
        }
    };
    // Related messages are queued as notifications (capped); the response is not.
    if !related {
        // The response came first.
        guard.disarm();
        return json_response(line);
    }
    // One event in the channel at a time: the stream's own queue is the capped one.
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let _ = tx.try_send(sse_event(&line));
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                m = stream.next_message() => m,
                // The client went away (hyper dropped the body): the guard cancels.
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(deadline) => {
                    guard.disarm();
                    guard.session.client.forget_response(&guard.id);
                    return;
                }
            };
            let Some((line, related)) = next else {
                // Answered (the response was the last event), or cancelled by the client.
                guard.disarm();
                return;
            };
            if !related {
                guard.disarm(); // the response: the request is over either way
            }
            if tx.send(sse_event(&line)).await.is_err() {
                return;
            }
        }
    });
    sse_response(rx)
}

struct SseBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<BodyFrame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|b| b.map(|b| Ok(BodyFrame::data(b))))
    }
}

fn random_u128() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let mut out = 0u128;
    for _ in 0..2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        out = (out << 64) | u128::from(h.finish());
    }
    out
}

/// The W3C `traceparent` / `tracestate` headers of a POST, when traced (the request's `_meta`
/// then carries them to its span: `wire::trace_context::adopt`).
fn trace_header(h: &hyper::HeaderMap) -> Option<crate::wire::trace_context::TraceParent> {
    if !steadfast::trace::listening() {
        return None;
    }
    let tp = h.get("traceparent")?.to_str().ok()?;
    crate::wire::trace_context::valid(tp).then(|| crate::wire::trace_context::TraceParent {
        traceparent: tp.to_owned(),
        tracestate: h
            .get("tracestate")
            .and_then(|v| v.to_str().ok())
            .filter(|s| s.len() <= 512)
            .map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::accepts_sse;
    use hyper::header::HeaderValue;

    fn sse(accept: &'static str) -> bool {
        accepts_sse(Some(&HeaderValue::from_static(accept)))
    }

    #[test]
    fn streams_only_for_clients_that_list_event_streams() {
        assert!(sse("application/json, text/event-stream"));
        assert!(sse("text/event-stream;q=0.5 , application/json"));
        assert!(sse("Text/Event-Stream"));
        assert!(!sse("application/json"));
        assert!(!sse("*/*"), "curl's default gets JSON");
        assert!(!sse("application/json, text/event-stream; q=0"));
        assert!(!accepts_sse(None));
    }
}
