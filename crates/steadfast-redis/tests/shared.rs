//! Shared breakers, stores and counters against a real Redis, with two replicas (two states)
//! in one process. Each test uses a key prefix of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use steadfast::{
    BreakerConfig, BreakerState, CallKeys, CallLimit, CallScope, CircuitBreaker, IdempotencyStore,
    RunOnce,
};
use steadfast_redis::{RedisOptions, RedisState};
use tokio::time::Instant;

/// The server named by `STEADFAST_TEST_REDIS_URL`; panics naming the variable when it is unset,
/// so an `#[ignore]`d test run with `--include-ignored` cannot pass without Redis.
fn url() -> String {
    std::env::var("STEADFAST_TEST_REDIS_URL")
        .unwrap_or_else(|_| panic!("this test needs Redis: set STEADFAST_TEST_REDIS_URL"))
}

fn prefix(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("sf-test-{test}-{}-{nanos}", std::process::id())
}

async fn replica(url: &str, prefix: &str, id: &str) -> RedisState {
    let state = RedisState::connect(
        url,
        RedisOptions::new()
            .prefix(prefix)
            .replica(id)
            .op_timeout(Duration::from_millis(500))
            .sync_every(Duration::from_millis(100)),
    )
    .await
    .unwrap();
    assert!(state.is_up(), "redis at {url} answers");
    state
}

