//! The issuer's signing keys: a fixed set, or a JWKS fetched over HTTP and cached.
//!
//! The remote cache answers from memory whenever the token's `kid` is known, so an authorization
//! server that is down or hangs never delays a request whose key is cached. An unknown `kid`
//! (a rotation) triggers one refresh, at most once per `min_refresh_interval` however many
//! tokens carry unknown kids (random kids cannot turn the gateway into a JWKS flooder), and the
//! caller waits at most `fetch_timeout` for it. Refreshes are single-flight: concurrent callers
//! wait on the same fetch. Keys older than `max_age` are still served while a background task
//! refreshes them, so a key the issuer removed stops verifying within `max_age`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use tokio::time::Instant;

use crate::TokenError;

/// Most keys taken from one JWKS; real sets hold two or three.
const MAX_KEYS: usize = 64;

/// One usable verification key.
pub(crate) struct Key {
    kid: Option<String>,
    alg: Option<Algorithm>,
    family: AlgorithmFamily,
    pub(crate) decoding: DecodingKey,
}

impl Key {
    fn from_jwk(jwk: &Jwk) -> Option<Self> {
        if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
            return None;
        }
        // Symmetric keys are never verification keys here: accepting one is the HMAC confusion.
        let family = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa,
            AlgorithmParameters::EllipticCurve(_) => AlgorithmFamily::Ec,
            AlgorithmParameters::OctetKeyPair(_) => AlgorithmFamily::Ed,
            _ => return None,
        };
        let alg = match jwk.common.key_algorithm {
            None => None,
            Some(KeyAlgorithm::RS256) => Some(Algorithm::RS256),
            Some(KeyAlgorithm::ES256) => Some(Algorithm::ES256),
            Some(KeyAlgorithm::EdDSA) => Some(Algorithm::EdDSA),
            Some(_) => return None,
        };
        let decoding = DecodingKey::from_jwk(jwk).ok()?;
        Some(Self {
            kid: jwk.common.key_id.clone(),
            alg,
            family,
            decoding,
        })
    }

    /// Whether this key may verify `alg`: same family, and the JWK's own `alg` if it names one.
    pub(crate) fn accepts(&self, alg: Algorithm) -> bool {
        alg.family() == self.family && self.alg.is_none_or(|a| a == alg)
    }
}

fn keys_of(set: &JwkSet) -> Vec<Arc<Key>> {
    set.keys
        .iter()
        .take(MAX_KEYS)
        .filter_map(Key::from_jwk)
        .map(Arc::new)
        .collect()
}

fn select(keys: &[Arc<Key>], kid: Option<&str>) -> Vec<Arc<Key>> {
    match kid {
        Some(kid) => keys
            .iter()
            .filter(|k| k.kid.as_deref() == Some(kid))
            .cloned()
            .collect(),
        None => keys.to_vec(),
    }
}

/// A fixed set of keys, e.g. from configuration.
///
/// ```
/// let set: jsonwebtoken::jwk::JwkSet = serde_json::from_str(r#"{"keys": []}"#).unwrap();
/// let keys = steadfast_oauth::KeySet::new(&set);
/// assert_eq!(keys.len(), 0);
/// ```
#[derive(Clone)]
pub struct KeySet(Arc<Vec<Arc<Key>>>);

impl KeySet {
    /// The usable signature keys of `set` (symmetric and encryption keys are dropped).
    pub fn new(set: &JwkSet) -> Self {
        Self(Arc::new(keys_of(set)))
    }

    /// How many usable keys it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds no usable key.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Where a validator's keys come from.
#[derive(Clone)]
pub enum KeySource {
    /// A fixed set.
    Fixed(KeySet),
    /// A remote JWKS, cached.
    Remote(Jwks),
}

impl From<KeySet> for KeySource {
    fn from(k: KeySet) -> Self {
        Self::Fixed(k)
    }
}

impl From<Jwks> for KeySource {
    fn from(k: Jwks) -> Self {
        Self::Remote(k)
    }
}

impl KeySource {
    pub(crate) async fn keys_for(&self, kid: Option<&str>) -> Result<Vec<Arc<Key>>, TokenError> {
        let found = match self {
            Self::Fixed(set) => select(&set.0, kid),
            Self::Remote(jwks) => jwks.keys_for(kid).await?,
        };
        if found.is_empty() {
            return Err(TokenError::UnknownKey(
                kid.map(|k| k.chars().take(64).collect()),
            ));
        }
        Ok(found)
    }
}

/// A boxed future, so fetchers can be trait objects without an extra crate.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Fetches a JWKS; [`crate::http::HttpJwksFetcher`] over HTTP, or anything else in tests.
pub trait FetchJwks: Send + Sync + 'static {
    /// One fetch of the key set. Timeouts are the cache's business.
    fn fetch(&self) -> BoxFuture<'_, Result<JwkSet, String>>;
}

enum Refresh {
    Allowed,
    TooSoon,
    TooSoonAfterFailure,
}

struct State {
    keys: Vec<Arc<Key>>,
    last_attempt: Option<Instant>,
    last_success: Option<Instant>,
    last_failed: bool,
}

struct Inner {
    fetcher: Box<dyn FetchJwks>,
    state: RwLock<State>,
    refresh: tokio::sync::Mutex<()>,
    min_refresh_interval: Duration,
    fetch_timeout: Duration,
    max_age: Duration,
}

/// How often a [`Jwks`] may refresh and how long a request waits for it.
#[derive(Debug, Clone, Copy)]
pub struct JwksOptions {
    /// Least time between two fetches triggered by unknown kids (default 30 s).
    pub min_refresh_interval: Duration,
    /// Longest a request waits for a fetch, lock wait included (default 5 s).
    pub fetch_timeout: Duration,
    /// Age after which cached keys are refreshed in the background while still being used
    /// (default 10 min), so a key the issuer removed stops verifying without any unknown kid.
    pub max_age: Duration,
}

