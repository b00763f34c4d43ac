//! The error a model receives when a tool call fails for good.
//!
//! A model can act on a failure only if it understands it: whether trying again may help, when,
//! and what to change. A raw error string gives it a stack trace, an internal URL and sometimes a
//! credential. [`LlmError`] is the structured alternative — a stable code, a sanitized message,
//! whether retrying is worthwhile, a concrete suggestion, and when to come back — serialized with
//! the field names of the `tool-call-retry` package (`error`, `code`, `message`, `retriable`,
//! `suggestion`, `tool`, `attemptsMade`, plus `retryAfterMs`).

use std::fmt;
use std::time::Duration;

use crate::{ErrorClass, ErrorKind, Failure, GiveUpReason, RetryError, sanitize};

/// The longest message, in characters, an [`LlmError`] carries; longer ones are cut with `…`.
pub const MAX_MESSAGE_CHARS: usize = 500;

/// What kind of failure the model is looking at.
///
/// ```
/// use steadfast::LlmErrorCode;
/// assert_eq!(serde_json::to_string(&LlmErrorCode::CircuitOpen).unwrap(), "\"CIRCUIT_OPEN\"");
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum LlmErrorCode {
    /// The dependency asked us to slow down.
    RateLimited,
    /// The dependency failed in a way that passes (5xx, network, DNS).
    ServiceUnavailable,
    /// The call took too long.
    Timeout,
    /// The request itself was wrong (4xx, bad arguments, parse errors): retrying as is won't help.
    InvalidRequest,
    /// Nothing more specific is known.
    UnknownError,
    /// A circuit breaker is refusing calls to a dependency that failed repeatedly.
    CircuitOpen,
    /// The caller cancelled the call.
    Cancelled,
    /// A call limit (per session, tool or upstream) was reached: do not call the tool again.
    ToolCallLimit,
    /// The call was sent and failed ambiguously (timed out, lost its connection, or got an
    /// error that may be transient), and it was not repeated because the tool may not be
    /// replayed (not read-only, not idempotent): it may or may not have taken effect. Not
    /// retriable as is — the model should check whether the action happened first. The engine
    /// does not know whether a request was sent, so it never picks this code itself; callers
    /// that do (the MCP layer, the gateway) set it.
    ///
    /// ```
    /// use steadfast::{LlmError, LlmErrorCode};
    /// let e = LlmError::new(LlmErrorCode::OutcomeUnknown);
    /// assert_eq!((e.code.as_str(), e.retriable), ("OUTCOME_UNKNOWN", false));
    /// ```
    OutcomeUnknown,
}

impl LlmErrorCode {
    /// The code as it appears in JSON.
    ///
    /// ```
    /// assert_eq!(steadfast::LlmErrorCode::RateLimited.as_str(), "RATE_LIMITED");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RateLimited => "RATE_LIMITED",
            Self::ServiceUnavailable => "SERVICE_UNAVAILABLE",
            Self::Timeout => "TIMEOUT",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::UnknownError => "UNKNOWN_ERROR",
            Self::CircuitOpen => "CIRCUIT_OPEN",
            Self::Cancelled => "CANCELLED",
            Self::ToolCallLimit => "TOOL_CALL_LIMIT",
            Self::OutcomeUnknown => "OUTCOME_UNKNOWN",
        }
    }

    /// Whether the model may simply call the tool again. False for an invalid request, a
    /// cancelled call, a spent call limit, a call whose outcome is unknown (calling again may
    /// do the action twice), and an open circuit: calling again before the breaker closes is
    /// rejected at once, which is what the suggestion tells the model (`retryAfterMs` says when
    /// to come back).
    ///
    /// ```
    /// assert!(steadfast::LlmErrorCode::Timeout.retriable());
    /// assert!(!steadfast::LlmErrorCode::InvalidRequest.retriable());
    /// assert!(!steadfast::LlmErrorCode::CircuitOpen.retriable());
    /// ```
    pub fn retriable(self) -> bool {
        !matches!(
            self,
            Self::InvalidRequest
                | Self::Cancelled
                | Self::CircuitOpen
                | Self::ToolCallLimit
                | Self::OutcomeUnknown
        )
    }

    fn default_message(self) -> &'static str {
        match self {
            Self::RateLimited => "Rate limit exceeded",
            Self::ServiceUnavailable => "Service temporarily unavailable",
            Self::Timeout => "Request timed out",
            Self::InvalidRequest => "The request was invalid",
            Self::UnknownError => "An unexpected error occurred",
            Self::CircuitOpen => {
                "Circuit breaker is open: the service failed repeatedly, so calls to it are paused"
            }
            Self::Cancelled => "The call was cancelled",
            Self::ToolCallLimit => "Tool call limit reached for this session",
            Self::OutcomeUnknown => {
                "The outcome of this call is unknown: it was sent to the tool and may or may not have taken effect"
            }
        }
    }

    fn default_suggestion(self) -> &'static str {
        match self {
            Self::RateLimited => "Wait before retrying or reduce request frequency",
            Self::ServiceUnavailable => "Retry the operation",
            Self::Timeout => "Try again or reduce payload size",
            Self::InvalidRequest => "Check the tool arguments",
            Self::UnknownError => "Retry once; if it persists, report the issue",
            Self::CircuitOpen => {
                "Do not retry this tool until the circuit closes (see retryAfterMs); use another tool or tell the user the service is unavailable"
            }
            Self::Cancelled => "No action needed; the call was cancelled by the caller",
            Self::ToolCallLimit => {
                "Do not call this tool again in this session; finish with the results you have or tell the user the limit was reached"
            }
            Self::OutcomeUnknown => {
                "Check whether the action took effect before calling the tool again"
            }
        }
    }
}

