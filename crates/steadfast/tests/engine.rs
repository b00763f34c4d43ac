//! Behaviour of the retry engine, on tokio's paused clock: every delay here is virtual time, so
//! the tests are exact and take no real time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use steadfast::{
    Backoff, CancellationToken, ErrorClass, ErrorCode, ErrorKind, Failed, Failure, GiveUpReason,
    Jitter, Retry, RetryError, RetryPolicy, RetryPolicyBuilder, retry,
};
use tokio::time::Instant;

const MS: fn(u64) -> Duration = Duration::from_millis;
const S: fn(u64) -> Duration = Duration::from_secs;

fn policy(b: RetryPolicyBuilder) -> RetryPolicy {
    b.build().expect("valid policy")
}

/// What one run looked like: when each attempt started (relative to the call's start), the delays
/// the hooks were told about, and the result.
struct Trace<T, E> {
    starts: Vec<Duration>,
    reported: Vec<Duration>,
    result: Result<T, RetryError<E>>,
}

impl<T, E> Trace<T, E> {
    fn gaps(&self) -> Vec<Duration> {
        self.starts.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

/// Runs `retry` with an operation whose outcome for attempt `n` is `outcome(n)`.
async fn trace<T, E: steadfast::Classify + Send + 'static>(
    retry: Retry<T, E>,
    mut outcome: impl FnMut(u32) -> Result<T, E>,
) -> Trace<T, E> {
    let reported = Arc::new(Mutex::new(Vec::new()));
    let sink = reported.clone();
    let retry = retry.on_retry(move |ev| sink.lock().unwrap().push(ev.delay));
    let t0 = Instant::now();
    let mut starts = Vec::new();
    let result = retry
        .run_mut(async |n| {
            starts.push(t0.elapsed());
            outcome(n)
        })
        .await;
    let reported = reported.lock().unwrap().clone();
    Trace {
        starts,
        reported,
        result,
    }
}

fn always(class: ErrorClass) -> impl FnMut(u32) -> Result<(), ErrorClass> {
    move |_| Err(class.clone())
}

#[tokio::test(start_paused = true)]
async fn exponential_delays_double() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(4)
            .base_delay(S(1))
            .max_delay(S(60))
            .jitter(Jitter::None),
    );
    let t = trace(Retry::new(p), always(ErrorClass::from_status(503))).await;
    assert_eq!(t.gaps(), [MS(1000), MS(2000), MS(4000)]);
    assert_eq!(t.reported, t.gaps());
    let err = t.result.unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (GiveUpReason::Exhausted, 4));
    assert_eq!(err.elapsed(), MS(7000));
}

#[tokio::test(start_paused = true)]
async fn linear_constant_and_none() {
    let base = || {
        RetryPolicy::builder()
            .max_attempts(4)
            .base_delay(S(1))
            .max_delay(S(60))
            .jitter(Jitter::None)
    };
    let fail = || always(ErrorClass::from_status(500));
    let t = trace(Retry::new(policy(base().backoff(Backoff::Linear))), fail()).await;
    assert_eq!(t.gaps(), [MS(1000), MS(2000), MS(3000)]);
    let t = trace(
        Retry::new(policy(base().backoff(Backoff::Constant))),
        fail(),
    )
    .await;
    assert_eq!(t.gaps(), [MS(1000), MS(1000), MS(1000)]);
    let t = trace(Retry::new(policy(base().backoff(Backoff::None))), fail()).await;
    assert_eq!(t.gaps(), [Duration::ZERO; 3]);
    let custom = base().custom_backoff(|k| MS(10 * u64::from(k).pow(2)));
    let t = trace(Retry::new(policy(custom)), fail()).await;
    assert_eq!(t.gaps(), [MS(10), MS(40), MS(90)]);
}

#[tokio::test(start_paused = true)]
async fn cap_applies_to_exponential_growth() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(6)
            .base_delay(MS(500))
            .max_delay(S(3))
            .jitter(Jitter::None),
    );
    let t = trace(Retry::new(p), always(ErrorClass::from_status(502))).await;
    assert_eq!(t.gaps(), [MS(500), MS(1000), MS(2000), MS(3000), MS(3000)]);
}

