//! Redis killed in the middle of a load run, then restarted: no call waits longer than the
//! bound, every replica keeps working on local state, and it rejoins when Redis returns.
//!
//! Starts its own `redis-server` on a free port (so it can kill it); gated like the other
//! Redis tests.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use steadfast::{BreakerConfig, BreakerState, CallKeys, CallLimit, CircuitBreaker, RunOnce};
use steadfast_redis::{RedisOptions, RedisState};
use tokio::time::Instant;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start(port: u16) -> Server {
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server on PATH");
    let server = Server(child);
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).expect("url");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut c) = client.get_multiplexed_async_connection().await
            && redis::cmd("PING").query_async::<()>(&mut c).await.is_ok()
        {
            return server;
        }
        assert!(Instant::now() < deadline, "redis-server did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn signal(server: &Server, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &server.0.id().to_string()])
        .status()
        .expect("kill(1)");
    assert!(status.success());
}

async fn wait_until(what: &str, within: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL (and redis-server on PATH)"]
async fn redis_killed_mid_load_falls_back_then_rejoins() {
    assert!(
        std::env::var("STEADFAST_TEST_REDIS_URL").is_ok(),
        "this test needs Redis: set STEADFAST_TEST_REDIS_URL (and redis-server on PATH)"
    );
    let port = free_port();
    let server = start(port).await;
    let url = format!("redis://127.0.0.1:{port}");
    let bound = Duration::from_millis(50);
    let state = RedisState::connect(
        &url,
        RedisOptions::new()
            .prefix("outage")
            .op_timeout(bound)
            .sync_every(Duration::from_millis(100)),
    )
    .await
    .unwrap();
    assert!(state.is_up());

    let limit = CallLimit::builder()
        .per_session(1_000_000, Duration::from_secs(3600))
        .build_with(state.call_counter())
        .unwrap();
    let once = RunOnce::new(state.store::<u64>(), Duration::from_secs(60));
    let breaker = CircuitBreaker::named(
        "dependency",
        BreakerConfig::builder()
            .failure_threshold(1_000_000)
            .build()
            .unwrap(),
    );
    state.share_breaker(&breaker).unwrap();

    // The load: four workers, each call a limit check, a run-once call and a breaker outcome.
    let stop = Arc::new(AtomicBool::new(false));
    let slowest = Arc::new(AtomicU64::new(0));
    let slowest_once = Arc::new(AtomicU64::new(0));
    let calls = Arc::new(AtomicU64::new(0));
    let ctx = Arc::new((limit, once, breaker));
    let mut workers = Vec::new();
    for w in 0..4u64 {
        let (stop, slowest, slowest_once, calls, ctx) = (
            stop.clone(),
            slowest.clone(),
            slowest_once.clone(),
            calls.clone(),
            ctx.clone(),
        );
        workers.push(tokio::spawn(async move {
            let keys = CallKeys::new().session(format!("s{w}")).tool("t");
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) {
                i += 1;
                let t = Instant::now();
                ctx.0.acquire(&keys).await.expect("far below the cap");
                let took = t.elapsed();
                let t2 = Instant::now();
                let v = ctx
                    .1
                    .run(&format!("w{w}-{i}"), || async move {
                        Ok::<_, std::io::Error>(i)
                    })
                    .await
                    .expect("the store never fails the call");
                assert_eq!(v, i);
                let took_once = t2.elapsed();
                if let Ok(p) = ctx.2.try_acquire() {
                    p.failure();
                }
                slowest.fetch_max(u64::try_from(took.as_micros()).unwrap(), Ordering::Relaxed);
                slowest_once.fetch_max(
                    u64::try_from(took_once.as_micros()).unwrap(),
                    Ordering::Relaxed,
                );
                calls.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }));
    }

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(calls.load(Ordering::Relaxed) > 0);

    // Redis hangs (SIGSTOP: connections stay open, nothing answers): the bound is what saves
    // the calls here.
    signal(&server, "-STOP");
    wait_until(
        "the replica gives up on a hung Redis",
        Duration::from_secs(2),
        || !state.is_up(),
    )
    .await;
    let at_hang = calls.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        calls.load(Ordering::Relaxed) > at_hang + 20,
        "calls go on while Redis hangs"
    );
    signal(&server, "-CONT");
    wait_until("the replica rejoins", Duration::from_secs(5), || {
        state.is_up()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Redis dies.
    drop(server); // SIGKILL
    wait_until(
        "the replica notices Redis is gone",
        Duration::from_secs(2),
        || !state.is_up(),
    )
    .await;
    let at_outage = calls.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        calls.load(Ordering::Relaxed) > at_outage + 20,
        "calls go on during the outage"
    );
    let stats = state.stats();
    assert_eq!(
        stats.outages, 2,
        "two outages, each reported once: {stats:?}"
    );
    assert!(stats.fallbacks > 20, "calls used local state: {stats:?}");

    // Redis returns (empty: no persistence); the replica rejoins on its own.
    let server = start(port).await;
    wait_until("the replica rejoins", Duration::from_secs(5), || {
        state.is_up()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Release);
    for w in workers {
        w.await.unwrap();
    }
    let slowest = Duration::from_micros(slowest.load(Ordering::Relaxed));
    let slowest_once = Duration::from_micros(slowest_once.load(Ordering::Relaxed));
    println!(
        "slowest limit check {slowest:?} (one Redis operation), slowest run-once call \
         {slowest_once:?} (up to four), bound {bound:?} per operation"
    );
    // Slack for a loaded machine's scheduling; without the bound a call would wait on the hung
    // Redis for the connection's own response timeout (1 s and more).
    let slack = Duration::from_millis(200);
    assert!(
        slowest <= bound + slack,
        "a limit check waited {slowest:?}, beyond the {bound:?} bound"
    );
    assert!(
        slowest_once <= bound * 4 + slack,
        "a run-once call waited {slowest_once:?}, beyond four {bound:?} bounds"
    );

    // Counts go to Redis again, and shared breaker state written while we were away is read.
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let counted: Option<u64> = redis::cmd("GET")
        .arg("outage:limit:s:s0")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        counted.is_some_and(|n| n > 0),
        "counts reach Redis after the rejoin"
    );
    let _: () = redis::cmd("SET")
        .arg("{outage:b:dependency}:open")
        .arg("elsewhere")
        .arg("PX")
        .arg(5000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let b = ctx.2.clone();
    wait_until(
        "the re-sync applies the shared open state",
        Duration::from_secs(2),
        || b.state() == BreakerState::Open,
    )
    .await;
    drop(server);
}
