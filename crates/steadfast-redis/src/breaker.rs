//! Breakers shared across replicas.
//!
//! Each replica keeps deciding on its own (a closed breaker is still one atomic load) and tells
//! Redis what it saw, in batches, from a background task. Reporting an outcome costs a call two
//! atomic additions (the first after a batch also wakes the task); probe events go through a
//! bounded queue, dropped and counted when it is full.
//!
//! - **Outcomes** go to per-replica counters in time buckets (a Lua script: ten buckets per
//!   window, like the local ratio rule). After adding a batch the script sums the window over all
//!   replicas and applies the breaker's own rule to the sum — failure count, or failure ratio
//!   with its minimum throughput — and requires at least `quorum` replicas with failures. When
//!   it fires, it sets the *open key* (`PX` = the open time) and publishes `open`, so every
//!   replica opens within one pub/sub message.
//! - **The probe**: when a shared opening ends, a replica's first call asks for the probe slot
//!   (`SET NX PX`) and is rejected meanwhile; the one replica that wins sends the probe. Its
//!   success deletes the open key and publishes `closed` (everyone closes); its failure re-opens
//!   the key for the breaker's next open time and publishes `open`.
//! - A replica whose *own* rule trips opens only itself: with a quorum above 1, one sick replica
//!   cannot open the breaker for the others, and its probes stay local.
//! - A replica that missed messages (Redis was away, or it just started) re-reads the open key
//!   every `sync_every`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use redis::Script;
use steadfast::{BreakerState, CircuitBreaker, SharedOutcome, SharedState, TripRule};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::state::Shared;
use crate::{Error, RedisState};

/// What the report queue carries: a breaker's index and what happened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Report {
    link: u32,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    ProbeOk,
    ProbeFailed,
    AskSlot,
}

/// Probe slot states of one replica.
const SLOT_NONE: u8 = 0;
const SLOT_ASKED: u8 = 1;
const SLOT_GRANTED: u8 = 2;
const SLOT_HELD: u8 = 3;

pub(crate) struct BreakerLink {
    id: u32,
    name: String,
    /// `{prefix:b:name}`: the hash tag keeps a breaker's keys in one cluster slot.
    base: String,
    breaker: CircuitBreaker,
    tx: mpsc::Sender<Report>,
    /// Outcomes not yet sent: counted here rather than queued one by one, so reporting one
    /// costs two atomic additions; the first after a batch wakes the reporter.
    counts: Counts,
    flush: Arc<Notify>,
    stats: Arc<crate::state::Stats>,
    shared: Weak<Shared>,
    /// The breaker is open because the shared figure said so (not only this replica's rule).
    shared_open: AtomicBool,
    slot: AtomicU8,
    /// When the slot was granted, for its lease.
    granted_at: std::sync::Mutex<Option<Instant>>,
}

#[repr(align(128))]
#[derive(Default)]
struct Counts {
    calls: AtomicU64,
    failures: AtomicU64,
    dirty: AtomicBool,
}

impl BreakerLink {
    fn count(&self, failed: bool) {
        let c = &self.counts;
        // Calls first: a batch taken in between sees the call (stats count calls, one per
        // outcome) and the failure follows in the next batch; sums stay exact.
        c.calls.fetch_add(1, Ordering::Relaxed);
        if failed {
            c.failures.fetch_add(1, Ordering::Relaxed);
        }
        if !c.dirty.load(Ordering::Relaxed) && !c.dirty.swap(true, Ordering::AcqRel) {
            self.stats.queued.fetch_add(1, Ordering::AcqRel);
            self.flush.notify_one();
        }
    }

    /// Takes the counted outcomes: `(calls, failures)`. Clears `dirty` first, so an outcome
    /// counted meanwhile marks the link again.
    fn take_counts(&self) -> Option<(u64, u64)> {
        let c = &self.counts;
        if !c.dirty.swap(false, Ordering::AcqRel) {
            return None;
        }
        Some((
            c.calls.swap(0, Ordering::AcqRel),
            c.failures.swap(0, Ordering::AcqRel),
        ))
    }

    fn send(&self, kind: Kind) {
        let stats = &self.stats;
        stats.queued.fetch_add(1, Ordering::AcqRel);
        match self.tx.try_send(Report {
            link: self.id,
            kind,
        }) {
            Ok(()) => {}
            Err(_) => {
                // Never make a call wait for Redis: count the loss instead.
                stats.queued.fetch_sub(1, Ordering::AcqRel);
                {
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                    #[cfg(feature = "metrics")]
                    metrics::counter!("steadfast_redis_reports_dropped_total").increment(1);
                }
                if kind == Kind::AskSlot {
                    self.slot.store(SLOT_NONE, Ordering::Release);
                }
            }
        }
    }

