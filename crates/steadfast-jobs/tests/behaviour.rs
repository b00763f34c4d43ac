//! Every behaviour of the job store, on a manual clock, stepped with `Worker::run_once`:
//! on SQLite always, on PostgreSQL when `STEADFAST_TEST_POSTGRES_URL` is set and ignored tests
//! are included.

mod common;

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::Db;
use steadfast::{BreakerConfig, Classify, ErrorClass, Jitter, RetryPolicy};
use steadfast_jobs::{
    CatchUp, DependencyOptions, JobContext, JobOptions, JobState, Jobs, ManualClock,
    ScheduleOptions, When, WorkerConfig, handler,
};

const T0: &str = "2030-01-01T00:01:00Z";

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A handler failure with a status, an optional Retry-After and a message.
#[derive(Debug)]
struct Fail {
    status: u16,
    after: Option<Duration>,
    msg: String,
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl Classify for Fail {
    fn classify(&self) -> ErrorClass {
        let c = ErrorClass::from_status(self.status);
        match self.after {
            Some(a) => c.with_retry_after(a),
            None => c,
        }
    }
}

fn fail(status: u16) -> Fail {
    Fail {
        status,
        after: None,
        msg: format!("upstream answered {status}"),
    }
}

/// Fails with the statuses in `script` (one per attempt), then succeeds; counts runs.
fn scripted(name: &str, script: Vec<Fail>, runs: Arc<AtomicU32>) -> steadfast_jobs::Registered {
    let script = Arc::new(Mutex::new(script.into_iter().rev().collect::<Vec<_>>()));
    handler(name, move |_ctx: JobContext, _p: serde_json::Value| {
        let script = script.clone();
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            let next = script.lock().unwrap().pop();
            match next {
                Some(f) => Err(f),
                None => Ok(()),
            }
        }
    })
    .into()
}

fn no_jitter() -> steadfast::RetryPolicyBuilder {
    RetryPolicy::builder()
        .base_delay(secs(1))
        .max_delay(secs(600))
        .jitter(Jitter::None)
        .max_attempts(5)
}

async fn connect(db: &Db, clock: &ManualClock, b: steadfast_jobs::JobsBuilder) -> Jobs {
    b.clock(clock.clone())
        .connect_with(db.opts.clone())
        .await
        .expect("connect")
}

both!(
    retries_are_stored_not_slept,
    non_retriable_dies_at_once_then_requeue_and_purge,
    retry_after_and_time_budget,
    policies_are_layered_and_validated_when_queued,
    unique_key_deduplicates,
    ordering_key_is_fifo_per_key,
    open_breaker_defers_without_spending_an_attempt,
    dependency_concurrency_limit,
    expired_lease_is_reclaimed_and_the_late_result_dropped,
    cron_runs_each_fire_time_once_across_workers,
    cron_catch_up_after_downtime,
    interval_delay_and_date,
    cancel_jobs_and_schedules,
    cancel_schedule_during_a_run_stops_it,
    graceful_shutdown_releases_leases,
    head_of_line,
    panicking_handler_is_a_failed_attempt,
    should_retry_veto_dead_letters,
);

async fn retries_are_stored_not_slept(db: Db) {
    let clock = ManualClock::at(t(T0));
    let runs = Arc::new(AtomicU32::new(0));
    let leaky = Fail {
        status: 503,
        after: None,
        msg: "upstream 503 (Authorization: Bearer sk-live-0123456789abcdefghij)".into(),
    };
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder().defaults(no_jitter()).handler(scripted(
            "flaky",
            vec![leaky, fail(502)],
            runs.clone(),
        )),
    )
    .await;
    let id = jobs.queue("flaky", &1, JobOptions::new()).await.unwrap();
    let w = jobs.worker(WorkerConfig::new());
    assert_eq!(w.run_once().await.unwrap(), 1);
    let job = jobs.get(id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Available);
    assert_eq!(job.attempts, 1);
    // Retry 1 of exponential backoff from 1s, no jitter: due 1s later, stored, not slept.
    assert_eq!(job.run_at, t(T0) + chrono::Duration::seconds(1));
    let err = job.last_error.unwrap();
    assert!(
        !err.contains("sk-live-0123456789"),
        "stored error leaks a secret: {err}"
    );
    assert_eq!(job.last_error_code.as_deref(), Some("SERVER_ERROR"));
    // Not due yet: nothing runs.
    assert_eq!(w.run_once().await.unwrap(), 0);
    clock.advance(secs(1));
    assert_eq!(w.run_once().await.unwrap(), 1);
    let job = jobs.get(id).await.unwrap().unwrap();
    assert_eq!(
        job.run_at,
        t(T0) + chrono::Duration::seconds(3),
        "retry 2 waits 2s"
    );
    clock.advance(secs(2));
    assert_eq!(w.run_once().await.unwrap(), 1);
    let job = jobs.get(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Done, 3));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    let stats = jobs.stats().await.unwrap();
    assert_eq!((stats.done, stats.available, stats.dead), (1, 0, 0));
}

