//! Breaker consistency under contention: many tasks on a multi-threaded runtime hammer one
//! breaker while the dependency fails about a third of the time. A stress test with assertions
//! (not loom): it checks invariants on every step and on the event log, not timings. The breaker's
//! open time is 1 ms of real time so that the run passes through many open/half-open cycles; no
//! test sleeps.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use steadfast::{BreakerConfig, BreakerEvent, BreakerState, CircuitBreaker, Rng, TripRule};

const TASKS: u64 = 16;
const CALLS_PER_TASK: u64 = 4000;
const MAX_PROBES: u32 = 2;

fn hammer(config: BreakerConfig) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    let breaker = CircuitBreaker::new(config);
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    breaker.subscribe(move |ev| {
        if !matches!(ev, BreakerEvent::Rejected { .. }) {
            sink.lock().unwrap().push(ev.clone());
        }
    });
    let probes_in_flight = Arc::new(AtomicU32::new(0));
    let peak_probes = Arc::new(AtomicU32::new(0));
    let probes_run = Arc::new(AtomicU64::new(0));

    rt.block_on(async {
        let mut tasks = Vec::new();
        for seed in 0..TASKS {
            let (b, in_flight, peak, run) = (
                breaker.clone(),
                probes_in_flight.clone(),
                peak_probes.clone(),
                probes_run.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng::with_seed(seed);
                for _ in 0..CALLS_PER_TASK {
                    let Ok(permit) = b.try_acquire() else {
                        tokio::task::yield_now().await;
                        continue;
                    };
                    let probe = permit.is_probe();
                    if probe {
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        assert!(now <= MAX_PROBES, "{now} probes in flight");
                        run.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::task::yield_now().await;
                    let roll = rng.next_u64() % 100;
                    if probe {
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                    }
                    match roll {
                        0..=32 => permit.failure(),
                        33..=35 => drop(permit), // cancelled: no outcome
                        _ => permit.success(),
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });

    let events = log.lock().unwrap().clone();
    let stats = breaker.stats();
    // The log is a valid walk through the state machine.
    let mut state = BreakerState::Closed;
    for (i, ev) in events.iter().enumerate() {
        state = match (state, ev) {
            (BreakerState::Closed | BreakerState::HalfOpen, BreakerEvent::Opened { .. }) => {
                BreakerState::Open
            }
            (BreakerState::Open, BreakerEvent::HalfOpened) => BreakerState::HalfOpen,
            (BreakerState::HalfOpen, BreakerEvent::Closed) => BreakerState::Closed,
            (s, e) => panic!("event {i}: {e:?} cannot follow state {s:?}"),
        };
    }
    let opened = events
        .iter()
        .filter(|e| matches!(e, BreakerEvent::Opened { .. }))
        .count() as u64;
    assert_eq!(opened, stats.times_opened, "every opening reported once");
    assert!(opened > 10, "the run should cycle many times, got {opened}");
    assert!(probes_run.load(Ordering::Relaxed) > 10);
    assert!(peak_probes.load(Ordering::SeqCst) <= MAX_PROBES);
    assert_eq!(probes_in_flight.load(Ordering::SeqCst), 0);
    assert_eq!(stats.probes_in_flight, 0, "every probe slot was returned");
    // The last event leaves the breaker where it is now (an open breaker past its time reports
    // half-open before the next call turns it so).
    match state {
        BreakerState::Open => assert!(matches!(
            stats.state,
            BreakerState::Open | BreakerState::HalfOpen
        )),
        s => assert_eq!(stats.state, s),
    }
    println!(
        "{:?}: {} events, {opened} openings, {} probes, peak {} probes in flight, {} rejections",
        config_rule(&breaker),
        events.len(),
        probes_run.load(Ordering::Relaxed),
        peak_probes.load(Ordering::SeqCst),
        stats.rejected
    );
}

fn config_rule(b: &CircuitBreaker) -> TripRule {
    b.config().trip()
}

#[test]
fn count_rule_stays_consistent_under_contention() {
    hammer(
        BreakerConfig::builder()
            .failure_threshold(5)
            .window(Duration::from_secs(1))
            .reset_timeout(Duration::from_millis(1))
            .half_open_max_calls(MAX_PROBES)
            .success_threshold(3)
            .build()
            .unwrap(),
    );
}

#[test]
fn ratio_rule_stays_consistent_under_contention() {
    hammer(
        BreakerConfig::builder()
            .trip(TripRule::Ratio)
            .failure_ratio(0.3)
            .minimum_throughput(20)
            .window(Duration::from_secs(1))
            .reset_timeout(Duration::from_millis(1))
            .half_open_max_calls(MAX_PROBES)
            .success_threshold(3)
            .build()
            .unwrap(),
    );
}
