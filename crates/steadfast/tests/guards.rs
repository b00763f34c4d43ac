//! The engine with its guards: circuit breaker, retry budget, concurrency limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use steadfast::{
    Backoff, BreakerConfig, BreakerState, BudgetConfig, CancellationToken, CircuitBreaker,
    ConcurrencyConfig, ConcurrencyLimit, ErrorClass, ErrorCode, Failure, GiveUpReason, Jitter,
    Retry, RetryBudget, RetryPolicy, WhenFull,
};

const MS: fn(u64) -> Duration = Duration::from_millis;
const S: fn(u64) -> Duration = Duration::from_secs;

fn breaker(threshold: u32) -> CircuitBreaker {
    CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(threshold)
            .reset_timeout(S(30))
            .build()
            .unwrap(),
    )
}

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

async fn fail_with(
    retry: &Retry<(), ErrorClass>,
    class: ErrorClass,
) -> steadfast::RetryError<ErrorClass> {
    retry.run(async |_| Err(class.clone())).await.unwrap_err()
}

#[tokio::test(start_paused = true)]
async fn a_blip_absorbed_by_a_retry_never_counts() {
    let b = breaker(1);
    let retry = Retry::new(policy(3)).breaker(b.clone());
    for _ in 0..5 {
        let v = retry
            .run(async |n| {
                if n == 1 {
                    Err(ErrorClass::from_status(503))
                } else {
                    Ok(n)
                }
            })
            .await
            .unwrap();
        assert_eq!(v, 2);
    }
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.stats().failures_in_window, 0);
}

#[tokio::test(start_paused = true)]
async fn final_failures_count_once_per_call() {
    let b = breaker(2);
    let retry = Retry::new(policy(3)).breaker(b.clone());
    let err = fail_with(&retry, ErrorClass::from_status(503)).await;
    assert_eq!(err.attempts(), 3);
    assert_eq!(
        b.stats().failures_in_window,
        1,
        "three attempts, one call, one failure"
    );
    fail_with(&retry, ErrorClass::from_status(503)).await;
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn caller_errors_do_not_count_and_classifiers_can_override() {
    let b = breaker(1);
    let retry = Retry::new(policy(3)).breaker(b.clone());
    fail_with(&retry, ErrorClass::from_status(404)).await;
    fail_with(&retry, ErrorClass::from_status(422)).await;
    assert_eq!(b.state(), BreakerState::Closed);
    // A 401 from a proxy in front of the dependency may well mean it is down: count it.
    let strict = retry.classify(|e: &ErrorClass| {
        (e.status == Some(401)).then(|| e.clone().with_breaker_failure(true))
    });
    fail_with(&strict, ErrorClass::from_status(401)).await;
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_fails_fast_without_calling_or_spending_budget() {
    let b = breaker(1);
    let budget = RetryBudget::new(
        BudgetConfig::builder()
            .retry_ratio(1.0)
            .min_retries_per_sec(0.0)
            .build()
            .unwrap(),
    );
    let retry = Retry::new(policy(3))
        .breaker(b.clone())
        .budget(budget.clone());
    fail_with(&retry, ErrorClass::from_status(503)).await;
    let balance = budget.balance();
    let calls = AtomicU32::new(0);
    let err = retry
        .run(async |_| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok::<_, ErrorClass>(())
        })
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::Relaxed), 0);
    assert_eq!(
        (err.reason(), err.attempts()),
        (GiveUpReason::CircuitOpen, 0)
    );
    assert_eq!(err.class().code, ErrorCode::CIRCUIT_OPEN);
    assert_eq!(
        err.retry_after(),
        Some(S(30)),
        "says when the breaker may admit a call"
    );
    assert!(matches!(err.failure(), Failure::Rejected(r) if r.state == BreakerState::Open));
    assert!(err.to_string().contains("circuit breaker is open"), "{err}");
    assert_eq!(budget.balance(), balance, "no deposit, no withdrawal");
}