async fn should_retry_veto_dead_letters(db: Db) {
    let clock = ManualClock::at(t(T0));
    let h = handler("veto", |_c: JobContext, status: u16| async move {
        Err::<(), _>(fail(status))
    })
    // 502s are retried up to attempt 2; 503 never (a dependency-specific rule, kept in code).
    .should_retry(|err: &Fail, _class, attempt| err.status != 503 && attempt < 2)
    // This dependency's 409 means "busy": retriable, whatever the status says.
    .classify(|err: &Fail| (err.status == 409).then(|| ErrorClass::from_status(503)));
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder().defaults(no_jitter()).handler(h),
    )
    .await;
    let a = jobs
        .queue("veto", &503u16, JobOptions::new())
        .await
        .unwrap();
    let b = jobs
        .queue("veto", &502u16, JobOptions::new())
        .await
        .unwrap();
    let c = jobs
        .queue("veto", &409u16, JobOptions::new())
        .await
        .unwrap();
    let w = jobs.worker(WorkerConfig::new());
    w.run_once().await.unwrap();
    let ja = jobs.get(a).await.unwrap().unwrap();
    assert_eq!((ja.state, ja.attempts), (JobState::Dead, 1));
    assert!(ja.last_error.unwrap().starts_with("declined"));
    assert_eq!(
        jobs.get(b).await.unwrap().unwrap().state,
        JobState::Available
    );
    assert_eq!(
        jobs.get(c).await.unwrap().unwrap().state,
        JobState::Available,
        "409 classified retriable"
    );
    clock.advance(secs(1));
    w.run_once().await.unwrap();
    let jb = jobs.get(b).await.unwrap().unwrap();
    assert_eq!((jb.state, jb.attempts), (JobState::Dead, 2));
}

async fn panicking_handler_is_a_failed_attempt(db: Db) {
    let clock = ManualClock::at(t(T0));
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder().defaults(no_jitter()).handler(handler(
            "boom",
            |ctx: JobContext, _p: ()| async move {
                if ctx.attempt() == 1 {
                    panic!("boom");
                }
                Ok::<(), ErrorClass>(())
            },
        )),
    )
    .await;
    let id = jobs.queue("boom", &(), JobOptions::new()).await.unwrap();
    let w = jobs.worker(WorkerConfig::new());
    assert_eq!(w.run_once().await.unwrap(), 1);
    let job = jobs.get(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Available, 1));
    assert_eq!(job.last_error.as_deref(), Some("the handler panicked"));
    clock.advance(secs(1));
    w.run_once().await.unwrap();
    assert_eq!(jobs.get(id).await.unwrap().unwrap().state, JobState::Done);
}

async fn non_retriable_dies_at_once_then_requeue_and_purge(db: Db) {
    let clock = ManualClock::at(t(T0));
    let runs = Arc::new(AtomicU32::new(0));
    let dead_seen = Arc::new(Mutex::new(Vec::new()));
    let seen = dead_seen.clone();
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder()
            .defaults(no_jitter())
            .handler(scripted("bad", vec![fail(400), fail(400)], runs.clone()))
            .on_dead(move |job| seen.lock().unwrap().push((job.id, job.attempts))),
    )
    .await;
    let id = jobs.queue("bad", &"x", JobOptions::new()).await.unwrap();
    let w = jobs.worker(WorkerConfig::new());
    w.run_once().await.unwrap();
    let job = jobs.get(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Dead, 1));
    assert!(
        job.last_error
            .unwrap()
            .starts_with("non_retriable (CLIENT_ERROR)")
    );
    assert_eq!(*dead_seen.lock().unwrap(), vec![(id, 1)]);
    assert_eq!(jobs.dead(10).await.unwrap().len(), 1);
    // Requeue resets attempts; it dies again (second scripted 400), then succeeds after another requeue.
    assert!(jobs.requeue(id).await.unwrap());
    assert_eq!(jobs.get(id).await.unwrap().unwrap().attempts, 0);
    w.run_once().await.unwrap();
    assert_eq!(jobs.get(id).await.unwrap().unwrap().state, JobState::Dead);
    assert!(!jobs.requeue(id + 1000).await.unwrap());
    // Purge by age: not yet old enough, then old enough.
    clock.advance(secs(3600));
    assert_eq!(jobs.purge(secs(7200)).await.unwrap(), 0);
    assert_eq!(jobs.purge(secs(1800)).await.unwrap(), 1);
    assert!(jobs.get(id).await.unwrap().is_none());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

