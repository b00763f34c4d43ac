//! `steadfast proxy`: an MCP server on stdio that forwards to a supervised upstream, with
//! resilient `tools/call`.
//!
//! Two rmcp services meet here. Downstream, [`Proxy`] serves the client (Claude Desktop,
//! Cursor, any SDK): it answers `initialize` by connecting the upstream with the client's own
//! capabilities and mirroring the upstream's back, runs `tools/call` through
//! [`steadfast_mcp::ToolCall`], and forwards every other request as it is. Upstream,
//! [`UpstreamClient`] forwards the server's notifications (progress, logging, list changes) and
//! requests (sampling, roots, elicitation) back to the client. Progress tokens are rewritten
//! both ways: rmcp gives every upstream request a token of its own, and the proxy maps it back
//! to the token the client chose. The upstream is a [`steadfast_mcp::Reconnecting`] connection:
//! a dead upstream is restarted with backoff, and the client is told its tool list may have
//! changed.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolResult, ClientNotification, ClientRequest, ClientResult, ContentBlock,
    ErrorData, InitializeRequestParams, ProgressToken, ProtocolVersion, ServerConfig,
    ServerNotification, ServerRequest, ServerResult, Tool, ToolAnnotations, ToolsCapability,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RoleServer, Service};
use rmcp::{Peer, ServiceError};
use serde_json::json;
use steadfast::{CancellationToken, CircuitBreaker, Metrics, RetryBudget};
use steadfast_mcp::{
    AttemptLimits, CallFailure, Reconnecting, ToolAnswer, ToolCall, Upstream, send_request,
    send_tool_call,
};

use crate::config::{Config, ResolvedTool};

/// A tool's settings and its breaker, made on first use.
struct ToolEntry {
    settings: ResolvedTool,
    breaker: Option<CircuitBreaker>,
}

struct Shared {
    config: Config,
    upstream: Upstream,
    conn: OnceLock<Reconnecting<UpstreamClient>>,
    downstream: OnceLock<Peer<RoleServer>>,
    client_params: OnceLock<InitializeRequestParams>,
    server_info: RwLock<Option<ServerConfig>>,
    annotations: RwLock<HashMap<String, ToolAnnotations>>,
    tools: Mutex<HashMap<String, Arc<ToolEntry>>>,
    /// Breakers by tool name, or by dependency name for tools that share one.
    breakers: Mutex<HashMap<String, CircuitBreaker>>,
    /// Upstream progress token → the client's token.
    progress: Mutex<HashMap<ProgressToken, ProgressToken>>,
    /// The last progress value relayed per client token: a retried attempt starts its progress
    /// over, and MCP requires progress to increase, so values that do not are held back.
    progress_high: Mutex<HashMap<ProgressToken, f64>>,
    budget: Option<RetryBudget>,
    metrics: Metrics,
}

/// The downstream-facing MCP server.
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

impl Proxy {
    /// A proxy for `upstream` under `config`. Nothing starts until the client initializes.
    pub fn new(config: Config, upstream: Upstream) -> Self {
        let budget = config.budget.clone().map(RetryBudget::new);
        Self {
            shared: Arc::new(Shared {
                config,
                upstream,
                conn: OnceLock::new(),
                downstream: OnceLock::new(),
                client_params: OnceLock::new(),
                server_info: RwLock::new(None),
                annotations: RwLock::default(),
                tools: Mutex::default(),
                breakers: Mutex::default(),
                progress: Mutex::default(),
                progress_high: Mutex::default(),
                budget,
                metrics: Metrics::new(),
            }),
        }
    }
}

