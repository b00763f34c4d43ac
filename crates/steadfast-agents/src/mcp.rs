//! A resilient `call_tool` for rmcp clients.
//!
//! An agent that talks to MCP servers through rmcp gets one `call_tool` per request: a
//! timeout, a closed transport or a `503` in an `isError` result goes straight back to the
//! model. [`McpTools`] makes each call the way the Steadfast gateway makes it, with the same
//! pieces ([`steadfast_mcp::ToolCall`]):
//! - `Timeout` and `TransportClosed` are retriable, JSON-RPC errors are classified (invalid
//!   params, unknown tool and the range MCP reserves for protocol conditions, -32020…-32099,
//!   are permanent; `-32603` is not), and an `isError` result is judged by its text as the
//!   gateway judges it ([`steadfast_mcp::RetryOnIsError`]);
//! - a call whose outcome is unknown — sent, then the connection died or the attempt timed
//!   out — is replayed only if the tool says it is safe (`readOnlyHint` or `idempotentHint`,
//!   learned from `tools/list`); otherwise the model is told the outcome is unknown;
//! - over a [`Reconnecting`] connection, an attempt made while the server restarts is not
//!   sent at all and is retried on the new connection, whatever the tool;
//! - breakers, budgets, metrics and call limits come from the [`Guard`].
//!
//! A call always ends in a [`CallToolResult`]: the tool's own, or an `isError` result carrying
//! the sanitized [`LlmError`](steadfast::LlmError). An `isError` result handed back as it is (a
//! business failure such as "file not found") is sanitized too, as the gateway sanitizes it:
//! tools put tokens and stack traces in their error texts.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::Peer;
use rmcp::model::{CallToolRequestParams, CallToolResult, ToolAnnotations};
use rmcp::service::{RoleClient, RunningService, Service};
use serde_json::Value;
use steadfast::{CancellationToken, PolicyError};
use steadfast_mcp::{
    AttemptLimits, CallFailure, Reconnecting, RetryOnIsError, ToolAnswer, ToolCall, ToolPolicy,
    send_tool_call,
};

use crate::Guard;

type Annotations = HashMap<String, Option<ToolAnnotations>>;

type PeerFuture = Pin<Box<dyn Future<Output = Result<Peer<RoleClient>, CallFailure>> + Send>>;

#[derive(Clone)]
enum Source {
    Peer(Peer<RoleClient>),
    Supervised(Arc<dyn Fn(Duration) -> PeerFuture + Send + Sync>),
}

/// Resilient tool calls to one MCP server, over an rmcp client connection. Cheap to clone.
///
/// ```no_run
/// use rmcp::model::CallToolRequestParams;
/// use steadfast_agents::Guard;
/// use steadfast_agents::mcp::McpTools;
/// use steadfast_mcp::{Reconnecting, Upstream};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let conn = Reconnecting::builder(Upstream::command("npx", ["-y", "some-mcp-server"]), || ())
///     .connect()
///     .await?;
/// let tools = McpTools::reconnecting(&conn)
///     .guard(Guard::builder().default_dependency("some-mcp-server").build());
/// let result = tools.call_tool(CallToolRequestParams::new("search")).await;
/// // The tool's result, or `isError: true` with a sanitized LlmError as its text.
/// # let _ = result; Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpTools {
    source: Source,
    guard: Guard,
    is_error: RetryOnIsError,
    retry_ambiguous: Option<bool>,
    attempt_max: Option<Duration>,
    reconnect_wait: Duration,
    /// Each tool's annotations, once `tools/list` was read.
    annotations: Arc<RwLock<Option<Annotations>>>,
}

impl fmt::Debug for McpTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTools")
            .field("guard", &self.guard)
            .field("is_error", &self.is_error)
            .field("retry_ambiguous", &self.retry_ambiguous)
            .finish_non_exhaustive()
    }
}

impl McpTools {
    fn with_source(source: Source) -> Self {
        Self {
            source,
            guard: Guard::default(),
            is_error: RetryOnIsError::default(),
            retry_ambiguous: None,
            attempt_max: None,
            reconnect_wait: Duration::from_secs(10),
            annotations: Arc::new(RwLock::new(None)),
        }
    }

    /// Calls through `peer`. A peer whose transport closed stays closed: attempts fail as not
    /// sent until the policy gives up. Use [`reconnecting`](Self::reconnecting) to come back.
    pub fn new(peer: Peer<RoleClient>) -> Self {
        Self::with_source(Source::Peer(peer))
    }

    /// Calls through a running client service's peer.
    pub fn running<S: Service<RoleClient>>(service: &RunningService<RoleClient, S>) -> Self {
        Self::new(service.peer().clone())
    }

    /// Calls through a supervised connection, waiting for a reconnection in progress (up to
    /// [`reconnect_wait`](Self::reconnect_wait)) before each attempt.
    pub fn reconnecting<S>(conn: &Reconnecting<S>) -> Self
    where
        S: Service<RoleClient> + Send + Sync + 'static,
    {
        let conn = conn.clone();
        Self::with_source(Source::Supervised(Arc::new(move |wait| {
            let conn = conn.clone();
            Box::pin(async move { conn.peer(wait).await })
        })))
    }

    /// Policies, breakers, budgets, metrics and call limits (default: [`Guard::default`]).
    /// A per-attempt timeout in a policy becomes the request's idle timeout, reset by
    /// progress notifications.
    pub fn guard(mut self, guard: Guard) -> Self {
        self.guard = guard;
        self
    }

    /// How `isError` results are treated (default [`RetryOnIsError::Transient`]).
    pub fn retry_on_is_error(mut self, mode: RetryOnIsError) -> Self {
        self.is_error = mode;
        self
    }

