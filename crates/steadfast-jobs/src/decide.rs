//! What a failed attempt leads to: the engine's rules, unrolled through the database.
//!
//! `steadfast::retry` sleeps between attempts; a job stores the next run time instead and
//! releases its worker. The rules are the engine's — the same classification predicate, the
//! same pure delay function (`RetryPolicy::retry_delay`), the same time budget — so a live
//! call and a durable job with one policy retry alike.

use std::time::Duration;

use steadfast::{ErrorClass, ErrorKind, GiveUpReason, RetryPolicy, Rng};

use crate::clock::duration_ms;

/// The verdict on one failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Run again at `run_at` (ms), `delay` after now.
    Retry { run_at: i64, delay: Duration },
    /// A dead letter.
    Dead(GiveUpReason),
}

/// What is known about the failed attempt.
pub(crate) struct Failure<'a> {
    pub class: &'a ErrorClass,
    /// 1-based attempt that failed.
    pub attempt: u32,
    /// The handler's `should_retry` veto, already asked.
    pub declined: bool,
    pub first_attempt_at: i64,
    pub previous_delay: Duration,
    /// The dependency's retry budget had no retry to give.
    pub budget_spent: bool,
}

pub(crate) fn decide(policy: &RetryPolicy, f: &Failure<'_>, now: i64, rng: &mut Rng) -> Verdict {
    let retriable = f.class.kind.is_transient()
        || (f.class.kind == ErrorKind::Unknown && policy.retry_unknown());
    if !retriable {
        return Verdict::Dead(GiveUpReason::NonRetriable);
    }
    if f.declined {
        return Verdict::Dead(GiveUpReason::Declined);
    }
    if f.attempt >= policy.max_attempts() {
        return Verdict::Dead(GiveUpReason::Exhausted);
    }
    let mut delay = policy.retry_delay(f.attempt, f.previous_delay, f.class.retry_after, rng);
    if f.budget_spent {
        // The dependency is already taking too many retries: this one waits the longest
        // delay the policy allows rather than adding to the burst.
        delay = delay.max(policy.max_delay());
    }
    let run_at = now.saturating_add(duration_ms(delay));
    if let Some(budget) = policy.max_elapsed() {
        // No delay starts that would end at or past the time budget (as in the engine).
        if run_at.saturating_sub(f.first_attempt_at) >= duration_ms(budget) {
            return Verdict::Dead(GiveUpReason::TimeBudget);
        }
    }
    Verdict::Retry { run_at, delay }
}

#[cfg(test)]
mod tests {
    use super::*;
    use steadfast::Jitter;

    fn policy() -> RetryPolicy {
        RetryPolicy::builder()
            .max_attempts(4)
            .base_delay(Duration::from_secs(1))
            .max_delay(Duration::from_secs(60))
            .jitter(Jitter::None)
            .max_elapsed(Duration::from_secs(30))
            .build()
            .unwrap()
    }

    fn fail(class: &ErrorClass, attempt: u32) -> Failure<'_> {
        Failure {
            class,
            attempt,
            declined: false,
            first_attempt_at: 0,
            previous_delay: Duration::ZERO,
            budget_spent: false,
        }
    }

    #[test]
    fn backoff_retry_after_budget_and_classes() {
        let p = policy();
        let mut rng = Rng::with_seed(1);
        let c503 = ErrorClass::from_status(503);
        // Retry 2 waits base * 2 = 2s: run_at is stored, nobody sleeps.
        assert_eq!(
            decide(&p, &fail(&c503, 2), 5_000, &mut rng),
            Verdict::Retry {
                run_at: 7_000,
                delay: Duration::from_secs(2)
            }
        );
        let c429 = ErrorClass::from_status(429).with_retry_after(Duration::from_secs(10));
        assert_eq!(
            decide(&p, &fail(&c429, 1), 1_000, &mut rng),
            Verdict::Retry {
                run_at: 11_000,
                delay: Duration::from_secs(10)
            }
        );
        // A Retry-After past the 30s budget (counted from the first attempt) gives up at once.
        assert_eq!(
            decide(&p, &fail(&c429, 1), 21_000, &mut rng),
            Verdict::Dead(GiveUpReason::TimeBudget)
        );
        assert_eq!(
            decide(&p, &fail(&ErrorClass::from_status(400), 1), 0, &mut rng),
            Verdict::Dead(GiveUpReason::NonRetriable)
        );
        assert_eq!(
            decide(&p, &fail(&c503, 4), 0, &mut rng),
            Verdict::Dead(GiveUpReason::Exhausted)
        );
        let mut declined = fail(&c503, 1);
        declined.declined = true;
        assert_eq!(
            decide(&p, &declined, 0, &mut rng),
            Verdict::Dead(GiveUpReason::Declined)
        );
        let mut spent = fail(&c503, 1);
        spent.budget_spent = true;
        spent.first_attempt_at = 0;
        let long = RetryPolicy::builder()
            .max_delay(Duration::from_secs(20))
            .build()
            .unwrap();
        assert_eq!(
            decide(&long, &spent, 0, &mut rng),
            Verdict::Retry {
                run_at: 20_000,
                delay: Duration::from_secs(20)
            }
        );
    }
}