impl Shared {
    fn progress_map(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, ProgressToken>> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The client's token for an upstream progress token. The entry is made synchronously
    /// right after the request is queued, long before the upstream can answer; a few yields
    /// cover a scheduler that runs the notification first anyway.
    async fn client_token(&self, upstream: &ProgressToken) -> Option<ProgressToken> {
        for _ in 0..3 {
            if let Some(t) = self.progress_map().get(upstream) {
                return Some(t.clone());
            }
            tokio::task::yield_now().await;
        }
        None
    }

    fn learn_annotations(&self, tools: &[Tool]) {
        let mut ann = self
            .annotations
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for t in tools {
            match &t.annotations {
                Some(a) => ann.insert(t.name.to_string(), a.clone()),
                None => ann.remove(t.name.as_ref()),
            };
        }
    }

    /// Records `value` for `token` if it is higher than anything relayed for it before.
    fn progress_rises(&self, token: &ProgressToken, value: f64) -> bool {
        let mut high = self
            .progress_high
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match high.get(token) {
            Some(last) if value <= *last => false,
            _ => {
                high.insert(token.clone(), value);
                true
            }
        }
    }

    fn tool(&self, name: &str) -> Arc<ToolEntry> {
        let mut tools = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = tools.get(name) {
            return t.clone();
        }
        tools
            .entry(name.to_owned())
            .or_insert_with(|| {
                let settings = self.config.tool(name);
                let breaker = settings.breaker.clone().map(|c| {
                    let key = settings
                        .dependency
                        .clone()
                        .unwrap_or_else(|| name.to_owned());
                    self.breakers
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(key.clone())
                        .or_insert_with(|| CircuitBreaker::named(key, c))
                        .clone()
                });
                Arc::new(ToolEntry { settings, breaker })
            })
            .clone()
    }

    /// Breaker states by tool, or by dependency for tools that share one.
    fn breaker_stats(&self) -> BTreeMap<String, steadfast::BreakerStats> {
        self.breakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, b)| (k.clone(), b.stats()))
            .collect()
    }

    /// The upstream peer, waiting up to `reconnect_wait` for a restart in progress.
    async fn peer(&self) -> Result<Peer<RoleClient>, CallFailure> {
        match self.conn.get() {
            Some(c) => c.peer(self.config.reconnect_wait).await,
            None => Err(CallFailure::NotSent("upstream is not connected".into())),
        }
    }

    /// Starts the upstream with the client's capabilities, supervised for the session.
    async fn start(self: &Arc<Self>) -> Result<(), String> {
        let weak = Arc::downgrade(self);
        let hook = weak.clone();
        let conn = Reconnecting::builder(self.upstream.clone(), move || UpstreamClient {
            shared: weak.clone(),
        })
        .connect_policy(self.config.connect.clone())
        .reconnect_policy(self.config.restart.clone())
        .on_connect(move |peer, again| {
            let shared = hook.clone();
            async move {
                if let Some(shared) = shared.upgrade() {
                    shared.connected(&peer, again).await;
                }
            }
        })
        .connect()
        .await
        .map_err(|e| steadfast::sanitize(&e.to_string()).into_owned())?;
        let _ = self.conn.set(conn);
        Ok(())
    }

    /// After every (re)connection: mirror the server's identity, learn tool annotations (replay
    /// safety must not depend on the client listing tools), and after a restart tell the client
    /// its tool list may have changed.
    async fn connected(&self, peer: &Peer<RoleClient>, again: bool) {
        if let Some(info) = peer.peer_info() {
            let mut config = ServerConfig::new(info.capabilities.clone())
                .with_protocol_version(info.protocol_version.clone());
            if let Some(si) = &info.server_info {
                config = config.with_server_info(si.clone());
            }
            if let Some(i) = &info.instructions {
                config = config.with_instructions(i.clone());
            }
            *self
                .server_info
                .write()
                .unwrap_or_else(PoisonError::into_inner) = Some(config);
        }
        if let Ok(Ok(tools)) =
            tokio::time::timeout(Duration::from_secs(10), peer.list_all_tools()).await
        {
            self.learn_annotations(&tools);
        }
        if again {
            if let Some(down) = self.downstream.get() {
                let _ = down.notify_tool_list_changed().await;
            }
        }
    }

    async fn call_tool(
        self: &Arc<Self>,
        request: CallToolRequest,
        context: RequestContext<RoleServer>,
    ) -> ServerResult {
        let name = request.params.name.to_string();
        if self.config.health_tool.as_deref() == Some(name.as_str()) {
            return ServerResult::CallToolResult(self.health());
        }
        let tool = self.tool(&name);
        let annotations = self
            .annotations
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&name)
            .cloned();
        let policy = &tool.settings.policy;
        let replay = policy.replays_ambiguous(annotations.as_ref());
        let limits = AttemptLimits {
            idle: policy.idle_timeout(),
            max: policy.attempt_max,
        };
        let client_token = context.meta.get_progress_token();
        let answer = ToolCall::new(&name, policy)
            .replays_ambiguous(replay)
            .breaker(tool.breaker.clone())
            .budget(self.budget.clone())
            .metrics(Some(self.metrics.tool(&name)))
            .run_answer(&context.ct, |_| {
                let params = request.params.clone();
                let client_token = client_token.clone();
                let shared = self.clone();
                async move {
                    let peer = shared.peer().await?;
                    let mut upstream_token = None;
                    let out = send_tool_call(&peer, params, limits, |t| {
                        if let Some(c) = client_token {
                            shared.progress_map().insert(t.clone(), c);
                            upstream_token = Some(t.clone());
                        }
                    })
                    .await;
                    if let Some(t) = upstream_token {
                        shared.progress_map().remove(&t);
                    }
                    out
                }
            })
            .await;
        if let Some(t) = &client_token {
            self.progress_high
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(t);
        }
        match answer {
            ToolAnswer::Result(r) => ServerResult::CallToolResult(sanitize_error_text(r)),
            // Task handles and input-required rounds end the call as they are.
            ToolAnswer::Other(other) => *other,
        }
    }

    fn health(&self) -> CallToolResult {
        let report = json!({
            "upstream": {
                "connected": self.conn.get().is_some_and(|c| c.is_connected()),
                "restarts": self.conn.get().map_or(0, |c| c.reconnects()),
            },
            "tools": self.metrics.snapshot().tools,
            "breakers": self.breaker_stats(),
        });
        let mut r = CallToolResult::success(vec![ContentBlock::text(report.to_string())]);
        r.structured_content = Some(report);
        r
    }

    fn health_tool(&self) -> Option<Tool> {
        let name = self.config.health_tool.clone()?;
        let serde_json::Value::Object(schema) = json!({"type": "object", "properties": {}}) else {
            return None;
        };
        Some(
            Tool::new(
                name,
                "Steadfast proxy health: per-tool calls, retries, retry success rate, permanent \
                 failures by code, breaker states and upstream restarts",
                Arc::new(schema),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
        )
    }

    async fn forward(
        &self,
        request: ClientRequest,
        ct: &CancellationToken,
    ) -> Result<ServerResult, ErrorData> {
        let peer = self.peer().await.map_err(failure_error)?;
        // Dropping the send (when the client cancels) tells the upstream to stop.
        tokio::select! {
            r = send_request(&peer, request, AttemptLimits::default(), |_| {}) => r.map_err(failure_error),
            _ = ct.cancelled() => Err(ErrorData::internal_error("cancelled", None)),
        }
    }
}

