//! The retry engine: one attempt loop that every other layer drives.
//!
//! [`retry`] runs an operation under a [`RetryPolicy`] with the default classification;
//! [`Retry`] is the configured, storable form — a policy plus a custom classifier, a result
//! check, a `should_retry` veto and hooks — built once and run many times.
//!
//! The operation is an async closure that receives the attempt number (1-based). It may borrow
//! the caller's state mutably (`async |n| self.client.call(n).await`), since the engine calls it
//! as an [`AsyncFnMut`], one attempt at a time.
//!
//! Each round of the loop:
//! 1. stop at once if the call was cancelled;
//! 2. run the attempt, cut short by the per-attempt timeout, by what is left of the time budget,
//!    and by cancellation;
//! 3. classify the outcome — an `Err` through the custom classifier then [`Classify`], an `Ok`
//!    through the result check (a value can be a failure, as an MCP result with `isError` is);
//! 4. give up if the failure is not retriable, the attempts are spent, `should_retry` declines,
//!    or the next delay would overrun the time budget;
//! 5. otherwise report the delay to the hooks, then sleep exactly that delay (racing
//!    cancellation).
//!
//! When the first attempt succeeds the engine allocates nothing and takes no lock (checked by
//! `tests/alloc.rs`); per-attempt timeouts and cancellation tokens register with tokio's timer and
//! notifier, which do.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::hooks::{Failed, GiveUpEvent, RetryEvent, SuccessEvent};
use crate::retry_error::{Failure, GiveUpReason, RetryError};
use crate::{
    CircuitBreaker, Classify, ConcurrencyLimit, ErrorClass, ErrorCode, ErrorKind, Permit,
    RetryBudget, RetryPolicy, RetrySlot, Rng, WhenFull,
};

/// Runs `op` under `policy`, classifying errors with their [`Classify`] implementation.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use steadfast::{retry, ErrorClass, RetryPolicy};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let calls = AtomicU32::new(0);
/// let value = retry(&RetryPolicy::default(), async |attempt| {
///     calls.fetch_add(1, Ordering::Relaxed);
///     if attempt < 3 { Err(ErrorClass::from_status(503)) } else { Ok("done") }
/// })
/// .await
/// .unwrap();
/// assert_eq!((value, calls.load(Ordering::Relaxed)), ("done", 3));
/// # }
/// ```
pub async fn retry<T, E, F>(policy: &RetryPolicy, op: F) -> Result<T, RetryError<E>>
where
    E: Classify,
    F: AsyncFnMut(u32) -> Result<T, E>,
{
    execute(policy, &Callbacks::default(), None, op).await
}

