//! Golden tests: the exact JSON a model receives for every code.

use std::time::Duration;

use steadfast::{
    BreakerConfig, CancellationToken, CircuitBreaker, ErrorClass, LlmError, LlmErrorCode, Retry,
    RetryError, RetryPolicy,
};

async fn fail(retry: &Retry<(), ErrorClass>, class: ErrorClass) -> RetryError<ErrorClass> {
    retry
        .run(|_| {
            let class = class.clone();
            async move { Err(class) }
        })
        .await
        .unwrap_err()
}

fn json(e: &LlmError) -> String {
    serde_json::to_string(e).unwrap()
}

#[tokio::test(start_paused = true)]
async fn rate_limited() {
    let retry = Retry::new(RetryPolicy::builder().max_attempts(2).build().unwrap());
    let err = fail(&retry, ErrorClass::from_response(429, Some("7"))).await;
    assert_eq!(
        json(&err.to_llm_error("search")),
        r#"{"error":true,"code":"RATE_LIMITED","message":"Rate limit exceeded (HTTP 429)","retriable":true,"suggestion":"Wait before retrying or reduce request frequency","tool":"search","attemptsMade":2,"retryAfterMs":7000}"#
    );
}

#[tokio::test(start_paused = true)]
async fn service_unavailable() {
    let retry = Retry::new(RetryPolicy::default());
    let err = fail(&retry, ErrorClass::from_status(503)).await;
    assert_eq!(
        json(&err.to_llm_error("weather")),
        r#"{"error":true,"code":"SERVICE_UNAVAILABLE","message":"Service temporarily unavailable (HTTP 503)","retriable":true,"suggestion":"Retry the operation","tool":"weather","attemptsMade":3}"#
    );
    let io = Retry::<(), std::io::Error>::new(RetryPolicy::no_retry())
        .run(|_| async { Err(std::io::ErrorKind::ConnectionReset.into()) })
        .await
        .unwrap_err();
    assert_eq!(
        io.to_llm_error("weather").message,
        "Service temporarily unavailable"
    );
}

#[tokio::test(start_paused = true)]
async fn timeout() {
    let retry = Retry::<(), ErrorClass>::new(
        RetryPolicy::builder()
            .max_attempts(2)
            .attempt_timeout(Duration::from_secs(1))
            .build()
            .unwrap(),
    );
    let err = retry.run(|_| std::future::pending()).await.unwrap_err();
    assert_eq!(
        json(&err.to_llm_error("report")),
        r#"{"error":true,"code":"TIMEOUT","message":"Request timed out","retriable":true,"suggestion":"Try again or reduce payload size","tool":"report","attemptsMade":2}"#
    );
}

