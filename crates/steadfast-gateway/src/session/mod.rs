//! One client session: every message the client sends, routed.
//!
//! Only `initialize`, `ping`, `tools/list`, `tools/call` and cancellation are acted on; every
//! other request and notification is relayed as it is, so methods the proxy does not know
//! (tasks, subscriptions, completions, vendor methods) keep working. Every request the client
//! sends is answered: by the server, by the proxy's own error when the server cannot answer in
//! time, or with a JSON-RPC error naming what was wrong with it.

pub mod client;
pub(crate) mod extension;
mod gather;
pub mod health;
pub mod identity;
mod modern;
pub(crate) mod span;
pub mod tool_call;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::config::limits::Limits;
use crate::route::router::{Route, Router};
use crate::route::tools::Tools;
use crate::session::client::Client;
use crate::upstream::{Params, Reply, Upstream};
use crate::wire::call_params::CallParams;
use crate::wire::framing::Frame;
use crate::wire::jsonrpc::{self, Envelope, Kind, Malformed, code};

/// A client session over the endpoint's upstreams.
pub struct Session {
    /// This session's id (call limits count per session).
    pub id: String,
    /// The client's side.
    pub client: Arc<Client>,
    /// The upstreams, and which one each request goes to.
    pub router: Arc<Router>,
    /// Bounds.
    pub limits: Limits,
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
    extension: std::sync::OnceLock<Arc<dyn crate::session::extension::Extension>>,
    /// Requests in flight by client id: a serial (so a finished task never removes a newer
    /// request that reused its id) and the request's cancellation.
    /// (Keyed by the id shared with the request's task: one allocation per request. Ids are
    /// the client's, so the hasher stays a keyed one.)
    in_flight: Mutex<HashMap<Arc<str>, (u64, CancellationToken), foldhash::fast::RandomState>>,
    serial: std::sync::atomic::AtomicU64,
    warned_garbage: AtomicBool,
    warned_unlisted: AtomicBool,
    /// The client, when the front identified it from a token (`identity.rs`).
    identity: Mutex<Option<Arc<identity::Identity>>>,
    /// The protocol version the client asked for in `initialize` (`mcp.protocol.version`).
    protocol: std::sync::OnceLock<Box<str>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

/// The in-flight table's capacity above which an emptied table is shrunk (and the heap
/// trimmed). Below it the table is kept: a client that keeps ~100 calls in flight empties it
/// now and then, and shrinking it each time made it grow again (five rehashes per cycle, a
/// few percent of the proxy's work per call at 64 in flight). Kept, it is a few KiB.
const SHRINK_ABOVE: usize = 256;

/// Removes a request from the in-flight table however its task ends.
struct Registered {
    session: Arc<Session>,
    id: Arc<str>,
    serial: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut map = self
            .session
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if map
            .get(&*self.id)
            .is_some_and(|(serial, _)| *serial == self.serial)
        {
            map.remove(&*self.id);
            metrics::gauge!("steadfast_requests_in_flight").decrement(1.0);
        }
        if map.is_empty() && map.capacity() > SHRINK_ABOVE {
            // A burst is over: give its memory back rather than keep the high-water mark.
            map.shrink_to_fit();
            drop(map);
            crate::wire::memory::release();
        }
    }
}

impl Session {
    /// Installs the front's extension for this session (once; a second is ignored).
    pub(crate) fn extend(&self, extension: Arc<dyn crate::session::extension::Extension>) {
        let _ = self.extension.set(extension);
    }

    /// The installed extension, if any.
    pub(crate) fn extension(&self) -> Option<&Arc<dyn crate::session::extension::Extension>> {
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
    pub fn new(client: Arc<Client>, router: Arc<Router>, limits: Limits) -> Arc<Self> {
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
    pub fn with_id(
        id: String,
        client: Arc<Client>,
        router: Arc<Router>,
        limits: Limits,
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
            in_flight: Mutex::default(),
            serial: std::sync::atomic::AtomicU64::new(0),
            warned_garbage: AtomicBool::new(false),
            warned_unlisted: AtomicBool::new(false),
            identity: Mutex::default(),
            protocol: std::sync::OnceLock::new(),
        })
    }

