//! `steadfast simulate`: what a policy does to a dependency, before it ships.
//!
//! Both experiments run the library's own [`Retry`], [`RetryBudget`] and [`CircuitBreaker`] on
//! a simulated clock: a single-threaded tokio runtime with its clock paused, which jumps to the
//! next timer whenever every task is waiting. Nothing sleeps in real time, and with one thread
//! and seeded jitter every run is reproducible.
//!
//! **Contention** (the experiment of the AWS Architecture Blog post "Exponential Backoff And
//! Jitter"): N clients each make one write to a single resource under optimistic concurrency.
//! Time is cut into slots (1 ms by default); the first write in a slot commits, and every other
//! write in the same slot conflicts and must be retried. All clients start at once. We count
//! the calls made and the time until the last client finished.
//!
//! **Overload**: requests arrive at a steady rate; the dependency answers each call after a
//! fixed latency and fails a chosen fraction of them (1.0 is a full outage). We count the calls
//! that reach the dependency per request offered — the load amplification — with no retries,
//! with retries, with retries and a budget, and with retries, a budget and a breaker.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;
use steadfast::{
    BreakerConfig, BudgetConfig, CircuitBreaker, ErrorClass, ErrorCode, Jitter, Retry, RetryBudget,
    RetryPolicy, Rng,
};
use tokio::time::Instant;

/// One contention run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContentionRow {
    /// The jitter strategy.
    pub jitter: &'static str,
    /// Clients writing at once.
    pub clients: usize,
    /// Writes attempted, by all clients.
    pub calls: u64,
    /// Clients whose write committed.
    pub finished: u64,
    /// Clients that gave up (the policy ran out of attempts or time).
    pub gave_up: u64,
    /// Simulated time until the last client finished or gave up, in milliseconds.
    pub time_ms: f64,
}

/// The jitter strategies the contention sweep compares.
pub const JITTERS: [(Jitter, &str); 4] = [
    (Jitter::None, "none"),
    (Jitter::Full, "full"),
    (Jitter::Equal, "equal"),
    (Jitter::Decorrelated, "decorrelated"),
];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime can always be built")
}

fn conflict() -> ErrorClass {
    ErrorClass::retriable(ErrorCode::new("CONFLICT")).with_message("write conflict")
}

/// Runs the contention experiment once.
pub fn contention(
    policy: &RetryPolicy,
    jitter: (Jitter, &'static str),
    clients: usize,
    slot: Duration,
    seed: u64,
) -> ContentionRow {
    let policy = policy
        .with_overrides(&RetryPolicy::builder().jitter(jitter.0))
        .unwrap_or_else(|_| policy.clone());
    let slot_nanos = slot.as_nanos().max(1);
    runtime().block_on(async move {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                let start = Instant::now();
                let taken: Rc<RefCell<HashSet<u128>>> = Rc::default();
                let calls = Rc::new(Cell::new(0u64));
                let mut tasks = Vec::with_capacity(clients);
                for i in 0..clients {
                    let retry = Retry::<(), ErrorClass>::new(policy.clone()).seed(
                        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                            .wrapping_add(i as u64),
                    );
                    let (taken, calls) = (taken.clone(), calls.clone());
                    tasks.push(tokio::task::spawn_local(async move {
                        let out = retry
                            .run(|_| {
                                calls.set(calls.get() + 1);
                                let slot = start.elapsed().as_nanos() / slot_nanos;
                                let won = taken.borrow_mut().insert(slot);
                                std::future::ready(if won { Ok(()) } else { Err(conflict()) })
                            })
                            .await;
                        (out.is_ok(), start.elapsed())
                    }));
                }
                let (mut finished, mut last) = (0, Duration::ZERO);
                for t in tasks {
                    let (ok, at) = t.await.expect("simulated clients do not panic");
                    finished += u64::from(ok);
                    last = last.max(at);
                }
                ContentionRow {
                    jitter: jitter.1,
                    clients,
                    calls: calls.get(),
                    finished,
                    gave_up: clients as u64 - finished,
                    time_ms: last.as_secs_f64() * 1000.0,
                }
            })
            .await
    })
}

