//! Circuit breakers: stop calling a dependency that is down.
//!
//! Retries alone make an outage worse: every caller multiplies its load on a dependency that is
//! already failing. A breaker watches the final outcomes of calls; when too many fail it *opens*
//! and rejects calls at once — no attempt, no retry budget spent — for `reset_timeout`. Then it
//! goes *half-open* and lets a few probes through: if they succeed it *closes*, if one fails it
//! opens again (for longer, if `reset_timeout_growth` is above 1).
//!
//! Design points:
//! - **The closed fast path is one atomic load.** State and a generation number share one
//!   `AtomicU64`; [`CircuitBreaker::try_acquire`] in the closed state reads it and returns a
//!   [`Permit`] that borrows the breaker: no lock, no allocation, no clock. Recording a success
//!   under the count rule is free; under the ratio rule it is a compare-and-swap on a rolling
//!   bucket.
//! - **Outcomes belong to the state that admitted them.** A permit remembers the generation it
//!   was issued in; an outcome arriving after the breaker moved on (a slow call admitted while
//!   closed, finishing after the breaker opened and half-opened) is ignored rather than being
//!   mistaken for a probe result.
//! - **Half-open admits at most `half_open_max_calls` probes at once**; the rest are rejected,
//!   not queued. "At once" is literal: a probe from an earlier half-open period that is still
//!   running keeps its slot until it ends, so the dependency never sees more probes in flight
//!   than the limit. Every probe frees its slot when resolved or dropped (a cancelled call); a
//!   probe that never finishes keeps it, so give calls an `attempt_timeout`.
//! - **Only infrastructure failures count** ([`ErrorClass::counts_as_breaker_failure`]): a 404
//!   proves the dependency is up.

mod config;
mod owned;
mod registry;
mod shared;

pub use config::{BreakerConfig, BreakerConfigBuilder, TripRule};
pub use owned::OwnedPermit;
pub use registry::BreakerRegistry;
pub use shared::{AlreadyShared, SharedOutcome, SharedState};

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::window::RollingCounter;
use crate::{ErrorClass, ErrorCode, ErrorKind};

/// Where a breaker is in its cycle.
///
/// ```
/// let b = steadfast::CircuitBreaker::new(Default::default());
/// assert_eq!(b.state(), steadfast::BreakerState::Closed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreakerState {
    /// Calls flow; failures are counted.
    Closed,
    /// Calls are rejected until the open time has passed.
    Open,
    /// A limited number of probe calls are let through to test recovery.
    HalfOpen,
    /// Forced open by [`CircuitBreaker::isolate`] until [`CircuitBreaker::reset`].
    Isolated,
}

impl BreakerState {
    fn from_bits(bits: u64) -> Self {
        match bits & STATE_MASK {
            CLOSED => Self::Closed,
            OPEN => Self::Open,
            HALF_OPEN => Self::HalfOpen,
            _ => Self::Isolated,
        }
    }

    /// The kebab-case name (`"half-open"`).
    ///
    /// ```
    /// assert_eq!(steadfast::BreakerState::HalfOpen.as_str(), "half-open");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half-open",
            Self::Isolated => "isolated",
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;
const ISOLATED: u64 = 3;
const STATE_MASK: u64 = 0b11;

/// What a breaker reports to its subscribers.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use steadfast::{BreakerConfig, BreakerEvent, CircuitBreaker};
///
/// let breaker = CircuitBreaker::new(BreakerConfig::builder().failure_threshold(1).build().unwrap());
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// breaker.subscribe(move |ev| log.lock().unwrap().push(ev.clone()));
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// breaker.try_acquire().unwrap().failure();
/// # });
/// assert!(matches!(seen.lock().unwrap()[0], BreakerEvent::Opened { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerEvent {
    /// The breaker opened (from closed, or again from half-open) for this long.
    Opened {
        /// How long it will stay open.
        open_for: Duration,
        /// How many times in a row it has opened without closing in between.
        consecutive: u32,
    },
    /// The open time passed; probes are being admitted.
    HalfOpened,
    /// Enough probes succeeded, or the breaker was reset.
    Closed,
    /// Forced open by [`CircuitBreaker::isolate`].
    Isolated,
    /// A call was rejected.
    Rejected {
        /// The state that rejected it.
        state: BreakerState,
    },
}

