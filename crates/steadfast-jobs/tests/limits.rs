//! Priorities (with aging), per-key limits and pause/resume, on a manual clock stepped with
//! `Worker::run_once`: on SQLite always, on PostgreSQL when asked for. Limits across real
//! worker processes are in `processes.rs`.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::Db;
use steadfast::ErrorClass;
use steadfast_jobs::{
    JobContext, JobOptions, JobState, Jobs, KeyLimits, ManualClock, WorkerConfig, handler,
};

fn t0() -> DateTime<Utc> {
    "2030-01-01T00:00:00Z".parse().unwrap()
}

/// A handler `name` that records each run's payload, in order; jobs of `hold` never finish
/// while the test holds the semaphore closed (they stay running).
async fn recording(db: &Db, clock: &ManualClock, log: Arc<Mutex<Vec<String>>>) -> Jobs {
    Jobs::builder()
        .handler(handler("rec", move |_ctx: JobContext, p: String| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(p);
                Ok::<(), ErrorClass>(())
            }
        }))
        .clock(clock.clone())
        .priority_aging(Duration::from_secs(10))
        .connect_with(db.opts.clone())
        .await
        .expect("connect")
}

both!(
    priorities_run_in_order_and_age,
    concurrency_per_key_without_blocking_other_keys,
    rate_per_key_spaces_starts_without_spending_attempts,
    pause_holds_and_resume_drains,
    limits_are_validated,
    an_existing_store_upgrades,
);

async fn priorities_run_in_order_and_age(db: Db) {
    let clock = ManualClock::at(t0());
    let log = Arc::new(Mutex::new(Vec::new()));
    let jobs = recording(&db, &clock, log.clone()).await;
    for (name, p) in [("low", 0), ("high", 5), ("mid", 2), ("default", 0)] {
        jobs.queue("rec", &name, JobOptions::new().priority(p))
            .await
            .unwrap();
    }
    let w = jobs.worker(WorkerConfig::new().concurrency(1));
    while w.run_once().await.unwrap() > 0 {}
    assert_eq!(*log.lock().unwrap(), ["high", "mid", "low", "default"]);
    log.lock().unwrap().clear();

    // Aging: a priority-0 job due 31 s before a priority-3 one (3 steps of 10 s) goes first;
    // one due 29 s before goes after.
    jobs.queue("rec", &"old", JobOptions::new()).await.unwrap();
    clock.advance(Duration::from_secs(31));
    jobs.queue("rec", &"urgent", JobOptions::new().priority(3))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(1));
    jobs.queue("rec", &"newer", JobOptions::new())
        .await
        .unwrap();
    clock.advance(Duration::from_secs(28));
    jobs.queue("rec", &"urgent2", JobOptions::new().priority(3))
        .await
        .unwrap();
    while w.run_once().await.unwrap() > 0 {}
    assert_eq!(*log.lock().unwrap(), ["old", "urgent", "urgent2", "newer"]);
    assert_eq!(
        jobs.queue("rec", &"x", JobOptions::new().priority(1001))
            .await
            .unwrap_err()
            .to_string(),
        "invalid priority: be -1000 to 1000 (got 1001)"
    );
}

/// Jobs that stay running until released, per key: the concurrency seen is what the store
/// let start.
struct Held {
    jobs: Jobs,
    running: Arc<Mutex<Vec<String>>>,
    release: Arc<tokio::sync::Semaphore>,
}

async fn held(db: &Db, clock: &ManualClock) -> Held {
    let running = Arc::new(Mutex::new(Vec::new()));
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let (r, rel) = (running.clone(), release.clone());
    let jobs = Jobs::builder()
        .handler(
            handler("call", move |ctx: JobContext, key: String| {
                let (r, rel) = (r.clone(), rel.clone());
                async move {
                    assert_eq!(ctx.attempt(), 1, "waiting for room spent no attempt");
                    r.lock().unwrap().push(key);
                    rel.acquire().await.unwrap().forget();
                    Ok::<(), ErrorClass>(())
                }
            })
            .limit_key("default-key"),
        )
        .clock(clock.clone())
        .connect_with(db.opts.clone())
        .await
        .expect("connect");
    Held {
        jobs,
        running,
        release,
    }
}

