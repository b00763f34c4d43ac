//! `steadfast simulate`: what a policy does to a dependency, before it ships.
//!
//! Both experiments run the library's own [`Retry`], [`RetryBudget`] and [`CircuitBreaker`] on
//! a simulated clock: a single-threaded tokio runtime with its clock paused, which jumps to the
//! next timer whenever every task is waiting. Nothing sleeps in real time, and with one thread
//! and seeded jitter every run is reproducible.
//!
//! **Contention** (the experiment of the AWS Architecture Blog post "Exponential Backoff And
//! Jitter"), in two models:
//! - `aws`, the post's own simulator: each client reads a row's version and then writes it under
//!   optimistic concurrency; a write carrying a stale version fails, and the client retries read
//!   and write after its backoff. Every message takes |Normal(10, 2)| time units; backoff base 5,
//!   cap 2000 units; strategies: no backoff, exponential without jitter, full, equal and
//!   decorrelated jitter. AWS's `base × 2^n` for retry `n` is Steadfast's `base × 2^(n−1)` with
//!   the base doubled, so the exponential strategies run with `base_delay` 10 units (decorrelated
//!   jitter, whose formula has no exponent, with 5). One time unit is one second of the paused
//!   clock, so tokio's millisecond timer resolution is a thousandth of a unit.
//! - `slots`: time is cut into slots (1 ms by default); the first write in a slot commits, and
//!   every other write in the same slot conflicts and is retried — under the policy you give.
//!
//! All clients start at once. We count the writes made and the time until the last client
//! finished, averaged over runs with different seeds.
//!
//! **Overload**: requests arrive at a steady rate; the dependency answers each call after a
//! fixed latency and fails a chosen fraction of them (1.0 is a full outage). We count the calls
//! that reach the dependency per request offered — the load amplification — and the requests
//! that succeeded per request offered — the goodput — with no retries, with retries, with
//! retries and a budget, and with retries, a budget and a breaker. Amplification alone flatters
//! a breaker that refuses nearly everything; goodput shows what it cost.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;
use steadfast::{
    Backoff, BreakerConfig, BudgetConfig, CircuitBreaker, ErrorClass, ErrorCode, Jitter, Retry,
    RetryBudget, RetryPolicy, Rng,
};
use tokio::time::Instant;

/// A backoff strategy of the contention experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Retry at once (AWS model only).
    NoBackoff,
    /// Exponential backoff without jitter.
    Exponential,
    /// Full jitter: `random(0, d)`.
    Full,
    /// Equal jitter: `d/2 + random(0, d/2)`.
    Equal,
    /// Decorrelated jitter: `min(cap, random(base, previous × 3))`.
    Decorrelated,
}

impl Strategy {
    /// The label in tables and plots.
    pub fn label(self) -> &'static str {
        match self {
            Strategy::NoBackoff => "no backoff",
            Strategy::Exponential => "exponential",
            Strategy::Full => "full jitter",
            Strategy::Equal => "equal jitter",
            Strategy::Decorrelated => "decorrelated jitter",
        }
    }

    fn jitter(self) -> Jitter {
        match self {
            Strategy::Full => Jitter::Full,
            Strategy::Equal => Jitter::Equal,
            Strategy::Decorrelated => Jitter::Decorrelated,
            Strategy::NoBackoff | Strategy::Exponential => Jitter::None,
        }
    }
}

/// Which contention model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// AWS's simulator: read a version, write it; network time |Normal(10, 2)| per message.
    Aws,
    /// 1 ms write slots: the first write in a slot wins.
    Slots,
}

impl Model {
    /// The strategies the model compares.
    pub fn strategies(self) -> &'static [Strategy] {
        match self {
            Model::Aws => &[
                Strategy::NoBackoff,
                Strategy::Exponential,
                Strategy::Full,
                Strategy::Equal,
                Strategy::Decorrelated,
            ],
            Model::Slots => &[
                Strategy::Exponential,
                Strategy::Full,
                Strategy::Equal,
                Strategy::Decorrelated,
            ],
        }
    }

    /// The unit of [`ContentionRow::time`].
    pub fn time_unit(self) -> &'static str {
        match self {
            Model::Aws => "units",
            Model::Slots => "ms",
        }
    }
}

