//! `WorkerConfig::keep_done(false)`: a successful job's row is deleted instead of kept as
//! done; everything else is kept as with the default.

mod common;

use std::time::Duration;

use common::Db;
use steadfast::{Backoff, ErrorClass, ErrorCode, Jitter, RetryPolicy};
use steadfast_jobs::{JobContext, JobOptions, JobState, Jobs, ManualClock, WorkerConfig, handler};

both!(
    a_discarding_worker_deletes_successes_and_keeps_the_rest,
    the_default_keeps_successes_as_done
);

/// `"ok"` succeeds, `"retry"` fails once then succeeds, `"dead"` fails for good.
async fn jobs_with(db: &Db, clock: &ManualClock) -> Jobs {
    Jobs::builder()
        .clock(clock.clone())
        .handler(
            handler("h", |ctx: JobContext, what: String| async move {
                match what.as_str() {
                    "retry" if ctx.attempt() == 1 => {
                        Err(ErrorClass::retriable(ErrorCode::new("ONCE")))
                    }
                    "dead" => Err(ErrorClass::non_retriable(ErrorCode::new("NO"))),
                    _ => Ok(()),
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
        .unwrap()
}

async fn a_discarding_worker_deletes_successes_and_keeps_the_rest(db: Db) {
    let clock = ManualClock::at("2030-01-01T00:00:00Z".parse().unwrap());
    let jobs = jobs_with(&db, &clock).await;
    let ok = jobs.queue("h", &"ok", JobOptions::new()).await.unwrap();
    let retry = jobs.queue("h", &"retry", JobOptions::new()).await.unwrap();
    let dead = jobs.queue("h", &"dead", JobOptions::new()).await.unwrap();
    let w = jobs.worker(WorkerConfig::new().keep_done(false));
    assert_eq!(w.run_once().await.unwrap(), 3);
    assert!(jobs.get(ok).await.unwrap().is_none(), "the success is gone");
    let r = jobs.get(retry).await.unwrap().unwrap();
    assert_eq!(
        (r.state, r.attempts),
        (JobState::Available, 1),
        "the retry is kept"
    );
    assert_eq!(jobs.get(dead).await.unwrap().unwrap().state, JobState::Dead);
    clock.advance(Duration::from_secs(1));
    assert_eq!(w.run_once().await.unwrap(), 1);
    assert!(
        jobs.get(retry).await.unwrap().is_none(),
        "its second attempt succeeded: gone too"
    );
    let stats = jobs.stats().await.unwrap();
    assert_eq!((stats.done, stats.dead, stats.available), (0, 1, 0));
}

async fn the_default_keeps_successes_as_done(db: Db) {
    let clock = ManualClock::at("2030-01-01T00:00:00Z".parse().unwrap());
    let jobs = jobs_with(&db, &clock).await;
    let ok = jobs.queue("h", &"ok", JobOptions::new()).await.unwrap();
    let w = jobs.worker(WorkerConfig::new());
    assert_eq!(w.run_once().await.unwrap(), 1);
    assert_eq!(jobs.get(ok).await.unwrap().unwrap().state, JobState::Done);
}
