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
pub(crate) struct Driver<'a, T, E> {
    policy: &'a RetryPolicy,
    cb: &'a Callbacks<T, E>,
    cancel: Option<&'a CancellationToken>,
    start: Instant,
    permit: Option<Permit<'a>>,
    /// Slow-call detection needs each attempt's duration; the clock is read only if it is on.
    timed_attempts: bool,
    attempt_start: Option<Instant>,
    /// Whether the current attempt's limit is the end of the time budget.
    budget_bound: bool,
    /// Created on the first retry, so a call that succeeds at once never touches it.
    rng: Option<Rng>,
    slot: Option<RetrySlot>,
    previous: Duration,
    /// Boxed: only failures fill it, and a smaller driver is a cheaper future to move.
    last: Option<Box<(Last<T, E>, ErrorClass)>>,
    n: u32,
}

impl<'a, T, E: Classify> Driver<'a, T, E> {
    /// Starts a call. The breaker wraps the whole loop: an open one ends the call here, before
    /// any attempt and without touching the budget.
    #[inline]
    pub(crate) fn start(
        policy: &'a RetryPolicy,
        cb: &'a Callbacks<T, E>,
        cancel: Option<&'a CancellationToken>,
    ) -> Result<Self, Done<T, E>> {
        let mut d = Driver {
            policy,
            cb,
            cancel,
            start: Instant::now(),
            permit: None,
            timed_attempts: false,
            attempt_start: None,
            budget_bound: false,
            rng: None,
            slot: None,
            previous: policy.base_delay(),
            last: None,
            n: 0,
        };
        if let Some(breaker) = &cb.breaker {
            match breaker.try_acquire() {
                Ok(p) => d.permit = Some(p),
                Err(rejected) => {
                    let class = rejected.class();
                    d.last = Some(Box::new((
                        Last::Failure(Failure::Rejected(Box::new(rejected))),
                        class,
                    )));
                    return Err(d.give_up(GiveUpReason::CircuitOpen));
                }
            }
            d.timed_attempts = breaker.config().slow_call_threshold().is_some();
        }
        if let Some(budget) = &cb.budget {
            budget.deposit_at(d.start);
        }
        Ok(d)
    }

    /// Readies the next attempt: returns its number and its time limit, or ends the call.
    #[inline]
    pub(crate) fn begin(&mut self) -> Result<(u32, Option<Duration>), Done<T, E>> {
        if self.cancel.is_some_and(CancellationToken::is_cancelled) {
            return Err(self.give_up(GiveUpReason::Cancelled));
        }
        if self.n > 0 && !self.breaker_current() {
            // The breaker opened during the delay.
            return Err(self.give_up(GiveUpReason::CircuitOpen));
        }
        self.n += 1;
        let budget_left = self
            .policy
            .max_elapsed()
            .map(|max| max.saturating_sub(self.start.elapsed()));
        let (limit, budget_bound) = match (self.policy.attempt_timeout(), budget_left) {
            (Some(t), Some(b)) if b < t => (Some(b), true),
            (Some(t), _) => (Some(t), false),
            (None, Some(b)) => (Some(b), true),
            (None, None) => (None, false),
        };
        self.budget_bound = budget_bound;
        self.attempt_start = self.timed_attempts.then(Instant::now);
        Ok((self.n, limit))
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
            Ran::TimedOut(after) => (
                Last::Failure(Failure::Timeout { after }),
                ErrorClass::timeout().with_message("attempt timed out"),
            ),
            Ran::Cancelled => return ControlFlow::Break(self.give_up(GiveUpReason::Cancelled)),
        };
        let (n, policy) = (self.n, self.policy);

