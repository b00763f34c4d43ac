//! What governs one tool's calls: the retry policy, per-attempt timeouts, how `isError`
//! results are treated, and whether ambiguous failures may be replayed.

use std::time::Duration;

use rmcp::model::{CallToolResult, ToolAnnotations};
use serde::{Deserialize, Serialize};
use steadfast::{ErrorClass, Limit, PolicyError, RetryPolicy};

use crate::classify::classify_tool_result;

/// Whether a tool result with `isError: true` is retried.
///
/// ```
/// assert_eq!(steadfast_mcp::RetryOnIsError::default(), steadfast_mcp::RetryOnIsError::Transient);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetryOnIsError {
    /// Never: every `isError` result goes to the model as is.
    Never,
    /// Only when its text classifies as transient (429, 5xx, timeouts, resets, "temporarily
    /// unavailable", …). A business failure ("file not found") goes to the model.
    #[default]
    Transient,
    /// Always, whatever the text says.
    Always,
}

impl RetryOnIsError {
    /// The class to retry `result` under, or `None` to hand it to the caller as it is.
    ///
    /// ```
    /// use rmcp::model::{CallToolResult, ContentBlock};
    /// use steadfast_mcp::RetryOnIsError;
    /// let busy = CallToolResult::error(vec![ContentBlock::text("503 Service Unavailable")]);
    /// let missing = CallToolResult::error(vec![ContentBlock::text("no such file")]);
    /// assert!(RetryOnIsError::Transient.judge(&busy).is_some());
    /// assert!(RetryOnIsError::Transient.judge(&missing).is_none());
    /// assert!(RetryOnIsError::Always.judge(&missing).is_some());
    /// assert!(RetryOnIsError::Never.judge(&busy).is_none());
    /// ```
    pub fn judge(self, result: &CallToolResult) -> Option<ErrorClass> {
        let class = classify_tool_result(result)?;
        match self {
            Self::Never => None,
            Self::Transient => class.kind.is_transient().then_some(class),
            Self::Always if class.kind.is_transient() => Some(class),
            Self::Always => Some(
                ErrorClass::retriable(class.code.clone())
                    .with_message(class.message.clone().unwrap_or_default()),
            ),
        }
    }
}

/// How one tool's calls are made and retried.
///
/// The policy's `attempt_timeout` becomes the per-attempt *idle* timeout, sent to the upstream
/// request itself (so the upstream gets `notifications/cancelled` when it fires) and reset
/// whenever the tool reports progress; [`attempt_max`](Self::attempt_max) caps an attempt
/// whatever its progress; the policy's `max_elapsed` bounds the whole call.
///
/// ```
/// use std::time::Duration;
/// use steadfast::RetryPolicy;
/// use steadfast_mcp::ToolPolicy;
/// let p = ToolPolicy::new(
///     RetryPolicy::builder().attempt_timeout(Duration::from_secs(10)).build().unwrap(),
/// ).unwrap();
/// assert_eq!(p.idle_timeout(), Some(Duration::from_secs(10)));
/// assert_eq!(p.engine_policy().attempt_timeout(), None);
/// ```
#[derive(Debug, Clone)]
pub struct ToolPolicy {
    engine: RetryPolicy,
    idle_timeout: Option<Duration>,
    /// Hard cap on one attempt, progress or not.
    pub attempt_max: Option<Duration>,
    /// What to do with `isError` results.
    pub retry_on_is_error: RetryOnIsError,
    /// Replay after an ambiguous failure (timeout, connection lost mid-call)? `None` decides
    /// from the tool's annotations: yes if `readOnlyHint` or `idempotentHint` is true.
    pub retry_ambiguous: Option<bool>,
}

impl Default for ToolPolicy {
    fn default() -> Self {
        Self::new(RetryPolicy::default()).unwrap_or_else(|_| Self {
            engine: RetryPolicy::no_retry(),
            idle_timeout: None,
            attempt_max: None,
            retry_on_is_error: RetryOnIsError::default(),
            retry_ambiguous: None,
        })
    }
}

impl ToolPolicy {
    /// A tool policy from a retry policy, with the defaults for everything MCP-specific.
    ///
    /// See [`ToolPolicy`] for an example.
    pub fn new(retry: RetryPolicy) -> Result<Self, PolicyError> {
        let idle_timeout = retry.attempt_timeout();
        let engine =
            retry.with_overrides(&RetryPolicy::builder().attempt_timeout(Limit::Unlimited))?;
        Ok(Self {
            engine,
            idle_timeout,
            attempt_max: None,
            retry_on_is_error: RetryOnIsError::default(),
            retry_ambiguous: None,
        })
    }

    /// The policy the retry engine runs (the per-attempt timeout moved to the request).
    ///
    /// See [`ToolPolicy`] for an example.
    pub fn engine_policy(&self) -> &RetryPolicy {
        &self.engine
    }

    /// The per-attempt idle timeout, reset by progress.
    ///
    /// See [`ToolPolicy`] for an example.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// Whether a call to a tool with these annotations may be replayed after an ambiguous
    /// failure.
    ///
    /// ```
    /// use rmcp::model::ToolAnnotations;
    /// use steadfast_mcp::ToolPolicy;
    /// let mut read_only = ToolAnnotations::default();
    /// read_only.read_only_hint = Some(true);
    /// let p = ToolPolicy::default();
    /// assert!(p.replays_ambiguous(Some(&read_only)));
    /// assert!(!p.replays_ambiguous(None));
    /// ```
    pub fn replays_ambiguous(&self, annotations: Option<&ToolAnnotations>) -> bool {
        self.retry_ambiguous.unwrap_or_else(|| {
            annotations
                .is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true))
        })
    }
}
