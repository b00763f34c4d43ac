//! A cron schedule and a flaky handler whose retries survive a restart.
//!
//! ```text
//! cargo run -p steadfast-jobs --example cron_and_flaky -- 8     # runs 8 s, then stops
//! cargo run -p steadfast-jobs --example cron_and_flaky -- 15    # run it again: the retry resumes
//! ```
//!
//! The state lives in `steadfast-jobs-example.db` (SQLite, WAL) in the current directory.
//! The flaky job fails twice with a 503; each retry is stored 5 s, then 10 s later (no worker
//! sleeps). Stop the process between attempts and start it again: the job runs at its stored
//! time. The cron schedule (every 5 s, declared with a key) is not duplicated by restarts.

use std::time::Duration;

use steadfast::{ErrorClass, Jitter, RetryPolicy};
use steadfast_jobs::{JobContext, JobOptions, Jobs, ScheduleOptions, When, WorkerConfig, handler};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let run_for: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let jobs = Jobs::builder()
        .defaults(RetryPolicy::builder().max_attempts(5))
        .handler(handler("heartbeat", |ctx: JobContext, _: ()| async move {
            println!(
                "heartbeat for fire time {}",
                ctx.fire_at().map(|t| t.to_rfc3339()).unwrap_or_default()
            );
            Ok::<(), ErrorClass>(())
        }))
        .handler(
            handler("charge", |ctx: JobContext, amount: u32| async move {
                // A real handler passes ctx.idempotency_key() to the payment API.
                if ctx.attempt() < 3 {
                    println!(
                        "charge {amount}: attempt {} failed (503); retry stored",
                        ctx.attempt()
                    );
                    return Err(ErrorClass::from_status(503));
                }
                println!(
                    "charge {amount}: attempt {} succeeded (key {})",
                    ctx.attempt(),
                    ctx.idempotency_key()
                );
                Ok(())
            })
            .retry(
                RetryPolicy::builder()
                    .base_delay(Duration::from_secs(5))
                    .max_delay(Duration::from_secs(60))
                    .jitter(Jitter::None),
            ),
        )
        .on_dead(|job| {
            eprintln!(
                "dead letter: job {} ({})",
                job.id,
                job.last_error.as_deref().unwrap_or("")
            )
        })
        .connect("sqlite://steadfast-jobs-example.db")
        .await?;

    // Declared at every start; the key and the unique key keep them single.
    jobs.schedule(
        When::cron("*/5 * * * * *"),
        "heartbeat",
        &(),
        ScheduleOptions::new().key("heartbeat"),
    )
    .await?;
    let id = jobs
        .queue("charge", &42u32, JobOptions::new().unique_key("charge-42"))
        .await?;
    if let Some(job) = jobs.get(id).await? {
        println!(
            "charge job {id}: {} after {} attempts, next run {}",
            job.state,
            job.attempts,
            job.run_at.to_rfc3339()
        );
    }

    let worker = jobs.worker(WorkerConfig::new().concurrency(4)).start()?;
    tokio::time::sleep(Duration::from_secs(run_for)).await;
    worker.shutdown().await?;
    println!("stopped: {:?}", jobs.stats().await?);
    Ok(())
}