async fn concurrency_per_key_without_blocking_other_keys(db: Db) {
    let clock = ManualClock::at(t0());
    let h = held(&db, &clock).await;
    let jobs = &h.jobs;
    jobs.set_limits("openai", KeyLimits::new().max_running(2))
        .await
        .unwrap();
    // The limited key's backlog is queued first: it must not hold up the others.
    for _ in 0..6 {
        jobs.queue("call", &"openai", JobOptions::new().limit_key("openai"))
            .await
            .unwrap();
    }
    for _ in 0..3 {
        jobs.queue("call", &"other", JobOptions::new().limit_key("other"))
            .await
            .unwrap();
    }
    // The handler's default key (no limits).
    jobs.queue("call", &"default-key", JobOptions::new())
        .await
        .unwrap();
    let w = jobs.worker(WorkerConfig::new().concurrency(20));
    let w2 = w.clone();
    let first = tokio::spawn(async move { w2.run_once().await });
    // Two openai (its limit) and every other job start; nothing else.
    wait_until(|| h.running.lock().unwrap().len() == 6).await;
    let mut seen = h.running.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        ["default-key", "openai", "openai", "other", "other", "other"]
    );
    let keys = jobs.keys().await.unwrap();
    let openai = keys.iter().find(|k| k.key == "openai").unwrap();
    assert_eq!((openai.running, openai.waiting), (2, 4));
    // A second worker (another process's, same store) finds no room either.
    let other = jobs.worker(WorkerConfig::new().concurrency(20));
    assert_eq!(other.run_once().await.unwrap(), 0);
    h.release.add_permits(6);
    assert_eq!(first.await.unwrap().unwrap(), 6);
    // Then the rest, two at a time.
    for expect in [2, 2, 0] {
        let w2 = w.clone();
        let round = tokio::spawn(async move { w2.run_once().await });
        h.release.add_permits(expect);
        assert_eq!(round.await.unwrap().unwrap(), expect);
    }
    assert_eq!(jobs.stats().await.unwrap().done, 10);
    // Raising the limit takes effect at once; removing it sends the key back to the fast path.
    jobs.remove_limits("openai").await.unwrap();
    assert!(jobs.keys().await.unwrap().is_empty());
}

async fn wait_until(f: impl Fn() -> bool) {
    for _ in 0..400 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached in 4 s");
}

async fn rate_per_key_spaces_starts_without_spending_attempts(db: Db) {
    let clock = ManualClock::at(t0());
    let runs = Arc::new(AtomicU32::new(0));
    let r = runs.clone();
    let jobs = Jobs::builder()
        .handler(handler("tool", move |ctx: JobContext, _p: ()| {
            let r = r.clone();
            async move {
                assert_eq!(ctx.attempt(), 1);
                r.fetch_add(1, Ordering::SeqCst);
                Ok::<(), ErrorClass>(())
            }
        }))
        .clock(clock.clone())
        .connect_with(db.opts.clone())
        .await
        .unwrap();
    // 2 per 10 s: a burst of 2, then one every 5 s.
    jobs.set_limits("search", KeyLimits::new().rate(2, Duration::from_secs(10)))
        .await
        .unwrap();
    for _ in 0..6 {
        jobs.queue("tool", &(), JobOptions::new().limit_key("search"))
            .await
            .unwrap();
    }
    let w = jobs.worker(WorkerConfig::new().concurrency(10));
    let mut starts = Vec::new();
    for step_ms in (0..=20_000).step_by(500) {
        clock.set(t0() + chrono::Duration::milliseconds(step_ms));
        for _ in 0..w.run_once().await.unwrap() {
            starts.push(step_ms);
        }
    }
    assert_eq!(starts, [0, 0, 5_000, 10_000, 15_000, 20_000]);
    let waiting = jobs.list(Some(JobState::Done), 10).await.unwrap();
    assert!(waiting.iter().all(|j| j.attempts == 1), "no attempt burnt");
    assert_eq!(runs.load(Ordering::SeqCst), 6);
}

