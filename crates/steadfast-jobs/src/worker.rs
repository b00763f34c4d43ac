//! Workers: claim due jobs under a lease, run them, and store what happens next.
//!
//! One loop per worker claims due jobs for its free slots and a buffer beyond them, in one
//! statement on a task of its own, and spawns a task per job (River's producer shape; see
//! `worker_loop.rs` for the buffer). A failed attempt stores its next run time
//! and frees its slot at once, so a job in backoff never occupies a worker and never delays
//! another job. While a handler runs, its lease is renewed; a job whose worker died is made
//! claimable again once its lease has run out (the rescue step every loop runs).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use steadfast::{ErrorClass, ErrorCode, RetryPolicy, Rng, sanitize};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::clock::{duration_ms, from_ms};
use crate::completer::Completer;
use crate::decide::{Failure, Verdict, decide};
use crate::handler::{HandlerFailure, JobContext};
use crate::jobs::Jobs;
use crate::options::CatchUp;
use crate::recurrence::Recurrence;
use crate::row::JobRow;
use crate::store::{Lease, Settle};
pub use crate::worker_config::WorkerConfig;
use crate::{JobsError, Store};

/// A worker (see [`WorkerConfig`]).
#[derive(Debug, Clone)]
pub struct Worker {
    pub(crate) shared: Arc<Shared>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) jobs: Jobs,
    pub(crate) config: WorkerConfig,
    pub(crate) id: String,
    pub(crate) rng: Mutex<Rng>,
    /// Cancelled past the grace period: handlers stop, their leases are released.
    pub(crate) abort: CancellationToken,
    /// Started on first use (it needs the runtime).
    pub(crate) completer: std::sync::OnceLock<Completer>,
    /// The earliest time (ms) a retry or deferral this worker stored is due, `i64::MAX` when
    /// none is pending: an idle loop sleeps until then instead of until the poll interval.
    pub(crate) soonest: AtomicI64,
    /// Tells the loop `soonest` moved.
    pub(crate) retimed: tokio::sync::Notify,
}

impl Worker {
    pub(crate) fn new(jobs: Jobs, config: WorkerConfig) -> Self {
        let id = config.id.clone().unwrap_or_else(|| {
            format!(
                "worker-{}-{:016x}",
                std::process::id(),
                Rng::new().next_u64()
            )
        });
        let rng = config.seed.map(Rng::with_seed).unwrap_or_else(Rng::new);
        Self {
            shared: Arc::new(Shared {
                jobs,
                config,
                id,
                rng: Mutex::new(rng),
                abort: CancellationToken::new(),
                completer: std::sync::OnceLock::new(),
                soonest: AtomicI64::new(i64::MAX),
                retimed: tokio::sync::Notify::new(),
            }),
        }
    }

    /// This worker's id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Rescues expired leases, claims the jobs due now (up to the concurrency), runs them all
    /// to the end of their attempt and returns how many ran. With a
    /// [`ManualClock`](crate::ManualClock) this steps a worker deterministically.
    pub async fn run_once(&self) -> Result<usize, JobsError> {
        self.shared.config.validate()?;
        let s = &self.shared;
        let now = s.jobs.now();
        s.jobs.inner.store.rescue(now).await?;
        let (rows, _) = s.claim(s.config.concurrency).await?;
        let n = rows.len();
        let mut set = JoinSet::new();
        for row in rows {
            let shared = s.clone();
            set.spawn(async move { shared.run(row, None).await });
        }
        let mut result = Ok(n);
        while let Some(r) = set.join_next().await {
            if let Ok(Err(e)) = r {
                result = Err(e);
            }
        }
        if let Some(c) = s.completer.get() {
            c.flush().await;
        }
        result
    }
}

impl Jobs {
    /// A worker over this handle's handlers (not started: see [`Worker::start`] and
    /// [`Worker::run_once`]).
    pub fn worker(&self, config: WorkerConfig) -> Worker {
        Worker::new(self.clone(), config)
    }
}

/// A running worker; [`shutdown`](Self::shutdown) stops it gracefully.
#[derive(Debug)]
pub struct WorkerHandle {
    pub(crate) stop: CancellationToken,
    pub(crate) task: tokio::task::JoinHandle<Result<(), JobsError>>,
    pub(crate) shared: Arc<Shared>,
}

