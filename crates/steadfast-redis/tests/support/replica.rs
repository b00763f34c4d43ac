//! One replica of a service sharing state through Redis: the body of the `replica` example and
//! of the cross-process tests' child processes. Output, one event a line: `ready`,
//! `opened UNIX_MS`, `rejected UNIX_MS`, `result TEXT`, `done`.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use steadfast::{BreakerConfig, BreakerEvent, CircuitBreaker, RunOnce};
use steadfast_redis::{RedisOptions, RedisState};

/// Runs the replica named by `args` (see `USAGE`); `Err` carries the usage text.
pub async fn run(args: &[String]) -> Result<(), &'static str> {
    let arg = |i: usize| args.get(i).cloned().ok_or(USAGE);
    let (mode, url, prefix, replica) = (arg(0)?, arg(1)?, arg(2)?, arg(3)?);
    match mode.as_str() {
        "breaker" => {
            let quorum: u32 = arg(4)?.parse().map_err(|_| USAGE)?;
            let failing = arg(5)? == "fail";
            let run_ms: u64 = arg(6)?.parse().map_err(|_| USAGE)?;
            breaker(&url, &prefix, &replica, quorum, failing, run_ms).await;
        }
        "once" => {
            let tasks: usize = arg(4)?.parse().map_err(|_| USAGE)?;
            once(&url, &prefix, &replica, tasks).await;
        }
        _ => return Err(USAGE),
    }
    Ok(())
}

/// How to call [`run`].
pub const USAGE: &str = "usage: replica breaker URL PREFIX REPLICA QUORUM ok|fail RUN_MS\n       replica once URL PREFIX REPLICA TASKS";

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

async fn breaker(url: &str, prefix: &str, replica: &str, quorum: u32, failing: bool, run_ms: u64) {
    let options = RedisOptions::new()
        .prefix(prefix)
        .replica(replica)
        .quorum(quorum)
        .sync_every(Duration::from_millis(200));
    let state = RedisState::connect(url, options)
        .await
        .expect("valid url and options");
    let config = BreakerConfig::builder()
        .failure_threshold(3)
        .window(Duration::from_secs(10))
        .reset_timeout(Duration::from_secs(30))
        .build()
        .expect("valid breaker config");
    let breaker = CircuitBreaker::named("dependency", config);
    state.share_breaker(&breaker).expect("first share");
    breaker.subscribe(|ev| {
        if matches!(ev, BreakerEvent::Opened { .. }) {
            println!("opened {}", unix_ms());
        }
    });
    println!("ready");
    let end = tokio::time::Instant::now() + Duration::from_millis(run_ms);
    let mut rejected = false;
    while tokio::time::Instant::now() < end {
        match breaker.try_acquire() {
            Ok(permit) => permit.record(failing),
            Err(_) if !rejected => {
                rejected = true;
                println!("rejected {}", unix_ms());
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    state.flush(Duration::from_secs(1)).await;
    println!("done");
}

async fn once(url: &str, prefix: &str, replica: &str, tasks: usize) {
    let options = RedisOptions::new()
        .prefix(prefix)
        .replica(replica)
        .op_timeout(Duration::from_millis(500));
    let state = RedisState::connect(url, options)
        .await
        .expect("valid url and options");
    let client = redis::Client::open(url).expect("valid url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis reachable");
    let effects = format!("{prefix}:effects");
    let once = Arc::new(RunOnce::new(
        state.store::<String>(),
        Duration::from_secs(60),
    ));
    println!("ready");
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (once, conn, effects, replica) = (
            once.clone(),
            conn.clone(),
            effects.clone(),
            replica.to_owned(),
        );
        handles.push(tokio::spawn(async move {
            once.run("send-invoice-42", || {
                let (mut conn, effects, replica) = (conn.clone(), &effects, &replica);
                async move {
                    // The side effect, counted where every process can see it.
                    let n: u64 = redis::cmd("INCR")
                        .arg(effects)
                        .query_async(&mut conn)
                        .await?;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Ok::<_, redis::RedisError>(format!("invoice sent (effect #{n} by {replica})"))
                }
            })
            .await
        }));
    }
    for h in handles {
        match h.await {
            Ok(Ok(v)) => println!("result {v}"),
            Ok(Err(e)) => println!("error {e}"),
            Err(e) => println!("error {e}"),
        }
    }
    let _: Result<(), _> = redis::cmd("PING").query_async(&mut conn).await;
}
