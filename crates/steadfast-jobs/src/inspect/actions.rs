//! What an operator does from a console: retry or discard dead letters (one, or a bounded
//! batch), pause, resume or cancel a schedule, pause or resume a key. Each reuses the store's
//! own operation where there is one ([`Jobs::requeue`](crate::Jobs::requeue), [`Jobs::cancel_schedule`](crate::Jobs::cancel_schedule),
//! [`Jobs::pause_key`](crate::Jobs::pause_key), [`Jobs::resume_key`](crate::Jobs::resume_key)).

use std::borrow::Cow;

use sqlx::Row;

use crate::inspect::Inspector;
use crate::job::JobId;
use crate::recurrence::Recurrence;
use crate::store::NewJob;
use crate::{JobOptions, JobsError};

/// Most dead letters one bulk retry touches: a click must not become an unbounded
/// transaction on a store with millions of dead letters (click again for the next batch).
pub const BULK_MAX: u32 = 1_000;

/// What a bulk retry did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct BulkOutcome {
    /// Dead letters put back in their queue.
    pub retried: u64,
    /// Dead letters left dead: another queued job holds their `unique_key`.
    pub skipped: u64,
    /// More dead letters remain (the batch was full).
    pub more: bool,
}

impl Inspector {
    /// Puts a dead (or cancelled) job back in its queue with its attempts reset. False when it
    /// was neither (or does not exist).
    pub async fn retry(&self, id: JobId) -> Result<bool, JobsError> {
        self.jobs.requeue(id).await
    }

    /// Retries up to [`BULK_MAX`] dead letters (of one queue, or all), newest first, one at
    /// a time: a dead letter whose `unique_key` a queued job holds stays dead and is counted
    /// as skipped rather than failing the batch.
    pub async fn retry_dead(&self, handler: Option<&str>) -> Result<BulkOutcome, JobsError> {
        let mut sql = String::from("SELECT id FROM steadfast_jobs WHERE state = 'dead'");
        if handler.is_some() {
            sql.push_str(" AND handler = $2");
        }
        sql.push_str(" ORDER BY id DESC LIMIT $1");
        let mut q = sqlx::query_scalar::<_, i64>(&sql).bind(i64::from(BULK_MAX) + 1);
        if let Some(h) = handler {
            q = q.bind(h);
        }
        let mut ids = q.fetch_all(self.jobs.store().pool()).await?;
        let more = ids.len() > BULK_MAX as usize;
        ids.truncate(BULK_MAX as usize);
        self.retry_ids(&ids, more).await
    }

    /// Retries the given dead letters (at most [`BULK_MAX`] are taken).
    pub async fn retry_many(&self, ids: &[JobId]) -> Result<BulkOutcome, JobsError> {
        let take = ids.len().min(BULK_MAX as usize);
        self.retry_ids(&ids[..take], ids.len() > take).await
    }

    async fn retry_ids(&self, ids: &[JobId], more: bool) -> Result<BulkOutcome, JobsError> {
        let mut out = BulkOutcome {
            more,
            ..Default::default()
        };
        for &id in ids {
            match self.jobs.requeue(id).await {
                Ok(true) => out.retried += 1,
                Ok(false) => {}
                Err(JobsError::Invalid { .. }) => out.skipped += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Deletes a dead letter. False when the job is not dead (or does not exist).
    pub async fn discard(&self, id: JobId) -> Result<bool, JobsError> {
        let done = sqlx::query("DELETE FROM steadfast_jobs WHERE id = $1 AND state = 'dead'")
            .bind(id)
            .execute(self.jobs.store().pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stops an active schedule so that it can be resumed: its pending run is cancelled and no
    /// fire time is planned until [`resume_schedule`](Self::resume_schedule). A run in
    /// progress finishes. False when it was not active.
    pub async fn pause_schedule(&self, id: i64) -> Result<bool, JobsError> {
        self.jobs.stop_schedule(id, true).await
    }

    /// Resumes a paused schedule from now: its next fire time after now is queued (fire times
    /// missed while paused are not caught up). False when it was not paused.
    pub async fn resume_schedule(&self, id: i64) -> Result<bool, JobsError> {
        let pool = self.jobs.store().pool();
        let row = sqlx::query(
            "UPDATE steadfast_schedules SET active = 1, paused = 0 WHERE id = $1 AND paused = 1 \
             RETURNING handler, payload, policy, cron, tz, interval_ms",
        )
        .bind(id)
        .fetch_optional(pool)
        .await?;
        let Some(r) = row else { return Ok(false) };
        let handler: String = r.try_get(0)?;
        let payload: String = r.try_get(1)?;
        let policy: String = r.try_get(2)?;
        let recurrence = match (r.try_get::<Option<String>, _>(3)?, r.try_get(5)?) {
            (Some(c), _) => Recurrence::cron(&c, r.try_get::<Option<String>, _>(4)?.as_deref())?,
            (None, Some(i)) => Recurrence::every(i)?,
            (None, None) => return Ok(true),
        };
        let now = self.now_ms();
        let Some(next) = recurrence.next_after(now) else {
            return Ok(true);
        };
        let (priority, head_start_ms, limit_key) =
            self.jobs.placement(&handler, &JobOptions::new())?;
        let new = NewJob {
            handler: &handler,
            payload: Cow::Borrowed(&payload),
            policy: Cow::Borrowed(&policy),
            run_at: next,
            unique_key: None,
            ordering_key: None,
            schedule_id: Some(id),
            fire_at: Some(next),
            priority,
            head_start_ms,
            limit_key: limit_key.as_deref(),
            trace: None,
        };
        self.jobs.store().insert_fire(&new, now).await?;
        Ok(true)
    }

    /// Stops a schedule for good (see [`Jobs::cancel_schedule`](crate::Jobs::cancel_schedule)); a paused one too. False
    /// when it was neither active nor paused.
    pub async fn cancel_schedule(&self, id: i64) -> Result<bool, JobsError> {
        let paused =
            sqlx::query("UPDATE steadfast_schedules SET paused = 0 WHERE id = $1 AND paused = 1")
                .bind(id)
                .execute(self.jobs.store().pool())
                .await?
                .rows_affected()
                == 1;
        Ok(self.jobs.cancel_schedule(id).await? || paused)
    }

    /// Pauses a key (see [`Jobs::pause_key`](crate::Jobs::pause_key)).
    pub async fn pause_key(&self, key: &str) -> Result<(), JobsError> {
        self.jobs.pause_key(key).await
    }

    /// Resumes a key (see [`Jobs::resume_key`](crate::Jobs::resume_key)). False when it was not paused.
    pub async fn resume_key(&self, key: &str) -> Result<bool, JobsError> {
        self.jobs.resume_key(key).await
    }
}