/// One contention point: a strategy and a client count, averaged over runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContentionRow {
    /// The model.
    pub model: Model,
    /// The backoff strategy.
    pub strategy: Strategy,
    /// Clients writing at once.
    pub clients: usize,
    /// Runs averaged (each with its own seed).
    pub runs: u32,
    /// Writes attempted by all clients, per run.
    pub calls: f64,
    /// Clients that gave up (the policy ran out of attempts or time), per run.
    pub gave_up: f64,
    /// Time until the last client finished or gave up, per run, in [`Model::time_unit`]s.
    pub time: f64,
}

/// AWS's parameters: message time |Normal(10, 2)|, backoff base 5, cap 2000 (time units).
pub const AWS_NET_MEAN: f64 = 10.0;
/// See [`AWS_NET_MEAN`].
pub const AWS_NET_SD: f64 = 2.0;
/// See [`AWS_NET_MEAN`].
pub const AWS_BASE: u64 = 5;
/// See [`AWS_NET_MEAN`].
pub const AWS_CAP: u64 = 2000;

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

fn client_seed(seed: u64, run: u32, client: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(u64::from(run) << 32)
        .wrapping_add(client as u64)
}

/// The library policy for a strategy of the AWS model.
pub fn aws_policy(strategy: Strategy) -> RetryPolicy {
    let unit = Duration::from_secs(1);
    let base = match strategy {
        // AWS's retry n waits base·2^n, Steadfast's base·2^(n−1): double the base.
        Strategy::Exponential | Strategy::Full | Strategy::Equal => unit * (2 * AWS_BASE as u32),
        Strategy::Decorrelated | Strategy::NoBackoff => unit * AWS_BASE as u32,
    };
    RetryPolicy::builder()
        .max_attempts(u32::MAX)
        .backoff(if strategy == Strategy::NoBackoff {
            Backoff::None
        } else {
            Backoff::Exponential
        })
        .base_delay(base)
        .max_delay(unit * AWS_CAP as u32)
        .jitter(strategy.jitter())
        .build()
        .expect("the AWS parameters make a valid policy")
}

/// One message's travel time: |Normal(mean, sd)| time units (Box–Muller on the seeded RNG).
fn message_time(rng: &mut Rng) -> Duration {
    let u1 = unit(rng).max(f64::MIN_POSITIVE);
    let u2 = unit(rng);
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    Duration::from_secs_f64((AWS_NET_MEAN + AWS_NET_SD * z).abs())
}

/// Runs the contention experiment: `runs` runs of `clients` clients, averaged.
pub fn contention(
    model: Model,
    policy: &RetryPolicy,
    strategy: Strategy,
    clients: usize,
    slot: Duration,
    seed: u64,
    runs: u32,
) -> ContentionRow {
    let runs = runs.max(1);
    let (mut calls, mut gave_up, mut time) = (0.0, 0.0, 0.0);
    for run in 0..runs {
        let (c, g, t) = match model {
            Model::Aws => aws_run(strategy, clients, seed, run),
            Model::Slots => slots_run(policy, strategy, clients, slot, seed, run),
        };
        calls += c as f64;
        gave_up += g as f64;
        time += t;
    }
    let n = f64::from(runs);
    ContentionRow {
        model,
        strategy,
        clients,
        runs,
        calls: calls / n,
        gave_up: gave_up / n,
        time: time / n,
    }
}

/// Spawns `clients` tasks on a paused-clock runtime, each running `client(i)` to the end;
/// returns how many gave up and when the last one finished.
fn race<F, Fut>(clients: usize, client: F) -> (u64, Duration)
where
    F: Fn(usize, Instant) -> Fut,
    Fut: Future<Output = bool> + 'static,
{
    runtime().block_on(async move {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                let start = Instant::now();
                let tasks: Vec<_> = (0..clients)
                    .map(|i| {
                        let run = client(i, start);
                        tokio::task::spawn_local(async move { (run.await, start.elapsed()) })
                    })
                    .collect();
                let (mut gave_up, mut last) = (0, Duration::ZERO);
                for t in tasks {
                    let (ok, at) = t.await.expect("simulated clients do not panic");
                    gave_up += u64::from(!ok);
                    last = last.max(at);
                }
                (gave_up, last)
            })
            .await
    })
}

