//! The success path — the first attempt succeeds — allocates nothing and touches no tokio
//! driver (timer or notifier, the places a lock would be taken). Checked, not assumed: a counting
//! global allocator, and a poll outside any runtime, where touching a driver would panic.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use steadfast::{
    BreakerConfig, BudgetConfig, CircuitBreaker, ErrorClass, Retry, RetryBudget, RetryPolicy,
    TripRule, retry,
};

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

/// Polls `fut` once with a no-op waker, outside any runtime; it must complete.
fn poll_once<F: Future>(fut: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(fut).poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the success path should complete in one poll"),
    }
}

#[test]
fn first_attempt_success_allocates_nothing_and_needs_no_runtime() {
    let policy = RetryPolicy::default();
    let configured = Retry::<u64, ErrorClass>::new(policy.clone())
        .name("search")
        .check(|v| (*v == 0).then(ErrorClass::unknown))
        .should_retry(|_, _| true)
        .on_retry(|_| {})
        .on_success(|_| {})
        .on_give_up(|_| {});

    // Guarded by a breaker (both trip rules) and a budget: still nothing allocated.
    let guarded = Retry::<u64, ErrorClass>::new(policy.clone())
        .breaker(CircuitBreaker::new(BreakerConfig::default()))
        .budget(RetryBudget::new(BudgetConfig::default()));
    let ratio = Retry::<u64, ErrorClass>::new(policy.clone()).breaker(CircuitBreaker::new(
        BreakerConfig::builder()
            .trip(TripRule::Ratio)
            .build()
            .unwrap(),
    ));

    // Warm up: tracing registers its callsites on first use.
    assert_eq!(
        poll_once(guarded.run(|n| async move { Ok(u64::from(n)) })).unwrap(),
        1
    );
    assert_eq!(
        poll_once(ratio.run(|n| async move { Ok(u64::from(n)) })).unwrap(),
        1
    );
    assert_eq!(
        poll_once(retry(&policy, async |n| Ok::<_, ErrorClass>(u64::from(n)))).unwrap(),
        1
    );
    assert_eq!(
        poll_once(configured.run(async |n| Ok(u64::from(n) + 1))).unwrap(),
        2
    );

    let before = allocs();
    let mut state = 0u64;
    for i in 0..1000u64 {
        let v = poll_once(retry(
            &policy,
            move |_| async move { Ok::<_, ErrorClass>(i) },
        ))
        .unwrap();
        assert_eq!(v, i);
        let v = poll_once(configured.run(move |_| async move { Ok(i + 1) })).unwrap();
        assert_eq!(v, i + 1);
        assert_eq!(
            poll_once(guarded.run(move |_| async move { Ok(i) })).unwrap(),
            i
        );
        assert_eq!(
            poll_once(ratio.run(move |_| async move { Ok(i) })).unwrap(),
            i
        );
        // The async-closure loop too, borrowing state mutably.
        let v = poll_once(configured.run_mut(async |_| {
            state += 1;
            Ok(state)
        }))
        .unwrap();
        assert_eq!(v, i + 1);
    }
    assert_eq!(allocs() - before, 0, "allocations on the success path");
}

#[test]
fn the_counter_does_count() {
    // Guards the test above against a counter that never moves.
    let before = allocs();
    let v = std::hint::black_box(vec![1u8; 16]);
    assert!(allocs() > before);
    drop(v);
}
