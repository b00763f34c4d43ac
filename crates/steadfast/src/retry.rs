//! The retry engine: one attempt loop that every other layer drives.
//!
//! [`retry`] runs an operation under a [`RetryPolicy`] with the default classification;
//! [`Retry`] is the configured, storable form — a policy plus a custom classifier, a result
//! check, a `should_retry` veto and hooks — built once and run many times.
//!
//! The operation receives the attempt number (1-based) and returns a future:
//! - [`retry`] and [`Retry::run`] take `FnMut(u32) -> Fut` — `|n| async move { … }`, or an
//!   `async` closure that does not borrow its own captures. Their futures are `Send` whenever the
//!   operation's are, so they work inside `tokio::spawn`;
//! - [`Retry::run_mut`] takes an async closure (`AsyncFnMut`), whose future may borrow state
//!   mutably across awaits (`async |n| self.client.call(n).await` with `&mut self`), one attempt
//!   at a time. (Rust cannot yet prove such futures `Send` inside a generic function, so prefer
//!   `run` for work you spawn.)
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
//! notifier, which do. It reads no clock either, unless a time budget, a hook, a retry budget or
//! a breaker's slow-call detection needs the call's start — see
//! [`RetryError::elapsed`](crate::RetryError::elapsed) for what that means for `elapsed`.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::driver;
use crate::hooks::{GiveUpEvent, RetryEvent, SuccessEvent};
use crate::retry_error::RetryError;
use crate::{
    CircuitBreaker, Classify, ConcurrencyLimit, ErrorClass, ErrorCode, LlmErrorCode, RetryBudget,
    RetryPolicy, ToolMetrics,
};

/// Runs `op` under `policy`, classifying errors with their [`Classify`] implementation.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use steadfast::{retry, ErrorClass, RetryPolicy};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let calls = AtomicU32::new(0);
/// let value = retry(&RetryPolicy::default(), |attempt| {
///     calls.fetch_add(1, Ordering::Relaxed);
///     async move { if attempt < 3 { Err(ErrorClass::from_status(503)) } else { Ok("done") } }
/// })
/// .await
/// .unwrap();
/// assert_eq!((value, calls.load(Ordering::Relaxed)), ("done", 3));
/// # }
/// ```
pub async fn retry<T, E, F, Fut>(policy: &RetryPolicy, op: F) -> Result<T, RetryError<E>>
where
    E: Classify,
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    driver::run_fn(driver::Driver::new(policy, &Callbacks::NONE, None), op).await
}

