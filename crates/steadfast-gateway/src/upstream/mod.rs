//! One upstream MCP server: its connection (a child process or a streamable-HTTP session), the
//! requests waiting for its answers, and the supervisor that keeps it connected.
//!
//! Requests are renumbered on the way up: the proxy gives each one an id of its own, so a
//! request can be re-sent after a restart, ids from different clients cannot collide, and a
//! reply is routed by a map lookup. Progress tokens are renumbered the same way (the token is
//! the request's own upstream id), so progress finds its request — and the client's token —
//! without a second map.

pub(crate) mod changes;
mod downstream;
mod era;
mod in_process;
mod inbound;
mod link;
mod listen;
#[cfg(feature = "http")]
mod param_headers;
mod pending;
mod request;
mod supervisor;
mod task_owners;

#[cfg(feature = "http")]
pub(crate) mod credentials;
#[cfg(feature = "http")]
mod http;
mod stdio;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use serde_json::Value;
use steadfast_mcp::Upstream as UpstreamSpec;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

pub(crate) use crate::config::settings::Settings;
pub(crate) use downstream::{Declined, Downstream, Relation, TRANSIENT_SERIAL, capability_for};
pub(crate) use inbound::{Transient, register_transient};
pub(crate) use link::Link;
use pending::Pending;
pub(crate) use pending::{Params, ProgressRoute, Reply};
pub(crate) use request::{Page, Related, UpstreamError, sanitize_error_object};
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

/// The state of the connection, published to everyone who waits for it.
#[derive(Clone)]
pub(crate) enum LinkState {
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
pub(crate) struct Upstream {
    /// The name the upstream has in the config.
    pub name: String,
    spec: UpstreamSpec,
    settings: Settings,
    state: watch::Sender<LinkState>,
    /// Never marked seen: whether the supervisor has published anything yet (see
    /// [`Upstream::is_starting`]).
    first: watch::Receiver<LinkState>,
    /// Keyed by our own sequential ids: a fast hasher (no peer chooses them).
    pending: Mutex<HashMap<u64, Pending, foldhash::fast::FixedState>>,
    next_id: AtomicU64,
    init_params: OnceLock<String>,
    init_result: RwLock<Option<String>>,
    /// The connection speaks MCP 2026-07-28 (its `server/discover` probe succeeded): every
    /// request gets the per-request envelope; otherwise the envelope of a modern client's
    /// request is removed (the handshake negotiated the version once).
    modern: std::sync::atomic::AtomicBool,
    /// What the server said of each tool it listed, read on every call (one lookup for both
    /// facts): a fast hasher, seeded per process (names are the server's).
    tools: RwLock<HashMap<String, ToolFacts, foldhash::fast::RandomState>>,
    /// The arguments each tool mirrors into `Mcp-Param-*` headers (modern HTTP upstreams:
    /// `param_headers.rs`); empty for most servers, so asked only when not.
    #[cfg(feature = "http")]
    param_headers: RwLock<HashMap<String, param_headers::ParamHeaders>>,
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
    /// A call's request that a down upstream be tried now (`supervisor::Wake`).
    wake: supervisor::Wake,
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
    /// The front's `subscriptions/listen` streams: what the server announces goes there too
    /// (set by the router).
    changes: OnceLock<Arc<changes::Changes>>,
    /// The id of the newest listen of the gateway's own this (modern) server acknowledged.
    listen_acked: watch::Sender<u64>,
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
    pub(crate) fn new(
        name: impl Into<String>,
        spec: UpstreamSpec,
        settings: Settings,
    ) -> Arc<Self> {
        let (state, first) = watch::channel(LinkState::Down("not started".into()));
        Arc::new(Self {
            name: name.into(),
            spec,
            settings,
            state,
            first,
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
            init_params: OnceLock::new(),
            init_result: RwLock::new(None),
            modern: std::sync::atomic::AtomicBool::new(false),
            tools: RwLock::default(),
            #[cfg(feature = "http")]
            param_headers: RwLock::default(),
            clients: RwLock::default(),
            last_active: AtomicU64::new(0),
            task_owners: task_owners::TaskOwners::default(),
            restarts: AtomicU64::new(0),
            failing: std::sync::atomic::AtomicU32::new(0),
            probe_ms: AtomicU64::new(0),
            wake: supervisor::Wake::default(),
            noise: Mutex::new(None),
            noise_seen: Notify::new(),
            started: OnceLock::new(),
            shutdown: CancellationToken::new(),
            stopped: CancellationToken::new(),
            #[cfg(feature = "http")]
            token: OnceLock::new(),
            changes: OnceLock::new(),
            listen_acked: watch::Sender::new(0),
        })
    }

    /// Publishes what the server announces to `changes` too (the front's listeners), and
    /// follows the resource URIs they watch (`listen.rs`). Set once.
    pub(crate) fn publish_to(&self, changes: Arc<changes::Changes>) {
        let _ = self.changes.set(changes);
    }

