//! A synaptic [`AgentMiddleware`] whose `wrap_tool_call` is Steadfast's engine.
//!
//! synaptic's `ToolRetryMiddleware` retries every error — a missing tool, bad arguments, a
//! refused call limit — after `base_delay · 2ⁿ` with no jitter, no cap, no breaker and no
//! budget. [`ToolRetry`] keeps its constructor (`new(max_retries)`, `with_base_delay`) and
//! its schedule's envelope, and adds what it lacks:
//!
//! | `ToolRetryMiddleware` | [`ToolRetry`] |
//! |---|---|
//! | `new(3)`: 4 attempts | `new(3)`: `max_attempts = 4` |
//! | base delay 100 ms, doubling | `base_delay = 100 ms`, exponential ×2 |
//! | no cap (3 retries wait 100, 200, 400 ms) | `max_delay` = the longest of those waits (400 ms) |
//! | no jitter | full jitter within that envelope |
//! | retries every error | retries transient ones only (see [`classify_synaptic`]) |
//! | — | breaker per tool or dependency, retry budget, call limit ([`ToolRetry::with_guard`]) |
//! | gives up with the last error | gives up with the sanitized [`LlmError`](steadfast::LlmError) |
//!
//! # What the model sees when a call fails for good
//! synaptic's `ToolNode` turns a tool's `Err` into an error of the whole graph run: the agent
//! stops and the model never reads it. So by default ([`FailureMode::LlmError`]) a call that
//! fails for good returns `Ok` with the `LlmError` JSON, which the tool node hands to the model
//! as the tool message; [`FailureMode::Error`] returns `Err(SynapticError::Tool(..))` with the
//! sanitized one-line form instead.
//!
//! # Call limits
//! synaptic's documentation says that with `ToolCallLimitMiddleware` listed before
//! `ToolRetryMiddleware`, "each retry counts as a separate tool call". In synaptic 0.4 it does
//! not: the first middleware in the list is the outermost, so the limit sees one call and the
//! retries happen inside it. To count retries:
//! - give the guard a [`CallLimit`](steadfast::CallLimit) ([`GuardBuilder::call_limit`]):
//!   every attempt is counted, and a refused one is not made and not retried; or
//! - list synaptic's `ToolCallLimitMiddleware` *after* [`ToolRetry`], so every attempt passes
//!   through it; its refusal (`MaxStepsExceeded`) is permanent here, so it is not retried.
//!
//! [`GuardBuilder::call_limit`]: crate::GuardBuilder::call_limit

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use steadfast::{
    Backoff, Classify, ErrorClass, ErrorCode, ErrorKind, FailureMode, Jitter, RetryPolicy,
    classify_message,
};
use synaptic_core::SynapticError;
use synaptic_middleware::{AgentMiddleware, ToolCallRequest, ToolCaller};

use crate::Guard;

/// How a [`SynapticError`] classifies: `RateLimit` and `Timeout` are transient; the text of
/// `Tool`, `Mcp`, `Model` and the other free-text variants is read for a status or a phrase
/// (`"HTTP 503"`, `"connection reset"`) and is otherwise unknown; a missing tool, bad
/// arguments, a parse or validation failure, a security refusal and `MaxStepsExceeded` (a call
/// limit) are permanent, and a limit's refusal never counts against a breaker.
///
/// ```
/// use synaptic_core::SynapticError;
/// use steadfast::ErrorKind;
/// use steadfast_agents::synaptic::classify_synaptic;
///
/// assert_eq!(classify_synaptic(&SynapticError::RateLimit("slow down".into())).kind, ErrorKind::RateLimited);
/// assert_eq!(classify_synaptic(&SynapticError::Tool("HTTP 503 from backend".into())).kind, ErrorKind::Retriable);
/// assert_eq!(classify_synaptic(&SynapticError::Validation("city is required".into())).kind, ErrorKind::NonRetriable);
/// assert_eq!(classify_synaptic(&SynapticError::MaxStepsExceeded { max_steps: 3 }).kind, ErrorKind::NonRetriable);
/// ```
pub fn classify_synaptic(e: &SynapticError) -> ErrorClass {
    use SynapticError as S;
    let permanent = || ErrorClass::non_retriable(ErrorCode::CLIENT_ERROR);
    let class = match e {
        S::RateLimit(m) => classify_message(m)
            .filter(|c| c.kind == ErrorKind::RateLimited)
            .unwrap_or_else(|| ErrorClass::new(ErrorKind::RateLimited, ErrorCode::RATE_LIMITED)),
        S::Timeout(_) => ErrorClass::timeout(),
        S::MaxStepsExceeded { .. } => {
            ErrorClass::non_retriable(ErrorCode::TOOL_CALL_LIMIT).with_breaker_failure(false)
        }
        S::ToolNotFound(_) | S::Validation(_) | S::Parsing(_) | S::Prompt(_) | S::Config(_) => {
            permanent()
        }
        S::Security(_) => permanent().with_breaker_failure(false),
        other => classify_message(&other.to_string()).unwrap_or_else(ErrorClass::unknown),
    };
    class.with_message(e.to_string())
}