/// A failed forwarded request, as the other side should see it.
fn failure_error(f: CallFailure) -> ErrorData {
    match f {
        CallFailure::Rpc(e) => service_error(ServiceError::McpError(e)),
        other => {
            ErrorData::internal_error(steadfast::sanitize(&other.to_string()).into_owned(), None)
        }
    }
}

/// A failure to report to the other side. Error text from the upstream may be read by a model,
/// so its message goes through the sanitizer; its code and data are kept.
fn service_error(e: ServiceError) -> ErrorData {
    match e {
        ServiceError::McpError(mut e) => {
            if let std::borrow::Cow::Owned(clean) = steadfast::sanitize(&e.message) {
                e.message = clean.into();
            }
            if let Some(data) = &e.data {
                let text = data.to_string();
                if let std::borrow::Cow::Owned(clean) = steadfast::sanitize(&text) {
                    // Redaction can break the JSON; then the data goes rather than the secret stay.
                    e.data = serde_json::from_str(&clean).ok();
                }
            }
            e
        }
        other => {
            ErrorData::internal_error(steadfast::sanitize(&other.to_string()).into_owned(), None)
        }
    }
}

/// Business failures reach the model as the tool wrote them, minus secrets and internals.
fn sanitize_error_text(mut r: CallToolResult) -> CallToolResult {
    if r.is_error == Some(true) {
        for block in &mut r.content {
            if let Some(t) = block.as_text() {
                let clean = steadfast::sanitize(&t.text);
                if clean != t.text {
                    *block = ContentBlock::text(clean.into_owned());
                }
            }
        }
    }
    r
}

