//! Real worker processes (the `steadfast-jobs-testbed` binary), killed mid-job: leases, restarts
//! and many workers. Bounds are short and configured (lease 1.5 s); every wait is bounded.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Db;
use serde_json::json;
use sqlx::Row;
use steadfast::{Jitter, RetryPolicy};
use steadfast_jobs::{JobOptions, JobState, Jobs};

const LEASE_MS: u64 = 1500;

struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(db: &Db, concurrency: u32) -> Worker {
    spawn_with(db, concurrency, 8)
}

fn spawn_with(db: &Db, concurrency: u32, connections: u32) -> Worker {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_steadfast-jobs-testbed"));
    cmd.args(["--db", &db.url, "--concurrency", &concurrency.to_string()])
        .args(["--connections", &connections.to_string()])
        .args(["--lease-ms", &LEASE_MS.to_string(), "--poll-ms", "100"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    if let Some(s) = &db.schema {
        cmd.args(["--schema", s]);
    }
    Worker(cmd.spawn().expect("spawn the testbed worker"))
}

async fn wait_for<F, Fut>(what: &str, bound: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < bound {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out after {bound:?} waiting for {what}");
}

async fn jobs(db: &Db) -> Jobs {
    let jobs = Jobs::builder().connect_with(db.opts.clone()).await.unwrap();
    // The worker creates these too; the test reads them before any worker may have.
    for sql in [
        "CREATE TABLE IF NOT EXISTS testbed_effects (key TEXT PRIMARY KEY, job BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS testbed_runs (job BIGINT NOT NULL, attempt BIGINT NOT NULL, pid BIGINT NOT NULL, at BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS testbed_spans (job BIGINT NOT NULL, pid BIGINT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL)",
    ] {
        sqlx::query(sql).execute(jobs.store().pool()).await.unwrap();
    }
    jobs
}

async fn count(jobs: &Jobs, sql: &str) -> i64 {
    sqlx::query(sql)
        .fetch_one(jobs.store().pool())
        .await
        .unwrap()
        .try_get(0)
        .unwrap()
}

both!(
    crash_mid_job_completes_once_after_the_lease,
    restart_resumes_backoff_at_its_stored_time,
    key_limits_hold_across_four_processes
);

async fn crash_mid_job_completes_once_after_the_lease(db: Db) {
    let jobs = jobs(&db).await;
    let id = jobs
        .queue(
            "work",
            &json!({"sleep_first_ms": 60_000}),
            JobOptions::new(),
        )
        .await
        .unwrap();
    let mut a = spawn(&db, 2);
    wait_for(
        "the first attempt to start",
        Duration::from_secs(20),
        || async { count(&jobs, "SELECT COUNT(*) FROM testbed_runs").await == 1 },
    )
    .await;
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    let killed = Instant::now();
    let _b = spawn(&db, 2);
    wait_for(
        "the job to complete in another worker",
        Duration::from_secs(20),
        || async { jobs.get(id).await.unwrap().unwrap().state == JobState::Done },
    )
    .await;
    let recovered = killed.elapsed();
    let job = jobs.get(id).await.unwrap().unwrap();
    assert_eq!(job.attempts, 2, "the killed attempt counted, one more ran");
    assert_eq!(
        count(&jobs, "SELECT COUNT(*) FROM testbed_effects").await,
        1,
        "side effect once"
    );
    assert_eq!(
        count(&jobs, "SELECT COUNT(DISTINCT pid) FROM testbed_runs").await,
        2,
        "two processes ran it"
    );
    // Not before the lease ran out (minus what had elapsed of it before the kill).
    assert!(recovered < Duration::from_secs(15), "{recovered:?}");
    eprintln!(
        "crash figure: killed mid-job, completed in the other worker {recovered:?} later (lease {LEASE_MS} ms)"
    );
}

async fn restart_resumes_backoff_at_its_stored_time(db: Db) {
    let jobs = jobs(&db).await;
    let policy = RetryPolicy::builder()
        .base_delay(Duration::from_secs(3))
        .jitter(Jitter::None)
        .max_delay(Duration::from_secs(10));
    let id = jobs
        .queue("flaky", &json!({}), JobOptions::new().retry(policy))
        .await
        .unwrap();
    let mut a = spawn(&db, 2);
    wait_for(
        "the first attempt to fail",
        Duration::from_secs(20),
        || async {
            let j = jobs.get(id).await.unwrap().unwrap();
            j.state == JobState::Available && j.attempts == 1
        },
    )
    .await;
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    let stored = jobs.get(id).await.unwrap().unwrap();
    let first_run: i64 = count(&jobs, "SELECT MIN(at) FROM testbed_runs").await;
    let run_at = stored.run_at.timestamp_millis();
    assert!(
        (3_000..3_500).contains(&(run_at - first_run)),
        "stored 3s after the failure: {}",
        run_at - first_run
    );
    let _b = spawn(&db, 2);
    wait_for(
        "the retry to run in the restarted worker",
        Duration::from_secs(20),
        || async { jobs.get(id).await.unwrap().unwrap().state == JobState::Done },
    )
    .await;
    let second_run: i64 = count(&jobs, "SELECT MAX(at) FROM testbed_runs").await;
    assert!(second_run >= run_at, "ran before its stored time");
    assert!(
        second_run - run_at < 3_000,
        "resumed {} ms after its stored time",
        second_run - run_at
    );
    eprintln!(
        "restart figure: retry stored for +3 s, ran {} ms after its stored time in a new process",
        second_run - run_at
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"]
async fn four_processes_ten_thousand_jobs_once_each() {
    let db = Db::postgres("four_procs");
    let jobs = jobs(&db).await;
    const N: i64 = 10_000;
    jobs.queue_many("work", (0..N).map(|_| json!({"sleep_first_ms": 0})))
        .await
        .unwrap();
    let start = Instant::now();
    let mut workers: Vec<Worker> = (0..4).map(|_| spawn(&db, 16)).collect();
    // Kill one worker mid-run and start a replacement: its claimed jobs come back after the lease.
    wait_for("a tenth of the jobs", Duration::from_secs(60), || async {
        count(&jobs, "SELECT COUNT(*) FROM testbed_effects").await >= N / 10
    })
    .await;
    workers[0].0.kill().unwrap();
    workers.push(spawn(&db, 16));
    wait_for("every job done", Duration::from_secs(90), || async {
        jobs.stats().await.unwrap().done == N as u64
    })
    .await;
    let elapsed = start.elapsed();
    assert_eq!(
        count(&jobs, "SELECT COUNT(*) FROM testbed_effects").await,
        N,
        "each side effect once"
    );
    assert_eq!(
        count(&jobs, "SELECT COUNT(DISTINCT job) FROM testbed_effects").await,
        N
    );
    let runs = count(&jobs, "SELECT COUNT(*) FROM testbed_runs").await;
    assert!(runs >= N);
    assert!(count(&jobs, "SELECT COUNT(DISTINCT pid) FROM testbed_runs").await >= 4);
    let stats = jobs.stats().await.unwrap();
    assert_eq!((stats.dead, stats.available, stats.running), (0, 0, 0));
    eprintln!(
        "4 processes x 10,000 jobs: {elapsed:?}, {runs} runs ({} re-run after the kill)",
        runs - N
    );
}

/// The most spans of `key` open at once (a start and an end at the same instant do not overlap).
async fn max_overlap(jobs: &Jobs, key: &str) -> usize {
    let rows = sqlx::query(
        "SELECT s.start_ms, s.end_ms FROM testbed_spans s JOIN steadfast_jobs j ON j.id = s.job \
         WHERE j.limit_key = $1",
    )
    .bind(key)
    .fetch_all(jobs.store().pool())
    .await
    .unwrap();
    let mut edges: Vec<(i64, i32)> = Vec::new();
    for r in &rows {
        edges.push((r.try_get(0).unwrap(), 1));
        edges.push((r.try_get(1).unwrap(), -1));
    }
    edges.sort(); // ends (-1) before starts (+1) at the same millisecond
    let (mut open, mut max) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        max = max.max(open);
    }
    max as usize
}

/// Issue 25: per-key concurrency is never exceeded, and a rate holds, with four worker
/// processes of 8 slots each claiming from one store; unkeyed jobs are not held up.
async fn key_limits_hold_across_four_processes(db: Db) {
    use steadfast_jobs::KeyLimits;
    let jobs = jobs(&db).await;
    jobs.set_limits("tenant-a", KeyLimits::new().max_running(3))
        .await
        .unwrap();
    jobs.set_limits("tenant-b", KeyLimits::new().max_running(1))
        .await
        .unwrap();
    jobs.set_limits("search", KeyLimits::new().rate(5, Duration::from_secs(1)))
        .await
        .unwrap();
    let sleep = json!({"sleep_ms": 60});
    for (key, n) in [("tenant-a", 36), ("tenant-b", 8), ("search", 15)] {
        for _ in 0..n {
            jobs.queue("limited", &sleep, JobOptions::new().limit_key(key))
                .await
                .unwrap();
        }
    }
    for _ in 0..40 {
        jobs.queue("limited", &sleep, JobOptions::new())
            .await
            .unwrap();
    }
    let _workers: Vec<Worker> = (0..4).map(|_| spawn_with(&db, 8, 3)).collect();
    wait_for("every job done", Duration::from_secs(60), || async {
        jobs.stats().await.unwrap().done == 99
    })
    .await;
    let (a, b) = (
        max_overlap(&jobs, "tenant-a").await,
        max_overlap(&jobs, "tenant-b").await,
    );
    assert!(a <= 3, "tenant-a ran {a} at once (limit 3)");
    assert!(b <= 1, "tenant-b ran {b} at once (limit 1)");
    assert!(a == 3, "the limit was reached, so it was what held ({a})");
    assert!(
        count(&jobs, "SELECT COUNT(DISTINCT pid) FROM testbed_spans").await >= 2,
        "several processes ran them"
    );
    // 5 per second, a burst of 5: 15 starts take at least 2 s, and no span of T holds more
    // than 5 x (1 + T / 1 s) starts. Read at the claims, which the rate governs: every job ran
    // on its first attempt (below), whose claim time is `first_attempt_at`, on the clock the
    // rate was computed with. A handler starts after its claim by however long its process
    // takes to get to it (a slot to free, the CPU under load): read at the handlers, this
    // failed 1 run in 5 under the whole suite's load ("7 starts in 152 ms", more than any
    // 152 ms of claims at this rate holds), so the handlers' starts are only checked to come
    // after their claims.
    let spans: Vec<(i64, i64)> = sqlx::query(
        "SELECT j.first_attempt_at, s.start_ms FROM testbed_spans s JOIN steadfast_jobs j ON j.id = s.job \
         WHERE j.limit_key = 'search'",
    )
    .fetch_all(jobs.store().pool())
    .await
    .unwrap()
    .iter()
    .map(|r| (r.try_get(0).unwrap(), r.try_get(1).unwrap()))
    .collect();
    assert_eq!(spans.len(), 15);
    assert!(
        spans.iter().all(|(claim, start)| start >= claim),
        "{spans:?}"
    );
    let mut starts: Vec<i64> = spans.iter().map(|s| s.0).collect();
    starts.sort();
    let spread = starts[14] - starts[0];
    assert!(spread >= 1_800, "15 claims at 5/s took {spread} ms");
    for (i, s) in starts.iter().enumerate() {
        for (j, e) in starts.iter().enumerate().skip(i) {
            let allowed = 5.0 * (1.0 + (e - s) as f64 / 1000.0) + 1.0;
            assert!(
                ((j - i + 1) as f64) <= allowed,
                "{} claims in {} ms",
                j - i + 1,
                e - s
            );
        }
    }
    // Waiting for room spends no attempt: every job ran on its first attempt, unless an
    // attempt failed for a reason of its own (recorded as its last error: under the whole
    // suite's load, the server can run out of connections).
    let silent = count(
        &jobs,
        "SELECT COALESCE(MAX(attempts), 1) FROM steadfast_jobs WHERE last_error IS NULL",
    )
    .await;
    assert_eq!(silent, 1, "no attempt spent waiting for room");
    eprintln!(
        "key limits across 4 processes: tenant-a max {a} (3), tenant-b max {b} (1), search 15 claims over {spread} ms (5/s)"
    );
}