async fn pause_holds_and_resume_drains(db: Db) {
    let clock = ManualClock::at(t0());
    let log = Arc::new(Mutex::new(Vec::new()));
    let jobs = recording(&db, &clock, log.clone()).await;
    jobs.pause_key("tenant-a").await.unwrap();
    for _ in 0..3 {
        jobs.queue("rec", &"a", JobOptions::new().limit_key("tenant-a"))
            .await
            .unwrap();
    }
    jobs.queue("rec", &"b", JobOptions::new().limit_key("tenant-b"))
        .await
        .unwrap();
    let w = jobs.worker(WorkerConfig::new().concurrency(10));
    assert_eq!(w.run_once().await.unwrap(), 1, "only the other key runs");
    clock.advance(Duration::from_secs(3600));
    assert_eq!(w.run_once().await.unwrap(), 0, "the pause holds");
    let keys = jobs.keys().await.unwrap();
    assert!(keys[0].paused && keys[0].waiting == 3, "{keys:?}");
    assert!(jobs.resume_key("tenant-a").await.unwrap());
    assert_eq!(w.run_once().await.unwrap(), 3, "resume drains");
    assert!(
        jobs.keys().await.unwrap().is_empty(),
        "no limits left: row gone"
    );

    // A paused queue (handler) holds whatever the key.
    jobs.pause_queue("rec").await.unwrap();
    jobs.queue("rec", &"q", JobOptions::new()).await.unwrap();
    assert_eq!(w.run_once().await.unwrap(), 0);
    assert_eq!(jobs.queues().await.unwrap().len(), 1);
    assert!(jobs.resume_queue("rec").await.unwrap());
    assert_eq!(w.run_once().await.unwrap(), 1);
    assert_eq!(log.lock().unwrap().len(), 5);
    let queued = jobs.list(Some(JobState::Done), 10).await.unwrap();
    assert!(queued.iter().all(|j| j.attempts == 1), "no attempt burnt");
}

async fn limits_are_validated(db: Db) {
    let clock = ManualClock::at(t0());
    let jobs = recording(&db, &clock, Default::default()).await;
    let err = |l: KeyLimits| {
        let jobs = jobs.clone();
        async move { jobs.set_limits("k", l).await.unwrap_err().to_string() }
    };
    assert_eq!(
        err(KeyLimits::new().max_running(0)).await,
        "invalid max_running: be >= 1 (got 0; pause the key to stop it)"
    );
    assert_eq!(
        err(KeyLimits::new().rate(0, Duration::from_secs(1))).await,
        "invalid rate: allow >= 1 start (got 0)"
    );
    assert!(
        err(KeyLimits::new().rate(5000, Duration::from_secs(1)))
            .await
            .starts_with("invalid rate: have a window of 1ms per start")
    );
    assert_eq!(
        jobs.set_limits("", KeyLimits::new())
            .await
            .unwrap_err()
            .to_string(),
        "invalid limit_key: be 1 to 200 bytes (got 0)"
    );
}