    fn redis_up(&self) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|s| RedisState { inner: s }.is_up())
    }

    fn apply_open(&self, open_for: Duration) {
        self.shared_open.store(true, Ordering::Release);
        self.breaker.open_shared(open_for);
    }

    fn apply_closed(&self) {
        self.shared_open.store(false, Ordering::Release);
        self.slot.store(SLOT_NONE, Ordering::Release);
        self.breaker.close_shared();
    }
}

impl SharedState for BreakerLink {
    fn outcome(&self, outcome: SharedOutcome) {
        let kind = match (outcome.probe, outcome.failed) {
            (false, failed) => return self.count(failed),
            (true, ok_or_failed) => {
                // Only the holder of the shared slot reports probe results; a probe after this
                // replica's own opening stays local.
                if self
                    .slot
                    .compare_exchange(SLOT_HELD, SLOT_NONE, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    return;
                }
                if ok_or_failed {
                    Kind::ProbeFailed
                } else {
                    Kind::ProbeOk
                }
            }
        };
        self.send(kind);
    }

    fn may_probe(&self) -> bool {
        if !self.shared_open.load(Ordering::Acquire) || !self.redis_up() {
            return true; // This replica's own opening, or Redis away: decide locally.
        }
        match self.slot.load(Ordering::Acquire) {
            SLOT_GRANTED => {
                let fresh = self
                    .granted_at
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_some_and(|at| at.elapsed() < lease(&self.shared));
                if fresh {
                    self.slot.store(SLOT_HELD, Ordering::Release);
                    return true;
                }
                self.slot.store(SLOT_ASKED, Ordering::Release);
                self.send(Kind::AskSlot);
                false
            }
            SLOT_HELD => true,
            SLOT_ASKED => false,
            _ => {
                if self
                    .slot
                    .compare_exchange(SLOT_NONE, SLOT_ASKED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    self.send(Kind::AskSlot);
                }
                false
            }
        }
    }
}

fn lease(shared: &Weak<Shared>) -> Duration {
    shared
        .upgrade()
        .map_or(Duration::from_secs(30), |s| s.options.probe_lease)
}

impl RedisState {
    /// Shares `breaker`'s state under its name (see the [module docs](self)). Other replicas
    /// must share a breaker of the same name and configuration. Sharing the same name twice
    /// from one state, or an unnamed breaker, is an error.
    ///
    /// ```no_run
    /// # async fn demo(state: steadfast_redis::RedisState) {
    /// let registry = steadfast::BreakerRegistry::new(Default::default());
    /// state.share_breaker(&registry.get("postgres")).unwrap();
    /// # }
    /// ```
    pub fn share_breaker(&self, breaker: &CircuitBreaker) -> Result<(), Error> {
        let name = breaker.name().ok_or(Error::UnnamedBreaker)?.to_owned();
        if name.contains(char::is_whitespace) || name.is_empty() {
            return Err(Error::Option {
                field: "breaker name",
                constraint: format!("be non-empty without spaces (got {name:?})"),
            });
        }
        let mut links = self
            .inner
            .breakers
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if links.contains_key(&name) {
            return Err(Error::AlreadyShared(name));
        }
        let link = Arc::new(BreakerLink {
            id: u32::try_from(links.len()).unwrap_or(u32::MAX),
            base: format!("{{{}:b:{name}}}", self.inner.options.prefix),
            name: name.clone(),
            breaker: breaker.clone(),
            tx: self.inner.reports.clone(),
            counts: Counts::default(),
            flush: self.inner.flush.clone(),
            stats: self.inner.stats.clone(),
            shared: Arc::downgrade(&self.inner),
            shared_open: AtomicBool::new(false),
            slot: AtomicU8::new(SLOT_NONE),
            granted_at: std::sync::Mutex::new(None),
        });
        breaker
            .share(link.clone())
            .map_err(|_| Error::AlreadyShared(name.clone()))?;
        links.insert(name, link);
        Ok(())
    }
}