type ClassifyFn<E> = dyn Fn(&E) -> Option<ErrorClass> + Send + Sync;
type CheckFn<T> = dyn Fn(&T) -> Option<ErrorClass> + Send + Sync;
type ShouldRetryFn<E> = dyn Fn(&E, u32) -> bool + Send + Sync;
type OnRetryFn<E> = dyn Fn(&RetryEvent<'_, E>) + Send + Sync;
type OnSuccessFn = dyn Fn(&SuccessEvent) + Send + Sync;
type OnGiveUpFn<E> = dyn Fn(&GiveUpEvent<'_, E>) + Send + Sync;

/// Everything a [`Retry`] adds to its policy. All optional, so the plain [`retry`] runs the same
/// loop with nothing set and nothing allocated.
struct Callbacks<T, E> {
    classify: Option<Arc<ClassifyFn<E>>>,
    check: Option<Arc<CheckFn<T>>>,
    should_retry: Option<Arc<ShouldRetryFn<E>>>,
    on_retry: Option<Arc<OnRetryFn<E>>>,
    on_success: Option<Arc<OnSuccessFn>>,
    on_give_up: Option<Arc<OnGiveUpFn<E>>>,
    seed: Option<u64>,
    name: Option<Cow<'static, str>>,
    breaker: Option<CircuitBreaker>,
    budget: Option<RetryBudget>,
    limit: Option<ConcurrencyLimit>,
}

impl<T, E> Default for Callbacks<T, E> {
    fn default() -> Self {
        Self {
            classify: None,
            check: None,
            should_retry: None,
            on_retry: None,
            on_success: None,
            on_give_up: None,
            seed: None,
            name: None,
            breaker: None,
            budget: None,
            limit: None,
        }
    }
}

impl<T, E> Clone for Callbacks<T, E> {
    fn clone(&self) -> Self {
        Self {
            classify: self.classify.clone(),
            check: self.check.clone(),
            should_retry: self.should_retry.clone(),
            on_retry: self.on_retry.clone(),
            on_success: self.on_success.clone(),
            on_give_up: self.on_give_up.clone(),
            seed: self.seed,
            name: self.name.clone(),
            breaker: self.breaker.clone(),
            budget: self.budget.clone(),
            limit: self.limit.clone(),
        }
    }
}

/// A configured retry: a policy plus how to judge outcomes and whom to tell. Build it once,
/// store it (it is `Clone`, `Send` and `Sync`, and names only the operation's output and error
/// types), and run it for every call.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{ErrorClass, ErrorCode, ErrorKind, Retry, RetryPolicy};
///
/// #[derive(Debug)]
/// struct ToolResult { is_error: bool, text: String }
///
/// struct Client { retry: Retry<ToolResult, std::io::Error>, calls: u32 }
///
/// impl Client {
///     async fn call(&mut self) -> std::io::Result<ToolResult> {
///         self.calls += 1;
///         let busy = self.calls < 2;
///         Ok(ToolResult { is_error: busy, text: if busy { "HTTP 503".into() } else { "ok".into() } })
///     }
///
///     async fn call_with_retry(&mut self) -> ToolResult {
///         let retry = self.retry.clone();
///         // The closure borrows `self` mutably across the await: fine for an async closure.
///         retry.run(async |_attempt| self.call().await).await.unwrap()
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let retry = Retry::new(RetryPolicy::default())
///     .name("search")
///     .check(|r: &ToolResult| r.is_error.then(|| steadfast::classify_message(&r.text).unwrap_or_else(ErrorClass::unknown)));
/// let mut client = Client { retry, calls: 0 };
/// assert_eq!(client.call_with_retry().await.text, "ok");
/// assert_eq!(client.calls, 2);
/// # }
/// ```
pub struct Retry<T, E> {
    policy: RetryPolicy,
    cb: Callbacks<T, E>,
}

impl<T, E> Clone for Retry<T, E> {
    fn clone(&self) -> Self {
        Self {
            policy: self.policy.clone(),
            cb: self.cb.clone(),
        }
    }
}

impl<T, E> fmt::Debug for Retry<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("policy", &self.policy)
            .field("name", &self.cb.name)
            .field("seed", &self.cb.seed)
            .field("classify", &self.cb.classify.is_some())
            .field("check", &self.cb.check.is_some())
            .field("should_retry", &self.cb.should_retry.is_some())
            .field("breaker", &self.cb.breaker)
            .field("budget", &self.cb.budget)
            .field("limit", &self.cb.limit)
            .finish_non_exhaustive()
    }
}