    /// A session for one request of a modern client (MCP 2026-07-28) over HTTP: nothing of
    /// it outlives the request, and it starts no upstream (the front started them).
    pub fn stateless(
        id: String,
        client: Arc<Client>,
        router: Arc<Router>,
        limits: Limits,
    ) -> Arc<Self> {
        let mut s = Self::with_id(id, client, router, limits);
        if let Some(s) = Arc::get_mut(&mut s) {
            s.stateless = true;
        }
        s
    }

    /// The first upstream (the only one unless several are configured).
    pub fn upstream(&self) -> Arc<Upstream> {
        self.router.first().upstream.clone()
    }

    /// The first upstream's tool state; its config is every route's.
    pub fn tools(&self) -> Arc<Tools> {
        self.router.first().tools.clone()
    }

    /// An error answer a peer can provoke at will (capped on the queue; see `respond_capped`).
    fn refuse(&self, id: &str, code: i64, message: &str) {
        self.client
            .respond_capped(id, jsonrpc::error_response(id, code, message));
    }

    /// A refusal with a prepared error object (raw JSON), capped like [`Session::refuse`].
    fn refuse_raw(&self, id: &str, error: &str) {
        self.client
            .respond_capped(id, jsonrpc::raw_error_response(id, error));
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

    pub(crate) fn reply_error(&self, id: &str, code: i64, message: &str) {
        self.client
            .respond(id, jsonrpc::error_response(id, code, message));
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
            let _ = self
                .protocol
                .set(v.chars().take(32).collect::<String>().into());
        }
    }

