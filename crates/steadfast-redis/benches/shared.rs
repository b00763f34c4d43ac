//! What sharing state through Redis costs a call, side by side with local-only state.
//!
//! - `closed_path`: admit + record a success on a closed count-rule breaker, local vs shared.
//!   Sharing must not change it.
//! - `report_outcome`: record a failure (the breaker's slow path), local vs shared (one more
//!   `try_send` into the bounded report queue); and a ratio-rule success, which is reported too.
//! - `budget`: a deposit and a withdrawal (what a retried call pays), local vs shared (a lease
//!   of retries taken from Redis, spent with one CAS).
//! - `call_limit` and `run_once`: the operations a call does wait on — memory vs Redis.
//!
//! The Redis groups need `STEADFAST_TEST_REDIS_URL`; without it they are skipped (the local
//! and shared-breaker rows still run: a shared breaker's cost does not depend on Redis
//! answering, since reports are queued).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::{
    BreakerConfig, BudgetConfig, CallKeys, CallLimit, CircuitBreaker, MemoryStore, RetryBudget,
    RunOnce, TripRule,
};
use steadfast_redis::{RedisOptions, RedisState};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

fn url() -> Option<String> {
    std::env::var("STEADFAST_TEST_REDIS_URL").ok()
}

/// Shared state on Redis if a URL is set, else on an unreachable port (reports queue and drop).
fn state(rt: &tokio::runtime::Runtime, prefix: &str) -> RedisState {
    let url = url().unwrap_or_else(|| "redis://127.0.0.1:1".to_owned());
    let prefix = format!("bench-{prefix}-{}", std::process::id());
    rt.block_on(RedisState::connect(
        &url,
        RedisOptions::new()
            .prefix(prefix)
            .report_capacity(1 << 16)
            // Generous, so a loaded machine measures round trips rather than the fallback.
            .op_timeout(Duration::from_secs(1)),
    ))
    .expect("valid options")
}

fn count_rule() -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(u32::MAX)
        .build()
        .expect("config")
}

fn ratio_rule() -> BreakerConfig {
    BreakerConfig::builder()
        .trip(TripRule::Ratio)
        .failure_ratio(1.0)
        .minimum_throughput(u32::MAX)
        .build()
        .expect("config")
}

fn breakers(c: &mut Criterion) {
    let rt = runtime();
    let _guard = rt.enter();
    let state = state(&rt, "breaker");

    let mut g = c.benchmark_group("closed_path");
    let local = CircuitBreaker::named("local", count_rule());
    let shared = CircuitBreaker::named("shared", count_rule());
    state.share_breaker(&shared).expect("share");
    g.bench_function("local", |b| {
        b.iter(|| black_box(&local).try_acquire().map(|p| p.success()))
    });
    g.bench_function("shared", |b| {
        b.iter(|| black_box(&shared).try_acquire().map(|p| p.success()))
    });
    g.finish();

    let mut g = c.benchmark_group("report_outcome");
    let local_f = CircuitBreaker::named("local-f", count_rule());
    let shared_f = CircuitBreaker::named("shared-f", count_rule());
    state.share_breaker(&shared_f).expect("share");
    g.bench_function("failure/local", |b| {
        b.iter(|| black_box(&local_f).try_acquire().map(|p| p.failure()))
    });
    g.bench_function("failure/shared", |b| {
        b.iter(|| black_box(&shared_f).try_acquire().map(|p| p.failure()))
    });
    let local_r = CircuitBreaker::named("local-r", ratio_rule());
    let shared_r = CircuitBreaker::named("shared-r", ratio_rule());
    state.share_breaker(&shared_r).expect("share");
    g.bench_function("ratio_success/local", |b| {
        b.iter(|| black_box(&local_r).try_acquire().map(|p| p.success()))
    });
    g.bench_function("ratio_success/shared", |b| {
        b.iter(|| black_box(&shared_r).try_acquire().map(|p| p.success()))
    });
    g.finish();

    // What a retried call pays the budget: one deposit and one withdrawal, at a time in hand.
    let mut g = c.benchmark_group("budget");
    let local = RetryBudget::new(BudgetConfig::default());
    let shared_b = RetryBudget::new(BudgetConfig::default());
    state.share_budget("bench", &shared_b).expect("share");
    let now = tokio::time::Instant::now();
    g.bench_function("deposit_withdraw/local", |b| {
        b.iter(|| {
            local.deposit_at(now);
            black_box(local.try_withdraw_at(now))
        })
    });
    g.bench_function("deposit_withdraw/shared", |b| {
        b.iter(|| {
            shared_b.deposit_at(now);
            black_box(shared_b.try_withdraw_at(now))
        })
    });
    g.finish();
    let stats = state.stats();
    eprintln!(
        "shared breakers: {} outcomes delivered to Redis, {} dropped (queue full or Redis away)",
        stats.reported, stats.dropped
    );
}

fn waited_on(c: &mut Criterion) {
    let Some(_) = url() else {
        eprintln!("call_limit and run_once groups skipped: set STEADFAST_TEST_REDIS_URL");
        return;
    };
    let rt = runtime();
    let state = state(&rt, "waited");
    assert!(state.is_up(), "redis answers");
    let window = Duration::from_secs(3600);

    let mut g = c.benchmark_group("call_limit");
    let memory = CallLimit::builder()
        .per_session(u64::MAX, window)
        .per_tool(u64::MAX, window)
        .build()
        .expect("limit");
    let redis = CallLimit::builder()
        .per_session(u64::MAX, window)
        .per_tool(u64::MAX, window)
        .build_with(state.call_counter())
        .expect("limit");
    let keys = CallKeys::new().session("bench").tool("search");
    g.bench_function("memory", |b| {
        b.to_async(&rt)
            .iter(|| async { memory.acquire(&keys).await.is_ok() })
    });
    g.bench_function("redis", |b| {
        b.to_async(&rt)
            .iter(|| async { redis.acquire(&keys).await.is_ok() })
    });
    g.finish();

    let mut g = c.benchmark_group("run_once_hit");
    let memory = rt.block_on(async {
        let once = RunOnce::new(MemoryStore::new(), window);
        once.run("k", || async { Ok::<_, std::io::Error>(1u64) })
            .await
            .ok();
        once
    });
    let redis = rt.block_on(async {
        let once = RunOnce::new(state.store::<u64>(), window);
        once.run("k", || async { Ok::<_, std::io::Error>(1u64) })
            .await
            .ok();
        once
    });
    g.bench_function("memory", |b| {
        b.to_async(&rt).iter(|| async {
            memory
                .run("k", || async { Ok::<_, std::io::Error>(2) })
                .await
                .ok()
        })
    });
    g.bench_function("redis", |b| {
        b.to_async(&rt).iter(|| async {
            redis
                .run("k", || async { Ok::<_, std::io::Error>(2) })
                .await
                .ok()
        })
    });
    g.finish();
    let stats = state.stats();
    eprintln!(
        "redis groups: {} operations fell back to local state (0 = every row measured Redis)",
        stats.fallbacks
    );
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = breakers, waited_on
}
criterion_main!(benches);
