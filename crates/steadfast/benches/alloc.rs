//! Heap allocations per call on the success path, for steadfast and its peers, counted by a
//! global allocator. Prints a table; not a timing benchmark.
//!
//! Run: `cargo bench -p steadfast --bench alloc`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use backon::{ExponentialBuilder, Retryable};
use steadfast::{ErrorClass, Retry, RetryPolicy, retry};
use tower::{Service, ServiceBuilder, service_fn};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn poll_once<F: Future>(f: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(f).poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the success path must complete in one poll"),
    }
}

fn per_call(name: &str, mut f: impl FnMut()) {
    const N: u64 = 10_000;
    f(); // warm-up: lazy statics
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..N {
        f();
    }
    let n = ALLOCS.load(Ordering::Relaxed) - before;
    println!("| {name} | {:.2} |", n as f64 / N as f64);
}

#[derive(Clone)]
struct NoRetry;

impl<Req: Clone, Res, E> tower::retry::Policy<Req, Res, E> for NoRetry {
    type Future = std::future::Ready<()>;
    fn retry(&mut self, _req: &mut Req, _result: &mut Result<Res, E>) -> Option<Self::Future> {
        None
    }
    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

fn main() {
    let policy = RetryPolicy::default();
    let configured = Retry::<u32, ErrorClass>::new(policy.clone());
    println!("| success path | allocations per call |\n|---|---|");
    per_call("bare", || {
        black_box(poll_once(async { Ok::<u32, ErrorClass>(black_box(1)) })).unwrap();
    });
    per_call("steadfast retry()", || {
        black_box(poll_once(retry(&policy, |_| async {
            Ok::<u32, ErrorClass>(1)
        })))
        .unwrap();
    });
    per_call("steadfast Retry::run", || {
        black_box(poll_once(
            configured.run(|_| async { Ok::<u32, ErrorClass>(1) }),
        ))
        .unwrap();
    });
    per_call("backon", || {
        black_box(poll_once(
            (|| async { Ok::<u32, ErrorClass>(1) }).retry(ExponentialBuilder::default()),
        ))
        .unwrap();
    });
    let mut svc = ServiceBuilder::new()
        .retry(NoRetry)
        .service(service_fn(|x: u32| async move { Ok::<u32, ErrorClass>(x) }));
    per_call("tower::retry", || {
        black_box(poll_once(async {
            std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
            svc.call(1).await
        }))
        .unwrap();
    });
}
