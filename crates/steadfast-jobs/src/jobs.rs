//! `Jobs`: the handle that queues, schedules and inspects jobs, and makes workers.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use sqlx::Row;
use steadfast::{RetryPolicy, RetryPolicyBuilder};
use tokio::sync::Notify;

use crate::JobsError;
use crate::clock::{Clock, SystemClock, duration_ms};
use crate::guards::{DependencyOptions, Guards};
use crate::handler::Registered;
use crate::job::{Job, JobId, JobState};
use crate::options::{JobOptions, ScheduleOptions, When};
use crate::recurrence::Recurrence;
use crate::store::{NewJob, Stats, Store, StoreOptions};
use crate::trace::{TraceContext, TracePropagation};

type OnDead = Arc<dyn Fn(&Job) + Send + Sync>;

pub(crate) struct Inner {
    pub(crate) store: Store,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) defaults: RetryPolicy,
    pub(crate) handlers: HashMap<String, Registered>,
    pub(crate) guards: Guards,
    pub(crate) on_dead: Option<OnDead>,
    /// Wakes this process's idle workers when it queues a job itself.
    pub(crate) wake: Arc<Notify>,
    /// What one step of priority is worth in waiting, in milliseconds.
    pub(crate) aging_ms: i64,
    /// Captures the enqueuer's trace context and attaches it to attempt spans.
    pub(crate) propagation: Option<Arc<dyn TracePropagation>>,
    /// Jobs this process's workers claimed and keep at hand, not started yet: id → (worker,
    /// attempt). Whoever takes an id out first owns it: the worker starts (or releases) it,
    /// [`Jobs::cancel`] cancels it.
    pub(crate) kept: std::sync::Mutex<HashMap<JobId, (String, i64)>>,
}

impl Inner {
    /// Takes a kept job out of its worker's buffer: `None` when it was not kept (or already
    /// taken).
    pub(crate) fn take_kept(&self, id: JobId) -> Option<(String, i64)> {
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
    }
}

