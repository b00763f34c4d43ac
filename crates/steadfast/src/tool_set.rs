//! A set of named tools wrapped at once.
//!
//! An agent framework holds tools as a map from name to "JSON in, JSON out". [`ToolSet`] wraps
//! such a map in one place: each tool runs under the set's default policy or its own override,
//! behind a circuit breaker of its own or one shared with the other tools of the same
//! dependency (two tools backed by one database should trip together), with an optional retry
//! budget per dependency, and per-tool [`Metrics`]. When a call fails for good, the set either
//! returns the error tagged with the tool's name ([`FailureMode::Error`]) or hands back the
//! sanitized [`LlmError`] JSON as the tool's result ([`FailureMode::LlmError`]), which is what a
//! model loop usually wants: the model reads it and decides what to do.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument;

use crate::{
    BreakerConfig, BreakerRegistry, BudgetConfig, CancellationToken, CircuitBreaker, Classify,
    ErrorClass, LlmError, LlmErrorCode, Metrics, Retry, RetryBudget, RetryError, RetryPolicy,
};

/// The boxed future a tool returns.
pub type ToolFuture<E> = Pin<Box<dyn Future<Output = Result<Value, E>> + Send>>;

type ToolFn<E> = Arc<dyn Fn(Value) -> ToolFuture<E> + Send + Sync>;

/// What a [`ToolSet`] returns when a call fails for good.
///
/// ```
/// assert_eq!(steadfast::FailureMode::default(), steadfast::FailureMode::Error);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FailureMode {
    /// `Err(ToolError)`, keeping the original error (the reference's `throw`).
    #[default]
    Error,
    /// `Ok(json)` holding the [`LlmError`] (the reference's `return-error`).
    LlmError,
}

/// How one tool differs from the set's defaults.
///
/// ```
/// use steadfast::{RetryPolicy, ToolOptions};
/// let opts = ToolOptions::new()
///     .policy(RetryPolicy::no_retry())
///     .dependency("postgres");
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Default)]
pub struct ToolOptions {
    policy: Option<RetryPolicy>,
    dependency: Option<String>,
    breaker: Option<BreakerConfig>,
    no_breaker: bool,
}

impl ToolOptions {
    /// The set's defaults.
    ///
    /// See [`ToolOptions`] for an example.
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses this policy instead of the set's default.
    ///
    /// See [`ToolOptions`] for an example.
    pub fn policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Shares the breaker and budget named `name` with every tool of the same dependency,
    /// instead of having its own.
    ///
    /// See [`ToolOptions`] for an example.
    pub fn dependency(mut self, name: impl Into<String>) -> Self {
        self.dependency = Some(name.into());
        self
    }

    /// Configures this tool's breaker (or its dependency's, with [`dependency`](Self::dependency)).
    ///
    /// ```
    /// let cfg = steadfast::BreakerConfig::builder().failure_threshold(2).build().unwrap();
    /// let _ = steadfast::ToolOptions::new().breaker(cfg);
    /// ```
    pub fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = Some(config);
        self
    }

    /// No breaker for this tool.
    ///
    /// ```
    /// let _ = steadfast::ToolOptions::new().no_breaker();
    /// ```
    pub fn no_breaker(mut self) -> Self {
        self.no_breaker = true;
        self
    }
}

/// Builds a [`ToolSet`]; see there for an example.
pub struct ToolSetBuilder<E> {
    policy: RetryPolicy,
    breaker: Option<BreakerConfig>,
    budget: Option<BudgetConfig>,
    mode: FailureMode,
    metrics: Metrics,
    tools: Vec<(String, ToolOptions, ToolFn<E>)>,
}