async fn retry_after_and_time_budget(db: Db) {
    let clock = ManualClock::at(t(T0));
    let runs = Arc::new(AtomicU32::new(0));
    let limited = |after| Fail {
        status: 429,
        after: Some(secs(after)),
        msg: "slow down".into(),
    };
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder()
            .defaults(no_jitter().max_elapsed(secs(60)))
            .handler(scripted(
                "rl",
                vec![limited(30), limited(20), limited(5)],
                runs.clone(),
            )),
    )
    .await;
    let id = jobs.queue("rl", &(), JobOptions::new()).await.unwrap();
    let w = jobs.worker(WorkerConfig::new());
    w.run_once().await.unwrap();
    let job = jobs.get(id).await.unwrap().unwrap();
    assert_eq!(
        job.run_at,
        t(T0) + chrono::Duration::seconds(30),
        "Retry-After wins over 1s backoff"
    );
    clock.advance(secs(30));
    w.run_once().await.unwrap();
    // 30s elapsed since the first attempt + 20s = 50s < 60s: retried.
    assert_eq!(
        jobs.get(id).await.unwrap().unwrap().state,
        JobState::Available
    );
    clock.advance(secs(20));
    // Attempt 3 at 50s, Retry-After 5s would end at 55s < 60: retried; then the script succeeds.
    w.run_once().await.unwrap();
    assert_eq!(
        jobs.get(id).await.unwrap().unwrap().state,
        JobState::Available
    );

    // A second job: its Retry-After would overrun the budget counted from the first attempt.
    let runs2 = Arc::new(AtomicU32::new(0));
    let clock2 = ManualClock::at(t(T0));
    let db2_jobs = Jobs::builder()
        .defaults(no_jitter().max_elapsed(secs(60)))
        .handler(scripted("rl2", vec![limited(1), limited(59)], runs2))
        .clock(clock2.clone())
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    let id2 = db2_jobs.queue("rl2", &(), JobOptions::new()).await.unwrap();
    let w2 = db2_jobs.worker(WorkerConfig::new());
    w2.run_once().await.unwrap();
    clock2.advance(secs(2));
    w2.run_once().await.unwrap();
    let job = db2_jobs.get(id2).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Dead);
    assert!(job.last_error.unwrap().starts_with("time_budget"));
}

async fn policies_are_layered_and_validated_when_queued(db: Db) {
    let clock = ManualClock::at(t(T0));
    let runs = Arc::new(AtomicU32::new(0));
    let h = handler("layered", |_c: JobContext, _p: ()| async {
        Ok::<(), ErrorClass>(())
    })
    .retry(RetryPolicy::builder().max_attempts(3).max_delay(secs(3)));
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder()
            .defaults(RetryPolicy::builder().max_attempts(7).max_delay(secs(30)))
            .handler(h)
            .handler(scripted("plain", vec![], runs)),
    )
    .await;
    let a = jobs.queue("layered", &(), JobOptions::new()).await.unwrap();
    let b = jobs
        .queue(
            "layered",
            &(),
            JobOptions::new().retry(RetryPolicy::builder().max_retries(1)),
        )
        .await
        .unwrap();
    let c = jobs.queue("plain", &(), JobOptions::new()).await.unwrap();
    assert_eq!(
        jobs.get(a).await.unwrap().unwrap().max_attempts,
        3,
        "handler over worker"
    );
    assert_eq!(
        jobs.get(b).await.unwrap().unwrap().max_attempts,
        2,
        "job over handler"
    );
    assert_eq!(
        jobs.get(c).await.unwrap().unwrap().max_attempts,
        7,
        "worker defaults"
    );
    let err = jobs
        .queue(
            "layered",
            &(),
            JobOptions::new().retry(RetryPolicy::builder().base_delay(secs(5))),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid retry policy: base_delay must be <= max_delay (5s > 3s)"
    );
    let err = jobs
        .schedule(
            When::cron("* * * * *"),
            "plain",
            &(),
            ScheduleOptions::new().retry(RetryPolicy::builder().max_attempts(0)),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid retry policy: max_attempts must be >= 1 (got 0)"
    );
    let err = jobs
        .schedule(
            When::cron("61 * * * *"),
            "plain",
            &(),
            ScheduleOptions::new(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("invalid cron"), "{err}");
    // Nothing invalid was stored.
    assert_eq!(jobs.stats().await.unwrap().available, 3);
}