/// Queues, schedules and inspects durable jobs; cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{ErrorClass, RetryPolicy};
/// use steadfast_jobs::{JobOptions, JobState, Jobs, When, handler};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), steadfast_jobs::JobsError> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
/// let jobs = Jobs::builder()
///     .defaults(RetryPolicy::builder().max_attempts(5))
///     .handler(handler("greet", |_ctx, name: String| async move {
///         println!("hello, {name}");
///         Ok::<(), ErrorClass>(())
///     }))
///     .connect(&url)
///     .await?;
/// let id = jobs.queue("greet", &"Ada", JobOptions::new()).await?;
/// jobs.schedule(When::delay(Duration::from_secs(60)), "greet", &"Grace", Default::default()).await?;
/// // Invalid retry options are refused when queued, with the library's message.
/// let err = jobs
///     .queue("greet", &"x", JobOptions::new().retry(RetryPolicy::builder().max_attempts(0)))
///     .await
///     .unwrap_err();
/// assert_eq!(err.to_string(), "invalid retry policy: max_attempts must be >= 1 (got 0)");
///
/// let worker = jobs.worker(Default::default());
/// assert_eq!(worker.run_once().await?, 1);
/// assert_eq!(jobs.get(id).await?.unwrap().state, JobState::Done);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Jobs {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs")
            .field("backend", &self.inner.store.backend())
            .field("handlers", &self.inner.handlers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Jobs`].
#[derive(Default)]
pub struct JobsBuilder {
    defaults: RetryPolicyBuilder,
    handlers: Vec<Registered>,
    dependencies: HashMap<String, DependencyOptions>,
    clock: Option<Arc<dyn Clock>>,
    on_dead: Option<OnDead>,
    aging: Option<Duration>,
    propagation: Option<Arc<dyn TracePropagation>>,
}

impl std::fmt::Debug for JobsBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobsBuilder").finish_non_exhaustive()
    }
}

impl JobsBuilder {
    /// Worker-wide retry defaults (Cloudflare's class-level defaults), layered on the
    /// library's defaults.
    pub fn defaults(mut self, layer: RetryPolicyBuilder) -> Self {
        self.defaults = layer;
        self
    }

    /// Registers a handler (see [`handler`](crate::handler())).
    pub fn handler(mut self, h: impl Into<Registered>) -> Self {
        self.handlers.push(h.into());
        self
    }

    /// Guards a dependency named by handlers.
    pub fn dependency(mut self, name: impl Into<String>, opts: DependencyOptions) -> Self {
        self.dependencies.insert(name.into(), opts);
        self
    }

    /// The clock (the system clock by default).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// What one step of priority is worth in waiting (default 10 s): a job of priority 0
    /// that has been due 20 s longer than one of priority 2 goes first, so low priorities are
    /// delayed, never starved. Give every process sharing a store the same value.
    pub fn priority_aging(mut self, step: Duration) -> Self {
        self.aging = Some(step);
        self
    }

    /// Connects attempt spans to the trace that queued each job (see [`TracePropagation`]):
    /// jobs queued without a `traceparent` store its [`current`](TracePropagation::current)
    /// context, and every attempt of a job with one calls its
    /// [`attach`](TracePropagation::attach).
    pub fn trace_propagation(mut self, p: impl TracePropagation) -> Self {
        self.propagation = Some(Arc::new(p));
        self
    }

    /// Called once for each job that becomes a dead letter.
    pub fn on_dead(mut self, f: impl Fn(&Job) + Send + Sync + 'static) -> Self {
        self.on_dead = Some(Arc::new(f));
        self
    }

    /// Opens the store at `url` (tables created or migrated) and validates the options.
    pub async fn connect(self, url: &str) -> Result<Jobs, JobsError> {
        self.connect_with(StoreOptions::new(url)).await
    }

    /// Opens the store with options.
    pub async fn connect_with(self, opts: StoreOptions) -> Result<Jobs, JobsError> {
        let defaults = self.defaults.build()?;
        let mut handlers = HashMap::new();
        for h in self.handlers {
            // Handler defaults are validated now, not when their first job is queued.
            h.retry.build_on(&defaults)?;
            if handlers.insert(h.name.clone(), h).is_some() {
                return Err(JobsError::invalid("handler", "names be unique"));
            }
        }
        let aging = self.aging.unwrap_or(Duration::from_secs(10));
        if aging < Duration::from_millis(1) || aging > Duration::from_secs(86_400) {
            return Err(JobsError::invalid(
                "priority_aging",
                format!("be 1ms to 1 day (got {aging:?})"),
            ));
        }
        for h in handlers.values() {
            check_priority(h.priority)?;
            if let Some(k) = &h.limit_key {
                check_key(k)?;
            }
        }
        let guards = Guards::new(&self.dependencies)?;
        let store = Store::connect(opts).await?;
        Ok(Jobs {
            inner: Arc::new(Inner {
                store,
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
                defaults,
                handlers,
                guards,
                on_dead: self.on_dead,
                wake: Arc::new(Notify::new()),
                aging_ms: duration_ms(aging),
                kept: Default::default(),
                propagation: self.propagation,
            }),
        })
    }
}

impl Jobs {
    /// Starts building.
    pub fn builder() -> JobsBuilder {
        JobsBuilder::default()
    }

    /// The store, for inspection tools.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub(crate) fn now(&self) -> i64 {
        self.inner.clock.now().timestamp_millis()
    }

    /// The policy a job of `handler` with `layer` runs under: worker defaults, then the
    /// handler's, then the job's — validated.
    pub fn resolve_policy(
        &self,
        handler: &str,
        layer: &RetryPolicyBuilder,
    ) -> Result<RetryPolicy, JobsError> {
        let merged = match self.inner.handlers.get(handler) {
            Some(h) => h.retry.clone().layer(layer),
            None => layer.clone(),
        };
        Ok(merged.build_on(&self.inner.defaults)?)
    }

    fn policy_json(&self, handler: &str, layer: &RetryPolicyBuilder) -> Result<String, JobsError> {
        check_name(handler)?;
        let policy = self.resolve_policy(handler, layer)?;
        Ok(serde_json::to_string(&policy)?)
    }

    /// Queues a job to run now; returns its id (or, with a `unique_key` already queued or
    /// running, that job's id).
    pub async fn queue<P: Serialize + ?Sized>(
        &self,
        handler: &str,
        payload: &P,
        opts: JobOptions,
    ) -> Result<JobId, JobsError> {
        let now = self.now();
        self.insert(handler, payload, &opts, now, None).await
    }

    async fn insert<P: Serialize + ?Sized>(
        &self,
        handler: &str,
        payload: &P,
        opts: &JobOptions,
        run_at: i64,
        schedule: Option<(i64, i64)>,
    ) -> Result<JobId, JobsError> {
        let policy = self.policy_json(handler, &opts.retry)?;
        let payload = serde_json::to_string(payload)?;
        let (priority, head_start_ms, limit_key) = self.placement(handler, opts)?;
        // A schedule's fire times start traces of their own; a one-off job continues its
        // enqueuer's.
        let trace = match (&opts.traceparent, schedule) {
            (Some(tp), _) => Some(TraceContext::parse(tp, opts.tracestate.as_deref())?),
            (None, None) => self.current_trace(),
            (None, Some(_)) => None,
        };
        let id = self
            .inner
            .store
            .insert(
                &NewJob {
                    handler,
                    payload: Cow::Owned(payload),
                    policy: Cow::Owned(policy),
                    run_at,
                    unique_key: opts.unique_key.as_deref(),
                    ordering_key: opts.ordering_key.as_deref(),
                    schedule_id: schedule.map(|s| s.0),
                    fire_at: schedule.map(|s| s.1),
                    priority,
                    head_start_ms,
                    limit_key: limit_key.as_deref(),
                    trace: trace.as_ref(),
                },
                self.now(),
            )
            .await?;
        metrics::counter!("steadfast_jobs_queued_total", "handler" => handler.to_owned())
            .increment(1);
        self.inner.wake.notify_waiters();
        Ok(id)
    }

    /// The propagation's current context, if it has a valid one.
    fn current_trace(&self) -> Option<TraceContext> {
        let tc = self.inner.propagation.as_ref()?.current()?;
        // Re-checked: a propagation may hand over anything.
        TraceContext::parse(&tc.traceparent, tc.tracestate.as_deref()).ok()
    }

    /// A job's priority, head start and key: its options, else its handler's defaults.
    pub(crate) fn placement(
        &self,
        handler: &str,
        opts: &JobOptions,
    ) -> Result<(i64, i64, Option<String>), JobsError> {
        let h = self.inner.handlers.get(handler);
        let priority = opts.priority.unwrap_or_else(|| h.map_or(0, |h| h.priority));
        check_priority(priority)?;
        let key = opts
            .limit_key
            .clone()
            .or_else(|| h.and_then(|h| h.limit_key.clone()));
        if let Some(k) = &key {
            check_key(k)?;
        }
        let priority = i64::from(priority);
        Ok((priority, priority * self.inner.aging_ms, key))
    }

    /// Queues many jobs of one handler with its default options (priority, key), a few
    /// statements per thousand jobs.
    pub async fn queue_many<P: Serialize>(
        &self,
        handler: &str,
        payloads: impl IntoIterator<Item = P>,
    ) -> Result<Vec<JobId>, JobsError> {
        let policy = self.policy_json(handler, &RetryPolicyBuilder::default())?;
        let payloads = payloads
            .into_iter()
            .map(|p| serde_json::to_string(&p))
            .collect::<Result<Vec<_>, _>>()?;
        let (priority, head_start_ms, limit_key) = self.placement(handler, &JobOptions::new())?;
        let now = self.now();
        let trace = self.current_trace();
        let common = NewJob {
            handler,
            payload: Cow::Borrowed(""),
            policy: Cow::Borrowed(&policy),
            run_at: now,
            unique_key: None,
            ordering_key: None,
            schedule_id: None,
            fire_at: None,
            priority,
            head_start_ms,
            limit_key: limit_key.as_deref(),
            trace: trace.as_ref(),
        };
        let ids = self
            .inner
            .store
            .insert_many(&common, &payloads, now)
            .await?;
        metrics::counter!("steadfast_jobs_queued_total", "handler" => handler.to_owned())
            .increment(ids.len() as u64);
        self.inner.wake.notify_waiters();
        Ok(ids)
    }

    /// Schedules a job: once after a delay or at a date, or recurring on a cron expression or
    /// an interval. Returns the id of its first (or next, for a keyed schedule that already
    /// exists) job.
    pub async fn schedule<P: Serialize + ?Sized>(
        &self,
        when: When,
        handler: &str,
        payload: &P,
        opts: ScheduleOptions,
    ) -> Result<JobId, JobsError> {
        let now = self.now();
        let job_opts = JobOptions::new().retry(opts.retry.clone());
        let (recurrence, cron, tz, interval_ms) = match &when {
            When::Delay(d) => {
                return self
                    .insert(
                        handler,
                        payload,
                        &job_opts,
                        now.saturating_add(duration_ms(*d)),
                        None,
                    )
                    .await;
            }
            When::At(at) => {
                return self
                    .insert(handler, payload, &job_opts, at.timestamp_millis(), None)
                    .await;
            }
            When::Cron { expr, tz } => (
                Recurrence::cron(expr, tz.as_deref())?,
                Some(expr.as_str()),
                tz.as_deref(),
                None,
            ),
            When::Every(d) => {
                let ms = duration_ms(*d);
                (Recurrence::every(ms)?, None, None, Some(ms))
            }
        };
        if opts.max_catch_up == 0 {
            return Err(JobsError::invalid("max_catch_up", "be >= 1 (got 0)"));
        }
        let policy = self.policy_json(handler, &opts.retry)?;
        let payload_json = serde_json::to_string(payload)?;
        let pool = &self.inner.store.pool;
        let row = sqlx::query(
            "INSERT INTO steadfast_schedules (key, handler, payload, policy, cron, tz, interval_ms, catch_up, \
             max_catch_up, allow_overlap, active, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1, $11) ON CONFLICT DO NOTHING RETURNING id",
        )
        .bind(opts.key.as_deref())
        .bind(handler)
        .bind(payload_json.as_str())
        .bind(policy.as_str())
        .bind(cron)
        .bind(tz)
        .bind(interval_ms)
        .bind(opts.catch_up.as_str())
        .bind(i64::from(opts.max_catch_up))
        .bind(i64::from(opts.allow_overlap))
        .bind(now)
        .fetch_optional(pool)
        .await?;
        let schedule_id: i64 = match row {
            Some(r) => r.try_get(0)?,
            None => {
                // A schedule with this key exists: keep it (declaring schedules at every start
                // must not multiply them) and return its pending job.
                let id: i64 =
                    sqlx::query_scalar("SELECT id FROM steadfast_schedules WHERE key = $1")
                        .bind(opts.key.as_deref())
                        .fetch_one(pool)
                        .await?;
                let pending: Option<i64> =
                    sqlx::query_scalar("SELECT MAX(id) FROM steadfast_jobs WHERE schedule_id = $1")
                        .bind(id)
                        .fetch_one(pool)
                        .await?;
                if let Some(job) = pending {
                    return Ok(job);
                }
                id
            }
        };
        let first = recurrence
            .next_after(now)
            .ok_or_else(|| JobsError::invalid("cron", "have a fire time in the future"))?;
        self.insert(
            handler,
            payload,
            &job_opts,
            first,
            Some((schedule_id, first)),
        )
        .await
    }

    /// Stops a recurring schedule and cancels its pending run; a run in progress finishes
    /// but plans no further fire time. False when it was not active.
    pub async fn cancel_schedule(&self, schedule_id: i64) -> Result<bool, JobsError> {
        self.stop_schedule(schedule_id, false).await
    }

    /// Makes an active schedule inactive and cancels its pending run; `paused` marks it
    /// resumable (the console's pause). False when it was not active.
    pub(crate) async fn stop_schedule(
        &self,
        schedule_id: i64,
        paused: bool,
    ) -> Result<bool, JobsError> {
        // One transaction: the schedule's row lock is held until its pending jobs are
        // cancelled, so a run planning its next fire time concurrently (which share-locks the
        // row) either sees it inactive or has its job cancelled here.
        let mut tx = self.inner.store.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE steadfast_schedules SET active = 0, paused = $2 WHERE id = $1 AND active = 1",
        )
        .bind(schedule_id)
        .bind(i64::from(paused))
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE steadfast_jobs SET state = 'cancelled', finished_at = $1, updated_at = $1 \
             WHERE schedule_id = $2 AND state = 'available'",
        )
        .bind(self.now())
        .bind(schedule_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// One job: state, attempts, next run, last error (sanitized).
    pub async fn get(&self, id: JobId) -> Result<Option<Job>, JobsError> {
        self.inner.store.get(id).await
    }

    /// Jobs, newest first.
    pub async fn list(&self, state: Option<JobState>, limit: u32) -> Result<Vec<Job>, JobsError> {
        self.inner.store.list(state, limit).await
    }

    /// Cancels a job that has not started; cancelling a schedule's job stops the schedule.
    ///
    /// A job a worker of this process claimed and keeps at hand (see
    /// [`WorkerConfig::prefetch`](crate::WorkerConfig::prefetch)) has not started either: it is
    /// taken out of the buffer and cancelled. Kept by a worker of another process, it counts as
    /// started there, and this returns false.
    pub async fn cancel(&self, id: JobId) -> Result<bool, JobsError> {
        let now = self.now();
        if self.inner.store.cancel(id, now).await? {
            return Ok(true);
        }
        match self.inner.take_kept(id) {
            Some((worker, attempt)) => {
                self.inner
                    .store
                    .cancel_held(id, now, Some((&worker, attempt)))
                    .await
            }
            None => Ok(false),
        }
    }

    /// Dead letters, newest first.
    pub async fn dead(&self, limit: u32) -> Result<Vec<Job>, JobsError> {
        self.inner.store.dead(limit).await
    }

    /// Puts a dead job back, attempts reset.
    pub async fn requeue(&self, id: JobId) -> Result<bool, JobsError> {
        let ok = self.inner.store.requeue(id, self.now()).await?;
        self.inner.wake.notify_waiters();
        Ok(ok)
    }

    /// Deletes dead letters that died more than `older_than` ago.
    pub async fn purge(&self, older_than: Duration) -> Result<u64, JobsError> {
        let before = self.now().saturating_sub(duration_ms(older_than));
        self.inner.store.purge(JobState::Dead, before).await
    }

    /// Counts by state and the queue's lag.
    pub async fn stats(&self) -> Result<Stats, JobsError> {
        self.inner.store.stats(self.now()).await
    }

    /// The circuit breaker of a dependency, shared by this process's workers (for health
    /// checks, or to isolate a dependency by hand).
    pub fn breaker(&self, dependency: &str) -> steadfast::CircuitBreaker {
        self.inner.guards.breaker(dependency)
    }
}

fn check_priority(p: i32) -> Result<(), JobsError> {
    if !(-1000..=1000).contains(&p) {
        return Err(JobsError::invalid(
            "priority",
            format!("be -1000 to 1000 (got {p})"),
        ));
    }
    Ok(())
}

pub(crate) fn check_key(key: &str) -> Result<(), JobsError> {
    if key.is_empty() || key.len() > 200 {
        return Err(JobsError::invalid(
            "limit_key",
            format!("be 1 to 200 bytes (got {})", key.len()),
        ));
    }
    Ok(())
}

fn check_name(handler: &str) -> Result<(), JobsError> {
    if handler.is_empty() || handler.len() > 200 {
        return Err(JobsError::invalid(
            "handler",
            format!("be 1 to 200 bytes (got {})", handler.len()),
        ));
    }
    Ok(())
}