impl<T, E> Retry<T, E> {
    /// A retry with this policy and the default classification.
    ///
    /// ```
    /// let r: steadfast::Retry<(), std::io::Error> = steadfast::Retry::new(steadfast::RetryPolicy::default());
    /// assert_eq!(r.policy().max_attempts(), 3);
    /// ```
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            cb: Callbacks::default(),
        }
    }

    /// The policy.
    ///
    /// ```
    /// let r: steadfast::Retry<(), String> = steadfast::Retry::new(steadfast::RetryPolicy::no_retry());
    /// assert_eq!(r.policy().max_attempts(), 1);
    /// ```
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Names the call (a tool or dependency) in tracing spans.
    ///
    /// ```
    /// let r: steadfast::Retry<(), String> = steadfast::Retry::new(Default::default()).name("search");
    /// # let _ = r;
    /// ```
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.cb.name = Some(name.into());
        self
    }

    /// A custom classifier, consulted before the error type's [`Classify`]; return `None` for
    /// "no opinion".
    ///
    /// ```
    /// use steadfast::{ErrorClass, ErrorCode, ErrorKind, Retry, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// // Elasticsearch's 503 during shard relocation is always transient; 404s never are.
    /// let retry = Retry::new(RetryPolicy::default()).classify(|e: &String| {
    ///     e.contains("shard").then(|| ErrorClass::retriable(ErrorCode::new("SHARD_RELOCATING")))
    /// });
    /// let err = retry.run(async |_| Err::<(), _>("shard moving".to_string())).await.unwrap_err();
    /// assert_eq!((err.attempts(), err.class().code.as_str()), (3, "SHARD_RELOCATING"));
    /// # }
    /// ```
    pub fn classify(
        mut self,
        f: impl Fn(&E) -> Option<ErrorClass> + Send + Sync + 'static,
    ) -> Self {
        self.cb.classify = Some(Arc::new(f));
        self
    }

    /// A check on successful results: return `Some(class)` for a value that is a failure for the
    /// caller (an MCP `CallToolResult` with `isError: true`), `None` for a real success.
    ///
    /// A rejected value is retried like an error of that class. If the engine gives up on it, the
    /// last value is returned as `Ok` — it is the caller's own result type, and an MCP client
    /// expects the last `isError` result — and the give-up hook still fires.
    ///
    /// ```
    /// use steadfast::{ErrorClass, Retry, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let retry = Retry::new(RetryPolicy::default()).check(|v: &u32| (*v == 0).then(|| ErrorClass::from_status(503)));
    /// let v = retry.run(async |attempt| Ok::<_, String>(if attempt < 3 { 0 } else { 7 })).await.unwrap();
    /// assert_eq!(v, 7);
    /// # }
    /// ```
    pub fn check(mut self, f: impl Fn(&T) -> Option<ErrorClass> + Send + Sync + 'static) -> Self {
        self.cb.check = Some(Arc::new(f));
        self
    }

    /// Shorthand for [`check`](Self::check): values for which `f` is true are retriable failures.
    ///
    /// ```
    /// use steadfast::{Retry, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let retry = Retry::new(RetryPolicy::default()).retry_if_ok(|v: &Option<u8>| v.is_none());
    /// let v = retry.run(async |n| Ok::<_, String>((n == 2).then_some(1))).await.unwrap();
    /// assert_eq!(v, Some(1));
    /// # }
    /// ```
    pub fn retry_if_ok(self, f: impl Fn(&T) -> bool + Send + Sync + 'static) -> Self {
        self.check(move |v| f(v).then(|| ErrorClass::retriable(ErrorCode::UNKNOWN)))
    }

    /// A veto on retrying an error: called with the error and the number of the attempt that
    /// would follow; `false` stops at once (reason [`GiveUpReason::Declined`]). It can only stop
    /// retries that classification allows, never force one.
    ///
    /// ```
    /// use steadfast::{ErrorClass, GiveUpReason, Retry, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let retry = Retry::new(RetryPolicy::builder().max_attempts(10).build().unwrap())
    ///     .should_retry(|_e: &ErrorClass, next_attempt| next_attempt <= 2);
    /// let err = retry.run(async |_| Err::<(), _>(ErrorClass::from_status(500))).await.unwrap_err();
    /// assert_eq!((err.attempts(), err.reason()), (2, GiveUpReason::Declined));
    /// # }
    /// ```
    pub fn should_retry(mut self, f: impl Fn(&E, u32) -> bool + Send + Sync + 'static) -> Self {
        self.cb.should_retry = Some(Arc::new(f));
        self
    }

    /// Called before each retry's delay with the delay about to be slept.
    ///
    /// See [`RetryEvent`] for an example.
    pub fn on_retry(mut self, f: impl Fn(&RetryEvent<'_, E>) + Send + Sync + 'static) -> Self {
        self.cb.on_retry = Some(Arc::new(f));
        self
    }

    /// Called when a call succeeds.
    ///
    /// ```
    /// use std::sync::{Arc, atomic::{AtomicU32, Ordering}};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let attempts = Arc::new(AtomicU32::new(0));
    /// let seen = attempts.clone();
    /// let retry = steadfast::Retry::new(Default::default())
    ///     .on_success(move |ev| seen.store(ev.attempts, Ordering::Relaxed));
    /// retry.run(async |_| Ok::<_, String>(())).await.unwrap();
    /// assert_eq!(attempts.load(Ordering::Relaxed), 1);
    /// # }
    /// ```
    pub fn on_success(mut self, f: impl Fn(&SuccessEvent) + Send + Sync + 'static) -> Self {
        self.cb.on_success = Some(Arc::new(f));
        self
    }

    /// Called once when a call gives up.
    ///
    /// See [`GiveUpEvent`] for an example.
    pub fn on_give_up(mut self, f: impl Fn(&GiveUpEvent<'_, E>) + Send + Sync + 'static) -> Self {
        self.cb.on_give_up = Some(Arc::new(f));
        self
    }

    /// Seeds the jitter: every call then draws the same delays, for reproducible tests and
    /// simulations. Unseeded, each call seeds from the thread's random state.
    ///
    /// ```
    /// let r: steadfast::Retry<(), String> = steadfast::Retry::new(Default::default()).seed(42);
    /// # let _ = r;
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.cb.seed = Some(seed);
        self
    }

    /// Guards calls with a circuit breaker (share one clone among every caller of the same
    /// dependency).
    ///
    /// The breaker wraps the whole retry loop: an open breaker fails the call at once with
    /// [`GiveUpReason::CircuitOpen`], without calling the operation or spending budget; the
    /// breaker records each call's *final* outcome — so a blip that a retry absorbed never counts
    /// toward opening it — and only failures for which
    /// [`ErrorClass::counts_as_breaker_failure`] holds count. Before each retry the engine checks
    /// the breaker again and stops if it opened meanwhile. A cancelled call records nothing.
    ///
    /// ```
    /// use steadfast::{BreakerConfig, CircuitBreaker, ErrorClass, GiveUpReason, Retry, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let breaker = CircuitBreaker::new(BreakerConfig::builder().failure_threshold(2).build().unwrap());
    /// let retry = Retry::new(RetryPolicy::no_retry()).breaker(breaker.clone());
    /// for _ in 0..2 {
    ///     let _ = retry.run(async |_| Err::<(), _>(ErrorClass::from_status(503))).await;
    /// }
    /// let mut called = false;
    /// let err = retry.run(async |_| { called = true; Ok::<_, ErrorClass>(()) }).await.unwrap_err();
    /// assert_eq!((err.reason(), err.attempts(), called), (GiveUpReason::CircuitOpen, 0, false));
    /// # }
    /// ```
    pub fn breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.cb.breaker = Some(breaker);
        self
    }

    /// Draws every retry from a budget shared by all calls to the dependency; each call deposits
    /// into it. When it is spent the call gives up with [`GiveUpReason::BudgetExhausted`],
    /// keeping its last failure.
    ///
    /// ```
    /// use steadfast::{BudgetConfig, ErrorClass, GiveUpReason, Retry, RetryBudget, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let budget = RetryBudget::new(BudgetConfig::builder().retry_ratio(0.0).min_retries_per_sec(0.1).build().unwrap());
    /// let retry = Retry::new(RetryPolicy::builder().max_attempts(5).build().unwrap()).budget(budget);
    /// let err = retry.run(async |_| Err::<(), _>(ErrorClass::from_status(503))).await.unwrap_err();
    /// // The floor (0.1/s over a 10s ttl) allows one retry.
    /// assert_eq!((err.reason(), err.attempts()), (GiveUpReason::BudgetExhausted, 2));
    /// # }
    /// ```
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        self.cb.budget = Some(budget);
        self
    }

    /// Limits how many calls may be in their retry phase at once (share one clone among every
    /// caller of the dependency). A call takes a slot at its first retry and keeps it until it
    /// ends; when none is free it gives up ([`GiveUpReason::ConcurrencyLimit`]) or waits, as
    /// configured.
    ///
    /// ```
    /// use steadfast::{ConcurrencyConfig, ConcurrencyLimit, ErrorClass, GiveUpReason, Retry, RetryPolicy, WhenFull};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let limit = ConcurrencyLimit::new(ConcurrencyConfig::new(1, WhenFull::GiveUp).unwrap());
    /// let _busy = limit.try_enter().unwrap(); // another call is retrying
    /// let retry = Retry::new(RetryPolicy::default()).concurrency_limit(limit);
    /// let err = retry.run(async |_| Err::<(), _>(ErrorClass::from_status(503))).await.unwrap_err();
    /// assert_eq!((err.reason(), err.attempts()), (GiveUpReason::ConcurrencyLimit, 1));
    /// # }
    /// ```
    pub fn concurrency_limit(mut self, limit: ConcurrencyLimit) -> Self {
        self.cb.limit = Some(limit);
        self
    }
}

