//! The decisions of the retry loop, apart from the operation.
//!
//! Every entry point ([`retry`](crate::retry), [`Retry::run`](crate::Retry::run),
//! [`Retry::run_mut`](crate::Retry::run_mut), and the cancellable forms) is a three-line loop
//! over a [`Driver`]: `begin` an attempt, then `step` (run it, `settle` the outcome, `pause`).
//! The driver owns everything else — guards, classification, budgets, delays, hooks — so no
//! entry point re-implements any of it. `step` takes the operation's future as a plain type
//! parameter, which keeps the loops' futures `Send` whenever the operation's are (async-closure
//! futures are named through a projection that trips a compiler limitation on `Send`).

use std::ops::ControlFlow;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::hooks::{Failed, GiveUpEvent, RetryEvent, SuccessEvent};
use crate::retry::Callbacks;
use crate::retry_error::{Failure, GiveUpReason, RetryError};
use crate::trace;
use crate::{
    Classify, ErrorClass, ErrorKind, LlmErrorCode, Permit, RetryPolicy, RetrySlot, Rng, WhenFull,
};

/// What a finished call returns.
pub(crate) type Done<T, E> = Result<T, RetryError<E>>;

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

/// How one attempt ended.
pub(crate) enum Ran<T, E> {
    Done(Result<T, E>),
    /// A value the result check rejected, with the class it gave.
    Checked(T, ErrorClass),
    TimedOut(Duration),
    Cancelled,
}

/// One attempt, limited by `limit` and raced against `cancel`. Without either, the operation's
/// future is awaited directly: no timer, no waiter registration.
pub(crate) async fn attempt<T, E>(
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

/// One call in progress.
///
/// Kept small: the loops' futures hold it, and the success path's cost was dominated by moving
/// a large future into place. Everything only a failing call needs lives behind one box
/// ([`Retrying`]), allocated at the first failure.
pub(crate) struct Driver<'a, T, E> {
    policy: &'a RetryPolicy,
    cb: &'a Callbacks<T, E>,
    cancel: Option<&'a CancellationToken>,
    permit: Option<Permit<'a>>,
    /// When the call started, read lazily: a clock read costs more than the rest of a
    /// successful call, so it is taken at the start only if something needs it then (a time
    /// budget, a hook, a retry budget, slow-call detection), and otherwise when the first
    /// attempt fails. See [`RetryError::elapsed`].
    start: Option<Instant>,
    n: u32,
    /// Whether the current attempt's limit is the end of the time budget.
    budget_bound: bool,
    retrying: Option<Box<Retrying<T, E>>>,
}

/// The state of a call that has failed at least once.
struct Retrying<T, E> {
    /// The last failed outcome and its class.
    last: Last<T, E>,
    class: ErrorClass,
    rng: Option<Rng>,
    slot: Option<RetrySlot>,
    previous: Duration,
    /// When the current attempt started (attempts after the first; only with slow-call
    /// detection on — the first attempt's start is the call's).
    attempt_start: Option<Instant>,
    /// Failures seen per entry of the policy's retry caps (empty without caps).
    capped: Vec<u32>,
}

impl<T, E> Retrying<T, E> {
    /// Counts the last failure against the policy's retry cap for its status or code, if there
    /// is one, and says whether the cap is now exceeded: a cap of `k` allows `k` retries after
    /// such failures, and the failure after those ends the call.
    fn cap_exceeded(&mut self, policy: &RetryPolicy) -> bool {
        let Some((index, cap)) = policy.retry_cap_for(&self.class) else {
            return false;
        };
        if self.capped.len() <= index {
            self.capped
                .resize(policy.retry_caps().len().max(index + 1), 0);
        }
        self.capped[index] = self.capped[index].saturating_add(1);
        self.capped[index] > cap
    }
}

impl<'a, T, E: Classify> Driver<'a, T, E> {
    /// A call about to start. Infallible and plain, so it is built in place in the loop's
    /// future; [`open`](Self::open) then does the work that can end the call.
    #[inline]
    pub(crate) fn new(
        policy: &'a RetryPolicy,
        cb: &'a Callbacks<T, E>,
        cancel: Option<&'a CancellationToken>,
    ) -> Self {
        Driver {
            policy,
            cb,
            cancel,
            permit: None,
            start: None,
            n: 0,
            budget_bound: false,
            retrying: None,
        }
    }

