//! Every transition, on tokio's paused clock.

use super::*;
use std::sync::Mutex as StdMutex;
use tokio::time::advance;

const S: fn(u64) -> Duration = Duration::from_secs;

fn count_breaker(threshold: u32, window: u64) -> CircuitBreaker {
    CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(threshold)
            .window(S(window))
            .reset_timeout(S(10))
            .build()
            .unwrap(),
    )
}

fn fail(b: &CircuitBreaker) {
    b.try_acquire().expect("admitted").failure();
}

fn succeed(b: &CircuitBreaker) {
    b.try_acquire().expect("admitted").success();
}

fn events(b: &CircuitBreaker) -> Arc<StdMutex<Vec<BreakerEvent>>> {
    let log = Arc::new(StdMutex::new(Vec::new()));
    let sink = log.clone();
    b.subscribe(move |ev| sink.lock().unwrap().push(ev.clone()));
    log
}

#[tokio::test(start_paused = true)]
async fn count_rule_opens_at_the_threshold() {
    let b = count_breaker(3, 60);
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.stats().failures_in_window, 2);
    fail(&b);
    assert_eq!(b.state(), BreakerState::Open);
    let r = b.try_acquire().unwrap_err();
    assert_eq!((r.state, r.retry_in), (BreakerState::Open, Some(S(10))));
}

#[tokio::test(start_paused = true)]
async fn count_rule_window_forgets_old_failures() {
    let b = count_breaker(3, 60);
    fail(&b);
    advance(S(30)).await;
    fail(&b);
    advance(S(31)).await; // the first failure is now 61s old
    fail(&b);
    assert_eq!(
        b.state(),
        BreakerState::Closed,
        "only two failures in the last 60s"
    );
    assert_eq!(b.stats().failures_in_window, 2);
    fail(&b);
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn caller_errors_and_successes_do_not_trip() {
    let b = count_breaker(2, 60);
    for _ in 0..10 {
        let class = ErrorClass::from_status(404);
        b.try_acquire()
            .unwrap()
            .record(class.counts_as_breaker_failure());
        succeed(&b);
    }
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.stats().failures_in_window, 0);
}

#[tokio::test(start_paused = true)]
async fn open_half_open_closed_with_success_threshold() {
    let b = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(1)
            .reset_timeout(S(10))
            .success_threshold(2)
            .build()
            .unwrap(),
    );
    fail(&b);
    advance(S(9)).await;
    assert_eq!(b.try_acquire().unwrap_err().retry_in, Some(S(1)));
    advance(S(1)).await;
    assert_eq!(b.state(), BreakerState::HalfOpen);
    succeed(&b);
    assert_eq!(b.state(), BreakerState::HalfOpen, "one success of two");
    succeed(&b);
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.stats().consecutive_opens, 0);
}

#[tokio::test(start_paused = true)]
async fn probe_failure_reopens_with_a_growing_break() {
    let b = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(1)
            .reset_timeout(S(10))
            .reset_timeout_growth(2.0)
            .max_reset_timeout(S(30))
            .build()
            .unwrap(),
    );
    let log = events(&b);
    fail(&b);
    for expected in [20, 30, 30] {
        advance(b.stats().open_remaining.unwrap()).await;
        let probe = b.try_acquire().unwrap();
        assert!(probe.is_probe());
        probe.failure();
        assert_eq!(b.stats().open_remaining, Some(S(expected)));
    }
    advance(S(30)).await;
    succeed(&b);
    assert_eq!(b.state(), BreakerState::Closed);
    // Closing resets the growth: the next opening is back to 10s.
    fail(&b);
    assert_eq!(b.stats().open_remaining, Some(S(10)));
    let opened: Vec<_> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            BreakerEvent::Opened {
                open_for,
                consecutive,
            } => Some((open_for.as_secs(), *consecutive)),
            _ => None,
        })
        .collect();
    assert_eq!(opened, [(10, 1), (20, 2), (30, 3), (30, 4), (10, 1)]);
}

