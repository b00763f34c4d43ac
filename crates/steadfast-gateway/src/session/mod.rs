//! One client session: every message the client sends, routed.
//!
//! Only `initialize`, `ping`, `tools/list`, `tools/call` and cancellation are acted on; every
//! other request and notification is relayed as it is, so methods the proxy does not know
//! (tasks, subscriptions, completions, vendor methods) keep working. Every request the client
//! sends is answered: by the server, by the proxy's own error when the server cannot answer in
//! time, or with a JSON-RPC error naming what was wrong with it.

pub(crate) mod client;
mod dispatch;
mod gather;
pub(crate) mod health;
pub(crate) mod identity;
mod in_flight;
pub(crate) mod input_required;
pub(crate) mod listen;
mod modern;
mod relay;
pub(crate) mod reply;
pub(crate) mod span;
pub(crate) mod tool_call;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::config::limits::SessionLimits;
use crate::route::router::Router;
use crate::session::client::Client;
use crate::upstream::Upstream;
use crate::wire::framing::Frame;
use crate::wire::jsonrpc::{self, Envelope, Malformed, MessageKind, code};
use crate::wire::outbound::Outbound;
pub(crate) use reply::Reply;

/// What an extension may change or take over in one session: the seam through which a feature
/// extends every session without the session naming it.
///
/// Durable tool calls (`tasks/`) hook into a session at a few points: the `initialize` result,
/// each `tools/list` page, a `tools/call` it may take over, methods it serves itself, and a
/// client's cancellation. The session owns this trait (here, beside [`Session`], which names it)
/// and calls it at those points; the extension (which sits above the session and may call back
/// into it) implements it, and the front installs one per session. With none installed each
/// hook costs one `OnceLock` read.
pub(crate) trait Extension: Send + Sync + 'static {
    /// The `initialize` result (raw JSON) the client is about to get, possibly amended.
    fn on_initialize(&self, session: &Session, params: &str, result: String) -> String;

    /// Amends one `tools/list` page; true when it changed it.
    fn on_tools_list(&self, session: &Session, page: &mut Value) -> bool;

    /// Whether this `tools/call` (decoded params) is the extension's to answer.
    fn claims_call(&self, session: &Session, params: &Value) -> bool;

    /// Answers a claimed `tools/call`; the line answering it.
    fn call<'a>(
        &'a self,
        session: &'a Arc<Session>,
        id: &'a str,
        params: Value,
    ) -> futures::future::BoxFuture<'a, Vec<u8>>;

    /// Whether the extension serves `method` itself.
    fn serves(&self, method: &str) -> bool;

    /// Answers a request for a method it serves; the line answering it.
    fn serve<'a>(
        &'a self,
        session: &'a Arc<Session>,
        id: &'a str,
        method: &'a str,
        params: Option<&'a str>,
    ) -> futures::future::BoxFuture<'a, Vec<u8>>;

    /// Amends the capabilities `server/discover` answers a modern client with.
    fn on_discover(&self, capabilities: &mut serde_json::Map<String, Value>) {
        let _ = capabilities;
    }

    /// The client cancelled its request `id` (raw JSON).
    fn on_cancelled(&self, session: &Arc<Session>, id: &str);
}