impl WorkerHandle {
    /// Stops claiming, lets running handlers finish within the grace period, then cancels the
    /// rest and releases their leases (without spending their attempts).
    pub async fn shutdown(self) -> Result<(), JobsError> {
        self.stop.cancel();
        let grace = self.shared.config.grace;
        let abort = self.shared.abort.clone();
        let task = self.task;
        tokio::pin!(task);
        let joined = tokio::time::timeout(grace, &mut task).await;
        let result = match joined {
            Ok(r) => r,
            Err(_) => {
                abort.cancel();
                // Cancelled handlers release their leases promptly; bound the wait anyway.
                match tokio::time::timeout(Duration::from_secs(10), &mut task).await {
                    Ok(r) => r,
                    Err(_) => {
                        task.abort();
                        return Ok(());
                    }
                }
            }
        };
        result.unwrap_or(Ok(()))
    }
}

impl Shared {
    /// This worker stored a job due at `run_at` (a retry, a deferral): its loop, if idle,
    /// wakes then. Called after the row is committed, so a claim that sees the time sees the
    /// row.
    fn stored_due(&self, run_at: i64) {
        if run_at < self.soonest.fetch_min(run_at, Ordering::SeqCst) {
            self.retimed.notify_one();
        }
    }

    /// When the earliest retry or deferral this worker stored is due, if one is pending.
    pub(crate) fn retry_due(&self) -> Option<i64> {
        Some(self.soonest.load(Ordering::SeqCst)).filter(|&t| t != i64::MAX)
    }