#[tokio::test(start_paused = true)]
async fn half_open_admits_at_most_its_probe_limit() {
    let b = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(1)
            .reset_timeout(S(5))
            .half_open_max_calls(2)
            .success_threshold(3)
            .build()
            .unwrap(),
    );
    fail(&b);
    advance(S(5)).await;
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    let r = b.try_acquire().unwrap_err();
    assert_eq!((r.state, r.retry_in), (BreakerState::HalfOpen, None));
    assert_eq!(b.stats().probes_in_flight, 2);
    // A probe dropped unresolved (cancelled) frees its slot without counting.
    drop(p1);
    let p3 = b.try_acquire().unwrap();
    assert!(b.try_acquire().is_err());
    p2.success();
    p3.success();
    assert_eq!(b.state(), BreakerState::HalfOpen, "two of three successes");
    succeed(&b);
    assert_eq!(b.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn stale_outcomes_are_ignored() {
    let b = count_breaker(1, 60);
    let slow_call = b.try_acquire().unwrap(); // admitted while closed
    fail(&b); // opens
    advance(S(10)).await;
    let probe = b.try_acquire().unwrap(); // half-open
    assert!(!slow_call.is_current());
    slow_call.success(); // must not count as a probe success
    assert_eq!(b.state(), BreakerState::HalfOpen);
    assert_eq!(b.stats().probes_in_flight, 1);
    probe.success();
    assert_eq!(b.state(), BreakerState::Closed);
    // And a stale failure cannot reopen a closed breaker of a later generation.
    let b = count_breaker(1, 60);
    let old = b.try_acquire().unwrap();
    b.isolate();
    b.reset();
    old.failure();
    assert_eq!(b.state(), BreakerState::Closed);
}

fn ratio_breaker(min: u32) -> CircuitBreaker {
    CircuitBreaker::new(
        BreakerConfig::builder()
            .trip(TripRule::Ratio)
            .failure_ratio(0.5)
            .minimum_throughput(min)
            .window(S(10))
            .build()
            .unwrap(),
    )
}

#[tokio::test(start_paused = true)]
async fn ratio_rule_waits_for_minimum_throughput() {
    let b = ratio_breaker(10);
    for _ in 0..9 {
        fail(&b);
    }
    assert_eq!(
        b.state(),
        BreakerState::Closed,
        "9 calls < minimum throughput 10"
    );
    assert_eq!(b.stats().calls_in_window, Some(9));
    fail(&b);
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn ratio_rule_compares_failures_with_calls() {
    let b = ratio_breaker(4);
    for _ in 0..6 {
        succeed(&b);
    }
    for _ in 0..5 {
        fail(&b);
    }
    assert_eq!(b.state(), BreakerState::Closed, "5 of 11 < 50%");
    fail(&b);
    assert_eq!(b.state(), BreakerState::Open, "6 of 12 = 50%");
}

#[tokio::test(start_paused = true)]
async fn ratio_window_forgets_old_calls() {
    let b = ratio_breaker(4);
    for _ in 0..3 {
        fail(&b);
    }
    advance(S(10)).await; // the window (10 buckets of 1s) has moved past them
    fail(&b);
    assert_eq!(b.stats().calls_in_window, Some(1));
    assert_eq!(b.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn slow_successes_count_as_failures() {
    let b = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(2)
            .slow_call_threshold(S(2))
            .build()
            .unwrap(),
    );
    b.try_acquire().unwrap().success_after(S(1));
    b.try_acquire().unwrap().success_after(S(3));
    assert_eq!(b.state(), BreakerState::Closed);
    b.try_acquire().unwrap().success_after(S(5));
    assert_eq!(b.state(), BreakerState::Open);
}

#[tokio::test(start_paused = true)]
async fn isolate_and_reset() {
    let b = count_breaker(1, 60);
    let log = events(&b);
    b.isolate();
    advance(S(3600)).await;
    assert_eq!(
        b.try_acquire().unwrap_err().state,
        BreakerState::Isolated,
        "isolation does not time out"
    );
    b.reset();
    succeed(&b);
    fail(&b);
    b.reset();
    assert_eq!(b.state(), BreakerState::Closed);
    assert!(b.try_acquire().is_ok());
    assert_eq!(
        *log.lock().unwrap(),
        [
            BreakerEvent::Isolated,
            BreakerEvent::Rejected {
                state: BreakerState::Isolated
            },
            BreakerEvent::Closed,
            BreakerEvent::Opened {
                open_for: S(10),
                consecutive: 1
            },
            BreakerEvent::Closed,
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn events_follow_the_cycle_in_order() {
    let b = count_breaker(2, 60);
    let log = events(&b);
    fail(&b);
    fail(&b);
    let _ = b.try_acquire();
    advance(S(10)).await;
    b.try_acquire().unwrap().failure();
    advance(S(10)).await;
    succeed(&b);
    assert_eq!(
        *log.lock().unwrap(),
        [
            BreakerEvent::Opened {
                open_for: S(10),
                consecutive: 1
            },
            BreakerEvent::Rejected {
                state: BreakerState::Open
            },
            BreakerEvent::HalfOpened,
            BreakerEvent::Opened {
                open_for: S(10),
                consecutive: 2
            },
            BreakerEvent::HalfOpened,
            BreakerEvent::Closed,
        ]
    );
    let s = b.stats();
    assert_eq!((s.times_opened, s.rejected), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn unsubscribed_listeners_hear_nothing() {
    let b = count_breaker(1, 60);
    let log = Arc::new(StdMutex::new(0));
    let sink = log.clone();
    let id = b.subscribe(move |_| *sink.lock().unwrap() += 1);
    fail(&b);
    assert!(b.unsubscribe(id));
    let _ = b.try_acquire();
    assert_eq!(*log.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn subscribers_may_call_back_into_the_breaker() {
    let b = count_breaker(1, 60);
    let inner = b.clone();
    let seen = Arc::new(StdMutex::new(Vec::new()));
    let sink = seen.clone();
    b.subscribe(move |ev| {
        if matches!(ev, BreakerEvent::Opened { .. }) {
            sink.lock().unwrap().push(inner.stats().state);
        }
    });
    fail(&b);
    assert_eq!(*seen.lock().unwrap(), [BreakerState::Open]);
}

#[test]
fn rejection_reads_well() {
    let r = Rejected {
        state: BreakerState::Open,
        retry_in: Some(Duration::from_millis(12_345_678)),
        name: Some("search".into()),
    };
    assert_eq!(
        r.to_string(),
        "circuit breaker \"search\" is open; it may admit a call in 3h 25m 45s 678ms"
    );
    assert_eq!(r.class().retry_after, r.retry_in);
    assert!(!r.class().counts_as_breaker_failure());
}

#[tokio::test(start_paused = true)]
async fn probes_from_an_earlier_half_open_period_keep_their_slots() {
    let b = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(1)
            .reset_timeout(S(5))
            .half_open_max_calls(2)
            .build()
            .unwrap(),
    );
    fail(&b);
    advance(S(5)).await;
    let slow_probe = b.try_acquire().unwrap();
    b.try_acquire().unwrap().failure(); // reopens
    advance(S(5)).await;
    // One slot is still held by the slow probe of the previous period.
    let p = b.try_acquire().unwrap();
    assert_eq!(b.try_acquire().unwrap_err().state, BreakerState::HalfOpen);
    drop(slow_probe);
    let q = b.try_acquire().unwrap();
    p.success();
    q.success();
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.stats().probes_in_flight, 0);
}