impl Service<RoleServer> for Proxy {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let shared = &self.shared;
        match request {
            ClientRequest::InitializeRequest(req) => {
                let _ = shared.client_params.set(req.params.clone());
                let _ = shared.downstream.set(context.peer.clone());
                shared.start().await.map_err(|e| {
                    ErrorData::internal_error(
                        format!("could not start the upstream server: {e}"),
                        None,
                    )
                })?;
                Ok(ServerResult::InitializeResult(self.get_info()))
            }
            ClientRequest::CallToolRequest(req) => Ok(shared.call_tool(req, context).await),
            ClientRequest::ListToolsRequest(req) => {
                let result = shared
                    .forward(ClientRequest::ListToolsRequest(req), &context.ct)
                    .await?;
                let ServerResult::ListToolsResult(mut list) = result else {
                    return Ok(result);
                };
                shared.learn_annotations(&list.tools);
                if list.next_cursor.is_none() {
                    if let Some(h) = shared.health_tool() {
                        list.tools.push(h);
                    }
                }
                Ok(ServerResult::ListToolsResult(list))
            }
            other => shared.forward(other, &context.ct).await,
        }
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        _context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        match notification {
            // rmcp turns a cancel into the request's token firing; upstream ids differ anyway.
            ClientNotification::CancelledNotification(_)
            | ClientNotification::InitializedNotification(_) => {}
            other => {
                if let Ok(peer) = self.shared.peer().await {
                    let _ = peer.send_notification(other).await;
                }
            }
        }
        Ok(())
    }

    fn get_info(&self) -> ServerConfig {
        let mut info = self
            .shared
            .server_info
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default();
        if self.shared.config.health_tool.is_some() && info.capabilities.tools.is_none() {
            info.capabilities.tools = Some(ToolsCapability::default());
        }
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }
}

/// The upstream-facing MCP client: forwards what the server sends back to the client.
pub struct UpstreamClient {
    shared: std::sync::Weak<Shared>,
}

impl Service<RoleClient> for UpstreamClient {
    async fn handle_request(
        &self,
        request: ServerRequest,
        _context: RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        let Some(down) = self
            .shared
            .upgrade()
            .and_then(|s| s.downstream.get().cloned())
        else {
            return Err(ErrorData::internal_error(
                "the client is not connected",
                None,
            ));
        };
        down.send_request(request).await.map_err(service_error)
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        _context: NotificationContext<RoleClient>,
    ) -> Result<(), ErrorData> {
        let Some(shared) = self.shared.upgrade() else {
            return Ok(());
        };
        let Some(down) = shared.downstream.get().cloned() else {
            return Ok(());
        };
        let notification = match notification {
            ServerNotification::ProgressNotification(mut n) => {
                match shared.client_token(&n.params.progress_token).await {
                    Some(client_token) => {
                        if !shared.progress_rises(&client_token, n.params.progress) {
                            return Ok(());
                        }
                        n.params.progress_token = client_token;
                        ServerNotification::ProgressNotification(n)
                    }
                    // Progress for a request the client did not ask progress for, or that ended.
                    None => return Ok(()),
                }
            }
            // Upstream cancels name upstream ids, which mean nothing downstream.
            ServerNotification::CancelledNotification(_) => return Ok(()),
            other => other,
        };
        let _ = down.send_notification(notification).await;
        Ok(())
    }

    fn get_info(&self) -> InitializeRequestParams {
        // Mirror the client: the upstream sees its capabilities and identity.
        self.shared
            .upgrade()
            .and_then(|s| s.client_params.get().cloned())
            .unwrap_or_default()
    }
}

/// Serves the proxy on stdio until the client disconnects.
pub async fn run(config: Config, upstream: Upstream) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let proxy = Proxy::new(config, upstream);
    let server = proxy.clone().serve(rmcp::transport::stdio()).await?;
    let reason = server.waiting().await;
    if let Some(conn) = proxy.shared.conn.get() {
        conn.shutdown();
    }
    tracing::info!(?reason, "client disconnected");
    // Give the supervisor a moment to stop the child.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}