type Subscriber = Arc<dyn Fn(&BreakerEvent) + Send + Sync>;

/// Identifies a subscription, for [`CircuitBreaker::unsubscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubscriptionId(u64);

/// A call the breaker refused.
///
/// ```
/// let breaker = steadfast::CircuitBreaker::new(Default::default());
/// breaker.isolate();
/// let rejected = breaker.try_acquire().unwrap_err();
/// assert_eq!(rejected.state, steadfast::BreakerState::Isolated);
/// assert_eq!(rejected.class().code.as_str(), "CIRCUIT_OPEN");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct Rejected {
    /// The state that rejected the call.
    pub state: BreakerState,
    /// How long until the breaker will admit a probe, when known.
    pub retry_in: Option<Duration>,
    /// The breaker's name, if it has one.
    pub name: Option<Cow<'static, str>>,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("circuit breaker")?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        match self.state {
            BreakerState::HalfOpen => f.write_str(" is half-open and its probe slots are taken")?,
            BreakerState::Isolated => f.write_str(" is isolated (forced open)")?,
            _ => f.write_str(" is open")?,
        }
        if let Some(d) = self.retry_in {
            write!(
                f,
                "; it may admit a call in {}",
                humantime::format_duration(round_ms(d))
            )?;
        }
        Ok(())
    }
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Rejected {
    /// The classification of a rejection: `CIRCUIT_OPEN`, not retriable (retrying at once would
    /// only be rejected again), with `retry_after` set to when the breaker may admit a call, and
    /// not counted against any breaker.
    ///
    /// See the type-level example.
    pub fn class(&self) -> ErrorClass {
        let mut class = ErrorClass::new(ErrorKind::NonRetriable, ErrorCode::CIRCUIT_OPEN)
            .with_breaker_failure(false)
            .with_message("circuit breaker is open");
        class.retry_after = self.retry_in;
        class
    }
}

impl crate::Classify for Rejected {
    fn classify(&self) -> ErrorClass {
        self.class()
    }
}

/// A snapshot of a breaker, for health checks and metrics.
///
/// ```
/// let stats = steadfast::CircuitBreaker::new(Default::default()).stats();
/// assert_eq!(stats.state, steadfast::BreakerState::Closed);
/// assert_eq!(stats.rejected, 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct BreakerStats {
    /// The current state.
    pub state: BreakerState,
    /// Failures counted in the current window (closed state).
    pub failures_in_window: u64,
    /// Calls counted in the current window (ratio rule only).
    pub calls_in_window: Option<u64>,
    /// Probes in flight (half-open state).
    pub probes_in_flight: u32,
    /// Times opened in a row without closing.
    pub consecutive_opens: u32,
    /// Time left before the breaker admits a probe (open state).
    #[serde(with = "humantime_serde")]
    pub open_remaining: Option<Duration>,
    /// Times the breaker has opened since it was created.
    pub times_opened: u64,
    /// Calls rejected since it was created.
    pub rejected: u64,
}

/// State that changes only on failures and transitions, behind the mutex.
struct Slow {
    /// Count rule: times of the most recent failures, oldest first (at most `failure_threshold`).
    failures: VecDeque<u64>,
    probes_in_flight: u32,
    probe_successes: u32,
    consecutive_opens: u32,
}

struct Ratio {
    calls: RollingCounter,
    failures: RollingCounter,
}

#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

struct Counters {
    times_opened: AtomicU64,
    /// Striped by thread: during an outage every caller is rejected at once, and one shared
    /// counter would make them queue on its cache line.
    rejected: [Padded<AtomicU64>; REJECTED_STRIPES],
}

const REJECTED_STRIPES: usize = 4;

/// This thread's stripe of a striped counter: assigned round-robin on first use.
fn stripe() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    STRIPE.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Ordering::Relaxed) % REJECTED_STRIPES);
        }
        s.get()
    })
}