type ClassifyFn<E> = dyn Fn(&E) -> Option<ErrorClass> + Send + Sync;
type CheckFn<T> = dyn Fn(&T) -> Option<ErrorClass> + Send + Sync;
type ShouldRetryFn<E> = dyn Fn(&E, u32) -> bool + Send + Sync;
type OnRetryFn<E> = dyn Fn(&RetryEvent<'_, E>) + Send + Sync;
type OnSuccessFn = dyn Fn(&SuccessEvent) + Send + Sync;
type OnGiveUpFn<E> = dyn Fn(&GiveUpEvent<'_, E>) + Send + Sync;
type ReportsAsFn<E> = dyn Fn(&GiveUpEvent<'_, E>) -> Option<LlmErrorCode> + Send + Sync;

/// Everything a [`Retry`] adds to its policy. All optional, so the plain [`retry`] runs the same
/// loop with nothing set and nothing allocated.
pub(crate) struct Callbacks<T, E> {
    pub(crate) classify: Option<Arc<ClassifyFn<E>>>,
    pub(crate) check: Option<Arc<CheckFn<T>>>,
    pub(crate) should_retry: Option<Arc<ShouldRetryFn<E>>>,
    pub(crate) on_retry: Option<Arc<OnRetryFn<E>>>,
    pub(crate) on_success: Option<Arc<OnSuccessFn>>,
    pub(crate) on_give_up: Option<Arc<OnGiveUpFn<E>>>,
    /// The code the caller reports a give-up as, when not the engine's own
    /// ([`Retry::reports_as`]).
    pub(crate) reports_as: Option<Arc<ReportsAsFn<E>>>,
    pub(crate) seed: Option<u64>,
    pub(crate) name: Option<Cow<'static, str>>,
    pub(crate) breaker: Option<CircuitBreaker>,
    pub(crate) budget: Option<RetryBudget>,
    pub(crate) limit: Option<ConcurrencyLimit>,
    pub(crate) metrics: Option<ToolMetrics>,
    /// Whether a named call opens its own `execute_tool` span (off when the caller makes one).
    pub(crate) own_span: bool,
}

impl<T, E> Callbacks<T, E> {
    /// Nothing set: what the plain [`retry`] runs with.
    pub(crate) const NONE: Self = Self {
        classify: None,
        check: None,
        should_retry: None,
        on_retry: None,
        on_success: None,
        on_give_up: None,
        reports_as: None,
        seed: None,
        name: None,
        breaker: None,
        budget: None,
        limit: None,
        metrics: None,
        own_span: true,
    };
}

impl<T, E> Default for Callbacks<T, E> {
    fn default() -> Self {
        Self::NONE
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
            reports_as: self.reports_as.clone(),
            seed: self.seed,
            name: self.name.clone(),
            breaker: self.breaker.clone(),
            budget: self.budget.clone(),
            limit: self.limit.clone(),
            metrics: self.metrics.clone(),
            own_span: self.own_span,
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
///         retry.run_mut(async |_attempt| self.call().await).await.unwrap()
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

    /// Names the call (a tool or dependency). A named call runs in an `execute_tool {name}`
    /// span (see [`trace`](crate::trace)) unless built with
    /// [`in_caller_span`](Self::in_caller_span).
    ///
    /// ```
    /// let r: steadfast::Retry<(), String> = steadfast::Retry::new(Default::default()).name("search");
    /// # let _ = r;
    /// ```
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.cb.name = Some(name.into());
        self
    }

    /// Opens no span of its own: the engine's events go to the caller's current span. For
    /// callers that make the `execute_tool` span themselves (with
    /// [`trace::execute_tool_span`](crate::trace::execute_tool_span)), to record what happens
    /// around the retry loop on the same span.
    ///
    /// ```
    /// use tracing::Instrument;
    /// use steadfast::{Retry, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let retry = Retry::<u32, String>::new(RetryPolicy::default()).name("search").in_caller_span();
    /// let span = steadfast::trace::execute_tool_span("search", Some("call_1"));
    /// let v = retry.run(|n| async move { Ok(n) }).instrument(span).await;
    /// assert_eq!(v.unwrap(), 1);
    /// # }
    /// ```
    pub fn in_caller_span(mut self) -> Self {
        self.cb.own_span = false;
        self
    }

    /// The call's own span: disabled unless named, not left to the caller, and listened to.
    fn span(&self) -> tracing::Span {
        match &self.cb.name {
            Some(name) if self.cb.own_span && crate::trace::listening() => {
                crate::trace::execute_tool_span(name, None)
            }
            _ => tracing::Span::none(),
        }
    }

    /// `fut` in the call's span if it has one. The span and its box are paid for only then: a
    /// span stored in every call's future made the success path's future a third bigger.
    #[inline(always)]
    fn traced<F: Future>(&self, fut: F) -> Traced<F> {
        if self.cb.name.is_none() || !self.cb.own_span || !crate::trace::listening() {
            return Traced::Bare { fut };
        }
        self.spanned(fut)
    }

    #[cold]
    #[inline(never)]
    fn spanned<F: Future>(&self, fut: F) -> Traced<F> {
        let span = self.span();
        if span.is_disabled() {
            return Traced::Bare { fut };
        }
        Traced::Spanned {
            fut: Box::pin(fut.instrument(span)),
        }
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
    /// would follow; `false` stops at once (reason [`GiveUpReason::Declined`](crate::GiveUpReason::Declined)). It can only stop
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

    /// Names the code the caller will report a give-up as, when it is not the engine's own
    /// (the one [`RetryError::to_llm_error`] gives); `None` keeps the engine's. Metrics, the `steadfast.outcome`
    /// event and the span's `error.type` then count what the model is told — e.g. a caller that
    /// holds back a replay of a call that may have run reports `OUTCOME_UNKNOWN`, not the
    /// `SERVICE_UNAVAILABLE` of the failure it stopped on.
    ///
    /// ```
    /// use steadfast::{ErrorClass, LlmErrorCode, Retry, RetryPolicy, ToolMetrics};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let m = ToolMetrics::new("charge");
    /// let once = RetryPolicy::builder().max_attempts(1).build().unwrap();
    /// let r: Result<(), _> = Retry::new(once)
    ///     .metrics(m.clone())
    ///     .reports_as(|_| Some(LlmErrorCode::OutcomeUnknown))
    ///     .run(|_| async { Err(ErrorClass::from_status(503)) })
    ///     .await;
    /// assert!(r.is_err());
    /// assert_eq!(m.snapshot().failures.get(&LlmErrorCode::OutcomeUnknown), Some(&1));
    /// # }
    /// ```
    pub fn reports_as(
        mut self,
        f: impl Fn(&GiveUpEvent<'_, E>) -> Option<LlmErrorCode> + Send + Sync + 'static,
    ) -> Self {
        self.cb.reports_as = Some(Arc::new(f));
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
    /// [`GiveUpReason::CircuitOpen`](crate::GiveUpReason::CircuitOpen), without calling the operation or spending budget; the
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
    /// let err = retry.run_mut(async |_| { called = true; Ok::<_, ErrorClass>(()) }).await.unwrap_err();
    /// assert_eq!((err.reason(), err.attempts(), called), (GiveUpReason::CircuitOpen, 0, false));
    /// # }
    /// ```
    pub fn breaker(mut self, breaker: CircuitBreaker) -> Self {
        if let Some(m) = &self.cb.metrics {
            m.attach_breaker(&breaker);
        }
        self.cb.breaker = Some(breaker);
        self
    }

    /// Draws every retry from a budget shared by all calls to the dependency; each call deposits
    /// into it. When it is spent the call gives up with [`GiveUpReason::BudgetExhausted`](crate::GiveUpReason::BudgetExhausted),
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
    /// ends; when none is free it gives up ([`GiveUpReason::ConcurrencyLimit`](crate::GiveUpReason::ConcurrencyLimit)) or waits, as
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

    pub(crate) fn has_breaker(&self) -> bool {
        self.cb.breaker.is_some()
    }

    /// Counts every call, attempt, retry and outcome into `metrics`. Independent of the hooks,
    /// so `on_retry` and friends stay free for your own use.
    ///
    /// See [`ToolMetrics`] for an example.
    pub fn metrics(mut self, metrics: ToolMetrics) -> Self {
        if let Some(b) = &self.cb.breaker {
            metrics.attach_breaker(b);
        }
        self.cb.metrics = Some(metrics);
        self
    }
}

impl<T, E: Classify> Retry<T, E> {
    /// Runs `op` until it succeeds or the policy gives up. `op` takes the attempt number and
    /// returns a future; the returned future is `Send` whenever `op`'s futures are, so it can be
    /// spawned.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use steadfast::{Retry, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let retry = Arc::new(Retry::new(RetryPolicy::default()));
    /// let task = tokio::spawn({
    ///     let retry = retry.clone();
    ///     async move {
    ///         retry.run(|attempt| async move { if attempt == 1 { Err("HTTP 502") } else { Ok(attempt) } }).await
    ///     }
    /// });
    /// assert_eq!(task.await.unwrap().unwrap(), 2);
    /// # }
    /// ```
    pub fn run<F, Fut>(&self, op: F) -> impl Future<Output = Result<T, RetryError<E>>>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        // Not an `async fn`: handing back the loop's own future saves a move of it.
        self.traced(driver::run_fn(
            driver::Driver::new(&self.policy, &self.cb, None),
            op,
        ))
    }

    /// Like [`run`](Self::run), for an async closure whose future borrows state mutably across
    /// awaits — typically `async |n| self.client.call(n).await` on `&mut self`.
    ///
    /// Rust cannot yet prove such futures `Send` inside a generic function, so a `run_mut` call
    /// inside `tokio::spawn` may fail to compile with "`Send` is not general enough"; use
    /// [`run`](Self::run) there.
    ///
    /// ```
    /// use steadfast::{ErrorClass, Retry, RetryPolicy};
    ///
    /// struct Client { sent: u32 }
    /// impl Client {
    ///     async fn send(&mut self) -> Result<u32, ErrorClass> {
    ///         self.sent += 1;
    ///         if self.sent < 2 { Err(ErrorClass::from_status(503)) } else { Ok(self.sent) }
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let mut client = Client { sent: 0 };
    /// let retry = Retry::new(RetryPolicy::default());
    /// assert_eq!(retry.run_mut(async |_| client.send().await).await.unwrap(), 2);
    /// # }
    /// ```
    pub async fn run_mut<F>(&self, op: F) -> Result<T, RetryError<E>>
    where
        F: AsyncFnMut(u32) -> Result<T, E>,
    {
        self.traced(driver::run_async_fn(&self.policy, &self.cb, None, op))
            .await
    }

    /// Runs with cancellation: the call stops as soon as `token` fires — before an attempt,
    /// during an attempt (the attempt's future is dropped), while waiting for a retry slot or
    /// during a delay. The error then has reason [`GiveUpReason::Cancelled`] and keeps the last
    /// failure, if there was one; a breaker records nothing for a cancelled call.
    ///
    /// [`GiveUpReason::Cancelled`]: crate::GiveUpReason::Cancelled
    ///
    /// ```
    /// use steadfast::{CancellationToken, ErrorClass, GiveUpReason, Retry, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let cancel = CancellationToken::new();
    /// let retry = Retry::new(RetryPolicy::default());
    /// let err = retry
    ///     .cancel_on(&cancel)
    ///     .run(|_| {
    ///         cancel.cancel(); // the client hung up while we were failing
    ///         async { Err::<(), _>(ErrorClass::from_status(503)) }
    ///     })
    ///     .await
    ///     .unwrap_err();
    /// assert_eq!((err.reason(), err.attempts()), (GiveUpReason::Cancelled, 1));
    /// # }
    /// ```
    pub fn cancel_on<'a>(&'a self, token: &'a CancellationToken) -> Cancellable<'a, T, E> {
        Cancellable { retry: self, token }
    }
}

pin_project_lite::pin_project! {
    /// A call's future, in its `execute_tool` span when it has one.
    #[project = TracedProj]
    pub(crate) enum Traced<F> {
        Bare { #[pin] fut: F },
        Spanned { fut: std::pin::Pin<Box<tracing::instrument::Instrumented<F>>> },
    }
}

impl<F: Future> Future for Traced<F> {
    type Output = F::Output;

    #[inline(always)]
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        match self.project() {
            TracedProj::Bare { fut } => fut.poll(cx),
            TracedProj::Spanned { fut } => fut.as_mut().poll(cx),
        }
    }
}

/// A [`Retry`] bound to a cancellation token; see [`Retry::cancel_on`].
pub struct Cancellable<'a, T, E> {
    retry: &'a Retry<T, E>,
    token: &'a CancellationToken,
}

impl<T, E> fmt::Debug for Cancellable<'_, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancellable")
            .field("retry", self.retry)
            .field("cancelled", &self.token.is_cancelled())
            .finish()
    }
}

impl<T, E: Classify> Cancellable<'_, T, E> {
    /// [`Retry::run`] with cancellation.
    ///
    /// See [`Retry::cancel_on`] for an example.
    pub fn run<F, Fut>(&self, op: F) -> impl Future<Output = Result<T, RetryError<E>>>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let r = self.retry;
        r.traced(driver::run_fn(
            driver::Driver::new(&r.policy, &r.cb, Some(self.token)),
            op,
        ))
    }

    /// [`Retry::run_mut`] with cancellation.
    ///
    /// ```
    /// use steadfast::{CancellationToken, Retry, RetryPolicy};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let token = CancellationToken::new();
    /// let mut seen = Vec::new();
    /// let retry = Retry::new(RetryPolicy::default());
    /// let v = retry.cancel_on(&token).run_mut(async |n| { seen.push(n); Ok::<_, String>(n) }).await;
    /// assert_eq!((v.unwrap(), seen), (1, vec![1]));
    /// # }
    /// ```
    pub async fn run_mut<F>(&self, op: F) -> Result<T, RetryError<E>>
    where
        F: AsyncFnMut(u32) -> Result<T, E>,
    {
        let r = self.retry;
        r.traced(driver::run_async_fn(&r.policy, &r.cb, Some(self.token), op))
            .await
    }
}
