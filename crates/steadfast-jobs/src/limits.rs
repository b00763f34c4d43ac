//! Per-key limits and pauses, stored so that every worker process sharing the store obeys
//! them (the claim in `claim.rs` enforces them).
//!
//! A key names what a job's calls land on — a tenant, a provider, a tool. Limits live in the
//! store rather than in each worker's memory because the point is the total across processes:
//! "at most 4 calls to this provider at once" must hold however many workers run.

use std::time::Duration;

use sqlx::Row;

use crate::clock::duration_ms;
use crate::jobs::check_key;
use crate::{Jobs, JobsError};

/// Limits of one key: at most `max_running` of its jobs at once, and at most `rate` starts
/// per `per` (a burst of `rate`, then evenly spaced).
///
/// ```
/// use std::time::Duration;
/// use steadfast_jobs::KeyLimits;
/// let l = KeyLimits::new().max_running(4).rate(10, Duration::from_secs(1));
/// assert_eq!(l.max_running, Some(4));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct KeyLimits {
    /// Most of the key's jobs running at once, across all workers.
    pub max_running: Option<u32>,
    /// Most starts per window: `(starts, window)`.
    #[serde(serialize_with = "rate_json")]
    pub rate: Option<(u32, Duration)>,
}

impl KeyLimits {
    /// No limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `n` running at once.
    pub fn max_running(mut self, n: u32) -> Self {
        self.max_running = Some(n);
        self
    }

    /// At most `starts` per `window`.
    pub fn rate(mut self, starts: u32, window: Duration) -> Self {
        self.rate = Some((starts, window));
        self
    }