async fn unique_key_deduplicates(db: Db) {
    let clock = ManualClock::at(t(T0));
    let runs = Arc::new(AtomicU32::new(0));
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder().handler(scripted("u", vec![], runs.clone())),
    )
    .await;
    let a = jobs
        .queue("u", &1, JobOptions::new().unique_key("k"))
        .await
        .unwrap();
    let b = jobs
        .queue("u", &2, JobOptions::new().unique_key("k"))
        .await
        .unwrap();
    let c = jobs
        .queue("u", &3, JobOptions::new().unique_key("other"))
        .await
        .unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    jobs.worker(WorkerConfig::new()).run_once().await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // Once done, the key is free again.
    let d = jobs
        .queue("u", &4, JobOptions::new().unique_key("k"))
        .await
        .unwrap();
    assert_ne!(d, a);
}

async fn ordering_key_is_fifo_per_key(db: Db) {
    let clock = ManualClock::at(t(T0));
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder().defaults(no_jitter()).handler(handler(
            "o",
            move |_c: JobContext, n: u32| {
                let o = o.clone();
                async move {
                    let first_try = {
                        let mut o = o.lock().unwrap();
                        let first = !o.contains(&n);
                        o.push(n);
                        first
                    };
                    // Job 1 fails once with a 60s backoff.
                    if n == 1 && first_try {
                        Err(fail(503))
                    } else {
                        Ok(())
                    }
                }
            },
        )),
    )
    .await;
    let w = jobs.worker(WorkerConfig::new().concurrency(10));
    jobs.queue(
        "o",
        &1u32,
        JobOptions::new()
            .ordering_key("k")
            .retry(RetryPolicy::builder().base_delay(secs(60))),
    )
    .await
    .unwrap();
    jobs.queue("o", &2u32, JobOptions::new().ordering_key("k"))
        .await
        .unwrap();
    jobs.queue("o", &3u32, JobOptions::new().ordering_key("other"))
        .await
        .unwrap();
    jobs.queue("o", &4u32, JobOptions::new()).await.unwrap();
    w.run_once().await.unwrap();
    {
        let mut got = order.lock().unwrap().clone();
        got.sort();
        // 2 waits behind its key's retrying head; other keys and unkeyed jobs run.
        assert_eq!(got, vec![1, 3, 4]);
    }
    assert_eq!(
        w.run_once().await.unwrap(),
        0,
        "the head is in backoff, its key waits"
    );
    clock.advance(secs(60));
    assert_eq!(w.run_once().await.unwrap(), 1);
    assert_eq!(w.run_once().await.unwrap(), 1);
    let got = order.lock().unwrap().clone();
    assert_eq!(&got[3..], &[1, 2]);
}

async fn open_breaker_defers_without_spending_an_attempt(db: Db) {
    let clock = ManualClock::at(t(T0));
    let runs = Arc::new(AtomicU32::new(0));
    let r = runs.clone();
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder()
            .defaults(no_jitter())
            .dependency(
                "api",
                DependencyOptions::new().breaker(
                    BreakerConfig::builder()
                        .failure_threshold(1)
                        .reset_timeout(secs(60))
                        .build()
                        .unwrap(),
                ),
            )
            .handler(
                handler("call", move |_c: JobContext, _p: ()| {
                    let r = r.clone();
                    async move {
                        r.fetch_add(1, Ordering::SeqCst);
                        Err::<(), _>(fail(503))
                    }
                })
                .dependency("api"),
            ),
    )
    .await;
    let w = jobs.worker(WorkerConfig::new().concurrency(1));
    let a = jobs.queue("call", &(), JobOptions::new()).await.unwrap();
    w.run_once().await.unwrap(); // a fails: the breaker opens
    assert_eq!(jobs.breaker("api").state(), steadfast::BreakerState::Open);
    let b = jobs.queue("call", &(), JobOptions::new()).await.unwrap();
    clock.advance(secs(1));
    w.run_once().await.unwrap(); // a's retry is due: deferred
    w.run_once().await.unwrap(); // b: deferred
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "nothing ran while the breaker was open"
    );
    for id in [a, b] {
        let job = jobs.get(id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Available);
        let wait = job.run_at - clock.now_utc();
        assert!(
            wait > chrono::Duration::seconds(50) && wait <= chrono::Duration::seconds(60),
            "{wait}"
        );
    }
    assert_eq!(
        jobs.get(a).await.unwrap().unwrap().attempts,
        1,
        "no attempt spent"
    );
    assert_eq!(
        jobs.get(b).await.unwrap().unwrap().attempts,
        0,
        "no attempt spent"
    );
}