/// A client session over the endpoint's upstreams.
pub(crate) struct Session {
    /// This session's id (call limits count per session).
    pub id: String,
    /// The client's side.
    pub client: Arc<Client>,
    /// The upstreams, and which one each request goes to.
    pub router: Arc<Router>,
    /// Bounds.
    pub limits: SessionLimits,
    /// Cancelled when the session ends: its background watchers stop.
    pub(crate) closed: CancellationToken,
    /// Cancelled once `initialize` was answered with an error because no upstream can start:
    /// a stdio proxy then exits non-zero, as an MCP server that cannot start does.
    pub(crate) unstartable: CancellationToken,
    /// Upstreams this session waits for, to announce their lists when they come (one watcher
    /// each at most).
    pub(crate) watching: Mutex<std::collections::HashSet<usize>>,
    /// Set when this session's `initialize` is accepted (before its answer): requests after it
    /// wait for the upstreams rather than being refused, whatever the scheduling.
    initialized: AtomicBool,
    /// A session for one modern request (the HTTP front's): it never starts upstreams nor
    /// registers for their notifications.
    stateless: bool,
    /// The extension installed by the front (durable tool calls, when the config has
    /// durable tools), if any.
    extension: std::sync::OnceLock<Arc<dyn Extension>>,
    /// The requests in flight.
    in_flight: in_flight::InFlight,
    warned_garbage: AtomicBool,
    warned_unlisted: AtomicBool,
    /// The client, when the front identified it from a token (`identity.rs`).
    identity: Mutex<Option<Arc<identity::Identity>>>,
    /// The protocol version the client asked for in `initialize` (`mcp.protocol.version`).
    protocol: std::sync::OnceLock<Box<str>>,
    /// The client capabilities its `initialize` declared (handshake era).
    capabilities: std::sync::OnceLock<input_required::Caps>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

/// A request in flight, held by the task that serves it: answered through it, and removed
/// from the in-flight table however the task ends (unanswered, its [`Reply`] is dropped, and
/// the front hears it).
pub(crate) struct Registered {
    session: Arc<Session>,
    id: Arc<str>,
    serial: u64,
    reply: Option<Reply>,
}

impl Registered {
    /// The request's id (raw JSON), shared with the in-flight table.
    pub(crate) fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// Answers the request with `line`, then leaves the in-flight table.
    pub(crate) fn answer(mut self, line: Vec<u8>) {
        if let Some(r) = self.reply.take() {
            r.answer(&self.session.client, line);
        }
    }

    /// Like [`Registered::answer`], for an answer a peer can provoke at will (a refusal):
    /// capped on the client's queue ([`Reply::answer_capped`]).
    pub(crate) fn answer_capped(mut self, line: Vec<u8>) {
        if let Some(r) = self.reply.take() {
            r.answer_capped(&self.session.client, line);
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.session.in_flight.remove(&self.id, self.serial);
    }
}

impl Session {
    /// Installs the front's extension for this session (once; a second is ignored).
    pub(crate) fn extend(&self, extension: Arc<dyn Extension>) {
        let _ = self.extension.set(extension);
    }

    /// The installed extension, if any.
    pub(crate) fn extension(&self) -> Option<&Arc<dyn Extension>> {
        self.extension.get()
    }

    /// The `initialize` result as the extension amends it.
    pub(crate) fn extend_initialize(&self, params: &str, result: String) -> String {
        let result = handshake_result(params, result);
        match self.extension() {
            Some(x) => x.on_initialize(self, params, result),
            None => result,
        }
    }

    /// A `tools/list` page as the extension amends it; true when it changed it.
    pub(crate) fn extend_tools_list(&self, page: &mut Value) -> bool {
        self.extension()
            .is_some_and(|x| x.on_tools_list(self, page))
    }

    /// A session for `client` over `upstream`.
    pub(crate) fn new(
        client: Arc<Client>,
        router: Arc<Router>,
        limits: SessionLimits,
    ) -> Arc<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self::with_id(
            format!("stdio-{}-{nanos:x}", std::process::id()),
            client,
            router,
            limits,
        )
    }

