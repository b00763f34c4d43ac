//! One upstream MCP server: its connection (a child process or a streamable-HTTP session), the
//! requests waiting for its answers, and the supervisor that keeps it connected.
//!
//! Requests are renumbered on the way up: the proxy gives each one an id of its own, so a
//! request can be re-sent after a restart, ids from different clients cannot collide, and a
//! reply is routed by a map lookup. Progress tokens are renumbered the same way (the token is
//! the request's own upstream id), so progress finds its request — and the client's token —
//! without a second map.

mod downstream;
mod era;
mod link;
mod supervisor;
mod task_owners;

#[cfg(feature = "http")]
pub(crate) mod credentials;
#[cfg(feature = "http")]
mod http;
mod stdio;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;
use steadfast_mcp::Upstream as UpstreamSpec;
use tokio::sync::{Notify, oneshot, watch};
use tokio_util::sync::CancellationToken;

pub use crate::config::settings::Settings;
pub use downstream::Downstream;
pub use link::Link;
pub use stdio::DEPTH_VAR;

/// How deeply proxies may wrap proxies before the next refuses to start (a config entry that
/// wraps itself would otherwise fork without end).
pub const MAX_DEPTH: u32 = 4;

/// Refuses to start when proxies are nested more than [`MAX_DEPTH`] deep.
pub fn check_depth() -> Result<(), String> {
    let depth: u32 = std::env::var(DEPTH_VAR)
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    if depth >= MAX_DEPTH {
        return Err(format!(
            "refusing to start: {depth} steadfast proxies already wrap each other ({DEPTH_VAR}); \
             does a config entry run the proxy on itself?"
        ));
    }
    Ok(())
}

use crate::wire::framing::Frame;
use crate::wire::jsonrpc::{self, Envelope, Kind, code};
use crate::wire::outbound::Outbound;

/// How a reply came back (or did not).
#[derive(Debug)]
pub enum Reply {
    /// A result, as raw JSON text.
    Result(String),
    /// A JSON-RPC error object, as raw JSON text.
    Error(String),
    /// The request provably never reached the server.
    NotSent(String),
    /// The connection was lost after the request was sent.
    Lost(String),
    /// The reply exceeded `max_message_size` (its length).
    TooLarge(usize),
    /// The HTTP upstream answered with an error status.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Http(u16, String),
}

/// Where progress for a request goes.
#[derive(Debug, Clone)]
pub struct ProgressRoute {
    /// The client's queue.
    pub client: Arc<dyn Downstream>,
    /// The client's own token, as raw JSON.
    pub token: Arc<str>,
    /// The highest progress relayed for this token (a retried attempt starts over, and MCP
    /// requires progress to increase).
    pub high: Arc<Mutex<f64>>,
    /// Woken on every progress message: an attempt's idle timeout starts again.
    pub activity: Arc<Notify>,
    /// The stream of the client's request (an HTTP POST answered with server-sent events):
    /// progress goes there while it is open, else to the client's queue.
    pub stream: Option<Arc<Outbound>>,
}

struct Pending {
    generation: u64,
    tx: oneshot::Sender<Reply>,
    progress: Option<ProgressRoute>,
    /// The client whose request this is: a server request the server relates to it (sent on
    /// its HTTP answer stream) goes to that client.
    /// (A client's serial: no reference count is touched per call.)
    origin: Option<u64>,
    /// The stream of the client's request, when a front streams its related messages: the
    /// server's requests and logs related to this call go there.
    stream: Option<Arc<Outbound>>,
    /// Ends the request's HTTP exchange (connect, headers, body) when the entry goes: the
    /// reply came, or whoever waited gave up (its own bound passed, or it was cancelled).
    _exchange: Option<tokio_util::sync::DropGuard>,
}