struct Inner {
    name: Option<Cow<'static, str>>,
    config: BreakerConfig,
    epoch: Instant,
    /// `generation << 2 | state`.
    word: AtomicU64,
    /// When the open state ends, in nanoseconds since `epoch`.
    open_until: AtomicU64,
    ratio: Option<Ratio>,
    slow: Mutex<Slow>,
    /// Written on every rejection: kept off the cache line of the read-mostly `word`.
    counters: Padded<Counters>,
    subscribers: RwLock<Vec<(u64, Subscriber)>>,
    has_subscribers: AtomicBool,
    next_subscriber: AtomicU64,
    /// Events in the order their transitions happened (pushed under `slow`), awaiting delivery.
    events: Mutex<VecDeque<BreakerEvent>>,
    /// Set while one thread delivers the queue; others leave their events to it.
    delivering: AtomicBool,
    /// A store shared with other processes (`shared.rs`), if any.
    shared: OnceLock<Arc<dyn shared::SharedState>>,
}

/// A circuit breaker. Cheap to clone: clones share one state.
///
/// Use it through the retry engine ([`Retry::breaker`](crate::Retry::breaker)), which records
/// each call's final outcome, or on its own with [`try_acquire`](Self::try_acquire) and the
/// returned [`Permit`]:
///
/// ```
/// use std::time::Duration;
/// use steadfast::{BreakerConfig, BreakerState, CircuitBreaker};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let breaker = CircuitBreaker::new(
///     BreakerConfig::builder().failure_threshold(2).reset_timeout(Duration::from_secs(10)).build().unwrap(),
/// );
/// breaker.try_acquire().unwrap().failure();
/// breaker.try_acquire().unwrap().failure();
/// assert_eq!(breaker.state(), BreakerState::Open);
/// assert!(breaker.try_acquire().is_err());
///
/// tokio::time::sleep(Duration::from_secs(10)).await;
/// let probe = breaker.try_acquire().unwrap();
/// assert_eq!(breaker.state(), BreakerState::HalfOpen);
/// probe.success();
/// assert_eq!(breaker.state(), BreakerState::Closed);
/// # }
/// ```
#[derive(Clone)]
pub struct CircuitBreaker {
    inner: Arc<Inner>,
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("name", &self.inner.name)
            .field("state", &self.state_now())
            .field("config", &self.inner.config)
            .finish()
    }
}

impl CircuitBreaker {
    /// A closed breaker with this configuration.
    ///
    /// ```
    /// let b = steadfast::CircuitBreaker::new(steadfast::BreakerConfig::default());
    /// assert_eq!(b.config().failure_threshold(), 5);
    /// ```
    pub fn new(config: BreakerConfig) -> Self {
        Self::build(None, config)
    }

    /// A closed breaker with a name, which appears in rejections and tracing.
    ///
    /// ```
    /// let b = steadfast::CircuitBreaker::named("search-api", Default::default());
    /// assert_eq!(b.name(), Some("search-api"));
    /// ```
    pub fn named(name: impl Into<Cow<'static, str>>, config: BreakerConfig) -> Self {
        Self::build(Some(name.into()), config)
    }

    fn build(name: Option<Cow<'static, str>>, config: BreakerConfig) -> Self {
        let ratio = (config.trip() == TripRule::Ratio).then(|| Ratio {
            calls: RollingCounter::new(config.window()),
            failures: RollingCounter::new(config.window()),
        });
        Self {
            inner: Arc::new(Inner {
                name,
                slow: Mutex::new(Slow {
                    failures: VecDeque::with_capacity(config.failure_threshold().min(1024) as usize),
                    probes_in_flight: 0,
                    probe_successes: 0,
                    consecutive_opens: 0,
                }),
                config,
                epoch: Instant::now(),
                word: AtomicU64::new(CLOSED),
                open_until: AtomicU64::new(0),
                ratio,
                counters: Padded(Counters {
                    times_opened: AtomicU64::new(0),
                    rejected: Default::default(),
                }),
                subscribers: RwLock::new(Vec::new()),
                has_subscribers: AtomicBool::new(false),
                next_subscriber: AtomicU64::new(0),
                events: Mutex::new(VecDeque::new()),
                delivering: AtomicBool::new(false),
                shared: OnceLock::new(),
            }),
        }
    }

