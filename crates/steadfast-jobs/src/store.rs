//! The job store: one set of SQL over `sqlx::Any`, for SQLite and PostgreSQL.
//!
//! Both backends store times as UTC milliseconds (`BIGINT`) and JSON as `TEXT`, and both take
//! `$n` parameters, so every query is written once. The two differ in three places only: the
//! schema file (key type, the PostgreSQL notify trigger), the claim's `FOR UPDATE SKIP LOCKED`
//! (SQLite serializes writers, so it needs no row locks), and connection setup (WAL and a busy
//! timeout for SQLite, a `search_path` for a PostgreSQL schema).

use std::borrow::Cow;
use std::sync::Once;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AnyPool, Executor, Row};

use crate::JobsError;
use crate::job::{Job, JobId, JobState};
use crate::row::{JOB_COLS, JobRow};
pub use crate::stats::Stats;
use crate::trace::TraceContext;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// Embedded SQLite (one process, many worker tasks).
    Sqlite,
    /// PostgreSQL (many worker processes).
    Postgres,
}

/// How to open a store.
///
/// ```
/// use steadfast_jobs::StoreOptions;
/// let opts = StoreOptions::new("sqlite://jobs.db").max_connections(4);
/// assert_eq!(opts.url(), "sqlite://jobs.db");
/// ```
#[derive(Debug, Clone)]
pub struct StoreOptions {
    url: String,
    schema: Option<String>,
    max_connections: u32,
    connect_timeout: Duration,
}

impl StoreOptions {
    /// A store at `url`: `sqlite://path` (created if missing) or `postgres://…`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: None,
            max_connections: 10,
            connect_timeout: Duration::from_secs(10),
        }
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// PostgreSQL only: keep the tables in this schema (created if missing).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// The pool's size (default 10; PostgreSQL keeps a second pool of this size for the
    /// workers' bookkeeping).
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n;
        self
    }

    /// How long to wait for a connection (default 10 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }
}

/// A handle on the job tables; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) pool: AnyPool,
    /// Workers' bookkeeping (claims, renewals, outcomes). On PostgreSQL its sessions commit
    /// asynchronously: losing one of these commits in a server crash can only make a job run
    /// again (at-least-once, which the idempotency key covers), never lose a job — enqueues
    /// stay on the durable pool.
    pub(crate) bookkeeping: AnyPool,
    pub(crate) backend: Backend,
    pub(crate) schema: Option<String>,
    pub(crate) url: String,
    /// Whether any key has limits (see `claim`), cached.
    pub(crate) keys_seen: std::sync::Arc<crate::keys_seen::KeysSeen>,
}

static DRIVERS: Once = Once::new();

fn migrator(backend: Backend) -> Migrator {
    let sql: [(&str, &'static str); 4] = match backend {
        Backend::Sqlite => [
            ("jobs", include_str!("../migrations/sqlite/0001_jobs.sql")),
            (
                "limits",
                include_str!("../migrations/sqlite/0002_limits.sql"),
            ),
            ("trace", include_str!("../migrations/sqlite/0003_trace.sql")),
            (
                "console",
                include_str!("../migrations/sqlite/0004_console.sql"),
            ),
        ],
        Backend::Postgres => [
            ("jobs", include_str!("../migrations/postgres/0001_jobs.sql")),
            (
                "limits",
                include_str!("../migrations/postgres/0002_limits.sql"),
            ),
            (
                "trace",
                include_str!("../migrations/postgres/0003_trace.sql"),
            ),
            (
                "console",
                include_str!("../migrations/postgres/0004_console.sql"),
            ),
        ],
    };
    let migrations = sql
        .into_iter()
        .zip(1..)
        .map(|((name, sql), version)| {
            Migration::new(
                version,
                Cow::Borrowed(name),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                false,
            )
        })
        .collect();
    Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    }
}