    /// Starts the call. The breaker wraps the whole loop: an open one ends the call here,
    /// before any attempt and without touching the budget.
    #[inline(always)]
    pub(crate) fn open(&mut self) -> Result<(), Done<T, E>> {
        let (policy, cb) = (self.policy, self.cb);
        if let Some(breaker) = &cb.breaker {
            match breaker.try_acquire() {
                Ok(p) => {
                    if trace::listening() && p.is_probe() {
                        tracing::info!("steadfast.breaker.half_open_probe");
                    }
                    self.permit = Some(p);
                }
                Err(rejected) => {
                    let class = rejected.class();
                    tracing::info!(
                        steadfast.reason = class.code.as_str(),
                        "steadfast.breaker.refused"
                    );
                    self.fail(Last::Failure(Failure::Rejected(Box::new(rejected))), class);
                    return Err(self.give_up(GiveUpReason::CircuitOpen));
                }
            }
        }
        let needs_start = policy.max_elapsed().is_some()
            || cb.budget.is_some()
            || cb.on_success.is_some()
            || cb.on_retry.is_some()
            || cb.on_give_up.is_some();
        if needs_start {
            let now = Instant::now();
            self.start = Some(now);
            if let Some(budget) = &cb.budget {
                budget.deposit_at(now);
            }
        }
        Ok(())
    }

    /// Whether a call needs nothing before its first attempt and nothing after its success:
    /// no guard, hook, result check, metrics, time limit or cancellation. Such a call runs its
    /// first attempt bare, and meets the driver only if it fails.
    #[inline(always)]
    fn plain(&self) -> bool {
        let (p, cb) = (self.policy, self.cb);
        self.cancel.is_none()
            && p.max_elapsed().is_none()
            && p.attempt_timeout().is_none()
            && cb.check.is_none()
            && cb.breaker.is_none()
            && cb.budget.is_none()
            && cb.metrics.is_none()
            && cb.on_success.is_none()
            && cb.on_retry.is_none()
            && cb.on_give_up.is_none()
    }

    fn timed_attempts(&self) -> bool {
        self.cb
            .breaker
            .as_ref()
            .is_some_and(|b| b.config().slow_call_threshold().is_some())
    }

