//! The worker loop: claim, keep claimed jobs at hand, start them as slots free up.
//!
//! Why a local buffer (graphile-worker's "local queue"): with one claim per freed slot, a
//! worker of concurrency 1 pays a database round trip between every two jobs. Claiming up to
//! `prefetch` jobs beyond the free slots lets the next job start the moment a slot frees. A
//! buffered job holds its lease without renewal, so one that waited for half its lease is
//! released (its attempt refunded) instead of run, and shutdown releases the rest:
//! prefetching never makes a job run twice on its own. A kept job is registered in the
//! process's `kept` map until it starts, so [`Jobs::cancel`](crate::Jobs::cancel) in this
//! process can still cancel it.
//!
//! Two things make short jobs fast (issue 35). The claim runs on its own task, so the loop
//! keeps starting buffered jobs while the next batch is being claimed (before, every slot
//! that freed during a claim stayed idle until the claim's round trip ended). And the buffer
//! follows the rate jobs start at: it keeps about [`HORIZON`] of work, at least `prefetch`,
//! at most `prefetch_max` jobs, so a backlog of no-op jobs is claimed hundreds per statement
//! while a worker of slow jobs keeps only `prefetch` of them away from other workers.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use steadfast::sanitize;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::duration_ms;
use crate::row::JobRow;
use crate::store::Lease;
use crate::worker::{Shared, Worker, WorkerHandle};
use crate::{JobsError, Store};

/// How much work, at the rate jobs have been starting, a worker keeps claimed at hand.
pub(crate) const HORIZON: Duration = Duration::from_millis(100);

/// How often the start rate is measured.
const RATE_WINDOW: Duration = Duration::from_millis(100);

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

/// The buffer's size: `prefetch`, or more while jobs start fast (about [`HORIZON`] of them,
/// and no more than a quarter of the lease's worth, so none waits long enough to go stale).
struct Pace {
    floor: usize,
    ceiling: usize,
    horizon: f64,
    /// Jobs started per second, smoothed over the last few windows.
    rate: f64,
    window: Instant,
    starts: usize,
}

impl Pace {
    fn new(s: &Shared) -> Self {
        Self::with(s.config.prefetch, s.config.prefetch_max, s.config.lease)
    }

    fn with(prefetch: usize, prefetch_max: usize, lease: Duration) -> Self {
        Self {
            floor: prefetch,
            // `prefetch 0` keeps nothing at hand (jobs cancellable from any process until
            // they start), whatever the rate.
            ceiling: if prefetch == 0 {
                0
            } else {
                prefetch_max.max(prefetch)
            },
            horizon: HORIZON.min(lease / 4).as_secs_f64(),
            rate: 0.0,
            window: Instant::now(),
            starts: 0,
        }
    }

    fn started(&mut self) {
        self.starts += 1;
    }

    fn target(&mut self) -> usize {
        let elapsed = self.window.elapsed();
        if elapsed >= RATE_WINDOW {
            let now = self.starts as f64 / elapsed.as_secs_f64();
            self.rate = (self.rate + now) / 2.0;
            self.window = Instant::now();
            self.starts = 0;
        }
        ((self.rate * self.horizon) as usize).clamp(self.floor, self.ceiling)
    }
}

/// What a claim task brings back.
struct Claimed {
    /// The rows, and how many of the first were claimed under a key's limits.
    rows: Result<(Vec<JobRow>, usize), JobsError>,
    /// When the claim started (no later than its leases did): a kept job's age counts from
    /// here, not from when the loop got round to taking the rows.
    at: i64,
    /// Fewer claimed than asked for: nothing else is claimable now.
    short: bool,
}

/// The rescue and gauge chores the loop does on its way round.
struct Chores {
    rescue_every: i64,
    last_rescue: i64,
    stats_every: Option<i64>,
    last_stats: i64,
    stats_task: Option<JoinHandle<()>>,
    rescue_task: Option<JoinHandle<()>>,
}