/// Adds outcomes to this replica's bucket, then applies the rule to the window's sum.
/// KEYS[1] base. ARGV: replica, failures, calls, window_ms, rule (c|r), threshold, ratio,
/// min_calls, quorum, open_ms, channel, name.
static REPORT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local base, replica = KEYS[1], ARGV[1]
local fails, calls = tonumber(ARGV[2]), tonumber(ARGV[3])
local window = tonumber(ARGV[4])
local step = math.max(1, math.floor(window / 10))
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local b = math.floor(now / step)
local k = base .. ':w:' .. b
if fails > 0 then redis.call('HINCRBY', k, 'f:' .. replica, fails) end
if calls > 0 then redis.call('HINCRBY', k, 'c:' .. replica, calls) end
redis.call('PEXPIRE', k, window + step)
if redis.call('EXISTS', base .. ':open') == 1 then return 0 end
local total_f, total_c, failing, n = 0, 0, {}, 0
for i = b - 9, b do
  local h = redis.call('HGETALL', base .. ':w:' .. i)
  for j = 1, #h, 2 do
    local kind, who, v = string.sub(h[j], 1, 1), string.sub(h[j], 3), tonumber(h[j + 1])
    if kind == 'f' then
      total_f = total_f + v
      if v > 0 and not failing[who] then failing[who] = true; n = n + 1 end
    else
      total_c = total_c + v
    end
  end
end
local trip
if ARGV[5] == 'c' then
  trip = total_f >= tonumber(ARGV[6])
else
  trip = total_c >= tonumber(ARGV[8]) and total_f >= tonumber(ARGV[7]) * total_c
end
if trip and n >= tonumber(ARGV[9]) then
  redis.call('SET', base .. ':open', replica, 'PX', ARGV[10])
  for i = b - 9, b do redis.call('DEL', base .. ':w:' .. i) end
  redis.call('PUBLISH', ARGV[11], 'open ' .. ARGV[10] .. ' ' .. replica .. ' ' .. ARGV[12])
  return 1
end
return 0
"#,
    )
});

/// A probe's result, from the replica holding the slot. KEYS[1] base. ARGV: replica, ok (1|0),
/// open_ms, channel, name.
static PROBE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local base, replica = KEYS[1], ARGV[1]
if redis.call('GET', base .. ':probe') ~= replica then return 0 end
redis.call('DEL', base .. ':probe')
if ARGV[2] == '1' then
  redis.call('DEL', base .. ':open')
  redis.call('PUBLISH', ARGV[4], 'closed ' .. replica .. ' ' .. ARGV[5])
else
  redis.call('SET', base .. ':open', replica, 'PX', ARGV[3])
  redis.call('PUBLISH', ARGV[4], 'open ' .. ARGV[3] .. ' ' .. replica .. ' ' .. ARGV[5])
end
return 1
"#,
    )
});

#[derive(Default, Clone, Copy)]
struct Batch {
    failures: u64,
    calls: u64,
    probe: Option<bool>,
    ask: bool,
}

/// Sends batches: every outcome counted and every probe event queued while the previous batch
/// was being sent, one script call per breaker.
pub(crate) async fn report_loop(
    weak: Weak<Shared>,
    mut rx: mpsc::Receiver<Report>,
    flush: Arc<Notify>,
) {
    let mut pending: HashMap<u32, Batch> = HashMap::new();
    loop {
        let mut taken = 0u64;
        tokio::select! {
            r = rx.recv() => match r {
                Some(r) => {
                    add(&mut pending, r);
                    taken += 1;
                }
                None => return,
            },
            () = flush.notified() => {}
        }
        while taken < 65_536 {
            match rx.try_recv() {
                Ok(r) => {
                    add(&mut pending, r);
                    taken += 1;
                }
                Err(_) => break,
            }
        }
        if let Some(shared) = weak.upgrade() {
            let links: Vec<Arc<BreakerLink>> = shared
                .breakers
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .values()
                .cloned()
                .collect();
            for link in &links {
                if let Some((calls, failures)) = link.take_counts() {
                    let b = pending.entry(link.id).or_default();
                    b.calls += calls;
                    b.failures += failures;
                    taken += 1;
                }
            }
            for link in links {
                if let Some(batch) = pending.remove(&link.id) {
                    send_batch(&shared, &link, batch).await;
                }
            }
        }
        pending.clear();
        if let Some(shared) = weak.upgrade() {
            shared.stats.queued.fetch_sub(taken, Ordering::AcqRel);
        }
    }
}

