//! Resilient tool calls for AI agents and MCP servers.
//!
//! When an agent calls a tool, the call can fail for reasons that pass (a 503, a reset
//! connection, a 429 with `Retry-After`) or that never will (a 400, a bad argument). Steadfast
//! tells them apart, retries the first kind with bounded, jittered backoff, honours the
//! dependency's `Retry-After`, stays within a time budget, and when it gives up says why.
//!
//! # A tour
//!
//! ```
//! use std::time::Duration;
//! use steadfast::{ErrorClass, GiveUpReason, Jitter, Retry, RetryPolicy};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 1. A policy: validated when built, serializable for config files.
//! let policy = RetryPolicy::builder()
//!     .max_attempts(4)                          // the first call and three retries
//!     .base_delay(Duration::from_millis(200))   // 200ms, 400ms, 800ms before jitter…
//!     .max_delay(Duration::from_secs(2))        // …never above 2s, even after jitter
//!     .jitter(Jitter::Full)
//!     .max_elapsed(Duration::from_secs(10))     // the whole call, delays included
//!     .build()?;
//!
//! // 2. The simplest call: errors classify themselves (io, HTTP status, JSON, messages…).
//! let n = steadfast::retry(&policy, async |attempt| {
//!     if attempt < 2 { Err(ErrorClass::from_status(503)) } else { Ok(attempt) }
//! }).await?;
//! assert_eq!(n, 2);
//!
//! // 3. A configured, storable retry with hooks; a 404 is not retried.
//! let retry = Retry::new(policy)
//!     .name("search")
//!     .on_retry(|ev| println!("attempt {} failed ({}), retrying in {:?}", ev.attempt, ev.class.code, ev.delay));
//! let err = retry.run(async |_| Err::<(), _>(ErrorClass::from_status(404))).await.unwrap_err();
//! assert_eq!(err.reason(), GiveUpReason::NonRetriable);
//! assert_eq!(err.attempts(), 1);
//! # Ok(()) }
//! ```
//!
//! # Where things live
//! - [`RetryPolicy`] and its builder: attempts, backoff, jitter, caps, budgets, layering, serde.
//! - [`Backoff`], [`Jitter`], [`Rng`]: delays as a pure function and as an iterator ([`Delays`]).
//! - [`ErrorClass`], [`Classify`], [`classify_chain`], [`classify_message`]: deciding what to retry.
//! - [`parse_retry_after`]: both forms of `Retry-After`.
//! - [`retry`], [`Retry`]: the engine; [`RetryError`] and [`GiveUpReason`]: how it ends;
//!   [`RetryEvent`], [`SuccessEvent`], [`GiveUpEvent`]: what the hooks see.
//! - [`CircuitBreaker`] and [`BreakerRegistry`]: stop calling a dependency that is down.
//! - [`RetryBudget`]: keep retries a bounded share of a dependency's traffic.
//! - [`ConcurrencyLimit`]: cap how many calls retry at once.
//! - [`LlmError`]: the structured, sanitized error a model receives ([`RetryError::to_llm_error`]).
//! - [`sanitize`], [`sanitize_json`], [`Sanitizer`], [`BUILTIN_RULES`]: redaction of secrets and internals,
//!   with a generic layer for credentials no rule names ([`set_generic_layer`] turns it off).
//!
//! # Guarding a dependency
//!
//! ```
//! use steadfast::{BreakerConfig, BudgetConfig, CircuitBreaker, ErrorClass, Retry, RetryBudget, RetryPolicy};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() -> Result<(), steadfast::PolicyError> {
//! // One breaker and one budget per dependency, shared by every call to it.
//! let breaker = CircuitBreaker::named("search-api", BreakerConfig::builder().failure_threshold(5).build()?);
//! let budget = RetryBudget::new(BudgetConfig::builder().retry_ratio(0.1).build()?);
//! let retry = Retry::new(RetryPolicy::default()).breaker(breaker.clone()).budget(budget);
//!
//! let v = retry.run(|attempt| async move {
//!     if attempt == 1 { Err(ErrorClass::from_status(503)) } else { Ok("results") }
//! }).await.unwrap();
//! assert_eq!(v, "results");
//! // The breaker saw one successful call: the 503 was absorbed by the retry.
//! assert_eq!(breaker.stats().failures_in_window, 0);
//! # Ok(()) }
//! ```
//!
//! # Conventions
//! - Attempts include the first: `max_attempts = 3` is one call and up to two retries.
//! - The delay before retry *k* (1-based) is the backoff for *k*, capped at `max_delay`, then
//!   jittered within `[0, max_delay]`; a longer `Retry-After` (clamped to `max_retry_after`)
//!   replaces it. The first attempt never waits.
//! - Time comes from tokio's clock, so every timing behaviour is testable on a paused clock;
//!   randomness comes from a seedable [`Rng`].
//!
//! # Features
//! - `anyhow`: [`Classify`] for `anyhow::Error`, walking its chain.
//! - `metrics`: every [`ToolMetrics`] count is also reported through the `metrics` facade.
//! - `tower`: `tower::RetryLayer` and `tower::CircuitBreakerLayer`.

