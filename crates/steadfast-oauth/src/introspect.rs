//! Token introspection (RFC 7662) for opaque tokens, cached until each token's `exp`.
//!
//! The cache is keyed by a SHA-256 of the token (the token itself is not kept), bounded in
//! entries, and never holds an entry past `exp` or past `max_ttl`, so a revoked token is
//! accepted for at most `max_ttl` (RFC 7662 §4 leaves that trade-off to the resource server).
//! Inactive answers are not cached: a token not yet active may become so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::jwks::BoxFuture;
use crate::secret::{Secret, basic_auth};
use crate::{Claims, TokenError};

/// Posts a token to an introspection endpoint and returns the JSON answer.
pub type IntrospectFn =
    Arc<dyn Fn(String) -> BoxFuture<'static, Result<serde_json::Value, String>> + Send + Sync>;

/// SHA-256 of the token → its claims and the epoch second the entry expires.
type Cache = HashMap<[u8; 32], (Claims, u64)>;

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    active: bool,
    #[serde(flatten)]
    claims: Claims,
}

/// Validates opaque tokens by asking the authorization server (RFC 7662 §2).
///
/// ```no_run
/// # async fn demo() -> Result<(), String> {
/// use std::time::Duration;
/// use steadfast_oauth::{Introspector, Secret};
/// let introspector = Introspector::new(
///     "https://as.example/token/introspection", "gateway", Secret::new("from-env"),
///     "https://mcp.example/mcp", Duration::from_secs(5),
/// )?;
/// let claims = introspector.validate("opaque-token").await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Introspector {
    fetch: IntrospectFn,
    audiences: Vec<String>,
    issuer: Option<String>,
    require_issuer: bool,
    max_entries: usize,
    max_ttl: Duration,
    cache: Arc<Mutex<Cache>>,
    now: Arc<dyn Fn() -> u64 + Send + Sync>,
}

impl std::fmt::Debug for Introspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspector")
            .field("audiences", &self.audiences)
            .finish_non_exhaustive()
    }
}

impl Introspector {
    /// Introspect at `endpoint`, authenticating as `client_id` (client_secret_basic); accept
    /// only tokens whose `aud` names `audience`. Each request gives up after `timeout`.
    pub fn new(
        endpoint: impl Into<String>,
        client_id: impl Into<String>,
        secret: Secret,
        audience: impl Into<String>,
        timeout: Duration,
    ) -> Result<Self, String> {
        let http = crate::http::client(timeout)?;
        let (endpoint, auth) = (endpoint.into(), basic_auth(&client_id.into(), &secret));
        let fetch: IntrospectFn = Arc::new(move |token: String| {
            let (http, endpoint, auth) = (http.clone(), endpoint.clone(), auth.clone());
            Box::pin(async move {
                let form = [
                    ("token", token.as_str()),
                    ("token_type_hint", "access_token"),
                ];
                let resp = http
                    .post(&endpoint)
                    .header("authorization", auth)
                    .form(&form)
                    .send()
                    .await
                    .map_err(|e| format!("{endpoint}: {}", crate::http::describe(e)))?;
                crate::http::read_json(&endpoint, resp).await
            })
        });
        Ok(Self::with_fetcher(fetch, audience))
    }

    /// Introspect through `fetch` (another transport, or a test double).
    pub fn with_fetcher(fetch: IntrospectFn, audience: impl Into<String>) -> Self {
        Self {
            fetch,
            audiences: vec![audience.into()],
            issuer: None,
            require_issuer: false,
            max_entries: 10_000,
            max_ttl: Duration::from_secs(300),
            cache: Arc::default(),
            now: Arc::new(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            }),
        }
    }

    /// An answer's `iss`, when it has one, must be this. RFC 7662 §2.2 makes `iss` optional
    /// (and oidc-provider, Keycloak and Okta answer without it for some tokens): an answer
    /// without one is accepted unless [`Self::require_issuer`].
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    /// Refuse answers without `iss` (with [`Self::issuer`] set).
    pub fn require_issuer(mut self, require: bool) -> Self {
        self.require_issuer = require;
        self
    }

    /// Also accept answers whose `aud` names one of `audiences` (identifiers that are not the
    /// resource's URL, as [`crate::JwtConfig::also_audiences`]).
    pub fn also_audiences<S: Into<String>>(
        mut self,
        audiences: impl IntoIterator<Item = S>,
    ) -> Self {
        self.audiences.extend(audiences.into_iter().map(Into::into));
        self
    }

    /// Bound the cache (default 10 000 tokens, each kept at most 5 minutes).
    pub fn cache_limits(mut self, max_entries: usize, max_ttl: Duration) -> Self {
        (self.max_entries, self.max_ttl) = (max_entries, max_ttl);
        self
    }

    /// Replace the wall clock (seconds since the epoch).
    pub fn with_clock(mut self, now: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.now = Arc::new(now);
        self
    }

    /// How many answers are cached.
    pub fn cached(&self) -> usize {
        self.cache.lock().expect("introspection cache").len()
    }

    /// The token's claims if the server calls it active and it is for this resource.
    pub async fn validate(&self, token: &str) -> Result<Claims, TokenError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = (self.now)();
        if let Some((claims, until)) = self.cache.lock().expect("introspection cache").get(&key)
            && *until > now
        {
            return Ok(claims.clone());
        }
        let answer = (self.fetch)(token.to_owned())
            .await
            .map_err(TokenError::Unavailable)?;
        let answer: Answer = serde_json::from_value(answer)
            .map_err(|e| TokenError::Unavailable(format!("introspection answer: {e}")))?;
        let claims = self.check(answer, now)?;
        let until = claims
            .exp
            .unwrap_or(u64::MAX)
            .min(now.saturating_add(self.max_ttl.as_secs()));
        self.remember(key, claims.clone(), until, now);
        Ok(claims)
    }

    fn check(&self, answer: Answer, now: u64) -> Result<Claims, TokenError> {
        if !answer.active {
            return Err(TokenError::Inactive);
        }
        let claims = answer.claims;
        if let Some(exp) = claims.exp
            && exp <= now
        {
            return Err(TokenError::Expired { exp, now });
        }
        match (&self.issuer, &claims.iss) {
            (Some(want), Some(iss)) if iss != want => return Err(TokenError::WrongIssuer),
            (Some(_), None) if self.require_issuer => return Err(TokenError::MissingClaim("iss")),
            _ => {}
        }
        if !claims.aud.iter().any(|a| self.audiences.contains(a)) {
            return Err(TokenError::WrongAudience);
        }
        Ok(claims)
    }

    fn remember(&self, key: [u8; 32], claims: Claims, until: u64, now: u64) {
        let mut cache = self.cache.lock().expect("introspection cache");
        if cache.len() >= self.max_entries {
            cache.retain(|_, (_, until)| *until > now);
        }
        if cache.len() >= self.max_entries
            && let Some(evict) = cache.keys().next().copied()
        {
            cache.remove(&evict);
        }
        if self.max_entries > 0 {
            cache.insert(key, (claims, until));
        }
    }
}
