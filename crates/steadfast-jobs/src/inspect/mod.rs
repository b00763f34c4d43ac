//! A read-mostly view of a job store for consoles and tools: queues with their counts, pages
//! of jobs, one job in full, dead letters, schedules with their next fire times, per-key
//! limits, and jobs finished per minute with their start latency — on SQLite and PostgreSQL
//! alike — plus the few actions an operator takes from a console (retry, discard, pause).
//!
//! Every query is bounded: lists are pages (keyset pagination on the id, at most
//! [`MAX_PAGE`] rows), counts per queue and state stop at [`COUNT_CAP`] (an index range of
//! at most that many entries on `(handler, state, id)`), and the per-minute history reads
//! only the minutes it has not cached yet, a few at a time.
//!
//! ```
//! use steadfast_jobs::{JobOptions, JobState, Jobs};
//! use steadfast_jobs::inspect::{Inspector, JobFilter};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), steadfast_jobs::JobsError> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
//! let jobs = Jobs::builder().connect(&url).await?;
//! jobs.queue("email", &"ada@example.com", JobOptions::new()).await?;
//! let inspector = Inspector::new(jobs);
//! let queues = inspector.queues().await?;
//! assert_eq!((queues[0].handler.as_str(), queues[0].available), ("email", 1));
//! let page = inspector.page(&JobFilter::new(JobState::Available).handler("email")).await?;
//! assert_eq!(page.jobs.len(), 1);
//! assert_eq!(page.next, None);
//! # Ok(()) }
//! ```

mod actions;
mod minutes;
mod types;

use std::collections::BTreeMap;
use std::sync::Arc;

use sqlx::Row;
use tokio::sync::Mutex;

use crate::job::{JobId, JobState, opt_time};
use crate::recurrence::Recurrence;
use crate::row::{JOB_COLS, JobRow};
use crate::{Jobs, JobsError, KeyStatus};
pub use actions::{BULK_MAX, BulkOutcome};
use minutes::MinuteCache;
pub use types::{
    COUNT_CAP, JobDetail, JobFilter, JobPage, LATENCY_BOUNDS_MS, MAX_PAGE, MAX_QUEUES, Minute,
    QueueCounts, ScheduleInfo, SchedulePage, ScheduleStatus,
};

const STATES: [JobState; 5] = [
    JobState::Available,
    JobState::Running,
    JobState::Done,
    JobState::Dead,
    JobState::Cancelled,
];

/// Inspects (and repairs) the store of a [`Jobs`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct Inspector {
    jobs: Jobs,
    minutes: Arc<Mutex<MinuteCache>>,
}

impl Inspector {
    /// Inspects the store `jobs` is connected to (handlers need not be registered).
    pub fn new(jobs: Jobs) -> Self {
        Self {
            jobs,
            minutes: Default::default(),
        }
    }

    /// The [`Jobs`] handle.
    pub fn handle(&self) -> &Jobs {
        &self.jobs
    }

    /// Now, on the handle's clock (ms).
    pub fn now_ms(&self) -> i64 {
        self.jobs.now()
    }