#![warn(missing_docs)]

mod backoff;
mod breaker;
mod budget;
mod call_limit;
mod classify;
mod concurrency;
mod driver;
mod hooks;
mod idempotency;
mod jitter;
mod llm_error;
mod metrics;
mod policy;
mod retry;
mod retry_after;
mod retry_error;
mod sanitize;
mod tool_set;
#[cfg(feature = "tower")]
pub mod tower;
pub mod trace;
mod window;

pub use backoff::{Backoff, CustomBackoff, Delays};
pub use breaker::{
    AlreadyShared, BreakerConfig, BreakerConfigBuilder, BreakerEvent, BreakerRegistry,
    BreakerState, BreakerStats, CircuitBreaker, OwnedPermit, Permit, Rejected, SharedOutcome,
    SharedState, SubscriptionId, TripRule,
};
pub use budget::{BudgetConfig, BudgetConfigBuilder, RetryBudget, SharedBudget};
pub use call_limit::{
    CallCounter, CallKeys, CallLimit, CallLimitBuilder, CallLimitExceeded, CallScope, CountedKey,
    Limited, MemoryCounter,
};
pub use classify::{Classify, ErrorClass, ErrorCode, ErrorKind, classify_chain, classify_message};
pub use concurrency::{ConcurrencyConfig, ConcurrencyLimit, RetrySlot, WhenFull};
pub use hooks::{Failed, GiveUpEvent, RetryEvent, SuccessEvent};
pub use idempotency::{
    IdempotencyStore, MemoryStore, OnceError, RunOnce, canonical_json, idempotency_key,
};
pub use jitter::{Jitter, Rng};
pub use llm_error::{LlmError, LlmErrorCode, MAX_MESSAGE_CHARS};
#[cfg(feature = "metrics")]
pub use metrics::describe_metrics;
pub use metrics::{
    Metrics, MetricsSnapshot, ROLLING_WINDOW, ToolMetrics, ToolSnapshot, WindowSnapshot,
};
pub use policy::{Limit, PolicyError, RetryCap, RetryPolicy, RetryPolicyBuilder};
pub use retry::{Retry, retry};
pub use retry_after::{
    RetryAfterError, parse_retry_after, parse_retry_after_at, retry_after_from_headers,
};
pub use retry_error::{Failure, GiveUpReason, RetryError};
pub use sanitize::{
    BUILTIN_RULES, Rule, Sanitizer, SanitizerBuilder, sanitize, sanitize_json, set_generic_layer,
};
pub use tool_set::{
    FailureMode, ToolError, ToolErrorKind, ToolFuture, ToolOptions, ToolSet, ToolSetBuilder,
    ToolSetError,
};

/// Re-exported so callers can name the token [`Retry::cancel_on`] takes without adding
/// `tokio-util` themselves.
pub use tokio_util::sync::CancellationToken;

/// The README's examples, compiled and run as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