/// A request's params: decoded, or raw text to pass on as it is.
#[derive(Debug, Clone, Copy)]
pub enum Params<'a> {
    /// A value.
    Value(&'a Value),
    /// Raw JSON text.
    Raw(&'a str),
}

/// The state of the connection, published to everyone who waits for it.
#[derive(Clone)]
pub enum LinkState {
    /// Not connected (yet, or any more); why. Worth waiting for: the supervisor is (re)starting
    /// it on its backoff.
    Down(Arc<str>),
    /// Not connected, and not worth waiting for: the start failed in a way no quick retry fixes
    /// (the command does not exist or is not executable, every start of a short burst exited
    /// before its handshake or was refused, the child wrote garbage and fell silent), or the
    /// restart attempts are spent. The supervisor keeps probing; waiters are answered at once.
    Failed(Arc<str>),
    /// Connected.
    Up(Arc<Link>),
}

/// One upstream server and everything in flight toward it.
pub struct Upstream {
    /// The name the upstream has in the config.
    pub name: String,
    spec: UpstreamSpec,
    settings: Settings,
    state: watch::Sender<LinkState>,
    /// Keyed by our own sequential ids: a fast hasher (no peer chooses them).
    pending: Mutex<HashMap<u64, Pending, foldhash::fast::FixedState>>,
    next_id: AtomicU64,
    init_params: OnceLock<String>,
    init_result: RwLock<Option<String>>,
    /// The connection speaks MCP 2026-07-28 (its `server/discover` probe succeeded): every
    /// request gets the per-request envelope; otherwise the envelope of a modern client's
    /// request is removed (the handshake negotiated the version once).
    modern: std::sync::atomic::AtomicBool,
    /// Both read on every call: a fast hasher, seeded per process (names are the server's).
    annotations: RwLock<HashMap<String, (bool, bool), foldhash::fast::RandomState>>,
    listed: RwLock<HashSet<String, foldhash::fast::RandomState>>,
    clients: RwLock<Vec<std::sync::Weak<dyn Downstream>>>,
    /// The client that most recently sent a request here.
    /// Its serial; 0 for none.
    last_active: AtomicU64,
    /// Which client created each task (MCP 2025-11-25): the server's requests about a task
    /// carry its id and go to that client.
    task_owners: task_owners::TaskOwners,
    restarts: AtomicU64,
    /// Consecutive starts that died soon after their handshake (0 while connected).
    failing: std::sync::atomic::AtomicU32,
    /// How often a down upstream is probed, in milliseconds (set by the supervisor).
    probe_ms: AtomicU64,
    /// The head of the last line the server wrote that is not JSON-RPC, and a wake-up for the
    /// handshake (a server that writes garbage and then nothing has failed to start).
    noise: Mutex<Option<String>>,
    noise_seen: Notify,
    started: OnceLock<()>,
    shutdown: CancellationToken,
    stopped: CancellationToken,
    /// The gateway's own OAuth token for an HTTP upstream (`oauth = { … }`), if configured.
    #[cfg(feature = "http")]
    token: OnceLock<Arc<credentials::UpstreamToken>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name)
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// An upstream that starts when [`Upstream::start`] is called.
    pub fn new(name: impl Into<String>, spec: UpstreamSpec, settings: Settings) -> Arc<Self> {
        let (state, _) = watch::channel(LinkState::Down("not started".into()));
        Arc::new(Self {
            name: name.into(),
            spec,
            settings,
            state,
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
            init_params: OnceLock::new(),
            init_result: RwLock::new(None),
            modern: std::sync::atomic::AtomicBool::new(false),
            annotations: RwLock::default(),
            listed: RwLock::default(),
            clients: RwLock::default(),
            last_active: AtomicU64::new(0),
            task_owners: task_owners::TaskOwners::default(),
            restarts: AtomicU64::new(0),
            failing: std::sync::atomic::AtomicU32::new(0),
            probe_ms: AtomicU64::new(0),
            noise: Mutex::new(None),
            noise_seen: Notify::new(),
            started: OnceLock::new(),
            shutdown: CancellationToken::new(),
            stopped: CancellationToken::new(),
            #[cfg(feature = "http")]
            token: OnceLock::new(),
        })
    }

    /// Authenticates to the (HTTP) upstream with the config's `oauth` for `name`, if any.
    pub(crate) fn authenticate(&self, config: &crate::Config) {
        #[cfg(feature = "http")]
        if let Some(o) = config.upstream_oauth.get(&self.name) {
            let timeout = self
                .settings
                .request_timeout
                .min(std::time::Duration::from_secs(30));
            let _ = self
                .token
                .set(credentials::UpstreamToken::new(o.clone(), timeout));
        }
        #[cfg(not(feature = "http"))]
        let _ = config;
    }

    /// Whether the upstream is a streamable-HTTP one (`network.transport` is `tcp`).
    pub fn is_http(&self) -> bool {
        !matches!(self.spec, UpstreamSpec::Command { .. })
    }

    /// How the upstream is reached (a reload compares it).
    pub fn spec(&self) -> &UpstreamSpec {
        &self.spec
    }

    /// The upstream's command or URL, safe to show (arguments can carry tokens).
    pub fn describe(&self) -> String {
        steadfast::sanitize(&self.spec.to_string()).into_owned()
    }

    /// Starts the supervisor once, initializing the server with the client's own
    /// `initialize` params (raw JSON) and sending what it sends to `client`.
    pub fn start(self: &Arc<Self>, init_params: &str, client: Arc<dyn Downstream>) {
        {
            let mut clients = self.clients.write().unwrap_or_else(|e| e.into_inner());
            clients.retain(|c| c.strong_count() > 0);
            // Compared by address alone: a vtable pointer may differ between codegen units.
            let me = Arc::as_ptr(&client).cast::<()>();
            if !clients.iter().any(|c| c.as_ptr().cast::<()>() == me) {
                clients.push(Arc::downgrade(&client));
            }
        }
        self.last_active.store(client.serial(), Ordering::Relaxed);
        self.start_alone(init_params);
    }

    /// Starts the supervisor once, initializing the server with `init_params` (raw JSON),
    /// before any client is there (the HTTP front starts its upstreams with the gateway, so
    /// that readiness means ready).
    pub fn start_alone(self: &Arc<Self>, init_params: &str) {
        let _ = self.init_params.set(init_params.to_owned());
        if self.started.set(()).is_ok() {
            tokio::spawn(supervisor::run(self.clone()));
        }
    }

    /// The live clients (notifications from the server go to each).
    pub(crate) fn clients(&self) -> Vec<Arc<dyn Downstream>> {
        self.clients
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect()
    }

    /// Whether the supervisor has started.
    pub fn is_started(&self) -> bool {
        self.started.get().is_some()
    }

    /// Stops the supervisor and the connection (the child is terminated).
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Whether this upstream created task `task` for one of our calls (its own tasks, relayed).
    pub fn has_task(&self, task: &str) -> bool {
        self.task_owners.get(task).is_some()
    }

    /// Resolves once [`Upstream::shutdown`] has been called (a reload removed it, or the proxy
    /// is stopping).
    pub async fn shutting_down(&self) {
        self.shutdown.cancelled().await;
    }

    /// Resolves when the supervisor has stopped and the child is gone (at once if it never
    /// started).
    pub async fn stopped(&self) {
        if self.is_started() {
            self.stopped.cancelled().await;
        }
    }

    /// The server's `initialize` result, once connected.
    pub fn init_result(&self) -> Option<String> {
        self.init_result
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the server's `initialize` result declares `capability` (`"tools"`,
    /// `"resources"`, `"tasks"`, …); false before it is connected.
    pub fn offers(&self, capability: &str) -> bool {
        self.init_result
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_deref()
            .and_then(|r| serde_json::from_str::<Value>(r).ok())
            .is_some_and(|v| {
                v.get("capabilities")
                    .and_then(|c| c.get(capability))
                    .is_some()
            })
    }

    /// Restarts so far.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Whether the upstream is connected now.
    pub fn is_connected(&self) -> bool {
        matches!(&*self.state.borrow(), LinkState::Up(_))
    }

    /// Whether the server listed `tool` (per-tool state is kept only for those).
    pub fn lists(&self, tool: &str) -> bool {
        self.listed
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(tool)
    }

    /// The names of the tools the server listed.
    pub fn listed_names(&self) -> Vec<String> {
        self.listed
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// The tool's (readOnlyHint, idempotentHint), as last listed.
    pub fn hints(&self, tool: &str) -> (bool, bool) {
        self.annotations
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(tool)
            .copied()
            .unwrap_or_default()
    }

    /// Learns tool names and replay-safety hints from a `tools/list` result.
    pub fn learn_tools(&self, result: &Value, first_page: bool) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return;
        };
        let mut ann = self.annotations.write().unwrap_or_else(|e| e.into_inner());
        let mut listed = self.listed.write().unwrap_or_else(|e| e.into_inner());
        if first_page {
            listed.clear();
        }
        for t in tools {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            let hint = |k: &str| {
                t.get("annotations")
                    .and_then(|a| a.get(k))
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            };
            ann.insert(
                name.to_owned(),
                (hint("readOnlyHint"), hint("idempotentHint")),
            );
            listed.insert(name.to_owned());
        }
    }

    /// The live connection, waiting up to `reconnect_wait` for one that is (re)starting. An
    /// upstream in a crash loop (twice in a row it completed a handshake and died soon after)
    /// is not waited for: the call fails at once, saying why, and the supervisor keeps trying
    /// on its backoff. An upstream that cannot be reached at all is waited for.
    pub async fn link(&self) -> Result<Arc<Link>, String> {
        // Connected (the common case): no receiver, no timer.
        if let LinkState::Up(link) = &*self.state.borrow() {
            if !link.is_closed() {
                return Ok(link.clone());
            }
        }
        const STOPPED: &str = "the upstream was stopped (a config reload removed or replaced it, \
                               or the proxy is stopping)";
        if self.shutdown.is_cancelled() {
            return Err(STOPPED.to_owned());
        }
        let mut rx = self.state.subscribe();
        if let LinkState::Failed(why) = &*rx.borrow() {
            return Err(self.down_notice(why));
        }
        let failing = self.failing.load(Ordering::Relaxed);
        if failing >= 2 {
            if let LinkState::Down(why) = &*rx.borrow() {
                return Err(format!(
                    "the upstream keeps crashing right after it starts ({failing} times in a row); it is restarted on backoff: {why}"
                ));
            }
        }
        let wait = async {
            loop {
                match &*rx.borrow_and_update() {
                    LinkState::Up(link) if !link.is_closed() => return Ok(link.clone()),
                    LinkState::Failed(why) => return Err(self.down_notice(why)),
                    _ => {}
                }
                if rx.changed().await.is_err() {
                    return Err("the upstream was shut down".to_owned());
                }
            }
        };
        let wait = async {
            tokio::select! {
                r = wait => r,
                _ = self.shutdown.cancelled() => Err(STOPPED.to_owned()),
            }
        };
        match tokio::time::timeout(self.settings.reconnect_wait, wait).await {
            Ok(r) => r,
            Err(_) => Err(match &*self.state.borrow() {
                LinkState::Down(why) => format!("the upstream is not connected: {why}"),
                LinkState::Failed(why) => self.down_notice(why),
                LinkState::Up(_) => "the upstream connection is closing".to_owned(),
            }),
        }
    }

    /// What a call is told while the upstream is down for good (until a probe brings it back).
    fn down_notice(&self, why: &str) -> String {
        format!("the MCP server `{}` is down: {why}", self.name)
    }

    /// How often the supervisor probes an upstream that is down ([`LinkState::Failed`]).
    pub fn probe_every(&self) -> Duration {
        Duration::from_millis(self.probe_ms.load(Ordering::Relaxed))
    }

    /// Tells the model the truth about a call that failed because the upstream is down for
    /// good (until a probe brings it back): the server is down, so calling again at once
    /// fails the same way; `retryAfterMs` says when the next probe is.
    pub fn explain_down(&self, llm: &mut steadfast::LlmError) {
        if llm.code != steadfast::LlmErrorCode::ServiceUnavailable || !self.is_down() {
            return;
        }
        let every = self.probe_every();
        llm.message = steadfast::sanitize(&format!(
            "The MCP server `{}` is down: {}",
            self.name,
            self.down_reason().unwrap_or_default()
        ))
        .chars()
        .take(steadfast::MAX_MESSAGE_CHARS)
        .collect();
        llm.suggestion = format!(
            "Do not call this server's tools again right away: they fail until it is back (the \
             gateway checks every {every:?}). Use another tool or tell the user the server is down"
        );
        llm.retriable = true;
        llm.retry_after_ms = Some(u64::try_from(every.as_millis()).unwrap_or(u64::MAX));
    }

    /// Whether the upstream is down and not worth waiting for (see [`LinkState::Failed`]): a
    /// call fails at once, and the model is told the server is down.
    pub fn is_down(&self) -> bool {
        matches!(&*self.state.borrow(), LinkState::Failed(_))
    }

    /// The live connection now, without waiting for one (a list that gathers several upstreams
    /// skips one that is down rather than wait for it).
    pub fn live_link(&self) -> Option<Arc<Link>> {
        match &*self.state.borrow() {
            LinkState::Up(link) if !link.is_closed() => Some(link.clone()),
            _ => None,
        }
    }

    /// Why the upstream is not connected now (`None` when it is).
    pub fn down_reason(&self) -> Option<String> {
        match &*self.state.borrow() {
            LinkState::Down(why) | LinkState::Failed(why) => Some(why.to_string()),
            LinkState::Up(_) => None,
        }
    }

    /// Waits up to `bound` for the first connection; the reason it is down otherwise. An
    /// upstream that cannot start ([`LinkState::Failed`]) is not waited for.
    pub async fn wait_connected(&self, bound: Duration) -> Result<(), String> {
        let mut rx = self.state.subscribe();
        let wait = async {
            loop {
                match &*rx.borrow_and_update() {
                    LinkState::Up(_) => return true,
                    LinkState::Failed(_) => return false,
                    LinkState::Down(_) => {}
                }
                if rx.changed().await.is_err() {
                    return false;
                }
            }
        };
        match tokio::time::timeout(bound, wait).await {
            Ok(true) => Ok(()),
            _ => Err(match &*self.state.borrow() {
                LinkState::Down(why) | LinkState::Failed(why) => why.to_string(),
                LinkState::Up(_) => "connected".to_owned(),
            }),
        }
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, Pending, foldhash::fast::FixedState>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends a request whose reply the caller awaits. The returned guard sends
    /// `notifications/cancelled` upstream if it is dropped before the reply arrives. With a
    /// progress route, the request's progress token is replaced by its upstream id.
    pub fn call(
        self: &Arc<Self>,
        link: &Arc<Link>,
        method: &str,
        params: Option<Params<'_>>,
        progress: Option<ProgressRoute>,
    ) -> (InFlight, oneshot::Receiver<Reply>) {
        self.call_from(link, method, params, progress, None)
    }

    /// [`Upstream::call`] on behalf of `origin`, the client whose request this is: requests the
    /// server sends while it works on it (sampling, elicitation, roots) are routed to that
    /// client.
    pub fn call_from(
        self: &Arc<Self>,
        link: &Arc<Link>,
        method: &str,
        params: Option<Params<'_>>,
        progress: Option<ProgressRoute>,
        origin: Option<&dyn Downstream>,
    ) -> (InFlight, oneshot::Receiver<Reply>) {
        self.call_related(link, method, params, progress, origin, None)
    }

    /// [`Upstream::call_from`] for a client request that has a stream of its own (`stream`,
    /// opened by the front): requests and logs the server relates to this call go
    /// on it.
    pub fn call_related(
        self: &Arc<Self>,
        link: &Arc<Link>,
        method: &str,
        params: Option<Params<'_>>,
        progress: Option<ProgressRoute>,
        origin: Option<&dyn Downstream>,
        stream: Option<Arc<Outbound>>,
    ) -> (InFlight, oneshot::Receiver<Reply>) {
        let origin = origin.map(|c| c.serial());
        if let Some(o) = origin {
            self.last_active.store(o, Ordering::Relaxed);
        }
        let id = self.next_id();
        let (tx, rx) = oneshot::channel();
        let token = progress.as_ref().map(|_| id);
        let params: Option<std::borrow::Cow<'_, str>> = match params {
            None => self.in_era(None),
            Some(Params::Value(v)) => Some(self.value_in_era(v, token).into()),
            Some(Params::Raw(raw)) if token.is_some() => match serde_json::from_str::<Value>(raw) {
                Ok(v) => Some(self.value_in_era(&v, token).into()),
                Err(_) => self.in_era(Some(raw.into())),
            },
            Some(Params::Raw(raw)) => self.in_era(Some(raw.into())),
        };
        // Traced: this request carries the current (CLIENT) span's context in `_meta`.
        let params = if steadfast::trace::listening() {
            traced_params(params, id)
        } else {
            params
        };
        let exchange = link.is_http().then(CancellationToken::new);
        self.pending().insert(
            id,
            Pending {
                generation: link.generation(),
                tx,
                progress,
                origin,
                stream,
                _exchange: exchange.clone().map(CancellationToken::drop_guard),
            },
        );
        let guard = InFlight {
            upstream: self.clone(),
            link: link.clone(),
            id,
            done: false,
        };
        let line = jsonrpc::request_numbered(id, method, params.as_deref());
        if let Err(why) = link.send_request(line, id, exchange) {
            self.settle(id, Reply::NotSent(why));
        }
        (guard, rx)
    }

    /// Sends a notification from the client to the server, if connected.
    pub fn notify(&self, line: Vec<u8>) {
        if let LinkState::Up(link) = &*self.state.borrow() {
            let _ = link.send(line, None);
        }
    }

    /// Delivers a reply to whoever waits for request `id`.
    fn settle(&self, id: u64, reply: Reply) {
        if let Some(p) = self.pending().remove(&id) {
            let _ = p.tx.send(reply);
        }
    }

    /// Fails every request sent on connection `generation` (the connection is gone).
    fn fail_generation(&self, generation: u64, not_sent: bool, why: &str) {
        let gone: Vec<Pending> = {
            let mut pending = self.pending();
            let ids: Vec<u64> = pending
                .iter()
                .filter(|(_, p)| p.generation == generation)
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| pending.remove(id)).collect()
        };
        for client in self.clients() {
            client.server_connection_ended(self, generation, why);
        }
        for p in gone {
            let reply = if not_sent {
                Reply::NotSent(why.to_owned())
            } else {
                Reply::Lost(why.to_owned())
            };
            let _ = p.tx.send(reply);
        }
    }

    /// Handles one frame read from the server.
    pub(crate) fn on_frame(self: &Arc<Self>, link: &Arc<Link>, frame: Frame) {
        self.on_frame_related(link, frame, None);
    }

    /// Handles one frame the server sent while it answers our request `related` (on that
    /// request's HTTP answer stream): requests in it belong to the client that asked.
    pub(crate) fn on_frame_related(
        self: &Arc<Self>,
        link: &Arc<Link>,
        frame: Frame,
        related: Option<u64>,
    ) {
        match frame {
            Frame::Line(line) => self.on_message(link, &line, related),
            Frame::TooLarge { head, tail, len } => {
                // The head's top-level id first (nesting is known there); the last `"id"` of the
                // tail only when the head has none (serializers that write the id last).
                let id = jsonrpc::scan_id(&head)
                    .and_then(|i| i.parse::<u64>().ok())
                    .or_else(|| {
                        jsonrpc::scan_id_in_tail(&tail)
                            .and_then(|i| i.parse::<u64>().ok())
                            .filter(|i| self.pending().contains_key(i))
                    });
                tracing::warn!(
                    upstream = %self.name,
                    bytes = len,
                    max = self.settings.max_message_size,
                    "a message from the upstream exceeds max_message_size; dropped"
                );
                if let Some(id) = id {
                    self.settle(id, Reply::TooLarge(len));
                }
            }
        }
    }

    fn on_message(self: &Arc<Self>, link: &Arc<Link>, line: &[u8], related: Option<u64>) {
        let (env, kind) = match Envelope::parse(line) {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!(upstream = %self.name, error = ?e, "ignored a malformed message from the upstream");
                let head = String::from_utf8_lossy(&line[..line.len().min(200)]);
                let head = steadfast::sanitize(head.trim()).into_owned();
                *self.noise.lock().unwrap_or_else(|e| e.into_inner()) = Some(head);
                self.noise_seen.notify_one();
                return;
            }
        };
        match kind {
            Kind::Response => {
                let Some(id) = env.id.and_then(|i| i.get().parse::<u64>().ok()) else {
                    return;
                };
                let reply = match (env.result, env.error) {
                    (Some(r), _) => {
                        if let Some(task) = task_owners::created_task(r.get()) {
                            let origin = self.pending().get(&id).and_then(|p| p.origin);
                            if let Some(origin) = origin {
                                self.task_owners.insert(task, origin);
                            }
                        }
                        Reply::Result(r.get().to_owned())
                    }
                    (_, Some(e)) => Reply::Error(e.get().to_owned()),
                    _ => return,
                };
                self.settle(id, reply);
            }
            Kind::Notification => self.on_notification(link, &env, related),
            Kind::Request => self.on_request(link, &env, related),
        }
    }

    fn on_notification(&self, link: &Link, env: &Envelope<'_>, related: Option<u64>) {
        let method = env.method.as_deref().unwrap_or_default();
        let clients = self.clients();
        match method {
            "notifications/progress" => {
                let Some(params) = env.params else { return };
                let Ok(mut v) = serde_json::from_str::<Value>(params.get()) else {
                    return;
                };
                let Some(id) = v.get("progressToken").and_then(progress_id) else {
                    return;
                };
                let route = self.pending().get(&id).and_then(|p| p.progress.clone());
                let Some(route) = route else { return };
                route.activity.notify_one();
                let value = v.get("progress").and_then(Value::as_f64).unwrap_or(0.0);
                {
                    let mut high = route.high.lock().unwrap_or_else(|e| e.into_inner());
                    if value <= *high && *high > 0.0 {
                        return;
                    }
                    *high = value;
                }
                if let Ok(token) = serde_json::from_str::<Value>(&route.token) {
                    v["progressToken"] = token;
                }
                route.client.push_related(
                    route.stream.as_deref(),
                    jsonrpc::notification(method, Some(&v.to_string())),
                );
            }
            // The server cancels a request it sent to the client: rename the id.
            "notifications/cancelled" => {
                let Some(params) = env.params else {
                    return;
                };
                if let Ok(v) = serde_json::from_str::<Value>(params.get()) {
                    let up = v.get("requestId").map(Value::to_string).unwrap_or_default();
                    let reason = v
                        .get("reason")
                        .and_then(Value::as_str)
                        .map(|r| steadfast::sanitize(r).into_owned());
                    // The entry ends with the cancel: a late answer from the client goes
                    // nowhere, and the slot is free again.
                    for client in &clients {
                        if client.server_cancelled(self, link.generation(), &up, reason.as_deref())
                        {
                            break;
                        }
                    }
                }
            }
            // A log the server sent on our request's answer stream is that request's: it goes
            // to the client that asked (on the request's own stream, if it has one), not to
            // every client. List changes and resource updates concern every session.
            "notifications/message" if related.is_some() => {
                let target = related.and_then(|id| {
                    let pending = self.pending();
                    let p = pending.get(&id)?;
                    Some((p.origin?, p.stream.clone()))
                });
                let found = target.and_then(|(serial, stream)| {
                    let client = clients.iter().find(|c| c.serial() == serial)?;
                    Some((client, stream))
                });
                let line = jsonrpc::notification(method, env.params.map(RawValue::get));
                match found {
                    Some((client, stream)) => {
                        client.push_related(stream.as_deref(), line);
                    }
                    None => {
                        for client in &clients {
                            client.push_notification(line.clone());
                        }
                    }
                }
            }
            _ => {
                if method == "notifications/tools/list_changed" {
                    let me = self.name.clone();
                    tracing::info!(upstream = %me, "the upstream's tool list changed");
                }
                let params = env.params.map(RawValue::get);
                let list_changed = method.ends_with("/list_changed");
                for client in &clients {
                    if list_changed && !client.is_initialized() {
                        continue;
                    }
                    client.push_notification(jsonrpc::notification(method, params));
                }
            }
        }
    }

    fn on_request(self: &Arc<Self>, link: &Arc<Link>, env: &Envelope<'_>, related: Option<u64>) {
        let id = env.id.map(RawValue::get).unwrap_or("null");
        let method = env.method.as_deref().unwrap_or_default();
        if method == "ping" {
            let _ = link.send(jsonrpc::result_response(id, "{}"), None);
            return;
        }
        let task = env.params.and_then(|p| task_owners::related_task(p.get()));
        match self.route_server_request(related, task.as_deref()) {
            Ok((client, stream)) => {
                if let Err(why) =
                    client.forward_server_request(self, link, id, method, env.params, stream)
                {
                    let _ = link.send(jsonrpc::error_response(id, code::OVERLOADED, &why), None);
                }
            }
            Err(why) => {
                let _ = link.send(jsonrpc::error_response(id, code::INTERNAL_ERROR, why), None);
            }
        }
    }

    /// The client a request from the server goes to: the one whose request the server relates
    /// it to (it came on that request's HTTP answer stream, or it names a task that client
    /// created); else the one with the newest request in flight here (MCP servers ask while
    /// they work on a client's request, and stdio carries no relation); else the one that most
    /// recently sent a request; else any. With the client, the stream of the client request
    /// it was related to (or guessed to be), when that request has one: a client that never
    /// opened its session's event stream still gets it.
    fn route_server_request(
        &self,
        related: Option<u64>,
        task: Option<&str>,
    ) -> Result<Target, &'static str> {
        let live = self.clients();
        let find = |serial: u64| live.iter().find(|c| c.serial() == serial).cloned();
        // A related client that is gone: no other session may answer in its name. A task
        // outlives the request that created it: its requests go to the session's own stream.
        if let Some(owner) = task.and_then(|t| self.task_owners.get(t)) {
            return find(owner)
                .map(|c| (c, None))
                .ok_or("the client session that created this task has ended");
        }
        let (related, mut in_flight) = {
            let pending = self.pending();
            let related = related.and_then(|id| {
                let p = pending.get(&id)?;
                Some((p.origin?, p.stream.clone()))
            });
            let in_flight: Vec<(u64, u64)> = pending
                .iter()
                .filter_map(|(id, p)| Some((*id, p.origin?)))
                .collect();
            (related, in_flight)
        };
        if let Some((origin, stream)) = related {
            return find(origin)
                .map(|c| (c, stream))
                .ok_or("the client session this request belongs to has ended");
        }
        in_flight.sort_unstable_by_key(|&(id, _)| std::cmp::Reverse(id));
        let newest = in_flight
            .into_iter()
            .find_map(|(id, serial)| Some((id, find(serial)?)));
        if let Some((id, client)) = newest {
            let stream = self.pending().get(&id).and_then(|p| p.stream.clone());
            return Ok((client, stream));
        }
        find(self.last_active.load(Ordering::Relaxed))
            .or_else(|| live.first().cloned())
            .map(|c| (c, None))
            .ok_or("no client is connected")
    }

    /// Relays a client's reply to a request the server sent, if its connection still lives.
    pub fn reply_to_server(&self, generation: u64, line: Vec<u8>) {
        if let LinkState::Up(link) = &*self.state.borrow() {
            if link.generation() == generation {
                let _ = link.send(line, None);
            }
        }
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }
}