/// Runs the migrations. On PostgreSQL sqlx holds an advisory lock while it migrates; on SQLite
/// it takes none, so two processes opening one new store at the same moment (two gateways
/// started together on one `[tasks] store`) can both try a migration, and the later one fails
/// on what the earlier one created. That failure means the other opener committed the
/// migration (the script and its bookkeeping row are one transaction), so running again skips
/// it; each failure is one migration someone else applied, which bounds the retries.
async fn migrate(backend: Backend, pool: &AnyPool) -> Result<(), JobsError> {
    let migrator = migrator(backend);
    let mut tries = migrator.iter().count();
    loop {
        match migrator.run(pool).await {
            Err(sqlx::migrate::MigrateError::ExecuteMigration(e, version))
                if backend == Backend::Sqlite && tries > 0 =>
            {
                tracing::debug!(version, error = %e, "a migration raced another opener; again");
                tries -= 1;
            }
            other => return Ok(other?),
        }
    }
}

fn valid_schema(s: &str) -> Result<(), JobsError> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(JobsError::invalid(
            "schema",
            format!(
                "be 1 to 63 ASCII letters, digits or '_', not starting with a digit (got {s:?})"
            ),
        ))
    }
}

impl Store {
    /// Opens the store and creates or migrates its tables.
    pub async fn connect(opts: StoreOptions) -> Result<Self, JobsError> {
        DRIVERS.call_once(sqlx::any::install_default_drivers);
        let backend = if opts.url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if opts.url.starts_with("postgres:") || opts.url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            return Err(JobsError::invalid(
                "url",
                format!(
                    "start with sqlite: or postgres: (got {:?})",
                    scheme_of(&opts.url)
                ),
            ));
        };
        if opts.max_connections == 0 {
            return Err(JobsError::invalid("max_connections", "be >= 1 (got 0)"));
        }
        let mut url = opts.url.clone();
        if backend == Backend::Sqlite && !url.contains("mode=") {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str("mode=rwc");
        }
        if let Some(schema) = &opts.schema {
            if backend != Backend::Postgres {
                return Err(JobsError::invalid("schema", "be set only for PostgreSQL"));
            }
            valid_schema(schema)?;
            let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&url).await?;
            conn.execute(format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"").as_str())
                .await?;
        }
        let connect_opts: AnyConnectOptions = url.parse()?;
        let pool_options = |asynchronous: bool| {
            let schema = opts.schema.clone();
            AnyPoolOptions::new()
                .max_connections(opts.max_connections)
                .acquire_timeout(opts.connect_timeout)
                .after_connect(move |conn, _| {
                    let schema = schema.clone();
                    Box::pin(async move {
                        match backend {
                            Backend::Sqlite => {
                                conn.execute(
                                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 30000;",
                                )
                                .await?;
                            }
                            Backend::Postgres => {
                                if let Some(s) = schema {
                                    conn.execute(format!("SET search_path TO \"{s}\"").as_str())
                                        .await?;
                                }
                                if asynchronous {
                                    conn.execute("SET synchronous_commit TO off").await?;
                                }
                            }
                        }
                        Ok(())
                    })
                })
        };
        let pool = pool_options(false)
            .connect_with(connect_opts.clone())
            .await?;
        let bookkeeping = match backend {
            Backend::Sqlite => pool.clone(),
            Backend::Postgres => pool_options(true).connect_lazy_with(connect_opts),
        };
        migrate(backend, &pool).await?;
        Ok(Self {
            pool,
            bookkeeping,
            backend,
            schema: opts.schema,
            url,
            keys_seen: Default::default(),
        })
    }

    /// The connection pool, for handlers that keep their side effects in the same database
    /// (and for tools).
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The PostgreSQL channel workers listen on.
    pub(crate) fn channel(&self) -> String {
        format!(
            "steadfast_jobs_{}",
            self.schema.as_deref().unwrap_or("public")
        )
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.bookkeeping.close().await;
        self.pool.close().await;
    }

    pub(crate) async fn notify(&self) -> Result<(), JobsError> {
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(self.channel())
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// Inserts a job; on a `unique_key` (or schedule fire time) conflict, returns the id of the
    /// job already there.
    pub(crate) async fn insert(&self, new: &NewJob<'_>, now: i64) -> Result<JobId, JobsError> {
        for _ in 0..3 {
            let row = sqlx::query(
                "INSERT INTO steadfast_jobs (handler, payload, policy, state, run_at, unique_key, \
                 ordering_key, schedule_id, fire_at, created_at, updated_at, priority, head_start_ms, limit_key, \
                 traceparent, tracestate) \
                 VALUES ($1, $2, $3, 'available', $4, $5, $6, $7, $8, $9, $9, $10, $11, $12, $13, $14) \
                 ON CONFLICT DO NOTHING RETURNING id",
            )
            .bind(new.handler)
            .bind(new.payload.as_ref())
            .bind(new.policy.as_ref())
            .bind(new.run_at)
            .bind(new.unique_key)
            .bind(new.ordering_key)
            .bind(new.schedule_id)
            .bind(new.fire_at)
            .bind(now)
            .bind(new.priority)
            .bind(new.head_start_ms)
            .bind(new.limit_key)
            .bind(new.trace.map(|t| t.traceparent.as_str()))
            .bind(new.trace.and_then(|t| t.tracestate.as_deref()))
            .fetch_optional(&self.pool)
            .await?;
            if let Some(row) = row {
                return Ok(row.try_get(0)?);
            }
            let existing: Option<i64> = if let Some(key) = new.unique_key {
                sqlx::query_scalar(
                    "SELECT id FROM steadfast_jobs WHERE unique_key = $1 AND state IN ('available', 'running')",
                )
                .bind(key)
                .fetch_optional(&self.pool)
                .await?
            } else {
                sqlx::query_scalar(
                    "SELECT id FROM steadfast_jobs WHERE schedule_id = $1 AND fire_at = $2",
                )
                .bind(new.schedule_id)
                .bind(new.fire_at)
                .fetch_optional(&self.pool)
                .await?
            };
            if let Some(id) = existing {
                return Ok(id);
            }
            // The conflicting job finished between the two statements: insert again.
        }
        Err(JobsError::invalid(
            "unique_key",
            "settle: a job with this key kept finishing and reappearing",
        ))
    }

    /// Queues a schedule's next fire time, only while the schedule is active. The check and
    /// the insert are one statement, and on PostgreSQL the schedule row is share-locked, so a
    /// concurrent [`cancel_schedule`](crate::Jobs::cancel_schedule) either comes first (nothing
    /// is queued) or waits for this insert and then cancels the job it queued.
    pub(crate) async fn insert_fire(&self, new: &NewJob<'_>, now: i64) -> Result<(), JobsError> {
        let lock = match self.backend {
            Backend::Postgres => " FOR SHARE",
            Backend::Sqlite => "",
        };
        let sql = format!(
            "INSERT INTO steadfast_jobs (handler, payload, policy, state, run_at, schedule_id, fire_at, \
             created_at, updated_at, priority, head_start_ms, limit_key) \
             SELECT $1, $2, $3, 'available', $4, $5, $6, $7, $7, $8, $9, $10 \
             WHERE EXISTS (SELECT 1 FROM steadfast_schedules WHERE id = $5 AND active = 1{lock}) \
             ON CONFLICT DO NOTHING"
        );
        sqlx::query(&sql)
            .bind(new.handler)
            .bind(new.payload.as_ref())
            .bind(new.policy.as_ref())
            .bind(new.run_at)
            .bind(new.schedule_id)
            .bind(new.fire_at)
            .bind(now)
            .bind(new.priority)
            .bind(new.head_start_ms)
            .bind(new.limit_key)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Inserts many jobs in one statement per chunk (no dedup keys); what they share is bound
    /// once per statement.
    pub(crate) async fn insert_many(
        &self,
        common: &NewJob<'_>,
        payloads: &[String],
        now: i64,
    ) -> Result<Vec<JobId>, JobsError> {
        let mut ids = Vec::with_capacity(payloads.len());
        for chunk in payloads.chunks(1000) {
            let mut sql = String::with_capacity(160 + chunk.len() * 48);
            sql.push_str(
                "INSERT INTO steadfast_jobs (handler, payload, policy, state, run_at, created_at, updated_at, \
                 priority, head_start_ms, limit_key, traceparent, tracestate) VALUES ",
            );
            for i in 0..chunk.len() {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!(
                    "($1, ${}, $2, 'available', $3, $4, $4, $5, $6, $7, $8, $9)",
                    i + 10
                ));
            }
            sql.push_str(" RETURNING id");
            let mut q = sqlx::query(&sql)
                .bind(common.handler)
                .bind(common.policy.as_ref())
                .bind(common.run_at)
                .bind(now)
                .bind(common.priority)
                .bind(common.head_start_ms)
                .bind(common.limit_key)
                .bind(common.trace.map(|t| t.traceparent.as_str()))
                .bind(common.trace.and_then(|t| t.tracestate.as_deref()));
            for p in chunk {
                q = q.bind(p.as_str());
            }
            for row in q.fetch_all(&self.pool).await? {
                ids.push(row.try_get(0)?);
            }
        }
        Ok(ids)
    }

    /// Makes jobs whose lease ran out claimable again (their attempt stays spent).
    pub(crate) async fn rescue(&self, now: i64) -> Result<u64, JobsError> {
        let done = sqlx::query(
            "UPDATE steadfast_jobs SET state = 'available', run_at = $1, lease_until = NULL, locked_by = NULL, \
             last_error = 'lease expired: the worker stopped renewing it (crashed or stalled)', \
             last_error_code = 'LEASE_EXPIRED', updated_at = $1 \
             WHERE state = 'running' AND lease_until <= $1",
        )
        .bind(now)
        .execute(&self.bookkeeping)
        .await?;
        Ok(done.rows_affected())
    }

    /// Extends a lease; false when the job is no longer this attempt's.
    pub(crate) async fn renew(
        &self,
        lease: &Lease<'_>,
        lease_until: i64,
    ) -> Result<bool, JobsError> {
        let done = sqlx::query(
            "UPDATE steadfast_jobs SET lease_until = $1 \
             WHERE id = $2 AND locked_by = $3 AND attempts = $4 AND state = 'running'",
        )
        .bind(lease_until)
        .bind(lease.id)
        .bind(lease.worker)
        .bind(lease.attempt)
        .execute(&self.bookkeeping)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Settles an attempt; false when the lease was lost (another worker owns the job now).
    pub(crate) async fn settle(
        &self,
        lease: &Lease<'_>,
        outcome: &Settle<'_>,
        now: i64,
    ) -> Result<bool, JobsError> {
        // $1..$4 are the same in every branch: now, and the lease that must still hold.
        let (set, extra): (&str, [Option<Bind<'_>>; 4]) = match outcome {
            Settle::Done => ("state = 'done', finished_at = $1", [None, None, None, None]),
            Settle::Retry {
                run_at,
                delay_ms,
                error,
                code,
            } => (
                "state = 'available', run_at = $5, last_delay_ms = $6, last_error = $7, last_error_code = $8",
                [
                    Some(Bind::I(*run_at)),
                    Some(Bind::I(*delay_ms)),
                    Some(Bind::S(error)),
                    Some(Bind::S(code)),
                ],
            ),
            Settle::Dead { error, code } => (
                "state = 'dead', finished_at = $1, last_error = $5, last_error_code = $6",
                [Some(Bind::S(error)), Some(Bind::S(code)), None, None],
            ),
            Settle::Defer { run_at } => (
                "state = 'available', run_at = $5, attempts = attempts - 1",
                [Some(Bind::I(*run_at)), None, None, None],
            ),
        };
        let sql = format!(
            "UPDATE steadfast_jobs SET {set}, updated_at = $1, lease_until = NULL, locked_by = NULL \
             WHERE id = $2 AND locked_by = $3 AND attempts = $4 AND state = 'running'"
        );
        let mut q = sqlx::query(&sql)
            .bind(now)
            .bind(lease.id)
            .bind(lease.worker)
            .bind(lease.attempt);
        for b in extra.into_iter().flatten() {
            q = match b {
                Bind::I(v) => q.bind(v),
                Bind::S(v) => q.bind(v),
            };
        }
        Ok(q.execute(&self.bookkeeping).await?.rows_affected() == 1)
    }

    /// One job.
    pub async fn get(&self, id: JobId) -> Result<Option<Job>, JobsError> {
        let sql = format!("SELECT {JOB_COLS} FROM steadfast_jobs WHERE id = $1");
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref()
            .map(|r| JobRow::from_row(r).map(|j| j.to_job()))
            .transpose()
    }

    /// Jobs, newest first, optionally in one state; at most `limit` (capped at 10,000).
    pub async fn list(&self, state: Option<JobState>, limit: u32) -> Result<Vec<Job>, JobsError> {
        let limit = i64::from(limit.min(10_000));
        let rows = match state {
            Some(s) => {
                let sql = format!(
                    "SELECT {JOB_COLS} FROM steadfast_jobs WHERE state = $1 ORDER BY id DESC LIMIT $2"
                );
                sqlx::query(&sql)
                    .bind(s.as_str())
                    .bind(limit)
                    .fetch_all(&self.pool)
                    .await?
            }
            None => {
                let sql =
                    format!("SELECT {JOB_COLS} FROM steadfast_jobs ORDER BY id DESC LIMIT $1");
                sqlx::query(&sql).bind(limit).fetch_all(&self.pool).await?
            }
        };
        rows.iter()
            .map(|r| JobRow::from_row(r).map(|j| j.to_job()))
            .collect()
    }

    /// Dead letters, newest first.
    pub async fn dead(&self, limit: u32) -> Result<Vec<Job>, JobsError> {
        self.list(Some(JobState::Dead), limit).await
    }

    /// Cancels a job that has not started (queued, scheduled or in backoff); a job of a
    /// recurring schedule cancels the schedule too. False when there was nothing to cancel.
    pub async fn cancel(&self, id: JobId, now: i64) -> Result<bool, JobsError> {
        self.cancel_held(id, now, None).await
    }

    /// [`cancel`](Self::cancel), or with `kept` = (worker, attempt), a job that worker claimed
    /// and keeps at hand unstarted (its own process took it out of the buffer first).
    pub(crate) async fn cancel_held(
        &self,
        id: JobId,
        now: i64,
        kept: Option<(&str, i64)>,
    ) -> Result<bool, JobsError> {
        let mut tx = self.pool.begin().await?;
        let which = match kept {
            None => "state = 'available'",
            Some(_) => "state = 'running' AND locked_by = $3 AND attempts = $4",
        };
        let sql = format!(
            "UPDATE steadfast_jobs SET state = 'cancelled', finished_at = $1, updated_at = $1, \
             lease_until = NULL, locked_by = NULL WHERE id = $2 AND {which} RETURNING schedule_id"
        );
        let mut q = sqlx::query(&sql).bind(now).bind(id);
        if let Some((worker, attempt)) = kept {
            q = q.bind(worker).bind(attempt);
        }
        let row = q.fetch_optional(&mut *tx).await?;
        let Some(row) = row else { return Ok(false) };
        if let Some(schedule) = row.try_get::<Option<i64>, _>(0)? {
            // As `Jobs::cancel_schedule`: a fire time a running job of this schedule planned
            // meanwhile is cancelled too.
            sqlx::query("UPDATE steadfast_schedules SET active = 0 WHERE id = $1")
                .bind(schedule)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "UPDATE steadfast_jobs SET state = 'cancelled', finished_at = $1, updated_at = $1 \
                 WHERE schedule_id = $2 AND state = 'available'",
            )
            .bind(now)
            .bind(schedule)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Puts a dead (or cancelled) job back in the queue with its attempts reset.
    pub async fn requeue(&self, id: JobId, now: i64) -> Result<bool, JobsError> {
        let done = sqlx::query(
            "UPDATE steadfast_jobs SET state = 'available', attempts = 0, run_at = $1, first_attempt_at = NULL, \
             last_delay_ms = 0, finished_at = NULL, updated_at = $1 \
             WHERE id = $2 AND state IN ('dead', 'cancelled')",
        )
        .bind(now)
        .bind(id)
        .execute(&self.pool)
        .await;
        match done {
            Ok(done) if done.rows_affected() == 1 => {
                self.notify().await?;
                Ok(true)
            }
            Ok(_) => Ok(false),
            // A live job already holds its unique key.
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(JobsError::invalid(
                "requeue",
                format!("job {id}: another queued job holds its unique_key"),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes finished jobs in `state` (dead, done or cancelled) that finished before `before`.
    pub async fn purge(&self, state: JobState, before: i64) -> Result<u64, JobsError> {
        if matches!(state, JobState::Available | JobState::Running) {
            return Err(JobsError::invalid(
                "state",
                "be dead, done or cancelled: only finished jobs are purged",
            ));
        }
        let done = sqlx::query("DELETE FROM steadfast_jobs WHERE state = $1 AND finished_at < $2")
            .bind(state.as_str())
            .bind(before)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    /// Counts by state, and the age of the oldest due job.
    pub async fn stats(&self, now: i64) -> Result<Stats, JobsError> {
        let rows = sqlx::query("SELECT state, COUNT(*) FROM steadfast_jobs GROUP BY state")
            .fetch_all(&self.pool)
            .await?;
        let mut stats = Stats::default();
        for r in rows {
            let state: String = r.try_get(0)?;
            let n: i64 = r.try_get(1)?;
            let n = u64::try_from(n).unwrap_or(0);
            match JobState::parse(&state) {
                JobState::Available => stats.available = n,
                JobState::Running => stats.running = n,
                JobState::Done => stats.done = n,
                JobState::Dead => stats.dead = n,
                JobState::Cancelled => stats.cancelled = n,
            }
        }
        let oldest: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(run_at) FROM steadfast_jobs WHERE state = 'available' AND run_at <= $1",
        )
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        stats.retrying = sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM steadfast_jobs WHERE state = 'available' AND attempts > 0",
        )
        .fetch_one(&self.pool)
        .await?
        .try_into()
        .unwrap_or(0);
        stats.queue_lag =
            oldest.map(|t| Duration::from_millis(u64::try_from(now - t).unwrap_or(0)));
        Ok(stats)
    }
}

enum Bind<'a> {
    I(i64),
    S(&'a str),
}

fn scheme_of(url: &str) -> &str {
    url.split(':').next().unwrap_or("")
}

/// A job to insert.
pub(crate) struct NewJob<'a> {
    pub handler: &'a str,
    pub payload: Cow<'a, str>,
    pub policy: Cow<'a, str>,
    pub run_at: i64,
    pub unique_key: Option<&'a str>,
    pub ordering_key: Option<&'a str>,
    pub schedule_id: Option<i64>,
    pub fire_at: Option<i64>,
    pub priority: i64,
    pub head_start_ms: i64,
    pub limit_key: Option<&'a str>,
    /// The enqueuer's trace context.
    pub trace: Option<&'a TraceContext>,
}

/// Which attempt of which job a worker holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease<'a> {
    pub id: JobId,
    pub worker: &'a str,
    pub attempt: i64,
}

/// How an attempt ended, as stored.
#[derive(Debug)]
pub(crate) enum Settle<'a> {
    Done,
    Retry {
        run_at: i64,
        delay_ms: i64,
        error: &'a str,
        code: &'a str,
    },
    Dead {
        error: &'a str,
        code: &'a str,
    },
    /// Back to available at `run_at` without spending the attempt (breaker open, dependency
    /// busy, shutdown).
    Defer {
        run_at: i64,
    },
}