impl Default for JwksOptions {
    fn default() -> Self {
        Self {
            min_refresh_interval: Duration::from_secs(30),
            fetch_timeout: Duration::from_secs(5),
            max_age: Duration::from_secs(600),
        }
    }
}

/// A cached remote JWKS (see the module docs for the refresh rules).
///
/// ```no_run
/// # async fn demo() -> Result<(), String> {
/// use std::time::Duration;
/// use steadfast_oauth::{HttpJwksFetcher, Jwks};
/// let fetcher = HttpJwksFetcher::discover("https://as.example", Duration::from_secs(5)).await?;
/// let jwks = Jwks::new(fetcher);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Jwks(Arc<Inner>);

impl Jwks {
    /// A cache over `fetcher`, empty until the first token (or [`Jwks::refresh`]); refreshes at
    /// most every 30 s, waits at most 5 s for one.
    pub fn new(fetcher: impl FetchJwks) -> Self {
        Self::with_options(fetcher, JwksOptions::default())
    }

    /// A cache over `fetcher` with these intervals.
    pub fn with_options(fetcher: impl FetchJwks, options: JwksOptions) -> Self {
        Self(Arc::new(Inner {
            fetcher: Box::new(fetcher),
            state: RwLock::new(State {
                keys: Vec::new(),
                last_attempt: None,
                last_success: None,
                last_failed: false,
            }),
            refresh: tokio::sync::Mutex::new(()),
            min_refresh_interval: options.min_refresh_interval,
            fetch_timeout: options.fetch_timeout,
            max_age: options.max_age,
        }))
    }

    /// Fetch now, regardless of the interval (at startup, to fail fast on a wrong URL).
    pub async fn refresh(&self) -> Result<usize, TokenError> {
        let fetch = async {
            let _guard = self.0.refresh.lock().await;
            self.fetch_locked().await
        };
        tokio::time::timeout(self.0.fetch_timeout, fetch)
            .await
            .unwrap_or_else(|_| {
                Err(TokenError::Unavailable(format!(
                    "JWKS fetch took longer than {:?}",
                    self.0.fetch_timeout
                )))
            })
    }

    /// How many keys are cached.
    pub fn cached_keys(&self) -> usize {
        self.0.state.read().expect("jwks lock").keys.len()
    }

    async fn keys_for(&self, kid: Option<&str>) -> Result<Vec<Arc<Key>>, TokenError> {
        if let Some(found) = self.cached(kid) {
            self.revalidate_if_stale();
            return Ok(found);
        }
        let wait = tokio::time::timeout(self.0.fetch_timeout, async {
            let _guard = self.0.refresh.lock().await;
            // Someone else may have refreshed while this caller waited for the lock.
            if let Some(found) = self.cached(kid) {
                return Ok(found);
            }
            match self.may_refresh() {
                Refresh::Allowed => {}
                Refresh::TooSoon => return Ok(Vec::new()),
                Refresh::TooSoonAfterFailure => {
                    return Err(TokenError::Unavailable(
                        "the last JWKS fetch failed; retrying after the interval".into(),
                    ));
                }
            }
            self.fetch_locked().await?;
            Ok(self.cached(kid).unwrap_or_default())
        });
        match wait.await {
            Ok(result) => result,
            Err(_) => Err(TokenError::Unavailable(format!(
                "JWKS fetch took longer than {:?}",
                self.0.fetch_timeout
            ))),
        }
    }

    /// Stale keys are still served; a background task refreshes them (never the caller).
    fn revalidate_if_stale(&self) {
        let stale = {
            let state = self.0.state.read().expect("jwks lock");
            state
                .last_success
                .is_some_and(|t| t.elapsed() >= self.0.max_age)
                && state
                    .last_attempt
                    .is_none_or(|t| t.elapsed() >= self.0.min_refresh_interval)
        };
        if !stale || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            let Ok(_guard) = this.0.refresh.try_lock() else {
                return;
            };
            let _ = tokio::time::timeout(this.0.fetch_timeout, this.fetch_locked()).await;
        });
    }

    fn cached(&self, kid: Option<&str>) -> Option<Vec<Arc<Key>>> {
        let state = self.0.state.read().expect("jwks lock");
        let found = select(&state.keys, kid);
        (!found.is_empty()).then_some(found)
    }

    fn may_refresh(&self) -> Refresh {
        let state = self.0.state.read().expect("jwks lock");
        match state.last_attempt {
            Some(t) if t.elapsed() < self.0.min_refresh_interval && state.last_failed => {
                Refresh::TooSoonAfterFailure
            }
            Some(t) if t.elapsed() < self.0.min_refresh_interval => Refresh::TooSoon,
            _ => Refresh::Allowed,
        }
    }

    /// Call with the refresh lock held. The attempt counts even when it fails, so an outage is
    /// retried once per interval, not once per request.
    async fn fetch_locked(&self) -> Result<usize, TokenError> {
        {
            let mut state = self.0.state.write().expect("jwks lock");
            state.last_attempt = Some(Instant::now());
            state.last_failed = true;
        }
        let set = self.0.fetcher.fetch().await.map_err(|e| {
            tracing::warn!(error = %e, "JWKS fetch failed; keeping the cached keys");
            TokenError::Unavailable(e)
        })?;
        let keys = keys_of(&set);
        let n = keys.len();
        tracing::debug!(keys = n, "JWKS refreshed");
        let mut state = self.0.state.write().expect("jwks lock");
        state.keys = keys;
        state.last_failed = false;
        state.last_success = Some(Instant::now());
        Ok(n)
    }
}