/// What protects the dependency in an overload run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guard {
    /// One attempt per request.
    NoRetries,
    /// The policy's retries.
    Retries,
    /// Retries drawn from a budget.
    RetriesBudget,
    /// Retries, a budget, and a breaker.
    RetriesBudgetBreaker,
}

impl Guard {
    /// All four, in the order of the report.
    pub const ALL: [Guard; 4] = [
        Guard::NoRetries,
        Guard::Retries,
        Guard::RetriesBudget,
        Guard::RetriesBudgetBreaker,
    ];

    /// The label in tables and plots.
    pub fn label(self) -> &'static str {
        match self {
            Guard::NoRetries => "no retries",
            Guard::Retries => "retries",
            Guard::RetriesBudget => "retries + budget",
            Guard::RetriesBudgetBreaker => "retries + budget + breaker",
        }
    }
}

/// The overload experiment's knobs.
#[derive(Debug, Clone)]
pub struct OverloadParams {
    /// The retry policy.
    pub policy: RetryPolicy,
    /// The budget for the budget variants.
    pub budget: BudgetConfig,
    /// The breaker for the breaker variant.
    pub breaker: BreakerConfig,
    /// Requests offered per second.
    pub rate: u32,
    /// How long requests keep arriving.
    pub duration: Duration,
    /// How long the dependency takes to answer.
    pub latency: Duration,
    /// Seed for failures and jitter.
    pub seed: u64,
}

/// One overload run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverloadRow {
    /// Share of calls the dependency fails.
    pub failure_rate: f64,
    /// The protection.
    pub guard: Guard,
    /// Requests offered.
    pub offered: u64,
    /// Calls that reached the dependency.
    pub dependency_calls: u64,
    /// `dependency_calls / offered`.
    pub amplification: f64,
    /// Requests that succeeded.
    pub succeeded: u64,
}

fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Runs the overload experiment once.
pub fn overload(p: &OverloadParams, failure_rate: f64, guard: Guard) -> OverloadRow {
    let policy = match guard {
        Guard::NoRetries => RetryPolicy::no_retry(),
        _ => p.policy.clone(),
    };
    let offered = (u128::from(p.rate) * p.duration.as_millis() / 1000) as u64;
    let gap = Duration::from_secs(1) / p.rate.max(1);
    let p = p.clone();
    runtime().block_on(async move {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                let budget = matches!(guard, Guard::RetriesBudget | Guard::RetriesBudgetBreaker)
                    .then(|| RetryBudget::new(p.budget.clone()));
                let breaker = (guard == Guard::RetriesBudgetBreaker)
                    .then(|| CircuitBreaker::new(p.breaker.clone()));
                let rng = Rc::new(RefCell::new(Rng::with_seed(p.seed)));
                let calls = Rc::new(Cell::new(0u64));
                let mut tasks = Vec::new();
                for i in 0..offered {
                    let mut retry =
                        Retry::<(), ErrorClass>::new(policy.clone()).seed(p.seed.wrapping_add(i));
                    if let Some(b) = &budget {
                        retry = retry.budget(b.clone());
                    }
                    if let Some(b) = &breaker {
                        retry = retry.breaker(b.clone());
                    }
                    let (rng, calls, latency) = (rng.clone(), calls.clone(), p.latency);
                    tasks.push(tokio::task::spawn_local(async move {
                        retry
                            .run(|_| {
                                calls.set(calls.get() + 1);
                                let fail = unit(&mut rng.borrow_mut()) < failure_rate;
                                async move {
                                    tokio::time::sleep(latency).await;
                                    if fail {
                                        Err(ErrorClass::from_status(503))
                                    } else {
                                        Ok(())
                                    }
                                }
                            })
                            .await
                            .is_ok()
                    }));
                    tokio::time::sleep(gap).await;
                }
                let mut succeeded = 0;
                for t in tasks {
                    succeeded += u64::from(t.await.expect("simulated requests do not panic"));
                }
                OverloadRow {
                    failure_rate,
                    guard,
                    offered,
                    dependency_calls: calls.get(),
                    amplification: calls.get() as f64 / offered.max(1) as f64,
                    succeeded,
                }
            })
            .await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy::builder()
            .max_attempts(1000)
            .base_delay(Duration::from_millis(10))
            .max_delay(Duration::from_secs(2))
            .build()
            .unwrap()
    }

    #[test]
    fn contention_is_deterministic_for_a_seed_and_differs_across_seeds() {
        let a = contention(&policy(), JITTERS[1], 30, Duration::from_millis(1), 7);
        let b = contention(&policy(), JITTERS[1], 30, Duration::from_millis(1), 7);
        let c = contention(&policy(), JITTERS[1], 30, Duration::from_millis(1), 8);
        assert_eq!(a, b);
        assert_ne!((a.calls, a.time_ms), (c.calls, c.time_ms));
    }

    #[test]
    fn every_client_finishes_or_gives_up_and_calls_cover_clients() {
        for jitter in JITTERS {
            for n in [1, 10, 50] {
                let r = contention(&policy(), jitter, n, Duration::from_millis(1), 1);
                assert_eq!(r.finished + r.gave_up, n as u64, "{r:?}");
                assert!(r.calls >= n as u64, "{r:?}");
                assert_eq!(r.gave_up, 0, "1000 attempts are enough: {r:?}");
            }
        }
    }

    #[test]
    fn without_jitter_clients_collide_in_lockstep() {
        // All N retry at the same instants, so exactly one commits per round:
        // N + (N-1) + … + 1 calls. This is the library's backoff, not a model of it.
        let r = contention(&policy(), JITTERS[0], 20, Duration::from_millis(1), 1);
        assert_eq!(r.calls, 20 * 21 / 2);
        let full = contention(&policy(), JITTERS[1], 20, Duration::from_millis(1), 1);
        assert!(full.calls < r.calls, "{full:?} vs {r:?}");
    }

    #[test]
    fn a_policy_that_gives_up_is_reported() {
        let short = RetryPolicy::builder().max_attempts(2).build().unwrap();
        let r = contention(&short, JITTERS[0], 10, Duration::from_millis(1), 1);
        assert_eq!((r.finished, r.gave_up, r.calls), (2, 8, 19));
    }

    fn params() -> OverloadParams {
        OverloadParams {
            policy: RetryPolicy::builder().max_attempts(3).build().unwrap(),
            budget: BudgetConfig::builder()
                .retry_ratio(0.1)
                .min_retries_per_sec(1.0)
                .build()
                .unwrap(),
            breaker: BreakerConfig::default(),
            rate: 100,
            duration: Duration::from_secs(10),
            latency: Duration::from_millis(20),
            seed: 3,
        }
    }

    #[test]
    fn overload_amplification_follows_the_library_guards() {
        let p = params();
        let none = overload(&p, 1.0, Guard::NoRetries);
        let retries = overload(&p, 1.0, Guard::Retries);
        let budget = overload(&p, 1.0, Guard::RetriesBudget);
        let breaker = overload(&p, 1.0, Guard::RetriesBudgetBreaker);
        assert_eq!(none.offered, 1000);
        assert_eq!(none.dependency_calls, 1000);
        assert_eq!(
            retries.dependency_calls, 3000,
            "every request makes max_attempts calls"
        );
        // The budget allows 10% of deposits plus its floor of 1/s.
        assert!(
            (1100..=1130).contains(&budget.dependency_calls),
            "{budget:?}"
        );
        assert!(
            breaker.dependency_calls < 100,
            "an open breaker stops the load: {breaker:?}"
        );
        assert_eq!(breaker.succeeded, 0);
        // A healthy dependency is not amplified.
        assert_eq!(overload(&p, 0.0, Guard::Retries).amplification, 1.0);
    }

    #[test]
    fn overload_is_deterministic() {
        let p = params();
        assert_eq!(
            overload(&p, 0.3, Guard::RetriesBudget),
            overload(&p, 0.3, Guard::RetriesBudget)
        );
    }
}