impl LlmErrorCode {
    /// The code for a call that ended with `class`, for `reason` if it gave up.
    pub(crate) fn for_outcome(class: &ErrorClass, reason: Option<GiveUpReason>) -> Self {
        match (reason, class.kind) {
            (Some(GiveUpReason::Cancelled), _) => LlmErrorCode::Cancelled,
            (_, _) if class.code == crate::ErrorCode::CIRCUIT_OPEN => LlmErrorCode::CircuitOpen,
            (_, _) if class.code == crate::ErrorCode::TOOL_CALL_LIMIT => {
                LlmErrorCode::ToolCallLimit
            }
            (Some(GiveUpReason::CircuitOpen), _) => LlmErrorCode::CircuitOpen,
            (_, ErrorKind::RateLimited) => LlmErrorCode::RateLimited,
            (_, ErrorKind::Timeout) => LlmErrorCode::Timeout,
            (_, ErrorKind::Retriable) => LlmErrorCode::ServiceUnavailable,
            (_, ErrorKind::NonRetriable) if class.code == crate::ErrorCode::CANCELLED => {
                LlmErrorCode::Cancelled
            }
            (_, ErrorKind::NonRetriable) => LlmErrorCode::InvalidRequest,
            (_, ErrorKind::Unknown) => LlmErrorCode::UnknownError,
        }
    }
}

