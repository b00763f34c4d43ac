//! `[auth]`: the HTTP front as an OAuth 2.1 resource server (MCP authorization; RFC 9728,
//! RFC 6750, RFC 8707, RFC 9068), built from the `steadfast-oauth` pieces.
//!
//! [`guard`] turns a request into the client's [`Identity`] or the refusal the client may hear:
//! 401 with `WWW-Authenticate: Bearer … resource_metadata="…"` (no token, or a token that fails a
//! check), 403 `insufficient_scope` (a call a scope would grant), 503 (keys unreachable). The
//! failed check itself (expired, wrong audience, unknown key, bad signature…) goes to the
//! operator's log at `-v`, never to the client. Static tokens (`--token-env`/`--token-file`)
//! keep working beside OAuth and see everything; `/metrics` takes only those.
//!
//! Verified tokens are remembered by their SHA-256 (never the token itself) until their `exp`
//! and at most `cache_ttl`, at most `cache_size` of them, so a client's every POST does not
//! verify a signature again. The identity is handed to the session (`session/identity.rs`),
//! which filters lists, refuses forbidden calls and keys call limits by the token's subject.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Response, StatusCode};
use serde_json::Value;
use sha2::{Digest, Sha256};
use steadfast_oauth::{
    AccessPolicy, Claims, ClientError, HttpJwksFetcher, Introspector, Jwks, JwksOptions, JwtConfig,
    JwtValidator, ProtectedResourceMetadata, Secret, SigningAlg, TokenError,
};

use crate::config::Config;
use crate::config::auth::{AuthConfig, SecretSource};
use crate::session::identity::{Access, Asked, Identity, Item};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The well-known path's prefix (RFC 9728 §3).
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// Verified tokens by their SHA-256 (never the token): the identity, until its `exp` and at
/// most `ttl`, at most `cap` of them.
struct TokenCache {
    map: HashMap<[u8; 32], (Arc<Identity>, u64)>,
    cap: usize,
    ttl: Duration,
}

impl TokenCache {
    fn new(cap: usize, ttl: Duration) -> Self {
        Self {
            map: HashMap::new(),
            cap,
            ttl,
        }
    }

    fn key(token: &str) -> [u8; 32] {
        Sha256::digest(token.as_bytes()).into()
    }

    /// The identity of a token verified before, unless its time is up (`now` in seconds).
    fn get(&self, key: &[u8; 32], now: u64) -> Option<Arc<Identity>> {
        self.map
            .get(key)
            .filter(|(_, until)| *until > now)
            .map(|(id, _)| id.clone())
    }