    /// The breaker's name, if it has one.
    ///
    /// ```
    /// assert_eq!(steadfast::CircuitBreaker::new(Default::default()).name(), None);
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.inner.name.as_deref()
    }

    /// The configuration.
    ///
    /// ```
    /// let b = steadfast::CircuitBreaker::new(Default::default());
    /// assert_eq!(b.config().half_open_max_calls(), 1);
    /// ```
    pub fn config(&self) -> &BreakerConfig {
        &self.inner.config
    }

    #[inline]
    fn now(&self) -> u64 {
        let d = Instant::now().saturating_duration_since(self.inner.epoch);
        d.as_secs()
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(d.subsec_nanos()))
    }

    fn lock(&self) -> MutexGuard<'_, Slow> {
        // A panic in a subscriber never happens under this lock, so poisoning can only come from
        // a bug here; the state it protects is still consistent counters, so carry on.
        self.inner.slow.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks to make a call. In the closed state this is one atomic load.
    ///
    /// Open: rejected until the open time has passed; the first call after it turns the breaker
    /// half-open and is admitted as a probe. Half-open: admitted while fewer than
    /// `half_open_max_calls` probes are in flight. Isolated: always rejected.
    ///
    /// See [`CircuitBreaker`] for an example.
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Rejected> {
        let word = self.inner.word.load(Ordering::Acquire);
        if word & STATE_MASK == CLOSED {
            return Ok(Permit::new(self, word, false));
        }
        self.acquire_slow(word)
    }

    /// Whether a call would be admitted now — without asking to make one: no probe slot is
    /// taken, no state changes, no rejection is counted, no event is sent. For health checks,
    /// dashboards and routing ("use the fallback tool while this one is open"); to make a call,
    /// use [`try_acquire`](Self::try_acquire), whose answer is the one that counts (another
    /// caller may take the last probe slot in between).
    ///
    /// True when closed, when half-open (or open with its open time over) with a probe slot
    /// free; false when open or isolated. (`isCallPermitted` in `tool-call-retry`.)
    ///
    /// ```
    /// let breaker = steadfast::CircuitBreaker::new(Default::default());
    /// assert!(breaker.is_call_permitted());
    /// breaker.isolate();
    /// assert!(!breaker.is_call_permitted());
    /// assert_eq!(breaker.stats().rejected, 0, "asking is not a call");
    /// ```
    pub fn is_call_permitted(&self) -> bool {
        let word = self.inner.word.load(Ordering::Acquire);
        match word & STATE_MASK {
            CLOSED => true,
            ISOLATED => false,
            state => {
                if state == OPEN && self.open_remaining().is_some() {
                    return false;
                }
                self.lock().probes_in_flight < self.inner.config.half_open_max_calls()
            }
        }
    }

    #[cold]
    fn acquire_slow(&self, word: u64) -> Result<Permit<'_>, Rejected> {
        // Rejections while plainly open need no lock.
        match word & STATE_MASK {
            ISOLATED => return Err(self.reject(BreakerState::Isolated, None)),
            OPEN => {
                let (now, until) = (self.now(), self.inner.open_until.load(Ordering::Acquire));
                if now < until {
                    return Err(
                        self.reject(BreakerState::Open, Some(Duration::from_nanos(until - now)))
                    );
                }
            }
            _ => {}
        }
        let result = 'decide: {
            let mut slow = self.lock();
            let word = self.inner.word.load(Ordering::Acquire);
            match word & STATE_MASK {
                CLOSED => Ok(Permit::new(self, word, false)),
                ISOLATED => Err(BreakerState::Isolated),
                state => {
                    let mut word = word;
                    if state == OPEN {
                        if self.now() < self.inner.open_until.load(Ordering::Acquire) {
                            // Another thread reopened it between our two reads.
                            break 'decide Err(BreakerState::Open);
                        }
                        if !self.shared_may_probe() {
                            break 'decide Err(BreakerState::Open); // Another process probes.
                        }
                        slow.probe_successes = 0;
                        word = self.transition(word, HALF_OPEN);
                        self.queue(BreakerEvent::HalfOpened);
                    }
                    if slow.probes_in_flight < self.inner.config.half_open_max_calls() {
                        slow.probes_in_flight += 1;
                        Ok(Permit::new(self, word, true))
                    } else {
                        Err(BreakerState::HalfOpen)
                    }
                }
            }
        };
        self.deliver();
        result.map_err(|state| {
            let retry_in = (state == BreakerState::Open)
                .then(|| self.open_remaining())
                .flatten();
            self.reject(state, retry_in)
        })
    }

    #[inline]
    fn reject(&self, state: BreakerState, retry_in: Option<Duration>) -> Rejected {
        self.inner.counters.0.rejected[stripe()]
            .0
            .fetch_add(1, Ordering::Relaxed);
        if self.inner.has_subscribers.load(Ordering::Acquire) {
            self.queue(BreakerEvent::Rejected { state });
            self.deliver();
        }
        Rejected {
            state,
            retry_in,
            name: self.inner.name.clone(),
        }
    }

    /// Stores a new state with the next generation; returns the new word. Call with the lock held.
    fn transition(&self, word: u64, state: u64) -> u64 {
        let next = ((word >> 2).wrapping_add(1) << 2) | state;
        self.inner.word.store(next, Ordering::Release);
        next
    }

    /// Opens the breaker (lock held). `again` is true when reopening from half-open.
    fn open(&self, slow: &mut Slow, word: u64, again: bool) {
        slow.consecutive_opens = if again {
            slow.consecutive_opens.saturating_add(1)
        } else {
            1
        };
        let open_for = self.inner.config.open_duration(slow.consecutive_opens);
        let until = self
            .now()
            .saturating_add(u64::try_from(open_for.as_nanos()).unwrap_or(u64::MAX));
        self.enter_open(slow, word, open_for, until, "own rule");
    }

    /// Moves to (or stays) open until `until` (lock held): the one place that opens the
    /// breaker, whether its own rule tripped or shared state said so (`by`).
    fn enter_open(
        &self,
        slow: &mut Slow,
        word: u64,
        open_for: Duration,
        until: u64,
        by: &'static str,
    ) {
        self.inner.open_until.store(until, Ordering::Release);
        slow.failures.clear();
        slow.probe_successes = 0;
        if word & STATE_MASK != OPEN {
            self.transition(word, OPEN);
            self.inner
                .counters
                .0
                .times_opened
                .fetch_add(1, Ordering::Relaxed);
        }
        tracing::debug!(
            breaker = self.name().unwrap_or(""),
            open_ms = open_for.as_millis() as u64,
            by,
            "circuit opened"
        );
        self.queue(BreakerEvent::Opened {
            open_for,
            consecutive: slow.consecutive_opens,
        });
    }

    /// Closes the breaker (lock held), forgetting the window.
    fn close(&self, slow: &mut Slow, word: u64) {
        slow.failures.clear();
        slow.probe_successes = 0;
        slow.consecutive_opens = 0;
        if let Some(r) = &self.inner.ratio {
            r.calls.clear();
            r.failures.clear();
        }
        self.transition(word, CLOSED);
        tracing::debug!(breaker = self.name().unwrap_or(""), "circuit closed");
        self.queue(BreakerEvent::Closed);
    }

    #[inline]
    fn record(&self, generation_word: u64, probe: bool, failed: bool) {
        if !probe && !failed && self.inner.ratio.is_none() {
            // The fast path: a success in the closed state changes nothing under the count rule.
            return;
        }
        self.record_slow(generation_word, probe, failed);
    }

    #[inline(never)]
    fn record_slow(&self, generation_word: u64, probe: bool, failed: bool) {
        self.share_outcome(probe, failed);
        if !probe && !failed {
            // Ratio rule: one bucket update.
            if let Some(r) = &self.inner.ratio
                && self.inner.word.load(Ordering::Acquire) == generation_word
            {
                r.calls.add(self.now(), 1);
            }
            return;
        }
        let now = self.now();
        if !probe && let Some(r) = &self.inner.ratio {
            r.calls.add(now, 1);
            r.failures.add(now, 1);
        }
        {
            let mut slow = self.lock();
            if probe {
                // A probe frees its slot whatever happened since it was admitted.
                slow.probes_in_flight = slow.probes_in_flight.saturating_sub(1);
            }
            let word = self.inner.word.load(Ordering::Acquire);
            if word != generation_word {
                return; // The breaker moved on since this call was admitted.
            }
            match (word & STATE_MASK, failed) {
                (HALF_OPEN, true) => self.open(&mut slow, word, true),
                (HALF_OPEN, false) => {
                    slow.probe_successes += 1;
                    if slow.probe_successes >= self.inner.config.success_threshold() {
                        self.close(&mut slow, word);
                    }
                }
                (CLOSED, true) if self.trips(&mut slow, now) => self.open(&mut slow, word, false),
                _ => {}
            }
        }
        self.deliver();
    }

    /// Records a closed-state failure at `now` and says whether the trip rule fires (lock held).
    fn trips(&self, slow: &mut Slow, now: u64) -> bool {
        let c = &self.inner.config;
        let window = u64::try_from(c.window().as_nanos()).unwrap_or(u64::MAX);
        match &self.inner.ratio {
            None => {
                let threshold = c.failure_threshold() as usize;
                slow.failures.push_back(now);
                while slow.failures.len() > threshold {
                    slow.failures.pop_front();
                }
                while slow
                    .failures
                    .front()
                    .is_some_and(|t| now.saturating_sub(*t) >= window)
                {
                    slow.failures.pop_front();
                }
                slow.failures.len() >= threshold
            }
            Some(r) => {
                let calls = r.calls.sum(now);
                let failures = r.failures.sum(now);
                calls >= u64::from(c.minimum_throughput())
                    && failures as f64 >= c.failure_ratio() * calls as f64
            }
        }
    }

    /// Whether a success that took `elapsed` counts as a (slow) failure.
    fn is_slow(&self, elapsed: Duration) -> bool {
        self.inner
            .config
            .slow_call_threshold()
            .is_some_and(|t| elapsed > t)
    }

    fn release_probe(&self) {
        let mut slow = self.lock();
        slow.probes_in_flight = slow.probes_in_flight.saturating_sub(1);
    }

    /// The current state. An open breaker whose open time has passed reports `HalfOpen`: the
    /// next call will be admitted as a probe.
    ///
    /// See [`CircuitBreaker`] for an example.
    pub fn state(&self) -> BreakerState {
        self.state_now()
    }

    fn state_now(&self) -> BreakerState {
        let state = BreakerState::from_bits(self.inner.word.load(Ordering::Acquire));
        if state == BreakerState::Open && self.open_remaining().is_none() {
            return BreakerState::HalfOpen;
        }
        state
    }

    fn open_remaining(&self) -> Option<Duration> {
        let until = self.inner.open_until.load(Ordering::Acquire);
        let now = self.now();
        (now < until).then(|| Duration::from_nanos(until - now))
    }

    /// A snapshot for health checks.
    ///
    /// ```
    /// let b = steadfast::CircuitBreaker::new(Default::default());
    /// b.isolate();
    /// let _ = b.try_acquire();
    /// let s = b.stats();
    /// assert_eq!((s.state, s.rejected), (steadfast::BreakerState::Isolated, 1));
    /// ```
    pub fn stats(&self) -> BreakerStats {
        let slow = self.lock();
        let state = self.state_now();
        let now = self.now();
        let (failures_in_window, calls_in_window) = match &self.inner.ratio {
            Some(r) => (r.failures.sum(now), Some(r.calls.sum(now))),
            None => {
                let window =
                    u64::try_from(self.inner.config.window().as_nanos()).unwrap_or(u64::MAX);
                let recent = slow
                    .failures
                    .iter()
                    .filter(|t| now.saturating_sub(**t) < window)
                    .count();
                (recent as u64, None)
            }
        };
        BreakerStats {
            state,
            failures_in_window,
            calls_in_window,
            probes_in_flight: slow.probes_in_flight,
            consecutive_opens: slow.consecutive_opens,
            open_remaining: (state == BreakerState::Open)
                .then(|| self.open_remaining())
                .flatten(),
            times_opened: self.inner.counters.0.times_opened.load(Ordering::Relaxed),
            rejected: self
                .inner
                .counters
                .0
                .rejected
                .iter()
                .map(|c| c.0.load(Ordering::Relaxed))
                .sum(),
        }
    }

    /// Forces the breaker open until [`reset`](Self::reset): for maintenance windows, or when an
    /// operator knows better than the counters.
    ///
    /// ```
    /// let b = steadfast::CircuitBreaker::new(Default::default());
    /// b.isolate();
    /// assert_eq!(b.state(), steadfast::BreakerState::Isolated);
    /// b.reset();
    /// assert_eq!(b.state(), steadfast::BreakerState::Closed);
    /// ```
    pub fn isolate(&self) {
        {
            let _slow = self.lock();
            let word = self.inner.word.load(Ordering::Acquire);
            if word & STATE_MASK == ISOLATED {
                return;
            }
            self.transition(word, ISOLATED);
            self.queue(BreakerEvent::Isolated);
        }
        self.deliver();
    }

    /// Closes the breaker and forgets its history, whatever its state.
    ///
    /// See [`isolate`](Self::isolate) for an example.
    pub fn reset(&self) {
        {
            let mut slow = self.lock();
            let word = self.inner.word.load(Ordering::Acquire);
            self.inner.open_until.store(0, Ordering::Release);
            self.close(&mut slow, word);
        }
        self.deliver();
    }

    /// Calls `f` on every event from now on, in the order the transitions happened.
    ///
    /// Events are delivered outside the breaker's locks, so `f` may call back into the breaker.
    /// Usually on the thread that caused the event; when two threads cause events at once, one
    /// of them delivers both, in order. Keep `f` quick: it runs inside a call.
    ///
    /// See [`BreakerEvent`] for an example.
    pub fn subscribe(&self, f: impl Fn(&BreakerEvent) + Send + Sync + 'static) -> SubscriptionId {
        let id = self.inner.next_subscriber.fetch_add(1, Ordering::Relaxed);
        let mut subs = self
            .inner
            .subscribers
            .write()
            .unwrap_or_else(|p| p.into_inner());
        subs.push((id, Arc::new(f)));
        self.inner.has_subscribers.store(true, Ordering::Release);
        SubscriptionId(id)
    }

    /// Stops a subscription; returns whether it was active.
    ///
    /// ```
    /// let b = steadfast::CircuitBreaker::new(Default::default());
    /// let id = b.subscribe(|_| {});
    /// assert!(b.unsubscribe(id));
    /// assert!(!b.unsubscribe(id));
    /// ```
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        let mut subs = self
            .inner
            .subscribers
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let before = subs.len();
        subs.retain(|(i, _)| *i != id.0);
        self.inner
            .has_subscribers
            .store(!subs.is_empty(), Ordering::Release);
        subs.len() != before
    }

    /// Queues an event. Transition events are queued with `slow` held, which fixes their order.
    fn queue(&self, event: BreakerEvent) {
        if self.inner.has_subscribers.load(Ordering::Acquire) {
            self.inner
                .events
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_back(event);
        }
    }

    /// Delivers queued events, unless another thread is already doing so. Holds no lock while a
    /// subscriber runs.
    fn deliver(&self) {
        let inner = &self.inner;
        if !inner.has_subscribers.load(Ordering::Acquire) {
            return;
        }
        let pending = || {
            !inner
                .events
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
        };
        while pending() {
            if inner
                .delivering
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return; // The thread delivering will see our events.
            }
            // Released even if a subscriber panics, so delivery never stops for good.
            struct Release<'a>(&'a AtomicBool);
            impl Drop for Release<'_> {
                fn drop(&mut self) {
                    self.0.store(false, Ordering::Release);
                }
            }
            let _release = Release(&inner.delivering);
            loop {
                let next = inner
                    .events
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .pop_front();
                let Some(event) = next else { break };
                // Clone the list out so a subscriber may subscribe or unsubscribe.
                let subs: Vec<Subscriber> = {
                    let guard = inner.subscribers.read().unwrap_or_else(|p| p.into_inner());
                    guard.iter().map(|(_, f)| f.clone()).collect()
                };
                for f in subs {
                    f(&event);
                }
            }
            // Loop: events queued after our last pop but before the flag dropped are ours too.
        }
    }
}