    /// A claim starts at `now`: what it will see due needs no wake-up of its own. (A time
    /// stored meanwhile stays: the exchange fails and the loop wakes once more, harmlessly.)
    pub(crate) fn passed(&self, now: i64) {
        let t = self.soonest.load(Ordering::SeqCst);
        if t <= now {
            let _ = self
                .soonest
                .compare_exchange(t, i64::MAX, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    /// Claims up to `limit` jobs; returns them and how many of the first were claimed under a
    /// key's limits.
    pub(crate) async fn claim(&self, limit: usize) -> Result<(Vec<JobRow>, usize), JobsError> {
        let now = self.jobs.now();
        let lease_until = now.saturating_add(duration_ms(self.config.lease));
        let (rows, limited) = self
            .jobs
            .inner
            .store
            .claim(
                &self.id,
                i64::try_from(limit).unwrap_or(i64::MAX),
                now,
                lease_until,
            )
            .await?;
        for r in &rows {
            let lag = now.saturating_sub(r.run_at).max(0) as f64 / 1000.0;
            metrics::histogram!("steadfast_jobs_queue_lag_seconds", "handler" => r.handler.clone())
                .record(lag);
        }
        Ok((rows, limited))
    }

    fn completer(&self) -> &Completer {
        self.completer.get_or_init(|| {
            Completer::spawn(
                self.store().clone(),
                self.id.clone(),
                self.jobs.inner.clock.clone(),
                self.config.concurrency,
                self.config.keep_done,
            )
        })
    }

    fn store(&self) -> &Store {
        &self.jobs.inner.store
    }

    /// Runs one claimed attempt and stores its outcome. `slot`, the worker's slot the job
    /// holds, is given back as soon as a failed handler returns, before its retry (or death)
    /// is stored: as a success's slot is, once handed to the completer. Held through that
    /// round trip, a worker of one slot waited for it between every failed job and the next.
    pub(crate) async fn run(
        self: Arc<Self>,
        row: JobRow,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<(), JobsError> {
        let span = crate::row::attempt_span(&row);
        let trace = row.trace();
        if let (false, Some(p), Some(tc)) = (
            span.is_disabled(),
            &self.jobs.inner.propagation,
            trace.as_ref(),
        ) {
            // Before the span is first entered: `tracing-opentelemetry` starts the span then,
            // and refuses a new parent after that.
            p.attach(&span, tc);
        }
        let outcome = self
            .attempt(&row, trace, slot)
            .instrument(span.clone())
            .await;
        if let Ok(o) = &outcome {
            span.record("steadfast.job.outcome", *o);
        }
        outcome.map(|_| ())
    }

    async fn attempt(
        &self,
        row: &JobRow,
        trace: Option<crate::TraceContext>,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<&'static str, JobsError> {
        let lease = Lease {
            id: row.id,
            worker: &self.id,
            attempt: row.attempts,
        };
        let attempt = u32::try_from(row.attempts).unwrap_or(u32::MAX);
        let handler_name = row.handler.clone();
        let policy: RetryPolicy = match serde_json::from_str(&row.policy) {
            Ok(p) => p,
            Err(e) => {
                let msg = format!("stored retry policy is unreadable: {e}");
                return self
                    .dead(row, &lease, &msg, "INVALID_POLICY", "non_retriable")
                    .await;
            }
        };
        if attempt > policy.max_attempts() {
            // Its last attempt's worker died: that attempt counted.
            let msg = format!(
                "{} attempts made; the last one's worker stopped renewing its lease",
                policy.max_attempts()
            );
            return self
                .dead(row, &lease, &msg, "LEASE_EXPIRED", "exhausted")
                .await;
        }
        let Some(handler) = self.jobs.inner.handlers.get(&row.handler) else {
            let class = ErrorClass::retriable(ErrorCode::new("UNKNOWN_HANDLER"));
            let failure = HandlerFailure {
                class,
                message: format!("no handler named {:?} in this worker", row.handler),
                declined: false,
            };
            return self.failed(row, &lease, &policy, failure, None).await;
        };
        // Dependency guards: a busy or open dependency defers the job without spending an
        // attempt.
        let dep = handler.dependency.as_deref();
        let _slot = match dep.and_then(|d| self.jobs.inner.guards.limit(d)) {
            Some(limit) => match limit.try_enter() {
                Some(slot) => Some(slot),
                None => {
                    let run_at = self
                        .jobs
                        .now()
                        .saturating_add(duration_ms(self.config.busy_delay));
                    return self.defer(row, &lease, run_at, "busy").await;
                }
            },
            None => None,
        };
        let permit = match dep.map(|d| self.jobs.inner.guards.breaker(d)) {
            Some(b) => match b.try_acquire_owned() {
                Ok(p) => Some(p),
                Err(rejected) => {
                    let wait = rejected.retry_in.unwrap_or(Duration::from_secs(1));
                    let run_at = self.jobs.now().saturating_add(duration_ms(wait).max(1));
                    return self.defer(row, &lease, run_at, "breaker_open").await;
                }
            },
            None => None,
        };
        let budget = dep.map(|d| self.jobs.inner.guards.budget(d));
        if attempt == 1
            && let Some(b) = &budget
        {
            b.deposit();
        }
        // A recurring schedule's run: skip a stale fire time, or plan the next one now when
        // runs may overlap.
        let schedule = match row.schedule_id {
            Some(id) => self.load_schedule(id).await?,
            None => None,
        };
        if let (Some(sch), Some(fire_at)) = (&schedule, row.fire_at) {
            let now = self.jobs.now();
            if sch.catch_up == CatchUp::Skip && sch.recurrence.is_stale(fire_at, now) {
                if let Some(p) = permit {
                    p.success();
                }
                self.store()
                    .settle(
                        &lease,
                        &Settle::Dead {
                            error: "skipped: its fire time was missed (catch_up = skip)",
                            code: "SKIPPED",
                        },
                        now,
                    )
                    .await?;
                // Stored as cancelled, not dead: nothing failed.
                sqlx::query("UPDATE steadfast_jobs SET state = 'cancelled' WHERE id = $1 AND state = 'dead'")
                    .bind(row.id)
                    .execute(&self.store().pool)
                    .await?;
                self.plan_next(sch, fire_at, row).await?;
                return Ok("skipped");
            }
            if sch.allow_overlap && attempt == 1 {
                self.plan_next(sch, fire_at, row).await?;
            }
        }

        metrics::gauge!("steadfast_jobs_running", "handler" => handler_name.clone()).increment(1.0);
        let cancel = self.abort.child_token();
        let ctx = JobContext {
            id: row.id,
            attempt,
            fire_at: row.fire_at.map(from_ms),
            cancel: cancel.clone(),
            trace,
        };
        let started = tokio::time::Instant::now();
        // A panicking handler is a failed attempt (classified unknown), not a lost worker slot
        // and a job stuck until its lease runs out.
        let run = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe((handler
            .run)(
            ctx,
            &row.payload,
        )));
        let run = async move {
            match run.await {
                Ok(r) => r,
                Err(_) => Err(HandlerFailure {
                    class: ErrorClass::unknown(),
                    message: "the handler panicked".to_owned(),
                    declined: false,
                }),
            }
        };
        let timed = async {
            match policy.attempt_timeout() {
                Some(t) => match tokio::time::timeout(t, run).await {
                    Ok(r) => r,
                    Err(_) => Err(HandlerFailure {
                        class: ErrorClass::timeout(),
                        message: format!(
                            "attempt timed out after {}",
                            humantime::format_duration(t)
                        ),
                        declined: false,
                    }),
                },
                None => run.await,
            }
        };
        let renew_every = self.config.lease / 3;
        let renewing = async {
            let mut tick = tokio::time::interval(renew_every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let until = self
                    .jobs
                    .now()
                    .saturating_add(duration_ms(self.config.lease));
                match self.store().renew(&lease, until).await {
                    Ok(true) => {}
                    Ok(false) => return "lease_lost",
                    // A blip: the next tick tries again, well before the lease ends.
                    Err(e) => {
                        tracing::warn!(error = %sanitize(&e.to_string()), "renewing a lease failed")
                    }
                }
            }
        };
        let result = tokio::select! {
            r = timed => Some(r),
            why = renewing => { tracing::warn!(why, "job lease lost; its result will not be stored"); cancel.cancel(); None }
            _ = cancel.cancelled() => None,
        };
        metrics::gauge!("steadfast_jobs_running", "handler" => handler_name.clone()).decrement(1.0);
        let Some(result) = result else {
            // Shutdown past the grace period (or a lost lease): release the job untouched.
            if let Some(p) = permit {
                drop(p); // not a verdict on the dependency
            }
            let now = self.jobs.now();
            return self.defer(row, &lease, now, "released").await;
        };
        match result {
            Ok(()) => {
                if let Some(p) = permit {
                    p.success_after(started.elapsed());
                }
                let (Some(sch), Some(fire_at)) = (&schedule, row.fire_at) else {
                    self.completer()
                        .done(row.id, row.attempts, &handler_name)
                        .await?;
                    return Ok("done");
                };
                // A schedule's run is settled at once: its next fire time depends on it.
                let now = self.jobs.now();
                if self.store().settle(&lease, &Settle::Done, now).await? {
                    metrics::counter!("steadfast_jobs_succeeded_total", "handler" => handler_name)
                        .increment(1);
                    if !sch.allow_overlap {
                        self.plan_next(sch, fire_at, row).await?;
                    }
                }
                Ok("done")
            }
            Err(failure) => {
                drop(slot);
                if let Some(p) = permit {
                    p.record(failure.class.counts_as_breaker_failure());
                }
                let spent = budget.as_ref().is_some_and(|b| !b.try_withdraw());
                self.failed_with(row, &lease, &policy, failure, spent, schedule.as_ref())
                    .await
            }
        }
    }

    async fn failed(
        &self,
        row: &JobRow,
        lease: &Lease<'_>,
        policy: &RetryPolicy,
        failure: HandlerFailure,
        schedule: Option<&Schedule>,
    ) -> Result<&'static str, JobsError> {
        self.failed_with(row, lease, policy, failure, false, schedule)
            .await
    }

    async fn failed_with(
        &self,
        row: &JobRow,
        lease: &Lease<'_>,
        policy: &RetryPolicy,
        failure: HandlerFailure,
        budget_spent: bool,
        schedule: Option<&Schedule>,
    ) -> Result<&'static str, JobsError> {
        let now = self.jobs.now();
        let attempt = u32::try_from(row.attempts).unwrap_or(u32::MAX);
        let verdict = {
            let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            decide(
                policy,
                &Failure {
                    class: &failure.class,
                    attempt,
                    declined: failure.declined,
                    first_attempt_at: row.first_attempt_at.unwrap_or(now),
                    previous_delay: Duration::from_millis(
                        u64::try_from(row.last_delay_ms).unwrap_or(0),
                    ),
                    budget_spent,
                },
                now,
                &mut rng,
            )
        };
        let message = sanitize(&failure.message).into_owned();
        let code = failure.class.code.as_str().to_owned();
        match verdict {
            Verdict::Retry { run_at, delay } => {
                let ours = self
                    .store()
                    .settle(
                        lease,
                        &Settle::Retry {
                            run_at,
                            delay_ms: duration_ms(delay),
                            error: &message,
                            code: &code,
                        },
                        now,
                    )
                    .await?;
                if ours {
                    self.stored_due(run_at);
                    metrics::counter!("steadfast_jobs_retried_total", "handler" => row.handler.clone()).increment(1);
                    steadfast::trace::record_error(&tracing::Span::current(), code.as_str());
                    tracing::info!(
                        steadfast.attempt = i64::from(attempt),
                        steadfast.delay_ms = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX),
                        steadfast.reason = code.as_str(),
                        steadfast.max_attempts = i64::from(policy.max_attempts()),
                        steadfast.retry_after_honoured =
                            failure.class.retry_after.is_some_and(|ra| delay >= ra),
                        "steadfast.retry"
                    );
                }
                Ok("retry")
            }
            Verdict::Dead(reason) => {
                let text = format!("{} ({}): {message}", reason.as_str(), code);
                let r = self.dead(row, lease, &text, &code, reason.as_str()).await;
                if let (Some(sch), Some(fire_at)) = (schedule, row.fire_at)
                    && !sch.allow_overlap
                {
                    self.plan_next(sch, fire_at, row).await?;
                }
                r
            }
        }
    }