    fn validate(&self) -> Result<(), JobsError> {
        if self.max_running == Some(0) {
            return Err(JobsError::invalid(
                "max_running",
                "be >= 1 (got 0; pause the key to stop it)",
            ));
        }
        if let Some((starts, window)) = self.rate {
            let ms = duration_ms(window);
            if starts == 0 {
                return Err(JobsError::invalid("rate", "allow >= 1 start (got 0)"));
            }
            if ms < i64::from(starts) || window > Duration::from_secs(86_400 * 30) {
                return Err(JobsError::invalid(
                    "rate",
                    format!(
                        "have a window of 1ms per start to 30 days (got {starts} per {window:?})"
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn rate_json<S: serde::Serializer>(r: &Option<(u32, Duration)>, s: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    r.map(|(starts, w)| serde_json::json!({ "starts": starts, "window_ms": w.as_millis() as u64 }))
        .serialize(s)
}

/// A key's limits and whether it is paused, as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct KeyStatus {
    /// The key.
    pub key: String,
    /// Its limits.
    pub limits: KeyLimits,
    /// Paused: none of its jobs start.
    pub paused: bool,
    /// Its jobs running now.
    pub running: u64,
    /// Its jobs waiting (queued, scheduled or in backoff).
    pub waiting: u64,
}

/// A paused queue (all jobs of one handler).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct QueueStatus {
    /// The handler.
    pub handler: String,
    /// Paused: none of its jobs start.
    pub paused: bool,
}

impl Jobs {
    /// Sets the limits of `key` for every worker sharing the store (replacing earlier ones).
    /// Jobs waiting for room are not claimed, so they spend no attempt; other keys' jobs are
    /// not held up behind them.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), steadfast_jobs::JobsError> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
    /// use std::time::Duration;
    /// use steadfast_jobs::{Jobs, KeyLimits};
    /// let jobs = Jobs::builder().connect(&url).await?;
    /// jobs.set_limits("openai", KeyLimits::new().max_running(4).rate(60, Duration::from_secs(60))).await?;
    /// jobs.pause_key("tenant-42").await?;
    /// let keys = jobs.keys().await?;
    /// assert_eq!(keys.len(), 2);
    /// assert!(keys.iter().any(|k| k.key == "tenant-42" && k.paused));
    /// # Ok(()) }
    /// ```
    pub async fn set_limits(&self, key: &str, limits: KeyLimits) -> Result<(), JobsError> {
        check_key(key)?;
        limits.validate()?;
        let (rate, window) = match limits.rate {
            Some((n, w)) => (Some(i64::from(n)), Some(duration_ms(w))),
            None => (None, None),
        };
        sqlx::query(
            "INSERT INTO steadfast_keys (key, max_running, rate, window_ms, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO UPDATE \
             SET max_running = $2, rate = $3, window_ms = $4",
        )
        .bind(key)
        .bind(limits.max_running.map(i64::from))
        .bind(rate)
        .bind(window)
        .bind(self.now())
        .execute(&self.inner.store.pool)
        .await?;
        self.inner.store.keys_seen.mark();
        self.inner.wake.notify_waiters();
        Ok(())
    }

    /// Removes the limits of `key` (a paused key stays paused).
    pub async fn remove_limits(&self, key: &str) -> Result<(), JobsError> {
        sqlx::query(
            "UPDATE steadfast_keys SET max_running = NULL, rate = NULL, window_ms = NULL WHERE key = $1",
        )
        .bind(key)
        .execute(&self.inner.store.pool)
        .await?;
        self.forget_idle_key(key).await
    }

    /// Pauses `key`: none of its jobs start (running ones finish) until it is resumed.
    pub async fn pause_key(&self, key: &str) -> Result<(), JobsError> {
        check_key(key)?;
        sqlx::query(
            "INSERT INTO steadfast_keys (key, paused, updated_at) VALUES ($1, 1, $2) \
             ON CONFLICT (key) DO UPDATE SET paused = 1",
        )
        .bind(key)
        .bind(self.now())
        .execute(&self.inner.store.pool)
        .await?;
        self.inner.store.keys_seen.mark();
        Ok(())
    }

    /// Resumes `key`: its waiting jobs start again, within its limits.
    pub async fn resume_key(&self, key: &str) -> Result<bool, JobsError> {
        let done =
            sqlx::query("UPDATE steadfast_keys SET paused = 0 WHERE key = $1 AND paused = 1")
                .bind(key)
                .execute(&self.inner.store.pool)
                .await?;
        self.forget_idle_key(key).await?;
        self.inner.store.keys_seen.mark();
        self.inner.wake.notify_waiters();
        self.inner.store.notify().await?;
        Ok(done.rows_affected() == 1)
    }

    /// A key with neither limits nor a pause needs no row: its jobs go back to the fast path.
    async fn forget_idle_key(&self, key: &str) -> Result<(), JobsError> {
        sqlx::query(
            "DELETE FROM steadfast_keys WHERE key = $1 AND paused = 0 AND max_running IS NULL AND rate IS NULL",
        )
        .bind(key)
        .execute(&self.inner.store.pool)
        .await?;
        Ok(())
    }

    /// Pauses a queue: no job of `handler` starts (running ones finish) until it is resumed.
    pub async fn pause_queue(&self, handler: &str) -> Result<(), JobsError> {
        if handler.is_empty() || handler.len() > 200 {
            return Err(JobsError::invalid(
                "handler",
                format!("be 1 to 200 bytes (got {})", handler.len()),
            ));
        }
        sqlx::query(
            "INSERT INTO steadfast_queues (handler, paused, updated_at) VALUES ($1, 1, $2) \
             ON CONFLICT (handler) DO UPDATE SET paused = 1, updated_at = $2",
        )
        .bind(handler)
        .bind(self.now())
        .execute(&self.inner.store.pool)
        .await?;
        Ok(())
    }

    /// Resumes a queue. False when it was not paused.
    pub async fn resume_queue(&self, handler: &str) -> Result<bool, JobsError> {
        let done = sqlx::query("DELETE FROM steadfast_queues WHERE handler = $1")
            .bind(handler)
            .execute(&self.inner.store.pool)
            .await?;
        self.inner.wake.notify_waiters();
        self.inner.store.notify().await?;
        Ok(done.rows_affected() == 1)
    }

    /// Every key with limits or a pause, with its running and waiting jobs.
    pub async fn keys(&self) -> Result<Vec<KeyStatus>, JobsError> {
        let rows = sqlx::query(
            "SELECT k.key, k.max_running, k.rate, k.window_ms, k.paused, \
             (SELECT COUNT(*) FROM steadfast_jobs j WHERE j.limit_key = k.key AND j.state = 'running'), \
             (SELECT COUNT(*) FROM steadfast_jobs j WHERE j.limit_key = k.key AND j.state = 'available') \
             FROM steadfast_keys k ORDER BY k.key LIMIT 10000",
        )
        .fetch_all(&self.inner.store.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let rate = match (
                    r.try_get::<Option<i64>, _>(2)?,
                    r.try_get::<Option<i64>, _>(3)?,
                ) {
                    (Some(n), Some(ms)) => Some((
                        u32::try_from(n).unwrap_or(u32::MAX),
                        Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
                    )),
                    _ => None,
                };
                Ok(KeyStatus {
                    key: r.try_get(0)?,
                    limits: KeyLimits {
                        max_running: r
                            .try_get::<Option<i64>, _>(1)?
                            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                        rate,
                    },
                    paused: r.try_get::<i64, _>(4)? != 0,
                    running: u64::try_from(r.try_get::<i64, _>(5)?).unwrap_or(0),
                    waiting: u64::try_from(r.try_get::<i64, _>(6)?).unwrap_or(0),
                })
            })
            .collect()
    }

    /// Paused queues.
    pub async fn queues(&self) -> Result<Vec<QueueStatus>, JobsError> {
        let rows = sqlx::query(
            "SELECT handler, paused FROM steadfast_queues ORDER BY handler LIMIT 10000",
        )
        .fetch_all(&self.inner.store.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(QueueStatus {
                    handler: r.try_get(0)?,
                    paused: r.try_get::<i64, _>(1)? != 0,
                })
            })
            .collect()
    }
}
