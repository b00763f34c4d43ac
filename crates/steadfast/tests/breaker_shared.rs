//! The breaker's seam for shared state: what it reports, and how outside decisions apply.
//! On tokio's paused clock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use steadfast::{
    BreakerConfig, BreakerEvent, BreakerState, CircuitBreaker, SharedOutcome, SharedState, TripRule,
};

#[derive(Default)]
struct Fake {
    seen: Mutex<Vec<SharedOutcome>>,
    deny_probe: AtomicBool,
    asked: AtomicBool,
}

impl SharedState for Fake {
    fn outcome(&self, o: SharedOutcome) {
        self.seen.lock().unwrap().push(o);
    }
    fn may_probe(&self) -> bool {
        self.asked.store(true, Ordering::SeqCst);
        !self.deny_probe.load(Ordering::SeqCst)
    }
}

fn shared(config: BreakerConfig) -> (CircuitBreaker, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    let b = CircuitBreaker::named("dep", config);
    b.share(fake.clone()).unwrap();
    (b, fake)
}

fn count_rule() -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(2)
        .reset_timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn count_rule_reports_failures_and_probes_but_not_closed_successes() {
    let (b, fake) = shared(count_rule());
    for _ in 0..5 {
        b.try_acquire().unwrap().success();
    }
    assert!(
        fake.seen.lock().unwrap().is_empty(),
        "the closed path shares nothing"
    );
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
    tokio::time::advance(Duration::from_secs(10)).await;
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.success();
    let seen = fake.seen.lock().unwrap().clone();
    let flags: Vec<(bool, bool)> = seen.iter().map(|o| (o.failed, o.probe)).collect();
    assert_eq!(flags, [(true, false), (true, false), (false, true)]);
}

#[tokio::test(start_paused = true)]
async fn ratio_rule_reports_successes_too() {
    let (b, fake) = shared(
        BreakerConfig::builder()
            .trip(TripRule::Ratio)
            .failure_ratio(0.5)
            .minimum_throughput(10)
            .build()
            .unwrap(),
    );
    b.try_acquire().unwrap().success();
    b.try_acquire().unwrap().failure();
    let seen = fake.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(!seen[0].failed && seen[1].failed);
}

#[tokio::test(start_paused = true)]
async fn a_denied_probe_keeps_the_breaker_open_here() {
    let (b, fake) = shared(count_rule());
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
    assert!(
        !fake.asked.load(Ordering::SeqCst),
        "no probe question while open"
    );
    tokio::time::advance(Duration::from_secs(10)).await;
    fake.deny_probe.store(true, Ordering::SeqCst);
    let rejected = b.try_acquire().unwrap_err();
    assert_eq!(rejected.state, BreakerState::Open);
    assert!(fake.asked.load(Ordering::SeqCst));
    fake.deny_probe.store(false, Ordering::SeqCst);
    assert!(b.try_acquire().unwrap().is_probe());
}

#[tokio::test(start_paused = true)]
async fn open_shared_opens_and_never_shortens() {
    let b = CircuitBreaker::new(count_rule());
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    b.subscribe(move |e| log.lock().unwrap().push(e.clone()));
    assert!(b.open_shared(Duration::from_secs(5)));
    assert!(b.try_acquire().is_err());
    assert!(!b.open_shared(Duration::from_secs(1)));
    assert!(
        b.open_shared(Duration::from_secs(8)),
        "a longer opening extends it"
    );
    tokio::time::advance(Duration::from_secs(7)).await;
    assert_eq!(b.state(), BreakerState::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(b.try_acquire().unwrap().is_probe());
    assert!(matches!(
        events.lock().unwrap()[0],
        BreakerEvent::Opened { open_for, .. } if open_for == Duration::from_secs(5)
    ));
    assert_eq!(b.stats().times_opened, 1, "extending is not opening again");
}

#[tokio::test(start_paused = true)]
async fn isolation_wins_over_shared_decisions() {
    let b = CircuitBreaker::new(count_rule());
    b.isolate();
    assert!(!b.open_shared(Duration::from_secs(5)));
    assert!(!b.close_shared());
    assert_eq!(b.state(), BreakerState::Isolated);
}

#[tokio::test(start_paused = true)]
async fn close_shared_closes_open_and_half_open_breakers() {
    let b = CircuitBreaker::new(count_rule());
    assert!(!b.close_shared(), "already closed");
    b.open_shared(Duration::from_secs(5));
    assert!(b.close_shared());
    assert!(b.try_acquire().is_ok());
    b.open_shared(Duration::from_secs(5));
    tokio::time::advance(Duration::from_secs(5)).await;
    let probe = b.try_acquire().unwrap();
    assert!(b.close_shared());
    // The probe admitted before the close belongs to an older state: its failure is ignored.
    probe.failure();
    assert_eq!(b.state(), BreakerState::Closed);
}

#[test]
fn a_breaker_shares_once() {
    let b = CircuitBreaker::new(count_rule());
    assert!(!b.is_shared());
    b.share(Arc::new(Fake::default())).unwrap();
    assert!(b.clone().share(Arc::new(Fake::default())).is_err());
    assert!(b.is_shared());
}
