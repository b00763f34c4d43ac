//! Events the engine reports to the caller's hooks.
//!
//! Hooks are for the caller's own code (metrics, logs, tests); the engine itself reports through
//! `tracing`. Every delay a hook sees is the delay the engine actually sleeps, `Retry-After`
//! included.

use std::time::Duration;

use crate::{ErrorClass, GiveUpReason, Rejected};

/// What an attempt that failed produced.
///
/// ```
/// use steadfast::Failed;
/// let f: Failed<'_, std::io::Error> = Failed::Value;
/// assert!(f.error().is_none());
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Failed<'a, E> {
    /// The operation returned this error.
    Error(&'a E),
    /// The attempt was cut short after this long.
    Timeout(Duration),
    /// The operation returned a value that the result check rejected (e.g. an MCP result with
    /// `isError: true`).
    Value,
    /// Nothing: the call was cancelled before any attempt completed.
    Cancelled,
    /// Nothing: a circuit breaker refused the call.
    Rejected(&'a Rejected),
}

impl<'a, E> Failed<'a, E> {
    /// The operation's error, if it returned one.
    ///
    /// ```
    /// let e = std::io::Error::other("x");
    /// assert!(steadfast::Failed::Error(&e).error().is_some());
    /// ```
    pub fn error(&self) -> Option<&'a E> {
        match self {
            Self::Error(e) => Some(e),
            _ => None,
        }
    }
}

// Manual impls: deriving would demand `E: Clone`, but only a reference is held.
impl<E> Clone for Failed<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for Failed<'_, E> {}

/// Reported before each retry's delay.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use steadfast::{ErrorClass, Jitter, Retry, RetryPolicy};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let policy = RetryPolicy::builder().jitter(Jitter::None).build().unwrap();
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let retry = Retry::new(policy).on_retry(move |ev| log.lock().unwrap().push((ev.attempt, ev.delay)));
/// let _ = retry.run(async |_| Err::<(), _>(ErrorClass::from_status(503))).await;
/// assert_eq!(*seen.lock().unwrap(), [(1, Duration::from_millis(100)), (2, Duration::from_millis(200))]);
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct RetryEvent<'a, E> {
    /// The attempt that failed (1-based); the next one is `attempt + 1`.
    pub attempt: u32,
    /// The delay about to be slept: backoff and jitter, raised to `Retry-After` if longer.
    pub delay: Duration,
    /// How the failure was classified.
    pub class: &'a ErrorClass,
    /// What the attempt produced.
    pub failed: Failed<'a, E>,
    /// Time since the call started.
    pub elapsed: Duration,
}

/// Reported when a call succeeds.
///
/// ```
/// let ev = steadfast::SuccessEvent { attempts: 2, elapsed: std::time::Duration::from_millis(120) };
/// assert_eq!(ev.attempts, 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuccessEvent {
    /// Attempts made, including the successful one.
    pub attempts: u32,
    /// Time since the call started.
    pub elapsed: Duration,
}

/// Reported once when a call gives up.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use steadfast::{ErrorClass, GiveUpReason, Retry, RetryPolicy};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let seen = Arc::new(Mutex::new(None));
/// let log = seen.clone();
/// let retry = Retry::new(RetryPolicy::default())
///     .on_give_up(move |ev| *log.lock().unwrap() = Some((ev.attempts, ev.reason)));
/// let _ = retry.run(async |_| Err::<(), _>(ErrorClass::from_status(400))).await;
/// assert_eq!(*seen.lock().unwrap(), Some((1, GiveUpReason::NonRetriable)));
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct GiveUpEvent<'a, E> {
    /// Attempts started.
    pub attempts: u32,
    /// Time since the call started.
    pub elapsed: Duration,
    /// Why the engine stopped.
    pub reason: GiveUpReason,
    /// How the last failure was classified.
    pub class: &'a ErrorClass,
    /// What the last attempt produced.
    pub failed: Failed<'a, E>,
}