/// Permission to make one call, and the duty to report how it went.
///
/// Resolve it with [`success`](Self::success), [`failure`](Self::failure) or
/// [`record`](Self::record). Dropping it unresolved (the call was cancelled) records nothing and
/// frees a half-open probe slot.
///
/// ```
/// let breaker = steadfast::CircuitBreaker::new(Default::default());
/// let permit = breaker.try_acquire().unwrap();
/// assert!(!permit.is_probe());
/// permit.success();
/// ```
#[must_use = "report the outcome with success(), failure() or record()"]
pub struct Permit<'a> {
    breaker: &'a CircuitBreaker,
    word: u64,
    probe: bool,
    resolved: bool,
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("probe", &self.probe)
            .field("current", &self.is_current())
            .finish()
    }
}

impl<'a> Permit<'a> {
    #[inline]
    fn new(breaker: &'a CircuitBreaker, word: u64, probe: bool) -> Self {
        Self {
            breaker,
            word,
            probe,
            resolved: false,
        }
    }

    /// Whether this call is a half-open probe.
    ///
    /// See [`Permit`] for an example.
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    /// Whether the breaker is still in the state that admitted this call. The engine checks
    /// this before each retry, and stops if the breaker opened meanwhile.
    ///
    /// ```
    /// let breaker = steadfast::CircuitBreaker::new(Default::default());
    /// let permit = breaker.try_acquire().unwrap();
    /// breaker.isolate();
    /// assert!(!permit.is_current());
    /// # drop(permit);
    /// ```
    pub fn is_current(&self) -> bool {
        self.breaker.inner.word.load(Ordering::Acquire) == self.word
    }