#[tokio::test(start_paused = true)]
async fn the_engine_stops_retrying_when_the_breaker_opens_meanwhile() {
    let b = breaker(1);
    let slow = Retry::new(
        RetryPolicy::builder()
            .max_attempts(10)
            .backoff(Backoff::Constant)
            .base_delay(S(1))
            .jitter(Jitter::None)
            .build()
            .unwrap(),
    )
    .breaker(b.clone());
    let calls = Arc::new(AtomicU32::new(0));
    let task = {
        let calls = calls.clone();
        tokio::spawn(async move {
            slow.run(async |_| {
                calls.fetch_add(1, Ordering::Relaxed);
                Err::<(), _>(ErrorClass::from_status(503))
            })
            .await
        })
    };
    tokio::time::sleep(MS(2500)).await; // attempts at 0s, 1s, 2s
    // Another call's final failure opens the breaker.
    let other = Retry::new(RetryPolicy::no_retry()).breaker(b.clone());
    fail_with(&other, ErrorClass::from_status(503)).await;
    let err = task.await.unwrap().unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::CircuitOpen);
    assert_eq!(
        (err.attempts(), calls.load(Ordering::Relaxed)),
        (3, 3),
        "no attempt after the breaker opened"
    );
    assert_eq!(
        err.class().status,
        Some(503),
        "the last real failure is kept"
    );
}

#[tokio::test(start_paused = true)]
async fn a_half_open_probe_call_closes_the_breaker_on_success() {
    let b = breaker(1);
    let retry = Retry::new(policy(2)).breaker(b.clone());
    fail_with(&retry, ErrorClass::from_status(503)).await;
    tokio::time::sleep(S(30)).await;
    // The probe call absorbs one transient failure with a retry, then succeeds.
    let probe = Retry::new(policy(2)).breaker(b.clone());
    let v = probe
        .run(async |n| {
            if n == 1 {
                Err(ErrorClass::from_status(503))
            } else {
                Ok(n)
            }
        })
        .await
        .unwrap();
    assert_eq!(v, 2);
    assert_eq!(b.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn cancelled_calls_record_nothing() {
    let b = breaker(1);
    let retry = Retry::new(policy(3)).breaker(b.clone());
    let cancel = CancellationToken::new();
    let err = retry
        .cancel_on(&cancel)
        .run_mut(async |_| {
            cancel.cancel();
            Err::<(), _>(ErrorClass::from_status(503))
        })
        .await
        .unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::Cancelled);
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.stats().failures_in_window, 0);
}

#[tokio::test(start_paused = true)]
async fn slow_successes_open_the_breaker_through_the_engine() {
    let b = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(2)
            .slow_call_threshold(S(1))
            .build()
            .unwrap(),
    );
    let retry = Retry::new(policy(1)).breaker(b.clone());
    for _ in 0..2 {
        retry
            .run(async |_| {
                tokio::time::sleep(S(2)).await;
                Ok::<_, ErrorClass>(())
            })
            .await
            .unwrap();
    }
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_stops_retries_and_keeps_the_last_failure() {
    let budget = RetryBudget::new(
        BudgetConfig::builder()
            .retry_ratio(0.0)
            .min_retries_per_sec(0.2)
            .build()
            .unwrap(),
    );
    let retry = Retry::new(policy(5)).budget(budget.clone());
    // The floor is 0.2/s × 10s = 2 retries, shared by both calls.
    let first = fail_with(&retry, ErrorClass::from_status(503)).await;
    assert_eq!(
        (first.reason(), first.attempts()),
        (GiveUpReason::BudgetExhausted, 3)
    );
    let second = fail_with(&retry, ErrorClass::from_status(502)).await;
    assert_eq!(
        (second.reason(), second.attempts()),
        (GiveUpReason::BudgetExhausted, 1)
    );
    assert_eq!(second.class().status, Some(502));
}