    /// A session with a given id (the HTTP front's `Mcp-Session-Id`).
    pub(crate) fn with_id(
        id: String,
        client: Arc<Client>,
        router: Arc<Router>,
        limits: SessionLimits,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            client,
            router,
            limits,
            unstartable: CancellationToken::new(),
            closed: CancellationToken::new(),
            watching: Mutex::default(),
            initialized: AtomicBool::new(false),
            stateless: false,
            extension: std::sync::OnceLock::new(),
            in_flight: in_flight::InFlight::default(),
            warned_garbage: AtomicBool::new(false),
            warned_unlisted: AtomicBool::new(false),
            identity: Mutex::default(),
            protocol: std::sync::OnceLock::new(),
            capabilities: std::sync::OnceLock::new(),
        })
    }

    /// A session for one request of a modern client (MCP 2026-07-28) over HTTP: nothing of
    /// it outlives the request, and it starts no upstream (the front started them).
    pub(crate) fn stateless(
        id: String,
        client: Arc<Client>,
        router: Arc<Router>,
        limits: SessionLimits,
    ) -> Arc<Self> {
        let mut s = Self::with_id(id, client, router, limits);
        if let Some(s) = Arc::get_mut(&mut s) {
            s.stateless = true;
        }
        s
    }

    /// The first upstream (the only one unless several are configured); its settings are
    /// every upstream's.
    pub(crate) fn upstream(&self) -> Arc<Upstream> {
        self.router.first().upstream.clone()
    }

    /// An error answer a peer can provoke at will (capped on the queue: `Reply::answer_capped`).
    fn refuse(&self, reply: Reply, id: &str, code: i64, message: &str) {
        reply.answer_capped(&self.client, jsonrpc::error_response(id, code, message));
    }

    /// A refusal with a prepared error object (raw JSON), capped like [`Session::refuse`].
    fn refuse_raw(&self, reply: Reply, id: &str, error: &str) {
        reply.answer_capped(&self.client, jsonrpc::raw_error_response(id, error));
    }

    /// Whether a request is of a modern client (MCP 2026-07-28): `server/discover`, or params
    /// whose `_meta` carries a protocol version (looked for in the text before any parse).
    fn is_modern_request(env: &Envelope<'_>, method: &str) -> bool {
        if method == crate::wire::era::DISCOVER {
            return true;
        }
        let raw = env.params.map(RawValue::get);
        method != "initialize"
            && crate::wire::era::may_be_modern(raw)
            && raw
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .is_some_and(|p| crate::wire::era::is_modern(&p))
    }

    /// Keeps the client's `protocolVersion` for the spans (`span.rs`).
    fn remember_protocol(&self, params: &str) {
        #[derive(serde::Deserialize)]
        struct Init<'a> {
            #[serde(rename = "protocolVersion", borrow)]
            protocol_version: Option<std::borrow::Cow<'a, str>>,
        }
        if let Ok(Init {
            protocol_version: Some(v),
        }) = serde_json::from_str(params)
        {
            let _ = self.protocol.set(protocol_text(&v));
        }
        // What a modern upstream's input requests may be put to this client as requests.
        let _ = self
            .capabilities
            .set(input_required::Caps::of_initialize(params));
    }

    /// The capabilities the client declared in `initialize` (none before it).
    pub(crate) fn handshake_capabilities(&self) -> input_required::Caps {
        self.capabilities.get().copied().unwrap_or_default()
    }

    /// The protocol version the client's `initialize` asked for, if known.
    pub(crate) fn protocol_version(&self) -> Option<&str> {
        self.protocol.get().map(|v| &**v)
    }

    /// Requests in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Resolves once no request is in flight (at once if none is): the requests read so far
    /// have their answers queued.
    pub(crate) async fn drained(&self) {
        self.in_flight.drained().await;
    }

    /// Cancels every request in flight (the client went away): their upstream requests are
    /// cancelled as their tasks drop them, and fronts awaiting their answers stop waiting as
    /// the tasks drop their replies.
    pub(crate) fn cancel_all(&self) {
        self.closed.cancel();
        self.in_flight.cancel_all();
    }

    /// Cancels the client's request `id` (raw JSON) if it is in flight: it is not answered
    /// (MCP), its upstream request is cancelled as its task drops it, and a front waiting for
    /// it stops waiting (the task drops its [`Reply`]).
    pub(crate) fn cancel_request(&self, id: &str) {
        self.in_flight.cancel(id);
    }

    /// The own stream of request `id` in flight (an HTTP POST answered with server-sent
    /// events), if it has one: its progress and the server's related requests go there.
    pub(crate) fn request_stream(&self, id: &str) -> Option<Arc<Outbound>> {
        self.in_flight.stream(id)
    }

    /// Handles one frame from the client (the stdio front): its answers go on the client's
    /// queue.
    pub(crate) fn on_frame(self: &Arc<Self>, frame: Frame) {
        match frame {
            Frame::Line(line) => self.on_line(&line),
            Frame::TooLarge { head, len, .. } => {
                let max = self.limits.max_request_size;
                tracing::warn!(
                    bytes = len,
                    max,
                    "a message from the client exceeds [proxy] max_request_size; skipped"
                );
                if let Some(id) = jsonrpc::scan_id(&head) {
                    self.refuse(
                        Reply::queue(),
                        &id,
                        code::TOO_LARGE,
                        &format!(
                            "the message ({len} bytes) exceeds [proxy] max_request_size ({max} bytes)"
                        ),
                    );
                }
            }
        }
    }

    fn on_line(self: &Arc<Self>, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let (env, kind) = match Envelope::parse(line) {
            Ok(x) => x,
            Err(Malformed::NotJson) => {
                if !self.warned_garbage.swap(true, Ordering::Relaxed) {
                    tracing::debug!("ignored a line from the client that is not JSON-RPC");
                }
                return;
            }
            Err(Malformed::Invalid {
                id: Some(id),
                code,
                message,
            }) => return self.refuse(Reply::queue(), &id, code, &message),
            Err(Malformed::Invalid {
                id: None, message, ..
            }) => {
                tracing::debug!(%message, "ignored an invalid message without an id");
                return;
            }
            Err(Malformed::Batch(ids)) => {
                for id in ids {
                    self.refuse(
                        Reply::queue(),
                        &id,
                        code::INVALID_REQUEST,
                        "invalid request: JSON-RPC batches are not part of MCP (since 2025-06-18)",
                    );
                }
                return;
            }
        };
        self.handle(&env, kind, line, Reply::queue());
    }

    /// Handles one message the front decoded (`env`, of `kind`, read from `line`): a request
    /// is answered to `reply`; a notification or a response has no answer (`reply` is
    /// dropped). The one entry of every front: nothing below decodes the message again.
    pub(crate) fn handle(
        self: &Arc<Self>,
        env: &Envelope<'_>,
        kind: MessageKind,
        line: &[u8],
        reply: Reply,
    ) {
        match kind {
            MessageKind::Request => self.on_request(env, reply),
            MessageKind::Notification => self.on_notification(env, line),
            MessageKind::Response => {
                if let Some(id) = env.id {
                    self.client.answer_server(id.get(), env.result, env.error);
                }
            }
        }
    }

    /// Enters request `id` (`asked`) in the in-flight table, its answer to go to `reply`;
    /// `None` (and `reply` answered with the refusal) when the token's access policy forbids
    /// it, the table is full, or the id is in flight. Every request served by a task of its own
    /// passes here, whatever its era or front: the policy's one place (`identity.rs`).
    fn register(
        self: &Arc<Self>,
        id: &str,
        asked: &identity::Asked<'_>,
        reply: Reply,
    ) -> Option<(CancellationToken, Registered)> {
        if let Some(forbidden) = self.refusal(id, asked) {
            reply.answer_capped(&self.client, forbidden);
            return None;
        }
        let max = self.limits.max_in_flight;
        let ticket = match self
            .in_flight
            .enter(id, reply.request_stream().cloned(), max)
        {
            Ok(t) => t,
            Err(in_flight::Full::Table(max)) => {
                let why = format!(
                    "too many requests in flight (max_in_flight = {max}); retry after some complete"
                );
                self.refuse(reply, id, code::OVERLOADED, &why);
                return None;
            }
            Err(in_flight::Full::SameId) => {
                self.refuse(
                    reply,
                    id,
                    code::INVALID_REQUEST,
                    "invalid request: a request with this id is already in flight",
                );
                return None;
            }
        };
        let registered = Registered {
            session: self.clone(),
            id: ticket.id,
            serial: ticket.serial,
            reply: Some(reply),
        };
        Some((ticket.cancel, registered))
    }
}

