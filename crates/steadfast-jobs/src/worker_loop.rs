//! The worker loop: claim, keep a few claimed jobs at hand, start them as slots free up.
//!
//! Why a local buffer (graphile-worker's "local queue"): with one claim per freed slot, a
//! worker of concurrency 1 pays a database round trip between every two jobs. Claiming up to
//! `prefetch` jobs beyond the free slots lets the next job start the moment a slot frees,
//! while the claim for the ones after it overlaps the running handlers. A buffered job holds
//! its lease without renewal, so one that waited for half its lease is released (its attempt
//! refunded) instead of run, and shutdown releases the rest: prefetching never makes a job
//! run twice on its own. A kept job is registered in the process's `kept` map until it starts,
//! so [`Jobs::cancel`](crate::Jobs::cancel) in this process can still cancel it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use steadfast::sanitize;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::clock::duration_ms;
use crate::row::JobRow;
use crate::store::Lease;
use crate::worker::{Shared, Worker, WorkerHandle};
use crate::{JobsError, Store};

impl Worker {
    /// Starts the worker loop on the current runtime.
    pub fn start(&self) -> Result<WorkerHandle, JobsError> {
        self.shared.config.validate()?;
        let stop = CancellationToken::new();
        let shared = self.shared.clone();
        let task = tokio::spawn(run_loop(shared, stop.clone()));
        Ok(WorkerHandle {
            stop,
            task,
            shared: self.shared.clone(),
        })
    }
}

pub(crate) async fn run_loop(s: Arc<Shared>, stop: CancellationToken) -> Result<(), JobsError> {
    let slots = Arc::new(Semaphore::new(s.config.concurrency));
    let wake = s.jobs.inner.wake.clone();
    let listener = listen(&s, &stop);
    let mut tasks = JoinSet::new();
    let mut buffer: VecDeque<(JobRow, i64)> = VecDeque::new();
    let rescue_every = duration_ms(s.config.lease / 2).max(100);
    let stale_after = duration_ms(s.config.lease / 2);
    let mut last_rescue = i64::MIN;
    let stats_every = s.config.stats_interval.map(duration_ms);
    let mut last_stats = i64::MIN;
    let mut stats_task: Option<tokio::task::JoinHandle<()>> = None;
    while !stop.is_cancelled() {
        while tasks.try_join_next().is_some() {}
        let now = s.jobs.now();
        // The count reads every row's state: on its own task, one at a time, so a large store
        // never delays a claim.
        let counting = stats_task.as_ref().is_some_and(|t| !t.is_finished());
        if let Some(every) =
            stats_every.filter(|e| !counting && now.saturating_sub(last_stats) >= *e)
        {
            last_stats = now;
            let jobs = s.jobs.clone();
            stats_task = Some(tokio::spawn(async move {
                match jobs.stats().await {
                    Ok(stats) => stats.export(),
                    Err(e) => {
                        tracing::warn!(error = %sanitize(&e.to_string()), every_ms = every, "counting jobs for the gauge failed")
                    }
                }
            }));
        }
        if now.saturating_sub(last_rescue) >= rescue_every {
            last_rescue = now;
            if let Err(e) = s.jobs.inner.store.rescue(now).await {
                tracing::warn!(error = %sanitize(&e.to_string()), "rescuing expired leases failed");
            }
        }
        // Start buffered jobs in the free slots.
        while !buffer.is_empty() {
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                break;
            };
            let Some((row, claimed_at)) = buffer.pop_front() else {
                break;
            };
            if s.jobs.inner.take_kept(row.id).is_none() {
                // Cancelled while kept: `Jobs::cancel` owns it now.
                continue;
            }
            let shared = s.clone();
            let wake = wake.clone();
            let stale = s.jobs.now().saturating_sub(claimed_at) > stale_after;
            tasks.spawn(async move {
                let r = if stale {
                    release(&shared, &row).await
                } else {
                    shared.run(row).await
                };
                if let Err(e) = r {
                    tracing::warn!(error = %sanitize(&e.to_string()), "settling a job failed; its lease will expire and it will be retried");
                }
                drop(permit);
                // A slot is free: let the loop start or claim the next.
                wake.notify_waiters();
            });
        }
        let free = slots.available_permits();
        // Refill once the buffer is down to half: one claim per half-buffer, not per job.
        let want = if buffer.len() <= s.config.prefetch / 2 {
            (free + s.config.prefetch).saturating_sub(buffer.len())
        } else {
            0
        };
        // Register for wake-ups before looking, so a job queued meanwhile is not missed.
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if want == 0 {
            // Slots full and the buffer stocked: wait for a slot.
            tokio::select! {
                p = slots.clone().acquire_owned() => drop(p),
                _ = stop.cancelled() => break,
            }
            continue;
        }
        let rows = match s.claim(want).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %sanitize(&e.to_string()), "claiming jobs failed; retrying after the poll interval");
                tokio::select! {
                    _ = tokio::time::sleep(s.config.poll_interval) => {}
                    _ = stop.cancelled() => {}
                }
                continue;
            }
        };
        let got = rows.len();
        let claimed_at = s.jobs.now();
        s.jobs
            .inner
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(rows.iter().map(|r| (r.id, (s.id.clone(), r.attempts))));
        buffer.extend(rows.into_iter().map(|r| (r, claimed_at)));
        if got == want || (got > 0 && slots.available_permits() > 0) {
            continue;
        }
        if !buffer.is_empty() {
            // Work at hand, no free slot: wait for one (or for more work to claim).
            tokio::select! {
                p = slots.clone().acquire_owned() => drop(p),
                _ = stop.cancelled() => break,
            }
            continue;
        }
        idle(&s, notified, &stop).await;
    }
    // Stop claiming; hand back what was never started, let running jobs finish (the handle
    // bounds this by the grace period and then cancels them, which releases their leases).
    for (row, _) in buffer.drain(..) {
        if s.jobs.inner.take_kept(row.id).is_none() {
            continue;
        }
        if let Err(e) = release(&s, &row).await {
            tracing::warn!(error = %sanitize(&e.to_string()), "releasing a prefetched job failed; it will run after its lease");
        }
    }
    while tasks.join_next().await.is_some() {}
    if let Some(c) = s.completer.get() {
        c.flush().await;
    }
    if let Some(l) = listener {
        l.abort();
    }
    if let Some(t) = stats_task {
        t.abort();
    }
    Ok(())
}