fn aws_run(strategy: Strategy, clients: usize, seed: u64, run: u32) -> (u64, u64, f64) {
    let policy = aws_policy(strategy);
    let version = Rc::new(Cell::new(0u64));
    let writes = Rc::new(Cell::new(0u64));
    let net = Rc::new(RefCell::new(Rng::with_seed(client_seed(
        seed,
        run,
        usize::MAX,
    ))));
    let (gave_up, last) = race(clients, |i, _start| {
        let retry = Retry::<(), ErrorClass>::new(policy.clone()).seed(client_seed(seed, run, i));
        let (version, writes, net) = (version.clone(), writes.clone(), net.clone());
        async move {
            let delay = || message_time(&mut net.borrow_mut());
            retry
                .run(|_| {
                    let (version, writes) = (version.clone(), writes.clone());
                    let hops = [delay(), delay(), delay(), delay()];
                    async move {
                        tokio::time::sleep(hops[0]).await; // the read reaches the server
                        let read = version.get();
                        tokio::time::sleep(hops[1] + hops[2]).await; // back, and the write out
                        writes.set(writes.get() + 1);
                        let won = version.get() == read;
                        if won {
                            version.set(read + 1);
                        }
                        tokio::time::sleep(hops[3]).await; // the answer comes back
                        if won { Ok(()) } else { Err(conflict()) }
                    }
                })
                .await
                .is_ok()
        }
    });
    (writes.get(), gave_up, last.as_secs_f64())
}