    /// The call succeeded.
    ///
    /// See [`Permit`] for an example.
    #[inline]
    pub fn success(self) {
        self.record(false);
    }

    /// The call failed in a way that counts against the breaker.
    ///
    /// See [`CircuitBreaker`] for an example.
    #[inline]
    pub fn failure(self) {
        self.record(true);
    }

    /// Records the outcome: `failed` says whether it counts against the breaker.
    ///
    /// ```
    /// let breaker = steadfast::CircuitBreaker::new(Default::default());
    /// let class = steadfast::ErrorClass::from_status(404);
    /// breaker.try_acquire().unwrap().record(class.counts_as_breaker_failure());
    /// assert_eq!(breaker.stats().failures_in_window, 0);
    /// ```
    #[inline]
    pub fn record(mut self, failed: bool) {
        self.resolved = true;
        self.breaker.record(self.word, self.probe, failed);
    }

    /// Records a success that took `elapsed`: a failure if it exceeded the configured
    /// `slow_call_threshold`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let breaker = steadfast::CircuitBreaker::new(
    ///     steadfast::BreakerConfig::builder().slow_call_threshold(Duration::from_secs(1)).build().unwrap(),
    /// );
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// breaker.try_acquire().unwrap().success_after(Duration::from_secs(3));
    /// # });
    /// assert_eq!(breaker.stats().failures_in_window, 1);
    /// ```
    pub fn success_after(self, elapsed: Duration) {
        let slow = self.breaker.is_slow(elapsed);
        self.record(slow);
    }
}

impl Drop for Permit<'_> {
    #[inline]
    fn drop(&mut self) {
        if !self.resolved && self.probe {
            self.breaker.release_probe();
        }
    }
}

#[cfg(test)]
mod tests;
