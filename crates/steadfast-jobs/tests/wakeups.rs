//! When an idle worker loop wakes: on tokio's paused clock and a `ManualClock` moved in
//! lockstep, so the times are the loop's own arithmetic, not the machine's speed.
//!
//! A task that only yields keeps the runtime busy, so paused time never jumps ahead on its own
//! while a query is in flight: it moves only when the test moves it.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Db;
use steadfast::{Backoff, ErrorClass, ErrorCode, Jitter, RetryPolicy};
use steadfast_jobs::{JobContext, JobOptions, JobState, Jobs, ManualClock, WorkerConfig, handler};

const T0: &str = "2030-01-01T00:00:00Z";

/// Yields until `f` holds, for at most 30 s of real time.
async fn until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if f().await {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("timed out waiting for {what}");
}

/// The worker's poll interval is an hour: only the retry's own time can wake it in time.
/// Before, the loop slept until its next poll unless the lookup it made after its last short
/// claim happened to run after the retry was stored (a retry was up to a poll interval late).
async fn a_stored_retry_starts_at_its_time_not_at_the_next_poll(db: Db) {
    // Before connecting: an idle runtime would let the pool's acquire timeout fire at once.
    let spin = tokio::spawn(async {
        loop {
            tokio::task::yield_now().await;
        }
    });
    let clock = ManualClock::at(T0.parse().unwrap());
    let starts = Arc::new(Mutex::new(Vec::new()));
    let (s, c) = (starts.clone(), clock.clone());
    let jobs = Jobs::builder()
        .clock(clock.clone())
        .handler(
            handler("fails_once", move |ctx: JobContext, _n: u32| {
                let (s, c) = (s.clone(), c.clone());
                async move {
                    use steadfast_jobs::Clock;
                    s.lock().unwrap().push(c.now().timestamp_millis());
                    if ctx.attempt() == 1 {
                        return Err(ErrorClass::retriable(ErrorCode::new("FAILS_ONCE")));
                    }
                    Ok(())
                }
            })
            .retry(
                RetryPolicy::builder()
                    .max_attempts(3)
                    .backoff(Backoff::Constant)
                    .base_delay(Duration::from_secs(1))
                    .jitter(Jitter::None),
            ),
        )
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    let id = jobs
        .queue("fails_once", &1, JobOptions::new())
        .await
        .unwrap();
    let handle = jobs
        .worker(
            WorkerConfig::new()
                .poll_interval(Duration::from_secs(3600))
                .stats_interval(None),
        )
        .start()
        .unwrap();
    until("the retry stored", async || {
        let job = jobs.get(id).await.unwrap().unwrap();
        job.state == JobState::Available && job.attempts == 1
    })
    .await;
    assert_eq!(starts.lock().unwrap().len(), 1);
    // One second on both clocks: the retry is due, and the loop's deadline is now.
    clock.advance(Duration::from_secs(1));
    tokio::time::advance(Duration::from_secs(1)).await;
    until("the retry started", async || {
        starts.lock().unwrap().len() == 2
    })
    .await;
    let s = starts.lock().unwrap().clone();
    assert_eq!(s[1] - s[0], 1000, "the retry started at its time: {s:?}");
    handle.shutdown().await.unwrap();
    let job = jobs.get(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Done, 2));
    // Last: without it, a query's wait lets paused time jump to the pool's acquire timeout.
    spin.abort();
}

#[tokio::test(start_paused = true)]
async fn a_stored_retry_starts_at_its_time_sqlite() {
    a_stored_retry_starts_at_its_time_not_at_the_next_poll(Db::sqlite()).await;
}

#[tokio::test(start_paused = true)]
#[ignore = "needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"]
async fn a_stored_retry_starts_at_its_time_postgres() {
    a_stored_retry_starts_at_its_time_not_at_the_next_poll(Db::postgres("wakeup_retry")).await;
}
