//! `/mcp`'s routing: who may come in (bearer token, `Origin`), then POST (one message), GET
//! (the session's stream) and DELETE (end the session).

use super::modern::ModernHeaders;
use super::sessions::end;
use super::sse::{accepts_sse, post_stream};
use super::*;

/// The credentials of an `Authorization` header with the `Bearer` scheme, which is
/// case-insensitive (RFC 9110 §11.1).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

/// Constant-time equality, so a token cannot be guessed byte by byte from timings.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// How long a POST waits for its answer at most: a tool call is bounded by its own policy;
/// this only keeps a lost answer from holding the connection for ever.
pub(super) const ANSWER_BOUND: Duration = Duration::from_secs(600);

/// Cancels the client's request when dropped armed: its POST went away before the answer
/// (hyper drops the handler's future, or the stream's body, when the connection closes).
pub(super) struct CancelUnlessAnswered {
    pub(super) session: Arc<Session>,
    pub(super) id: String,
    pub(super) armed: bool,
}

impl CancelUnlessAnswered {
    /// The request is over (answered, cancelled, or given up): nothing to cancel.
    pub(super) fn disarm(&mut self) {
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
    /// Who may come in: `None` lets the request through, `Some` is the refusal to send.
    /// The one place an authentication scheme hooks in.
    fn authorize(&self, req: &Request<Incoming>) -> Option<Response<Body>> {
        if self.options.tokens.is_empty() {
            return None;
        }
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
            return Some(r);
        }
        None
    }

    pub(super) async fn handle(self: Arc<Self>, mut req: Request<Incoming>) -> Response<Body> {
        if let Some(r) = self
            .auth
            .as_ref()
            .and_then(|a| a.well_known(req.uri().path()))
        {
            return r; // [auth] Protected Resource Metadata
        }
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
        let authorized =
            match super::super::auth::guard(self.auth.as_deref(), &mut req, &self.options.tokens)
                .await
            {
                Ok(done) => done,
                Err(refused) => return refused,
            };
        if !authorized && let Some(refused) = self.authorize(&req) {
            return refused;
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

    async fn post(
        self: &Arc<Self>,
        session_id: Option<String>,
        mut req: Request<Incoming>,
    ) -> Response<Body> {
        let sse = accepts_sse(req.headers().get(hyper::header::ACCEPT));
        let identity = req.extensions_mut().remove(); // [auth]
        let trace = trace_header(req.headers());
        let modern_headers = ModernHeaders::of(req.headers(), sse);
        let body = match self.read_body(req.into_body(), trace).await {
            Ok(b) => b,
            Err(too_large) => return too_large,
        };
        // A modern client's request is decoded here, once (`modern_params`).
        let mut modern = None;
        let parsed = Envelope::parse(&body).map(|(env, kind)| {
            if session_id.is_none() {
                modern = super::modern::modern_params(&env, &body);
            }
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
            (None, Ok((MessageKind::Request, Some(m), _))) if m == "initialize" => {
                match self.open_session(&body) {
                    Some(s) => (s, true),
                    None => return full(StatusCode::SERVICE_UNAVAILABLE, "too many sessions\n"),
                }
            }
            // A modern client (MCP 2026-07-28): served on its own, no session.
            (None, Ok((kind, Some(m), id))) if modern.is_some() => {
                let (kind, m, id) = (*kind, m.clone(), id.clone());
                let (params, raw) = modern.unwrap_or_default();
                let message = super::modern::Message {
                    kind,
                    method: m,
                    id,
                    params,
                    raw,
                };
                return self
                    .post_modern(&modern_headers, message, body, identity)
                    .await;
            }
            (None, _) => {
                return full(
                    StatusCode::BAD_REQUEST,
                    "no Mcp-Session-Id: send initialize first\n",
                );
            }
        };
        let _opening = new.then(|| Opening(&self.opening));
        if let Some(r) = super::super::auth::bind(self.auth.as_deref(), &session, identity, &body) {
            return r; // [auth] another subject's session, or a scope challenge
        }
        // `initialize` is always answered with JSON: nothing relates to it, and the session
        // is kept only once its answer is known to be a success.
        let streamed = sse && !new;
        match &parsed {
            Ok((MessageKind::Request, _, Some(id))) if streamed => {
                let cap = self.config.limits.max_queued_notifications;
                let stream = session.client.open_stream(id, cap);
                session.on_frame(crate::wire::framing::one_line(Frame::Line(
                    bytes::BytesMut::from(&body[..]),
                )));
                post_stream(session, id.clone(), stream, json_response).await
            }
            Ok((MessageKind::Request, _, Some(id))) => {
                let rx = session.client.await_response(id);
                session.on_frame(crate::wire::framing::one_line(Frame::Line(
                    bytes::BytesMut::from(&body[..]),
                )));
                self.answer(session, new, id.clone(), rx).await
            }
            _ => {
                session.on_frame(crate::wire::framing::one_line(Frame::Line(
                    bytes::BytesMut::from(&body[..]),
                )));
                full(StatusCode::ACCEPTED, "")
            }
        }
    }

    /// A POST's body, at most `max_message_size` bytes (413 otherwise), with the trace
    /// headers' context adopted into its `_meta` when traced.
    async fn read_body(
        &self,
        body: Incoming,
        trace: Option<crate::wire::trace_context::TraceParent>,
    ) -> Result<Bytes, Response<Body>> {
        let max = self.config.upstream_settings().max_message_size;
        match Limited::new(body, max).collect().await {
            Ok(b) => {
                let b = b.to_bytes();
                // (Rewritten only when traced and the header is set: `trace_header`.)
                Ok(
                    match trace.and_then(|t| crate::wire::trace_context::adopt(&b, &t)) {
                        Some(line) => Bytes::from(line),
                        None => b,
                    },
                )
            }
            Err(_) => Err(full(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the message exceeds max_message_size ({max} bytes)\n"),
            )),
        }
    }

    /// A session for an `initialize` without one (`body`), counted against `max_sessions`
    /// until its answer (release with [`Opening`]); `None` when the sessions are full. Its
    /// upstream connections are those started with the capabilities it declares.
    fn open_session(&self, body: &[u8]) -> Option<Arc<Session>> {
        {
            // The check and the reservation under one lock: concurrent initializes cannot all
            // pass it.
            let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let opening = self.opening.load(std::sync::atomic::Ordering::Relaxed);
            if sessions.len() + opening >= self.options.max_sessions {
                return None;
            }
            self.opening
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let id = crate::wire::secret_id::random_hex();
        let limits = self.config.limits;
        let client = Client::new(limits.max_queued_notifications);
        let caps = crate::route::router::of_initialize(body);
        let s = Session::with_id(id, client, self.router.for_capabilities(&caps), limits);
        if let Some(d) = &self.durable {
            s.extend(crate::tasks::SessionTasks::new(d.clone())); // [tasks]
        }
        Some(s)
    }

    /// The JSON answer to request `id` (its answer is awaited on `rx`); a new session whose
    /// `initialize` succeeded is kept and named in `Mcp-Session-Id`.
    async fn answer(
        &self,
        session: Arc<Session>,
        new: bool,
        id: String,
        rx: tokio::sync::oneshot::Receiver<Vec<u8>>,
    ) -> Response<Body> {
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
        // (Only an initialize's answer is read; others are relayed as they are.)
        let failed = new
            && serde_json::from_slice::<serde_json::Value>(&line)
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
}

/// An `initialize` under way, counted against `max_sessions` until this is dropped (answered,
/// timed out, or the client gone).
struct Opening<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
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
