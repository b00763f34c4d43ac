//! Successful completions, grouped: the jobs of one worker that finish close together are
//! marked done in one statement (River's batch completer). A handler task hands its job over
//! and frees its slot at once, so the next claim overlaps the completion's commit; until the
//! row is written the job keeps its lease, so a crash in between only runs it again
//! (at-least-once). [`Completer::flush`] waits for everything handed over so far — shutdown
//! and `run_once` call it.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::clock::Clock;
use crate::{JobsError, Store};

/// Largest batch per statement (two parameters a job).
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
    /// Spawns the writer; it stops when the completer is dropped.
    pub(crate) fn spawn(store: Store, worker: String, clock: Arc<dyn Clock>, cap: usize) -> Self {
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
                    match write(&store, &worker, &jobs, now).await {
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

async fn write(
    store: &Store,
    worker: &str,
    jobs: &[(i64, i64, &str)],
    now: i64,
) -> Result<Vec<i64>, sqlx::Error> {
    let mut sql = String::from(
        "UPDATE steadfast_jobs SET state = 'done', finished_at = $1, updated_at = $1, lease_until = NULL, \
         locked_by = NULL WHERE locked_by = $2 AND state = 'running' AND (id, attempts) IN (VALUES ",
    );
    for i in 0..jobs.len() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!("(${}, ${})", 3 + 2 * i, 4 + 2 * i));
    }
    sql.push_str(") RETURNING id");
    let mut q = sqlx::query_scalar::<_, i64>(&sql).bind(now).bind(worker);
    for (id, attempt, _) in jobs {
        q = q.bind(*id).bind(*attempt);
    }
    q.fetch_all(&store.bookkeeping).await
}