fn slots_run(
    policy: &RetryPolicy,
    strategy: Strategy,
    clients: usize,
    slot: Duration,
    seed: u64,
    run: u32,
) -> (u64, u64, f64) {
    let policy = policy
        .with_overrides(&RetryPolicy::builder().jitter(strategy.jitter()))
        .unwrap_or_else(|_| policy.clone());
    let slot_nanos = slot.as_nanos().max(1);
    let taken: Rc<RefCell<HashSet<u128>>> = Rc::default();
    let calls = Rc::new(Cell::new(0u64));
    let (gave_up, last) = race(clients, |i, start| {
        let retry = Retry::<(), ErrorClass>::new(policy.clone()).seed(client_seed(seed, run, i));
        let (taken, calls) = (taken.clone(), calls.clone());
        async move {
            retry
                .run(|_| {
                    calls.set(calls.get() + 1);
                    let slot = start.elapsed().as_nanos() / slot_nanos;
                    let won = taken.borrow_mut().insert(slot);
                    std::future::ready(if won { Ok(()) } else { Err(conflict()) })
                })
                .await
                .is_ok()
        }
    });
    (calls.get(), gave_up, last.as_secs_f64() * 1000.0)
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
    /// `succeeded / offered`.
    pub goodput: f64,
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
                    goodput: succeeded as f64 / offered.max(1) as f64,
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

    fn slots(strategy: Strategy, clients: usize, seed: u64) -> ContentionRow {
        contention(
            Model::Slots,
            &policy(),
            strategy,
            clients,
            Duration::from_millis(1),
            seed,
            1,
        )
    }

    #[test]
    fn contention_is_deterministic_for_a_seed_and_differs_across_seeds() {
        for model in [Model::Slots, Model::Aws] {
            let run = |seed| {
                contention(
                    model,
                    &policy(),
                    Strategy::Full,
                    30,
                    Duration::from_millis(1),
                    seed,
                    1,
                )
            };
            let (a, b, c) = (run(7), run(7), run(8));
            assert_eq!(a, b);
            assert_ne!((a.calls, a.time), (c.calls, c.time), "{model:?}");
        }
    }

    #[test]
    fn every_client_finishes_and_calls_cover_clients() {
        for model in [Model::Slots, Model::Aws] {
            for &strategy in model.strategies() {
                for n in [1, 10, 40] {
                    let r = contention(
                        model,
                        &policy(),
                        strategy,
                        n,
                        Duration::from_millis(1),
                        1,
                        1,
                    );
                    assert!(r.calls >= n as f64, "{r:?}");
                    assert_eq!(r.gave_up, 0.0, "nobody runs out of attempts: {r:?}");
                }
            }
        }
    }

    #[test]
    fn one_aws_client_writes_once_in_four_message_times() {
        let r = contention(
            Model::Aws,
            &policy(),
            Strategy::Full,
            1,
            Duration::ZERO,
            3,
            20,
        );
        assert_eq!(r.calls, 1.0);
        assert!((30.0..50.0).contains(&r.time), "about 4 × 10 units: {r:?}");
    }

    #[test]
    fn without_jitter_slot_clients_collide_in_lockstep() {
        // All N retry at the same instants, so exactly one commits per round:
        // N + (N-1) + … + 1 calls. This is the library's backoff, not a model of it.
        let r = slots(Strategy::Exponential, 20, 1);
        assert_eq!(r.calls, (20 * 21 / 2) as f64);
        let full = slots(Strategy::Full, 20, 1);
        assert!(full.calls < r.calls, "{full:?} vs {r:?}");
    }

    #[test]
    fn a_policy_that_gives_up_is_reported() {
        let short = RetryPolicy::builder().max_attempts(2).build().unwrap();
        let r = contention(
            Model::Slots,
            &short,
            Strategy::Exponential,
            10,
            Duration::from_millis(1),
            1,
            1,
        );
        assert_eq!((r.gave_up, r.calls), (8.0, 19.0));
    }

    /// The shape AWS published for 100 clients ("Exponential Backoff And Jitter"): full jitter
    /// makes well under half the calls of plain exponential backoff and finishes many times
    /// sooner; equal jitter makes about as many calls as full but takes longer; decorrelated
    /// makes more calls than full but finishes sooner; no backoff finishes first but makes
    /// about three times the calls of full jitter. The ordering, not the numbers.
    #[test]
    fn the_aws_model_reproduces_the_published_ordering_at_100_clients() {
        let at = |s| contention(Model::Aws, &policy(), s, 100, Duration::ZERO, 1, 10);
        let none = at(Strategy::NoBackoff);
        let expo = at(Strategy::Exponential);
        let full = at(Strategy::Full);
        let equal = at(Strategy::Equal);
        let decorr = at(Strategy::Decorrelated);
        let all = format!("{none:?}\n{expo:?}\n{full:?}\n{equal:?}\n{decorr:?}");
        assert!(
            full.calls < 0.6 * expo.calls,
            "full ≪ exponential in calls\n{all}"
        );
        assert!(
            full.time * 4.0 < expo.time,
            "full finishes far sooner\n{all}"
        );
        assert!(
            (equal.calls / full.calls - 1.0).abs() < 0.25,
            "equal ≈ full in calls\n{all}"
        );
        assert!(equal.time > full.time, "equal slower than full\n{all}");
        assert!(decorr.calls > full.calls, "decorrelated: more calls\n{all}");
        assert!(decorr.time < full.time, "decorrelated: sooner done\n{all}");
        assert!(
            none.time < decorr.time && none.time < full.time,
            "no backoff finishes first\n{all}"
        );
        assert!(
            none.calls > 2.0 * full.calls,
            "no backoff: many more calls\n{all}"
        );
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
        assert_eq!((breaker.succeeded, breaker.goodput), (0, 0.0));
        // A healthy dependency is not amplified, and every request succeeds.
        let healthy = overload(&p, 0.0, Guard::Retries);
        assert_eq!((healthy.amplification, healthy.goodput), (1.0, 1.0));
    }

    #[test]
    fn goodput_shows_what_retries_buy_and_a_breaker_costs() {
        let p = params();
        let none = overload(&p, 0.5, Guard::NoRetries);
        let retries = overload(&p, 0.5, Guard::Retries);
        assert_eq!(none.goodput, none.succeeded as f64 / none.offered as f64);
        assert!((0.4..0.6).contains(&none.goodput), "{none:?}");
        // Three independent tries at 50%: about 87.5% get through.
        assert!(retries.goodput > 0.8, "{retries:?}");
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