#[tokio::test(start_paused = true)]
async fn cloudflare_table_is_a_doubled_base() {
    // Cloudflare Agents, maxAttempts 5, baseDelayMs 500, maxDelayMs 3000: ceilings
    // min(2^attempt × 500, 3000) = 1000, 2000, 3000, 3000 ms. Steadfast's retry k waits
    // base·2^(k−1), so the same table is base 1s.
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(5)
            .base_delay(S(1))
            .max_delay(S(3))
            .jitter(Jitter::None),
    );
    let t = trace(Retry::new(p), always(ErrorClass::from_status(503))).await;
    assert_eq!(t.gaps(), [MS(1000), MS(2000), MS(3000), MS(3000)]);
}

#[tokio::test(start_paused = true)]
async fn full_jitter_stays_within_base_times_two_to_the_k_minus_one() {
    // Base 500ms, cap 3s: retry k draws random(0, min(cap, base·2^(k−1))). (Not Cloudflare's
    // table, whose ceilings are base·2^k: see `cloudflare_table_is_a_doubled_base`.)
    let bounds = [MS(500), MS(1000), MS(2000), MS(3000), MS(3000)];
    let mut all = Vec::new();
    for seed in 0..50 {
        let p = policy(
            RetryPolicy::builder()
                .max_attempts(6)
                .base_delay(MS(500))
                .max_delay(S(3))
                .jitter(Jitter::Full),
        );
        let t = trace(
            Retry::new(p).seed(seed),
            always(ErrorClass::from_status(503)),
        )
        .await;
        assert_eq!(t.reported.len(), 5);
        for (d, bound) in t.reported.iter().zip(bounds) {
            assert!(*d <= bound, "seed {seed}: {d:?} > {bound:?}");
        }
        // What was reported is what was slept (to tokio's millisecond timer resolution).
        for (slept, told) in t.gaps().iter().zip(&t.reported) {
            assert!(
                *slept >= *told && *slept - *told < MS(1),
                "{slept:?} vs {told:?}"
            );
        }
        all.extend(t.reported);
    }
    // Jitter actually spreads: not all draws sit at the bound.
    assert!(all.iter().filter(|d| d.as_millis() < 250).count() > 10);
}

#[tokio::test(start_paused = true)]
async fn seeded_runs_are_reproducible() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(5)
            .jitter(Jitter::Decorrelated),
    );
    let run = |seed| {
        trace(
            Retry::new(p.clone()).seed(seed),
            always(ErrorClass::from_status(503)),
        )
    };
    let (a, b, c) = (run(7).await, run(7).await, run(8).await);
    assert_eq!(a.reported, b.reported);
    assert_ne!(a.reported, c.reported);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_a_floor_and_is_what_hooks_see() {
    let p = policy(RetryPolicy::builder().max_attempts(3).jitter(Jitter::None));
    let limited = ErrorClass::from_status(429).with_retry_after(S(5));
    let t = trace(Retry::new(p.clone()), always(limited)).await;
    assert_eq!(t.gaps(), [S(5), S(5)]);
    assert_eq!(t.reported, [S(5), S(5)]);
    let err = t.result.unwrap_err();
    assert_eq!(err.retry_after(), Some(S(5)));
    assert_eq!(err.class().kind, ErrorKind::RateLimited);

    // A Retry-After shorter than the backoff does not shorten it.
    let short = ErrorClass::from_status(503).with_retry_after(MS(1));
    let t = trace(Retry::new(p), always(short)).await;
    assert_eq!(t.gaps(), [MS(100), MS(200)]);
}

#[tokio::test(start_paused = true)]
async fn hostile_retry_after_is_clamped() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(2)
            .jitter(Jitter::None)
            .max_retry_after(S(30)),
    );
    let t = trace(
        Retry::new(p),
        always(ErrorClass::from_response(429, Some("86400"))),
    )
    .await;
    assert_eq!(t.gaps(), [S(30)]);
}

