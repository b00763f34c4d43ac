//! The connection to Redis, the bound on every operation, and falling back when Redis is away.
//!
//! Redis must never become the thing that takes a gateway down. Every operation a call waits
//! on is raced against [`RedisOptions::op_timeout`]; the first failure marks Redis *down*, is
//! logged once, and from then on calls use local state at once, without trying Redis. A
//! background task pings Redis every [`RedisOptions::sync_every`] (faster while it is down);
//! when it answers again the replica says so, re-reads the shared breaker state it may have
//! missed, and rejoins.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind, RedisResult};
use tokio::sync::mpsc;

use crate::breaker::{BreakerLink, Report};
use crate::{Error, RedisOptions};

/// Shared state across replicas, on one Redis: breakers ([`share_breaker`](Self::share_breaker)),
/// retry budgets ([`share_budget`](Self::share_budget)), idempotency ([`store`](Self::store)) and call limits ([`call_counter`](Self::call_counter)).
/// Cheap to clone.
///
/// ```no_run
/// use steadfast::{BreakerConfig, CircuitBreaker};
/// use steadfast_redis::{RedisOptions, RedisState};
///
/// # async fn demo() -> Result<(), steadfast_redis::Error> {
/// let state = RedisState::connect("redis://127.0.0.1:6379", RedisOptions::new().prefix("gw")).await?;
/// let breaker = CircuitBreaker::named("search-api", BreakerConfig::default());
/// state.share_breaker(&breaker)?;
/// // Use `breaker` as before: decisions stay local, outcomes and openings are shared.
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisState {
    pub(crate) inner: Arc<Shared>,
}

impl std::fmt::Debug for RedisState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisState")
            .field("options", &self.inner.options)
            .field("up", &self.is_up())
            .finish()
    }
}

pub(crate) struct Shared {
    pub(crate) options: RedisOptions,
    conn: ConnectionManager,
    up: AtomicBool,
    pub(crate) breakers: RwLock<HashMap<String, Arc<BreakerLink>>>,
    pub(crate) budgets: RwLock<Vec<Arc<crate::budget::BudgetLink>>>,
    pub(crate) budget_wake: Arc<tokio::sync::Notify>,
    pub(crate) reports: mpsc::Sender<Report>,
    /// Wakes the reporter when a breaker has counted outcomes to send.
    pub(crate) flush: Arc<tokio::sync::Notify>,
    pub(crate) channel: String,
    subscribed: AtomicBool,
    pub(crate) stats: Arc<Stats>,
}

#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) fallbacks: AtomicU64,
    pub(crate) outages: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) reported: AtomicU64,
    /// Reports queued or in the batch being sent.
    pub(crate) queued: AtomicU64,
}

/// Counters for health checks and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StateStats {
    /// Whether Redis answered the last operation.
    pub up: bool,
    /// Operations that used local state instead of Redis.
    pub fallbacks: u64,
    /// Times Redis went away.
    pub outages: u64,
    /// Breaker outcomes not delivered: Redis was down, or (probe events) the queue was full.
    pub dropped: u64,
    /// Breaker outcomes delivered to Redis.
    pub reported: u64,
}

