//! Resilient MCP tool calls, built on [`steadfast`] and [`rmcp`].
//!
//! - [`Resilient`] wraps any rmcp [`ServerHandler`](rmcp::ServerHandler) so that each
//!   `tools/call` runs under a per-tool policy, breaker and budget; it wraps the handler itself,
//!   so the retry step is always the innermost layer.
//! - [`ToolCall`] is the engine both that middleware and the `steadfast proxy` use: attempts,
//!   `isError` judgment ([`RetryOnIsError`]), replay safety from tool annotations, and the
//!   final [`LlmError`](steadfast::LlmError) as an `isError` result.
//! - [`send_tool_call`] sends one attempt to an upstream peer with idle and hard timeouts
//!   (the upstream is told when an attempt is abandoned); [`connect`] opens an upstream
//!   (child process or streamable HTTP) with retries, and [`Reconnecting`] keeps it open,
//!   reconnecting whenever it goes away.
//! - [`classify_service_error`], [`classify_error_data`] and [`classify_tool_result`] map
//!   rmcp's failures onto Steadfast's classes.
//!
//! # A resilient client in a few lines
//!
//! ```no_run
//! use std::time::Duration;
//! use rmcp::model::CallToolRequestParams;
//! use steadfast::CancellationToken;
//! use steadfast_mcp::{AttemptLimits, Reconnecting, ToolAnswer, ToolCall, ToolPolicy, Upstream, send_tool_call};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Start the server, and restart it whenever it dies.
//! let conn = Reconnecting::builder(Upstream::command("python3", ["weather.py"]), || ())
//!     .connect()
//!     .await?;
//! let policy = ToolPolicy::default();
//! let limits = AttemptLimits { idle: Some(Duration::from_secs(30)), max: None };
//! let params = CallToolRequestParams::new("forecast");
//! let result = ToolCall::new("forecast", &policy)
//!     .replays_ambiguous(true) // the tool is read-only
//!     .run(&CancellationToken::new(), |_| {
//!         let (conn, params) = (conn.clone(), params.clone());
//!         async move {
//!             let peer = conn.peer(Duration::from_secs(10)).await?; // NotSent while restarting
//!             match send_tool_call(&peer, params, limits, |_| {}).await? {
//!                 ToolAnswer::Result(r) => Ok(r),
//!                 ToolAnswer::Other(_) => Ok(rmcp::model::CallToolResult::success(vec![])),
//!             }
//!         }
//!     })
//!     .await;
//! // `result` is the tool's answer, or an `isError` result carrying a sanitized LlmError.
//! # let _ = result; Ok(()) }
//! ```
//!
//! # What "never ran" means
//! A tool that is not marked `readOnlyHint` or `idempotentHint` is retried only after failures
//! that prove the upstream never received the call: the breaker was open (no request is made),
//! the upstream was not connected or was restarting when the attempt began, or the request
//! could not be written to the transport. A timeout, a transport that closed while waiting, a
//! JSON-RPC error and an `isError` result all come after the request went out, so they are
//! ambiguous and such a tool is not replayed after them unless configured to be.

#![warn(missing_docs)]

mod call;
mod classify;
mod client;
mod connect;
mod failure;
mod middleware;
mod policy;
mod reconnect;

pub use call::{ToolCall, llm_error_result, sanitize_error_result};
pub use classify::{
    classify_error_data, classify_service_error, classify_tool_result, tool_result_text,
};
pub use client::{AttemptLimits, ToolAnswer, send_request, send_tool_call};
pub use connect::{ConnectError, InProcess, Pipe, Upstream, connect, default_connect_policy};
pub use failure::CallFailure;
pub use middleware::Resilient;
pub use policy::{RetryOnIsError, ToolPolicy};
pub use reconnect::{Reconnecting, ReconnectingBuilder, default_reconnect_policy};
