//! Retry budgets shared across replicas.
//!
//! Redis keeps Finagle's budget for the whole cluster: deposits (calls) and withdrawals
//! (retries) in ten buckets over the budget's `ttl`, and a balance of `retry_ratio × calls +
//! min_retries_per_sec × ttl − retries` (a Lua script, on Redis's clock). A retry never waits
//! on Redis: each replica holds a small **lease** of retries taken from that balance, spends it
//! with one atomic decrement, and a background task tops it up every `budget_sync` (sooner when
//! it runs dry) while reporting the calls made since. The lease is sized by recent use (twice
//! the retries of the last interval, 1 to 100), so little credit sits idle in one replica.
//!
//! Redis down: the local [`RetryBudget`] decides, from its own deposits (it keeps counting
//! them), until Redis returns.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use redis::Script;
use steadfast::{RetryBudget, SharedBudget};
use tokio::sync::Notify;

use crate::state::Shared;
use crate::{Error, RedisState};

pub(crate) struct BudgetLink {
    name: String,
    base: String,
    budget: RetryBudget,
    /// Calls made since the last sync.
    deposits: AtomicU64,
    /// Retries this replica may still make without asking Redis.
    lease: AtomicI64,
    /// Retries taken from the lease since the last sync.
    used: AtomicU64,
    wake: Arc<Notify>,
    shared: Weak<Shared>,
}

impl SharedBudget for BudgetLink {
    fn deposited(&self) {
        self.deposits.fetch_add(1, Ordering::Relaxed);
    }

    fn try_withdraw(&self) -> Option<bool> {
        let up = self
            .shared
            .upgrade()
            .is_some_and(|s| RedisState { inner: s }.is_up());
        if !up {
            return None;
        }
        let mut left = self.lease.load(Ordering::Acquire);
        loop {
            if left <= 0 {
                self.wake.notify_one();
                return Some(false);
            }
            match self.lease.compare_exchange_weak(
                left,
                left - 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.used.fetch_add(1, Ordering::Relaxed);
                    if left == 1 {
                        self.wake.notify_one();
                    }
                    return Some(true);
                }
                Err(now) => left = now,
            }
        }
    }
}

impl RedisState {
    /// Shares `budget` under `name` (see the [module docs](self)): every replica sharing a
    /// budget of that name spends one cluster-wide balance. Use the same configuration on
    /// every replica.
    ///
    /// ```no_run
    /// # async fn demo(state: steadfast_redis::RedisState) {
    /// let budget = steadfast::RetryBudget::new(Default::default());
    /// state.share_budget("search-api", &budget).unwrap();
    /// // Give it to the engine as before: Retry::new(policy).budget(budget)
    /// # }
    /// ```
    pub fn share_budget(&self, name: &str, budget: &RetryBudget) -> Result<(), Error> {
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(Error::Option {
                field: "budget name",
                constraint: format!("be non-empty without spaces (got {name:?})"),
            });
        }
        let mut links = self
            .inner
            .budgets
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if links.iter().any(|l| l.name == name) {
            return Err(Error::AlreadyShared(name.to_owned()));
        }
        let link = Arc::new(BudgetLink {
            name: name.to_owned(),
            base: format!("{{{}:r:{name}}}", self.inner.options.prefix),
            budget: budget.clone(),
            deposits: AtomicU64::new(0),
            lease: AtomicI64::new(0),
            used: AtomicU64::new(0),
            wake: self.inner.budget_wake.clone(),
            shared: Arc::downgrade(&self.inner),
        });
        budget
            .share(link.clone())
            .map_err(|_| Error::AlreadyShared(name.to_owned()))?;
        links.push(link);
        self.inner.budget_wake.notify_one();
        Ok(())
    }
}

/// KEYS[1] base. ARGV: deposits, want, ratio, reserve, ttl_ms. Returns the retries granted.
static SYNC: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local base = KEYS[1]
local deposits, want = tonumber(ARGV[1]), tonumber(ARGV[2])
local ratio, reserve, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local step = math.max(1, math.floor(ttl / 10))
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local b = math.floor(now / step)
local k = base .. ':' .. b
if deposits > 0 then
  redis.call('HINCRBY', k, 'd', deposits)
  redis.call('PEXPIRE', k, ttl + step)
end
if want <= 0 then return 0 end
local d, w = 0, 0
for i = b - 9, b do
  local h = redis.call('HMGET', base .. ':' .. i, 'd', 'w')
  d = d + (tonumber(h[1]) or 0)
  w = w + (tonumber(h[2]) or 0)
end
local got = math.max(0, math.min(want, math.floor(d * ratio + reserve - w)))
if got > 0 then
  redis.call('HINCRBY', k, 'w', got)
  redis.call('PEXPIRE', k, ttl + step)
end
return got
"#,
    )
});

/// Reports calls and tops up leases, every `budget_sync` or when a lease runs dry.
pub(crate) async fn budget_loop(weak: Weak<Shared>, wake: Arc<Notify>) {
    loop {
        let every = match weak.upgrade() {
            Some(s) => s.options.budget_sync,
            None => return,
        };
        let _ = tokio::time::timeout(every, wake.notified()).await;
        let Some(shared) = weak.upgrade() else { return };
        let links: Vec<Arc<BudgetLink>> = shared
            .budgets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for link in links {
            sync(&shared, &link).await;
        }
        drop(shared);
        // A dry lease wakes this loop; keep a dry spell from turning into a stream of calls.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn sync(shared: &Shared, link: &BudgetLink) {
    let deposits = link.deposits.swap(0, Ordering::AcqRel);
    let used = link.used.swap(0, Ordering::AcqRel);
    let target = i64::try_from(used.saturating_mul(2).clamp(1, 100)).unwrap_or(100);
    let want = (target - link.lease.load(Ordering::Acquire)).max(0);
    if deposits == 0 && want == 0 {
        return;
    }
    let config = link.budget.config().clone();
    let ttl = u64::try_from(config.ttl().as_millis()).unwrap_or(u64::MAX);
    let got = shared
        .run(|mut conn| {
            let mut call = SYNC.key(&link.base);
            call.arg(deposits)
                .arg(want)
                .arg(config.retry_ratio())
                .arg(config.reserve())
                .arg(ttl);
            async move { call.invoke_async::<i64>(&mut conn).await }
        })
        .await;
    match got {
        Some(n) if n > 0 => {
            link.lease.fetch_add(n, Ordering::AcqRel);
        }
        Some(_) => {}
        // Redis away: the local budget decides meanwhile; these calls are not reported.
        None => {}
    }
}

/// How often leases are topped up unless one runs dry first.
pub(crate) const DEFAULT_SYNC: Duration = Duration::from_millis(100);
