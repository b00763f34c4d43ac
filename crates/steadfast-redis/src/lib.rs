//! Shared state for [Steadfast](steadfast) across replicas, on Redis: breakers that open for
//! everyone, idempotency that holds across processes, and call limits that follow a session.
//!
//! When several gateway replicas (or agent processes) call one dependency, each learns an
//! outage on its own and `RunOnce` deduplicates only inside one process. This crate shares
//! that state **without putting Redis on the hot path and without making Redis a new single
//! point of failure**:
//!
//! - **Decisions stay local.** A closed breaker is still one atomic load; outcomes are counted
//!   in two atomics per breaker (probe events go through a bounded queue: when full they are
//!   dropped and counted, never waited on) and sent in batches by a background task ([`breaker`] explains the shared rule, quorum, pub/sub and
//!   the single probe slot). A shared retry [`budget`] is spent from a small local lease.
//! - **Everything a call may wait on is bounded** ([`RedisOptions::op_timeout`], 50 ms):
//!   the idempotency [`store`] and the call-limit [`counter`]. After a failure Redis counts as
//!   *down*: logged once, calls use local state at once, and a background ping rejoins when
//!   it answers.
//! - **Behind the types callers already use**: a [`CircuitBreaker`](steadfast::CircuitBreaker)
//!   shared with [`RedisState::share_breaker`], a [`RetryBudget`](steadfast::RetryBudget) with
//!   [`RedisState::share_budget`], a [`RunOnce`](steadfast::RunOnce) over
//!   [`RedisState::store`], a [`CallLimit`](steadfast::CallLimit) built with
//!   [`RedisState::call_counter`].
//!
//! ```no_run
//! use std::time::Duration;
//! use steadfast::{BreakerConfig, CallLimit, CircuitBreaker, RunOnce};
//! use steadfast_redis::{RedisOptions, RedisState};
//!
//! # async fn demo() -> Result<(), steadfast_redis::Error> {
//! let state = RedisState::connect("redis://127.0.0.1:6379", RedisOptions::new().prefix("gw").quorum(2)).await?;
//! let breaker = CircuitBreaker::named("search-api", BreakerConfig::default());
//! state.share_breaker(&breaker)?;
//! let once = RunOnce::new(state.store::<String>(), Duration::from_secs(3600));
//! let limit = CallLimit::builder().per_session(100, Duration::from_secs(3600)).build_with(state.call_counter()).unwrap();
//! # let _ = (once, limit);
//! # Ok(()) }
//! ```

pub mod breaker;
pub mod budget;
mod config;
pub mod counter;
mod options;
mod state;
pub mod store;

pub use config::StateConfig;
pub use counter::RedisCallCounter;
pub use options::RedisOptions;
pub use state::{RedisState, StateStats};
pub use store::{RedisStore, StoreError};

/// docs/redis.md, compiled as doctests so its example stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/redis.md")]
pub struct RedisDocDoctests;

/// Why shared state could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Redis URL could not be parsed (the message is sanitized).
    #[error("redis url: {0}")]
    Url(String),
    /// An option is out of range.
    #[error("redis options: {field}: must {constraint}")]
    Option {
        /// The option.
        field: &'static str,
        /// What it must be.
        constraint: String,
    },
    /// Only named breakers can be shared (the name is the key other replicas use).
    #[error("only a named circuit breaker can be shared (CircuitBreaker::named)")]
    UnnamedBreaker,
    /// A breaker of this name is already shared through this state, or the breaker already
    /// shares its state elsewhere.
    #[error("circuit breaker {0:?} is already shared")]
    AlreadyShared(String),
}
