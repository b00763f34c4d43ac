//! The retry budget's deposit and withdraw, side by side with tower's `TpsBudget`.
//!
//! One deposit plus one withdrawal per iteration (the cost a retried call pays), on one thread
//! and on two threads sharing one budget.
//!
//! Run: `cargo bench -p steadfast --bench budget`.

use std::hint::black_box;
use std::time::Duration;

mod common;
use common::contended;
use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::{BudgetConfig, RetryBudget};
use tower::retry::budget::{Budget, TpsBudget};

fn budget(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let ours = RetryBudget::new(
        BudgetConfig::builder()
            .retry_ratio(0.2)
            .min_retries_per_sec(10.0)
            .ttl(Duration::from_secs(10))
            .build()
            .unwrap(),
    );
    let theirs = TpsBudget::new(Duration::from_secs(10), 10, 0.2);
    for threads in [1usize, 2] {
        let mut g = c.benchmark_group(format!("deposit+withdraw, {threads} thread(s)"));
        g.bench_function("bare", |b| {
            b.iter_custom(|n| {
                contended(threads, n, &|| {
                    black_box(());
                })
            })
        });
        g.bench_function("steadfast RetryBudget", |b| {
            b.iter_custom(|n| {
                contended(threads, n, &|| {
                    ours.deposit();
                    black_box(ours.try_withdraw());
                })
            })
        });
        g.bench_function("steadfast, one clock read (as the engine pays)", |b| {
            b.iter_custom(|n| {
                contended(threads, n, &|| {
                    let now = tokio::time::Instant::now();
                    ours.deposit_at(now);
                    black_box(ours.try_withdraw_at(now));
                })
            })
        });
        g.bench_function("tower TpsBudget", |b| {
            b.iter_custom(|n| {
                contended(threads, n, &|| {
                    theirs.deposit();
                    black_box(theirs.withdraw());
                })
            })
        });
        g.finish();
    }
}

criterion_group!(benches, budget);
criterion_main!(benches);