    /// Every queue that has jobs or is paused (the first [`MAX_QUEUES`] by name), with its
    /// jobs per state counted up to [`COUNT_CAP`]: a count above it reads `COUNT_CAP + 1`
    /// ("more than"), so the cost is bounded however many jobs a queue holds.
    pub async fn queues(&self) -> Result<Vec<QueueCounts>, JobsError> {
        let pool = self.jobs.store().pool();
        // The queues' names, one index probe each (a loose index scan), not a read of every row.
        let names: Vec<String> = sqlx::query_scalar(
            "WITH RECURSIVE h(name) AS ( \
               SELECT MIN(handler) FROM steadfast_jobs \
               UNION ALL \
               SELECT (SELECT MIN(j.handler) FROM steadfast_jobs j WHERE j.handler > h.name) FROM h \
               WHERE h.name IS NOT NULL \
             ) SELECT name FROM h WHERE name IS NOT NULL LIMIT $1",
        )
        .bind(i64::from(MAX_QUEUES))
        .fetch_all(pool)
        .await?;
        let mut by_name: BTreeMap<String, QueueCounts> = BTreeMap::new();
        for handler in names {
            let mut q = QueueCounts {
                handler: handler.clone(),
                ..Default::default()
            };
            for state in STATES {
                let n: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM (SELECT 1 FROM steadfast_jobs WHERE handler = $1 AND state = $2 LIMIT $3) c",
                )
                .bind(&handler)
                .bind(state.as_str())
                .bind(i64::try_from(COUNT_CAP + 1).unwrap_or(i64::MAX))
                .fetch_one(pool)
                .await?;
                q.add(state, u64::try_from(n).unwrap_or(0));
            }
            by_name.insert(handler, q);
        }
        for q in self.jobs.queues().await? {
            let entry = by_name
                .entry(q.handler.clone())
                .or_insert_with(|| QueueCounts {
                    handler: q.handler.clone(),
                    ..Default::default()
                });
            entry.paused = q.paused;
        }
        Ok(by_name.into_values().collect())
    }

    /// A page of jobs, newest first.
    pub async fn page(&self, filter: &JobFilter) -> Result<JobPage, JobsError> {
        let limit = filter.limit.clamp(1, MAX_PAGE);
        let mut sql = format!("SELECT {JOB_COLS} FROM steadfast_jobs WHERE state = $1 AND id < $2");
        if filter.handler.is_some() {
            sql.push_str(" AND handler = $4");
        }
        sql.push_str(" ORDER BY id DESC LIMIT $3");
        let mut q = sqlx::query(&sql)
            .bind(filter.state.as_str())
            .bind(filter.before.unwrap_or(i64::MAX))
            // One more than asked: whether there is a next page, without counting.
            .bind(i64::from(limit) + 1);
        if let Some(h) = &filter.handler {
            q = q.bind(h.as_str());
        }
        let rows = q.fetch_all(self.jobs.store().pool()).await?;
        let mut jobs = rows
            .iter()
            .map(|r| JobRow::from_row(r).map(|j| j.to_job()))
            .collect::<Result<Vec<_>, _>>()?;
        let next = if jobs.len() > limit as usize {
            jobs.truncate(limit as usize);
            jobs.last().map(|j| j.id)
        } else {
            None
        };
        Ok(JobPage { jobs, next })
    }

    /// One job in full, or `None`.
    pub async fn job(&self, id: JobId) -> Result<Option<JobDetail>, JobsError> {
        let sql = format!(
            "SELECT {JOB_COLS}, lease_until AS lease_until_ms FROM steadfast_jobs WHERE id = $1"
        );
        let Some(r) = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(self.jobs.store().pool())
            .await?
        else {
            return Ok(None);
        };
        let row = JobRow::from_row(&r)?;
        let job = row.to_job();
        let running = job.state == JobState::Running;
        let next_run = (job.state == JobState::Available).then_some(job.run_at);
        Ok(Some(JobDetail {
            locked_by: if running {
                r.try_get("locked_by")?
            } else {
                None
            },
            lease_until: if running {
                opt_time(r.try_get("lease_until_ms")?)
            } else {
                None
            },
            last_delay_ms: u64::try_from(row.last_delay_ms).unwrap_or(0),
            next_run,
            job,
        }))
    }

    /// A page of recurring schedules by id, starting after `after`, with their pending run
    /// and next fire times.
    pub async fn schedules(
        &self,
        after: Option<i64>,
        limit: u32,
    ) -> Result<SchedulePage, JobsError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let rows = sqlx::query(
            "SELECT s.id, s.key, s.handler, s.cron, s.tz, s.interval_ms, s.active, s.paused, \
             (SELECT MIN(j.run_at) FROM steadfast_jobs j WHERE j.schedule_id = s.id AND j.state = 'available') \
             FROM steadfast_schedules s WHERE s.id > $1 ORDER BY s.id LIMIT $2",
        )
        .bind(after.unwrap_or(i64::MIN))
        .bind(i64::from(limit) + 1)
        .fetch_all(self.jobs.store().pool())
        .await?;
        let now = self.now_ms();
        let mut schedules = Vec::with_capacity(rows.len());
        for r in rows.iter().take(limit as usize) {
            let cron: Option<String> = r.try_get(3)?;
            let tz: Option<String> = r.try_get(4)?;
            let interval_ms: Option<i64> = r.try_get(5)?;
            let status = match (r.try_get::<i64, _>(6)?, r.try_get::<i64, _>(7)?) {
                (0, 0) => ScheduleStatus::Cancelled,
                (0, _) => ScheduleStatus::Paused,
                _ => ScheduleStatus::Active,
            };
            let pending: Option<i64> = r.try_get(8)?;
            let next_fires = if status == ScheduleStatus::Active {
                next_fires(cron.as_deref(), tz.as_deref(), interval_ms, pending, now, 3)
            } else {
                Vec::new()
            };
            schedules.push(ScheduleInfo {
                id: r.try_get(0)?,
                key: r.try_get(1)?,
                handler: r.try_get(2)?,
                cron,
                tz,
                interval_ms,
                status,
                pending_at: opt_time(pending),
                next_fires,
            });
        }
        let next = if rows.len() > limit as usize {
            schedules.last().map(|s| s.id)
        } else {
            None
        };
        Ok(SchedulePage { schedules, next })
    }

    /// Every key with limits or a pause: running vs its most, its rate, paused or not.
    pub async fn keys(&self) -> Result<Vec<KeyStatus>, JobsError> {
        self.jobs.keys().await
    }

    /// Jobs finished per minute and their start latency, the last `minutes` minutes up to now
    /// (at most 24 hours), oldest first.
    pub async fn minutes(&self, minutes: u32) -> Result<Vec<Minute>, JobsError> {
        let minutes = i64::from(minutes.clamp(1, 24 * 60));
        let now = self.now_ms();
        self.minutes
            .lock()
            .await
            .last(self.jobs.store(), now, minutes)
            .await
    }
}

/// Up to `n` fire times of a schedule: its pending one, then those that follow it (or those
/// after `now` when none is pending).
fn next_fires(
    cron: Option<&str>,
    tz: Option<&str>,
    interval_ms: Option<i64>,
    pending: Option<i64>,
    now: i64,
    n: usize,
) -> Vec<chrono::DateTime<chrono::Utc>> {
    let recurrence = match (cron, interval_ms) {
        (Some(c), _) => Recurrence::cron(c, tz),
        (None, Some(i)) => Recurrence::every(i),
        (None, None) => return Vec::new(),
    };
    let Ok(recurrence) = recurrence else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(n);
    let mut at = now;
    if let Some(p) = pending {
        out.push(crate::clock::from_ms(p));
        at = p;
    }
    while out.len() < n {
        match recurrence.next_after(at) {
            Some(next) => {
                out.push(crate::clock::from_ms(next));
                at = next;
            }
            None => break,
        }
    }
    out
}