impl Chores {
    fn new(s: &Shared) -> Self {
        Self {
            rescue_every: duration_ms(s.config.lease / 2).max(100),
            last_rescue: i64::MIN,
            stats_every: s.config.stats_interval.map(duration_ms),
            last_stats: i64::MIN,
            stats_task: None,
            rescue_task: None,
        }
    }

    fn run(&mut self, s: &Shared) {
        let now = s.jobs.now();
        // The count reads every row's state: on its own task, one at a time, so a large store
        // never delays a claim.
        let counting = self.stats_task.as_ref().is_some_and(|t| !t.is_finished());
        if let Some(every) = self
            .stats_every
            .filter(|e| !counting && now.saturating_sub(self.last_stats) >= *e)
        {
            self.last_stats = now;
            let jobs = s.jobs.clone();
            self.stats_task = Some(tokio::spawn(async move {
                match jobs.stats().await {
                    Ok(stats) => stats.export(),
                    Err(e) => {
                        tracing::warn!(error = %sanitize(&e.to_string()), every_ms = every, "counting jobs for the gauge failed")
                    }
                }
            }));
        }
        // The rescue too, so the starts of the jobs at hand never wait for its round trip.
        let rescuing = self.rescue_task.as_ref().is_some_and(|t| !t.is_finished());
        if !rescuing && now.saturating_sub(self.last_rescue) >= self.rescue_every {
            self.last_rescue = now;
            let store = s.jobs.inner.store.clone();
            let wake = s.jobs.inner.wake.clone();
            self.rescue_task = Some(tokio::spawn(async move {
                match store.rescue(now).await {
                    // Claimable again (no `NOTIFY` for an update): an idle loop looks.
                    Ok(n) if n > 0 => wake.notify_waiters(),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %sanitize(&e.to_string()), "rescuing expired leases failed")
                    }
                }
            }));
        }
    }
}