    /// Time since the call started (zero if the clock was never read).
    fn elapsed(&self) -> Duration {
        self.start.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Readies the next attempt: returns its number, or ends the call.
    #[inline(always)]
    pub(crate) fn begin(&mut self) -> Result<u32, Done<T, E>> {
        if self.cancel.is_some_and(CancellationToken::is_cancelled) {
            return Err(self.give_up(GiveUpReason::Cancelled));
        }
        if self.n > 0 && !self.breaker_current() {
            // The breaker opened during the delay.
            return Err(self.give_up(GiveUpReason::CircuitOpen));
        }
        self.n += 1;
        if self.timed_attempts() {
            let now = Instant::now();
            match (self.n, self.retrying.as_mut()) {
                (1, _) | (_, None) => self.start = Some(now),
                (_, Some(r)) => r.attempt_start = Some(now),
            }
        }
        Ok(self.n)
    }

    /// The current attempt's time limit: the per-attempt timeout or what is left of the time
    /// budget, whichever is shorter. Computed inside `step` rather than handed to it, so the
    /// call's future does not carry it.
    #[inline(always)]
    fn limit(&mut self) -> Option<Duration> {
        let budget_left = self.policy.max_elapsed().map(|max| {
            // The first attempt starts as the call does: no second clock read.
            if self.n == 1 {
                max
            } else {
                max.saturating_sub(self.elapsed())
            }
        });
        let (limit, budget_bound) = match (self.policy.attempt_timeout(), budget_left) {
            (Some(t), Some(b)) if b < t => (Some(b), true),
            (Some(t), _) => (Some(t), false),
            (None, Some(b)) => (Some(b), true),
            (None, None) => (None, false),
        };
        self.budget_bound = budget_bound;
        limit
    }

    fn breaker_current(&self) -> bool {
        self.permit.as_ref().is_none_or(Permit::is_current)
    }

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

    /// Keeps a failed outcome as the call's last, creating the failure state on the first.
    fn fail(&mut self, last: Last<T, E>, class: ErrorClass) -> &mut Retrying<T, E> {
        match &mut self.retrying {
            Some(r) => {
                r.last = last;
                r.class = class;
                r
            }
            none => none.insert(Box::new(Retrying {
                last,
                class,
                rng: None,
                slot: None,
                previous: self.policy.base_delay(),
                attempt_start: None,
                capped: Vec::new(),
            })),
        }
    }

    /// Judges an attempt's outcome: the call ends (`Break`), or it should be retried
    /// (`Continue`), after [`pause`](Self::pause).
    ///
    /// Synchronous on purpose: everything that waits lives in `pause`, which the loops box, so
    /// a call's future stays small and the success path moves few bytes (it was dominated by
    /// `memmove` of a large future before).
    #[inline]
    pub(crate) fn settle(&mut self, ran: Ran<T, E>) -> ControlFlow<Done<T, E>> {
        let (outcome, class) = match ran {
            Ran::Done(Ok(v)) => match self.cb.check.as_ref().and_then(|check| check(&v)) {
                None => return ControlFlow::Break(Ok(self.succeed(v))),
                Some(class) => (Last::Value(v), class),
            },
            Ran::Done(Err(e)) => {
                let class = self.classify(&e);
                (Last::Failure(Failure::Error(e)), class)
            }
            Ran::Checked(v, class) => (Last::Value(v), class),
            Ran::TimedOut(after) => (
                Last::Failure(Failure::Timeout { after }),
                ErrorClass::timeout().with_message("attempt timed out"),
            ),
            Ran::Cancelled => return ControlFlow::Break(self.give_up(GiveUpReason::Cancelled)),
        };
        self.settle_failure(outcome, class)
    }

    /// The failure half of [`settle`](Self::settle), kept out of line so the success path stays
    /// short.
    #[inline(never)]
    fn settle_failure(
        &mut self,
        outcome: Last<T, E>,
        class: ErrorClass,
    ) -> ControlFlow<Done<T, E>> {
        // From here on the call needs a clock; without one read at the start, `elapsed` counts
        // from the end of the first attempt.
        self.start.get_or_insert_with(Instant::now);
        let (n, policy, cb, budget_bound) = (self.n, self.policy, self.cb, self.budget_bound);
        let retriable = self.retriable(&class);
        let current = self.breaker_current();
        let r = self.fail(outcome, class);
        let stop = if budget_bound && matches!(r.last, Last::Failure(Failure::Timeout { .. })) {
            Some(GiveUpReason::TimeBudget)
        } else if !retriable {
            Some(GiveUpReason::NonRetriable)
        } else if n >= policy.max_attempts() || r.cap_exceeded(policy) {
            Some(GiveUpReason::Exhausted)
        } else if matches!(
            (&cb.should_retry, &r.last),
            (Some(veto), Last::Failure(Failure::Error(e))) if !veto(e, n + 1)
        ) {
            Some(GiveUpReason::Declined)
        } else if !current {
            // The breaker opened while this call was failing: stop adding load.
            Some(GiveUpReason::CircuitOpen)
        } else {
            None
        };
        if let Some(reason) = stop {
            return ControlFlow::Break(self.give_up(reason));
        }
        ControlFlow::Continue(())
    }

    /// Runs one attempt, judges it, and waits before the next one if there is to be one.
    #[inline]
    pub(crate) async fn step(
        &mut self,
        fut: impl Future<Output = Result<T, E>>,
    ) -> ControlFlow<Done<T, E>> {
        // A block, so that the attempt's outcome takes no room in the future while it waits
        // in `pause`.
        {
            let ran = match (self.limit(), self.cancel) {
                // The common case, handled without wrapping the outcome: a success returns at
                // once (moving a large `Result` around was a visible part of the success path).
                (None, None) => match fut.await {
                    Ok(v) => match self.cb.check.as_ref().and_then(|check| check(&v)) {
                        None => return ControlFlow::Break(Ok(self.succeed(v))),
                        Some(class) => Ran::Checked(v, class),
                    },
                    Err(e) => Ran::Done(Err(e)),
                },
                // Timers and cancellation make a bigger future; only calls that use them pay.
                (limit, cancel) => Box::pin(attempt(fut, limit, cancel)).await,
            };
            self.settle(ran)?;
        }
        Box::pin(self.pause()).await
    }

    /// Between a failed attempt and the next: takes a retry slot, plans the delay within the
    /// time and retry budgets, reports the retry, and sleeps. `Break` ends the call.
    pub(crate) async fn pause(&mut self) -> ControlFlow<Done<T, E>> {
        let (n, policy, cb) = (self.n, self.policy, self.cb);
        if let Err(reason) = self.take_retry_slot().await {
            return ControlFlow::Break(self.give_up(reason));
        }
        let Some(r) = self.retrying.as_mut() else {
            // Only a failure leads here, and every failure fills the state.
            return ControlFlow::Continue(());
        };
        let rng = r
            .rng
            .get_or_insert_with(|| cb.seed.map_or_else(Rng::new, Rng::with_seed));
        let backoff = policy.backoff_delay(n, r.previous, rng);
        r.previous = backoff;
        let delay = policy.floor_retry_after(backoff, r.class.retry_after);

        let now = Instant::now();
        let start = *self.start.get_or_insert(now);
        let elapsed = now.saturating_duration_since(start);
        if policy
            .max_elapsed()
            .is_some_and(|max| elapsed.saturating_add(delay) >= max)
        {
            return ControlFlow::Break(self.give_up(GiveUpReason::TimeBudget));
        }
        // Withdraw last, so a retry that is not going to happen spends nothing.
        if cb.budget.as_ref().is_some_and(|b| !b.try_withdraw_at(now)) {
            tracing::info!(steadfast.attempt = i64::from(n), "steadfast.budget.refused");
            return ControlFlow::Break(self.give_up(GiveUpReason::BudgetExhausted));
        }

        if let Some(m) = &cb.metrics {
            m.record_retry();
        }
        if let Some(r) = &self.retrying {
            tracing::info!(
                steadfast.name = cb.name.as_deref().unwrap_or(""),
                // Signed integers: `tracing-opentelemetry` exports unsigned ones as text.
                steadfast.attempt = i64::from(n),
                steadfast.max_attempts = i64::from(policy.max_attempts()),
                steadfast.delay_ms = millis(delay),
                steadfast.reason = r.class.code.as_str(),
                steadfast.kind = r.class.kind.as_str(),
                steadfast.retry_after_honoured =
                    r.class.retry_after.is_some_and(|after| delay >= after),
                "steadfast.retry"
            );
            if let Some(f) = &cb.on_retry {
                f(&RetryEvent {
                    attempt: n,
                    delay,
                    class: &r.class,
                    failed: r.last.view(),
                    elapsed,
                });
            }
        }

        if !delay.is_zero() {
            let sleep = tokio::time::sleep(delay);
            match self.cancel {
                Some(c) => tokio::select! {
                    biased;
                    _ = c.cancelled() => return ControlFlow::Break(self.give_up(GiveUpReason::Cancelled)),
                    _ = sleep => {}
                },
                None => sleep.await,
            }
        }
        ControlFlow::Continue(())
    }

    /// Takes a retry slot if the dependency has a concurrency limit and this call has none yet.
    async fn take_retry_slot(&mut self) -> Result<(), GiveUpReason> {
        let Some(limit) = &self.cb.limit else {
            return Ok(());
        };
        if self.retrying.as_ref().is_some_and(|r| r.slot.is_some()) {
            return Ok(());
        }
        let slot = match limit.config().when_full() {
            WhenFull::GiveUp => limit.try_enter().ok_or(GiveUpReason::ConcurrencyLimit)?,
            WhenFull::Wait => match self.cancel {
                Some(c) => tokio::select! {
                    biased;
                    _ = c.cancelled() => return Err(GiveUpReason::Cancelled),
                    slot = limit.enter() => slot,
                },
                None => limit.enter().await,
            },
        };
        if let Some(r) = self.retrying.as_mut() {
            r.slot = Some(slot);
        }
        Ok(())
    }

    #[inline(always)]
    fn succeed(&mut self, v: T) -> T {
        if let Some(p) = self.permit.take() {
            let attempt_start = match (self.n, &self.retrying) {
                (1, _) | (_, None) => self.start,
                (_, Some(r)) => r.attempt_start,
            };
            match attempt_start.filter(|_| self.timed_attempts()) {
                Some(t) => p.success_after(t.elapsed()),
                None => p.success(),
            }
        }
        if let Some(m) = &self.cb.metrics {
            m.record_success(self.n);
        }
        if let Some(f) = &self.cb.on_success {
            f(&SuccessEvent {
                attempts: self.n,
                elapsed: self.elapsed(),
            });
        }
        if trace::listening() {
            self.trace_success();
        }
        v
    }

    /// The success event and span fields, out of line: only a listener pays for them.
    #[cold]
    #[inline(never)]
    fn trace_success(&self) {
        tracing::debug!(
            steadfast.name = self.cb.name.as_deref().unwrap_or(""),
            steadfast.outcome = "success",
            steadfast.attempts = i64::from(self.n),
            "steadfast.outcome"
        );
        trace::record_end(self.n, None);
    }

    /// Reports the breaker opening, if this call's failure is what opened it.
    #[cold]
    fn trace_opened(&self) {
        let open = self
            .cb
            .breaker
            .as_ref()
            .is_some_and(|b| b.state() == crate::BreakerState::Open);
        if open {
            tracing::info!("steadfast.breaker.opened");
        }
    }

    /// Ends the call without success. The breaker, if any, records the final outcome — except
    /// for a cancelled call, whose outcome says nothing about the dependency.
    #[cold]
    fn give_up(&mut self, reason: GiveUpReason) -> Done<T, E> {
        let elapsed = self.elapsed();
        let attempts = self.n;
        let (last, class) = self.retrying.take().map_or(
            (Last::Failure(Failure::Cancelled), ErrorClass::cancelled()),
            |r| (r.last, r.class),
        );
        if let Some(p) = self.permit.take()
            && reason != GiveUpReason::Cancelled
        {
            let was_current = p.is_current();
            let failed = class.counts_as_breaker_failure();
            p.record(failed);
            if failed && was_current && trace::listening() {
                self.trace_opened();
            }
        }
        let reported = self.cb.reports_as.as_ref().and_then(|f| {
            f(&GiveUpEvent {
                attempts,
                elapsed,
                reason,
                class: &class,
                failed: last.view(),
            })
        });
        let code = reported.unwrap_or_else(|| LlmErrorCode::for_outcome(&class, Some(reason)));
        let error_type = code.as_str();
        tracing::info!(
            steadfast.name = self.cb.name.as_deref().unwrap_or(""),
            steadfast.outcome = "gave_up",
            steadfast.attempts = i64::from(attempts),
            steadfast.give_up_reason = reason.as_str(),
            steadfast.reason = class.code.as_str(),
            error.type = error_type,
            steadfast.elapsed_ms = millis(elapsed),
            "steadfast.outcome"
        );
        trace::record_end(attempts, Some(error_type));
        if let Some(m) = &self.cb.metrics {
            m.record_failure(attempts, code, reason);
        }
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
            Last::Failure(failure) => {
                Err(RetryError::new(reason, failure, class, attempts, elapsed))
            }
        }
    }
}