#[tokio::test(start_paused = true)]
async fn retry_after_past_the_budget_gives_up_at_once() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(5)
            .max_elapsed(S(10))
            .jitter(Jitter::None),
    );
    let t = trace(
        Retry::new(p),
        always(ErrorClass::from_status(429).with_retry_after(S(20))),
    )
    .await;
    assert_eq!(t.starts, [Duration::ZERO], "no second attempt");
    let err = t.result.unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::TimeBudget);
    assert_eq!(
        err.retry_after(),
        Some(S(20)),
        "the model learns when to come back"
    );
    assert_eq!(err.elapsed(), Duration::ZERO, "no time was spent sleeping");
}

#[tokio::test(start_paused = true)]
async fn budget_stops_before_a_delay_that_would_overrun_it() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(10)
            .base_delay(S(1))
            .max_delay(S(60))
            .jitter(Jitter::None)
            .max_elapsed(S(5)),
    );
    // 0 → 1s → 3s; the next delay (4s) would end at 7s > 5s.
    let t = trace(Retry::new(p), always(ErrorClass::from_status(503))).await;
    assert_eq!(t.starts, [S(0), S(1), S(3)]);
    let err = t.result.unwrap_err();
    assert_eq!(
        (err.reason(), err.attempts(), err.elapsed()),
        (GiveUpReason::TimeBudget, 3, S(3))
    );
}

#[tokio::test(start_paused = true)]
async fn budget_cuts_a_slow_attempt_short() {
    let p = policy(RetryPolicy::builder().max_attempts(3).max_elapsed(S(2)));
    let err = retry(&p, async |_| {
        tokio::time::sleep(S(60)).await;
        Ok::<_, ErrorClass>(())
    })
    .await
    .unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::TimeBudget);
    assert_eq!(err.elapsed(), S(2));
    assert!(matches!(err.failure(), Failure::Timeout { after } if *after == S(2)));
}

#[tokio::test(start_paused = true)]
async fn attempt_timeout_is_a_retriable_timeout() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(3)
            .attempt_timeout(S(1))
            .jitter(Jitter::None),
    );
    let classes = Arc::new(Mutex::new(Vec::new()));
    let seen = classes.clone();
    let r = Retry::new(p).on_retry(move |ev| {
        assert!(matches!(ev.failed, Failed::Timeout(d) if d == S(1)));
        seen.lock().unwrap().push(ev.class.code.clone());
    });
    let t0 = Instant::now();
    let v = r
        .run(async |n| {
            if n < 3 {
                std::future::pending::<()>().await;
            }
            Ok::<_, ErrorClass>(n)
        })
        .await
        .unwrap();
    assert_eq!(v, 3);
    // 1s timeout, 100ms, 1s timeout, 200ms.
    assert_eq!(t0.elapsed(), MS(2300));
    assert_eq!(
        *classes.lock().unwrap(),
        [ErrorCode::TIMEOUT, ErrorCode::TIMEOUT]
    );
}

#[tokio::test(start_paused = true)]
async fn attempt_timeout_exhausted_reports_timeout() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(2)
            .attempt_timeout(MS(300)),
    );
    let err = retry(&p, async |_| {
        std::future::pending::<Result<(), ErrorClass>>().await
    })
    .await
    .unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::Exhausted);
    assert_eq!(err.class().kind, ErrorKind::Timeout);
    assert_eq!(
        err.to_string().split(": ").last(),
        Some("attempt timed out after 300ms")
    );
}

