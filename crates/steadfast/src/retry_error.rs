//! What a call that gave up returns.
//!
//! The caller of a failed call needs three things: the original error (to handle it as before),
//! why the engine stopped (a 404 and an exhausted budget call for different reactions), and the
//! numbers (attempts, elapsed, `Retry-After`) that the model or the logs should see.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use crate::{Classify, ErrorClass, Rejected};

/// Why the engine stopped retrying.
///
/// ```
/// assert_eq!(steadfast::GiveUpReason::TimeBudget.as_str(), "time_budget");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GiveUpReason {
    /// Every attempt the policy allows was made.
    Exhausted,
    /// The failure was classified as not worth retrying.
    NonRetriable,
    /// The caller's `should_retry` predicate declined another attempt.
    Declined,
    /// The policy's `max_elapsed` budget ran out, or the next delay (or the server's
    /// `Retry-After`) would have overrun it.
    TimeBudget,
    /// The caller cancelled the call.
    Cancelled,
    /// The circuit breaker was open: either no attempt was made, or it opened while this call
    /// was retrying.
    CircuitOpen,
    /// The dependency's retry budget was spent.
    BudgetExhausted,
    /// Every retry slot of the dependency's concurrency limit was taken.
    ConcurrencyLimit,
}

impl GiveUpReason {
    /// A stable snake_case name (`"non_retriable"`).
    ///
    /// ```
    /// assert_eq!(steadfast::GiveUpReason::Exhausted.as_str(), "exhausted");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exhausted => "exhausted",
            Self::NonRetriable => "non_retriable",
            Self::Declined => "declined",
            Self::TimeBudget => "time_budget",
            Self::Cancelled => "cancelled",
            Self::CircuitOpen => "circuit_open",
            Self::BudgetExhausted => "budget_exhausted",
            Self::ConcurrencyLimit => "concurrency_limit",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Exhausted => "attempts exhausted",
            Self::NonRetriable => "not retriable",
            Self::Declined => "retry declined by should_retry",
            Self::TimeBudget => "time budget exhausted",
            Self::Cancelled => "cancelled",
            Self::CircuitOpen => "circuit open",
            Self::BudgetExhausted => "retry budget exhausted",
            Self::ConcurrencyLimit => "too many calls retrying",
        }
    }
}

impl fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The last failure of a call that gave up.
///
/// ```
/// let f: steadfast::Failure<std::io::Error> = steadfast::Failure::Cancelled;
/// assert!(f.error().is_none());
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Failure<E> {
    /// The operation returned this error.
    Error(E),
    /// The attempt was cut short after this long (the per-attempt timeout or the end of the
    /// time budget).
    Timeout {
        /// How long the attempt ran.
        after: Duration,
    },
    /// The call was cancelled before any attempt produced an outcome.
    Cancelled,
    /// A circuit breaker refused the call before any attempt was made.
    Rejected(Box<Rejected>),
}

impl<E> Failure<E> {
    /// The operation's error, if the last failure was one.
    ///
    /// ```
    /// let f = steadfast::Failure::Error("boom");
    /// assert_eq!(f.error(), Some(&"boom"));
    /// ```
    pub fn error(&self) -> Option<&E> {
        match self {
            Self::Error(e) => Some(e),
            _ => None,
        }
    }

    /// The operation's error, by value.
    ///
    /// ```
    /// let f = steadfast::Failure::<&str>::Timeout { after: std::time::Duration::from_secs(1) };
    /// assert_eq!(f.into_error(), None);
    /// ```
    pub fn into_error(self) -> Option<E> {
        match self {
            Self::Error(e) => Some(e),
            _ => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Error(e) => e.fmt(f),
            Self::Timeout { after } => {
                write!(
                    f,
                    "attempt timed out after {}",
                    humantime::format_duration(*after)
                )
            }
            Self::Cancelled => f.write_str("cancelled before any attempt completed"),
            Self::Rejected(r) => r.fmt(f),
        }
    }
}

/// A call that gave up: the last failure, how it was classified, and why the engine stopped.
///
/// ```
/// use steadfast::{retry, ErrorClass, GiveUpReason, RetryPolicy};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let policy = RetryPolicy::default();
/// let err = retry(&policy, async |_| Err::<(), _>(ErrorClass::from_status(404))).await.unwrap_err();
/// assert_eq!(err.reason(), GiveUpReason::NonRetriable);
/// assert_eq!(err.attempts(), 1);
/// assert_eq!(err.class().status, Some(404));
/// # }
/// ```
#[derive(Debug)]
pub struct RetryError<E> {
    failure: Failure<E>,
    // Boxed so that `Result<T, RetryError<E>>` stays small on the success path (and under
    // clippy's `result_large_err`); it is allocated only when a call gives up.
    meta: Box<Meta>,
}

#[derive(Debug)]
struct Meta {
    reason: GiveUpReason,
    class: ErrorClass,
    attempts: u32,
    elapsed: Duration,
}

impl<E> RetryError<E> {
    pub(crate) fn new(
        reason: GiveUpReason,
        failure: Failure<E>,
        class: ErrorClass,
        attempts: u32,
        elapsed: Duration,
    ) -> Self {
        Self {
            failure,
            meta: Box::new(Meta {
                reason,
                class,
                attempts,
                elapsed,
            }),
        }
    }