/// The loop for operations that return a future of their own type (`FnMut(u32) -> Fut`).
///
/// Not an `async fn`: an `async fn` keeps its arguments and the locals made from them side by
/// side in its future; an `async move` block uses what it captured in place, so the driver is
/// stored once.
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn would store the driver twice (argument and binding)"
)]
pub(crate) fn run_fn<'a, T, E, F, Fut>(
    mut d: Driver<'a, T, E>,
    mut op: F,
) -> impl Future<Output = Done<T, E>> + use<'a, T, E, F, Fut>
where
    E: Classify,
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    async move {
        if d.plain() {
            // Nothing to do before or after a successful first attempt: run it bare.
            d.n = 1;
            // Settled in a block of its own, so the error takes no room in the future while
            // it waits in `pause`.
            {
                let settled = match op(1).await {
                    Ok(v) => return Ok(v),
                    Err(e) => d.settle(Ran::Done(Err(e))),
                };
                if let ControlFlow::Break(done) = settled {
                    return done;
                }
            }
            if let ControlFlow::Break(done) = Box::pin(d.pause()).await {
                return done;
            }
        } else if let Err(done) = d.open() {
            return done;
        }
        loop {
            let n = match d.begin() {
                Ok(n) => n,
                Err(done) => return done,
            };
            if let ControlFlow::Break(done) = d.step(op(n)).await {
                return done;
            }
        }
    }
}

/// The same loop for async closures, whose futures may borrow the closure's captures mutably.
pub(crate) async fn run_async_fn<T, E, F>(
    policy: &RetryPolicy,
    cb: &Callbacks<T, E>,
    cancel: Option<&CancellationToken>,
    mut op: F,
) -> Done<T, E>
where
    E: Classify,
    F: AsyncFnMut(u32) -> Result<T, E>,
{
    let mut d = Driver::new(policy, cb, cancel);
    if let Err(done) = d.open() {
        return done;
    }
    loop {
        let n = match d.begin() {
            Ok(n) => n,
            Err(done) => return done,
        };
        if let ControlFlow::Break(done) = d.step(op(n)).await {
            return done;
        }
    }
}

/// A duration in whole milliseconds as an event field: signed, so `tracing-opentelemetry`
/// exports it as an integer (it writes unsigned integers as text).
fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
