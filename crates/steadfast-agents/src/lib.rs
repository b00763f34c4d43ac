//! Steadfast inside Rust agents: resilient tool calls for rig, synaptic and rmcp clients.
//!
//! Agent frameworks hand a tool's failure straight to the model, or retry it blindly: rig
//! retries model turns but not tools; synaptic's `ToolRetryMiddleware` retries every error with
//! no jitter, no classification and no breaker; an rmcp client's `call_tool` makes one attempt.
//! The adapters here put each tool call under Steadfast's engine instead — classification from
//! what the framework's error already says, backoff with jitter, `Retry-After`, a breaker per
//! tool or per dependency, a retry budget, a call limit that counts every attempt — and when a
//! call fails for good the model reads a sanitized [`LlmError`](steadfast::LlmError).
//!
//! [`Guard`] holds what is shared between tools (policies, breakers, budgets, the call limit,
//! metrics); each adapter, behind its own feature so that the others' dependencies stay out of
//! your build, translates one framework:
//!
//! | feature | framework | entry point |
//! |---|---|---|
//! | `rig` | `rig-core` 0.44 | `Guard::rig`, `Guard::rig_all` (module `rig`) |
//! | `synaptic` | `synaptic-middleware` 0.4 | `synaptic::ToolRetry`, an `AgentMiddleware` |
//! | `rmcp` | `rmcp` 3.11 clients | `mcp::McpTools::call_tool` |
//!
//! ```
//! use steadfast::{ErrorClass, RetryPolicy};
//! use steadfast_agents::Guard;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let guard = Guard::builder()
//!     .policy(RetryPolicy::builder().max_attempts(3).build().unwrap())
//!     .default_dependency("search-api")
//!     .build();
//! // What every adapter does for one call: attempts under the tool's policy and breaker.
//! let hits = guard.run("search", |n| async move {
//!     if n < 3 { Err(ErrorClass::from_status(503)) } else { Ok(42) }
//! }).await.unwrap();
//! assert_eq!(hits, 42);
//! # }
//! ```
//!
//! # Features
//! - `rig`: the `rig` module — `rig-core` without default features (no HTTP client).
//! - `synaptic`: the `synaptic` module — `synaptic-middleware` and `synaptic-core`.
//! - `rmcp`: the `mcp` module — rmcp's client side, through `steadfast-mcp`.

#![warn(missing_docs)]

mod guard;
#[cfg(feature = "rmcp")]
pub mod mcp;
#[cfg(feature = "rig")]
pub mod rig;
#[cfg(feature = "synaptic")]
pub mod synaptic;

pub use guard::{Guard, GuardBuilder, MAX_TRACKED_TOOLS, OTHER_TOOLS};