/// A store created before the limits migration keeps its jobs and gains the new columns.
async fn an_existing_store_upgrades(db: Db) {
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    use std::borrow::Cow;
    let sql = if db.url.starts_with("sqlite") {
        include_str!("../migrations/sqlite/0001_jobs.sql")
    } else {
        include_str!("../migrations/postgres/0001_jobs.sql")
    };
    sqlx::any::install_default_drivers();
    let mut url = db.url.clone();
    if url.starts_with("sqlite") {
        url.push_str("?mode=rwc");
    }
    let pool = sqlx::any::AnyPoolOptions::new()
        .max_connections(1)
        .after_connect({
            let schema = db.schema.clone();
            move |conn, _| {
                let schema = schema.clone();
                Box::pin(async move {
                    if let Some(s) = schema {
                        use sqlx::Executor;
                        conn.execute(
                            format!(
                                "CREATE SCHEMA IF NOT EXISTS \"{s}\"; SET search_path TO \"{s}\""
                            )
                            .as_str(),
                        )
                        .await?;
                    }
                    Ok(())
                })
            }
        })
        .connect(&url)
        .await
        .unwrap();
    let v1 = Migrator {
        migrations: Cow::Owned(vec![Migration::new(
            1,
            Cow::Borrowed("jobs"),
            MigrationType::Simple,
            Cow::Borrowed(sql),
            false,
        )]),
        ..Migrator::DEFAULT
    };
    v1.run(&pool).await.unwrap();
    sqlx::query(
        "INSERT INTO steadfast_jobs (handler, payload, policy, state, run_at, created_at, updated_at) \
         VALUES ('rec', '\"old\"', $1, 'available', 0, 0, 0)",
    )
    .bind(serde_json::to_string(&steadfast::RetryPolicy::default()).unwrap())
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let clock = ManualClock::at(t0());
    let log = Arc::new(Mutex::new(Vec::new()));
    let jobs = recording(&db, &clock, log.clone()).await;
    let job = jobs.list(None, 10).await.unwrap().pop().unwrap();
    assert_eq!((job.priority, job.limit_key), (0, None));
    assert_eq!(
        jobs.worker(WorkerConfig::new()).run_once().await.unwrap(),
        1
    );
    assert_eq!(*log.lock().unwrap(), ["old"]);
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
    async fn limits_pause_resume_from_the_command_line() {
        let db = Db::sqlite();
        let clock = ManualClock::at(t0());
        let log = Arc::new(Mutex::new(Vec::new()));
        let jobs = recording(&db, &clock, log.clone()).await;
        jobs.queue("rec", &"a", JobOptions::new().limit_key("openai"))
            .await
            .unwrap();
        let url = db.url.as_str();
        assert_eq!(
            run(&[
                "--db",
                url,
                "set-limits",
                "openai",
                "--max-running",
                "4",
                "--rate",
                "60/1m"
            ])
            .await
            .unwrap(),
            "limits of openai set\n"
        );
        assert_eq!(
            run(&["--db", url, "pause", "--key", "openai"])
                .await
                .unwrap(),
            "key openai paused\n"
        );
        assert_eq!(
            run(&["--db", url, "pause", "--queue", "rec"])
                .await
                .unwrap(),
            "queue rec paused\n"
        );
        let table = run(&["--db", url, "limits"]).await.unwrap();
        assert!(table.contains("openai"), "{table}");
        assert!(
            table.lines().any(|l| l.starts_with("openai")
                && l.contains("paused")
                && l.contains(" 4 ")
                && l.contains("60/1m")
                && l.trim_end().ends_with('1')),
            "{table}"
        );
        assert!(table.contains("queue rec paused"), "{table}");
        let w = jobs.worker(WorkerConfig::new());
        assert_eq!(
            w.run_once().await.unwrap(),
            0,
            "paused from the command line"
        );
        assert_eq!(
            run(&["--db", url, "resume", "--queue", "rec"])
                .await
                .unwrap(),
            "queue rec resumed\n"
        );
        assert_eq!(w.run_once().await.unwrap(), 0, "the key is still paused");
        assert_eq!(
            run(&["--db", url, "resume", "--key", "openai"])
                .await
                .unwrap(),
            "key openai resumed\n"
        );
        assert_eq!(
            run(&["--db", url, "resume", "--key", "openai"])
                .await
                .unwrap(),
            "key openai was not paused\n"
        );
        assert_eq!(w.run_once().await.unwrap(), 1);
        let json = run(&["--db", url, "--json", "limits"]).await.unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["keys"][0]["limits"]["rate"]["window_ms"], 60_000);
        assert!(
            run(&["--db", url, "pause"])
                .await
                .unwrap_err()
                .contains("--key"),
            "a target is required"
        );
        assert!(
            run(&["--db", url, "set-limits", "k", "--rate", "ten/1s"])
                .await
                .unwrap_err()
                .contains("rate must start with a whole number")
        );
        assert!(
            run(&["--db", url, "set-limits", "k", "--max-running", "0"])
                .await
                .unwrap_err()
                .contains("invalid max_running: be >= 1")
        );
    }
}
