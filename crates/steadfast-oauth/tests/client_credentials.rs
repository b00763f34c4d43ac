//! The client-credentials token source on the paused clock: cached, refreshed before expiry,
//! single-flight, and no secret in Debug output.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use steadfast_oauth::{
    ClientCredentials, ClientCredentialsConfig, Secret, TokenFetchFn, TokenResponse,
};

fn source(lifetime: u64, fail_after: usize) -> (ClientCredentials, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let fetch: TokenFetchFn = {
        let calls = calls.clone();
        Arc::new(move || {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move {
                // A slow endpoint, so concurrent callers overlap.
                tokio::time::sleep(Duration::from_millis(100)).await;
                if n > fail_after {
                    return Err("HTTP 503".to_string());
                }
                Ok(TokenResponse {
                    access_token: Secret::new(format!("token-{n}")),
                    expires_in: Some(lifetime),
                })
            })
        })
    };
    (
        ClientCredentials::with_fetcher(fetch).refresh_before(Duration::from_secs(60)),
        calls,
    )
}

#[tokio::test(start_paused = true)]
async fn the_token_is_cached_and_refreshed_before_expiry() {
    let (s, calls) = source(3600, usize::MAX);
    assert_eq!(s.access_token().await.unwrap().expose(), "token-1");
    tokio::time::advance(Duration::from_secs(3600 - 61)).await;
    assert_eq!(s.access_token().await.unwrap().expose(), "token-1");
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(
        s.access_token().await.unwrap().expose(),
        "token-2",
        "refreshed 60 s before expiry"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn concurrent_callers_share_one_fetch() {
    let (s, calls) = source(3600, usize::MAX);
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            tokio::spawn({
                let s = s.clone();
                async move { s.access_token().await }
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().expose(), "token-1");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_refresh_keeps_the_valid_token_then_fails_once_it_expires() {
    let (s, _) = source(120, 1);
    s.access_token().await.unwrap();
    // Refresh point is at 60 s (the margin is capped at half the lifetime).
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(s.access_token().await.unwrap().expose(), "token-1");
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(s.access_token().await.unwrap_err(), "HTTP 503");
}

#[test]
fn debug_output_never_shows_the_secret() {
    let config = ClientCredentialsConfig {
        token_endpoint: "http://127.0.0.1:1/token".into(),
        client_id: "gateway".into(),
        client_secret: Secret::new("s3cr3t-value"),
        scope: None,
        resource: Some("https://up.test/mcp".into()),
        timeout: Duration::from_secs(1),
    };
    let printed = format!(
        "{config:?} {:?}",
        ClientCredentials::new(config.clone()).unwrap()
    );
    assert!(
        !printed.contains("s3cr3t-value") && printed.contains("[redacted]"),
        "{printed}"
    );
    let resp: TokenResponse =
        serde_json::from_str(r#"{"access_token": "tok-value", "expires_in": 60}"#).unwrap();
    assert!(!format!("{resp:?}").contains("tok-value"));
}
