//! A worker process for the process tests: `steadfast-jobs-testbed --db URL [--schema S]
//! [--concurrency N] [--lease-ms N] [--poll-ms N]`. Runs until killed.
//!
//! Handlers:
//! - `work {sleep_first_ms}`: records the run; the first attempt sleeps (so a test can kill
//!   the process mid-job); then applies its side effect once, keyed by the job's idempotency key.
//! - `flaky`: records the run; fails with 503 on the first attempt, succeeds after.
//! - `limited {sleep_ms}`: records when it started and ended (`testbed_spans`), sleeping in
//!   between; jobs name their key when queued, the store's limits decide when they start.

use std::time::Duration;

use steadfast::ErrorClass;
use steadfast_jobs::{JobContext, Jobs, StoreOptions, WorkerConfig, handler};

#[derive(serde::Deserialize)]
struct Work {
    sleep_first_ms: u64,
}

#[derive(serde::Deserialize)]
struct Limited {
    sleep_ms: u64,
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let db = arg(&args, "--db").ok_or("--db URL is required")?;
    let num = |name: &str, default: u64| {
        arg(&args, name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let mut opts = StoreOptions::new(db).max_connections(num("--connections", 8) as u32);
    if let Some(s) = arg(&args, "--schema") {
        opts = opts.schema(s);
    }
    // The handlers need the pool, which exists only once connected: a cell set right after.
    let pool_cell = std::sync::Arc::new(std::sync::OnceLock::<sqlx::AnyPool>::new());
    let (p1, p2, p3) = (pool_cell.clone(), pool_cell.clone(), pool_cell.clone());
    let pid = i64::from(std::process::id());
    let jobs = Jobs::builder()
        .handler(handler("work", move |ctx: JobContext, w: Work| {
            let pool = p1.get().cloned();
            async move {
                let pool = pool.ok_or_else(|| ErrorClass::from_status(503))?;
                record(&pool, &ctx, pid).await?;
                if ctx.attempt() == 1 && w.sleep_first_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(w.sleep_first_ms)).await;
                }
                sqlx::query(
                    "INSERT INTO testbed_effects (key, job) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                )
                .bind(ctx.idempotency_key())
                .bind(ctx.id())
                .execute(&pool)
                .await
                .map_err(|_| ErrorClass::from_status(503))?;
                Ok::<(), ErrorClass>(())
            }
        }))
        .handler(handler(
            "flaky",
            move |ctx: JobContext, _p: serde_json::Value| {
                let pool = p2.get().cloned();
                async move {
                    let pool = pool.ok_or_else(|| ErrorClass::from_status(503))?;
                    record(&pool, &ctx, pid).await?;
                    if ctx.attempt() == 1 {
                        return Err(
                            ErrorClass::from_status(503).with_message("flaky: first attempt fails")
                        );
                    }
                    Ok(())
                }
            },
        ))
        .handler(handler("limited", move |ctx: JobContext, l: Limited| {
            let pool = p3.get().cloned();
            async move {
                let pool = pool.ok_or_else(|| ErrorClass::from_status(503))?;
                let started = now_ms();
                tokio::time::sleep(Duration::from_millis(l.sleep_ms)).await;
                sqlx::query(
                    "INSERT INTO testbed_spans (job, pid, start_ms, end_ms) VALUES ($1, $2, $3, $4)",
                )
                .bind(ctx.id())
                .bind(pid)
                .bind(started)
                .bind(now_ms())
                .execute(&pool)
                .await
                .map_err(|_| ErrorClass::from_status(503))?;
                Ok::<(), ErrorClass>(())
            }
        }))
        .connect_with(opts)
        .await?;
    setup(jobs.store().pool()).await?;
    let _ = pool_cell.set(jobs.store().pool().clone());
    let worker = jobs.worker(
        WorkerConfig::new()
            .concurrency(num("--concurrency", 4) as usize)
            .lease(Duration::from_millis(num("--lease-ms", 2000)))
            .poll_interval(Duration::from_millis(num("--poll-ms", 200))),
    );
    let handle = worker.start()?;
    println!("ready {pid}");
    // Run until killed (or until stdin closes, for a graceful stop).
    let _ = tokio::task::spawn_blocking(|| {
        let mut s = String::new();
        while std::io::stdin()
            .read_line(&mut s)
            .map(|n| n > 0)
            .unwrap_or(false)
        {
            s.clear();
        }
    })
    .await;
    handle.shutdown().await?;
    Ok(())
}

async fn setup(pool: &sqlx::AnyPool) -> Result<(), sqlx::Error> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS testbed_effects (key TEXT PRIMARY KEY, job BIGINT NOT NULL)",
    )
    .execute(pool)
    .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS testbed_runs (job BIGINT NOT NULL, attempt BIGINT NOT NULL, pid BIGINT NOT NULL, at BIGINT NOT NULL)",
    )
    .execute(pool)
    .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS testbed_spans (job BIGINT NOT NULL, pid BIGINT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL)",
    )
    .execute(pool)
    .await?;
    Ok(())
}

async fn record(pool: &sqlx::AnyPool, ctx: &JobContext, pid: i64) -> Result<(), ErrorClass> {
    sqlx::query("INSERT INTO testbed_runs (job, attempt, pid, at) VALUES ($1, $2, $3, $4)")
        .bind(ctx.id())
        .bind(i64::from(ctx.attempt()))
        .bind(pid)
        .bind(now_ms())
        .execute(pool)
        .await
        .map_err(|_| ErrorClass::from_status(503))?;
    Ok(())
}