impl<T, E: Classify> Retry<T, E> {
    /// Runs `op` until it succeeds or the policy gives up.
    ///
    /// ```
    /// use steadfast::{Retry, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let retry = Retry::new(RetryPolicy::default());
    /// let v = retry.run(async |attempt| if attempt == 1 { Err("HTTP 502") } else { Ok(attempt) }).await;
    /// assert_eq!(v.unwrap(), 2);
    /// # }
    /// ```
    pub async fn run<F>(&self, op: F) -> Result<T, RetryError<E>>
    where
        F: AsyncFnMut(u32) -> Result<T, E>,
    {
        execute(&self.policy, &self.cb, None, op).await
    }

    /// Like [`run`](Self::run), stopping as soon as `cancel` fires: before an attempt, during an
    /// attempt (the attempt's future is dropped) or during a delay. The error then has reason
    /// [`GiveUpReason::Cancelled`] and keeps the last failure, if there was one.
    ///
    /// ```
    /// use steadfast::{ErrorClass, GiveUpReason, Retry, RetryPolicy};
    /// use tokio_util::sync::CancellationToken;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let cancel = CancellationToken::new();
    /// let retry = Retry::new(RetryPolicy::default());
    /// let err = retry
    ///     .run_cancellable(&cancel, async |_| {
    ///         cancel.cancel(); // the client hung up while we were failing
    ///         Err::<(), _>(ErrorClass::from_status(503))
    ///     })
    ///     .await
    ///     .unwrap_err();
    /// assert_eq!((err.reason(), err.attempts()), (GiveUpReason::Cancelled, 1));
    /// # }
    /// ```
    pub async fn run_cancellable<F>(
        &self,
        cancel: &CancellationToken,
        op: F,
    ) -> Result<T, RetryError<E>>
    where
        F: AsyncFnMut(u32) -> Result<T, E>,
    {
        execute(&self.policy, &self.cb, Some(cancel), op).await
    }
}