impl fmt::Display for LlmErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A structured, sanitized tool failure for a model.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{ErrorClass, LlmError};
///
/// let e = LlmError::from_class(&ErrorClass::from_status(429).with_retry_after(Duration::from_secs(5)))
///     .with_tool("search")
///     .with_attempts(3);
/// assert_eq!(
///     serde_json::to_string(&e).unwrap(),
///     r#"{"error":true,"code":"RATE_LIMITED","message":"Rate limit exceeded (HTTP 429)","retriable":true,"suggestion":"Wait before retrying or reduce request frequency","tool":"search","attemptsMade":3,"retryAfterMs":5000}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmError {
    /// Always `true`: lets a model (or a client) tell an error result from a value at a glance.
    pub error: bool,
    /// What kind of failure this is.
    pub code: LlmErrorCode,
    /// What happened, sanitized and at most [`MAX_MESSAGE_CHARS`] long.
    pub message: String,
    /// Whether trying again later may help.
    pub retriable: bool,
    /// What the model should do next.
    pub suggestion: String,
    /// The tool that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Attempts made, including the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts_made: Option<u32>,
    /// When the dependency may accept calls again, in milliseconds from now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl LlmError {
    /// An error with this code and the code's default message and suggestion.
    ///
    /// ```
    /// let e = steadfast::LlmError::new(steadfast::LlmErrorCode::Timeout);
    /// assert_eq!((e.message.as_str(), e.retriable), ("Request timed out", true));
    /// ```
    pub fn new(code: LlmErrorCode) -> Self {
        Self {
            error: true,
            code,
            message: code.default_message().to_owned(),
            retriable: code.retriable(),
            suggestion: code.default_suggestion().to_owned(),
            tool: None,
            attempts_made: None,
            retry_after_ms: None,
        }
    }

    /// The error for a classified failure. Caller errors (`INVALID_REQUEST`) carry the class's
    /// message, sanitized; the others carry a fixed message with the HTTP status, if known.
    ///
    /// ```
    /// use steadfast::{ErrorClass, LlmError, LlmErrorCode};
    /// let e = LlmError::from_class(&ErrorClass::from_status(404).with_message("no such repo at http://10.0.0.5/api"));
    /// assert_eq!(e.code, LlmErrorCode::InvalidRequest);
    /// assert_eq!(e.message, "no such repo at [internal-url]");
    /// ```
    pub fn from_class(class: &ErrorClass) -> Self {
        Self::build(class, class.message.as_deref(), None)
    }

    /// The error for a call that gave up: the code follows why it stopped and how the last
    /// failure was classified; the message of a caller error is the original error's text,
    /// sanitized; `attemptsMade` and `retryAfterMs` are filled in.
    ///
    /// ```
    /// use steadfast::{retry, ErrorClass, LlmError, LlmErrorCode, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let err = retry(&RetryPolicy::default(), |_| async { Err::<(), _>(ErrorClass::from_status(503)) }).await.unwrap_err();
    /// let e = LlmError::from_retry_error(&err).with_tool("search");
    /// assert_eq!((e.code, e.attempts_made), (LlmErrorCode::ServiceUnavailable, Some(3)));
    /// assert_eq!(e.to_string(), "search failed (SERVICE_UNAVAILABLE): Service temporarily unavailable (HTTP 503). Retry the operation. [3 attempts]");
    /// # }
    /// ```
    pub fn from_retry_error<E: fmt::Display>(err: &RetryError<E>) -> Self {
        let detail = match err.failure() {
            Failure::Error(e) => Some(e.to_string()),
            _ => None,
        };
        let reason = Some(err.reason());
        let mut e = Self::build(err.class(), detail.as_deref(), reason);
        e.attempts_made = Some(err.attempts());
        e
    }

    fn build(class: &ErrorClass, detail: Option<&str>, reason: Option<GiveUpReason>) -> Self {
        let code = LlmErrorCode::for_outcome(class, reason);
        let mut e = Self::new(code);
        match code {
            LlmErrorCode::InvalidRequest => {
                if let Some(text) = detail.or(class.message.as_deref()) {
                    e.message = clean(text);
                }
                e.suggestion = match class.status {
                    Some(401 | 403 | 407) => "The tool is not authorized for this request; changing the arguments will not help. Tell the user".to_owned(),
                    Some(404 | 410) => "Check that the identifiers in the arguments exist".to_owned(),
                    _ => e.suggestion,
                };
            }
            LlmErrorCode::CircuitOpen => {
                if let Some(after) = class.retry_after {
                    e.message = format!("{} (for about {})", e.message, human(after));
                }
            }
            _ => {
                if let Some(status) = class.status {
                    e.message = format!("{} (HTTP {status})", e.message);
                }
            }
        }
        e.retry_after_ms = class
            .retry_after
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        e
    }

    /// Names the tool that failed.
    ///
    /// ```
    /// let e = steadfast::LlmError::new(steadfast::LlmErrorCode::Timeout).with_tool("weather");
    /// assert_eq!(e.tool.as_deref(), Some("weather"));
    /// ```
    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// Sets the number of attempts made.
    ///
    /// ```
    /// let e = steadfast::LlmError::new(steadfast::LlmErrorCode::Timeout).with_attempts(2);
    /// assert_eq!(e.attempts_made, Some(2));
    /// ```
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts_made = Some(attempts);
        self
    }

    /// The JSON form, as a `serde_json::Value` (the structured content of an MCP error result).
    ///
    /// ```
    /// let v = steadfast::LlmError::new(steadfast::LlmErrorCode::Cancelled).to_json();
    /// assert_eq!(v["code"], "CANCELLED");
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_else(|_| serde_json::json!({"error": true}))
    }
}

/// Sanitized, whitespace-trimmed, at most [`MAX_MESSAGE_CHARS`] characters.
fn clean(text: &str) -> String {
    let text = sanitize(text);
    let text = text.trim();
    if text.chars().count() <= MAX_MESSAGE_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_MESSAGE_CHARS - 1).collect();
    cut.push('…');
    cut
}

fn human(d: Duration) -> String {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    humantime::format_duration(Duration::from_secs(secs.max(1))).to_string()
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed ({}): {}. {}.",
            self.tool.as_deref().unwrap_or("tool call"),
            self.code,
            self.message.trim_end_matches('.'),
            self.suggestion.trim_end_matches('.')
        )?;
        let mut extra = Vec::new();
        if let Some(n) = self.attempts_made {
            extra.push(format!("{n} attempt{}", if n == 1 { "" } else { "s" }));
        }
        if let Some(ms) = self.retry_after_ms {
            extra.push(format!("retry after {}", human(Duration::from_millis(ms))));
        }
        if !extra.is_empty() {
            write!(f, " [{}]", extra.join("; "))?;
        }
        Ok(())
    }
}

impl std::error::Error for LlmError {}

impl<E: fmt::Display> RetryError<E> {
    /// The [`LlmError`] for this failure, naming the tool.
    ///
    /// ```
    /// use steadfast::{retry, ErrorClass, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let err = retry(&RetryPolicy::default(), |_| async { Err::<(), _>(ErrorClass::from_status(400).with_message("'q' is required")) }).await.unwrap_err();
    /// let e = err.to_llm_error("search");
    /// assert_eq!((e.code.as_str(), e.message.as_str()), ("INVALID_REQUEST", "CLIENT_ERROR (non-retriable, status 400): 'q' is required"));
    /// # }
    /// ```
    pub fn to_llm_error(&self, tool: &str) -> LlmError {
        LlmError::from_retry_error(self).with_tool(tool)
    }
}