/// The load test: many concurrent callers against a dependency that is fully down. The
/// number of calls reaching it, with and without a budget of 0.1.
#[tokio::test(start_paused = true)]
async fn a_budget_bounds_the_load_on_a_dead_dependency() {
    const REQUESTS: usize = 2000;
    let run = async |budget: Option<RetryBudget>| -> usize {
        let hits = Arc::new(AtomicUsize::new(0));
        let mut retry = Retry::<(), ErrorClass>::new(
            RetryPolicy::builder()
                .max_attempts(3)
                .base_delay(MS(50))
                .max_delay(S(1))
                .build()
                .unwrap(),
        );
        if let Some(b) = budget {
            retry = retry.budget(b);
        }
        let retry = Arc::new(retry);
        let mut tasks = Vec::new();
        for i in 0..REQUESTS {
            let (retry, hits) = (retry.clone(), hits.clone());
            tasks.push(tokio::spawn(async move {
                // 200 requests per second for 10 seconds.
                tokio::time::sleep(MS(5 * i as u64)).await;
                let _ = retry
                    .run(async |_| {
                        hits.fetch_add(1, Ordering::Relaxed);
                        Err::<(), _>(ErrorClass::from_status(503))
                    })
                    .await;
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        hits.load(Ordering::Relaxed)
    };
    let without = run(None).await;
    let config = BudgetConfig::builder()
        .retry_ratio(0.1)
        .min_retries_per_sec(1.0)
        .ttl(S(10))
        .build()
        .unwrap();
    let reserve = config.reserve() as usize;
    let with = run(Some(RetryBudget::new(config))).await;
    println!(
        "calls reaching a dead dependency for {REQUESTS} requests: without budget {without}, with budget 0.1 {with}"
    );
    assert_eq!(without, REQUESTS * 3, "max_attempts times the requests");
    // At most 10% extra, plus the floor (1/s over the 10s ttl, for each ttl the run spans).
    assert!(with <= REQUESTS + REQUESTS / 10 + 2 * reserve, "{with}");
    assert!(
        with >= REQUESTS + REQUESTS / 10 - 10,
        "the budget is used, not just refused: {with}"
    );
}

#[tokio::test(start_paused = true)]
async fn at_most_n_calls_retry_at_once() {
    let limit = ConcurrencyLimit::new(ConcurrencyConfig::new(2, WhenFull::GiveUp).unwrap());
    let retry = Arc::new(
        Retry::<(), ErrorClass>::new(
            RetryPolicy::builder()
                .max_attempts(3)
                .backoff(Backoff::Constant)
                .base_delay(S(1))
                .jitter(Jitter::None)
                .build()
                .unwrap(),
        )
        .concurrency_limit(limit.clone()),
    );
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let retry = retry.clone();
        tasks.push(tokio::spawn(async move {
            fail_with(&retry, ErrorClass::from_status(503)).await
        }));
    }
    let mut reasons = Vec::new();
    for t in tasks {
        let err = t.await.unwrap();
        reasons.push((err.reason(), err.attempts()));
    }
    let retried = reasons
        .iter()
        .filter(|r| **r == (GiveUpReason::Exhausted, 3))
        .count();
    let refused = reasons
        .iter()
        .filter(|r| **r == (GiveUpReason::ConcurrencyLimit, 1))
        .count();
    assert_eq!((retried, refused), (2, 8), "{reasons:?}");
    assert_eq!(limit.available(), 2, "slots are returned");
}

#[tokio::test(start_paused = true)]
async fn waiting_for_a_slot_retries_later() {
    let limit = ConcurrencyLimit::new(ConcurrencyConfig::new(1, WhenFull::Wait).unwrap());
    let retry = Arc::new(Retry::<u32, ErrorClass>::new(policy(2)).concurrency_limit(limit.clone()));
    let in_retry = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (retry, in_retry, peak) = (retry.clone(), in_retry.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            retry
                .run(async |n| {
                    if n == 1 {
                        return Err(ErrorClass::from_status(503));
                    }
                    let now = in_retry.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(S(1)).await;
                    in_retry.fetch_sub(1, Ordering::SeqCst);
                    Ok(n)
                })
                .await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), 2);
    }
    assert_eq!(peak.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn is_call_permitted_answers_without_side_effects() {
    let b = breaker(1);
    assert!(b.is_call_permitted(), "closed");
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), BreakerState::Open);
    for _ in 0..3 {
        assert!(!b.is_call_permitted(), "open");
    }
    assert_eq!(b.stats().rejected, 0, "asking is not a rejected call");

    // Open time over: a call would be admitted as a probe — asking takes no slot.
    tokio::time::advance(S(30)).await;
    assert!(b.is_call_permitted());
    assert!(b.is_call_permitted());
    assert_eq!(b.stats().probes_in_flight, 0);
    let probe = b.try_acquire().expect("the probe slot is still free");
    assert!(probe.is_probe());
    // Half-open with its one probe slot taken: not permitted, and still no side effect.
    assert!(!b.is_call_permitted());
    assert_eq!((b.stats().probes_in_flight, b.stats().rejected), (1, 0));
    probe.success();
    assert!(b.is_call_permitted(), "closed again");

    b.isolate();
    assert!(!b.is_call_permitted(), "isolated");
}
