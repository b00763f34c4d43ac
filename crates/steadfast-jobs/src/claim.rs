//! Claims: which due jobs a worker takes, and how per-key limits stay exact across processes.
//!
//! Most jobs name no limited key, and their claim stays one statement (`FOR UPDATE SKIP
//! LOCKED` on PostgreSQL, River's and graphile-worker's shape): it takes due jobs in priority
//! order, skipping paused queues, ordering keys whose head is still queued, and every job
//! whose key has a row in `steadfast_keys` (limited or paused) — so the fast path can never
//! run a limited key's job.
//!
//! Those are claimed by the second path, in a transaction: lock the eligible key rows (`SKIP
//! LOCKED`: a key another worker is claiming for is skipped, never waited on), count each
//! key's running jobs *after* the lock (so every earlier claim of that key is visible), work
//! out each key's room (concurrency left, and starts its rate allows now), then claim at most
//! that many of each key's due jobs, oldest first, and advance the keys' rate state. A key at
//! its limit is not eligible, so its backlog never blocks another key's jobs, and a job
//! waiting for room is never claimed, so it spends no attempt. On SQLite the transaction is
//! `BEGIN IMMEDIATE`: the database's one writer lock does what the row locks do.
//!
//! Rates are GCRA (one timestamp per key, the "theoretical arrival time"): at most `rate`
//! starts in a burst, then one every `window / rate`; over any span `T` at most
//! `rate × (1 + T / window)` start, within one window's worth of the nominal rate.
//!
//! Keys are taken least recently served first, so with more eligible keys than one claim
//! visits, each gets its turn.

use std::sync::atomic::Ordering;

use sqlx::Row;

use crate::JobsError;
use crate::row::{JOB_COLS, JobRow};
use crate::store::{Backend, Store};

/// Most keys one limited claim visits.
const KEYS_PER_CLAIM: i64 = 64;

/// How long a "no key has limits" answer is trusted before asking the database again. Only
/// the limited path's *frequency* depends on it: the fast path excludes limited keys by
/// itself, so a stale answer can delay a limited key's jobs by this long, never overrun it.
const KEYS_CHECK_MS: u64 = 1000;

/// One limited key's row, locked.
struct KeyRoom {
    key: String,
    room: i64,
    /// The key's new GCRA time per start admitted (index = starts - 1).
    tats: Vec<i64>,
}

/// Rate state: `rate` starts per `window_ms`, the last `tat`; how many of `want` may start at
/// `now`, and the `tat` after each.
pub(crate) fn gcra(tat: i64, now: i64, rate: i64, window_ms: i64, want: i64) -> Vec<i64> {
    let interval = (window_ms / rate.max(1)).max(1);
    let tolerance = window_ms - interval;
    let mut tat = tat;
    let mut out = Vec::new();
    while (out.len() as i64) < want && tat - tolerance <= now {
        tat = tat.max(now) + interval;
        out.push(tat);
    }
    out
}

impl Store {
    /// Claims up to `limit` due jobs for `worker`, spending an attempt on each; returns them
    /// and how many of the first were claimed under a key's limits.
    pub(crate) async fn claim(
        &self,
        worker: &str,
        limit: i64,
        now: i64,
        lease_until: i64,
    ) -> Result<(Vec<JobRow>, usize), JobsError> {
        let mut rows = Vec::new();
        if self.keys_may_exist().await? {
            rows = self.claim_limited(worker, limit, now, lease_until).await?;
        }
        let limited = rows.len();
        let left = limit - limited as i64;
        if left > 0 {
            rows.extend(self.claim_free(worker, left, now, lease_until).await?);
        }
        Ok((rows, limited))
    }

    /// Only the first check is made on the claim's path; later ones refresh the answer on a
    /// task of their own (one at a time) while claims go on with the last one — a stale answer
    /// only delays a limited key's jobs (see [`KEYS_CHECK_MS`]), and inline, the check was a
    /// second round trip before one start a second (an idle worker's p99).
    async fn keys_may_exist(&self) -> Result<bool, JobsError> {
        let seen = &self.keys_seen;
        let now = seen.elapsed_ms();
        let checked = seen.checked.load(Ordering::Relaxed);
        if checked == 0 {
            return self.check_keys(now).await;
        }
        if now.saturating_sub(checked - 1) >= KEYS_CHECK_MS
            && !seen.refreshing.swap(true, Ordering::AcqRel)
        {
            let store = self.clone();
            tokio::spawn(async move {
                if let Err(e) = store.check_keys(now).await {
                    tracing::debug!(error = %steadfast::sanitize(&e.to_string()), "checking for limited keys failed; the last answer stands");
                }
                store.keys_seen.refreshing.store(false, Ordering::Release);
            });
        }
        Ok(seen.exist.load(Ordering::Relaxed))
    }