    /// Why the engine stopped.
    ///
    /// See the type-level example.
    pub fn reason(&self) -> GiveUpReason {
        self.meta.reason
    }

    /// How the last failure was classified (`CANCELLED` if the call was cancelled before any
    /// attempt completed).
    ///
    /// See the type-level example.
    pub fn class(&self) -> &ErrorClass {
        &self.meta.class
    }

    /// Attempts started, including one cut short by cancellation.
    ///
    /// See the type-level example.
    pub fn attempts(&self) -> u32 {
        self.meta.attempts
    }

    /// How long the call took until it gave up — measured from the call's start when something
    /// needed the clock then, and otherwise from the end of the first attempt.
    ///
    /// Reading the clock costs more than everything else a successful call does (20–30 ns on
    /// a typical VM), so the engine reads it at the start only for a time budget
    /// (`max_elapsed`), a hook (`on_retry`, `on_success`, `on_give_up`), a retry budget or a
    /// breaker's slow-call detection. Without any of those, the first read happens when the
    /// first attempt fails, and `elapsed` is the time spent retrying: the delays and the later
    /// attempts, not the first attempt (a call that fails once, for good, reports zero). Set a
    /// time budget or a hook when the whole duration matters.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{ErrorClass, Retry, RetryPolicy};
    /// async fn slow_404(_attempt: u32) -> Result<(), ErrorClass> {
    ///     tokio::time::sleep(Duration::from_secs(2)).await;
    ///     Err(ErrorClass::from_status(404))
    /// }
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let plain = Retry::new(RetryPolicy::default());
    /// assert_eq!(plain.run(slow_404).await.unwrap_err().elapsed(), Duration::ZERO);
    /// let timed = Retry::new(RetryPolicy::builder().max_elapsed(Duration::from_secs(10)).build().unwrap());
    /// assert_eq!(timed.run(slow_404).await.unwrap_err().elapsed(), Duration::from_secs(2));
    /// # }
    /// ```
    pub fn elapsed(&self) -> Duration {
        self.meta.elapsed
    }

    /// The dependency's `Retry-After`, if the last failure carried one: tells a model when it may
    /// come back, notably when the wait would have overrun the time budget.
    ///
    /// See the type-level example.
    pub fn retry_after(&self) -> Option<Duration> {
        self.meta.class.retry_after
    }

    /// The last failure.
    ///
    /// See the type-level example.
    pub fn failure(&self) -> &Failure<E> {
        &self.failure
    }

    /// The last failure, by value.
    ///
    /// See the type-level example.
    pub fn into_failure(self) -> Failure<E> {
        self.failure
    }

    /// The operation's own error, if the last failure was one.
    ///
    /// See the type-level example.
    pub fn error(&self) -> Option<&E> {
        self.failure.error()
    }

    /// The operation's own error, by value.
    ///
    /// See the type-level example.
    pub fn into_error(self) -> Option<E> {
        self.failure.into_error()
    }
}

impl<E: fmt::Display> fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gave up after {} attempt{} in {} ({}): {}",
            self.meta.attempts,
            if self.meta.attempts == 1 { "" } else { "s" },
            humantime::format_duration(round_ms(self.meta.elapsed)),
            self.meta.reason,
            self.failure
        )
    }
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Any `RetryError` of a classifiable error is an error, so `?` converts it into
/// `Box<dyn Error>` or — with the `anyhow` feature — `anyhow::Error`. Its source is the
/// operation's error, as [`Classify::as_error`] gives it (every built-in error type does; a
/// breaker's rejection is its own source).
impl<E: Classify + fmt::Debug + fmt::Display> StdError for RetryError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.failure {
            Failure::Error(e) => e.as_error(),
            Failure::Rejected(r) => Some(r.as_ref()),
            _ => None,
        }
    }
}

impl<E> Classify for RetryError<E> {
    fn classify(&self) -> ErrorClass {
        self.meta.class.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(failure: Failure<&'static str>, attempts: u32) -> RetryError<&'static str> {
        RetryError::new(
            GiveUpReason::Exhausted,
            failure,
            ErrorClass::unknown(),
            attempts,
            Duration::from_micros(1_500_400),
        )
    }

    #[test]
    fn display_reads_as_a_sentence() {
        assert_eq!(
            err(Failure::Error("boom"), 3).to_string(),
            "gave up after 3 attempts in 1s 500ms (attempts exhausted): boom"
        );
        assert_eq!(
            err(
                Failure::Timeout {
                    after: Duration::from_secs(2)
                },
                1
            )
            .to_string(),
            "gave up after 1 attempt in 1s 500ms (attempts exhausted): attempt timed out after 2s"
        );
    }

    #[test]
    fn results_stay_small() {
        // A `Result<(), RetryError<io::Error>>` is two words, not a 140-byte struct.
        assert!(
            std::mem::size_of::<RetryError<std::io::Error>>() <= 3 * std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn source_is_the_original_error() {
        let io = std::io::Error::other("disk on fire");
        let e = RetryError::new(
            GiveUpReason::NonRetriable,
            Failure::Error(io),
            ErrorClass::unknown(),
            1,
            Duration::ZERO,
        );
        assert_eq!(e.source().unwrap().to_string(), "disk on fire");
        assert_eq!(e.into_error().unwrap().to_string(), "disk on fire");
    }
}