pub(crate) async fn run_loop(s: Arc<Shared>, stop: CancellationToken) -> Result<(), JobsError> {
    let slots = Arc::new(Semaphore::new(s.config.concurrency));
    let wake = s.jobs.inner.wake.clone();
    let listener = listen(&s, &stop);
    let mut tasks = JoinSet::new();
    let mut buffer: VecDeque<(JobRow, i64)> = VecDeque::new();
    let mut chores = Chores::new(&s);
    let mut pace = Pace::new(&s);
    let mut claiming: Option<JoinHandle<Claimed>> = None;
    // Set when a claim came back short: no claim until a wake-up or its time.
    let mut idle: Option<Idle> = None;
    // After a short claim: when the next job is due.
    let mut looking: Option<JoinHandle<Option<i64>>> = None;
    // A job ended (its slot is free): wakes a loop idle because due jobs were blocked.
    let ended = Arc::new(Notify::new());
    // Re-armed before each claim, so a job queued while the claim looks wakes the next one.
    let mut woken = Box::pin(wake.notified());
    // The redaction rules compile on first need (a text that triggers them): seconds in a debug
    // build on a busy machine. Left to a job's first failure, that ran on the runtime's thread
    // between deciding the retry's time and storing it: on a single-threaded runtime this loop
    // overslept its idle wait by that long, and the retry was stored already due (taken again
    // at once, its backoff lost). Compiled here, all of them, on a blocking thread before the
    // first claim (`sanitize("")` no longer compiles anything: clean text needs no rule).
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tokio::task::spawn_blocking(|| steadfast::Sanitizer::default_rules().compile_all()) => {}
    }
    while !stop.is_cancelled() {
        while tasks.try_join_next().is_some() {}
        chores.run(&s);
        start_buffered(&s, &slots, &ended, &mut buffer, &mut tasks, &mut pace);
        let free = slots.available_permits();
        if claiming.is_none() && idle.is_none() {
            let target = pace.target();
            let want = (free + target).saturating_sub(buffer.len());
            // Refill once the buffer is down to half: one claim per half-buffer, not per job.
            if want > 0 && buffer.len() <= target / 2 {
                woken = Box::pin(wake.notified());
                woken.as_mut().enable();
                claiming = Some(tokio::spawn(claim(s.clone(), want)));
            }
        }
        let asleep = idle.is_some();
        let blocked = idle.is_some_and(|i| i.blocked);
        let until = idle.map_or_else(Instant::now, |i| i.until);
        tokio::select! {
            _ = stop.cancelled() => break,
            r = async { claiming.as_mut().expect("a claim in flight").await }, if claiming.is_some() => {
                claiming = None;
                let look;
                (idle, look) = took(&s, r, &mut buffer);
                if look {
                    // A retry this worker stored may be due before the store's answer comes.
                    idle = idle.and_then(|i| retry_wake(&s, i));
                    let store = s.jobs.inner.store.clone();
                    looking = Some(tokio::spawn(async move { next_due(&store).await.ok().flatten() }));
                }
            }
            due = async { looking.as_mut().expect("a lookup in flight").await }, if looking.is_some() => {
                looking = None;
                if let (Some(i), Ok(Some(due))) = (idle, due) {
                    idle = wake_at(i, due, s.jobs.now(), Instant::now(), s.config.poll_interval, true);
                }
            }
            // This worker stored a retry (or deferred a job): an idle loop wakes at its time.
            _ = s.retimed.notified(), if asleep => idle = idle.and_then(|i| retry_wake(&s, i)),
            // A slot is free: start the next buffered job, or claim for it. (A slot that
            // freed since `start_buffered` looked, with jobs at hand, completes at once.)
            p = slots.clone().acquire_owned(), if free == 0 || !buffer.is_empty() => drop(p),
            _ = woken.as_mut(), if asleep => idle = None,
            _ = ended.notified(), if blocked => idle = None,
            _ = tokio::time::sleep_until(until), if asleep => idle = None,
        }
    }
    if let Some(l) = looking {
        l.abort();
    }
    if let Some(l) = listener {
        l.abort();
    }
    wind_down(&s, claiming, buffer, tasks, chores).await;
    Ok(())
}

/// Stops claiming: hands back what was never started (and what a claim in flight brings),
/// lets running jobs finish (the handle bounds this by the grace period and then cancels them,
/// which releases their leases), and writes what the completer holds.
async fn wind_down(
    s: &Shared,
    claiming: Option<JoinHandle<Claimed>>,
    mut buffer: VecDeque<(JobRow, i64)>,
    mut tasks: JoinSet<()>,
    chores: Chores,
) {
    if let Some(c) = claiming {
        took(s, c.await, &mut buffer);
    }
    for (row, _) in buffer.drain(..) {
        if s.jobs.inner.take_kept(row.id).is_none() {
            continue;
        }
        if let Err(e) = release(s, &row).await {
            tracing::warn!(error = %sanitize(&e.to_string()), "releasing a prefetched job failed; it will run after its lease");
        }
    }
    while tasks.join_next().await.is_some() {}
    if let Some(c) = s.completer.get() {
        c.flush().await;
    }
    if let Some(t) = chores.stats_task {
        t.abort();
    }
    if let Some(t) = chores.rescue_task {
        let _ = t.await;
    }
}

/// Starts buffered jobs in the free slots.
fn start_buffered(
    s: &Arc<Shared>,
    slots: &Arc<Semaphore>,
    ended: &Arc<Notify>,
    buffer: &mut VecDeque<(JobRow, i64)>,
    tasks: &mut JoinSet<()>,
    pace: &mut Pace,
) {
    let stale_after = duration_ms(s.config.lease / 2);
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
        pace.started();
        let stale = s.jobs.now().saturating_sub(claimed_at) > stale_after;
        tasks.spawn(run_one(s.clone(), row, stale, permit, ended.clone()));
    }
}