trait NowUtc {
    fn now_utc(&self) -> DateTime<Utc>;
}
impl NowUtc for ManualClock {
    fn now_utc(&self) -> DateTime<Utc> {
        steadfast_jobs::Clock::now(self)
    }
}

async fn dependency_concurrency_limit(db: Db) {
    let clock = ManualClock::at(t(T0));
    let gate = Arc::new(tokio::sync::Notify::new());
    let g = gate.clone();
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder()
            .dependency("db", DependencyOptions::new().max_concurrency(1))
            .handler(
                handler("slow", move |_c: JobContext, _p: ()| {
                    let g = g.clone();
                    async move {
                        g.notified().await;
                        Ok::<(), ErrorClass>(())
                    }
                })
                .dependency("db"),
            ),
    )
    .await;
    let a = jobs.queue("slow", &(), JobOptions::new()).await.unwrap();
    let b = jobs.queue("slow", &(), JobOptions::new()).await.unwrap();
    let w = jobs.worker(WorkerConfig::new().concurrency(4));
    let run = tokio::spawn({
        let w = w.clone();
        async move { w.run_once().await }
    });
    // Wait (bounded) until one job is deferred, then let the other finish.
    let mut deferred = None;
    for _ in 0..500 {
        for id in [a, b] {
            let j = jobs.get(id).await.unwrap().unwrap();
            if j.state == JobState::Available && j.attempts == 0 && j.run_at > t(T0) {
                deferred = Some(id);
            }
        }
        if deferred.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    gate.notify_waiters();
    let deferred = deferred.expect("one job deferred by the concurrency limit");
    assert_eq!(run.await.unwrap().unwrap(), 2);
    let j = jobs.get(deferred).await.unwrap().unwrap();
    assert_eq!(j.run_at, t(T0) + chrono::Duration::milliseconds(250));
}

async fn expired_lease_is_reclaimed_and_the_late_result_dropped(db: Db) {
    let clock = ManualClock::at(t(T0));
    let gate = Arc::new(tokio::sync::Notify::new());
    let attempts_seen = Arc::new(Mutex::new(Vec::new()));
    let (g, seen) = (gate.clone(), attempts_seen.clone());
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder().handler(handler("hang", move |ctx: JobContext, _p: ()| {
            let (g, seen) = (g.clone(), seen.clone());
            async move {
                seen.lock()
                    .unwrap()
                    .push((ctx.attempt(), ctx.idempotency_key()));
                if ctx.attempt() == 1 {
                    g.notified().await; // a stalled worker
                }
                Ok::<(), ErrorClass>(())
            }
        })),
    )
    .await;
    let id = jobs.queue("hang", &(), JobOptions::new()).await.unwrap();
    let cfg = WorkerConfig::new().lease(secs(10));
    let stalled = jobs.worker(cfg.clone().id("a"));
    let first = tokio::spawn({
        let s = stalled.clone();
        async move { s.run_once().await }
    });
    for _ in 0..500 {
        if jobs.get(id).await.unwrap().unwrap().state == JobState::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        jobs.worker(cfg.clone().id("b")).run_once().await.unwrap(),
        0,
        "leased"
    );
    clock.advance(secs(11));
    assert_eq!(
        jobs.worker(cfg.id("b")).run_once().await.unwrap(),
        1,
        "rescued and run"
    );
    let job = jobs.get(id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Done, 2));
    // The stalled worker finishes late: its result is not stored over the new one.
    gate.notify_waiters();
    first.await.unwrap().unwrap();
    let again = jobs.get(id).await.unwrap().unwrap();
    assert_eq!((again.state, again.attempts), (JobState::Done, 2));
    let seen = attempts_seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].1, seen[1].1,
        "one idempotency key across attempts and workers"
    );
}