/// The last failed outcome, before it is known whether it becomes the returned error.
enum Last<T, E> {
    Value(T),
    Failure(Failure<E>),
}

impl<T, E> Last<T, E> {
    fn view(&self) -> Failed<'_, E> {
        match self {
            Last::Value(_) => Failed::Value,
            Last::Failure(Failure::Error(e)) => Failed::Error(e),
            Last::Failure(Failure::Timeout { after }) => Failed::Timeout(*after),
            Last::Failure(Failure::Rejected(r)) => Failed::Rejected(r),
            Last::Failure(_) => Failed::Cancelled,
        }
    }
}

enum Ran<T, E> {
    Done(Result<T, E>),
    TimedOut(Duration),
    Cancelled,
}

/// One attempt, limited by `limit` and raced against `cancel`. Without either, the operation's
/// future is awaited directly: no timer, no waiter registration.
async fn attempt<T, E>(
    fut: impl Future<Output = Result<T, E>>,
    limit: Option<Duration>,
    cancel: Option<&CancellationToken>,
) -> Ran<T, E> {
    let limited = async {
        match limit {
            Some(d) => match tokio::time::timeout(d, fut).await {
                Ok(r) => Ran::Done(r),
                Err(_) => Ran::TimedOut(d),
            },
            None => Ran::Done(fut.await),
        }
    };
    match cancel {
        Some(c) => tokio::select! {
            biased;
            _ = c.cancelled() => Ran::Cancelled,
            r = limited => r,
        },
        None => limited.await,
    }
}

/// One call's fixed context.
struct Call<'a, T, E> {
    policy: &'a RetryPolicy,
    cb: &'a Callbacks<T, E>,
    start: Instant,
}

impl<'a, T, E: Classify> Call<'a, T, E> {
    fn classify(&self, e: &E) -> ErrorClass {
        self.cb
            .classify
            .as_ref()
            .and_then(|f| f(e))
            .unwrap_or_else(|| e.classify())
    }

    fn retriable(&self, class: &ErrorClass) -> bool {
        class.kind.is_transient()
            || (class.kind == ErrorKind::Unknown && self.policy.retry_unknown())
    }