    async fn dead(
        &self,
        row: &JobRow,
        lease: &Lease<'_>,
        error: &str,
        code: &str,
        give_up_reason: &str,
    ) -> Result<&'static str, JobsError> {
        let now = self.jobs.now();
        let error = sanitize(error);
        let ours = self
            .store()
            .settle(
                lease,
                &Settle::Dead {
                    error: &error,
                    code,
                },
                now,
            )
            .await?;
        if ours {
            metrics::counter!("steadfast_jobs_dead_total", "handler" => row.handler.clone())
                .increment(1);
            steadfast::trace::record_error(&tracing::Span::current(), code);
            tracing::warn!(
                steadfast.reason = code,
                steadfast.give_up_reason = give_up_reason,
                "steadfast.job.dead"
            );
            if let Some(hook) = &self.jobs.inner.on_dead
                && let Some(job) = self.store().get(row.id).await?
            {
                hook(&job);
            }
        }
        Ok("dead")
    }

    pub(crate) async fn defer(
        &self,
        row: &JobRow,
        lease: &Lease<'_>,
        run_at: i64,
        why: &'static str,
    ) -> Result<&'static str, JobsError> {
        let now = self.jobs.now();
        if self
            .store()
            .settle(lease, &Settle::Defer { run_at }, now)
            .await?
        {
            self.stored_due(run_at);
        }
        metrics::counter!("steadfast_jobs_deferred_total", "handler" => row.handler.clone(), "why" => why)
            .increment(1);
        tracing::info!(steadfast.reason = why, "steadfast.job.deferred");
        Ok(why)
    }

    async fn load_schedule(&self, id: i64) -> Result<Option<Schedule>, JobsError> {
        use sqlx::Row;
        let row = sqlx::query(
            "SELECT cron, tz, interval_ms, catch_up, max_catch_up, allow_overlap, active, handler, payload, policy \
             FROM steadfast_schedules WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.store().pool)
        .await?;
        let Some(r) = row else { return Ok(None) };
        let cron: Option<String> = r.try_get(0)?;
        let tz: Option<String> = r.try_get(1)?;
        let interval: Option<i64> = r.try_get(2)?;
        let recurrence = match (cron, interval) {
            (Some(c), _) => Recurrence::cron(&c, tz.as_deref())?,
            (None, Some(i)) => Recurrence::every(i)?,
            (None, None) => return Ok(None),
        };
        Ok(Some(Schedule {
            id,
            recurrence,
            catch_up: CatchUp::parse(&r.try_get::<String, _>(3)?),
            max_catch_up: u32::try_from(r.try_get::<i64, _>(4)?).unwrap_or(1),
            allow_overlap: r.try_get::<i64, _>(5)? != 0,
            active: r.try_get::<i64, _>(6)? != 0,
            handler: r.try_get(7)?,
            payload: r.try_get(8)?,
            policy: r.try_get(9)?,
        }))
    }

    /// Queues the schedule's next fire time after the run for `fire_at`; the unique
    /// `(schedule, fire_at)` index makes a second planner a no-op. Whether the schedule is
    /// still active is read by the insert itself, not taken from `sch` (read before the
    /// handler ran): a schedule cancelled during its run stops there.
    async fn plan_next(
        &self,
        sch: &Schedule,
        fire_at: i64,
        _row: &JobRow,
    ) -> Result<(), JobsError> {
        if !sch.active {
            return Ok(());
        }
        let now = self.jobs.now();
        let (priority, head_start_ms, limit_key) = self
            .jobs
            .placement(&sch.handler, &crate::JobOptions::new())
            .unwrap_or((0, 0, None));
        let Some((next, run_at)) =
            sch.recurrence
                .plan(fire_at, now, sch.catch_up, sch.max_catch_up)
        else {
            return Ok(());
        };
        self.store()
            .insert_fire(
                &crate::store::NewJob {
                    handler: &sch.handler,
                    payload: std::borrow::Cow::Borrowed(&sch.payload),
                    policy: std::borrow::Cow::Borrowed(&sch.policy),
                    run_at,
                    unique_key: None,
                    ordering_key: None,
                    schedule_id: Some(sch.id),
                    fire_at: Some(next),
                    priority,
                    head_start_ms,
                    limit_key: limit_key.as_deref(),
                    trace: None,
                },
                now,
            )
            .await
    }
}

#[derive(Debug)]
struct Schedule {
    id: i64,
    recurrence: Recurrence,
    catch_up: CatchUp,
    max_catch_up: u32,
    allow_overlap: bool,
    active: bool,
    handler: String,
    payload: String,
    policy: String,
}