fn add(pending: &mut HashMap<u32, Batch>, r: Report) {
    let b = pending.entry(r.link).or_default();
    match r.kind {
        Kind::ProbeOk => b.probe = Some(true),
        Kind::ProbeFailed => b.probe = Some(false),
        Kind::AskSlot => b.ask = true,
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

async fn send_batch(shared: &Shared, link: &BreakerLink, batch: Batch) {
    let replica = shared.options.replica.clone();
    let config = link.breaker.config().clone();
    if batch.failures > 0 || (batch.calls > 0 && config.trip() == TripRule::Ratio) {
        let (rule, threshold) = match config.trip() {
            TripRule::Ratio => ("r", 0),
            _ => ("c", config.failure_threshold()),
        };
        let open_ms = ms(config.open_duration(1));
        let sent = shared
            .run(|mut conn| {
                let mut call = REPORT.key(&link.base);
                call.arg(&replica)
                    .arg(batch.failures)
                    .arg(batch.calls)
                    .arg(ms(config.window()))
                    .arg(rule)
                    .arg(threshold)
                    .arg(config.failure_ratio())
                    .arg(config.minimum_throughput())
                    .arg(shared.options.quorum)
                    .arg(open_ms)
                    .arg(&shared.channel)
                    .arg(&link.name);
                async move { call.invoke_async::<i64>(&mut conn).await }
            })
            .await;
        match sent {
            Some(_) => {
                shared
                    .stats
                    .reported
                    .fetch_add(batch.calls, Ordering::Relaxed);
            }
            None => {
                shared
                    .stats
                    .dropped
                    .fetch_add(batch.calls, Ordering::Relaxed);
            }
        }
    }
    if let Some(ok) = batch.probe {
        let stats = link.breaker.stats();
        let open_ms = ms(stats
            .open_remaining
            .unwrap_or_else(|| config.open_duration(stats.consecutive_opens.max(1))));
        let sent = shared
            .run(|mut conn| {
                let mut call = PROBE.key(&link.base);
                call.arg(&replica)
                    .arg(if ok { "1" } else { "0" })
                    .arg(open_ms)
                    .arg(&shared.channel)
                    .arg(&link.name);
                async move { call.invoke_async::<i64>(&mut conn).await }
            })
            .await;
        if ok && sent.is_some() {
            link.shared_open.store(false, Ordering::Release);
        }
    }
    if batch.ask {
        let key = format!("{}:probe", link.base);
        let lease = ms(shared.options.probe_lease);
        let won = shared
            .run(|mut conn| async move {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(&replica)
                    .arg("NX")
                    .arg("PX")
                    .arg(lease)
                    .query_async::<Option<String>>(&mut conn)
                    .await
            })
            .await;
        match won {
            Some(Some(_)) => {
                *link.granted_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                link.slot.store(SLOT_GRANTED, Ordering::Release);
            }
            _ => {
                // Lost (or Redis away): ask again on a later call, not at once.
                tokio::time::sleep(Duration::from_millis(20)).await;
                link.slot.store(SLOT_NONE, Ordering::Release);
            }
        }
    }
}

/// Re-reads every shared breaker's open key (after a reconnect, and every `sync_every`).
pub(crate) async fn resync(shared: &Shared) {
    let links: Vec<Arc<BreakerLink>> = shared
        .breakers
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .cloned()
        .collect();
    if links.is_empty() {
        return;
    }
    let keys: Vec<String> = links.iter().map(|l| format!("{}:open", l.base)).collect();
    let ttls = shared
        .run(|mut conn| async move {
            let mut pipe = redis::pipe();
            for k in &keys {
                pipe.cmd("PTTL").arg(k);
            }
            pipe.query_async::<Vec<i64>>(&mut conn).await
        })
        .await;
    let Some(ttls) = ttls else { return };
    for (link, ttl) in links.iter().zip(ttls) {
        if ttl > 0 {
            link.apply_open(Duration::from_millis(ttl.unsigned_abs()));
        } else if link.breaker.state() == BreakerState::Closed {
            link.shared_open.store(false, Ordering::Release);
        }
    }
}

/// A pub/sub message: `open MS REPLICA NAME` or `closed REPLICA NAME`.
pub(crate) fn on_message(shared: &Shared, text: &str) {
    let mut parts = text.splitn(4, ' ');
    let (verb, a, b, c) = (parts.next(), parts.next(), parts.next(), parts.next());
    let (name, open_ms) = match (verb, a, b, c) {
        (Some("open"), Some(ms), Some(_replica), Some(name)) => (name, ms.parse::<u64>().ok()),
        (Some("closed"), Some(_replica), Some(name), None) => (name, None),
        _ => return,
    };
    let link = shared
        .breakers
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(name)
        .cloned();
    let Some(link) = link else { return };
    match (verb, open_ms) {
        (Some("open"), Some(ms)) => link.apply_open(Duration::from_millis(ms)),
        (Some("closed"), _) => link.apply_closed(),
        _ => {}
    }
}