    async fn check_keys(&self, now: u64) -> Result<bool, JobsError> {
        let n: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM (SELECT 1 FROM steadfast_keys LIMIT 1) k")
                .fetch_one(&self.bookkeeping)
                .await?;
        self.keys_seen.exist.store(n > 0, Ordering::Relaxed);
        self.keys_seen.checked.store(now + 1, Ordering::Relaxed);
        Ok(n > 0)
    }

    /// Jobs of no limited key: one statement.
    async fn claim_free(
        &self,
        worker: &str,
        limit: i64,
        now: i64,
        lease_until: i64,
    ) -> Result<Vec<JobRow>, JobsError> {
        let (open, lock, close) = ids_in(self.backend);
        // A job with an ordering key runs only as the oldest unfinished job of its key.
        let sql = format!(
            "UPDATE steadfast_jobs SET {CLAIMED} \
             WHERE id {open}SELECT j.id FROM steadfast_jobs j WHERE j.state = 'available' AND j.run_at <= $3 \
               AND {ORDERING} AND {QUEUE_OPEN} \
               AND (j.limit_key IS NULL OR NOT EXISTS (SELECT 1 FROM steadfast_keys k WHERE k.key = j.limit_key)) \
               ORDER BY j.run_at - j.head_start_ms, j.id LIMIT $4{lock}{close} \
             RETURNING {JOB_COLS}"
        );
        let rows = sqlx::query(&sql)
            .bind(worker)
            .bind(lease_until)
            .bind(now)
            .bind(limit)
            .fetch_all(&self.bookkeeping)
            .await?;
        rows.iter().map(JobRow::from_row).collect()
    }

    /// Jobs of limited keys, within each key's room.
    async fn claim_limited(
        &self,
        worker: &str,
        limit: i64,
        now: i64,
        lease_until: i64,
    ) -> Result<Vec<JobRow>, JobsError> {
        let (begin, lock) = match self.backend {
            Backend::Postgres => ("BEGIN", " FOR UPDATE SKIP LOCKED"),
            Backend::Sqlite => ("BEGIN IMMEDIATE", ""),
        };
        let mut tx = self.bookkeeping.begin_with(begin).await?;
        // Keys with due work that are not paused and whose rate allows a start now.
        let keys = sqlx::query(&format!(
            "SELECT k.key, k.max_running, k.rate, k.window_ms, k.tat FROM steadfast_keys k \
             WHERE k.paused = 0 AND (k.rate IS NULL OR k.tat - (k.window_ms - k.window_ms / k.rate) <= $1) \
               AND EXISTS (SELECT 1 FROM steadfast_jobs j WHERE j.limit_key = k.key AND j.state = 'available' AND j.run_at <= $1) \
             ORDER BY k.updated_at, k.key LIMIT $2{lock}"
        ))
        .bind(now)
        .bind(KEYS_PER_CLAIM)
        .fetch_all(&mut *tx)
        .await?;
        if keys.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        // Counted after the locks: every claim of these keys made before is visible.
        let mut running_sql = String::from(
            "SELECT limit_key, COUNT(*) FROM steadfast_jobs WHERE state = 'running' AND limit_key IN (",
        );
        push_params(&mut running_sql, 1, keys.len());
        running_sql.push_str(") GROUP BY limit_key");
        let mut q = sqlx::query(&running_sql);
        for k in &keys {
            q = q.bind(k.try_get::<String, _>(0)?);
        }
        let mut running = std::collections::HashMap::new();
        for r in q.fetch_all(&mut *tx).await? {
            running.insert(r.try_get::<String, _>(0)?, r.try_get::<i64, _>(1)?);
        }
        let mut rooms = Vec::new();
        for k in &keys {
            let key: String = k.try_get(0)?;
            let max: Option<i64> = k.try_get(1)?;
            let mut room = match max {
                Some(m) => (m - running.get(&key).copied().unwrap_or(0)).max(0),
                None => limit,
            }
            .min(limit);
            let mut tats = Vec::new();
            if let (Some(rate), Some(window)) = (
                k.try_get::<Option<i64>, _>(2)?,
                k.try_get::<Option<i64>, _>(3)?,
            ) {
                tats = gcra(k.try_get(4)?, now, rate, window, room);
                room = tats.len() as i64;
            }
            if room > 0 {
                rooms.push(KeyRoom { key, room, tats });
            }
        }
        if rooms.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let claimed = claim_in_rooms(
            self.backend,
            &mut tx,
            &rooms,
            worker,
            limit,
            now,
            lease_until,
        )
        .await?;
        // Advance each served key's rate state by the starts it got; serve it last next time.
        let mut served: std::collections::HashMap<&str, usize> = Default::default();
        for r in &claimed {
            if let Some(k) = &r.limit_key {
                *served.entry(k.as_str()).or_default() += 1;
            }
        }
        for room in &rooms {
            let Some(&n) = served.get(room.key.as_str()) else {
                continue;
            };
            let tat = room.tats.get(n - 1).copied();
            sqlx::query(
                "UPDATE steadfast_keys SET tat = COALESCE($1, tat), updated_at = $2 WHERE key = $3",
            )
            .bind(tat)
            .bind(now)
            .bind(room.key.as_str())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(claimed)
    }
}

/// Claims, under the keys' locks, at most each key's room of its due jobs (in priority
/// order), `limit` in all. Each key's candidates are an index range of its own (`LIMIT room`),
/// so a long backlog costs nothing extra. No row locks are needed: only a holder of a key's
/// lock claims that key's jobs.
async fn claim_in_rooms(
    backend: Backend,
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    rooms: &[KeyRoom],
    worker: &str,
    limit: i64,
    now: i64,
    lease_until: i64,
) -> Result<Vec<JobRow>, JobsError> {
    let mut per_key = String::new();
    for i in 0..rooms.len() {
        if i > 0 {
            per_key.push_str(" UNION ALL ");
        }
        per_key.push_str(&format!(
            "SELECT * FROM (SELECT j.id, j.run_at - j.head_start_ms AS sort FROM steadfast_jobs j \
             WHERE j.limit_key = ${} AND j.state = 'available' AND j.run_at <= $3 AND {ORDERING} AND {QUEUE_OPEN} \
             ORDER BY j.run_at - j.head_start_ms, j.id LIMIT ${}) k{i}",
            5 + 2 * i,
            6 + 2 * i
        ));
    }
    let (open, _, close) = ids_in(backend);
    let sql = format!(
        "UPDATE steadfast_jobs SET {CLAIMED} \
         WHERE state = 'available' AND id {open}SELECT id FROM ({per_key}) c ORDER BY sort, id LIMIT $4{close} \
         RETURNING {JOB_COLS}"
    );
    let mut q = sqlx::query(&sql)
        .bind(worker)
        .bind(lease_until)
        .bind(now)
        .bind(limit);
    for r in rooms {
        q = q.bind(r.key.as_str()).bind(r.room);
    }
    let rows = q.fetch_all(&mut **tx).await?;
    rows.iter().map(JobRow::from_row).collect()
}

/// How a claim names the rows it takes: `(id {open} SELECT … {lock}{close})`.
///
/// On PostgreSQL `id = ANY(ARRAY(SELECT …))`, not `id IN (SELECT …)`: while the table is
/// small enough (10,000 rows here; from about 50,000 the planner chose key lookups), an `IN`
/// over a `LIMIT`ed subquery was planned as a hash semi-join whose outer side scans the whole
/// table, done jobs included (a 256-row claim of 10,000 rows: 9.4 ms, 2.7 ms as an array).
/// The array is computed once and the update is primary-key lookups whatever the planner
/// thinks of the table, as River's and Oban's claims (a `FROM` join on the locked ids) are.
/// SQLite has no arrays and looks an `IN` list up by rowid.
fn ids_in(backend: Backend) -> (&'static str, &'static str, &'static str) {
    match backend {
        Backend::Postgres => ("= ANY(ARRAY(", " FOR UPDATE SKIP LOCKED", "))"),
        Backend::Sqlite => ("IN (", "", ")"),
    }
}

/// `$from, $from+1, …` (`n` of them).
fn push_params(sql: &mut String, from: usize, n: usize) {
    for i in 0..n {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!("${}", from + i));
    }
}

