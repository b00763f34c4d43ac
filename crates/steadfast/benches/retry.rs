//! The retry engine's overhead, side by side with backon and tower::retry in one process.
//!
//! - success: a trivial operation that succeeds at once, called bare and through each crate.
//!   Success completes in one poll for all of them, so each call is polled once with a no-op
//!   waker: no runtime, no scheduler in the measurement.
//! - failure: an operation that fails twice then succeeds, with 10 ms constant delays, on
//!   tokio's paused clock (sleeps cost a timer registration, not time). `manual` is the same
//!   loop written by hand, for the baseline.
//!
//! Run: `cargo bench -p steadfast --bench retry`.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use backon::{ConstantBuilder, ExponentialBuilder, Retryable};
use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::{Backoff, ErrorClass, Jitter, Retry, RetryPolicy, retry};
use tower::{Service, ServiceBuilder, service_fn};

fn poll_once<F: Future>(f: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(f).poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the success path must complete in one poll"),
    }
}

#[derive(Clone)]
struct OnceOrAttempts(u32);

impl<Req: Clone, Res, E> tower::retry::Policy<Req, Res, E> for OnceOrAttempts {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, _req: &mut Req, result: &mut Result<Res, E>) -> Option<Self::Future> {
        match result {
            Ok(_) => None,
            Err(_) if self.0 > 1 => {
                self.0 -= 1;
                Some(tokio::time::sleep(Duration::from_millis(10)))
            }
            Err(_) => None,
        }
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

fn success(c: &mut Criterion) {
    let mut g = c.benchmark_group("success");
    let policy = RetryPolicy::default();
    let configured = Retry::<u32, ErrorClass>::new(policy.clone());

    // What each future costs to move: printed for BENCHMARKS.md.
    eprintln!(
        "future sizes (bytes): steadfast Retry::run {}, steadfast retry() {}, backon {}",
        std::mem::size_of_val(&configured.run(|_| async { Ok::<u32, ErrorClass>(1) })),
        std::mem::size_of_val(&retry(&policy, |_| async { Ok::<u32, ErrorClass>(1) })),
        std::mem::size_of_val(
            &(|| async { Ok::<u32, ErrorClass>(1) }).retry(ExponentialBuilder::default())
        ),
    );
    g.bench_function("bare", |b| {
        b.iter(|| poll_once(async { Ok::<u32, ErrorClass>(black_box(1)) }))
    });
    // Context for the numbers below: what a clock read costs on this machine.
    g.bench_function("(std Instant::now)", |b| b.iter(std::time::Instant::now));
    g.bench_function("(tokio Instant::now)", |b| {
        b.iter(tokio::time::Instant::now)
    });
    g.bench_function("(debug_span)", |b| {
        b.iter(|| tracing::debug_span!("x", a = 1u32))
    });
    g.bench_function("steadfast retry()", |b| {
        b.iter(|| {
            poll_once(retry(&policy, |_| async {
                Ok::<u32, ErrorClass>(black_box(1))
            }))
        })
    });
    g.bench_function("steadfast Retry::run", |b| {
        b.iter(|| poll_once(configured.run(|_| async { Ok::<u32, ErrorClass>(black_box(1)) })))
    });
    g.bench_function("backon", |b| {
        b.iter(|| {
            poll_once(
                (|| async { Ok::<u32, ErrorClass>(black_box(1)) })
                    .retry(ExponentialBuilder::default()),
            )
        })
    });
    let mut svc = ServiceBuilder::new()
        .retry(OnceOrAttempts(3))
        .service(service_fn(|x: u32| async move {
            Ok::<u32, ErrorClass>(black_box(x))
        }));
    g.bench_function("tower::retry", |b| {
        b.iter(|| {
            poll_once(async {
                std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
                svc.call(1).await
            })
        })
    });
    g.finish();
}

fn failure(c: &mut Criterion) {
    let mut g = c.benchmark_group("fail twice then succeed");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let flaky = |n: u32| async move {
        if n < 3 {
            Err(ErrorClass::from_status(503))
        } else {
            Ok(black_box(n))
        }
    };

    g.bench_function("manual loop", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut n = 1;
                loop {
                    match flaky(n).await {
                        Ok(v) => break v,
                        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                    n += 1;
                }
            })
        })
    });
    let policy = RetryPolicy::builder()
        .backoff(Backoff::Constant)
        .base_delay(Duration::from_millis(10))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    g.bench_function("steadfast", |b| {
        b.iter(|| rt.block_on(retry(&policy, flaky)).unwrap())
    });
    g.bench_function("backon", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut n = 0;
                (|| {
                    n += 1;
                    flaky(n)
                })
                .retry(
                    ConstantBuilder::default()
                        .with_delay(Duration::from_millis(10))
                        .with_max_times(2),
                )
                .await
                .unwrap()
            })
        })
    });
    g.bench_function("tower::retry", |b| {
        b.iter(|| {
            rt.block_on(async {
                let calls = std::sync::atomic::AtomicU32::new(0);
                let mut svc = ServiceBuilder::new()
                    .retry(OnceOrAttempts(3))
                    .service(service_fn(|_: u32| {
                        flaky(calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1)
                    }));
                std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
                svc.call(0).await.unwrap()
            })
        })
    });
    g.finish();
}

criterion_group!(benches, success, failure);
criterion_main!(benches);
