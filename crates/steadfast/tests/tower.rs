//! The tower layers over real service stacks.
#![cfg(feature = "tower")]

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use steadfast::tower::{BreakerError, CircuitBreakerLayer, RetryLayer};
use steadfast::{
    BreakerConfig, BreakerState, CircuitBreaker, ErrorClass, GiveUpReason, Retry, RetryPolicy,
};
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};

/// A backend whose n-th call (0-based) answers according to `script(n)`.
fn backend<R: Send + 'static, E: Send + 'static>(
    script: impl Fn(u32) -> Result<R, E> + Send + Sync + Clone + 'static,
) -> (
    impl Service<String, Response = R, Error = E, Future: Send> + Clone + Send + 'static,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let svc = service_fn(move |_req: String| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        let out = script(n);
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            out
        }
    });
    (svc, calls)
}

#[tokio::test(start_paused = true)]
async fn retry_layer_absorbs_transient_errors_in_a_stack() {
    let (svc, calls) = backend(|n| {
        if n < 2 {
            Err(io::Error::from(io::ErrorKind::ConnectionReset))
        } else {
            Ok(format!("reply {n}"))
        }
    });
    let stack = ServiceBuilder::new()
        .map_response(|r: String| r.to_uppercase())
        .layer(RetryLayer::new(Retry::new(RetryPolicy::default())))
        .map_request(|r: &'static str| r.to_owned())
        .service(svc);
    assert_eq!(stack.oneshot("hi").await.unwrap(), "REPLY 2");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn retry_layer_does_not_retry_permanent_errors() {
    let (svc, calls) =
        backend(|_| Err::<String, _>(io::Error::from(io::ErrorKind::PermissionDenied)));
    let mut stack = ServiceBuilder::new()
        .layer(RetryLayer::new(Retry::new(RetryPolicy::default())))
        .service(svc);
    let err = stack
        .ready()
        .await
        .unwrap()
        .call("x".into())
        .await
        .unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::NonRetriable);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn retry_layer_checks_responses() {
    // HTTP-style: the service returns Ok with a status; `check` turns 503 into a retry.
    let (svc, calls) = backend(|n| Ok::<u16, io::Error>(if n == 0 { 503 } else { 200 }));
    let retry = Retry::new(RetryPolicy::default())
        .check(|status: &u16| (*status >= 500).then(|| ErrorClass::from_status(*status)));
    let stack = ServiceBuilder::new()
        .layer(RetryLayer::new(retry))
        .service(svc);
    assert_eq!(stack.oneshot("x".into()).await.unwrap(), 200);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn breaker_layer_opens_fails_fast_and_probes_after_the_reset_timeout() {
    let (svc, calls) = backend(|n| {
        if n < 3 {
            Err(io::Error::from(io::ErrorKind::ConnectionRefused))
        } else {
            Ok(n)
        }
    });
    let breaker = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(3)
            .reset_timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
    );
    let mut stack = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()))
        .service(svc);
    for _ in 0..3 {
        let e = stack
            .ready()
            .await
            .unwrap()
            .call("x".into())
            .await
            .unwrap_err();
        assert!(matches!(e, BreakerError::Inner(_)));
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    let e = stack
        .ready()
        .await
        .unwrap()
        .call("x".into())
        .await
        .unwrap_err();
    assert!(matches!(e, BreakerError::Open(_)), "{e}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "rejected calls never reach the service"
    );

    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(
        stack.ready().await.unwrap().call("x".into()).await.unwrap(),
        3
    );
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn breaker_layer_ignores_caller_errors() {
    let (svc, _) = backend(|_| Err::<u32, _>(io::Error::from(io::ErrorKind::InvalidInput)));
    let breaker = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(1)
            .build()
            .unwrap(),
    );
    let mut stack = CircuitBreakerLayer::new(breaker.clone()).layer(svc);
    for _ in 0..5 {
        let _ = stack.ready().await.unwrap().call("x".into()).await;
    }
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn retry_outside_breaker_stops_when_it_opens() {
    let (svc, calls) = backend(|_| Err::<u32, _>(io::Error::from(io::ErrorKind::ConnectionReset)));
    let breaker = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(2)
            .build()
            .unwrap(),
    );
    let stack = ServiceBuilder::new()
        .layer(RetryLayer::new(Retry::new(
            RetryPolicy::builder().max_attempts(5).build().unwrap(),
        )))
        .layer(CircuitBreakerLayer::new(breaker.clone()))
        .service(svc);
    let err = stack.oneshot("x".into()).await.unwrap_err();
    // Two attempts opened the breaker; the third was rejected and CIRCUIT_OPEN is not retried.
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(err.attempts(), 3);
    assert!(matches!(err.error(), Some(BreakerError::Open(_))));
    assert_eq!(
        err.to_llm_error("x").code,
        steadfast::LlmErrorCode::CircuitOpen
    );
}

#[tokio::test(start_paused = true)]
async fn a_dropped_call_frees_a_half_open_probe_slot() {
    let breaker = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(1)
            .half_open_max_calls(1)
            .reset_timeout(Duration::from_secs(1))
            .build()
            .unwrap(),
    );
    breaker.try_acquire().unwrap().failure();
    tokio::time::advance(Duration::from_secs(1)).await;
    let svc = service_fn(|_: ()| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<_, io::Error>(())
    });
    let mut stack = CircuitBreakerLayer::new(breaker.clone()).layer(svc);
    let probe = stack.call(());
    assert!(
        breaker.try_acquire().is_err(),
        "the only probe slot is taken"
    );
    drop(probe);
    assert!(
        breaker.try_acquire().is_ok(),
        "dropping the call released it"
    );
}