    fn succeed(&self, attempts: u32, permit: Option<Permit<'a>>, attempt_start: Option<Instant>) {
        if let Some(p) = permit {
            match attempt_start {
                Some(t) => p.success_after(t.elapsed()),
                None => p.success(),
            }
        }
        if let Some(f) = &self.cb.on_success {
            f(&SuccessEvent {
                attempts,
                elapsed: self.start.elapsed(),
            });
        }
        if attempts > 1 {
            tracing::debug!(attempts, "succeeded after retry");
        }
    }

    /// Ends the call without success. The breaker, if any, records the final outcome — except
    /// for a cancelled call, whose outcome says nothing about the dependency.
    fn give_up(
        &self,
        reason: GiveUpReason,
        last: Option<(Last<T, E>, ErrorClass)>,
        attempts: u32,
        permit: Option<Permit<'a>>,
    ) -> Result<T, RetryError<E>> {
        let elapsed = self.start.elapsed();
        let (last, class) =
            last.unwrap_or((Last::Failure(Failure::Cancelled), ErrorClass::cancelled()));
        if let Some(p) = permit {
            if reason != GiveUpReason::Cancelled {
                p.record(class.counts_as_breaker_failure());
            }
        }
        tracing::debug!(
            attempts,
            reason = reason.as_str(),
            code = class.code.as_str(),
            elapsed_ms = elapsed.as_millis() as u64,
            "giving up"
        );
        if let Some(f) = &self.cb.on_give_up {
            f(&GiveUpEvent {
                attempts,
                elapsed,
                reason,
                class: &class,
                failed: last.view(),
            });
        }
        match last {
            Last::Value(v) => Ok(v),
            Last::Failure(failure) => Err(RetryError {
                reason,
                failure,
                class,
                attempts,
                elapsed,
            }),
        }
    }

    /// Takes a retry slot if the dependency has a concurrency limit. `Err` means give up.
    async fn retry_slot(
        &self,
        held: &mut Option<RetrySlot>,
        cancel: Option<&CancellationToken>,
    ) -> Result<(), GiveUpReason> {
        let Some(limit) = &self.cb.limit else {
            return Ok(());
        };
        if held.is_some() {
            return Ok(());
        }
        *held = Some(match limit.config().when_full() {
            WhenFull::GiveUp => limit.try_enter().ok_or(GiveUpReason::ConcurrencyLimit)?,
            WhenFull::Wait => match cancel {
                Some(c) => tokio::select! {
                    biased;
                    _ = c.cancelled() => return Err(GiveUpReason::Cancelled),
                    slot = limit.enter() => slot,
                },
                None => limit.enter().await,
            },
        });
        Ok(())
    }
}

async fn execute<T, E, F>(
    policy: &RetryPolicy,
    cb: &Callbacks<T, E>,
    cancel: Option<&CancellationToken>,
    op: F,
) -> Result<T, RetryError<E>>
where
    E: Classify,
    F: AsyncFnMut(u32) -> Result<T, E>,
{
    let span = tracing::debug_span!(
        "steadfast.retry",
        name = cb.name.as_deref().unwrap_or(""),
        max_attempts = policy.max_attempts()
    );
    run_loop(policy, cb, cancel, op).instrument(span).await
}