impl<E> fmt::Debug for ToolSetBuilder<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSetBuilder")
            .field("policy", &self.policy)
            .field("mode", &self.mode)
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.0).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Why a [`ToolSet`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolSetError {
    /// Two tools were registered under one name.
    #[error("tool set: tool `{0}` is registered twice")]
    Duplicate(String),
    /// A tool name was empty.
    #[error("tool set: tool names must not be empty")]
    EmptyName,
}

impl<E> ToolSetBuilder<E>
where
    E: Classify + fmt::Display + Send + Sync + 'static,
{
    /// The policy for tools without their own (default: [`RetryPolicy::default`]).
    ///
    /// See [`ToolSet`] for an example.
    pub fn default_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The breaker configuration for tools without their own (default:
    /// [`BreakerConfig::default`]).
    ///
    /// See [`ToolSet`] for an example.
    pub fn default_breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = Some(config);
        self
    }

    /// Gives each dependency (each tool, unless tools share a dependency) a retry budget.
    ///
    /// ```
    /// let set = steadfast::ToolSet::<std::io::Error>::builder()
    ///     .budget(steadfast::BudgetConfig::default())
    ///     .build()
    ///     .unwrap();
    /// assert!(set.names().is_empty());
    /// ```
    pub fn budget(mut self, config: BudgetConfig) -> Self {
        self.budget = Some(config);
        self
    }

    /// What a failed call returns (default: [`FailureMode::Error`]).
    ///
    /// See [`ToolSet`] for an example.
    pub fn mode(mut self, mode: FailureMode) -> Self {
        self.mode = mode;
        self
    }

    /// Counts into this registry instead of a fresh one (to share it with a health check).
    ///
    /// ```
    /// let metrics = steadfast::Metrics::new();
    /// let set = steadfast::ToolSet::<std::io::Error>::builder().metrics(metrics.clone()).build().unwrap();
    /// # let _ = set;
    /// ```
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Adds a tool with the set's defaults.
    ///
    /// See [`ToolSet`] for an example.
    pub fn tool<F, Fut>(self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, E>> + Send + 'static,
    {
        self.tool_with(name, ToolOptions::new(), f)
    }

    /// Adds a tool with its own options.
    ///
    /// See [`ToolSet`] for an example.
    pub fn tool_with<F, Fut>(mut self, name: impl Into<String>, options: ToolOptions, f: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, E>> + Send + 'static,
    {
        let f: ToolFn<E> = Arc::new(move |args| Box::pin(f(args)));
        self.tools.push((name.into(), options, f));
        self
    }

    /// Builds the set: rejects empty and duplicate names, and creates breakers and budgets.
    ///
    /// See [`ToolSet`] for an example.
    pub fn build(self) -> Result<ToolSet<E>, ToolSetError> {
        let mut registry = BreakerRegistry::new(self.breaker.clone().unwrap_or_default());
        for (name, opts, _) in &self.tools {
            if let Some(cfg) = &opts.breaker {
                registry =
                    registry.with_config(opts.dependency.as_deref().unwrap_or(name), cfg.clone());
            }
        }
        let mut budgets: HashMap<String, RetryBudget> = HashMap::new();
        let mut tools = HashMap::new();
        for (name, opts, f) in self.tools {
            if name.is_empty() {
                return Err(ToolSetError::EmptyName);
            }
            if tools.contains_key(&name) {
                return Err(ToolSetError::Duplicate(name));
            }
            let key = opts.dependency.clone().unwrap_or_else(|| name.clone());
            let mut retry = Retry::new(opts.policy.unwrap_or_else(|| self.policy.clone()))
                .name(name.clone())
                // The set opens the span itself, so that a call limit and an unknown tool land
                // on it too.
                .in_caller_span()
                .metrics(self.metrics.tool(&name));
            if !opts.no_breaker {
                retry = retry.breaker(registry.get(&key));
            }
            if let Some(cfg) = &self.budget {
                let budget = budgets
                    .entry(key.clone())
                    .or_insert_with(|| RetryBudget::new(cfg.clone()));
                retry = retry.budget(budget.clone());
            }
            tools.insert(name, Tool { f, retry, key });
        }
        Ok(ToolSet {
            inner: Arc::new(Inner {
                tools,
                mode: self.mode,
                metrics: self.metrics,
                breakers: registry,
            }),
        })
    }
}

struct Tool<E> {
    f: ToolFn<E>,
    retry: Retry<Value, E>,
    key: String,
}

struct Inner<E> {
    tools: HashMap<String, Tool<E>>,
    mode: FailureMode,
    metrics: Metrics,
    breakers: BreakerRegistry,
}

/// Named async tools, each wrapped in retries, a breaker and metrics. Cloning shares the set.
///
/// ```
/// use std::time::Duration;
/// use serde_json::{Value, json};
/// use steadfast::{ErrorClass, FailureMode, RetryPolicy, ToolOptions, ToolSet};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let set = ToolSet::builder()
///     .default_policy(RetryPolicy::builder().max_attempts(3).build().unwrap())
///     .mode(FailureMode::LlmError)
///     .tool("echo", |args: Value| async move { Ok::<_, ErrorClass>(args) })
///     .tool_with(
///         "lookup",
///         ToolOptions::new().policy(RetryPolicy::no_retry()),
///         |_args| async { Err(ErrorClass::from_status(404)) },
///     )
///     .build()
///     .unwrap();
///
/// assert_eq!(set.call("echo", json!({"x": 1})).await.unwrap(), json!({"x": 1}));
/// let failed = set.call("lookup", json!({"id": 7})).await.unwrap();
/// assert_eq!(failed["code"], "INVALID_REQUEST");
/// assert_eq!(failed["tool"], "lookup");
/// assert_eq!(set.metrics().snapshot().tools["lookup"].calls, 1);
/// # }
/// ```
pub struct ToolSet<E> {
    inner: Arc<Inner<E>>,
}

impl<E> Clone for ToolSet<E> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<E> fmt::Debug for ToolSet<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<_> = self.inner.tools.keys().collect();
        names.sort();
        f.debug_struct("ToolSet")
            .field("tools", &names)
            .field("mode", &self.inner.mode)
            .finish()
    }
}

impl<E> ToolSet<E>
where
    E: Classify + fmt::Display + Send + Sync + 'static,
{
    /// An empty builder.
    ///
    /// See [`ToolSet`] for an example.
    pub fn builder() -> ToolSetBuilder<E> {
        ToolSetBuilder {
            policy: RetryPolicy::default(),
            breaker: None,
            budget: None,
            mode: FailureMode::default(),
            metrics: Metrics::new(),
            tools: Vec::new(),
        }
    }

    /// The tools' names, sorted.
    ///
    /// See [`ToolSetBuilder::budget`] for an example.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.inner.tools.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// The set's metrics registry.
    ///
    /// See [`ToolSet`] for an example.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The breaker guarding `tool`, if it has one.
    ///
    /// ```
    /// use serde_json::Value;
    /// let set = steadfast::ToolSet::builder()
    ///     .tool("a", |v: Value| async move { Ok::<_, std::io::Error>(v) })
    ///     .build()
    ///     .unwrap();
    /// assert!(set.breaker("a").is_some());
    /// assert!(set.breaker("missing").is_none());
    /// ```
    pub fn breaker(&self, tool: &str) -> Option<CircuitBreaker> {
        let t = self.inner.tools.get(tool)?;
        t.retry
            .has_breaker()
            .then(|| self.inner.breakers.get(&t.key))
    }

    /// Every breaker's state, by tool or dependency name.
    ///
    /// See [`ToolSet`] for an example.
    pub fn breaker_stats(&self) -> BTreeMap<String, crate::BreakerStats> {
        self.inner.breakers.stats()
    }

    /// Calls `tool` with `args` under its policy. See [`FailureMode`] for what a failure
    /// returns; an unknown tool fails as [`ToolErrorKind::UnknownTool`] (or, in
    /// [`FailureMode::LlmError`], an `INVALID_REQUEST` error naming the tool).
    ///
    /// See [`ToolSet`] for an example.
    pub async fn call(&self, tool: &str, args: Value) -> Result<Value, ToolError<E>> {
        self.call_inner(tool, args, None)
            .instrument(tool_span(tool))
            .await
    }

    /// [`call`](Self::call), stopping when `cancel` fires.
    ///
    /// ```
    /// use serde_json::{Value, json};
    /// use steadfast::{CancellationToken, ToolSet};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let set = ToolSet::builder()
    ///     .tool("a", |v: Value| async move { Ok::<_, std::io::Error>(v) })
    ///     .build()
    ///     .unwrap();
    /// let cancel = CancellationToken::new();
    /// cancel.cancel();
    /// let err = set.call_cancellable("a", json!(1), &cancel).await.unwrap_err();
    /// assert_eq!(err.to_llm_error().code, steadfast::LlmErrorCode::Cancelled);
    /// # }
    /// ```
    pub async fn call_cancellable(
        &self,
        tool: &str,
        args: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, ToolError<E>> {
        self.call_inner(tool, args, Some(cancel))
            .instrument(tool_span(tool))
            .await
    }

    async fn call_inner(
        &self,
        tool: &str,
        args: Value,
        cancel: Option<&CancellationToken>,
    ) -> Result<Value, ToolError<E>> {
        let Some(t) = self.inner.tools.get(tool) else {
            record_error_type(LlmErrorCode::InvalidRequest);
            return self.fail(ToolError {
                tool: tool.to_owned(),
                kind: ToolErrorKind::UnknownTool,
            });
        };
        let op = |_| (t.f)(args.clone());
        let result = match cancel {
            Some(c) => t.retry.cancel_on(c).run(op).await,
            None => t.retry.run(op).await,
        };
        result.or_else(|e| {
            self.fail(ToolError {
                tool: tool.to_owned(),
                kind: ToolErrorKind::Failed(e),
            })
        })
    }

    /// [`call`](Self::call) under a [`CallLimit`](crate::CallLimit): every attempt counts
    /// against `keys` (the tool's name is added when `keys` names none). The first attempt is
    /// counted before the retry loop starts; a retry that would cross a cap is not made, and the
    /// call ends with `TOOL_CALL_LIMIT`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use serde_json::{Value, json};
    /// use steadfast::{CallKeys, CallLimit, FailureMode, ToolSet};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let set = ToolSet::builder()
    ///     .mode(FailureMode::LlmError)
    ///     .tool("echo", |v: Value| async move { Ok::<_, std::io::Error>(v) })
    ///     .build()
    ///     .unwrap();
    /// let limit = CallLimit::builder().per_tool(1, Duration::from_secs(3600)).build().unwrap();
    /// let session = CallKeys::new().session("s-1");
    /// assert_eq!(set.call_limited(&limit, &session, "echo", json!(1)).await.unwrap(), json!(1));
    /// let refused = set.call_limited(&limit, &session, "echo", json!(2)).await.unwrap();
    /// assert_eq!(refused["code"], "TOOL_CALL_LIMIT");
    /// # }
    /// ```
    pub async fn call_limited<C: crate::CallCounter>(
        &self,
        limit: &crate::CallLimit<C>,
        keys: &crate::CallKeys,
        tool: &str,
        args: Value,
    ) -> Result<Value, ToolError<E>> {
        self.call_limited_inner(limit, keys, tool, args)
            .instrument(tool_span(tool))
            .await
    }

    async fn call_limited_inner<C: crate::CallCounter>(
        &self,
        limit: &crate::CallLimit<C>,
        keys: &crate::CallKeys,
        tool: &str,
        args: Value,
    ) -> Result<Value, ToolError<E>> {
        let Some(t) = self.inner.tools.get(tool) else {
            return self.call_inner(tool, args, None).await;
        };
        let keys = match keys.tool_name() {
            Some(_) => keys.clone(),
            None => keys.clone().tool(tool),
        };
        let refuse = |e| {
            tracing::info!(steadfast.tool = tool, "steadfast.call_limit.reached");
            record_error_type(LlmErrorCode::ToolCallLimit);
            self.fail(ToolError {
                tool: tool.to_owned(),
                kind: ToolErrorKind::CallLimit(e),
            })
        };
        if let Err(e) = limit.acquire(&keys).await {
            return refuse(e);
        }
        // A refused retry ends the loop through cancellation: the engine stops without making
        // the attempt, and the refusal below replaces the cancellation.
        let stop = CancellationToken::new();
        let refused = std::sync::Mutex::new(None);
        let op = |n: u32| {
            let (keys, stop, refused, args) = (&keys, &stop, &refused, args.clone());
            async move {
                if n > 1
                    && let Err(e) = limit.acquire(keys).await
                {
                    *refused.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    stop.cancel();
                    std::future::pending::<()>().await;
                }
                (t.f)(args).await
            }
        };
        let result = t.retry.cancel_on(&stop).run(op).await;
        if let Some(e) = refused.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return refuse(e);
        }
        result.or_else(|e| {
            self.fail(ToolError {
                tool: tool.to_owned(),
                kind: ToolErrorKind::Failed(e),
            })
        })
    }

    fn fail(&self, e: ToolError<E>) -> Result<Value, ToolError<E>> {
        match self.inner.mode {
            FailureMode::Error => Err(e),
            FailureMode::LlmError => Ok(e.to_llm_error().to_json()),
        }
    }
}

/// A failed call to a [`ToolSet`], tagged with the tool's name.
#[derive(Debug)]
pub struct ToolError<E> {
    tool: String,
    kind: ToolErrorKind<E>,
}

/// What went wrong in a [`ToolError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolErrorKind<E> {
    /// No tool has that name.
    UnknownTool,
    /// The call failed for good.
    Failed(RetryError<E>),
    /// A [`CallLimit`](crate::CallLimit) refused the call (or its next retry).
    CallLimit(crate::CallLimitExceeded),
}

