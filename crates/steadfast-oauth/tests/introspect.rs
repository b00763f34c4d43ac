//! Introspection (RFC 7662) with a scripted endpoint: cached until `exp`, bounded, checked.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use steadfast_oauth::{IntrospectFn, Introspector, TokenError};

const AUD: &str = "https://mcp.test/mcp";

struct Script {
    calls: Arc<AtomicUsize>,
    now: Arc<Mutex<u64>>,
}

fn introspector(
    answer: impl Fn(&str) -> Result<Value, String> + Send + Sync + 'static,
) -> (Introspector, Script) {
    let calls = Arc::new(AtomicUsize::new(0));
    let answer = Arc::new(answer);
    let fetch: IntrospectFn = {
        let calls = calls.clone();
        Arc::new(move |token: String| {
            calls.fetch_add(1, Ordering::SeqCst);
            let result = answer(&token);
            Box::pin(async move { result })
        })
    };
    let now = Arc::new(Mutex::new(1_000u64));
    let clock = now.clone();
    let i = Introspector::with_fetcher(fetch, AUD)
        .issuer("https://as.test")
        .with_clock(move || *clock.lock().unwrap());
    (i, Script { calls, now })
}

fn active(exp: u64) -> Value {
    json!({"active": true, "iss": "https://as.test", "aud": AUD, "sub": "alice", "exp": exp, "scope": "tools:read"})
}

#[tokio::test]
async fn an_active_token_is_cached_until_its_exp() {
    let (i, s) = introspector(|_| Ok(active(1_100)));
    assert_eq!(i.validate("t").await.unwrap().sub.as_deref(), Some("alice"));
    i.validate("t").await.unwrap();
    assert_eq!(s.calls.load(Ordering::SeqCst), 1);
    *s.now.lock().unwrap() = 1_100;
    assert!(matches!(
        i.validate("t").await,
        Err(TokenError::Expired {
            exp: 1_100,
            now: 1_100
        })
    ));
    assert_eq!(
        s.calls.load(Ordering::SeqCst),
        2,
        "asked again once the cached answer expired"
    );
}

#[tokio::test]
async fn the_cache_is_bounded_in_entries_and_time() {
    let (i, s) = introspector(|_| Ok(active(1_000_000)));
    let i = i.cache_limits(3, Duration::from_secs(60));
    for n in 0..10 {
        i.validate(&format!("t{n}")).await.unwrap();
    }
    assert_eq!(i.cached(), 3);
    i.validate("t9").await.unwrap();
    assert_eq!(s.calls.load(Ordering::SeqCst), 10);
    *s.now.lock().unwrap() += 60;
    i.validate("t9").await.unwrap();
    assert_eq!(
        s.calls.load(Ordering::SeqCst),
        11,
        "max_ttl forces a new question"
    );
}

#[tokio::test]
async fn inactive_foreign_and_unreachable_are_told_apart() {
    let (i, s) = introspector(|token| match token {
        "inactive" => Ok(json!({"active": false})),
        "other-aud" => Ok(
            json!({"active": true, "iss": "https://as.test", "aud": "https://x.test", "exp": 2_000}),
        ),
        "no-aud" => Ok(json!({"active": true, "iss": "https://as.test", "exp": 2_000})),
        "other-iss" => {
            Ok(json!({"active": true, "iss": "https://evil.test", "aud": AUD, "exp": 2_000}))
        }
        "garbage" => Ok(json!({"active": "yes"})),
        _ => Err("connection refused".into()),
    });
    assert_eq!(i.validate("inactive").await, Err(TokenError::Inactive));
    assert_eq!(i.validate("inactive").await, Err(TokenError::Inactive));
    assert_eq!(
        s.calls.load(Ordering::SeqCst),
        2,
        "inactive answers are not cached"
    );
    assert_eq!(
        i.validate("other-aud").await,
        Err(TokenError::WrongAudience)
    );
    assert_eq!(i.validate("no-aud").await, Err(TokenError::WrongAudience));
    assert_eq!(i.validate("other-iss").await, Err(TokenError::WrongIssuer));
    assert!(matches!(
        i.validate("garbage").await,
        Err(TokenError::Unavailable(_))
    ));
    let down = i.validate("down").await.unwrap_err();
    assert_eq!(down.client_error().status(), 503);
    assert_eq!(i.cached(), 0);
}
