//! State shared with other replicas (`[state] redis = …`), or kept in this process.
//!
//! Decisions stay local: a shared breaker is still one atomic load when closed, and Redis is
//! told about outcomes in batches (see `steadfast-redis`). Call counts are the exception — a
//! session that moves between replicas must keep its count — so a call limit asks Redis, under
//! the state's small bound, and falls back to counting here when Redis does not answer.

use std::time::Duration;

use steadfast::{CallCounter, CountedKey, MemoryCounter};

/// Where call counts live.
#[derive(Debug, Clone)]
pub(crate) enum Counter {
    /// In this process.
    Memory(MemoryCounter),
    /// In Redis, shared by every replica.
    #[cfg(feature = "redis")]
    Redis(steadfast_redis::RedisCallCounter),
}

impl CallCounter for Counter {
    async fn try_count(&self, keys: &[CountedKey]) -> Result<(), (usize, Option<Duration>)> {
        match self {
            Counter::Memory(m) => m.try_count(keys).await,
            #[cfg(feature = "redis")]
            Counter::Redis(r) => r.try_count(keys).await,
        }
    }
}

/// The shared state, if configured and reachable.
#[derive(Clone, Default)]
pub(crate) struct SharedState {
    /// Counts kept here when there is no Redis: one counter for every upstream's tools, so a
    /// session's cap covers them all (clones share it).
    memory: MemoryCounter,
    #[cfg(feature = "redis")]
    redis: Option<steadfast_redis::RedisState>,
}

impl std::fmt::Debug for SharedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedState").finish_non_exhaustive()
    }
}

impl SharedState {
    /// Connects to the configured Redis. An unreachable Redis is not fatal: the proxy runs on
    /// local state and says so.
    pub(crate) async fn connect(config: &crate::Config) -> Self {
        #[cfg(feature = "redis")]
        {
            match config.state.connect().await {
                Ok(redis) => {
                    if redis.is_some() {
                        tracing::info!("shared state on Redis");
                    }
                    Self {
                        redis,
                        ..Self::default()
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        error = %steadfast::sanitize(&e.to_string()),
                        "cannot reach the shared state's Redis; running on local state"
                    );
                    Self::default()
                }
            }
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = config;
            Self::default()
        }
    }

    /// Shares a breaker's state with other replicas (no-op without Redis).
    pub(crate) fn breaker(&self, breaker: &steadfast::CircuitBreaker) {
        #[cfg(feature = "redis")]
        if let Some(r) = &self.redis
            && let Err(e) = r.share_breaker(breaker)
        {
            tracing::warn!(error = %e, "breaker not shared");
        }
        #[cfg(not(feature = "redis"))]
        let _ = breaker;
    }

    /// Shares a retry budget (no-op without Redis).
    pub(crate) fn budget(&self, name: &str, budget: &steadfast::RetryBudget) {
        #[cfg(feature = "redis")]
        if let Some(r) = &self.redis
            && let Err(e) = r.share_budget(name, budget)
        {
            tracing::warn!(error = %e, "budget not shared");
        }
        #[cfg(not(feature = "redis"))]
        let _ = (name, budget);
    }

    /// Whether breakers, budgets and call counts are shared through Redis (the admin console).
    pub(crate) fn on_redis(&self) -> bool {
        #[cfg(feature = "redis")]
        return self.redis.is_some();
        #[cfg(not(feature = "redis"))]
        false
    }

    /// Where call counts live.
    pub(crate) fn counter(&self) -> Counter {
        #[cfg(feature = "redis")]
        if let Some(r) = &self.redis {
            return Counter::Redis(r.call_counter());
        }
        Counter::Memory(self.memory.clone())
    }
}