async fn cron_runs_each_fire_time_once_across_workers(db: Db) {
    let clock = ManualClock::at(t(T0));
    let fired = Arc::new(Mutex::new(Vec::new()));
    let f = fired.clone();
    let h = move || {
        let f = f.clone();
        handler("tick", move |ctx: JobContext, _p: ()| {
            let f = f.clone();
            async move {
                f.lock().unwrap().push(ctx.fire_at().unwrap());
                Ok::<(), ErrorClass>(())
            }
        })
    };
    let jobs = connect(&db, &clock, Jobs::builder().handler(h())).await;
    let other = Jobs::builder()
        .handler(h())
        .clock(clock.clone())
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    let opts = ScheduleOptions::new().key("every-5");
    let id = jobs
        .schedule(When::cron("*/5 * * * *"), "tick", &(), opts.clone())
        .await
        .unwrap();
    // Declaring it again (another process starting) keeps the one schedule.
    assert_eq!(
        other
            .schedule(When::cron("*/5 * * * *"), "tick", &(), opts)
            .await
            .unwrap(),
        id
    );
    assert_eq!(
        jobs.get(id).await.unwrap().unwrap().run_at,
        t("2030-01-01T00:05:00Z")
    );
    let (w1, w2) = (
        jobs.worker(WorkerConfig::new()),
        other.worker(WorkerConfig::new()),
    );
    for minute in [5, 10, 15] {
        clock.set(t(&format!("2030-01-01T00:{minute:02}:00Z")));
        let (a, b) = tokio::join!(w1.run_once(), w2.run_once());
        assert_eq!(a.unwrap() + b.unwrap(), 1, "fire time {minute} ran once");
    }
    let got = fired.lock().unwrap().clone();
    assert_eq!(
        got,
        vec![
            t("2030-01-01T00:05:00Z"),
            t("2030-01-01T00:10:00Z"),
            t("2030-01-01T00:15:00Z")
        ]
    );
    // Six fields: seconds first.
    let six = jobs
        .schedule(
            When::cron("30 * * * * *"),
            "tick",
            &(),
            ScheduleOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        jobs.get(six).await.unwrap().unwrap().run_at,
        t("2030-01-01T00:15:30Z")
    );
}

async fn cron_catch_up_after_downtime(db: Db) {
    for (mode, expect) in [
        (CatchUp::Skip, vec![]),
        (CatchUp::One, vec!["00:05"]),
        (
            CatchUp::All,
            vec!["00:05", "00:10", "00:15", "00:20", "00:25", "00:30"],
        ),
    ] {
        let clock = ManualClock::at(t(T0));
        let fired = Arc::new(Mutex::new(Vec::new()));
        let f = fired.clone();
        let name = format!("c_{mode:?}");
        let jobs = connect(
            &db,
            &clock,
            Jobs::builder().handler(handler(name.clone(), move |ctx: JobContext, _p: ()| {
                let f = f.clone();
                async move {
                    f.lock()
                        .unwrap()
                        .push(ctx.fire_at().unwrap().format("%H:%M").to_string());
                    Ok::<(), ErrorClass>(())
                }
            })),
        )
        .await;
        jobs.schedule(
            When::cron("*/5 * * * *"),
            &name,
            &(),
            ScheduleOptions::new().catch_up(mode),
        )
        .await
        .unwrap();
        // No worker ran from 00:01 to 00:32: six fire times missed.
        clock.set(t("2030-01-01T00:32:00Z"));
        let w = jobs.worker(WorkerConfig::new());
        for _ in 0..20 {
            if w.run_once().await.unwrap() == 0 {
                break;
            }
        }
        assert_eq!(*fired.lock().unwrap(), expect, "{mode:?}");
        // Whatever the mode, the schedule resumes at the next fire time.
        clock.set(t("2030-01-01T00:35:00Z"));
        w.run_once().await.unwrap();
        assert_eq!(
            fired.lock().unwrap().last().map(String::as_str),
            Some("00:35"),
            "{mode:?}"
        );
    }
}

async fn interval_delay_and_date(db: Db) {
    let clock = ManualClock::at(t(T0));
    let runs = Arc::new(AtomicU32::new(0));
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder().handler(scripted("i", vec![], runs.clone())),
    )
    .await;
    let d = jobs
        .schedule(When::delay(secs(90)), "i", &(), ScheduleOptions::new())
        .await
        .unwrap();
    assert_eq!(
        jobs.get(d).await.unwrap().unwrap().run_at,
        t("2030-01-01T00:02:30Z")
    );
    let at = jobs
        .schedule(
            When::at(t("2030-06-01T12:00:00Z")),
            "i",
            &(),
            ScheduleOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        jobs.get(at).await.unwrap().unwrap().run_at,
        t("2030-06-01T12:00:00Z")
    );
    let every = jobs
        .schedule(When::every(secs(3600)), "i", &(), ScheduleOptions::new())
        .await
        .unwrap();
    assert_eq!(
        jobs.get(every).await.unwrap().unwrap().run_at,
        t("2030-01-01T01:01:00Z")
    );
    clock.set(t("2030-01-01T01:01:00Z"));
    let w = jobs.worker(WorkerConfig::new());
    assert_eq!(w.run_once().await.unwrap(), 2); // the delayed job and the first interval
    let next = jobs.list(Some(JobState::Available), 10).await.unwrap();
    let times: Vec<_> = next.iter().map(|j| j.run_at).collect();
    assert!(times.contains(&t("2030-01-01T02:01:00Z")), "{times:?}");
    let err = jobs
        .schedule(
            When::every(Duration::from_millis(10)),
            "i",
            &(),
            ScheduleOptions::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid interval: be at least 1s (got 10ms)"
    );
}

