//! Upstream credentials by the OAuth client credentials grant (RFC 6749 §4.4) with the RFC 8707
//! `resource` parameter: the gateway's own token for an upstream, never the client's.
//!
//! The token is cached and refreshed before it expires; refreshes are single-flight (callers
//! queue on one fetch), and if a refresh fails while the cached token is still valid, the
//! cached one is used and the failure logged.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::jwks::BoxFuture;
use crate::secret::{Secret, basic_auth};

/// A token endpoint's answer (RFC 6749 §5.1), the fields used here.
#[derive(Debug, Clone, Deserialize)]
pub struct TokenResponse {
    /// The access token.
    #[serde(deserialize_with = "secret")]
    pub access_token: Secret,
    /// Lifetime in seconds; 300 assumed when absent.
    #[serde(default)]
    pub expires_in: Option<u64>,
}

fn secret<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Secret, D::Error> {
    String::deserialize(d).map(Secret::new)
}

/// Fetches one token; see [`ClientCredentials::with_fetcher`].
pub type TokenFetchFn =
    Arc<dyn Fn() -> BoxFuture<'static, Result<TokenResponse, String>> + Send + Sync>;

/// Where and how to get the token. `Debug` shows no secret.
#[derive(Debug, Clone)]
pub struct ClientCredentialsConfig {
    /// The authorization server's token endpoint.
    pub token_endpoint: String,
    /// The gateway's client id there.
    pub client_id: String,
    /// Its secret (from env or a file; never logged).
    pub client_secret: Secret,
    /// Space-separated scopes to ask for.
    pub scope: Option<String>,
    /// The upstream's resource URI (RFC 8707 §2), so the token is bound to it.
    pub resource: Option<String>,
    /// Timeout of each token request.
    pub timeout: Duration,
}

struct Cached {
    token: Secret,
    refresh_at: Instant,
    expires_at: Instant,
}

/// A cached, self-refreshing client-credentials token.
///
/// ```no_run
/// # async fn demo() -> Result<(), String> {
/// use std::time::Duration;
/// use steadfast_oauth::{ClientCredentials, ClientCredentialsConfig, Secret};
/// let source = ClientCredentials::new(ClientCredentialsConfig {
///     token_endpoint: "https://as.example/token".into(),
///     client_id: "gateway".into(),
///     client_secret: Secret::new(std::env::var("UPSTREAM_SECRET").unwrap_or_default()),
///     scope: Some("search".into()),
///     resource: Some("https://search.example/mcp".into()),
///     timeout: Duration::from_secs(5),
/// })?;
/// let token = source.access_token().await?;
/// let header = format!("Bearer {}", token.expose());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ClientCredentials {
    fetch: TokenFetchFn,
    refresh_before: Duration,
    state: Arc<Mutex<Option<Cached>>>,
}

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("refresh_before", &self.refresh_before)
            .finish_non_exhaustive()
    }
}

impl ClientCredentials {
    /// A token source posting `grant_type=client_credentials` (client_secret_basic).
    pub fn new(config: ClientCredentialsConfig) -> Result<Self, String> {
        let http = crate::http::client(config.timeout)?;
        let auth = basic_auth(&config.client_id, &config.client_secret);
        let config = Arc::new(config);
        let fetch: TokenFetchFn = Arc::new(move || {
            let (http, auth, config) = (http.clone(), auth.clone(), config.clone());
            Box::pin(async move {
                let mut form = vec![("grant_type", "client_credentials")];
                form.extend(config.scope.as_deref().map(|s| ("scope", s)));
                form.extend(config.resource.as_deref().map(|r| ("resource", r)));
                let endpoint = &config.token_endpoint;
                let resp = http
                    .post(endpoint)
                    .header("authorization", auth)
                    .form(&form)
                    .send()
                    .await
                    .map_err(|e| format!("{endpoint}: {}", crate::http::describe(e)))?;
                crate::http::read_json(endpoint, resp).await
            })
        });
        Ok(Self::with_fetcher(fetch))
    }

    /// A token source over `fetch` (another grant, or a test double).
    pub fn with_fetcher(fetch: TokenFetchFn) -> Self {
        Self {
            fetch,
            refresh_before: Duration::from_secs(60),
            state: Arc::default(),
        }
    }

    /// Refresh this long before expiry (default 60 s; at most half the token's lifetime).
    pub fn refresh_before(mut self, margin: Duration) -> Self {
        self.refresh_before = margin;
        self
    }

    /// A valid token, fetched or refreshed if needed.
    pub async fn access_token(&self) -> Result<Secret, String> {
        let mut state = self.state.lock().await;
        let now = Instant::now();
        if let Some(cached) = state.as_ref()
            && now < cached.refresh_at
        {
            return Ok(cached.token.clone());
        }
        match (self.fetch)().await {
            Ok(resp) => {
                let lifetime = Duration::from_secs(resp.expires_in.unwrap_or(300));
                let margin = self.refresh_before.min(lifetime / 2);
                let token = resp.access_token;
                *state = Some(Cached {
                    token: token.clone(),
                    refresh_at: now + lifetime - margin,
                    expires_at: now + lifetime,
                });
                Ok(token)
            }
            Err(e) => match state.as_ref() {
                Some(cached) if now < cached.expires_at => {
                    tracing::warn!(error = %e, "token refresh failed; using the cached token until it expires");
                    Ok(cached.token.clone())
                }
                _ => Err(e),
            },
        }
    }
}