async fn run_one(
    shared: Arc<Shared>,
    row: JobRow,
    stale: bool,
    permit: OwnedSemaphorePermit,
    ended: Arc<Notify>,
) {
    // The loop waits on the semaphore: freeing the slot (here, or in `run` as soon as the
    // handler is done) wakes it.
    let r = if stale {
        let r = release(&shared, &row).await;
        drop(permit);
        // It is claimable again (no `NOTIFY` for an update): a loop idle since its last
        // claim came back short looks again.
        shared.jobs.inner.wake.notify_waiters();
        r
    } else {
        shared.run(row, Some(permit)).await
    };
    if let Err(e) = r {
        tracing::warn!(error = %sanitize(&e.to_string()), "settling a job failed; its lease will expire and it will be retried");
    }
    ended.notify_waiters();
}

/// Claims up to `want` jobs. When the next job is due is asked afterwards, on a task of its
/// own ([`next_due`]), if this claim comes back short: asked here, it was a second round trip
/// between a job's `NOTIFY` and its start, on every idle start.
async fn claim(s: Arc<Shared>, want: usize) -> Claimed {
    let at = s.jobs.now();
    s.passed(at);
    let rows = s.claim(want).await;
    let short = rows.as_ref().is_ok_and(|r| r.0.len() < want);
    Claimed { rows, at, short }
}

/// No claim until `until` or a wake-up; `blocked`: jobs are due but were not claimable (an
/// ordering key's head is running, a key is at its limit), so a job ending wakes it too.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Idle {
    until: Instant,
    blocked: bool,
}

/// What an idle loop does once it learns a job is due at `due` (ms; `now` is the clock's
/// time, `at` the same moment as an `Instant`): `None` claims at once; otherwise it sleeps
/// until the due time if that comes before its current deadline. `blocked_if_due`: the
/// store said `due` is the first job in claim order, yet the claim just came back short —
/// it is due but not claimable (see [`Idle`]), so look again when a job ends or soon.
fn wake_at(
    idle: Idle,
    due: i64,
    now: i64,
    at: Instant,
    poll: Duration,
    blocked_if_due: bool,
) -> Option<Idle> {
    if due <= now {
        if !blocked_if_due {
            return None;
        }
        return Some(Idle {
            until: at + poll.min(Duration::from_millis(50)),
            blocked: true,
        });
    }
    let until = at + Duration::from_millis(u64::try_from(due - now).unwrap_or(u64::MAX));
    Some(Idle {
        until: idle.until.min(until),
        blocked: idle.blocked,
    })
}

/// An idle loop's deadline, moved to the earliest retry this worker stored if one is pending.
fn retry_wake(s: &Shared, idle: Idle) -> Option<Idle> {
    let Some(due) = s.retry_due() else {
        return Some(idle);
    };
    let poll = s.config.poll_interval;
    wake_at(idle, due, s.jobs.now(), Instant::now(), poll, false)
}