/// Where a request from the server goes: a client, and the stream of its request the server
/// is working on, if that request has one.
type Target = (Arc<dyn Downstream>, Option<Arc<Outbound>>);

/// Our progress tokens are the request's upstream id, as a number.
fn progress_id(token: &Value) -> Option<u64> {
    token
        .as_u64()
        .or_else(|| token.as_str().and_then(|s| s.parse().ok()))
}

/// `params` with `_meta.progressToken` set to `token` (or as it is).
/// `params` with the current span's `traceparent` in `_meta` (when the span is an
/// OpenTelemetry one), and the request's id recorded on the span.
#[inline(never)]
fn traced_params(
    params: Option<std::borrow::Cow<'_, str>>,
    id: u64,
) -> Option<std::borrow::Cow<'_, str>> {
    let span = tracing::Span::current();
    // On an attempt's CLIENT span only (a SERVER span's id is the client's).
    if span.metadata().is_some_and(|m| m.name() == "mcp.client") {
        span.record("jsonrpc.request.id", id);
    }
    match crate::wire::trace_context::current() {
        Some(t) => crate::wire::trace_context::inject(params.as_deref(), &t)
            .map(std::borrow::Cow::Owned)
            .or(params),
        None => params,
    }
}

fn with_progress_token(params: &Value, token: Option<u64>) -> String {
    match token {
        Some(t) => {
            let mut p = params.clone();
            if let Some(obj) = p.as_object_mut() {
                let meta = obj
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Some(m) = meta.as_object_mut() {
                    m.insert("progressToken".into(), Value::from(t));
                }
            }
            p.to_string()
        }
        None => params.to_string(),
    }
}

/// A request in flight; dropping it before the reply tells the server to stop.
pub struct InFlight {
    upstream: Arc<Upstream>,
    link: Arc<Link>,
    id: u64,
    done: bool,
}

impl InFlight {
    /// The request's upstream id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Marks the reply as received: nothing to cancel.
    pub fn finish(mut self) {
        self.done = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.done && self.upstream.pending().remove(&self.id).is_some() {
            self.link
                .cancel(self.id, "the proxy abandoned this request");
        }
    }
}

#[cfg(test)]
mod routing_tests;