async fn wait_until(what: &str, within: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn breaker(reset: Duration) -> CircuitBreaker {
    CircuitBreaker::named(
        "dep",
        BreakerConfig::builder()
            .failure_threshold(2)
            .reset_timeout(reset)
            .build()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL"]
async fn exactly_one_replica_probes_and_its_success_closes_the_breaker_everywhere() {
    let url = url();
    let p = prefix("probe");
    let (a, b) = (replica(&url, &p, "a").await, replica(&url, &p, "b").await);
    let reset = Duration::from_millis(300);
    let (ba, bb) = (breaker(reset), breaker(reset));
    a.share_breaker(&ba).unwrap();
    b.share_breaker(&bb).unwrap();

    ba.try_acquire().unwrap().failure();
    ba.try_acquire().unwrap().failure();
    wait_until("b opens from a's failures", Duration::from_secs(1), || {
        bb.state() == BreakerState::Open
    })
    .await;

    // After the open time both replicas call; exactly one gets the probe, and while it runs
    // the other is refused.
    tokio::time::sleep(reset).await;
    let deadline = Instant::now() + Duration::from_secs(2);
    let (probe, holder, other) = loop {
        if let Ok(p) = ba.try_acquire() {
            break (p, &ba, &bb);
        }
        if let Ok(p) = bb.try_acquire() {
            break (p, &bb, &ba);
        }
        assert!(Instant::now() < deadline, "one replica wins the probe slot");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(probe.is_probe());
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        assert!(
            other.try_acquire().is_err(),
            "the other replica must not probe while the slot is held"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    probe.success();
    assert_eq!(holder.state(), BreakerState::Closed);
    wait_until(
        "the probe's success closes the other replica",
        Duration::from_secs(1),
        || other.state() == BreakerState::Closed,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL"]
async fn a_failed_probe_reopens_the_breaker_everywhere() {
    let url = url();
    let p = prefix("reopen");
    let (a, b) = (replica(&url, &p, "a").await, replica(&url, &p, "b").await);
    let reset = Duration::from_millis(200);
    let (ba, bb) = (breaker(reset), breaker(reset));
    a.share_breaker(&ba).unwrap();
    b.share_breaker(&bb).unwrap();
    ba.try_acquire().unwrap().failure();
    ba.try_acquire().unwrap().failure();
    wait_until("b opens", Duration::from_secs(1), || {
        bb.state() == BreakerState::Open
    })
    .await;
    tokio::time::sleep(reset).await;
    let deadline = Instant::now() + Duration::from_secs(2);
    let (probe, other) = loop {
        if let Ok(p) = ba.try_acquire() {
            break (p, &bb);
        }
        if let Ok(p) = bb.try_acquire() {
            break (p, &ba);
        }
        assert!(Instant::now() < deadline, "one replica wins the probe slot");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    probe.failure();
    let opened_again = Instant::now();
    // The other replica is open again (not merely still open from before): its open time
    // reaches well past the first one's end.
    wait_until("the other replica reopens", Duration::from_secs(1), || {
        other
            .stats()
            .open_remaining
            .is_some_and(|left| left > Duration::from_millis(100))
    })
    .await;
    assert!(opened_again.elapsed() < Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL"]
async fn failures_spread_over_replicas_open_the_breaker_for_all() {
    let url = url();
    let p = prefix("spread");
    let (a, b) = (replica(&url, &p, "a").await, replica(&url, &p, "b").await);
    let config = BreakerConfig::builder()
        .failure_threshold(4)
        .reset_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let (ba, bb) = (
        CircuitBreaker::named("dep", config.clone()),
        CircuitBreaker::named("dep", config),
    );
    a.share_breaker(&ba).unwrap();
    b.share_breaker(&bb).unwrap();
    // Two failures each: neither replica's own rule (4) fires, the shared sum does.
    for _ in 0..2 {
        ba.try_acquire().unwrap().failure();
        bb.try_acquire().unwrap().failure();
    }
    wait_until("both open", Duration::from_secs(1), || {
        ba.state() == BreakerState::Open && bb.state() == BreakerState::Open
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL"]
async fn a_dead_leaders_claim_expires_and_another_replica_takes_over() {
    let url = url();
    let p = prefix("lease");
    let (a, b) = (replica(&url, &p, "a").await, replica(&url, &p, "b").await);
    // Replica a claims the key and dies without storing or releasing anything.
    let lease = Duration::from_millis(400);
    assert!(a.store::<u32>().claim("k", lease).await.unwrap());
    let once = RunOnce::new(b.store::<u32>(), Duration::from_secs(60)).lease(lease);
    let runs = AtomicU32::new(0);
    let started = Instant::now();
    let v = once
        .run("k", || async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::io::Error>(7)
        })
        .await
        .unwrap();
    assert_eq!((v, runs.load(Ordering::SeqCst)), (7, 1));
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "b waited for a's claim to expire"
    );
    // The result is shared: replica a now reads it instead of running again.
    let once_a = RunOnce::new(a.store::<u32>(), Duration::from_secs(60));
    let v = once_a
        .run("k", || async { Ok::<_, std::io::Error>(99) })
        .await
        .unwrap();
    assert_eq!(v, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL"]
async fn a_failed_leader_releases_its_claim_at_once() {
    let url = url();
    let p = prefix("release");
    let a = replica(&url, &p, "a").await;
    let once =
        RunOnce::new(a.store::<u32>(), Duration::from_secs(60)).lease(Duration::from_secs(60));
    let failed = once
        .run("k", || async {
            Err::<u32, _>(std::io::Error::other("boom"))
        })
        .await;
    assert!(failed.is_err());
    let b = replica(&url, &p, "b").await;
    let started = Instant::now();
    assert!(
        b.store::<u32>()
            .claim("k", Duration::from_secs(1))
            .await
            .unwrap()
    );
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL"]
async fn a_session_keeps_its_call_count_across_replicas() {
    let url = url();
    let p = prefix("limit");
    let (a, b) = (replica(&url, &p, "a").await, replica(&url, &p, "b").await);
    let build = |s: &RedisState| {
        CallLimit::builder()
            .per_session(3, Duration::from_secs(60))
            .per_tool(2, Duration::from_secs(60))
            .build_with(s.call_counter())
            .unwrap()
    };
    let (la, lb) = (build(&a), build(&b));
    let search = CallKeys::new().session("s-1").tool("search");
    let fetch = CallKeys::new().session("s-1").tool("fetch");
    la.acquire(&search).await.unwrap();
    lb.acquire(&search).await.unwrap();
    // The tool cap is full; refusing it takes nothing from the session's allowance.
    let refused = la.acquire(&search).await.unwrap_err();
    assert_eq!(refused.scope, CallScope::Tool);
    assert!(
        refused
            .retry_in
            .is_some_and(|d| d <= Duration::from_secs(60))
    );
    lb.acquire(&fetch).await.unwrap();
    let refused = la.acquire(&fetch).await.unwrap_err();
    assert_eq!(refused.scope, CallScope::Session);
    // Another session is counted apart.
    la.acquire(&CallKeys::new().session("s-2").tool("search"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL"]
async fn a_burst_of_outcomes_is_counted_and_sent_in_batches_without_blocking() {
    let url = url();
    let state = RedisState::connect(
        &url,
        RedisOptions::new()
            .prefix(prefix("queue"))
            .report_capacity(4),
    )
    .await
    .unwrap();
    let b = CircuitBreaker::named(
        "dep",
        BreakerConfig::builder()
            .failure_threshold(1_000_000)
            .build()
            .unwrap(),
    );
    state.share_breaker(&b).unwrap();
    let b = Arc::new(b);
    // A burst from one thread with no await: the reporter cannot drain in between.
    let started = std::time::Instant::now();
    for _ in 0..1000 {
        b.try_acquire().unwrap().failure();
    }
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(state.flush(Duration::from_secs(5)).await);
    let stats = state.stats();
    assert_eq!((stats.reported, stats.dropped), (1000, 0), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL"]
async fn replicas_spend_one_retry_budget() {
    let url = url();
    let p = prefix("budget");
    let (a, b) = (replica(&url, &p, "a").await, replica(&url, &p, "b").await);
    // No floor, one retry per two calls.
    let config = steadfast::BudgetConfig::builder()
        .retry_ratio(0.5)
        .min_retries_per_sec(0.0)
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    let (ra, rb) = (
        steadfast::RetryBudget::new(config.clone()),
        steadfast::RetryBudget::new(config),
    );
    a.share_budget("dep", &ra).unwrap();
    b.share_budget("dep", &rb).unwrap();
    // All the traffic goes through a; b has made no calls, so alone it could not retry.
    for _ in 0..20 {
        ra.deposit();
    }
    let mut granted = 0;
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline && quiet_since.elapsed() < Duration::from_millis(500) {
        for r in [&ra, &rb, &rb] {
            if r.try_withdraw() {
                granted += 1;
                quiet_since = Instant::now();
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(granted, 10, "20 calls × 0.5, spent across both replicas");
    assert!(!ra.try_withdraw() && !rb.try_withdraw());
}

#[tokio::test]
async fn an_unreachable_redis_leaves_the_budget_to_the_local_one() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let state = RedisState::connect(&format!("redis://127.0.0.1:{port}"), RedisOptions::new())
        .await
        .unwrap();
    let budget = steadfast::RetryBudget::new(
        steadfast::BudgetConfig::builder()
            .retry_ratio(0.5)
            .min_retries_per_sec(0.0)
            .build()
            .unwrap(),
    );
    state.share_budget("dep", &budget).unwrap();
    for _ in 0..4 {
        budget.deposit();
    }
    assert!(budget.try_withdraw() && budget.try_withdraw());
    assert!(!budget.try_withdraw(), "the local budget: 4 calls × 0.5");
}