#[tokio::test(start_paused = true)]
async fn non_retriable_errors_stop_at_once() {
    for status in [400, 401, 403, 404, 405, 409, 422] {
        let t = trace(
            Retry::new(RetryPolicy::default()),
            always(ErrorClass::from_status(status)),
        )
        .await;
        let err = t.result.unwrap_err();
        assert_eq!(
            (err.reason(), err.attempts()),
            (GiveUpReason::NonRetriable, 1),
            "{status}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn unknown_errors_follow_retry_unknown() {
    let t = trace(Retry::new(RetryPolicy::default()), |_| {
        Err::<(), _>("mystery")
    })
    .await;
    assert_eq!(t.result.unwrap_err().attempts(), 3);
    let strict = policy(RetryPolicy::builder().retry_unknown(false));
    let t = trace(Retry::new(strict), |_| Err::<(), _>("mystery")).await;
    let err = t.result.unwrap_err();
    assert_eq!(
        (err.attempts(), err.reason()),
        (1, GiveUpReason::NonRetriable)
    );
    assert_eq!(err.error(), Some(&"mystery"));
}

#[tokio::test(start_paused = true)]
async fn io_errors_classify_in_the_loop() {
    use std::io::{Error, ErrorKind as K};
    let p = RetryPolicy::default();
    let err = retry(&p, async |_| Err::<(), _>(Error::from(K::ConnectionReset)))
        .await
        .unwrap_err();
    assert_eq!(
        (err.attempts(), err.class().code.clone()),
        (3, ErrorCode::NETWORK_ERROR)
    );
    let err = retry(&p, async |_| Err::<(), _>(Error::from(K::PermissionDenied)))
        .await
        .unwrap_err();
    assert_eq!(err.attempts(), 1);
    // A boxed error wrapping an io error is classified as the io error.
    let err = retry(&p, async |_| {
        let e: Box<dyn std::error::Error + Send + Sync> = Box::new(Error::from(K::NotFound));
        Err::<(), _>(e)
    })
    .await
    .unwrap_err();
    assert_eq!(
        (err.attempts(), err.reason()),
        (1, GiveUpReason::NonRetriable)
    );
}

#[tokio::test(start_paused = true)]
async fn custom_classifier_first_then_builtin() {
    let r = Retry::new(RetryPolicy::default()).classify(|e: &ErrorClass| {
        (e.status == Some(404))
            .then(|| ErrorClass::retriable(ErrorCode::new("EVENTUALLY_CONSISTENT")))
    });
    let t = trace(r.clone(), always(ErrorClass::from_status(404))).await;
    let err = t.result.unwrap_err();
    assert_eq!(
        (err.attempts(), err.class().code.as_str()),
        (3, "EVENTUALLY_CONSISTENT")
    );
    // No opinion: falls through to the error's own classification.
    let t = trace(r, always(ErrorClass::from_status(400))).await;
    assert_eq!(t.result.unwrap_err().attempts(), 1);
}

#[tokio::test(start_paused = true)]
async fn should_retry_sees_the_next_attempt_and_can_stop() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let r = Retry::new(policy(RetryPolicy::builder().max_attempts(5))).should_retry(
        move |_: &ErrorClass, next| {
            log.lock().unwrap().push(next);
            next < 4
        },
    );
    let t = trace(r, always(ErrorClass::from_status(503))).await;
    let err = t.result.unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (GiveUpReason::Declined, 3));
    assert_eq!(*seen.lock().unwrap(), [2, 3, 4]);
}

#[tokio::test(start_paused = true)]
async fn should_retry_cannot_force_a_non_retriable_retry() {
    let r = Retry::new(RetryPolicy::default()).should_retry(|_: &ErrorClass, _| true);
    let t = trace(r, always(ErrorClass::from_status(400))).await;
    assert_eq!(t.result.unwrap_err().attempts(), 1);
}

#[derive(Debug, Clone, PartialEq)]
struct ToolResult {
    is_error: bool,
    text: &'static str,
}

fn mcp_check(r: &ToolResult) -> Option<ErrorClass> {
    r.is_error
        .then(|| steadfast::classify_message(r.text).unwrap_or_else(ErrorClass::unknown))
}

