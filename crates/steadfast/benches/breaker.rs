//! Circuit breaker cost, side by side with peer crates in one process.
//!
//! - closed: admit a call and record its success (the path every healthy call takes);
//! - open: reject a call (the path every call takes during an outage).
//!
//! Each on one thread, and on two threads hammering one shared breaker (time per operation per
//! thread). `bare` is the same loop with no breaker, for the baseline.
//!
//! Run: `cargo bench -p steadfast --bench breaker`.

use std::hint::black_box;
use std::time::Duration;

mod common;
use common::contended;
use criterion::{Criterion, criterion_group, criterion_main};
use failsafe::failure_policy::consecutive_failures;
use steadfast::{BreakerConfig, CircuitBreaker};

const HOUR: Duration = Duration::from_secs(3600);

fn steadfast_breaker() -> CircuitBreaker {
    CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(1)
            .reset_timeout(HOUR)
            .max_reset_timeout(HOUR)
            .build()
            .unwrap(),
    )
}

fn recloser_breaker() -> recloser::Recloser {
    recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(2)
        .open_wait(HOUR)
        .build()
}

fn failsafe_breaker() -> impl failsafe::CircuitBreaker + Sync {
    failsafe::Config::new()
        .failure_policy(consecutive_failures(1, failsafe::backoff::constant(HOUR)))
        .build()
}

fn bench_closed(c: &mut Criterion) {
    let sf = steadfast_breaker();
    let rc = recloser_breaker();
    let fs = failsafe_breaker();
    let steadfast_op = || {
        if let Ok(p) = black_box(&sf).try_acquire() {
            p.success();
        }
    };
    let recloser_op = || {
        let _ = black_box(&rc).call(|| Ok::<_, ()>(black_box(1u8)));
    };
    let failsafe_op = || {
        let fs = black_box(&fs);
        if failsafe::CircuitBreaker::is_call_permitted(fs) {
            let _ = failsafe::CircuitBreaker::call(fs, || Ok::<_, ()>(black_box(1u8)));
        }
    };
    let bare_op = || {
        black_box(());
    };
    for threads in [1, 2] {
        let mut g = c.benchmark_group(format!("breaker_closed/{threads}_thread"));
        g.bench_function("bare", |b| {
            b.iter_custom(|n| contended(threads, n, &bare_op))
        });
        g.bench_function("steadfast", |b| {
            b.iter_custom(|n| contended(threads, n, &steadfast_op))
        });
        g.bench_function("recloser", |b| {
            b.iter_custom(|n| contended(threads, n, &recloser_op))
        });
        g.bench_function("failsafe", |b| {
            b.iter_custom(|n| contended(threads, n, &failsafe_op))
        });
        g.finish();
    }
}

fn bench_open(c: &mut Criterion) {
    let sf = steadfast_breaker();
    sf.try_acquire().unwrap().failure();
    assert!(sf.try_acquire().is_err());
    let rc = recloser_breaker();
    for _ in 0..4 {
        let _ = rc.call(|| Err::<(), _>(()));
    }
    assert!(matches!(
        rc.call(|| Ok::<_, ()>(())),
        Err(recloser::Error::Rejected)
    ));
    let fs = failsafe_breaker();
    let _ = failsafe::CircuitBreaker::call(&fs, || Err::<(), _>(()));
    assert!(!failsafe::CircuitBreaker::is_call_permitted(&fs));

    let steadfast_op = || {
        let _ = black_box(black_box(&sf).try_acquire().is_err());
    };
    let recloser_op = || {
        let _ = black_box(black_box(&rc).call(|| Ok::<_, ()>(())).is_err());
    };
    let failsafe_op = || {
        let _ = black_box(failsafe::CircuitBreaker::is_call_permitted(black_box(&fs)));
    };
    for threads in [1, 2] {
        let mut g = c.benchmark_group(format!("breaker_open/{threads}_thread"));
        g.bench_function("steadfast", |b| {
            b.iter_custom(|n| contended(threads, n, &steadfast_op))
        });
        g.bench_function("recloser", |b| {
            b.iter_custom(|n| contended(threads, n, &recloser_op))
        });
        g.bench_function("failsafe", |b| {
            b.iter_custom(|n| contended(threads, n, &failsafe_op))
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench_closed, bench_open
}
criterion_main!(benches);