/// A [`SynapticError`] the engine can classify (the orphan rule keeps [`Classify`] off
/// synaptic's own type).
#[derive(Debug)]
struct Classified(SynapticError);

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Classify for Classified {
    fn classify(&self) -> ErrorClass {
        classify_synaptic(&self.0)
    }
}

/// A drop-in for synaptic's `ToolRetryMiddleware` that runs each tool call under a
/// Steadfast [`Guard`]; see the [module docs](self) for the mapping of its defaults.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use synaptic_middleware::{AgentMiddleware, MiddlewareChain};
/// use steadfast_agents::synaptic::ToolRetry;
///
/// // Where synaptic's docs write `Arc::new(ToolRetryMiddleware::new(3))`:
/// let retry: Arc<dyn AgentMiddleware> = Arc::new(ToolRetry::new(3).with_base_delay(Duration::from_millis(500)));
/// let chain = MiddlewareChain::new(vec![retry]);
/// # let _ = chain;
/// ```
#[derive(Debug, Clone)]
pub struct ToolRetry {
    max_retries: usize,
    base_delay: Duration,
    policy: Option<RetryPolicy>,
    guard: Guard,
    mode: FailureMode,
}

impl ToolRetry {
    /// Up to `max_retries` retries (`max_retries + 1` attempts), as `ToolRetryMiddleware::new`.
    pub fn new(max_retries: usize) -> Self {
        Self {
            max_retries,
            base_delay: Duration::from_millis(100),
            policy: None,
            guard: Guard::builder().build(),
            mode: FailureMode::LlmError,
        }
    }

    /// The first retry's delay before jitter (default 100 ms), doubling after each, as
    /// `ToolRetryMiddleware::with_base_delay`.
    pub fn with_base_delay(mut self, delay: Duration) -> Self {
        self.base_delay = delay;
        self
    }

    /// Replaces the policy built from `max_retries` and the base delay altogether.
    pub fn with_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Runs calls under `guard`: its breakers, budgets, call limit, metrics, and per-tool
    /// policies (which win over this middleware's policy).
    pub fn with_guard(mut self, guard: Guard) -> Self {
        self.guard = guard;
        self
    }

    /// What a call that failed for good returns (default [`FailureMode::LlmError`]).
    pub fn with_failure_mode(mut self, mode: FailureMode) -> Self {
        self.mode = mode;
        self
    }

    /// The policy a tool without its own runs under.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = steadfast_agents::synaptic::ToolRetry::new(3).policy();
    /// assert_eq!(p.max_attempts(), 4);
    /// assert_eq!((p.base_delay(), p.max_delay()), (Duration::from_millis(100), Duration::from_millis(400)));
    /// ```
    pub fn policy(&self) -> RetryPolicy {
        if let Some(p) = &self.policy {
            return p.clone();
        }
        let attempts = u32::try_from(self.max_retries)
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        // synaptic's longest wait: base · 2^(max_retries - 1).
        let doublings = attempts.saturating_sub(2).min(20);
        let longest = self.base_delay.saturating_mul(1 << doublings);
        let builder = RetryPolicy::builder()
            .max_attempts(attempts)
            .jitter(Jitter::Full);
        let builder = if self.base_delay.is_zero() {
            builder.backoff(Backoff::None)
        } else {
            builder
                .backoff(Backoff::Exponential)
                .base_delay(self.base_delay)
                .max_delay(longest)
        };
        // Every value above is in range; the fallback only guards a future validation rule.
        builder.build().unwrap_or_default()
    }
}

#[async_trait]
impl AgentMiddleware for ToolRetry {
    async fn wrap_tool_call(
        &self,
        request: ToolCallRequest,
        next: &dyn ToolCaller,
    ) -> Result<Value, SynapticError> {
        let tool = request.call.name.clone();
        let policy = self.policy();
        let result = self
            .guard
            .run_with(&tool, Some(&policy), |_| {
                let request = request.clone();
                async move { next.call(request).await.map_err(Classified) }
            })
            .await;
        match result {
            Ok(v) => Ok(v),
            Err(e) => {
                let llm = e.to_llm_error(&tool);
                match self.mode {
                    FailureMode::LlmError => Ok(llm.to_json()),
                    FailureMode::Error => Err(SynapticError::Tool(llm.to_string())),
                }
            }
        }
    }
}
