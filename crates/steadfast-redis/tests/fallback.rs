//! Without a reachable Redis: bad input is refused clearly, and everything works on local state.
//! (No server needed: these run everywhere.)

use std::time::Duration;

use steadfast::{BreakerConfig, CallKeys, CallLimit, CircuitBreaker, LlmErrorCode, RunOnce};
use steadfast_redis::{Error, RedisOptions, RedisState};

/// A port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[tokio::test]
async fn bad_url_and_options_name_the_problem() {
    let err = RedisState::connect("http://127.0.0.1", RedisOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Url(_)), "{err}");
    let err = RedisState::connect("redis://127.0.0.1", RedisOptions::new().quorum(0))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "redis options: quorum: must be >= 1 (got 0)"
    );
    let err = RedisState::connect(
        "redis://127.0.0.1",
        RedisOptions::new().op_timeout(Duration::ZERO),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "redis options: op_timeout: must be between 1ms and 10000ms (got 0ms)"
    );
}

#[tokio::test]
async fn a_password_in_the_url_never_reaches_an_error() {
    let err = RedisState::connect("redis://:hunter2secret@[::1", RedisOptions::new())
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("hunter2secret"), "{err}");
}

#[tokio::test]
async fn unreachable_redis_starts_down_and_runs_on_local_state() {
    let url = format!("redis://127.0.0.1:{}", closed_port());
    let started = tokio::time::Instant::now();
    let state = RedisState::connect(
        &url,
        RedisOptions::new().op_timeout(Duration::from_millis(50)),
    )
    .await
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "connect does not hang"
    );
    assert!(!state.is_up());

    // Call limits count locally.
    let limit = CallLimit::builder()
        .per_tool(2, Duration::from_secs(60))
        .build_with(state.call_counter())
        .unwrap();
    let keys = CallKeys::new().session("s").tool("search");
    limit.acquire(&keys).await.unwrap();
    limit.acquire(&keys).await.unwrap();
    let refused = limit.acquire(&keys).await.unwrap_err();
    assert_eq!(
        steadfast::LlmError::from_class(&refused.class()).code,
        LlmErrorCode::ToolCallLimit
    );

    // Run-once holds within the process.
    let once = RunOnce::new(state.store::<String>(), Duration::from_secs(60));
    let runs = std::sync::atomic::AtomicU32::new(0);
    let op = || async {
        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok::<_, std::io::Error>("done".to_owned())
    };
    assert_eq!(once.run("k", op).await.unwrap(), "done");
    assert_eq!(once.run("k", op).await.unwrap(), "done");
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);

    // The breaker works as a local one: its own rule opens it, and its probe is local.
    let breaker = CircuitBreaker::named(
        "dep",
        BreakerConfig::builder()
            .failure_threshold(2)
            .build()
            .unwrap(),
    );
    state.share_breaker(&breaker).unwrap();
    breaker.try_acquire().unwrap().failure();
    breaker.try_acquire().unwrap().failure();
    assert!(breaker.try_acquire().is_err());
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(state.stats().fallbacks > 0);
}

#[tokio::test]
async fn a_breaker_is_shared_once() {
    let url = format!("redis://127.0.0.1:{}", closed_port());
    let state = RedisState::connect(&url, RedisOptions::new())
        .await
        .unwrap();
    let unnamed = CircuitBreaker::new(BreakerConfig::default());
    assert_eq!(state.share_breaker(&unnamed), Err(Error::UnnamedBreaker));
    let b = CircuitBreaker::named("x", BreakerConfig::default());
    state.share_breaker(&b).unwrap();
    assert!(matches!(
        state.share_breaker(&b),
        Err(Error::AlreadyShared(_))
    ));
    let other = CircuitBreaker::named("x", BreakerConfig::default());
    assert!(matches!(
        state.share_breaker(&other),
        Err(Error::AlreadyShared(_))
    ));
}

#[test]
fn the_state_table_parses_and_names_bad_fields() {
    let config: steadfast_redis::StateConfig = toml::from_str(
        r#"
        redis = "redis://127.0.0.1:6379"
        op_timeout = "20ms"
        quorum = 2
        budget_sync = "50ms"
        "#,
    )
    .unwrap();
    config.validate().unwrap();
    assert_eq!(config.options().quorum_value(), 2);
    let unknown = toml::from_str::<steadfast_redis::StateConfig>("redis_url = \"x\"").unwrap_err();
    assert!(
        unknown.to_string().contains("unknown field `redis_url`"),
        "{unknown}"
    );
    let bad_url = steadfast_redis::StateConfig {
        redis: Some("http://x".into()),
        ..Default::default()
    };
    assert!(matches!(bad_url.validate(), Err(Error::Url(_))));
}

#[tokio::test]
async fn no_redis_configured_means_no_shared_state() {
    let none = steadfast_redis::StateConfig::default()
        .connect()
        .await
        .unwrap();
    assert!(none.is_none());
}