impl RedisState {
    /// Connects to Redis at `url` (`redis://[user:password@]host:port[/db]`) and starts the
    /// background tasks (pub/sub, reporting, re-sync). Needs a tokio runtime.
    ///
    /// A malformed URL or bad option is an error; an unreachable Redis is not: the state starts
    /// *down*, every operation uses local state, and it joins when Redis answers.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, Error> {
        options.validate()?;
        let client = parse_url(url)?;
        let (tx, rx) = mpsc::channel(options.report_capacity);
        let channel = format!("{}:breakers", options.prefix);
        let inner = Arc::new_cyclic(|weak: &Weak<Shared>| {
            let pushes = weak.clone();
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(options.connect_timeout))
                .set_response_timeout(Some(Duration::from_secs(1).max(options.op_timeout * 4)))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_millis(200))
                .set_push_sender(move |push: PushInfo| {
                    if let Some(shared) = pushes.upgrade() {
                        shared.on_push(push);
                    }
                    Ok::<(), std::convert::Infallible>(())
                })
                .set_automatic_resubscription();
            let conn = ConnectionManager::new_lazy_with_config(client, config)
                .expect("a push sender is set, so the config is valid");
            Shared {
                options,
                conn,
                up: AtomicBool::new(true),
                breakers: RwLock::new(HashMap::new()),
                budgets: RwLock::new(Vec::new()),
                budget_wake: Arc::default(),
                reports: tx,
                flush: Arc::default(),
                channel,
                subscribed: AtomicBool::new(false),
                stats: Arc::default(),
            }
        });
        tokio::spawn(crate::breaker::report_loop(
            Arc::downgrade(&inner),
            rx,
            inner.flush.clone(),
        ));
        tokio::spawn(crate::budget::budget_loop(
            Arc::downgrade(&inner),
            inner.budget_wake.clone(),
        ));
        // The first check runs here, bounded, so a reachable Redis is joined on return.
        inner.check().await;
        #[cfg(feature = "metrics")]
        metrics::gauge!("steadfast_redis_up").set(if inner.up.load(Ordering::Acquire) {
            1.0
        } else {
            0.0
        });
        tokio::spawn(maintain(Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// Whether Redis answered the last operation (otherwise this replica runs on local state).
    pub fn is_up(&self) -> bool {
        self.inner.up.load(Ordering::Acquire)
    }

    /// The options in use.
    pub fn options(&self) -> &RedisOptions {
        &self.inner.options
    }

    /// Counters: fallbacks, outages, dropped and delivered reports.
    pub fn stats(&self) -> StateStats {
        let s = &self.inner.stats;
        StateStats {
            up: self.is_up(),
            fallbacks: s.fallbacks.load(Ordering::Relaxed),
            outages: s.outages.load(Ordering::Relaxed),
            dropped: s.dropped.load(Ordering::Relaxed),
            reported: s.reported.load(Ordering::Relaxed),
        }
    }

    /// Waits until the report queue is empty and the last batch was sent (tests, shutdown).
    /// Bounded by `within`; returns whether it drained.
    pub async fn flush(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.inner.stats.queued.load(Ordering::Acquire) == 0 {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// A client for `url`, speaking RESP3: pub/sub messages then arrive on the same connection as
/// pushes.
pub(crate) fn parse_url(url: &str) -> Result<redis::Client, Error> {
    let bad = |e: redis::RedisError| Error::Url(steadfast::sanitize(&e.to_string()).into_owned());
    let info = url.into_connection_info().map_err(bad)?;
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    redis::Client::open(info.set_redis_settings(settings)).map_err(bad)
}

impl Shared {
    /// Runs one operation a call may be waiting on: at once `None` while Redis is down,
    /// otherwise bounded by `op_timeout`. `None` means "use local state".
    pub(crate) async fn run<T, F, Fut>(&self, op: F) -> Option<T>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        if !self.up.load(Ordering::Acquire) {
            self.fell_back();
            return None;
        }
        self.bounded(op(self.conn.clone()), false).await
    }

    /// Only the background check marks Redis up again: an answer to an operation sent before
    /// an outage was noticed must not end it (the replica would flap).
    async fn bounded<T>(
        &self,
        op: impl Future<Output = RedisResult<T>>,
        rejoin: bool,
    ) -> Option<T> {
        match tokio::time::timeout(self.options.op_timeout, op).await {
            Ok(Ok(v)) => {
                if rejoin {
                    self.mark_up();
                }
                Some(v)
            }
            Ok(Err(e)) => {
                self.mark_down(&e.to_string());
                None
            }
            Err(_) => {
                self.mark_down("timed out");
                None
            }
        }
    }

    fn fell_back(&self) {
        self.stats.fallbacks.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        metrics::counter!("steadfast_redis_fallbacks_total").increment(1);
    }

    fn mark_down(&self, why: &str) {
        self.fell_back();
        if self.up.swap(false, Ordering::AcqRel) {
            self.stats.outages.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "metrics")]
            metrics::gauge!("steadfast_redis_up").set(0.0);
            tracing::warn!(
                prefix = %self.options.prefix,
                error = %steadfast::sanitize(why),
                "redis unavailable: shared state falls back to local state until it returns"
            );
        }
    }

    fn mark_up(&self) {
        if !self.up.swap(true, Ordering::AcqRel) {
            #[cfg(feature = "metrics")]
            metrics::gauge!("steadfast_redis_up").set(1.0);
            tracing::info!(prefix = %self.options.prefix, "redis is back: shared state rejoined");
        }
    }

    /// The background check: ping (reconnecting if needed), subscribe, re-read breaker state.
    async fn check(&self) {
        let mut conn = self.conn.clone();
        let ping = async move { redis::cmd("PING").query_async::<()>(&mut conn).await };
        if self.bounded(ping, true).await.is_none() {
            self.subscribed.store(false, Ordering::Release);
            return;
        }
        if !self.subscribed.load(Ordering::Acquire) {
            let mut conn = self.conn.clone();
            let channel = self.channel.clone();
            let sub = async move { conn.subscribe(channel).await };
            if self.bounded(sub, true).await.is_some() {
                self.subscribed.store(true, Ordering::Release);
            }
        }
        crate::breaker::resync(self).await;
    }

    fn on_push(&self, push: PushInfo) {
        match push.kind {
            PushKind::Message => {
                let Some(redis::Value::BulkString(payload)) = push.data.get(1) else {
                    return;
                };
                if let Ok(text) = std::str::from_utf8(payload) {
                    crate::breaker::on_message(self, text);
                }
            }
            PushKind::Disconnection => {
                self.subscribed.store(false, Ordering::Release);
            }
            _ => {}
        }
    }
}

/// Pings every `sync_every` (every 100 ms while Redis is down) until the state is dropped.
async fn maintain(weak: Weak<Shared>) {
    loop {
        let pause = match weak.upgrade() {
            Some(shared) => {
                let every = shared.options.sync_every;
                if shared.up.load(Ordering::Acquire) {
                    every
                } else {
                    every.min(Duration::from_millis(100))
                }
            }
            None => return,
        };
        tokio::time::sleep(pause).await;
        let Some(shared) = weak.upgrade() else { return };
        shared.check().await;
    }
}
