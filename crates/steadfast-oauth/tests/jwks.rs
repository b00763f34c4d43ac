//! The remote JWKS cache on tokio's paused clock: rotation, rate-limited refresh, a hanging or
//! failing endpoint.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use jsonwebtoken::jwk::JwkSet;
use steadfast_oauth::{
    BoxFuture, FetchJwks, Jwks, JwksOptions, JwtConfig, JwtValidator, TokenError,
};
use tokio::time::Instant;

#[derive(Clone, Default)]
struct FakeAs {
    set: Arc<Mutex<Option<JwkSet>>>,
    fetches: Arc<AtomicUsize>,
    hang: Arc<AtomicBool>,
}

impl FakeAs {
    fn publish(&self, keys: &[&TestKey]) {
        *self.set.lock().unwrap() = Some(set(keys));
    }
    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

impl FetchJwks for FakeAs {
    fn fetch(&self) -> BoxFuture<'_, Result<JwkSet, String>> {
        Box::pin(async move {
            self.fetches.fetch_add(1, Ordering::SeqCst);
            if self.hang.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            self.set
                .lock()
                .unwrap()
                .clone()
                .ok_or_else(|| "HTTP 503".to_string())
        })
    }
}

const INTERVAL: Duration = Duration::from_secs(30);
const TIMEOUT: Duration = Duration::from_secs(2);
const MAX_AGE: Duration = Duration::from_secs(600);

fn validator(fake: &FakeAs) -> JwtValidator {
    let jwks = Jwks::with_options(
        fake.clone(),
        JwksOptions {
            min_refresh_interval: INTERVAL,
            fetch_timeout: TIMEOUT,
            max_age: MAX_AGE,
        },
    );
    JwtValidator::new(JwtConfig::new(ISS, AUD), jwks).with_clock(|| NOW)
}