#[tokio::test(start_paused = true)]
async fn ok_values_can_be_failures() {
    let r = Retry::new(RetryPolicy::default()).check(mcp_check);
    let texts = ["HTTP 503", "connection reset", "42 results"];
    let t = trace(r.clone(), |n| {
        let i = n as usize - 1;
        Ok::<_, ErrorClass>(ToolResult {
            is_error: i < 2,
            text: texts[i],
        })
    })
    .await;
    assert_eq!(t.result.unwrap().text, "42 results");
    assert_eq!(t.starts.len(), 3);

    // A business failure classified non-retriable is handed back at once, as the value it is.
    let t = trace(r, |_| {
        Ok::<_, ErrorClass>(ToolResult {
            is_error: true,
            text: "HTTP 404: no such file",
        })
    })
    .await;
    assert_eq!(t.starts.len(), 1);
    assert_eq!(t.result.unwrap().text, "HTTP 404: no such file");
}

#[tokio::test(start_paused = true)]
async fn exhausted_ok_failures_return_the_last_value_and_report_give_up() {
    let gave_up = Arc::new(Mutex::new(None));
    let log = gave_up.clone();
    let r = Retry::new(RetryPolicy::default())
        .check(mcp_check)
        .on_give_up(move |ev| {
            assert!(matches!(ev.failed, Failed::Value));
            *log.lock().unwrap() = Some((ev.attempts, ev.reason, ev.class.code.clone()));
        });
    let v = r
        .run(async |_| {
            Ok::<_, ErrorClass>(ToolResult {
                is_error: true,
                text: "Service Unavailable",
            })
        })
        .await
        .unwrap();
    assert!(v.is_error);
    assert_eq!(
        *gave_up.lock().unwrap(),
        Some((3, GiveUpReason::Exhausted, ErrorCode::SERVER_ERROR))
    );
}

#[tokio::test(start_paused = true)]
async fn hooks_fire_with_the_right_numbers() {
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let (a, b, c) = (log.clone(), log.clone(), log.clone());
    let p = policy(RetryPolicy::builder().max_attempts(3).jitter(Jitter::None));
    let r = Retry::new(p)
        .on_retry(move |ev| {
            a.lock().unwrap().push(format!(
                "retry {} {:?} {} {:?}",
                ev.attempt, ev.delay, ev.class.code, ev.elapsed
            ))
        })
        .on_success(move |ev| {
            b.lock()
                .unwrap()
                .push(format!("ok {} {:?}", ev.attempts, ev.elapsed))
        })
        .on_give_up(move |ev| c.lock().unwrap().push(format!("give up {}", ev.attempts)));
    let v = r
        .run(async |n| {
            if n < 3 {
                Err(ErrorClass::from_status(502))
            } else {
                Ok(n)
            }
        })
        .await
        .unwrap();
    assert_eq!(v, 3);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "retry 1 100ms SERVER_ERROR 0ns",
            "retry 2 200ms SERVER_ERROR 100ms",
            "ok 3 300ms",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn cancellation_during_a_delay_returns_at_once_with_the_last_error() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(5)
            .base_delay(S(10))
            .max_delay(S(60))
            .jitter(Jitter::None),
    );
    let cancel = CancellationToken::new();
    let task = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            Retry::new(p)
                .cancel_on(&cancel)
                .run_mut(async |_| Err::<(), _>(ErrorClass::from_status(503)))
                .await
        })
    };
    let t0 = Instant::now();
    tokio::time::sleep(S(3)).await; // inside the first 10s delay
    cancel.cancel();
    let err = task.await.unwrap().unwrap_err();
    assert_eq!(
        t0.elapsed(),
        S(3),
        "returned as soon as cancelled, not after the delay"
    );
    assert_eq!((err.reason(), err.attempts()), (GiveUpReason::Cancelled, 1));
    assert_eq!(
        err.error().map(|e| e.status),
        Some(Some(503)),
        "the last outcome is kept"
    );
    assert_eq!(err.elapsed(), S(3));
}

#[tokio::test(start_paused = true)]
async fn cancellation_before_the_first_attempt() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let mut calls = 0;
    let err = Retry::new(RetryPolicy::default())
        .cancel_on(&cancel)
        .run_mut(async |_| {
            calls += 1;
            Ok::<_, ErrorClass>(())
        })
        .await
        .unwrap_err();
    assert_eq!(calls, 0);
    assert_eq!((err.reason(), err.attempts()), (GiveUpReason::Cancelled, 0));
    assert_eq!(err.class().code, ErrorCode::CANCELLED);
    assert!(matches!(err.failure(), Failure::Cancelled));
}