async fn cancel_jobs_and_schedules(db: Db) {
    let clock = ManualClock::at(t(T0));
    let runs = Arc::new(AtomicU32::new(0));
    let jobs = connect(
        &db,
        &clock,
        Jobs::builder().handler(scripted("c", vec![], runs.clone())),
    )
    .await;
    let a = jobs.queue("c", &(), JobOptions::new()).await.unwrap();
    let s = jobs
        .schedule(When::cron("* * * * *"), "c", &(), ScheduleOptions::new())
        .await
        .unwrap();
    assert!(jobs.cancel(a).await.unwrap());
    assert!(jobs.cancel(s).await.unwrap());
    assert!(!jobs.cancel(a).await.unwrap(), "already cancelled");
    clock.advance(secs(3600));
    assert_eq!(
        jobs.worker(WorkerConfig::new()).run_once().await.unwrap(),
        0
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        jobs.get(a).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    assert_eq!(jobs.stats().await.unwrap().cancelled, 2);
}

/// Issue 19 item 13: the run in progress when its schedule is cancelled must not plan another
/// fire time (it used to plan from the `active` flag it read before its handler ran).
async fn cancel_schedule_during_a_run_stops_it(db: Db) {
    for overlap in [false, true] {
        let clock = ManualClock::at(t(T0));
        let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel::<()>();
        let release = Arc::new(tokio::sync::Semaphore::new(0));
        let r = release.clone();
        let name = format!("slow_{overlap}");
        let jobs = connect(
            &db,
            &clock,
            Jobs::builder().handler(handler(name.clone(), move |_ctx: JobContext, _p: ()| {
                let (tx, r) = (started_tx.clone(), r.clone());
                async move {
                    let _ = tx.send(());
                    r.acquire().await.unwrap().forget();
                    Ok::<(), ErrorClass>(())
                }
            })),
        )
        .await;
        let first = jobs
            .schedule(
                When::cron("* * * * *"),
                &name,
                &(),
                ScheduleOptions::new().allow_overlap(overlap),
            )
            .await
            .unwrap();
        let schedule = jobs.get(first).await.unwrap().unwrap().schedule_id.unwrap();
        clock.set(t("2030-01-01T00:02:00Z"));
        let w = jobs.worker(WorkerConfig::new());
        let run = tokio::spawn({
            let w = w.clone();
            async move { w.run_once().await }
        });
        started.recv().await.unwrap();
        assert!(jobs.cancel_schedule(schedule).await.unwrap());
        release.add_permits(1);
        assert_eq!(run.await.unwrap().unwrap(), 1);
        assert_eq!(
            jobs.stats().await.unwrap().available,
            0,
            "overlap {overlap}: no next fire time is queued"
        );
        clock.set(t("2030-01-01T01:00:00Z"));
        assert_eq!(w.run_once().await.unwrap(), 0, "overlap {overlap}");
        jobs.store().close().await;
    }
}

async fn graceful_shutdown_releases_leases(db: Db) {
    // Real clock: the worker loop runs; bounds are short.
    let started = Arc::new(AtomicU32::new(0));
    let st = started.clone();
    let jobs = Jobs::builder()
        .handler(handler("stuck", move |ctx: JobContext, quick: bool| {
            let st = st.clone();
            async move {
                st.fetch_add(1, Ordering::SeqCst);
                if !quick {
                    // Ignores cancellation: the worker must still let go after the grace.
                    std::future::pending::<()>().await;
                }
                let _ = ctx;
                Ok::<(), ErrorClass>(())
            }
        }))
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    let stuck = jobs
        .queue("stuck", &false, JobOptions::new())
        .await
        .unwrap();
    let handle = jobs
        .worker(
            WorkerConfig::new()
                .grace(Duration::from_millis(300))
                .poll_interval(Duration::from_millis(50)),
        )
        .start()
        .unwrap();
    for _ in 0..500 {
        if started.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(started.load(Ordering::SeqCst), 1);
    tokio::time::timeout(secs(15), handle.shutdown())
        .await
        .expect("shutdown is bounded")
        .unwrap();
    let job = jobs.get(stuck).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Available, "lease released");
    assert_eq!(job.attempts, 0, "the interrupted attempt is not spent");
    // A stopped worker claims nothing more.
    let quick = jobs.queue("stuck", &true, JobOptions::new()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        jobs.get(quick).await.unwrap().unwrap().state,
        JobState::Available
    );
}

async fn head_of_line(db: Db) {
    // One worker slot: a job retrying with hour-long delays must not hold it.
    let done = Arc::new(AtomicU32::new(0));
    let d = done.clone();
    let jobs = Jobs::builder()
        .handler(handler("hol", move |_c: JobContext, n: u32| {
            let d = d.clone();
            async move {
                if n == 0 {
                    return Err(fail(503));
                }
                d.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        }))
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    let bad = jobs
        .queue(
            "hol",
            &0u32,
            JobOptions::new().retry(
                RetryPolicy::builder()
                    .max_attempts(10)
                    .base_delay(secs(3600))
                    .max_delay(secs(3600))
                    .jitter(Jitter::None),
            ),
        )
        .await
        .unwrap();
    jobs.queue_many("hol", 1..=100u32).await.unwrap();
    let handle = jobs
        .worker(
            WorkerConfig::new()
                .concurrency(1)
                .poll_interval(Duration::from_millis(50)),
        )
        .start()
        .unwrap();
    for _ in 0..3000 {
        if done.load(Ordering::SeqCst) == 100 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    handle.shutdown().await.unwrap();
    assert_eq!(
        done.load(Ordering::SeqCst),
        100,
        "all 100 ran while the other job was in backoff"
    );
    let job = jobs.get(bad).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Available, 1));
    assert!(job.run_at > Utc::now() + chrono::Duration::seconds(3000));
    let stats = jobs.stats().await.unwrap();
    assert_eq!(
        (stats.running, stats.retrying),
        (0, 1),
        "no worker is blocked by the job in backoff"
    );
}

#[cfg(feature = "cli")]
mod cli {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        jobs: steadfast_jobs::cli::JobsArgs,
    }

    async fn run(args: &[&str]) -> Result<String, String> {
        let cli = Cli::try_parse_from(std::iter::once("jobs").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        steadfast_jobs::cli::run(cli.jobs, &mut out)
            .await
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn list_show_dead_requeue_purge_stats() {
        let db = Db::sqlite();
        let runs = Arc::new(AtomicU32::new(0));
        let jobs = Jobs::builder()
            .handler(scripted(
                "bad",
                vec![Fail {
                    status: 400,
                    after: None,
                    msg: "password=hunter2 rejected".into(),
                }],
                runs,
            ))
            .connect_with(db.opts.clone())
            .await
            .unwrap();
        let id = jobs.queue("bad", &(), JobOptions::new()).await.unwrap();
        jobs.worker(WorkerConfig::new()).run_once().await.unwrap();
        let url = db.url.as_str();
        let dead = run(&["--db", url, "dead"]).await.unwrap();
        assert!(dead.contains("dead") && dead.contains("bad"), "{dead}");
        let show = run(&["--db", url, "show", &id.to_string()]).await.unwrap();
        assert!(show.contains("attempts:     1 of 3"), "{show}");
        assert!(!show.contains("hunter2"), "sanitized: {show}");
        let stats = run(&["--db", url, "stats"]).await.unwrap();
        assert!(stats.contains("dead 1"), "{stats}");
        assert_eq!(
            run(&["--db", url, "requeue", &id.to_string()])
                .await
                .unwrap(),
            format!("job {id} requeued\n")
        );
        assert!(
            run(&["--db", url, "requeue", &id.to_string()])
                .await
                .unwrap_err()
                .contains("is not dead")
        );
        let list = run(&["--db", url, "list", "--state", "available"])
            .await
            .unwrap();
        assert!(list.contains(&format!("{id:>8}  available")), "{list}");
        assert!(
            run(&["--db", url, "list", "--state", "zombie"])
                .await
                .unwrap_err()
                .contains("state must be one of")
        );
        assert_eq!(
            run(&["--db", url, "purge", "--older-than", "7d"])
                .await
                .unwrap(),
            "purged 0 dead jobs older than 7days\n"
        );
        assert!(
            run(&["--db", url, "show", "999"])
                .await
                .unwrap_err()
                .contains("no job with id 999")
        );
    }
}
