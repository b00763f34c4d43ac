//! Successful completions, grouped: the jobs of one worker that finish close together are
//! marked done in one statement (River's batch completer). A handler task hands its job over
//! and frees its slot at once, so the next claim overlaps the completion's commit; until the
//! row is written the job keeps its lease, so a crash in between only runs it again
//! (at-least-once). [`Completer::flush`] waits for everything handed over so far — shutdown
//! and `run_once` call it.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::clock::Clock;
use crate::store::Backend;
use crate::{JobsError, Store};

/// Largest batch per statement (one parameter a job).
const MAX_BATCH: usize = 256;

enum Item {
    Done {
        id: i64,
        attempt: i64,
        handler: String,
    },
    Flush(oneshot::Sender<()>),
}

#[derive(Debug)]
pub(crate) struct Completer {
    tx: mpsc::Sender<Item>,
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Item")
    }
}

impl Completer {
    /// Spawns the writer; it stops when the completer is dropped. `keep_done`: mark the rows done (else delete them, see `WorkerConfig::keep_done`).
    pub(crate) fn spawn(
        store: Store,
        worker: String,
        clock: Arc<dyn Clock>,
        cap: usize,
        keep_done: bool,
    ) -> Self {
        // Room for a full batch whatever the concurrency: with one slot per worker slot, a worker
        // of concurrency 1 waited for each completion's round trip before its next job.
        let (tx, mut rx) = mpsc::channel::<Item>(cap.max(MAX_BATCH));
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(item) => batch.push(item),
                        Err(_) => break,
                    }
                }
                let jobs: Vec<(i64, i64, &str)> = batch
                    .iter()
                    .filter_map(|i| match i {
                        Item::Done {
                            id,
                            attempt,
                            handler,
                        } => Some((*id, *attempt, handler.as_str())),
                        Item::Flush(_) => None,
                    })
                    .collect();
                if !jobs.is_empty() {
                    let now = clock.now().timestamp_millis();
                    match write(&store, &worker, &jobs, now, keep_done).await {
                        Ok(done) => {
                            for (id, _, handler) in &jobs {
                                if done.contains(id) {
                                    metrics::counter!("steadfast_jobs_succeeded_total", "handler" => handler.to_string())
                                        .increment(1);
                                }
                            }
                        }
                        // The jobs keep their leases: they are rescued and run again.
                        Err(e) => tracing::warn!(
                            error = %steadfast::sanitize(&e.to_string()),
                            jobs = jobs.len(),
                            "marking jobs done failed; they will run again after their lease"
                        ),
                    }
                }
                for item in batch {
                    if let Item::Flush(ack) = item {
                        let _ = ack.send(());
                    }
                }
            }
        });
        Self { tx }
    }

    /// Hands a successful attempt over to be marked done.
    pub(crate) async fn done(&self, id: i64, attempt: i64, handler: &str) -> Result<(), JobsError> {
        self.tx
            .send(Item::Done {
                id,
                attempt,
                handler: handler.to_owned(),
            })
            .await
            .map_err(|_| JobsError::invalid("worker", "be running to complete jobs"))
    }

    /// Waits until everything handed over so far is written.
    pub(crate) async fn flush(&self) {
        let (ack, rx) = oneshot::channel();
        if self.tx.send(Item::Flush(ack)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

/// Marks `jobs` done, one statement per attempt number among them (nearly always one);
/// returns the ids written.
async fn write(
    store: &Store,
    worker: &str,
    jobs: &[(i64, i64, &str)],
    now: i64,
    keep_done: bool,
) -> Result<Vec<i64>, sqlx::Error> {
    let mut attempts: Vec<i64> = jobs.iter().map(|j| j.1).collect();
    attempts.sort_unstable();
    attempts.dedup();
    let mut done = Vec::with_capacity(jobs.len());
    for attempt in attempts {
        let ids: Vec<i64> = jobs
            .iter()
            .filter(|j| j.1 == attempt)
            .map(|j| j.0)
            .collect();
        done.extend(write_attempt(store, worker, attempt, &ids, now, keep_done).await?);
    }
    Ok(done)
}

/// Marks done (or deletes, `keep_done` false) the jobs `ids` that `worker` still holds at
/// attempt `attempt`.
///
/// The ids are the index condition, and nothing else is: `(id, attempts) IN (VALUES …)`
/// beside `state = 'running'` let PostgreSQL read all the worker's running jobs through a
/// `state` index (its statistics, taken while few ran, promise one) and test each against
/// every pair — a full buffer of 528 against a batch of 256 was 102,000 tests, 40 ms a
/// statement; as here, 2.6 ms. An array from a subquery is what the claim uses too (see
/// `claim::ids_in`): the planner expects a few elements and looks each up by key.
/// `state = 'running'` is not written: `locked_by` is set by a claim and cleared by every
/// statement that takes a job out of `running`, so `locked_by = $1` implies it.
async fn write_attempt(
    store: &Store,
    worker: &str,
    attempt: i64,
    ids: &[i64],
    now: i64,
    keep_done: bool,
) -> Result<Vec<i64>, sqlx::Error> {
    let (open, each, close) = match store.backend {
        Backend::Postgres => ("= ANY(ARRAY(VALUES ", "(${})", "))"),
        Backend::Sqlite => ("IN (", "${}", ")"),
    };
    // Parameters: the worker, the attempt, then (kept) the time, then the ids.
    let (what, first_id) = if keep_done {
        (
            "UPDATE steadfast_jobs SET state = 'done', finished_at = $3, updated_at = $3, \
             lease_until = NULL, locked_by = NULL",
            4,
        )
    } else {
        ("DELETE FROM steadfast_jobs", 3)
    };
    let mut sql = format!("{what} WHERE locked_by = $1 AND attempts = $2 AND id {open}");
    for i in 0..ids.len() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&each.replace("{}", &(first_id + i).to_string()));
    }
    sql.push_str(close);
    sql.push_str(" RETURNING id");
    let mut q = sqlx::query_scalar::<_, i64>(&sql)
        .bind(worker)
        .bind(attempt);
    if keep_done {
        q = q.bind(now);
    }
    for id in ids {
        q = q.bind(*id);
    }
    q.fetch_all(&store.bookkeeping).await
}