impl<E: fmt::Display> ToolError<E> {
    /// The tool that was called.
    ///
    /// See [`ToolError::to_llm_error`] for an example.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// What went wrong.
    ///
    /// See [`ToolError::to_llm_error`] for an example.
    pub fn kind(&self) -> &ToolErrorKind<E> {
        &self.kind
    }

    /// The retry engine's error, unless the tool was unknown.
    ///
    /// See [`ToolError::to_llm_error`] for an example.
    pub fn retry_error(&self) -> Option<&RetryError<E>> {
        match &self.kind {
            ToolErrorKind::Failed(e) => Some(e),
            ToolErrorKind::UnknownTool | ToolErrorKind::CallLimit(_) => None,
        }
    }

    /// The sanitized error for a model, naming the tool.
    ///
    /// ```
    /// use serde_json::json;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let set = steadfast::ToolSet::<std::io::Error>::builder().build().unwrap();
    /// let err = set.call("nope", json!({})).await.unwrap_err();
    /// assert_eq!(err.tool(), "nope");
    /// assert!(err.retry_error().is_none());
    /// assert!(matches!(err.kind(), steadfast::ToolErrorKind::UnknownTool));
    /// assert_eq!(err.to_llm_error().code, steadfast::LlmErrorCode::InvalidRequest);
    /// # }
    /// ```
    pub fn to_llm_error(&self) -> LlmError {
        match &self.kind {
            ToolErrorKind::Failed(e) => e.to_llm_error(&self.tool),
            ToolErrorKind::CallLimit(e) => {
                LlmError::from_class(&e.class()).with_tool(self.tool.clone())
            }
            ToolErrorKind::UnknownTool => {
                let mut e = LlmError::from_class(
                    &ErrorClass::non_retriable(crate::ErrorCode::CLIENT_ERROR)
                        .with_message(format!("unknown tool `{}`", self.tool)),
                )
                .with_tool(self.tool.clone());
                e.code = LlmErrorCode::InvalidRequest;
                e.suggestion = "Call one of the tools that were listed".to_owned();
                e
            }
        }
    }
}

impl<E: fmt::Display> fmt::Display for ToolError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ToolErrorKind::UnknownTool => write!(f, "unknown tool `{}`", self.tool),
            ToolErrorKind::Failed(e) => write!(f, "tool `{}`: {e}", self.tool),
            ToolErrorKind::CallLimit(e) => write!(f, "tool `{}`: {e}", self.tool),
        }
    }
}

impl<E: crate::Classify + fmt::Debug + fmt::Display + 'static> std::error::Error for ToolError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ToolErrorKind::Failed(e) => Some(e),
            ToolErrorKind::CallLimit(e) => Some(e),
            ToolErrorKind::UnknownTool => None,
        }
    }
}

/// The set's span for one call (disabled, and free, when nobody listens).
fn tool_span(tool: &str) -> tracing::Span {
    if crate::trace::listening() {
        crate::trace::execute_tool_span(tool, None)
    } else {
        tracing::Span::none()
    }
}

/// Records why a call failed before or around the engine, which records its own.
fn record_error_type(code: LlmErrorCode) {
    if crate::trace::listening() {
        crate::trace::record_error(&tracing::Span::current(), code.as_str());
    }
}