/// Takes a claim's rows into the buffer; returns how long to wait before the next claim
/// (`None`: claim again as soon as there is room), and whether to ask when the next job is
/// due (the claim came back short).
fn took(
    s: &Shared,
    r: Result<Claimed, tokio::task::JoinError>,
    buffer: &mut VecDeque<(JobRow, i64)>,
) -> (Option<Idle>, bool) {
    let after = |d: Duration| {
        let idle = Idle {
            until: Instant::now() + d,
            blocked: false,
        };
        (Some(idle), false)
    };
    let poll = s.config.poll_interval;
    let c = match r {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "the claim task failed; retrying after the poll interval");
            return after(poll);
        }
    };
    let (mut rows, limited) = match c.rows {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %sanitize(&e.to_string()), "claiming jobs failed; retrying after the poll interval");
            return after(poll);
        }
    };
    let claimed_at = c.at;
    s.jobs
        .inner
        .kept
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(rows.iter().map(|r| (r.id, (s.id.clone(), r.attempts))));
    // Jobs claimed under a key's limits go to the front: their key's room (and rate) was
    // spent at the claim, so they start at the next free slot, not behind a backlog kept at
    // hand — a rate that holds at the claims holds at the starts, as its users read it, only
    // while the wait between the two stays short (and a kept job of a `max_running` key
    // holds one of its places without running).
    let free: Vec<_> = rows.split_off(limited);
    for r in rows.into_iter().rev() {
        buffer.push_front((r, claimed_at));
    }
    buffer.extend(free.into_iter().map(|r| (r, claimed_at)));
    // Short: nothing more is due now (the wake-up armed before this claim catches a job
    // queued since). No claim until the next due job (the caller asks when that is), a retry
    // this worker stores, a wake-up, or the poll interval.
    let idle = c.short.then(|| Idle {
        until: Instant::now() + poll,
        blocked: false,
    });
    (idle, c.short)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_buffer_follows_the_start_rate_between_prefetch_and_its_max() {
        let mut p = Pace::with(32, 512, Duration::from_secs(30));
        assert_eq!(p.target(), 32, "no rate yet: prefetch");
        // 2,000 starts a second: about 100 ms of them, 200.
        for _ in 0..6 {
            for _ in 0..200 {
                p.started();
            }
            tokio::time::advance(RATE_WINDOW).await;
            p.target();
        }
        let t = p.target();
        assert!((190..=200).contains(&t), "{t}");
        // 20,000 a second: capped at prefetch_max.
        for _ in 0..6 {
            for _ in 0..2_000 {
                p.started();
            }
            tokio::time::advance(RATE_WINDOW).await;
            p.target();
        }
        assert_eq!(p.target(), 512);
        // Slow jobs (10 a second): back to prefetch.
        for _ in 0..12 {
            p.started();
            tokio::time::advance(RATE_WINDOW).await;
            p.target();
        }
        assert_eq!(p.target(), 32);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_loop_wakes_at_the_next_due_time_or_claims_at_once() {
        let at = Instant::now();
        let poll = Duration::from_secs(1);
        let idle = Idle {
            until: at + poll,
            blocked: false,
        };
        // Due in 250 ms: the deadline moves to then (not the poll's), exactly.
        let i = wake_at(idle, 10_250, 10_000, at, poll, false).unwrap();
        assert_eq!(i.until - at, Duration::from_millis(250));
        assert!(!i.blocked);
        // Due after the current deadline: the deadline stays.
        assert_eq!(wake_at(idle, 15_000, 10_000, at, poll, true), Some(idle));
        // Already due: a stored retry is claimed at once...
        assert_eq!(wake_at(idle, 9_990, 10_000, at, poll, false), None);
        // ...but when the store's first job in claim order is due and the claim just came back
        // short, it is blocked (an ordering key's head runs, a key is at its limit): look again
        // when a job ends, or in 50 ms.
        let b = wake_at(idle, 10_000, 10_000, at, poll, true).unwrap();
        assert!(b.blocked);
        assert_eq!(b.until - at, Duration::from_millis(50));
    }

    #[tokio::test(start_paused = true)]
    async fn a_max_at_or_below_prefetch_keeps_prefetch_and_a_short_lease_keeps_less() {
        let mut fixed = Pace::with(8, 0, Duration::from_secs(30));
        let mut short = Pace::with(1, 10_000, Duration::from_millis(300));
        for _ in 0..6 {
            for _ in 0..1_000 {
                fixed.started();
                short.started();
            }
            tokio::time::advance(RATE_WINDOW).await;
            fixed.target();
            short.target();
        }
        assert_eq!(fixed.target(), 8);
        // 10,000 a second, but a quarter of a 300 ms lease is 75 ms: about 750.
        let t = short.target();
        assert!((700..=750).contains(&t), "{t}");
    }
}