#[tokio::test(start_paused = true)]
async fn invalid_request_carries_the_sanitized_message() {
    #[derive(Debug)]
    struct ApiError(&'static str);
    impl std::fmt::Display for ApiError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl steadfast::Classify for ApiError {
        fn classify(&self) -> ErrorClass {
            ErrorClass::from_status(400)
        }
    }
    let err = Retry::<(), ApiError>::new(RetryPolicy::default())
        .run(|_| async {
            Err(ApiError(
                "400 Bad Request: 'date' must be ISO-8601 (request to http://10.2.0.8:9000/v1 with api_key=abc123def)\n    at validate (/srv/app/api.js:10:3)",
            ))
        })
        .await
        .unwrap_err();
    assert_eq!(
        json(&err.to_llm_error("calendar")),
        r#"{"error":true,"code":"INVALID_REQUEST","message":"400 Bad Request: 'date' must be ISO-8601 (request to [internal-url] with api_key=[redacted])","retriable":false,"suggestion":"Check the tool arguments","tool":"calendar","attemptsMade":1}"#
    );
}

#[tokio::test(start_paused = true)]
async fn auth_and_not_found_get_specific_suggestions() {
    let retry = Retry::new(RetryPolicy::default());
    let e = fail(
        &retry,
        ErrorClass::from_status(401).with_message("bad credentials"),
    )
    .await
    .to_llm_error("gh");
    assert_eq!(e.code, LlmErrorCode::InvalidRequest);
    assert!(
        e.suggestion.starts_with("The tool is not authorized"),
        "{}",
        e.suggestion
    );
    let e = fail(&retry, ErrorClass::from_status(404))
        .await
        .to_llm_error("gh");
    assert_eq!(
        e.suggestion,
        "Check that the identifiers in the arguments exist"
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_error() {
    let err = Retry::<(), String>::new(RetryPolicy::builder().max_attempts(2).build().unwrap())
        .run(|_| async { Err("the flux capacitor is misaligned".to_string()) })
        .await
        .unwrap_err();
    assert_eq!(
        json(&err.to_llm_error("time-travel")),
        r#"{"error":true,"code":"UNKNOWN_ERROR","message":"An unexpected error occurred","retriable":true,"suggestion":"Retry once; if it persists, report the issue","tool":"time-travel","attemptsMade":2}"#
    );
}

#[tokio::test(start_paused = true)]
async fn circuit_open_says_so_and_says_when() {
    let breaker = CircuitBreaker::new(
        BreakerConfig::builder()
            .failure_threshold(1)
            .reset_timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
    let retry = Retry::new(RetryPolicy::no_retry()).breaker(breaker);
    fail(&retry, ErrorClass::from_status(503)).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let err = fail(&retry, ErrorClass::from_status(503)).await;
    let e = err.to_llm_error("search");
    assert_eq!(
        json(&e),
        r#"{"error":true,"code":"CIRCUIT_OPEN","message":"Circuit breaker is open: the service failed repeatedly, so calls to it are paused (for about 20s)","retriable":false,"suggestion":"Do not retry this tool until the circuit closes (see retryAfterMs); use another tool or tell the user the service is unavailable","tool":"search","attemptsMade":0,"retryAfterMs":20000}"#
    );
    assert!(
        e.to_string().contains("circuit breaker is open")
            || e.to_string().contains("Circuit breaker is open")
    );
    assert_ne!(
        e.code,
        LlmErrorCode::Timeout,
        "the reference package reports an open circuit as TIMEOUT; we do not"
    );
}

#[tokio::test(start_paused = true)]
async fn cancelled() {
    let token = CancellationToken::new();
    token.cancel();
    let err = Retry::<(), ErrorClass>::new(RetryPolicy::default())
        .cancel_on(&token)
        .run(|_| async { Ok(()) })
        .await
        .unwrap_err();
    assert_eq!(
        json(&err.to_llm_error("search")),
        r#"{"error":true,"code":"CANCELLED","message":"The call was cancelled","retriable":false,"suggestion":"No action needed; the call was cancelled by the caller","tool":"search","attemptsMade":0}"#
    );
}

#[test]
fn long_messages_are_cut() {
    let long = "x ".repeat(1000);
    let e = LlmError::from_class(&ErrorClass::from_status(422).with_message(long));
    assert_eq!(e.message.chars().count(), steadfast::MAX_MESSAGE_CHARS);
    assert!(e.message.ends_with('…'));
}

#[test]
fn display_reads_as_plain_text() {
    let e = LlmError::from_class(
        &ErrorClass::from_status(429).with_retry_after(Duration::from_millis(1500)),
    )
    .with_tool("search")
    .with_attempts(3);
    assert_eq!(
        e.to_string(),
        "search failed (RATE_LIMITED): Rate limit exceeded (HTTP 429). Wait before retrying or reduce request frequency. [3 attempts; retry after 2s]"
    );
}

#[test]
fn round_trips_through_json() {
    let e = LlmError::new(LlmErrorCode::ServiceUnavailable)
        .with_tool("t")
        .with_attempts(2);
    assert_eq!(serde_json::from_str::<LlmError>(&json(&e)).unwrap(), e);
}
