//! Why one attempt at a tool call failed, and whether it can have had an effect.

use std::fmt;

use rmcp::ServiceError;
use rmcp::model::{CallToolResult, ErrorData};
use steadfast::{Classify, ErrorClass};

use crate::classify::{classify_error_data, classify_service_error, tool_result_text};

/// One failed attempt at a tool call.
///
/// The variants differ in what they prove about the call. [`NotSent`](Self::NotSent) proves
/// the upstream never saw it, so replaying it is always safe. The others — the upstream
/// answered with an error, the connection was lost or the attempt timed out after the request
/// went out, the tool reported a transient error — leave open whether a side effect happened;
/// see [`CallFailure::never_ran`].
#[derive(Debug)]
#[non_exhaustive]
pub enum CallFailure {
    /// The request was never handed to the upstream: it was not connected, the connection
    /// was refused, or writing the request failed before any byte could be read by it.
    NotSent(String),
    /// The upstream answered with a JSON-RPC error.
    Rpc(ErrorData),
    /// The request went out and no answer came back: timeout, or the transport closed.
    Lost(ServiceError),
    /// The tool answered with `isError: true`, judged worth retrying.
    Tool(Box<CallToolResult>, ErrorClass),
    /// A call limit refused the attempt: it was not sent, and is not retried.
    Limited(steadfast::CallLimitExceeded),
}

impl CallFailure {
    /// Whether this failure proves the tool never ran, so retrying cannot repeat a side
    /// effect. Only [`CallFailure::NotSent`] does (a breaker rejection is the other such case,
    /// and never reaches the upstream at all).
    ///
    /// ```
    /// use steadfast_mcp::CallFailure;
    /// assert!(CallFailure::NotSent("upstream restarting".into()).never_ran());
    /// assert!(!CallFailure::Lost(rmcp::ServiceError::TransportClosed).never_ran());
    /// ```
    pub fn never_ran(&self) -> bool {
        matches!(self, Self::NotSent(_))
    }

    /// Whether the call may or may not have taken effect: sent, then no answer.
    ///
    /// ```
    /// use steadfast_mcp::CallFailure;
    /// assert!(CallFailure::Lost(rmcp::ServiceError::TransportClosed).is_ambiguous());
    /// ```
    pub fn is_ambiguous(&self) -> bool {
        matches!(self, Self::Lost(_))
    }
}

impl fmt::Display for CallFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotSent(why) => write!(f, "not sent: {why}"),
            Self::Rpc(e) => write!(f, "{}", e.message),
            Self::Lost(e) => write!(f, "{e}"),
            Self::Tool(r, _) => f.write_str(&tool_result_text(r)),
            Self::Limited(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CallFailure {}

impl Classify for CallFailure {
    fn classify(&self) -> ErrorClass {
        match self {
            Self::NotSent(why) => ErrorClass::retriable(steadfast::ErrorCode::NETWORK_ERROR)
                .with_message(format!("not sent: {why}")),
            Self::Rpc(e) => classify_error_data(e),
            Self::Lost(e) => classify_service_error(e),
            Self::Tool(_, class) => class.clone(),
            Self::Limited(e) => e.class(),
        }
    }
}
