//! What the inspection API answers with: plain data, serializable, no database types.

use chrono::{DateTime, Utc};

use crate::job::{Job, JobId, JobState};

/// Most rows one page holds.
pub const MAX_PAGE: u32 = 200;

/// Counts per queue and state stop here: a count of `COUNT_CAP + 1` means "more than
/// `COUNT_CAP`" (counting a million rows exactly costs a read of a million index entries).
pub const COUNT_CAP: u64 = 10_000;

/// Most queues [`Inspector::queues`](crate::inspect::Inspector::queues) lists.
pub const MAX_QUEUES: u32 = 200;

/// One queue (all jobs of a handler): its jobs per state, each counted up to [`COUNT_CAP`]
/// (`COUNT_CAP + 1` reads "more than `COUNT_CAP`").
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct QueueCounts {
    /// The handler.
    pub handler: String,
    /// Waiting (queued, scheduled or in backoff).
    pub available: u64,
    /// Claimed by a worker.
    pub running: u64,
    /// Succeeded (until purged).
    pub done: u64,
    /// Dead letters.
    pub dead: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// Paused: none of its jobs start.
    pub paused: bool,
}

impl QueueCounts {
    pub(crate) fn add(&mut self, state: JobState, n: u64) {
        match state {
            JobState::Available => self.available += n,
            JobState::Running => self.running += n,
            JobState::Done => self.done += n,
            JobState::Dead => self.dead += n,
            JobState::Cancelled => self.cancelled += n,
        }
    }
}

/// Which jobs a page lists: one state, optionally one queue, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobFilter {
    /// Only this queue (handler).
    pub handler: Option<String>,
    /// Only this state (required: every listing is served by an index on it).
    pub state: JobState,
    /// Only jobs with a smaller id (the previous page's [`JobPage::next`]).
    pub before: Option<JobId>,
    /// At most this many (capped at [`MAX_PAGE`]).
    pub limit: u32,
}

impl JobFilter {
    /// The first page of jobs in `state`, 50 a page.
    pub fn new(state: JobState) -> Self {
        Self {
            handler: None,
            state,
            before: None,
            limit: 50,
        }
    }

    /// Only this queue.
    pub fn handler(mut self, handler: impl Into<String>) -> Self {
        self.handler = Some(handler.into());
        self
    }

    /// The page after the one that ended at `next`.
    pub fn before(mut self, next: Option<JobId>) -> Self {
        self.before = next;
        self
    }

    /// Page size (capped at [`MAX_PAGE`]).
    pub fn limit(mut self, n: u32) -> Self {
        self.limit = n;
        self
    }
}

/// A page of jobs, newest first.
#[derive(Debug, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct JobPage {
    /// The jobs.
    pub jobs: Vec<Job>,
    /// Pass as [`JobFilter::before`] for the next page; `None` on the last page.
    pub next: Option<JobId>,
}

/// One job in full: the stored job and what a worker holds of it.
#[derive(Debug, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct JobDetail {
    /// The job (its last error was sanitized when stored).
    pub job: Job,
    /// The worker holding it, while running.
    pub locked_by: Option<String>,
    /// Until when that worker's lease runs, while running.
    pub lease_until: Option<DateTime<Utc>>,
    /// The backoff before its current run time, after a failed attempt.
    pub last_delay_ms: u64,
    /// Its next attempt: when an available job becomes due.
    pub next_run: Option<DateTime<Utc>>,
}

/// A recurring schedule.
#[derive(Debug, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct ScheduleInfo {
    /// Its id.
    pub id: i64,
    /// The key it was declared with.
    pub key: Option<String>,
    /// The handler its runs go to.
    pub handler: String,
    /// Its cron expression, if cron.
    pub cron: Option<String>,
    /// Its time zone, if named.
    pub tz: Option<String>,
    /// Its interval, if an interval.
    pub interval_ms: Option<i64>,
    /// Active, paused or cancelled.
    pub status: ScheduleStatus,
    /// Its pending run's time, if one is queued.
    pub pending_at: Option<DateTime<Utc>>,
    /// The next fire times from now (up to three; none when not active or unparsable).
    pub next_fires: Vec<DateTime<Utc>>,
}

/// Whether a schedule plans fire times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ScheduleStatus {
    /// Plans fire times.
    Active,
    /// Stopped from the console; resumable.
    Paused,
    /// Stopped for good (by `cancel_schedule` or a cancelled run).
    Cancelled,
}

/// A page of schedules, by id.
#[derive(Debug, Clone, serde::Serialize)]
#[non_exhaustive]
pub struct SchedulePage {
    /// The schedules.
    pub schedules: Vec<ScheduleInfo>,
    /// Pass as the `after` of the next page; `None` on the last page.
    pub next: Option<i64>,
}

/// Upper bounds (ms) of the start-latency histogram's buckets; the last bucket is unbounded.
pub const LATENCY_BOUNDS_MS: [i64; 11] = [
    10, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000,
];

/// One minute of finished jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Minute {
    /// The minute's start.
    pub at: DateTime<Utc>,
    /// Jobs that succeeded in it.
    pub done: u64,
    /// Jobs that became dead letters in it.
    pub dead: u64,
    /// Start latency (due → first attempt) of the jobs that finished in it on their first
    /// attempt, as counts per bucket of [`LATENCY_BOUNDS_MS`] (plus one for the rest).
    pub latency: [u64; 12],
    /// False for a minute not read yet: a new inspector reads the hour back a few minutes
    /// per call, so no single call reads an hour of finished jobs.
    pub read: bool,
}

impl Minute {
    /// The upper bound (ms) of the bucket holding quantile `q` (0–1) of the minute's start
    /// latencies: "at most this long"; `None` with no samples, `i64::MAX` past the last bound.
    ///
    /// ```
    /// use steadfast_jobs::inspect::Minute;
    /// let mut m = Minute::default();
    /// m.latency[0] = 90; // 90 jobs started within 10 ms
    /// m.latency[5] = 10; // 10 within 1 s
    /// assert_eq!(m.quantile_ms(0.5), Some(10));
    /// assert_eq!(m.quantile_ms(0.95), Some(1_000));
    /// ```
    pub fn quantile_ms(&self, q: f64) -> Option<i64> {
        let total: u64 = self.latency.iter().sum();
        if total == 0 {
            return None;
        }
        let want = ((total as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.latency.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Some(LATENCY_BOUNDS_MS.get(i).copied().unwrap_or(i64::MAX));
            }
        }
        Some(i64::MAX)
    }
}