#[tokio::test(start_paused = true)]
async fn keys_are_fetched_once_and_then_served_from_the_cache() {
    let (fake, key) = (FakeAs::default(), TestKey::es256("k1"));
    fake.publish(&[&key]);
    let v = validator(&fake);
    for _ in 0..5 {
        v.validate(&key.sign(&claims())).await.unwrap();
    }
    assert_eq!(fake.fetches(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_rotated_key_is_picked_up_and_the_removed_one_refused() {
    let (fake, old, new) = (
        FakeAs::default(),
        TestKey::es256("old"),
        TestKey::ed25519("new"),
    );
    fake.publish(&[&old]);
    let v = validator(&fake);
    v.validate(&old.sign(&claims())).await.unwrap();
    tokio::time::advance(INTERVAL).await;
    fake.publish(&[&old, &new]);
    v.validate(&new.sign(&claims())).await.unwrap();
    v.validate(&old.sign(&claims())).await.unwrap();
    assert_eq!(fake.fetches(), 2);
    // The old key is dropped; the cache learns it on the next refresh (another unknown kid).
    tokio::time::advance(INTERVAL).await;
    fake.publish(&[&new]);
    let newer = TestKey::es256("newer");
    assert!(matches!(
        v.validate(&newer.sign(&claims())).await,
        Err(TokenError::UnknownKey(_))
    ));
    assert_eq!(
        v.validate(&old.sign(&claims())).await,
        Err(TokenError::UnknownKey(Some("old".into())))
    );
    v.validate(&new.sign(&claims())).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn unknown_kids_refresh_at_most_once_per_interval() {
    let (fake, key) = (FakeAs::default(), TestKey::es256("k1"));
    fake.publish(&[&key]);
    let v = validator(&fake);
    v.validate(&key.sign(&claims())).await.unwrap();
    tokio::time::advance(INTERVAL).await;
    for i in 0..20 {
        let stranger = TestKey::es256(&format!("random-{i}"));
        assert!(matches!(
            v.validate(&stranger.sign(&claims())).await,
            Err(TokenError::UnknownKey(_))
        ));
    }
    assert_eq!(
        fake.fetches(),
        2,
        "one initial fetch, one refresh for the first unknown kid"
    );
    tokio::time::advance(INTERVAL).await;
    let _ = v.validate(&TestKey::es256("later").sign(&claims())).await;
    assert_eq!(fake.fetches(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_hanging_endpoint_never_blocks_cached_keys_and_bounds_the_wait_for_others() {
    let (fake, key) = (FakeAs::default(), TestKey::es256("k1"));
    fake.publish(&[&key]);
    let v = validator(&fake);
    v.validate(&key.sign(&claims())).await.unwrap();
    tokio::time::advance(INTERVAL).await;
    fake.hang.store(true, Ordering::SeqCst);

    let stuck = tokio::spawn({
        let (v, token) = (v.clone(), TestKey::es256("rotated").sign(&claims()));
        async move {
            let started = Instant::now();
            (v.validate(&token).await, started.elapsed())
        }
    });
    tokio::task::yield_now().await;
    // While the refresh hangs, a token with a cached key validates without waiting at all.
    let started = Instant::now();
    v.validate(&key.sign(&claims())).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);

    let (result, waited) = stuck.await.unwrap();
    assert!(
        matches!(result, Err(TokenError::Unavailable(_))),
        "{result:?}"
    );
    assert_eq!(waited, TIMEOUT);
    assert_eq!(result.unwrap_err().client_error().status(), 503);
}

#[tokio::test(start_paused = true)]
async fn an_outage_keeps_the_cache_and_is_retried_once_per_interval() {
    let (fake, key) = (FakeAs::default(), TestKey::es256("k1"));
    fake.publish(&[&key]);
    let v = validator(&fake);
    v.validate(&key.sign(&claims())).await.unwrap();
    tokio::time::advance(INTERVAL).await;
    *fake.set.lock().unwrap() = None;
    let rotated = TestKey::es256("k2");
    assert!(matches!(
        v.validate(&rotated.sign(&claims())).await,
        Err(TokenError::Unavailable(_))
    ));
    assert!(matches!(
        v.validate(&rotated.sign(&claims())).await,
        Err(TokenError::Unavailable(_))
    ));
    assert_eq!(fake.fetches(), 2);
    v.validate(&key.sign(&claims())).await.unwrap();
    tokio::time::advance(INTERVAL).await;
    fake.publish(&[&key, &rotated]);
    v.validate(&rotated.sign(&claims())).await.unwrap();
    assert_eq!(fake.fetches(), 3);
}

#[tokio::test(start_paused = true)]
async fn concurrent_unknown_kids_share_one_fetch() {
    let (fake, key) = (FakeAs::default(), TestKey::es256("k1"));
    fake.publish(&[&key]);
    let v = validator(&fake);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (v, t) = (v.clone(), key.sign(&claims()));
            tokio::spawn(async move { v.validate(&t).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(fake.fetches(), 1);
}

#[tokio::test(start_paused = true)]
async fn stale_keys_are_served_while_refreshed_in_the_background_so_removed_keys_expire() {
    let (fake, old, new) = (
        FakeAs::default(),
        TestKey::es256("old"),
        TestKey::es256("new"),
    );
    fake.publish(&[&old, &new]);
    let v = validator(&fake);
    v.validate(&old.sign(&claims())).await.unwrap();
    fake.publish(&[&new]);
    tokio::time::advance(MAX_AGE).await;
    fake.hang.store(true, Ordering::SeqCst);
    // Stale and the endpoint hangs: still served at once from the cache.
    let started = Instant::now();
    v.validate(&old.sign(&claims())).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    tokio::time::sleep(TIMEOUT).await;
    assert_eq!(fake.fetches(), 2, "one background refresh, which timed out");
    fake.hang.store(false, Ordering::SeqCst);
    tokio::time::advance(INTERVAL).await;
    v.validate(&old.sign(&claims())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(fake.fetches(), 3);
    assert_eq!(
        v.validate(&old.sign(&claims())).await,
        Err(TokenError::UnknownKey(Some("old".into())))
    );
    v.validate(&new.sign(&claims())).await.unwrap();
}
