//! The task table: one row per durable call, next to `steadfast-jobs`' own tables in the same
//! database, so a task and its job survive a restart together.
//!
//! Times are UTC milliseconds passed in by the caller (the injected clock), so every rule here
//! — expiry, the "sent" mark, terminal states — is checked without waiting.

use sqlx::any::AnyRow;
use sqlx::{AnyPool, Row};
use steadfast_jobs::Backend;

/// The advisory lock held while the table is created on PostgreSQL (`steadfst` in ASCII: any
/// constant no other lock in the database uses).
const CREATE_LOCK: i64 = 0x7374_6561_6466_7374;

/// Status names, as the MCP 2025-11-25 `Task` writes them.
pub(crate) mod status {
    pub(crate) const WORKING: &str = "working";
    pub(crate) const COMPLETED: &str = "completed";
    pub(crate) const FAILED: &str = "failed";
    pub(crate) const CANCELLED: &str = "cancelled";

    /// Whether a status is final.
    pub(crate) fn is_terminal(s: &str) -> bool {
        matches!(s, COMPLETED | FAILED | CANCELLED)
    }
}

/// One stored task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskRow {
    pub task_id: String,
    /// Who may list it (see `owner_of`).
    pub owner: String,
    /// The job that runs it (set right after the job is queued).
    pub job_id: Option<i64>,
    /// The tool, as the client named it.
    pub tool: String,
    /// The `tools/call` params sent upstream (no `task`, no progress token).
    pub params: String,
    /// Whether an attempt that was sent and not answered may be sent again.
    pub replay: bool,
    pub status: String,
    /// The `CallToolResult` a terminal task answers `tasks/result` with.
    pub result: Option<String>,
    /// The `CallToolResult` (an `LlmError`) the task ends with if the current attempt is its
    /// last: written before each attempt is sent ("sent, outcome unknown") and replaced by
    /// the attempt's own failure.
    pub last_failure: Option<String>,
    /// The last attempt recorded as sent, and the last whose outcome was recorded.
    pub sent: i64,
    pub answered: i64,
    pub ttl_ms: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLS: &str = "task_id, owner, job_id, tool, params, replay, status, result, last_failure, \
    sent, answered, ttl_ms, created_at, updated_at";

/// The PostgreSQL channel a cancel is announced on (the payload is the task id), so the
/// replica running the task's attempt drops it at once.
pub(crate) const CANCEL_CHANNEL: &str = "steadfast_tasks_cancel";

/// The task table on the job store's pool.
#[derive(Debug, Clone)]
pub(crate) struct TaskStore {
    pool: AnyPool,
    backend: Backend,
}