        let timed_out = matches!(outcome, Last::Failure(Failure::Timeout { .. }));
        let stop = if self.budget_bound && timed_out {
            Some(GiveUpReason::TimeBudget)
        } else if !self.retriable(&class) {
            Some(GiveUpReason::NonRetriable)
        } else if n >= policy.max_attempts() {
            Some(GiveUpReason::Exhausted)
        } else if let (Some(veto), Last::Failure(Failure::Error(e))) =
            (&self.cb.should_retry, &outcome)
        {
            (!veto(e, n + 1)).then_some(GiveUpReason::Declined)
        } else if !self.breaker_current() {
            // The breaker opened while this call was failing: stop adding load.
            Some(GiveUpReason::CircuitOpen)
        } else {
            None
        };
        self.last = Some(Box::new((outcome, class)));
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
        limit: Option<Duration>,
    ) -> ControlFlow<Done<T, E>> {
        let ran = match (limit, self.cancel) {
            (None, None) => Ran::Done(fut.await),
            // Timers and cancellation make a bigger future; only calls that use them pay.
            (limit, cancel) => Box::pin(attempt(fut, limit, cancel)).await,
        };
        self.settle(ran)?;
        Box::pin(self.pause()).await
    }

    /// Between a failed attempt and the next: takes a retry slot, plans the delay within the
    /// time and retry budgets, reports the retry, and sleeps. `Break` ends the call.
    pub(crate) async fn pause(&mut self) -> ControlFlow<Done<T, E>> {
        let (n, policy) = (self.n, self.policy);
        if let Err(reason) = self.take_retry_slot().await {
            return ControlFlow::Break(self.give_up(reason));
        }

        let rng = self
            .rng
            .get_or_insert_with(|| self.cb.seed.map_or_else(Rng::new, Rng::with_seed));
        let backoff = policy.backoff_delay(n, self.previous, rng);
        self.previous = backoff;
        let retry_after = self.last.as_ref().and_then(|l| l.1.retry_after);
        let delay = policy.floor_retry_after(backoff, retry_after);

        let elapsed = self.start.elapsed();
        if policy
            .max_elapsed()
            .is_some_and(|max| elapsed.saturating_add(delay) >= max)
        {
            return ControlFlow::Break(self.give_up(GiveUpReason::TimeBudget));
        }
        // Withdraw last, so a retry that is not going to happen spends nothing.
        if self
            .cb
            .budget
            .as_ref()
            .is_some_and(|b| !b.try_withdraw_at(self.start + elapsed))
        {
            return ControlFlow::Break(self.give_up(GiveUpReason::BudgetExhausted));
        }

        if let Some(m) = &self.cb.metrics {
            m.record_retry();
        }
        if let Some(last) = &self.last {
            let (outcome, class) = (&last.0, &last.1);
            tracing::debug!(
                name = self.cb.name.as_deref().unwrap_or(""),
                attempt = n,
                max_attempts = policy.max_attempts(),
                delay_ms = delay.as_millis() as u64,
                code = class.code.as_str(),
                kind = class.kind.as_str(),
                "retrying"
            );
            if let Some(f) = &self.cb.on_retry {
                f(&RetryEvent {
                    attempt: n,
                    delay,
                    class,
                    failed: outcome.view(),
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
        if self.slot.is_some() {
            return Ok(());
        }
        self.slot = Some(match limit.config().when_full() {
            WhenFull::GiveUp => limit.try_enter().ok_or(GiveUpReason::ConcurrencyLimit)?,
            WhenFull::Wait => match self.cancel {
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

    #[inline]
    fn succeed(&mut self, v: T) -> T {
        if let Some(p) = self.permit.take() {
            match self.attempt_start {
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
                elapsed: self.start.elapsed(),
            });
        }
        if self.n > 1 {
            tracing::debug!(
                name = self.cb.name.as_deref().unwrap_or(""),
                attempts = self.n,
                "succeeded after retry"
            );
        }
        v
    }

    /// Ends the call without success. The breaker, if any, records the final outcome — except
    /// for a cancelled call, whose outcome says nothing about the dependency.
    fn give_up(&mut self, reason: GiveUpReason) -> Done<T, E> {
        let elapsed = self.start.elapsed();
        let attempts = self.n;
        let (last, class) = self.last.take().map_or(
            (Last::Failure(Failure::Cancelled), ErrorClass::cancelled()),
            |b| *b,
        );
        if let Some(p) = self.permit.take() {
            if reason != GiveUpReason::Cancelled {
                p.record(class.counts_as_breaker_failure());
            }
        }
        tracing::debug!(
            name = self.cb.name.as_deref().unwrap_or(""),
            attempts,
            reason = reason.as_str(),
            code = class.code.as_str(),
            elapsed_ms = elapsed.as_millis() as u64,
            "giving up"
        );
        if let Some(m) = &self.cb.metrics {
            m.record_failure(attempts, LlmErrorCode::for_outcome(&class, Some(reason)));
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
pub(crate) async fn run_fn<T, E, F, Fut>(
    policy: &RetryPolicy,
    cb: &Callbacks<T, E>,
    cancel: Option<&CancellationToken>,
    mut op: F,
) -> Done<T, E>
where
    E: Classify,
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut d = match Driver::start(policy, cb, cancel) {
        Ok(d) => d,
        Err(done) => return done,
    };
    loop {
        let (n, limit) = match d.begin() {
            Ok(next) => next,
            Err(done) => return done,
        };
        if let ControlFlow::Break(done) = d.step(op(n), limit).await {
            return done;
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
    let mut d = match Driver::start(policy, cb, cancel) {
        Ok(d) => d,
        Err(done) => return done,
    };
    loop {
        let (n, limit) = match d.begin() {
            Ok(next) => next,
            Err(done) => return done,
        };
        if let ControlFlow::Break(done) = d.step(op(n), limit).await {
            return done;
        }
    }
}