/// Nothing to claim: sleep until the next due job, a wake-up, or the poll interval.
async fn idle(
    s: &Shared,
    notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    stop: &CancellationToken,
) {
    let wait = match next_due(&s.jobs.inner.store).await {
        Ok(Some(due)) => {
            Duration::from_millis(u64::try_from(due.saturating_sub(s.jobs.now())).unwrap_or(0))
                .min(s.config.poll_interval)
        }
        _ => s.config.poll_interval,
    };
    // Due but not claimable (an ordering key's head is running, a key is at its limit): look
    // again soon, without spinning.
    let wait = if wait.is_zero() {
        s.config.poll_interval.min(Duration::from_millis(50))
    } else {
        wait
    };
    tokio::select! {
        _ = notified => {}
        _ = tokio::time::sleep(wait) => {}
        _ = stop.cancelled() => {}
    }
}

/// Gives a claimed job back untouched: available now, its attempt refunded.
async fn release(s: &Shared, row: &JobRow) -> Result<(), JobsError> {
    let lease = Lease {
        id: row.id,
        worker: &s.id,
        attempt: row.attempts,
    };
    s.defer(row, &lease, s.jobs.now(), "released").await?;
    Ok(())
}

/// When the next job is due, near enough for a sleep: the earliest run time among the first
/// jobs in claim order (an index range, however long the backlog; a later job due sooner is
/// found by the next poll).
async fn next_due(store: &Store) -> Result<Option<i64>, JobsError> {
    Ok(sqlx::query_scalar(
        "SELECT MIN(run_at) FROM (SELECT run_at FROM steadfast_jobs WHERE state = 'available' \
         ORDER BY run_at - head_start_ms, id LIMIT 64) d",
    )
    .fetch_one(&store.bookkeeping)
    .await?)
}

/// On PostgreSQL, a task that turns `NOTIFY`s on the schema's channel into wake-ups.
#[cfg(feature = "postgres")]
fn listen(s: &Arc<Shared>, stop: &CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
    let store = &s.jobs.inner.store;
    if store.backend != crate::Backend::Postgres {
        return None;
    }
    let url = store.url.clone();
    let channel = store.channel();
    let wake = s.jobs.inner.wake.clone();
    let poll = s.config.poll_interval;
    let stop = stop.clone();
    Some(tokio::spawn(async move {
        while !stop.is_cancelled() {
            let listener = async {
                let mut l = sqlx::postgres::PgListener::connect(&url).await?;
                l.listen(&channel).await?;
                loop {
                    l.recv().await?;
                    wake.notify_waiters();
                }
                #[allow(unreachable_code)]
                Ok::<(), sqlx::Error>(())
            };
            tokio::select! {
                r = listener => {
                    if let Err(e) = r {
                        tracing::debug!(error = %sanitize(&e.to_string()), "LISTEN connection lost; polling until it is back");
                    }
                }
                _ = stop.cancelled() => return,
            }
            tokio::time::sleep(poll).await;
        }
    }))
}

#[cfg(not(feature = "postgres"))]
fn listen(_: &Arc<Shared>, _: &CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
    None
}