/// An `initialize` result for a handshake-era client: when the upstream speaks MCP 2026-07-28
/// its version means nothing to this client, which gets the handshake revision it asked for
/// (or the newest the gateway serves).
fn handshake_result(params: &str, result: String) -> String {
    use crate::wire::era;
    if !era::MODERN_VERSIONS
        .iter()
        .any(|v| result.contains(&format!("\"{v}\"")))
    {
        return result;
    }
    let Ok(mut v) = serde_json::from_str::<Value>(&result) else {
        return result;
    };
    let modern = v
        .get("protocolVersion")
        .and_then(Value::as_str)
        .is_some_and(|p| era::MODERN_VERSIONS.contains(&p));
    if !modern {
        return result;
    }
    let asked = serde_json::from_str::<Value>(params).ok();
    let asked = asked
        .as_ref()
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    v["protocolVersion"] = Value::String(era::handshake_version_for(asked).to_owned());
    v.to_string()
}

/// The raw progress token in a request's params, if it asks for progress.
pub(crate) fn progress_token(params: &str) -> Option<String> {
    let v: Value = serde_json::from_str(params).ok()?;
    v.pointer("/_meta/progressToken").map(Value::to_string)
}

/// A client's protocol version as the spans keep it: at most 32 characters (the client's text).
pub(crate) fn protocol_text(v: &str) -> Box<str> {
    let end = v.char_indices().nth(32).map_or(v.len(), |(i, _)| i);
    v[..end].into()
}