async fn run_loop<T, E, F>(
    policy: &RetryPolicy,
    cb: &Callbacks<T, E>,
    cancel: Option<&CancellationToken>,
    mut op: F,
) -> Result<T, RetryError<E>>
where
    E: Classify,
    F: AsyncFnMut(u32) -> Result<T, E>,
{
    let call = Call {
        policy,
        cb,
        start: Instant::now(),
    };
    // The breaker wraps the whole loop: an open one fails the call before any attempt.
    let permit = match cb.breaker.as_ref().map(CircuitBreaker::try_acquire) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(rejected)) => {
            let class = rejected.class();
            let last = (Last::Failure(Failure::Rejected(rejected)), class);
            return call.give_up(GiveUpReason::CircuitOpen, Some(last), 0, None);
        }
    };
    if let Some(budget) = &cb.budget {
        budget.deposit_at(call.start);
    }
    // Slow-call detection needs each attempt's duration; read the clock only if it is on.
    let timed_attempts = cb
        .breaker
        .as_ref()
        .is_some_and(|b| b.config().slow_call_threshold().is_some());
    // Created on the first retry, so a call that succeeds at once never touches it.
    let mut rng: Option<Rng> = None;
    let mut slot: Option<RetrySlot> = None;
    let mut previous = policy.base_delay();
    let mut last: Option<(Last<T, E>, ErrorClass)> = None;
    let mut n: u32 = 0;

    loop {
        if cancel.is_some_and(CancellationToken::is_cancelled) {
            return call.give_up(GiveUpReason::Cancelled, last, n, permit);
        }
        if n > 0 && permit.as_ref().is_some_and(|p| !p.is_current()) {
            // The breaker opened during the delay.
            return call.give_up(GiveUpReason::CircuitOpen, last, n, permit);
        }
        n += 1;

        let budget_left = policy
            .max_elapsed()
            .map(|max| max.saturating_sub(call.start.elapsed()));
        let (limit, budget_bound) = match (policy.attempt_timeout(), budget_left) {
            (Some(t), Some(b)) if b < t => (Some(b), true),
            (Some(t), _) => (Some(t), false),
            (None, Some(b)) => (Some(b), true),
            (None, None) => (None, false),
        };

        let attempt_start = timed_attempts.then(Instant::now);
        let (outcome, class) = match attempt(op(n), limit, cancel).await {
            Ran::Done(Ok(v)) => match cb.check.as_ref().and_then(|check| check(&v)) {
                None => {
                    call.succeed(n, permit, attempt_start);
                    return Ok(v);
                }
                Some(class) => (Last::Value(v), class),
            },
            Ran::Done(Err(e)) => {
                let class = call.classify(&e);
                (Last::Failure(Failure::Error(e)), class)
            }
            Ran::TimedOut(after) => (
                Last::Failure(Failure::Timeout { after }),
                ErrorClass::timeout().with_message("attempt timed out"),
            ),
            Ran::Cancelled => return call.give_up(GiveUpReason::Cancelled, last, n, permit),
        };

        let stop = if budget_bound && matches!(outcome, Last::Failure(Failure::Timeout { .. })) {
            Some(GiveUpReason::TimeBudget)
        } else if !call.retriable(&class) {
            Some(GiveUpReason::NonRetriable)
        } else if n >= policy.max_attempts() {
            Some(GiveUpReason::Exhausted)
        } else if let (Some(veto), Last::Failure(Failure::Error(e))) = (&cb.should_retry, &outcome)
        {
            (!veto(e, n + 1)).then_some(GiveUpReason::Declined)
        } else if permit.as_ref().is_some_and(|p| !p.is_current()) {
            // The breaker opened (or moved on) while this call was failing: stop adding load.
            Some(GiveUpReason::CircuitOpen)
        } else {
            call.retry_slot(&mut slot, cancel).await.err()
        };
        if let Some(reason) = stop {
            return call.give_up(reason, Some((outcome, class)), n, permit);
        }

        let rng = rng.get_or_insert_with(|| cb.seed.map_or_else(Rng::new, Rng::with_seed));
        let backoff = policy.backoff_delay(n, previous, rng);
        previous = backoff;
        let delay = policy.floor_retry_after(backoff, class.retry_after);

        let elapsed = call.start.elapsed();
        if policy
            .max_elapsed()
            .is_some_and(|max| elapsed.saturating_add(delay) >= max)
        {
            return call.give_up(GiveUpReason::TimeBudget, Some((outcome, class)), n, permit);
        }
        // Withdraw last, so a retry that is not going to happen spends nothing.
        if cb.budget.as_ref().is_some_and(|b| !b.try_withdraw()) {
            return call.give_up(
                GiveUpReason::BudgetExhausted,
                Some((outcome, class)),
                n,
                permit,
            );
        }

        tracing::debug!(
            attempt = n,
            delay_ms = delay.as_millis() as u64,
            code = class.code.as_str(),
            kind = class.kind.as_str(),
            "retrying"
        );
        if let Some(f) = &cb.on_retry {
            f(&RetryEvent {
                attempt: n,
                delay,
                class: &class,
                failed: outcome.view(),
                elapsed,
            });
        }
        last = Some((outcome, class));

        if !delay.is_zero() {
            let sleep = tokio::time::sleep(delay);
            match cancel {
                Some(c) => tokio::select! {
                    biased;
                    _ = c.cancelled() => return call.give_up(GiveUpReason::Cancelled, last, n, permit),
                    _ = sleep => {}
                },
                None => sleep.await,
            }
        }
    }
}