impl TaskStore {
    /// Creates the table if needed.
    ///
    /// On PostgreSQL the creation holds a transaction-scoped advisory lock: `CREATE TABLE IF
    /// NOT EXISTS` is not safe against itself (two sessions creating one new table both pass
    /// the check, and the later fails on the catalog's unique index `pg_type_typname_nsp_index`),
    /// and replicas started together on a new database all create it at the same moment. The
    /// job store's migrations take sqlx's lock for the same reason. SQLite serializes writers.
    pub(crate) async fn open(pool: AnyPool, backend: Backend) -> Result<Self, sqlx::Error> {
        let mut tx = pool.begin().await?;
        if backend == Backend::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(CREATE_LOCK)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS steadfast_tasks (task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, \
             job_id BIGINT, tool TEXT NOT NULL, params TEXT NOT NULL, replay BIGINT NOT NULL, \
             status TEXT NOT NULL, result TEXT, last_failure TEXT, sent BIGINT NOT NULL, \
             answered BIGINT NOT NULL, ttl_ms BIGINT NOT NULL, created_at BIGINT NOT NULL, \
             updated_at BIGINT NOT NULL)",
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "CREATE INDEX IF NOT EXISTS steadfast_tasks_owner ON steadfast_tasks (owner, created_at)",
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Self { pool, backend })
    }

    pub(crate) async fn insert(&self, t: &TaskRow) -> Result<(), sqlx::Error> {
        sqlx::query(&format!(
            "INSERT INTO steadfast_tasks ({COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        ))
        .bind(t.task_id.as_str())
        .bind(t.owner.as_str())
        .bind(t.job_id)
        .bind(t.tool.as_str())
        .bind(t.params.as_str())
        .bind(i64::from(t.replay))
        .bind(t.status.as_str())
        .bind(t.result.as_deref())
        .bind(t.last_failure.as_deref())
        .bind(t.sent)
        .bind(t.answered)
        .bind(t.ttl_ms)
        .bind(t.created_at)
        .bind(t.updated_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(crate) async fn set_job(&self, task_id: &str, job_id: i64) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE steadfast_tasks SET job_id = $1 WHERE task_id = $2")
            .bind(job_id)
            .bind(task_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A task that has not expired at `now`.
    pub(crate) async fn get(
        &self,
        task_id: &str,
        now: i64,
    ) -> Result<Option<TaskRow>, sqlx::Error> {
        let row = sqlx::query(&format!(
            "SELECT {COLS} FROM steadfast_tasks WHERE task_id = $1 AND created_at + ttl_ms > $2"
        ))
        .bind(task_id)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The `limit` newest unexpired tasks of every owner, newest first (the admin console).
    pub(crate) async fn recent(&self, now: i64, limit: i64) -> Result<Vec<TaskRow>, sqlx::Error> {
        let rows = sqlx::query(&format!(
            "SELECT {COLS} FROM steadfast_tasks WHERE created_at + ttl_ms > $1 \
             ORDER BY created_at DESC, task_id DESC LIMIT $2"
        ))
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// `owner`'s unexpired tasks, oldest first, from `offset`.
    pub(crate) async fn list(
        &self,
        owner: &str,
        now: i64,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<TaskRow>, sqlx::Error> {
        let rows = sqlx::query(&format!(
            "SELECT {COLS} FROM steadfast_tasks WHERE owner = $1 AND created_at + ttl_ms > $2 \
             ORDER BY created_at, task_id LIMIT $3 OFFSET $4"
        ))
        .bind(owner)
        .bind(now)
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// Tasks still working (the cap on new ones).
    pub(crate) async fn active(&self, now: i64) -> Result<u64, sqlx::Error> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM steadfast_tasks WHERE status = 'working' AND created_at + ttl_ms > $1",
        )
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Records attempt `attempt` as sent, with the failure the task ends with if no answer is
    /// ever recorded. Written before the request goes out: after a crash, a row with
    /// `sent > answered` is a call that may have taken effect.
    pub(crate) async fn mark_sent(
        &self,
        task_id: &str,
        attempt: i64,
        if_lost: &str,
        now: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE steadfast_tasks SET sent = $1, last_failure = $2, updated_at = $3 \
             WHERE task_id = $4 AND status = 'working'",
        )
        .bind(attempt)
        .bind(if_lost)
        .bind(now)
        .bind(task_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records a failed attempt's outcome (the task goes on, or ends with `failure`); false
    /// when the task is no longer working.
    pub(crate) async fn record_failure(
        &self,
        task_id: &str,
        attempt: i64,
        failure: &str,
        now: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE steadfast_tasks SET answered = $1, last_failure = $2, updated_at = $3 \
             WHERE task_id = $4 AND status = 'working'",
        )
        .bind(attempt)
        .bind(failure)
        .bind(now)
        .bind(task_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Ends a working task; false when it had already ended (cancelled meanwhile).
    pub(crate) async fn finish(
        &self,
        task_id: &str,
        status: &str,
        result: &str,
        answered: i64,
        now: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE steadfast_tasks SET status = $1, result = $2, answered = $3, updated_at = $4 \
             WHERE task_id = $5 AND status = 'working'",
        )
        .bind(status)
        .bind(result)
        .bind(answered)
        .bind(now)
        .bind(task_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Cancels a working task in one statement, so what it says matches the row at that moment:
    /// `in_flight` when an attempt is marked sent and not answered (the upstream may be running
    /// it), `idle` otherwise. False when the task had already ended.
    pub(crate) async fn cancel(
        &self,
        task_id: &str,
        in_flight: &str,
        idle: &str,
        now: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE steadfast_tasks SET status = 'cancelled', \
             result = CASE WHEN sent > answered THEN $1 ELSE $2 END, updated_at = $3 \
             WHERE task_id = $4 AND status = 'working'",
        )
        .bind(in_flight)
        .bind(idle)
        .bind(now)
        .bind(task_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Tells every replica on this database that `task_id` was cancelled (PostgreSQL; on
    /// SQLite the running process finds out by polling, see `watch`).
    pub(crate) async fn announce_cancel(&self, task_id: &str) -> Result<(), sqlx::Error> {
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CANCEL_CHANNEL)
                .bind(task_id)
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// Records the answer of attempt `attempt`, which arrived after the task was cancelled
    /// while that attempt was in flight: the task stays cancelled (MCP: a cancelled task
    /// remains cancelled even if execution completes), and its result says what the upstream
    /// did instead of "cancelled". False when there is no such cancelled attempt.
    pub(crate) async fn answered_after_cancel(
        &self,
        task_id: &str,
        attempt: i64,
        result: &str,
        now: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE steadfast_tasks SET result = $1, answered = $2, updated_at = $3 \
             WHERE task_id = $4 AND status = 'cancelled' AND sent = $2 AND answered < $2",
        )
        .bind(result)
        .bind(attempt)
        .bind(now)
        .bind(task_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Which of `ids` are no longer working (cancelled elsewhere, or expired).
    pub(crate) async fn ended_among(&self, ids: &[String]) -> Result<Vec<String>, sqlx::Error> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let marks: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT task_id FROM steadfast_tasks WHERE task_id IN ({}) AND status = 'working'",
            marks.join(", ")
        );
        let mut q = sqlx::query_scalar::<_, String>(&sql);
        for id in ids {
            q = q.bind(id.as_str());
        }
        let working = q.fetch_all(&self.pool).await?;
        Ok(ids
            .iter()
            .filter(|id| !working.contains(id))
            .cloned()
            .collect())
    }

    /// Deletes expired tasks; returns how many.
    pub(crate) async fn purge(&self, now: i64) -> Result<u64, sqlx::Error> {
        let done = sqlx::query("DELETE FROM steadfast_tasks WHERE created_at + ttl_ms <= $1")
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}

fn from_row(r: &AnyRow) -> Result<TaskRow, sqlx::Error> {
    Ok(TaskRow {
        task_id: r.try_get("task_id")?,
        owner: r.try_get("owner")?,
        job_id: r.try_get("job_id")?,
        tool: r.try_get("tool")?,
        params: r.try_get("params")?,
        replay: r.try_get::<i64, _>("replay")? != 0,
        status: r.try_get("status")?,
        result: r.try_get("result")?,
        last_failure: r.try_get("last_failure")?,
        sent: r.try_get("sent")?,
        answered: r.try_get("answered")?,
        ttl_ms: r.try_get("ttl_ms")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn open() -> (TaskStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        // The job store creates the database and installs the drivers; the table goes next to it.
        let jobs = steadfast_jobs::Jobs::builder().connect(&url).await.unwrap();
        let store = TaskStore::open(jobs.store().pool().clone(), Backend::Sqlite)
            .await
            .unwrap();
        (store, dir)
    }

    fn row(id: &str, created_at: i64) -> TaskRow {
        TaskRow {
            task_id: id.into(),
            owner: "stdio".into(),
            job_id: None,
            tool: "charge".into(),
            params: "{}".into(),
            replay: false,
            status: status::WORKING.into(),
            result: None,
            last_failure: None,
            sent: 0,
            answered: 0,
            ttl_ms: 10_000,
            created_at,
            updated_at: created_at,
        }
    }

    #[tokio::test]
    async fn sent_marks_terminal_states_and_expiry_on_the_callers_clock() {
        let (s, _dir) = open().await;
        rules(&s).await;
    }

    #[tokio::test]
    #[ignore = "needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"]
    async fn the_same_rules_hold_on_postgres() {
        let url =
            std::env::var("STEADFAST_TEST_POSTGRES_URL").expect("STEADFAST_TEST_POSTGRES_URL");
        let schema = format!("tasks_test_{}", std::process::id());
        let jobs = steadfast_jobs::Jobs::builder()
            .connect_with(steadfast_jobs::StoreOptions::new(url).schema(schema.clone()))
            .await
            .unwrap();
        let pool = jobs.store().pool().clone();
        let s = TaskStore::open(pool.clone(), Backend::Postgres)
            .await
            .unwrap();
        rules(&s).await;
        sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .execute(&pool)
            .await
            .unwrap();
    }

    #[tokio::test]
    #[ignore = "needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"]
    async fn replicas_creating_the_table_at_once_all_succeed_on_postgres() {
        let url =
            std::env::var("STEADFAST_TEST_POSTGRES_URL").expect("STEADFAST_TEST_POSTGRES_URL");
        let schema = format!("tasks_race_{}", std::process::id());
        let jobs = steadfast_jobs::Jobs::builder()
            .connect_with(steadfast_jobs::StoreOptions::new(url).schema(schema.clone()))
            .await
            .unwrap();
        let pool = jobs.store().pool().clone();
        // Eight openers on eight connections of a schema without the table, released together:
        // without the lock, all but one usually fail on `pg_type_typname_nsp_index`.
        let gate = std::sync::Arc::new(tokio::sync::Barrier::new(8));
        let openers: Vec<_> = (0..8)
            .map(|_| {
                let (pool, gate) = (pool.clone(), gate.clone());
                tokio::spawn(async move {
                    gate.wait().await;
                    TaskStore::open(pool, Backend::Postgres).await.map(|_| ())
                })
            })
            .collect();
        let mut failed = Vec::new();
        for o in openers {
            if let Err(e) = o.await.unwrap() {
                failed.push(e.to_string());
            }
        }
        sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .execute(&pool)
            .await
            .unwrap();
        assert!(failed.is_empty(), "openers failed: {failed:?}");
    }

    async fn rules(s: &TaskStore) {
        s.insert(&row("a", 1_000)).await.unwrap();
        s.insert(&row("b", 5_000)).await.unwrap();
        assert_eq!(s.active(1_000).await.unwrap(), 2);
        // Sent, no answer yet: what a crash leaves behind.
        assert!(s.mark_sent("a", 1, "lost", 2_000).await.unwrap());
        let a = s.get("a", 2_000).await.unwrap().unwrap();
        assert_eq!(
            (a.sent, a.answered, a.last_failure.as_deref()),
            (1, 0, Some("lost"))
        );
        s.record_failure("a", 1, "503", 2_500).await.unwrap();
        let a = s.get("a", 2_500).await.unwrap().unwrap();
        assert_eq!(
            (a.sent, a.answered, a.last_failure.as_deref()),
            (1, 1, Some("503"))
        );
        // Only a working task ends, once; a cancelled one cannot be marked sent again.
        assert!(
            s.finish("a", status::CANCELLED, "{}", 1, 3_000)
                .await
                .unwrap()
        );
        assert!(
            !s.finish("a", status::COMPLETED, "{}", 1, 3_000)
                .await
                .unwrap()
        );
        assert!(!s.mark_sent("a", 2, "lost", 3_000).await.unwrap());
        assert_eq!(s.active(3_000).await.unwrap(), 1);
        // Expiry counts from creation: invisible at created + ttl, then purged.
        assert!(s.get("a", 10_999).await.unwrap().is_some());
        assert!(s.get("a", 11_000).await.unwrap().is_none());
        let owners: Vec<String> = s
            .list("stdio", 11_000, 0, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.task_id)
            .collect();
        assert_eq!(owners, ["b"]);
        assert!(s.list("someone-else", 0, 0, 10).await.unwrap().is_empty());
        assert_eq!(s.purge(11_000).await.unwrap(), 1);
        assert_eq!(s.purge(15_000).await.unwrap(), 1);
    }
}
