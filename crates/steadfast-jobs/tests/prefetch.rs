//! Prefetch: claimed jobs kept at hand beyond the free slots run once each; shutdown and a
//! wait of half the lease give them back unrun with their attempt refunded. Real worker loop
//! (system clock), short bounds.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::Db;
use steadfast::ErrorClass;
use steadfast_jobs::{JobContext, JobOptions, JobState, Jobs, WorkerConfig, handler};

async fn wait_until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..1000 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

both!(
    shutdown_gives_back_prefetched_jobs,
    a_prefetched_job_kept_half_its_lease_is_released,
    a_kept_job_is_cancelled_by_its_process_and_never_runs,
    a_backlog_of_short_jobs_is_claimed_beyond_prefetch_each_once,
    a_limited_keys_job_starts_ahead_of_the_kept_backlog,
);

/// Prefetch is on by default: a job kept at hand has not started, so `cancel` in the worker's
/// process still cancels it (before, it returned false and the job ran).
async fn a_kept_job_is_cancelled_by_its_process_and_never_runs(db: Db) {
    let ran = Arc::new(std::sync::Mutex::new(Vec::new()));
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let (r, rel) = (ran.clone(), release.clone());
    let jobs = Jobs::builder()
        .handler(handler("hold", move |_ctx: JobContext, n: u32| {
            let (r, rel) = (r.clone(), rel.clone());
            async move {
                r.lock().unwrap().push(n);
                rel.acquire().await.unwrap().forget();
                Ok::<(), ErrorClass>(())
            }
        }))
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    let mut ids = Vec::new();
    for n in 0..3u32 {
        ids.push(jobs.queue("hold", &n, JobOptions::new()).await.unwrap());
    }
    // The default configuration, one slot: job 0 runs, jobs 1 and 2 are claimed and kept.
    let handle = jobs
        .worker(WorkerConfig::new().concurrency(1))
        .start()
        .unwrap();
    wait_until("1 running and 2 kept", async || {
        ran.lock().unwrap().len() == 1 && jobs.stats().await.unwrap().running == 3
    })
    .await;
    assert!(
        jobs.cancel(ids[2]).await.unwrap(),
        "a kept job is cancelled"
    );
    assert!(!jobs.cancel(ids[0]).await.unwrap(), "a started job is not");
    assert_eq!(
        jobs.get(ids[2]).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    release.add_permits(10);
    wait_until("jobs 0 and 1 done", async || {
        jobs.stats().await.unwrap().done == 2
    })
    .await;
    handle.shutdown().await.unwrap();
    assert_eq!(
        *ran.lock().unwrap(),
        vec![0, 1],
        "the cancelled job never ran"
    );
    let stats = jobs.stats().await.unwrap();
    assert_eq!(
        (stats.done, stats.cancelled, stats.running),
        (2, 1, 0),
        "{stats:?}"
    );
}

async fn shutdown_gives_back_prefetched_jobs(db: Db) {
    let runs = Arc::new(AtomicU32::new(0));
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let (r, rel) = (runs.clone(), release.clone());
    let jobs = Jobs::builder()
        .handler(handler("hold", move |_ctx: JobContext, _p: ()| {
            let (r, rel) = (r.clone(), rel.clone());
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                rel.acquire().await.unwrap().forget();
                Ok::<(), ErrorClass>(())
            }
        }))
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    for _ in 0..10 {
        jobs.queue("hold", &(), JobOptions::new()).await.unwrap();
    }
    let handle = jobs
        .worker(WorkerConfig::new().concurrency(2).prefetch(4))
        .start()
        .unwrap();
    // Two run, four more are claimed and kept.
    wait_until("2 running and 4 kept", async || {
        runs.load(Ordering::SeqCst) == 2 && jobs.stats().await.unwrap().running == 6
    })
    .await;
    // Shut down (stop claiming first), then let the two running ones finish.
    let (stopped, _) = tokio::join!(handle.shutdown(), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        release.add_permits(2);
    });
    stopped.unwrap();
    let stats = jobs.stats().await.unwrap();
    // The two that ran finished; the four kept went back unrun, attempts refunded.
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(
        (stats.running, stats.done, stats.available),
        (0, 2, 8),
        "{stats:?}"
    );
    let waiting = jobs.list(Some(JobState::Available), 20).await.unwrap();
    assert!(waiting.iter().all(|j| j.attempts == 0), "{waiting:?}");
    // Another worker drains them, each once.
    release.add_permits(100);
    let w = jobs.worker(WorkerConfig::new().concurrency(4));
    while w.run_once().await.unwrap() > 0 {}
    assert_eq!(runs.load(Ordering::SeqCst), 10);
    assert_eq!(jobs.stats().await.unwrap().done, 10);
}

