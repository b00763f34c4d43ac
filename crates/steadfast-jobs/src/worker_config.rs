//! How a worker runs: [`WorkerConfig`], its defaults and their limits.

use std::time::Duration;

use crate::JobsError;

/// How a worker runs.
///
/// ```
/// use std::time::Duration;
/// use steadfast_jobs::WorkerConfig;
/// let c = WorkerConfig::new().concurrency(16).lease(Duration::from_secs(10));
/// assert_eq!(c.concurrency, 16);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerConfig {
    /// Jobs run at once (default 8).
    pub concurrency: usize,
    /// How long a claim holds without renewal (default 30 s); renewed every third of it.
    pub lease: Duration,
    /// The longest an idle worker waits before looking again (default 1 s); PostgreSQL
    /// workers are also woken by `NOTIFY`.
    pub poll_interval: Duration,
    /// How long shutdown waits for running handlers before cancelling them (default 10 s).
    pub grace: Duration,
    /// When the dependency's concurrency limit is full, the job waits this long, without
    /// spending an attempt (default 250 ms).
    pub busy_delay: Duration,
    /// Jobs claimed beyond the free slots, kept at hand so the next one starts the moment a
    /// slot frees (default 32; 0 claims only for free slots). The buffer is refilled when half
    /// empty: one claim per half-buffer instead of one per job, which is what makes many short
    /// jobs fast (with 0, a worker of 4 or 16 slots ran 3–10× fewer no-op jobs per second on
    /// PostgreSQL, see BENCHMARKS.md). A kept job counts as running for per-key limits and for other
    /// processes (another process's `cancel` returns false for it; this process's cancels it);
    /// one that waits half its lease is given back unrun, and shutdown gives back the rest.
    pub prefetch: usize,
    /// The most jobs kept at hand while jobs start fast (default 512): the buffer holds about
    /// 100 ms of work at the rate jobs have been starting, never less than `prefetch`, so a
    /// backlog of short jobs is claimed hundreds per statement (graphile-worker's local queue
    /// keeps 500) while a worker of slow jobs keeps only `prefetch`. At or below `prefetch`,
    /// the buffer is `prefetch` whatever the rate; with `prefetch` 0 nothing is kept.
    pub prefetch_max: usize,
    /// Keep a successful job's row, as `done` (default `true`). `false` deletes it instead,
    /// graphile-worker's way: marking a row done writes a new version of it and its index
    /// entries, deleting one does not (256 rows: 2.8–15 ms against 0.5 ms on the loaded VM of
    /// BENCHMARKS.md), so a backlog of short jobs burns down faster. The job is then gone:
    /// [`Jobs::get`](crate::Jobs::get) returns `None` for it, `stats().done`, `jobs list` and
    /// the console no longer count or show it. Failed, dead and cancelled jobs, and the runs
    /// of recurring schedules (whose fire times must stay unique), are kept either way.
    pub keep_done: bool,
    /// How often the running loop counts the store's jobs by state into the
    /// `steadfast_jobs_stored{state}` gauge (default 15 s; `None` never: the count reads every
    /// row's state, which a store of millions of finished jobs may not want every few seconds).
    pub stats_interval: Option<Duration>,
    /// This worker's name in `locked_by` (default: host-independent random id with the pid).
    pub id: Option<String>,
    /// Seed of the jitter's random source (random when `None`).
    pub seed: Option<u64>,
}

/// Measured: on PostgreSQL, 8 kept jobs gave a third of 32's throughput with 4 and 16 slots,
/// 64 no more than 32 (BENCHMARKS.md).
const DEFAULT_PREFETCH: usize = 32;

/// Measured (issue 35): claims of up to ~500 rows let a worker of no-op jobs keep up with a
/// bulk enqueue; graphile-worker's performance preset keeps 500 too.
const DEFAULT_PREFETCH_MAX: usize = 512;

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            concurrency: 8,
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            grace: Duration::from_secs(10),
            busy_delay: Duration::from_millis(250),
            prefetch: DEFAULT_PREFETCH,
            prefetch_max: DEFAULT_PREFETCH_MAX,
            keep_done: true,
            stats_interval: Some(Duration::from_secs(15)),
            id: None,
            seed: None,
        }
    }
}

impl WorkerConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the concurrency.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }
    /// Sets how many claimed jobs are kept at hand beyond the free slots.
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = n;
        self
    }
    /// Sets the most jobs kept at hand while jobs start fast (see the `prefetch_max`
    /// field).
    pub fn prefetch_max(mut self, n: usize) -> Self {
        self.prefetch_max = n;
        self
    }
    /// Sets whether a successful job's row is kept as `done` (see the `keep_done` field).
    pub fn keep_done(mut self, keep: bool) -> Self {
        self.keep_done = keep;
        self
    }
    /// Sets the lease.
    pub fn lease(mut self, d: Duration) -> Self {
        self.lease = d;
        self
    }
    /// Sets the poll interval.
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.poll_interval = d;
        self
    }
    /// Sets the shutdown grace period.
    pub fn grace(mut self, d: Duration) -> Self {
        self.grace = d;
        self
    }
    /// Sets how often the store's jobs are counted into the `steadfast_jobs_stored` gauge.
    pub fn stats_interval(mut self, every: Option<Duration>) -> Self {
        self.stats_interval = every;
        self
    }
    /// Sets the worker's id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
    /// Seeds the jitter.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    pub(crate) fn validate(&self) -> Result<(), JobsError> {
        if self.concurrency == 0 || self.concurrency > 10_000 {
            return Err(JobsError::invalid(
                "concurrency",
                format!("be 1 to 10000 (got {})", self.concurrency),
            ));
        }
        if self.lease < Duration::from_millis(300) {
            return Err(JobsError::invalid(
                "lease",
                format!("be >= 300ms (got {:?})", self.lease),
            ));
        }
        if self.prefetch > 10_000 {
            return Err(JobsError::invalid(
                "prefetch",
                format!("be 0 to 10000 (got {})", self.prefetch),
            ));
        }
        if self.prefetch_max > 10_000 {
            return Err(JobsError::invalid(
                "prefetch_max",
                format!("be 0 to 10000 (got {})", self.prefetch_max),
            ));
        }
        if self
            .stats_interval
            .is_some_and(|d| d < Duration::from_secs(1))
        {
            return Err(JobsError::invalid(
                "stats_interval",
                format!("be >= 1s or None (got {:?})", self.stats_interval),
            ));
        }
        if self.poll_interval.is_zero() {
            return Err(JobsError::invalid("poll_interval", "be > 0"));
        }
        Ok(())
    }
}