    /// Replay after an ambiguous failure whatever the annotations say (`Some`), or decide from
    /// them (`None`, the default).
    pub fn retry_ambiguous(mut self, replay: Option<bool>) -> Self {
        self.retry_ambiguous = replay;
        self
    }

    /// A hard cap on one attempt, progress or not.
    pub fn attempt_max(mut self, max: Duration) -> Self {
        self.attempt_max = Some(max);
        self
    }

    /// How long an attempt waits for a reconnection in progress (default 10 s).
    pub fn reconnect_wait(mut self, wait: Duration) -> Self {
        self.reconnect_wait = wait;
        self
    }

    async fn peer(&self) -> Result<Peer<RoleClient>, CallFailure> {
        match &self.source {
            Source::Peer(p) => Ok(p.clone()),
            Source::Supervised(get) => get(self.reconnect_wait).await,
        }
    }

    /// Learns (again) the server's tools and their annotations, which decide whether an
    /// ambiguous failure may be replayed. [`call_tool`](Self::call_tool) learns them on first
    /// use; call this after the server said its tool list changed.
    pub async fn refresh_tools(&self) -> Result<Vec<rmcp::model::Tool>, CallFailure> {
        let peer = self.peer().await?;
        let tools = peer.list_all_tools().await.map_err(CallFailure::Lost)?;
        let map = tools
            .iter()
            .map(|t| (t.name.to_string(), t.annotations.clone()))
            .collect();
        *self
            .annotations
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(map);
        Ok(tools)
    }

    async fn annotations(&self, tool: &str) -> Option<ToolAnnotations> {
        let known = |this: &Self| {
            this.annotations
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .as_ref()
                .map(|m| m.get(tool).cloned().flatten())
        };
        if let Some(a) = known(self) {
            return a;
        }
        // Not learned yet. Unknown annotations mean "not safe to replay", so a listing that
        // fails is no worse than none (the next call tries again).
        let _ = self.refresh_tools().await;
        known(self).flatten()
    }

    fn policy(&self, tool: &str) -> Result<ToolPolicy, PolicyError> {
        let mut p = ToolPolicy::new(self.guard.policy_for(tool).clone())?;
        p.retry_on_is_error = self.is_error;
        p.retry_ambiguous = self.retry_ambiguous;
        p.attempt_max = self.attempt_max;
        Ok(p)
    }

    /// Calls a tool under the guard; see the [module docs](self).
    pub async fn call_tool(&self, params: CallToolRequestParams) -> CallToolResult {
        self.call_tool_cancellable(params, &CancellationToken::new())
            .await
    }

    /// [`call_tool`](Self::call_tool), stopping (and telling the server) when `cancel` fires.
    pub async fn call_tool_cancellable(
        &self,
        params: CallToolRequestParams,
        cancel: &CancellationToken,
    ) -> CallToolResult {
        let tool = params.name.to_string();
        let policy = self.policy(&tool).unwrap_or_default();
        let annotations = self.annotations(&tool).await;
        let limits = AttemptLimits {
            idle: policy.idle_timeout(),
            max: policy.attempt_max,
        };
        let (guard, tool_ref) = (&self.guard, tool.as_str());
        let tracked = guard.admit(&tool);
        // Boxed: the engine, the judge and rmcp's request future nest deep, and a caller's stack
        // (a 2 MiB test thread, in debug builds) should not have to hold them.
        let result = Box::pin(ToolCall::new(&tool, &policy)
            .replays_ambiguous(policy.replays_ambiguous(annotations.as_ref()))
            .breaker(guard.breaker(tracked))
            .budget(guard.budget_for(tracked))
            .metrics(Some(guard.metrics().tool(tracked)))
            .seed(guard.seed_value())
            .run(cancel, |_| {
                let params = params.clone();
                async move {
                    guard
                        .acquire(tool_ref)
                        .await
                        .map_err(CallFailure::Limited)?;
                    let peer = self.peer().await?;
                    match send_tool_call(&peer, params, limits, |_| {}).await? {
                        ToolAnswer::Result(r) => Ok(r),
                        // Only a task-augmented call gets another answer, and this client asks
                        // for none: a server bug, for the model to hear about, not to retry.
                        ToolAnswer::Other(_) => Ok(CallToolResult::error(vec![
                            rmcp::model::ContentBlock::text(
                                "the server answered tools/call with something other than a result",
                            ),
                        ])),
                    }
                }
            }))
            .await;
        sanitize_error(result)
    }
}

/// The text and structured content of an `isError` result, sanitized as the gateway does it:
/// a text block holding JSON is walked as JSON, so escapes cannot hide a secret. Success
/// content is the data the model asked for and passes untouched.
fn sanitize_error(result: CallToolResult) -> CallToolResult {
    if result.is_error != Some(true) {
        return result;
    }
    let Ok(mut v) = serde_json::to_value(&result) else {
        return result;
    };
    if let Some(blocks) = v.get_mut("content").and_then(Value::as_array_mut) {
        for block in blocks {
            if let Some(Value::String(text)) = block.get_mut("text") {
                let as_json = serde_json::from_str::<Value>(text)
                    .ok()
                    .filter(|j| j.is_object() || j.is_array());
                *text = match as_json {
                    Some(j) => steadfast::sanitize_json(&j).to_string(),
                    None => steadfast::sanitize(text).into_owned(),
                };
            }
        }
    }
    if let Some(structured) = v.get_mut("structuredContent") {
        *structured = steadfast::sanitize_json(structured);
    }
    serde_json::from_value(v).unwrap_or(result)
}