async fn a_prefetched_job_kept_half_its_lease_is_released(db: Db) {
    let runs = Arc::new(AtomicU32::new(0));
    let r = runs.clone();
    let jobs = Jobs::builder()
        .handler(handler("slow", move |ctx: JobContext, _p: ()| {
            let r = r.clone();
            async move {
                assert_eq!(ctx.attempt(), 1, "a released job's attempt is refunded");
                r.fetch_add(1, Ordering::SeqCst);
                // Longer than half the lease: the kept jobs go stale meanwhile.
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok::<(), ErrorClass>(())
            }
        }))
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    for _ in 0..4 {
        jobs.queue("slow", &(), JobOptions::new()).await.unwrap();
    }
    let handle = jobs
        .worker(
            WorkerConfig::new()
                .concurrency(1)
                .prefetch(3)
                .lease(Duration::from_millis(300)),
        )
        .start()
        .unwrap();
    wait_until("all done", async || jobs.stats().await.unwrap().done == 4).await;
    handle.shutdown().await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 4, "each ran once");
    let done = jobs.list(Some(JobState::Done), 10).await.unwrap();
    assert!(done.iter().all(|j| j.attempts == 1), "{done:?}");
}

/// Issue 35: claims run beside the starting of jobs and the buffer grows past `prefetch`
/// while short jobs start fast (how far is `Pace`'s unit test, on a paused clock); with both,
/// every job of a backlog still runs exactly once.
async fn a_backlog_of_short_jobs_is_claimed_beyond_prefetch_each_once(db: Db) {
    let ran = Arc::new(std::sync::Mutex::new(
        std::collections::HashMap::<i64, u32>::new(),
    ));
    let r = ran.clone();
    let jobs = Jobs::builder()
        .handler(handler("noop", move |ctx: JobContext, _p: ()| {
            let r = r.clone();
            async move {
                *r.lock().unwrap().entry(ctx.id()).or_default() += 1;
                Ok::<(), ErrorClass>(())
            }
        }))
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    let n = 1_500;
    jobs.queue_many("noop", (0..n).map(|_| ())).await.unwrap();
    let config = WorkerConfig::new()
        .concurrency(4)
        .prefetch(4)
        .prefetch_max(400);
    let handle = jobs.worker(config).start().unwrap();
    wait_until("all done", async || jobs.stats().await.unwrap().done == n).await;
    handle.shutdown().await.unwrap();
    let ran = ran.lock().unwrap().clone();
    assert!(ran.values().all(|&k| k == 1), "a job ran twice");
    assert_eq!(ran.len() as u64, n);
    let stats = jobs.stats().await.unwrap();
    assert_eq!((stats.running, stats.available), (0, 0), "{stats:?}");
}

/// A job claimed under a key's limits (its room, its rate, spent at the claim) starts at the
/// next free slot, ahead of the jobs kept at hand: behind them, a rate that held at the claims
/// did not hold at the starts.
async fn a_limited_keys_job_starts_ahead_of_the_kept_backlog(db: Db) {
    let ran = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let (r, rel) = (ran.clone(), release.clone());
    let jobs = Jobs::builder()
        .handler(handler("hold", move |_ctx: JobContext, name: String| {
            let (r, rel) = (r.clone(), rel.clone());
            async move {
                r.lock().unwrap().push(name);
                rel.acquire().await.unwrap().forget();
                Ok::<(), ErrorClass>(())
            }
        }))
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    jobs.set_limits(
        "api",
        steadfast_jobs::KeyLimits::new().rate(5, Duration::from_secs(1)),
    )
    .await
    .unwrap();
    for n in 0..6 {
        jobs.queue("hold", &format!("free-{n}"), JobOptions::new())
            .await
            .unwrap();
    }
    // One slot: free-0 runs, the other five are kept at hand.
    let handle = jobs
        .worker(WorkerConfig::new().concurrency(1))
        .start()
        .unwrap();
    wait_until("1 running and 5 kept", async || {
        ran.lock().unwrap().len() == 1 && jobs.stats().await.unwrap().running == 6
    })
    .await;
    jobs.queue("hold", &"limited", JobOptions::new().limit_key("api"))
        .await
        .unwrap();
    wait_until("the limited job claimed", async || {
        jobs.stats().await.unwrap().running == 7
    })
    .await;
    release.add_permits(100);
    wait_until("all done", async || jobs.stats().await.unwrap().done == 7).await;
    handle.shutdown().await.unwrap();
    let ran = ran.lock().unwrap().clone();
    assert_eq!(ran[..2], ["free-0", "limited"], "{ran:?}");
    assert_eq!(ran.len(), 7);
}
