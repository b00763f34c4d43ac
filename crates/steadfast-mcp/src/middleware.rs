//! Server-side middleware: resilient `tools/call` for any rmcp [`ServerHandler`].

use std::borrow::Cow;
use std::collections::HashMap;

use rmcp::model::{
    CallToolRequest, ClientNotification, ClientRequest, ProtocolVersion, ServerConfig, ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, Service};
use rmcp::{ErrorData, ServerHandler, ServiceError};
use steadfast::{BreakerConfig, BreakerRegistry, BudgetConfig, Metrics, RetryBudget};

use crate::call::ToolCall;
use crate::client::ToolAnswer;
use crate::failure::CallFailure;
use crate::policy::ToolPolicy;

/// Wraps a [`ServerHandler`] so every `tools/call` runs under a [`ToolPolicy`] (the default
/// or the tool's own), a breaker per tool, an optional retry budget shared by all tools, and
/// per-tool [`Metrics`]. Everything else passes straight through.
///
/// It takes the handler itself, not a service, so the retry step is always innermost: nothing
/// can sit between it and the tool and turn one attempt into several. Replay safety comes from
/// the tool's annotations as reported by [`ServerHandler::get_tool`] (what `#[tool_handler]`
/// generates), unless the policy says otherwise.
///
/// ```no_run
/// use rmcp::{ServerHandler, ServiceExt, transport::stdio};
/// use steadfast_mcp::Resilient;
///
/// #[derive(Clone)]
/// struct MyServer;
/// impl ServerHandler for MyServer {}
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let server = Resilient::new(MyServer).serve(stdio()).await?;
/// server.waiting().await?;
/// # Ok(()) }
/// ```
pub struct Resilient<H> {
    inner: H,
    default: ToolPolicy,
    tools: HashMap<String, ToolPolicy>,
    breakers: Option<BreakerRegistry>,
    budget: Option<RetryBudget>,
    metrics: Metrics,
}

impl<H> std::fmt::Debug for Resilient<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resilient")
            .field("default", &self.default)
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl<H: ServerHandler> Resilient<H> {
    /// Wraps `handler` with the default tool policy, a default breaker per tool, and no budget.
    ///
    /// See [`Resilient`] for an example.
    pub fn new(handler: H) -> Self {
        Self {
            inner: handler,
            default: ToolPolicy::default(),
            tools: HashMap::new(),
            breakers: Some(BreakerRegistry::new(BreakerConfig::default())),
            budget: None,
            metrics: Metrics::new(),
        }
    }

    /// The policy for tools without their own.
    pub fn default_policy(mut self, policy: ToolPolicy) -> Self {
        self.default = policy;
        self
    }

    /// The policy for the tool named `tool`.
    pub fn tool_policy(mut self, tool: impl Into<String>, policy: ToolPolicy) -> Self {
        self.tools.insert(tool.into(), policy);
        self
    }

    /// A breaker per tool with this configuration, or none.
    pub fn breakers(mut self, config: Option<BreakerConfig>) -> Self {
        self.breakers = config.map(BreakerRegistry::new);
        self
    }

    /// A retry budget shared by every tool of this server.
    pub fn budget(mut self, config: BudgetConfig) -> Self {
        self.budget = Some(RetryBudget::new(config));
        self
    }

    /// Counts into this registry (share it with a health endpoint).
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The wrapped handler.
    pub fn inner(&self) -> &H {
        &self.inner
    }

    async fn call_tool(
        &self,
        request: CallToolRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let name = request.params.name.to_string();
        let policy = self.tools.get(&name).unwrap_or(&self.default);
        let annotations = self.inner.get_tool(&name).and_then(|t| t.annotations);
        let idle = policy.idle_timeout();
        let answer = ToolCall::new(&name, policy)
            .replays_ambiguous(policy.replays_ambiguous(annotations.as_ref()))
            .breaker(self.breakers.as_ref().map(|r| r.get(&name)))
            .budget(self.budget.clone())
            .metrics(Some(self.metrics.tool(&name)))
            .run_answer(&context.ct.clone(), |_| {
                let req = ClientRequest::CallToolRequest(request.clone());
                let ctx = context.clone();
                async move {
                    let call = Service::handle_request(&self.inner, req, ctx);
                    let out = match idle {
                        Some(limit) => tokio::time::timeout(limit, call).await.map_err(|_| {
                            CallFailure::Lost(ServiceError::Timeout { timeout: limit })
                        })?,
                        None => call.await,
                    };
                    match out {
                        Ok(ServerResult::CallToolResult(r)) => Ok(ToolAnswer::Result(r)),
                        Ok(other) => Ok(ToolAnswer::Other(Box::new(other))),
                        Err(e) => Err(CallFailure::Rpc(e)),
                    }
                }
            })
            .await;
        Ok(match answer {
            ToolAnswer::Result(r) => ServerResult::CallToolResult(r),
            ToolAnswer::Other(other) => *other,
        })
    }
}

impl<H: ServerHandler> Service<RoleServer> for Resilient<H> {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        match request {
            ClientRequest::CallToolRequest(r) => self.call_tool(r, context).await,
            other => Service::handle_request(&self.inner, other, context).await,
        }
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Service::handle_notification(&self.inner, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerHandler::get_info(&self.inner)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        ServerHandler::supported_protocol_versions(&self.inner)
    }
}
