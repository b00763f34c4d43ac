//! `/mcp`'s routing: who may come in (bearer token, `Origin`), then POST (one message), GET
//! (the session's stream) and DELETE (end the session).

use super::answer::{ANSWER_BOUND, CancelUnlessAnswered};
use super::modern::ModernHeaders;
use super::sessions::end;
use super::sse::{accepts_sse, post_stream};
use super::*;
use crate::session::Reply;

fn loopback_origin(origin: &str) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    let host = rest.split(['/', ':']).next().unwrap_or("");
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

impl Front {
    pub(super) async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
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
        let identity = match super::super::auth::admit(
            self.auth.as_deref(),
            req.headers(),
            req.uri().path(),
            &self.options.tokens,
        )
        .await
        {
            Ok(identity) => identity,
            Err(refused) => return refused,
        };
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
        let session = match self.named_session(session_id.as_deref(), identity.as_ref()) {
            Ok(session) => session,
            Err(refused) => return *refused,
        };
        match (req.method().clone(), session) {
            (hyper::Method::POST, session) => self.post(session, identity, req).await,
            (hyper::Method::GET, Some(session)) => self.stream(session),
            (hyper::Method::DELETE, Some(session)) => {
                let gone = self
                    .sessions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&session.id);
                if gone.is_some() {
                    end(&session);
                }
                full(StatusCode::OK, "")
            }
            (hyper::Method::GET | hyper::Method::DELETE, None) => {
                full(StatusCode::NOT_FOUND, "no such session\n")
            }
            _ => full(StatusCode::METHOD_NOT_ALLOWED, "use POST, GET or DELETE\n"),
        }
    }

    /// The session a request names, checked against its token here, once, whatever the
    /// method: a leaked session id with another subject's token gets neither the session's
    /// stream (GET), nor its end (DELETE), nor its calls (POST). 404 for an unknown one.
    fn named_session(
        &self,
        id: Option<&str>,
        identity: Option<&Arc<crate::session::identity::Identity>>,
    ) -> Result<Option<Arc<Session>>, Box<Response<Body>>> {
        let Some(id) = id else { return Ok(None) };
        // Looked at without marking it used: a refused request must not keep another
        // subject's idle session alive.
        let found = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .map(|(s, _)| s.clone());
        let Some(s) = found else {
            return Err(Box::new(full(
                StatusCode::NOT_FOUND,
                "no such session: initialize again\n",
            )));
        };
        if let Some(refused) = super::super::auth::claim(self.auth.as_deref(), &s, identity, false)
        {
            return Err(Box::new(refused)); // [auth] another subject's session
        }
        // (Marked used now; ended meanwhile, it is still served as the request found it.)
        Ok(Some(self.session(id).unwrap_or(s)))
    }

    /// A POST to `existing` (the session it names, already claimed: `handle`) or to none.
    async fn post(
        self: &Arc<Self>,
        existing: Option<Arc<Session>>,
        identity: Option<Arc<crate::session::identity::Identity>>,
        req: Request<Incoming>,
    ) -> Response<Body> {
        let sse = accepts_sse(req.headers().get(hyper::header::ACCEPT));
        let trace = trace_header(req.headers());
        let modern_headers = ModernHeaders::of(req.headers(), sse);
        let body = match self.read_body(req, trace).await {
            Ok(b) => b,
            Err(too_large) => return too_large,
        };
        // Decoded here, once: the session is handed the decoded message (`Session::handle`),
        // and a modern client's params are decoded here for the front and the session alike.
        let (env, kind) = match Envelope::parse(&body) {
            Ok(x) => x,
            Err(malformed) => return bad_message(&body, &malformed),
        };
        let method = env.method.as_deref();
        let id = env.id.map(serde_json::value::RawValue::get);
        let modern = match existing {
            None => super::modern::modern_params(&env, &body),
            Some(_) => None,
        };
        let (session, new) = match (existing, kind, method) {
            (Some(s), ..) => (s, false),
            (None, MessageKind::Request, Some("initialize")) => match self.open_session(&body) {
                Some(s) => (s, true),
                None => return full(StatusCode::SERVICE_UNAVAILABLE, "too many sessions\n"),
            },
            // A modern client (MCP 2026-07-28): served on its own, no session.
            (None, kind, Some(m)) if modern.is_some() => {
                let (params, raw) = modern.unwrap_or_default();
                let message = super::modern::Message {
                    kind,
                    method: m.to_owned(),
                    id: id.map(str::to_owned),
                    params,
                    raw,
                };
                let body = body.clone();
                return self
                    .post_modern(&modern_headers, message, body, identity)
                    .await;
            }
            // Sent with a modern version's headers but without the `_meta` envelope.
            (None, kind, Some(m)) if modern_headers.is_modern() => {
                let message = super::modern::Message::unenveloped(kind, m, id, &env);
                let body = body.clone();
                return self
                    .post_modern(&modern_headers, message, body, identity)
                    .await;
            }
            (None, ..) => {
                return full(
                    StatusCode::BAD_REQUEST,
                    "no Mcp-Session-Id: send initialize first\n",
                );
            }
        };
        let _opening = new.then(|| Opening(&self.opening));
        let auth = self.auth.as_deref();
        if new && let Some(r) = super::super::auth::claim(auth, &session, identity.as_ref(), true) {
            return r; // (a new session takes the token's subject: never refused)
        }
        let asked = crate::session::identity::Asked {
            method: method.unwrap_or_default(),
            raw: env.params.map(serde_json::value::RawValue::get),
            decoded: None,
        };
        if let Some(r) = super::super::auth::scope_challenge(auth, identity.as_ref(), id, &asked) {
            return r; // [auth] a scope challenge
        }
        // `initialize` is always answered with JSON: nothing relates to it, and the session
        // is kept only once its answer is known to be a success.
        let streamed = sse && !new;
        match (kind, id) {
            (MessageKind::Request, Some(id)) if streamed => {
                let cap = self.config.limits.max_queued_notifications;
                let (reply, stream) = Reply::stream(cap);
                let id = id.to_owned();
                session.handle(&env, kind, &body, reply);
                post_stream(session, id, stream, json_response).await
            }
            (MessageKind::Request, Some(id)) => {
                let (reply, rx) = Reply::once();
                let id = id.to_owned();
                session.handle(&env, kind, &body, reply);
                self.answer(session, new, id, rx).await
            }
            _ => {
                // A notification or a response: nothing answers it.
                session.handle(&env, kind, &body, Reply::queue());
                full(StatusCode::ACCEPTED, "")
            }
        }
    }

    /// A POST's body, at most `max_request_size` bytes (413 otherwise; the cap on what clients
    /// send, as on the stdio front), with the trace
    /// headers' context adopted into its `_meta` when traced.
    async fn read_body(
        &self,
        req: Request<Incoming>,
        trace: Option<crate::wire::trace_context::TraceParent>,
    ) -> Result<Bytes, Response<Body>> {
        let max = self.config.limits.max_request_size;
        if waits_to_send_too_much(req.headers(), max) {
            // Refused before the client sends it: nothing to drain, no 100 Continue.
            return Err(too_large_message(max));
        }
        let mut body = req.into_body();
        // Chunks kept as they came (one chunk, the common case, is never copied).
        let mut chunks: Vec<Bytes> = Vec::new();
        let mut len = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Err(full(
                    StatusCode::BAD_REQUEST,
                    "the body could not be read\n",
                ));
            };
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            len = len.saturating_add(data.len());
            if len > max {
                return Err(too_large(body, max).await);
            }
            chunks.push(data);
        }
        let b = match chunks.len() {
            1 => chunks.pop().unwrap_or_default(),
            _ => Bytes::from(chunks.concat()),
        };
        let b = one_line(b);
        // (Rewritten only when traced and the header is set: `trace_header`.)
        Ok(
            match trace.and_then(|t| crate::wire::trace_context::adopt(&b, &t)) {
                Some(line) => Bytes::from(line),
                None => b,
            },
        )
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