    /// Where the server's announcements go besides the sessions, if anywhere.
    pub(crate) fn changes(&self) -> Option<&Arc<changes::Changes>> {
        self.changes.get()
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
    pub(crate) fn is_http(&self) -> bool {
        matches!(self.spec, UpstreamSpec::Http { .. })
    }

    /// How the upstream is reached (a reload compares it).
    pub(crate) fn spec(&self) -> &UpstreamSpec {
        &self.spec
    }

    /// The upstream's command or URL, safe to show (arguments can carry tokens).
    pub(crate) fn describe(&self) -> String {
        steadfast::sanitize(&self.spec.to_string()).into_owned()
    }

    /// Starts the supervisor once, initializing the server with the client's own
    /// `initialize` params (raw JSON) and sending what it sends to `client`.
    pub(crate) fn start(self: &Arc<Self>, init_params: &str, client: Arc<dyn Downstream>) {
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
    pub(crate) fn start_alone(self: &Arc<Self>, init_params: &str) {
        let _ = self.init_params.set(init_params.to_owned());
        if self.started.set(()).is_ok() {
            tokio::spawn(supervisor::run(self.clone()));
            tokio::spawn(self.clone().announce_first_connection());
        }
    }

    /// Tells the front's listeners when the first connection is up: a list answered while the
    /// upstream was still starting (after the list's bound) went without it, and a client
    /// that listens is owed a `list_changed` (restarts are announced by the supervisor).
    async fn announce_first_connection(self: Arc<Self>) {
        let mut rx = self.state.subscribe();
        let up = async {
            loop {
                if matches!(&*rx.borrow_and_update(), LinkState::Up(_)) {
                    return true;
                }
                if rx.changed().await.is_err() {
                    return false;
                }
            }
        };
        let up = tokio::select! {
            up = up => up,
            _ = self.shutdown.cancelled() => false,
        };
        if let (true, Some(changes)) = (up, self.changes()) {
            changes.publish_all_lists();
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
    pub(crate) fn is_started(&self) -> bool {
        self.started.get().is_some()
    }

    /// Whether the upstream is on its first start: started, and neither connected nor failed
    /// yet (a list waits for such an upstream rather than answer without it).
    pub(crate) fn is_starting(&self) -> bool {
        self.is_started() && !self.first.has_changed().unwrap_or(true)
    }

    /// Stops the supervisor and the connection (the child is terminated).
    pub(crate) fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Whether this upstream created task `task` for one of our calls (its own tasks, relayed).
    pub(crate) fn has_task(&self, task: &str) -> bool {
        self.task_owners.get(task).is_some()
    }

    /// Resolves once [`Upstream::shutdown`] has been called (a reload removed it, or the proxy
    /// is stopping).
    pub(crate) async fn shutting_down(&self) {
        self.shutdown.cancelled().await;
    }

    /// Resolves when the supervisor has stopped and the child is gone (at once if it never
    /// started).
    pub(crate) async fn stopped(&self) {
        if self.is_started() {
            self.stopped.cancelled().await;
        }
    }

    /// The server's `initialize` result, once connected.
    pub(crate) fn init_result(&self) -> Option<String> {
        self.init_result
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the server's `initialize` result declares `capability` (`"tools"`,
    /// `"resources"`, `"tasks"`, …); false before it is connected.
    pub(crate) fn offers(&self, capability: &str) -> bool {
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
    pub(crate) fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Requests sent to the server and not answered yet (the admin console's count).
    pub(crate) fn pending_len(&self) -> usize {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether the upstream is connected now.
    pub(crate) fn is_connected(&self) -> bool {
        matches!(&*self.state.borrow(), LinkState::Up(_))
    }

    /// Whether the server listed `tool` (per-tool state is kept only for those).
    pub(crate) fn lists(&self, tool: &str) -> bool {
        self.facts(tool).listed
    }

    /// The names of the tools the server listed.
    pub(crate) fn listed_names(&self) -> Vec<String> {
        self.tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, f)| f.listed)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The tool's (readOnlyHint, idempotentHint), as last listed.
    pub(crate) fn hints(&self, tool: &str) -> (bool, bool) {
        let f = self.facts(tool);
        (f.read_only, f.idempotent)
    }

    /// Keeps which of `tool`'s arguments are mirrored into `Mcp-Param-*` headers.
    #[cfg(feature = "http")]
    fn learn_param_headers(&self, tool: &str, input_schema: Option<&Value>) {
        let mirrored = input_schema.and_then(param_headers::of_schema);
        let mut all = self
            .param_headers
            .write()
            .unwrap_or_else(|e| e.into_inner());
        match mirrored {
            Some(m) => {
                all.insert(tool.to_owned(), m);
            }
            None => {
                all.remove(tool);
            }
        }
    }

    /// The `Mcp-Param-*` headers of a `tools/call` of `tool` with `arguments` (none for most
    /// tools: one read of an empty map).
    #[cfg(feature = "http")]
    pub(crate) fn param_headers(&self, tool: &str, arguments: &Value) -> Vec<(String, String)> {
        let all = self.param_headers.read().unwrap_or_else(|e| e.into_inner());
        match all.get(tool) {
            Some(m) => param_headers::headers(m, arguments),
            None => Vec::new(),
        }
    }

    /// What the server said of `tool` (nothing, for a name it never listed).
    pub(crate) fn facts(&self, tool: &str) -> ToolFacts {
        self.tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(tool)
            .copied()
            .unwrap_or_default()
    }

    /// Learns tool names and replay-safety hints from a `tools/list` result.
    pub(crate) fn learn_tools(&self, result: &Value, first_page: bool) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return;
        };
        let mut known = self.tools.write().unwrap_or_else(|e| e.into_inner());
        if first_page {
            // A tool no longer listed keeps its hints (a call already running may ask).
            known.values_mut().for_each(|f| f.listed = false);
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
            #[cfg(feature = "http")]
            self.learn_param_headers(name, t.get("inputSchema"));
            known.insert(
                name.to_owned(),
                ToolFacts {
                    listed: true,
                    read_only: hint("readOnlyHint"),
                    idempotent: hint("idempotentHint"),
                },
            );
        }
    }

    /// The live connection, waiting up to `reconnect_wait` for one that is (re)starting. An
    /// upstream in a crash loop (twice in a row it completed a handshake and died soon after)
    /// is not waited for: the call fails at once, saying why, and the supervisor keeps trying
    /// on its backoff. An upstream that cannot be reached at all is waited for. One that is
    /// down ([`LinkState::Failed`]) is tried at once for the call, at most once a second
    /// (`supervisor::start_for_call`).
    pub(crate) async fn link(&self) -> Result<Arc<Link>, String> {
        // Connected (the common case): no receiver, no timer.
        if let LinkState::Up(link) = &*self.state.borrow()
            && !link.is_closed()
        {
            return Ok(link.clone());
        }
        const STOPPED: &str = "the upstream was stopped (a config reload removed or replaced it, \
                               or the proxy is stopping)";
        if self.shutdown.is_cancelled() {
            return Err(STOPPED.to_owned());
        }
        let mut rx = self.state.subscribe();
        if matches!(&*rx.borrow(), LinkState::Failed(_)) {
            return supervisor::start_for_call(self, rx).await;
        }
        let failing = self.failing.load(Ordering::Relaxed);
        if failing >= 2
            && let LinkState::Down(why) = &*rx.borrow()
        {
            return Err(format!(
                "the upstream keeps crashing right after it starts ({failing} times in a row); it is restarted on backoff: {why}"
            ));
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
    pub(crate) fn probe_every(&self) -> Duration {
        Duration::from_millis(self.probe_ms.load(Ordering::Relaxed))
    }

    /// Tells the model the truth about a call that failed because the upstream is down for
    /// good (until a probe brings it back): the server is down, so calling again at once
    /// fails the same way; `retryAfterMs` says when the next probe is.
    pub(crate) fn explain_down(&self, llm: &mut steadfast::LlmError) {
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
    pub(crate) fn is_down(&self) -> bool {
        matches!(&*self.state.borrow(), LinkState::Failed(_))
    }

    /// The live connection now, without waiting for one (a list that gathers several upstreams
    /// skips one that is down rather than wait for it).
    pub(crate) fn live_link(&self) -> Option<Arc<Link>> {
        match &*self.state.borrow() {
            LinkState::Up(link) if !link.is_closed() => Some(link.clone()),
            _ => None,
        }
    }

    /// Why the upstream is not connected now (`None` when it is).
    pub(crate) fn down_reason(&self) -> Option<String> {
        match &*self.state.borrow() {
            LinkState::Down(why) | LinkState::Failed(why) => Some(why.to_string()),
            LinkState::Up(_) => None,
        }
    }

    /// Waits up to `bound` for the first connection; the reason it is down otherwise. An
    /// upstream that cannot start ([`LinkState::Failed`]) is not waited for.
    pub(crate) async fn wait_connected(&self, bound: Duration) -> Result<(), String> {
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

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }
}

/// What a server said of one of its tools in `tools/list`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ToolFacts {
    /// Listed on the server's latest list (per-tool state is kept only for those).
    pub(crate) listed: bool,
    /// `readOnlyHint`, as last listed.
    pub(crate) read_only: bool,
    /// `idempotentHint`, as last listed.
    pub(crate) idempotent: bool,
}

#[cfg(test)]
mod routing_tests;
