//! Properties that must hold for every policy, not just the ones we thought of.

use std::time::Duration;

use proptest::prelude::*;
use steadfast::{Backoff, ErrorClass, Jitter, Retry, RetryPolicy, Rng};

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        Just(Jitter::Decorrelated)
    ]
}

fn backoff() -> impl Strategy<Value = Backoff> {
    prop_oneof![
        Just(Backoff::Exponential),
        Just(Backoff::Linear),
        Just(Backoff::Constant)
    ]
}

/// A valid policy with millisecond-granular durations.
fn policy() -> impl Strategy<Value = RetryPolicy> {
    (
        1u32..12,
        backoff(),
        1.0f64..4.0,
        1u64..2_000,
        0u64..20_000,
        jitter(),
        1u64..30_000,
    )
        .prop_map(
            |(attempts, backoff, multiplier, base, extra, jitter, budget)| {
                RetryPolicy::builder()
                    .max_attempts(attempts)
                    .backoff(backoff)
                    .multiplier(multiplier)
                    .base_delay(Duration::from_millis(base))
                    .max_delay(Duration::from_millis(base + extra))
                    .jitter(jitter)
                    .max_elapsed(Duration::from_millis(budget))
                    .build()
                    .expect("generated policies are valid")
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every delay is within its documented bounds, and never above `max_delay`.
    #[test]
    fn jittered_delays_within_bounds(p in policy(), seed in any::<u64>(), retries in 1u32..40) {
        let mut rng = Rng::with_seed(seed);
        let mut previous = p.base_delay();
        for k in 1..=retries {
            let capped = p.backoff().raw_delay(k, p.base_delay(), p.multiplier()).min(p.max_delay());
            let d = p.backoff_delay(k, previous, &mut rng);
            prop_assert!(d <= p.max_delay(), "{d:?} > cap {:?}", p.max_delay());
            match p.jitter() {
                Jitter::None => prop_assert_eq!(d, capped),
                Jitter::Full => prop_assert!(d <= capped),
                Jitter::Equal => prop_assert!(d >= capped / 2 && d <= capped),
                Jitter::Decorrelated => {
                    let high = (previous * 3).min(p.max_delay());
                    prop_assert!(d >= p.base_delay() && d <= high, "{d:?} not in [{:?}, {high:?}]", p.base_delay());
                }
            }
            previous = d;
        }
    }

    /// The iterator yields exactly one delay per allowed retry, the same ones as the function.
    #[test]
    fn delays_iterator_matches_the_function(p in policy(), seed in any::<u64>()) {
        let from_iter: Vec<_> = p.delays(Rng::with_seed(seed)).collect();
        prop_assert_eq!(from_iter.len() as u32, p.max_attempts() - 1);
        let mut rng = Rng::with_seed(seed);
        let mut previous = p.base_delay();
        for (k, d) in from_iter.iter().enumerate() {
            let expected = p.backoff_delay(k as u32 + 1, previous, &mut rng);
            prop_assert_eq!(*d, expected);
            previous = expected;
        }
    }

    /// Whatever the attempts do (fail fast, fail slow, hang, ask for a long Retry-After), no call
    /// runs past `max_elapsed`. Virtual time: tokio's paused clock.
    #[test]
    fn no_call_outlasts_its_budget(
        p in policy(),
        seed in any::<u64>(),
        work in prop::collection::vec((0u64..5_000, prop::option::of(0u64..60), any::<bool>()), 1..12),
    ) {
        let budget = p.max_elapsed().expect("generated with a budget");
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        let elapsed = rt.block_on(async {
            let start = tokio::time::Instant::now();
            let retry = Retry::new(p.clone()).seed(seed);
            let _ = retry
                .run(async |n| {
                    let (ms, retry_after, hang) = work[(n as usize - 1) % work.len()];
                    if hang {
                        std::future::pending::<()>().await;
                    }
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    let mut class = ErrorClass::from_status(503);
                    if let Some(s) = retry_after {
                        class = class.with_retry_after(Duration::from_secs(s));
                    }
                    Err::<(), _>(class)
                })
                .await;
            start.elapsed()
        });
        prop_assert!(elapsed <= budget, "ran {elapsed:?} with a budget of {budget:?}");
    }
}