/// What a claim sets; `$1` worker, `$2` lease end, `$3` now.
const CLAIMED: &str = "state = 'running', attempts = attempts + 1, locked_by = $1, lease_until = $2, \
    first_attempt_at = COALESCE(first_attempt_at, $3), updated_at = $3";

/// A job with an ordering key runs only as the oldest unfinished job of its key.
const ORDERING: &str = "(j.ordering_key IS NULL OR NOT EXISTS (SELECT 1 FROM steadfast_jobs h \
    WHERE h.ordering_key = j.ordering_key AND h.state IN ('available', 'running') AND h.id < j.id))";

/// The job's queue (handler) is not paused.
const QUEUE_OPEN: &str =
    "NOT EXISTS (SELECT 1 FROM steadfast_queues q WHERE q.handler = j.handler AND q.paused = 1)";

#[cfg(test)]
mod tests {
    use super::gcra;

    #[test]
    fn gcra_allows_a_burst_of_rate_then_one_per_interval() {
        // 10 per second: 10 at once, then one every 100 ms.
        let tats = gcra(0, 1_000, 10, 1_000, 50);
        assert_eq!(tats.len(), 10);
        let last = *tats.last().unwrap();
        assert!(gcra(last, 1_000, 10, 1_000, 5).is_empty());
        assert_eq!(gcra(last, 1_099, 10, 1_000, 5).len(), 0);
        assert_eq!(gcra(last, 1_100, 10, 1_000, 5).len(), 1);
        // Idle for long: the burst is back, not more.
        assert_eq!(gcra(last, 100_000, 10, 1_000, 50).len(), 10);
    }
}