/// How much of an oversized body is read and dropped at most, and for how long, before the 413.
const DRAIN_BYTES: usize = 64 * 1024 * 1024;
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// The 413 for a body over `max`, once the rest of it is read and dropped (at most
/// [`DRAIN_BYTES`], within [`DRAIN_TIME`]): a client that sends its whole body before reading
/// (as the SDKs do, without `Expect: 100-continue`) then reads the 413, where closing with its
/// bytes unread made the kernel reset the connection under it. Beyond the bound the connection
/// is closed after the answer (`Connection: close`).
async fn too_large(mut rest: Incoming, max: usize) -> Response<Body> {
    let drain = async {
        let mut left = DRAIN_BYTES;
        while let Some(frame) = rest.frame().await {
            let Ok(frame) = frame else { return false };
            let n = frame.data_ref().map_or(0, Bytes::len);
            let Some(l) = left.checked_sub(n) else {
                return false;
            };
            left = l;
        }
        true
    };
    let drained = tokio::time::timeout(DRAIN_TIME, drain)
        .await
        .unwrap_or(false);
    let mut r = too_large_message(max);
    if !drained {
        r.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    r
}

fn too_large_message(max: usize) -> Response<Body> {
    full(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the message exceeds max_request_size ({max} bytes)\n"),
    )
}

/// The request declares a body over `max` and waits for `100 Continue` before sending it.
fn waits_to_send_too_much(h: &hyper::HeaderMap, max: usize) -> bool {
    let expects = h
        .get(hyper::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let declared = h
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    expects && declared.is_some_and(|n| n > max as u64)
}

/// The answer to a POST whose body is no JSON-RPC message, as the SDKs' servers give it: 400
/// with a JSON-RPC error, `-32700` when the body is not JSON (truncated, say), `-32600` when it
/// is JSON but no message (`id` kept when it could be read). Whatever the era and whether a
/// session is named: a client reads the error where it awaits its answer.
fn bad_message(body: &[u8], malformed: &crate::wire::jsonrpc::Malformed) -> Response<Body> {
    use crate::wire::jsonrpc::{Malformed, error_response};
    let line = match (
        serde_json::from_slice::<serde::de::IgnoredAny>(body),
        malformed,
    ) {
        (Err(e), _) => error_response("null", -32700, &format!("Parse error: {e}")),
        (Ok(_), Malformed::Invalid { id, code, message }) => {
            error_response(id.as_deref().unwrap_or("null"), *code, message)
        }
        (Ok(_), Malformed::Batch(_)) => error_response(
            "null",
            -32600,
            "invalid request: batches are not allowed (MCP 2025-06-18 removed them)",
        ),
        (Ok(_), Malformed::NotJson) => error_response(
            "null",
            -32600,
            "invalid request: a JSON-RPC message is a JSON object",
        ),
    };
    let mut r = json_response(line);
    *r.status_mut() = StatusCode::BAD_REQUEST;
    r
}

/// The body with each raw CR and LF made a space (`wire::framing::one_line`): its params
/// are relayed as written, and a pretty-printed body would break a stdio upstream's framing.
/// Trailing whitespace (a client's final newline) is cut without a copy; a compact body, the
/// common case, is not copied at all.
fn one_line(b: Bytes) -> Bytes {
    let end = b.len()
        - b.iter()
            .rev()
            .take_while(|c| c.is_ascii_whitespace())
            .count();
    let b = b.slice(..end);
    let mut breaks = memchr::memchr2_iter(b'\n', b'\r', &b).peekable();
    if breaks.peek().is_none() {
        return b;
    }
    let mut line = bytes::BytesMut::from(&b[..]);
    for at in breaks {
        line[at] = b' ';
    }
    line.freeze()
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

#[cfg(test)]
mod tests {
    use super::one_line;
    use bytes::Bytes;

    #[test]
    fn a_body_is_one_line_and_a_compact_one_is_not_copied() {
        let compact = Bytes::from_static(b"{\"a\":1}");
        let same = one_line(compact.clone());
        assert_eq!(same.as_ptr(), compact.as_ptr(), "not copied");
        let trailing = one_line(Bytes::from_static(b"{\"a\":1}\r\n"));
        assert_eq!(&trailing[..], b"{\"a\":1}");
        let pretty = one_line(Bytes::from_static(b"{\n  \"a\": \"x\",\r\n  \"b\": 2\n}\n"));
        assert_eq!(&pretty[..], b"{   \"a\": \"x\",    \"b\": 2 }");
        assert!(one_line(Bytes::from_static(b" \n")).is_empty());
    }
}