    /// The protocol version the client's `initialize` asked for, if known.
    pub(crate) fn protocol_version(&self) -> Option<&str> {
        self.protocol.get().map(|v| &**v)
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Cancels every request in flight (the client went away): their upstream requests are
    /// cancelled as their tasks drop them.
    pub fn cancel_all(&self) {
        self.closed.cancel();
        let drained: Vec<CancellationToken> = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, (_, ct))| ct)
            .collect();
        metrics::gauge!("steadfast_requests_in_flight").decrement(drained.len() as f64);
        for ct in drained {
            ct.cancel();
        }
    }

    /// Cancels the client's request `id` (raw JSON) if it is in flight: it is not answered
    /// (MCP), its upstream request is cancelled as its task drops it, and a front waiting for
    /// it stops waiting.
    pub fn cancel_request(&self, id: &str) {
        let ct = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        if let Some((_, ct)) = ct {
            metrics::gauge!("steadfast_requests_in_flight").decrement(1.0);
            ct.cancel();
        }
        self.client.forget_response(id);
    }

    /// Handles one frame from the client.
    pub fn on_frame(self: &Arc<Self>, frame: Frame) {
        match frame {
            Frame::Line(line) => self.on_line(&line),
            Frame::TooLarge { head, len, .. } => {
                tracing::warn!(
                    bytes = len,
                    "a message from the client exceeds max_message_size"
                );
                if let Some(id) = jsonrpc::scan_id(&head) {
                    self.refuse(
                        &id,
                        code::TOO_LARGE,
                        &format!(
                            "the message ({len} bytes) exceeds max_message_size ({} bytes)",
                            self.upstream().settings().max_message_size
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
            }) => return self.refuse(&id, code, &message),
            Err(Malformed::Invalid {
                id: None, message, ..
            }) => {
                tracing::debug!(%message, "ignored an invalid message without an id");
                return;
            }
            Err(Malformed::Batch(ids)) => {
                for id in ids {
                    self.refuse(
                        &id,
                        code::INVALID_REQUEST,
                        "invalid request: JSON-RPC batches are not part of MCP (since 2025-06-18)",
                    );
                }
                return;
            }
        };
        match kind {
            Kind::Request => self.on_request(&env),
            Kind::Notification => self.on_notification(&env, line),
            Kind::Response => {
                if let Some(id) = env.id {
                    self.client.answer_server(id.get(), env.result, env.error);
                }
            }
        }
    }

    fn register(self: &Arc<Self>, id: &str) -> Option<(CancellationToken, Registered)> {
        let mut map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= self.limits.max_in_flight {
            drop(map);
            self.refuse(
                id,
                code::OVERLOADED,
                &format!(
                    "too many requests in flight (max_in_flight = {}); retry after some complete",
                    self.limits.max_in_flight
                ),
            );
            return None;
        }
        if map.contains_key(id) {
            drop(map);
            self.refuse(
                id,
                code::INVALID_REQUEST,
                "invalid request: a request with this id is already in flight",
            );
            return None;
        }
        let ct = CancellationToken::new();
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        let id: Arc<str> = id.into();
        map.insert(id.clone(), (serial, ct.clone()));
        metrics::gauge!("steadfast_requests_in_flight").increment(1.0);
        Some((
            ct,
            Registered {
                session: self.clone(),
                id,
                serial,
            },
        ))
    }

    fn on_request(self: &Arc<Self>, env: &Envelope<'_>) {
        let id = env.id.map(RawValue::get).unwrap_or("null");
        let method = env.method.as_deref().unwrap_or_default();
        // A stateless session serves only modern requests the HTTP front checked: no second
        // look at the params.
        if self.stateless || Self::is_modern_request(env, method) {
            return self.on_modern_request(env);
        }
        match method {
            "ping" => self
                .client
                .respond_capped(id, jsonrpc::result_response(id, "{}")),
            "initialize" => {
                let Some((_, reg)) = self.register(id) else {
                    return;
                };
                self.initialized.store(true, Ordering::Release);
                let params = env.params.map_or("{}", RawValue::get).to_owned();
                self.remember_protocol(&params);
                let me = self.clone();
                let id = reg.id.clone();
                tokio::spawn(async move {
                    let _reg = reg;
                    if me.router.is_namespaced() {
                        me.initialize_all(&id, &params).await;
                    } else {
                        me.initialize(&id, &params).await;
                    }
                });
            }
            _ if !self.initialized.load(Ordering::Acquire) => self.refuse(
                id,
                code::INVALID_REQUEST,
                "the session is not initialized: send initialize first",
            ),
            // The token's access policy (`identity.rs`): answered here when it forbids.
            _ if self.refuses(id, method, env.params.map(RawValue::get)) => {}
            "tools/call" => {
                let Some((ct, reg)) = self.register(id) else {
                    return;
                };
                // Decoded only when something must read or rewrite them; checked either way.
                let decode = self.router.is_namespaced();
                let parsed = env.params.map(|p| CallParams::parse(p.get(), decode));
                let params = match parsed {
                    Some(Ok(Some(p))) => p,
                    Some(Err(e)) => {
                        drop(reg);
                        return self.refuse(
                            id,
                            code::INVALID_PARAMS,
                            &format!("invalid params: {e}"),
                        );
                    }
                    _ => {
                        drop(reg);
                        return self.refuse(
                            id,
                            code::INVALID_PARAMS,
                            "invalid params: tools/call needs params with a tool name (a string)",
                        );
                    }
                };
                let me = self.clone();
                let id = reg.id.clone();
                // A call the extension claims (a task-augmented call to a durable tool: a task
                // handle at once). (Params with a `task` member are always decoded.)
                let claimed = match &params {
                    CallParams::Value(v) => self.extension().filter(|x| x.claims_call(self, v)),
                    CallParams::Raw { .. } => None,
                };
                let params = match (claimed.cloned(), params) {
                    (Some(x), CallParams::Value(params)) => {
                        tokio::spawn(async move {
                            let _reg = reg;
                            // In its SERVER span: the task stores that span's context.
                            let traced = span::request(&me, &id, "tools/call", Some(&params));
                            let line =
                                span::answered(traced, "tools/call", x.call(&me, &id, params))
                                    .await;
                            me.client.respond(&id, line);
                        });
                        return;
                    }
                    (_, params) => params,
                };
                // Boxed: the call's future is large, and spawning moved it through the runtime's
                // layers four times; a pointer moves cheaply.
                tokio::spawn(Box::pin(async move {
                    let _reg = reg;
                    if let Some(line) = crate::session::tool_call::run(&me, &id, params, &ct).await
                    {
                        me.client.respond(&id, line);
                    }
                }));
            }
            _ => {
                let Some((ct, reg)) = self.register(id) else {
                    return;
                };
                let me = self.clone();
                let id = reg.id.clone();
                let method = method.to_owned();
                let params = env.params.map(|p| p.get().to_owned());
                // Methods the extension serves (tasks/* from the durable store while it is open).
                let ours = self.extension().filter(|x| x.serves(&method)).cloned();
                tokio::spawn(async move {
                    let _reg = reg;
                    let answer = async {
                        match &ours {
                            Some(x) => x.serve(&me, &id, &method, params.as_deref()).await,
                            None => me.forward(&id, &method, params.as_deref()).await,
                        }
                    };
                    let answer = span::serve(&me, &id, &method, params.as_deref(), answer);
                    tokio::select! {
                        line = answer => me.client.respond(&id, me.filter_list(&method, line)),
                        // A cancelled request is not answered (MCP); dropping the forward
                        // cancels it upstream.
                        _ = ct.cancelled() => {}
                    }
                });
            }
        }
    }

    async fn initialize(self: &Arc<Self>, id: &str, params: &str) {
        let (upstream, tools) = (self.upstream(), self.tools());
        self.router.start(params, self.client.clone());
        let bound = upstream.settings().init_timeout;
        match upstream.wait_connected(bound).await {
            Ok(()) => {
                let config = self.router.config();
                if let Some(h) = config.health_tool.as_deref().filter(|h| upstream.lists(h)) {
                    return self.reply_error(
                        id,
                        code::INVALID_REQUEST,
                        &format!(
                            "[proxy] health_tool = \"{h}\" is also the name of one of the \
                             upstream's tools; rename the health tool"
                        ),
                    );
                }
                // Breakers exist from the start for every listed tool, so a shared one hears
                // of an outage another replica saw before this one calls the tool.
                for name in upstream.listed_names() {
                    tools.entry(&name, true);
                }
                if !self.warned_unlisted.swap(true, Ordering::Relaxed) {
                    for name in config.exact_tool_names() {
                        if !upstream.lists(name) {
                            tracing::warn!(
                                tool = name,
                                "the config sets a policy for a tool the upstream does not list"
                            );
                        }
                    }
                }
                let result = upstream.init_result().unwrap_or_else(|| "{}".to_owned());
                let result = self.adjust_init_result(result);
                let result = self.extend_initialize(params, result);
                self.client
                    .respond(id, jsonrpc::result_response(id, &result));
                self.client.mark_initialized();
            }
            Err(why) if upstream.is_down() => {
                self.reply_error(
                    id,
                    code::UPSTREAM_UNAVAILABLE,
                    &format!(
                        "the upstream server ({}) could not be started: {}",
                        upstream.describe(),
                        steadfast::sanitize(&why)
                    ),
                );
                self.unstartable.cancel();
            }
            Err(why) => self.reply_error(
                id,
                code::UPSTREAM_UNAVAILABLE,
                &format!(
                    "the upstream server ({}) did not complete its handshake within {:?}: {}",
                    upstream.describe(),
                    bound,
                    steadfast::sanitize(&why)
                ),
            ),
        }
    }

    /// The server's own `initialize` result, with the tools capability added when only the
    /// health tool provides tools.
    fn adjust_init_result(&self, result: String) -> String {
        if self.router.config().health_tool.is_none() || result.contains("\"tools\"") {
            return result;
        }
        match serde_json::from_str::<Value>(&result) {
            Ok(mut v) => {
                if let Some(caps) = v.get_mut("capabilities").and_then(Value::as_object_mut) {
                    caps.entry("tools")
                        .or_insert_with(|| Value::Object(Default::default()));
                }
                v.to_string()
            }
            Err(_) => result,
        }
    }

    /// Forwards a request and returns the line that answers it.
    pub(crate) async fn forward(
        self: &Arc<Self>,
        id: &str,
        method: &str,
        params: Option<&str>,
    ) -> Vec<u8> {
        if self.router.is_namespaced() {
            return self.dispatch(id, method, params).await;
        }
        let route = self.router.first();
        self.forward_to(&route, id, method, params).await
    }

    /// Forwards a request to one upstream and returns the line that answers it.
    pub(crate) async fn forward_to(
        self: &Arc<Self>,
        route: &Route,
        id: &str,
        method: &str,
        params: Option<&str>,
    ) -> Vec<u8> {
        let upstream = &route.upstream;
        let link = match upstream.link().await {
            Ok(l) => l,
            Err(why) => {
                return jsonrpc::error_response(
                    id,
                    code::UPSTREAM_UNAVAILABLE,
                    &steadfast::sanitize(&why),
                );
            }
        };
        // The request's own stream (an HTTP POST answered with server-sent events), if any:
        // its progress and the server's related requests go there.
        let stream = self.client.request_stream(id);
        let progress = params
            .filter(|p| p.contains("\"progressToken\""))
            .and_then(progress_token)
            .map(|token| crate::upstream::ProgressRoute {
                client: self.client.clone(),
                token: token.into(),
                high: Arc::default(),
                activity: Arc::default(),
                stream: stream.clone(),
            });
        let (guard, rx) = upstream.call_related(
            &link,
            method,
            params.map(Params::Raw),
            progress,
            Some(&*self.client),
            stream,
        );
        let bound = upstream.settings().request_timeout;
        let reply = match tokio::time::timeout(bound, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Reply::Lost("the upstream request was dropped".to_owned()),
            Err(_) => {
                drop(guard);
                return jsonrpc::error_response(
                    id,
                    code::UPSTREAM_TIMEOUT,
                    &format!("the upstream did not answer {method} within {bound:?}"),
                );
            }
        };
        guard.finish();
        match reply {
            Reply::Result(r) if method == "tools/list" && !self.router.is_namespaced() => {
                jsonrpc::result_response(id, &self.tools_list(&r, params))
            }
            Reply::Result(r) => jsonrpc::result_response(id, &r),
            Reply::Error(e) => jsonrpc::raw_error_response(id, &sanitize_error_object(&e)),
            Reply::TooLarge(len) => jsonrpc::error_response(
                id,
                code::TOO_LARGE,
                &format!(
                    "the upstream's reply ({len} bytes) exceeds max_message_size ({} bytes)",
                    upstream.settings().max_message_size
                ),
            ),
            Reply::NotSent(why) | Reply::Lost(why) => {
                jsonrpc::error_response(id, code::UPSTREAM_UNAVAILABLE, &steadfast::sanitize(&why))
            }
            Reply::Http(status, body) => jsonrpc::error_response(
                id,
                code::INTERNAL_ERROR,
                &steadfast::sanitize(&format!("the upstream answered HTTP {status}: {body}")),
            ),
        }
    }

    /// A `tools/list` page: hints learned, the health tool appended to the last page.
    fn tools_list(&self, result: &str, params: Option<&str>) -> String {
        let Ok(mut v) = serde_json::from_str::<Value>(result) else {
            return result.to_owned();
        };
        let first_page = params
            .and_then(|p| serde_json::from_str::<Value>(p).ok())
            .is_none_or(|p| p.get("cursor").is_none());
        self.upstream().learn_tools(&v, first_page);
        let changed = self.extend_tools_list(&mut v);
        let last_page = v.get("nextCursor").is_none_or(Value::is_null);
        match (
            last_page,
            crate::session::health::tool(&self.router.config()),
        ) {
            (true, Some(health)) => {
                if let Some(tools) = v.get_mut("tools").and_then(Value::as_array_mut) {
                    tools.push(health);
                }
                v.to_string()
            }
            _ if changed => v.to_string(),
            _ => result.to_owned(),
        }
    }

    fn on_notification(self: &Arc<Self>, env: &Envelope<'_>, line: &[u8]) {
        match env.method.as_deref().unwrap_or_default() {
            "notifications/cancelled" => {
                let Some(params) = env.params else { return };
                let Ok(v) = serde_json::from_str::<Value>(params.get()) else {
                    return;
                };
                let Some(id) = v.get("requestId") else { return };
                let id = id.to_string();
                if let Some(x) = self.extension() {
                    x.on_cancelled(self, &id);
                }
                self.cancel_request(&id);
            }
            // The proxy completed the server's handshake itself.
            "notifications/initialized" => {}
            _ => {
                let mut line = line.to_vec();
                line.push(b'\n');
                for route in self.router.routes().iter() {
                    if route.upstream.is_started() {
                        route.upstream.notify(line.clone());
                    }
                }
            }
        }
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

/// A relayed JSON-RPC error object with its message and data sanitized, keeping its shape.
pub(crate) fn sanitize_error_object(raw: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(raw) else {
        return raw.to_owned();
    };
    if let Some(m) = v.get("message").and_then(Value::as_str) {
        if let std::borrow::Cow::Owned(clean) = steadfast::sanitize(m) {
            v["message"] = Value::String(clean);
        }
    }
    if let Some(data) = v.get_mut("data") {
        crate::wire::sanitize::sanitize_value(data);
    }
    v.to_string()
}