    /// Remembers a verified token until `exp` (at most `ttl` from `now`).
    fn insert(&mut self, key: [u8; 32], identity: Arc<Identity>, exp: Option<u64>, now: u64) {
        let until = exp
            .unwrap_or(u64::MAX)
            .min(now.saturating_add(self.ttl.as_secs()));
        if self.map.len() >= self.cap {
            self.map.retain(|_, (_, until)| *until > now);
        }
        if self.map.len() >= self.cap {
            // Still full of live tokens: forget an arbitrary one (it is verified again).
            if let Some(evict) = self.map.keys().next().copied() {
                self.map.remove(&evict);
            }
        }
        self.map.insert(key, (identity, until));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

/// The resource server: token checks, the metadata document, the access policy.
pub(crate) struct Auth {
    validator: JwtValidator,
    introspector: Option<Introspector>,
    /// The Protected Resource Metadata document, as served.
    metadata: String,
    /// Where it is served (for `resource_metadata="…"`).
    metadata_url: String,
    /// Its path-suffixed path (RFC 9728 §3.1); the bare path is served too.
    metadata_path: String,
    policy: Option<Arc<AccessPolicy>>,
    cache: Mutex<TokenCache>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn secret(source: &SecretSource) -> Result<Secret, String> {
    match source {
        SecretSource::Env(name) => Secret::from_env(name),
        SecretSource::File(path) => Secret::from_file(path),
    }
}

impl Auth {
    /// Builds the resource server of `[auth]` (None without one). The JWKS is fetched once
    /// now, so a wrong issuer or `jwks_uri` stops the gateway at start rather than refusing
    /// every client later.
    pub(crate) async fn start(config: &Config) -> Result<Option<Arc<Self>>, String> {
        let Some(a) = &config.auth else {
            return Ok(None);
        };
        let fetcher = match &a.jwks_uri {
            Some(uri) => HttpJwksFetcher::new(uri, a.fetch_timeout)?,
            None => HttpJwksFetcher::discover(&a.issuer, a.fetch_timeout)
                .await
                .map_err(|e| format!("[auth] issuer {}: {e}", a.issuer))?,
        };
        let uri = fetcher.uri().to_owned();
        let options = JwksOptions {
            fetch_timeout: a.fetch_timeout,
            min_refresh_interval: a.jwks_refresh_interval,
            max_age: a.jwks_max_age,
        };
        let jwks = Jwks::with_options(fetcher, options);
        let keys = jwks
            .refresh()
            .await
            .map_err(|e| format!("[auth] the JWKS at {uri}: {e}"))?;
        tracing::info!(jwks = %uri, keys, issuer = %a.issuer, resource = %a.resource, "[auth] OAuth tokens accepted");
        let validator = JwtValidator::new(jwt_config(a), jwks);
        let introspector = match &a.introspection {
            Some(i) => Some(
                Introspector::new(
                    &i.endpoint,
                    &i.client_id,
                    secret(&i.secret).map_err(|e| format!("[auth] introspection: {e}"))?,
                    &a.resource,
                    a.fetch_timeout,
                )?
                .also_audiences(a.audiences.iter().cloned())
                .issuer(&a.issuer)
                .require_issuer(i.require_iss),
            ),
            None => None,
        };
        let doc = ProtectedResourceMetadata::new(&a.resource)
            .authorization_server(&a.issuer)
            .scopes(a.scopes_supported.clone());
        let policy = if config.access.is_empty() {
            None
        } else {
            let raw = serde_json::to_value(&config.access).map_err(|e| e.to_string())?;
            Some(Arc::new(
                serde_json::from_value::<AccessPolicy>(raw).map_err(|e| e.to_string())?,
            ))
        };
        Ok(Some(Arc::new(Self {
            validator,
            introspector,
            metadata: serde_json::to_string(&doc).map_err(|e| e.to_string())?,
            metadata_url: doc.well_known_url(),
            metadata_path: doc.well_known_path(),
            policy,
            cache: Mutex::new(TokenCache::new(a.cache_size, a.cache_ttl)),
        })))
    }

    /// The metadata document, if `path` is where it is served.
    pub(crate) fn well_known(&self, path: &str) -> Option<Response<Body>> {
        if path != WELL_KNOWN && path != self.metadata_path {
            return None;
        }
        let mut r = full(StatusCode::OK, self.metadata.clone());
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        Some(r)
    }

    /// The token's identity, from the cache or verified now.
    pub(crate) async fn check(&self, token: &str) -> Result<Arc<Identity>, TokenError> {
        let key = TokenCache::key(token);
        let now = now_secs();
        if let Some(id) = self.cache().get(&key, now) {
            return Ok(id);
        }
        // A JWT has three dot-separated parts; anything else is opaque (introspected, if
        // configured). RFC 9068 tokens are JWS compact serializations.
        let claims = match (&self.introspector, token.matches('.').count()) {
            (Some(i), n) if n != 2 => i.validate(token).await?,
            _ => self.validator.validate(token).await?,
        };
        let exp = claims.exp;
        let identity = Arc::new(self.identity(claims)?);
        self.cache().insert(key, identity.clone(), exp, now);
        Ok(identity)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, TokenCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The identity of a verified token: sessions and call limits are keyed by its subject
    /// ([`Claims::subject`]: `sub`, else `client_id`, else `azp`); a token naming none is
    /// refused, since its holder could not be told from another such token's.
    fn identity(&self, claims: Claims) -> Result<Identity, TokenError> {
        let sub = claims
            .subject()
            .ok_or(TokenError::MissingClaim("sub"))?
            .to_owned();
        let mut all = serde_json::Map::new();
        for (k, v) in [
            ("iss", claims.iss.clone().map(Value::from)),
            ("sub", claims.sub.clone().map(Value::from)),
            ("aud", Some(Value::from(claims.aud.clone()))),
            ("exp", claims.exp.map(Value::from)),
            ("client_id", claims.client_id.clone().map(Value::from)),
            ("scope", Some(Value::from(claims.scope.join(" ")))),
        ] {
            if let Some(v) = v {
                all.insert(k.to_owned(), v);
            }
        }
        all.extend(claims.extra.clone());
        Ok(Identity {
            sub,
            scopes: claims.scope.clone(),
            claims: Value::Object(all),
            access: self
                .policy
                .clone()
                .map(|policy| Arc::new(PolicyAccess { policy, claims }) as Arc<dyn Access>),
        })
    }

    /// The refusal for a failed check: the check to the log, the RFC 6750 error to the client.
    fn refuse(&self, e: &TokenError) -> Response<Body> {
        tracing::info!(check = %e, "[auth] a token was refused");
        metrics::counter!("steadfast_auth_refused_total", "check" => check_label(e)).increment(1);
        let client = e.client_error();
        let status = StatusCode::from_u16(client.status()).unwrap_or(StatusCode::UNAUTHORIZED);
        let body = match client {
            ClientError::TemporarilyUnavailable => "the token cannot be checked now; retry later\n",
            ClientError::InsufficientScope { .. } => "insufficient scope\n",
            ClientError::InvalidToken => "invalid token\n",
        };
        let mut r = full(status, body);
        if let Some(h) = steadfast_oauth::challenge_for(&client, &self.metadata_url) {
            set_challenge(&mut r, &h);
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            r.headers_mut().insert(
                hyper::header::RETRY_AFTER,
                hyper::header::HeaderValue::from_static("5"),
            );
        }
        r
    }

    /// 403 `insufficient_scope` for a call the token lacks the scope for (MCP's scope
    /// challenge), its body the JSON-RPC error naming the tool; None when no scope would grant
    /// it (the session answers with a plain JSON-RPC error) or the call is allowed.
    pub(crate) fn scope_challenge(
        &self,
        identity: &Identity,
        id: Option<&str>,
        request: &Asked<'_>,
    ) -> Option<Response<Body>> {
        let access = identity.access.as_ref()?;
        let (item, key) = match request.method {
            "tools/call" => (Item::Tool, "name"),
            "prompts/get" => (Item::Prompt, "name"),
            "resources/read" => (Item::Resource, "uri"),
            _ => return None,
        };
        // (The params are read only for the three gated methods, and only with a policy.)
        let name = request.param(key)?;
        let name = name.as_str();
        if access.allows(item, name) {
            return None;
        }
        let scopes = access.scopes_for(item, name);
        if scopes.is_empty() {
            return None;
        }
        tracing::info!(sub = %identity.sub, name, "[auth] a call needs a scope the token lacks");
        let id = id.unwrap_or("null");
        let line = crate::session::identity::forbidden(id, item, name, &scopes);
        let mut r = full(StatusCode::FORBIDDEN, line);
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        let challenge = steadfast_oauth::challenge_403(&scopes.join(" "), &self.metadata_url);
        set_challenge(&mut r, &challenge);
        Some(r)
    }
}

/// The failed check as a metric label (bounded: one per kind, never the token's values).
fn check_label(e: &TokenError) -> &'static str {
    match e {
        TokenError::Malformed(_) => "malformed",
        TokenError::AlgorithmNotAllowed(_) => "algorithm_not_allowed",
        TokenError::UnknownKey(_) => "unknown_key",
        TokenError::BadSignature => "bad_signature",
        TokenError::Expired { .. } => "expired",
        TokenError::NotYetValid { .. } => "not_yet_valid",
        TokenError::IssuedInTheFuture { .. } => "issued_in_the_future",
        TokenError::WrongAudience => "wrong_audience",
        TokenError::WrongIssuer => "wrong_issuer",
        TokenError::MissingClaim(_) => "missing_claim",
        TokenError::Inactive => "inactive",
        TokenError::Unavailable(_) => "unavailable",
        TokenError::InsufficientScope { .. } => "insufficient_scope",
        _ => "other",
    }
}

fn jwt_config(a: &AuthConfig) -> JwtConfig {
    let algorithms = a.algorithms.iter().filter_map(|name| match name.as_str() {
        "RS256" => Some(SigningAlg::Rs256),
        "ES256" => Some(SigningAlg::Es256),
        "EdDSA" => Some(SigningAlg::EdDsa),
        _ => None, // refused when the config was validated
    });
    JwtConfig::new(&a.issuer, &a.resource)
        .also_audiences(a.audiences.iter().cloned())
        .require_access_token_typ(a.require_at_jwt)
        .leeway(a.leeway)
        .algorithms(algorithms.collect::<Vec<_>>())
}

fn set_challenge(r: &mut Response<Body>, value: &str) {
    if let Ok(v) = hyper::header::HeaderValue::from_str(value) {
        r.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, v);
    }
}

fn full(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r
}

/// The access policy's verdicts for one token.
struct PolicyAccess {
    policy: Arc<AccessPolicy>,
    claims: Claims,
}

impl Access for PolicyAccess {
    fn allows(&self, item: Item, name: &str) -> bool {
        match item {
            Item::Tool => self.policy.allows_tool(&self.claims, name),
            Item::Prompt => self.policy.allows_prompt(&self.claims, name),
            Item::Resource => self.policy.allows_resource(&self.claims, name),
        }
    }

    fn scopes_for(&self, item: Item, name: &str) -> Vec<String> {
        match item {
            Item::Tool => self
                .policy
                .scopes_for_tool(name)
                .into_iter()
                .map(str::to_owned)
                .collect(),
            Item::Prompt | Item::Resource => Vec::new(),
        }
    }
}

/// The credentials of the request's `Authorization: Bearer` header (the scheme is
/// case-insensitive, RFC 9110 §11.1): `Ok(None)` without one (or an empty one), the 400
/// `invalid_request` refusal when the header is given more than once (RFC 6750 §3.1: a first-
/// copy reader and a last-copy reader, a proxy and the gateway, would disagree on who calls).
/// The one reader of the header, for static tokens and `[auth]` alike.
pub(crate) fn bearer(headers: &hyper::HeaderMap) -> Result<Option<&str>, Box<Response<Body>>> {
    let mut all = headers.get_all(hyper::header::AUTHORIZATION).iter();
    let first = all.next();
    if all.next().is_some() {
        tracing::info!("[auth] a request with two Authorization headers was refused");
        metrics::counter!("steadfast_auth_refused_total", "check" => "invalid_request")
            .increment(1);
        let mut r = full(
            StatusCode::BAD_REQUEST,
            "invalid_request: one Authorization header at most (RFC 6750 §3.1)\n",
        );
        set_challenge(&mut r, "Bearer error=\"invalid_request\"");
        return Err(Box::new(r));
    }
    let token = first
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim_start_matches(' '))
        .filter(|t| !t.is_empty());
    Ok(token)
}

/// Constant-time equality, so a static token cannot be guessed byte by byte from timings.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who may come in to `/mcp` and `/metrics` (the only paths that reach here): `Ok(None)` for
/// anyone when neither static tokens nor `[auth]` are configured, or for a static token
/// (`--token-env`/`--token-file`, which sees everything); `Ok(Some(identity))` for a verified
/// OAuth token; otherwise the refusal to send. With `[auth]`, `/metrics` takes only a static
/// token (without one it stays closed).
pub(crate) async fn admit(
    auth: Option<&Auth>,
    headers: &hyper::HeaderMap,
    path: &str,
    static_tokens: &[String],
) -> Result<Option<Arc<Identity>>, Response<Body>> {
    if auth.is_none() && static_tokens.is_empty() {
        return Ok(None);
    }
    let token = bearer(headers).map_err(|r| *r)?;
    let static_ok = token.is_some_and(|token| {
        static_tokens
            .iter()
            .fold(false, |acc, t| acc | same(t.as_bytes(), token.as_bytes()))
    });
    if static_ok {
        return Ok(None);
    }
    let Some(auth) = auth else {
        let mut r = full(
            StatusCode::UNAUTHORIZED,
            "a valid bearer token is required\n",
        );
        set_challenge(&mut r, "Bearer realm=\"steadfast\"");
        return Err(r);
    };
    if path == "/metrics" {
        // OAuth tokens are for MCP clients; the metrics of a gateway that may listen beyond
        // loopback are for the operator's scraper.
        return Err(full(
            StatusCode::UNAUTHORIZED,
            "/metrics takes a static token (--token-env or --token-file)\n",
        ));
    }
    let Some(token) = token else {
        tracing::info!("[auth] a request without a bearer token was refused");
        metrics::counter!("steadfast_auth_refused_total", "check" => "no_token").increment(1);
        let mut r = full(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
        set_challenge(&mut r, &steadfast_oauth::challenge_401(&auth.metadata_url));
        return Err(r);
    };
    match auth.check(token).await {
        Ok(identity) => Ok(Some(identity)),
        Err(e) => Err(auth.refuse(&e)),
    }
}

/// The one check between a request's token and the session it names, for every method (POST,
/// GET, DELETE): a session opened with an OAuth token is its subject's, and a token of another
/// subject is refused (403) — a leaked `Mcp-Session-Id` gives neither the session's stream nor
/// its end. A session opened with a static token refuses OAuth tokens (it has no subject to
/// compare). A static token (`identity` None) is the operator's and passes. `opening`: the
/// session is being opened by this request (its `initialize`), which binds the identity.
pub(crate) fn claim(
    auth: Option<&Auth>,
    session: &crate::session::Session,
    identity: Option<&Arc<Identity>>,
    opening: bool,
) -> Option<Response<Body>> {
    let (_, identity) = (auth?, identity?);
    let refused = if !opening && session.identity().is_none() {
        true
    } else {
        session.identify(identity.clone()).is_err()
    };
    if refused {
        tracing::info!(session = %session.id, sub = %identity.sub, "[auth] a token of another subject was refused on a session");
        metrics::counter!("steadfast_auth_refused_total", "check" => "other_subject").increment(1);
        return Some(full(
            StatusCode::FORBIDDEN,
            "this session belongs to another subject\n",
        ));
    }
    None
}

/// The 403 scope challenge for a call in `body` the token lacks a scope for (see
/// [`Auth::scope_challenge`]); None without `[auth]`, for a static token, or when allowed.
pub(crate) fn scope_challenge(
    auth: Option<&Auth>,
    identity: Option<&Arc<Identity>>,
    id: Option<&str>,
    request: &Asked<'_>,
) -> Option<Response<Body>> {
    auth?.scope_challenge(identity?, id, request)
}

#[cfg(test)]
mod tests {
    use super::{Identity, TokenCache, same};
    use std::sync::Arc;
    use std::time::Duration;

    fn id(sub: &str) -> Arc<Identity> {
        Arc::new(Identity {
            sub: sub.into(),
            scopes: Vec::new(),
            claims: serde_json::Value::Null,
            access: None,
        })
    }

    #[test]
    fn the_token_cache_is_bounded_and_never_outlives_a_token() {
        let mut c = TokenCache::new(3, Duration::from_secs(300));
        let k = TokenCache::key;
        // Until exp when it comes first, until now + ttl otherwise.
        c.insert(k("a"), id("a"), Some(1_010), 1_000);
        c.insert(k("b"), id("b"), Some(99_999), 1_000);
        assert!(c.get(&k("a"), 1_009).is_some());
        assert!(c.get(&k("a"), 1_010).is_none(), "not at its exp");
        assert!(c.get(&k("b"), 1_299).is_some());
        assert!(c.get(&k("b"), 1_300).is_none(), "not past the ttl");
        assert!(c.get(&k("never"), 1_000).is_none());
        // Full: expired entries go first, then an arbitrary live one; never above the cap.
        c.insert(k("c"), id("c"), None, 1_000);
        c.insert(k("d"), id("d"), None, 1_020); // "a" has expired: it makes room
        assert_eq!(c.len(), 3);
        assert!(c.get(&k("b"), 1_020).is_some() && c.get(&k("c"), 1_020).is_some());
        assert!(c.get(&k("d"), 1_020).is_some());
        for n in 0..100 {
            c.insert(k(&n.to_string()), id("x"), None, 1_020);
            assert!(c.len() <= 3);
        }
        assert_eq!(c.get(&k("99"), 1_020).unwrap().sub, "x");
    }

    #[test]
    fn one_reader_of_the_bearer_header() {
        use hyper::header::{AUTHORIZATION, HeaderMap, HeaderValue};
        let of = |values: &[&'static str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(AUTHORIZATION, HeaderValue::from_static(v));
            }
            h
        };
        let token =
            |values: &[&'static str]| super::bearer(&of(values)).ok().flatten().map(str::to_owned);
        assert_eq!(token(&["Bearer abc"]).as_deref(), Some("abc"));
        assert_eq!(token(&["bEaReR   abc"]).as_deref(), Some("abc"));
        assert_eq!(token(&["Bearer "]), None, "an empty token is none");
        assert_eq!(token(&["Basic abc"]), None);
        assert_eq!(token(&[]), None);
        let two = super::bearer(&of(&["Bearer a", "Bearer b"])).unwrap_err();
        assert_eq!(two.status(), hyper::StatusCode::BAD_REQUEST);
    }

    #[test]
    fn static_tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }
}
