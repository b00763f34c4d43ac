//! Per-tool metrics: counts, codes, the rolling window, breaker state, and the `metrics` facade.

use std::time::Duration;

use steadfast::{
    BreakerConfig, BreakerState, CircuitBreaker, ErrorClass, LlmErrorCode, Metrics, Retry,
    RetryPolicy,
};

fn flaky(
    fail_first: u32,
    status: u16,
) -> impl FnMut(u32) -> std::future::Ready<Result<u32, ErrorClass>> {
    move |n| {
        std::future::ready(if n <= fail_first {
            Err(ErrorClass::from_status(status))
        } else {
            Ok(n)
        })
    }
}

#[tokio::test(start_paused = true)]
async fn counts_calls_attempts_retries_and_failures_by_code() {
    let metrics = Metrics::new();
    let retry = Retry::new(RetryPolicy::builder().max_attempts(3).build().unwrap())
        .metrics(metrics.tool("search"));

    retry.run(flaky(0, 503)).await.unwrap(); // 1 attempt
    retry.run(flaky(2, 503)).await.unwrap(); // 3 attempts, absorbed
    retry.run(flaky(9, 503)).await.unwrap_err(); // 3 attempts, SERVICE_UNAVAILABLE
    retry.run(flaky(9, 400)).await.unwrap_err(); // 1 attempt, INVALID_REQUEST
    retry.run(flaky(9, 429)).await.unwrap_err(); // 3 attempts, RATE_LIMITED

    let s = metrics.snapshot().tools["search"].clone();
    assert_eq!(s.calls, 5);
    assert_eq!(s.attempts, 1 + 3 + 3 + 1 + 3);
    assert_eq!(s.retries, 2 + 2 + 2);
    assert_eq!(s.successes, 2);
    assert_eq!(s.successes_after_retry, 1);
    // Three calls retried; one of them came through.
    assert_eq!(s.retry_success_rate, Some(1.0 / 3.0));
    assert_eq!(
        s.failures.into_iter().collect::<Vec<_>>(),
        [
            (LlmErrorCode::RateLimited, 1),
            (LlmErrorCode::ServiceUnavailable, 1),
            (LlmErrorCode::InvalidRequest, 1),
        ]
    );
    assert_eq!(s.last_5m.calls, 5);
    assert_eq!(s.last_5m.failures, 3);
}

#[tokio::test(start_paused = true)]
async fn the_rolling_view_forgets_after_five_minutes_and_totals_do_not() {
    let metrics = Metrics::new();
    let retry = Retry::new(RetryPolicy::default()).metrics(metrics.tool("db"));
    retry.run(flaky(1, 503)).await.unwrap();
    tokio::time::advance(Duration::from_secs(200)).await;
    retry.run(flaky(0, 503)).await.unwrap();

    let s = metrics.tool("db").snapshot();
    assert_eq!(
        (
            s.last_5m.calls,
            s.last_5m.retries,
            s.last_5m.successes_after_retry
        ),
        (2, 1, 1)
    );

    tokio::time::advance(Duration::from_secs(150)).await; // the first call is 350 s old
    let s = metrics.tool("db").snapshot();
    assert_eq!((s.last_5m.calls, s.last_5m.retries), (1, 0));
    assert_eq!((s.calls, s.retries), (2, 1));

    tokio::time::advance(Duration::from_secs(300)).await;
    assert_eq!(metrics.tool("db").snapshot().last_5m.calls, 0);
}

#[tokio::test(start_paused = true)]
async fn breaker_state_and_rejections_show_in_the_snapshot() {
    let metrics = Metrics::new();
    let breaker = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(2)
            .reset_timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
    let retry = Retry::new(RetryPolicy::builder().max_attempts(1).build().unwrap())
        .breaker(breaker)
        .metrics(metrics.tool("api"));
    for _ in 0..5 {
        let _ = retry.run(flaky(9, 503)).await;
    }
    let json = serde_json::to_value(metrics.snapshot()).unwrap();
    let api = &json["tools"]["api"];
    assert_eq!(api["breaker"]["state"], "open");
    assert_eq!(api["breaker"]["rejected"], 3);
    assert_eq!(api["failures"]["CIRCUIT_OPEN"], 3);
    assert_eq!(api["failures"]["SERVICE_UNAVAILABLE"], 2);
    assert_eq!(api["calls"], 5);
    let s = metrics.tool("api").snapshot();
    assert_eq!(s.breaker.unwrap().state, BreakerState::Open);
}

#[test]
fn user_hooks_still_fire_alongside_metrics() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    let retries = Arc::new(AtomicU32::new(0));
    let seen = retries.clone();
    let metrics = Metrics::new();
    let retry = Retry::new(
        RetryPolicy::builder()
            .backoff(steadfast::Backoff::None)
            .build()
            .unwrap(),
    )
    .on_retry(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    })
    .metrics(metrics.tool("t"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(retry.run(flaky(1, 503))).unwrap();
    assert_eq!(retries.load(Ordering::SeqCst), 1);
    assert_eq!(metrics.tool("t").snapshot().retries, 1);
}

#[cfg(feature = "metrics")]
#[test]
fn counts_reach_the_metrics_facade_labelled_by_tool() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let metrics = Metrics::new();
    let breaker = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(1)
            .build()
            .unwrap(),
    );
    metrics::with_local_recorder(&recorder, || {
        let retry = Retry::new(RetryPolicy::builder().max_attempts(2).build().unwrap())
            .breaker(breaker.clone())
            .metrics(metrics.tool("search"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            retry.run(flaky(1, 503)).await.unwrap();
            retry.run(flaky(9, 503)).await.unwrap_err();
        });
    });
    let mut seen = std::collections::BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let labels: Vec<String> = key
            .key()
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let v = match value {
            DebugValue::Counter(n) => n as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(_) => continue,
        };
        seen.insert(format!("{}{{{}}}", key.key().name(), labels.join(",")), v);
    }
    assert_eq!(seen["steadfast_calls_total{tool=search}"], 2.0);
    assert_eq!(seen["steadfast_attempts_total{tool=search}"], 4.0);
    assert_eq!(seen["steadfast_retries_total{tool=search}"], 2.0);
    assert_eq!(
        seen["steadfast_successes_after_retry_total{tool=search}"],
        1.0
    );
    assert_eq!(
        seen["steadfast_failures_total{tool=search,code=SERVICE_UNAVAILABLE}"],
        1.0
    );
    assert_eq!(
        seen["steadfast_breaker_state{tool=search}"], 2.0,
        "{seen:?}"
    );
    // Why the failing call stopped: both its attempts failed.
    let give_ups: Vec<_> = seen
        .iter()
        .filter(|(k, _)| k.starts_with("steadfast_give_ups_total"))
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        give_ups,
        [(
            "steadfast_give_ups_total{tool=search,reason=exhausted}",
            1.0
        )]
    );
}