#[tokio::test(start_paused = true)]
async fn cancellation_during_an_attempt_drops_it() {
    struct Flag(Arc<Mutex<bool>>);
    impl Drop for Flag {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = true;
        }
    }
    let dropped = Arc::new(Mutex::new(false));
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(S(2)).await;
        canceller.cancel();
    });
    let d = dropped.clone();
    let t0 = Instant::now();
    let err = Retry::new(RetryPolicy::default())
        .cancel_on(&cancel)
        .run_mut(async |_| {
            let _guard = Flag(d.clone());
            tokio::time::sleep(S(100)).await;
            Ok::<_, ErrorClass>(())
        })
        .await
        .unwrap_err();
    assert_eq!(t0.elapsed(), S(2));
    assert_eq!((err.reason(), err.attempts()), (GiveUpReason::Cancelled, 1));
    assert!(
        *dropped.lock().unwrap(),
        "the in-flight attempt was dropped"
    );
}

/// A client whose method takes `&mut self`: the retried closure borrows it mutably across
/// awaits, which an `FnMut() -> impl Future` API cannot express.
struct Client {
    sent: Vec<u32>,
}

impl Client {
    async fn send(&mut self, attempt: u32) -> Result<usize, ErrorClass> {
        tokio::task::yield_now().await;
        self.sent.push(attempt);
        if attempt < 2 {
            Err(ErrorClass::from_status(503))
        } else {
            Ok(self.sent.len())
        }
    }

    async fn send_with_retry(
        &mut self,
        retry: &Retry<usize, ErrorClass>,
    ) -> Result<usize, RetryError<ErrorClass>> {
        retry.run_mut(async |n| self.send(n).await).await
    }
}

#[tokio::test(start_paused = true)]
async fn closures_may_borrow_mut_state() {
    let mut client = Client { sent: vec![] };
    let r = Retry::new(RetryPolicy::default());
    assert_eq!(client.send_with_retry(&r).await.unwrap(), 2);
    assert_eq!(client.sent, [1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_futures_are_send_and_retry_is_shareable() {
    let r = Arc::new(Retry::<u32, std::io::Error>::new(
        RetryPolicy::builder()
            .backoff(Backoff::None)
            .build()
            .unwrap(),
    ));
    let mut tasks = Vec::new();
    for i in 0..4u32 {
        let r = r.clone();
        tasks.push(tokio::spawn(async move {
            r.run(move |n| async move {
                if n < 2 {
                    Err(std::io::ErrorKind::ConnectionReset.into())
                } else {
                    Ok(i + n)
                }
            })
            .await
            .unwrap()
        }));
    }
    let mut got = Vec::new();
    for t in tasks {
        got.push(t.await.unwrap());
    }
    assert_eq!(got, [2, 3, 4, 5]);
}

#[tokio::test(start_paused = true)]
async fn max_retries_is_attempts_plus_one() {
    let p = policy(RetryPolicy::builder().max_retries(2).backoff(Backoff::None));
    let t = trace(Retry::new(p), always(ErrorClass::from_status(503))).await;
    assert_eq!(t.starts.len(), 3);
    let t = trace(
        Retry::new(RetryPolicy::no_retry()),
        always(ErrorClass::from_status(503)),
    )
    .await;
    assert_eq!(
        (t.starts.len(), t.result.unwrap_err().reason()),
        (1, GiveUpReason::Exhausted)
    );
}

#[cfg(feature = "anyhow")]
#[tokio::test(start_paused = true)]
async fn anyhow_errors_classify_through_their_chain() {
    use anyhow::Context;
    let p = RetryPolicy::default();
    let err = retry(&p, async |_| {
        Err::<(), _>(std::io::Error::from(std::io::ErrorKind::InvalidInput))
            .context("calling the search API")
    })
    .await
    .unwrap_err();
    assert_eq!(err.attempts(), 1);
    let err = retry(&p, async |_| {
        Err::<(), _>(anyhow::anyhow!("upstream said HTTP 503"))
    })
    .await
    .unwrap_err();
    assert_eq!(err.attempts(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_retry_cap_ends_a_status_early_and_counts_only_its_own_failures() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(10)
            .jitter(Jitter::None)
            .retry_cap(500, 2),
    );
    // The MCP guide's rule: a 500 gets two retries, then it is treated as permanent.
    let t = trace(Retry::new(p.clone()), always(ErrorClass::from_status(500))).await;
    let err = t.result.unwrap_err();
    assert_eq!((err.attempts(), err.reason()), (3, GiveUpReason::Exhausted));
    // Other failures keep the policy's attempts.
    let t = trace(Retry::new(p.clone()), always(ErrorClass::from_status(503))).await;
    assert_eq!(t.result.unwrap_err().attempts(), 10);
    // Only 500s count against the cap: 500, 503, 500, 500 ends at the third 500.
    let statuses = [500, 503, 500, 500, 500];
    let t = trace(Retry::new(p), |n| {
        Err::<(), _>(ErrorClass::from_status(statuses[n as usize - 1]))
    })
    .await;
    assert_eq!(t.result.unwrap_err().attempts(), 4);
}

#[tokio::test(start_paused = true)]
async fn the_most_specific_retry_cap_wins_and_codes_work_too() {
    let p = policy(
        RetryPolicy::builder()
            .max_attempts(10)
            .jitter(Jitter::None)
            .retry_cap("5xx", 1)
            .retry_cap(502, 3)
            .retry_cap(ErrorCode::TIMEOUT, 0),
    );
    let attempts = async |class: ErrorClass| {
        trace(Retry::new(p.clone()), always(class))
            .await
            .result
            .unwrap_err()
            .attempts()
    };
    assert_eq!(attempts(ErrorClass::from_status(502)).await, 4, "502 = 3");
    assert_eq!(attempts(ErrorClass::from_status(503)).await, 2, "5xx = 1");
    assert_eq!(attempts(ErrorClass::timeout()).await, 1, "TIMEOUT = 0");
    assert_eq!(attempts(ErrorClass::from_status(429)).await, 10, "no cap");
}

#[test]
fn retry_caps_in_toml_layer_by_key_and_bad_keys_are_named() {
    let defaults: RetryPolicyBuilder =
        toml::from_str(r#"retry_caps = { "500" = 2, TIMEOUT = 1 }"#).unwrap();
    let tool: RetryPolicyBuilder = toml::from_str(r#"retry_caps = { "500" = 0 }"#).unwrap();
    let p = defaults.layer(&tool).build().unwrap();
    assert_eq!(
        p.retry_caps(),
        &[
            (steadfast::RetryCap::Status(500), 0),
            (steadfast::RetryCap::Code(ErrorCode::TIMEOUT), 1)
        ]
    );
    // Round trip through serde.
    let back: RetryPolicy = toml::from_str(&toml::to_string(&p).unwrap()).unwrap();
    assert_eq!(back, p);

    let err = toml::from_str::<RetryPolicy>(r#"retry_caps = { "50" = 2 }"#).unwrap_err();
    assert!(
        err.to_string().contains(
            r#"retry_caps must have keys that are an HTTP status ("500"), a status class ("5xx") or an error code ("TIMEOUT") (got "50")"#
        ),
        "{err}"
    );
    let err = toml::from_str::<RetryPolicy>(r#"retry_caps = { "500" = -1 }"#).unwrap_err();
    assert!(err.to_string().contains("retry_caps"), "{err}");
}

#[test]
fn json_type_errors_name_the_field() {
    let err = serde_json::from_str::<RetryPolicy>(r#"{"max_attempts": 2.5}"#).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "invalid type: floating point `2.5`, expected u32 (field `max_attempts`) at line 1"
        ),
        "{err}"
    );
    for (json, field) in [
        (r#"{"base_delay": 5}"#, "base_delay"),
        (r#"{"jitter": "fast"}"#, "jitter"),
        (r#"{"retry_caps": {"500": "two"}}"#, "retry_caps"),
    ] {
        let err = serde_json::from_str::<RetryPolicy>(json).unwrap_err();
        assert!(
            err.to_string().contains(&format!("(field `{field}`)")),
            "{err}"
        );
    }
    // Validation still names the field after a well-typed parse.
    let err = serde_json::from_str::<RetryPolicy>(r#"{"max_attempts": 0}"#).unwrap_err();
    assert!(
        err.to_string().contains("max_attempts must be >= 1"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_json_parse_error_in_a_message_is_not_retried() {
    let calls = Arc::new(Mutex::new(0));
    let seen = calls.clone();
    let err = retry(&RetryPolicy::default(), |_| {
        *seen.lock().unwrap() += 1;
        async {
            Err::<(), _>("JSON parse error: Unexpected token < in JSON at position 0".to_owned())
        }
    })
    .await
    .unwrap_err();
    assert_eq!(*calls.lock().unwrap(), 1);
    assert_eq!(err.reason(), GiveUpReason::NonRetriable);
    assert_eq!(err.class().code, ErrorCode::PARSE_ERROR);
}

/// `elapsed` without anything that reads the clock at the start counts from the end of the first
/// attempt; with a time budget or a hook, from the start.
#[tokio::test(start_paused = true)]
async fn elapsed_counts_from_the_start_only_when_the_clock_was_read_then() {
    async fn slow(n: u32) -> Result<(), ErrorClass> {
        tokio::time::sleep(S(1)).await;
        Err(ErrorClass::from_status(if n < 2 { 503 } else { 404 }))
    }
    let base = RetryPolicy::builder()
        .backoff(Backoff::Constant)
        .base_delay(MS(100))
        .jitter(Jitter::None);
    let plain = Retry::new(policy(base.clone()));
    let err = plain.run(slow).await.unwrap_err();
    assert_eq!((err.attempts(), err.elapsed()), (2, MS(1100)));

    let budgeted = Retry::new(policy(base.clone().max_elapsed(S(60))));
    assert_eq!(budgeted.run(slow).await.unwrap_err().elapsed(), MS(2100));

    let hooked = Retry::new(policy(base)).on_give_up(|ev| assert_eq!(ev.elapsed, MS(2100)));
    assert_eq!(hooked.run(slow).await.unwrap_err().elapsed(), MS(2100));
}

#[tokio::test(start_paused = true)]
async fn retry_errors_convert_with_question_mark() {
    async fn boxed() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        retry(&RetryPolicy::no_retry(), async |_| {
            Err::<(), _>(std::io::Error::from(std::io::ErrorKind::ConnectionReset))
        })
        .await?;
        Ok(())
    }
    let err = boxed().await.unwrap_err();
    assert!(
        err.to_string().starts_with("gave up after 1 attempt"),
        "{err}"
    );
    assert_eq!(err.source().unwrap().to_string(), "connection reset");
    // A string error has no source, but converts all the same.
    async fn text() -> Result<(), Box<dyn std::error::Error>> {
        retry(&RetryPolicy::no_retry(), async |_| Err::<(), _>("HTTP 400")).await?;
        Ok(())
    }
    assert!(text().await.unwrap_err().source().is_none());
}

#[cfg(feature = "anyhow")]
#[tokio::test(start_paused = true)]
async fn a_retry_error_of_anyhow_converts_into_anyhow_with_question_mark() {
    async fn call() -> anyhow::Result<u32> {
        let v = retry(&RetryPolicy::no_retry(), async |_| {
            Err::<u32, _>(
                anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
                    .context("reading the cache"),
            )
        })
        .await?;
        Ok(v)
    }
    let err = call().await.unwrap_err();
    let chain: Vec<String> = err.chain().map(ToString::to_string).collect();
    assert!(chain[0].starts_with("gave up after 1 attempt"), "{chain:?}");
    assert_eq!(chain[1..], ["reading the cache", "permission denied"]);
}
