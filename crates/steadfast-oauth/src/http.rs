//! HTTP to the authorization server: discovery (RFC 8414 §3, OpenID Discovery §4), the JWKS,
//! with a timeout on every request and a cap on every body, so a slow or hostile server can
//! neither hang a caller nor grow memory.

use std::time::Duration;

use jsonwebtoken::jwk::JwkSet;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::jwks::{BoxFuture, FetchJwks};

/// Largest body read from the authorization server (metadata, JWKS, token responses).
pub(crate) const MAX_BODY: usize = 1024 * 1024;

/// A request error with its causes ("error sending request" alone names none).
pub(crate) fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut out = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client, String> {
    // reqwest's `rustls-no-provider` panics at build time without a process-wide provider.
    #[cfg(feature = "rustls")]
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("building the HTTP client: {e}"))
}

/// Read a JSON body of at most [`MAX_BODY`] bytes from a 2xx response.
pub(crate) async fn read_json<T: DeserializeOwned>(
    what: &str,
    mut resp: reqwest::Response,
) -> Result<T, String> {
    let status = resp.status();
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("{what}: reading the body: {e}"))?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(format!("{what}: body larger than {MAX_BODY} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        return Err(format!("{what}: HTTP {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{what}: not the expected JSON: {e}"))
}

/// Authorization server metadata, the fields this crate uses (RFC 8414 §2).
#[derive(Debug, Clone, Deserialize)]
pub struct ServerMetadata {
    /// `issuer`; must equal the issuer it was discovered from (RFC 8414 §3.3).
    pub issuer: String,
    /// `jwks_uri`.
    #[serde(default)]
    pub jwks_uri: Option<String>,
    /// `token_endpoint`.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// `introspection_endpoint` (RFC 7662 §4 via RFC 8414 §2).
    #[serde(default)]
    pub introspection_endpoint: Option<String>,
}

/// The discovery URLs for `issuer`, in the order tried: RFC 8414 §3.1 inserts the well-known
/// segment between host and path; OpenID Discovery §4 appends it; for an issuer with a path,
/// the OpenID segment inserted the same way is tried last (RFC 8414 §5's compatibility note:
/// some providers publish only there).
pub fn discovery_urls(issuer: &str) -> Vec<String> {
    let issuer = issuer.trim_end_matches('/');
    let (origin, path) = match issuer
        .find("://")
        .and_then(|i| issuer[i + 3..].find('/').map(|j| i + 3 + j))
    {
        Some(split) => issuer.split_at(split),
        None => (issuer, ""),
    };
    let mut urls = vec![format!(
        "{origin}/.well-known/oauth-authorization-server{path}"
    )];
    urls.push(format!("{issuer}/.well-known/openid-configuration"));
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/openid-configuration{path}"));
    }
    urls
}

/// Fetch the issuer's metadata, trying each discovery URL; the `issuer` in it must match.
pub async fn discover(issuer: &str, timeout: Duration) -> Result<ServerMetadata, String> {
    let http = client(timeout)?;
    let mut errors = Vec::new();
    for url in discovery_urls(issuer) {
        let result = match http.get(&url).send().await {
            Ok(resp) => read_json::<ServerMetadata>(&url, resp).await,
            Err(e) => Err(format!("{url}: {}", describe(e))),
        };
        match result {
            Ok(meta) if meta.issuer.trim_end_matches('/') == issuer.trim_end_matches('/') => {
                return Ok(meta);
            }
            Ok(meta) => errors.push(format!("{url}: issuer {:?} is not {issuer:?}", meta.issuer)),
            Err(e) => errors.push(e),
        }
    }
    Err(format!("discovery failed: {}", errors.join("; ")))
}

/// Fetches the JWKS from a `jwks_uri` over HTTP.
#[derive(Debug, Clone)]
pub struct HttpJwksFetcher {
    http: reqwest::Client,
    uri: String,
}

impl HttpJwksFetcher {
    /// Fetch from a configured `jwks_uri`; each request gives up after `timeout`.
    pub fn new(jwks_uri: impl Into<String>, timeout: Duration) -> Result<Self, String> {
        Ok(Self {
            http: client(timeout)?,
            uri: jwks_uri.into(),
        })
    }

    /// Find the `jwks_uri` through the issuer's metadata ([`discover`]).
    pub async fn discover(issuer: &str, timeout: Duration) -> Result<Self, String> {
        let meta = discover(issuer, timeout).await?;
        let uri = meta
            .jwks_uri
            .ok_or_else(|| format!("{issuer}: metadata has no jwks_uri"))?;
        Self::new(uri, timeout)
    }

    /// The URI it fetches.
    pub fn uri(&self) -> &str {
        &self.uri
    }
}

impl FetchJwks for HttpJwksFetcher {
    fn fetch(&self) -> BoxFuture<'_, Result<JwkSet, String>> {
        Box::pin(async move {
            let resp = self
                .http
                .get(&self.uri)
                .send()
                .await
                .map_err(|e| format!("{}: {}", self.uri, describe(e)))?;
            read_json(&self.uri, resp).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::discovery_urls;

    #[test]
    fn discovery_inserts_the_well_known_segment_before_the_issuer_path() {
        assert_eq!(
            discovery_urls("https://as.example/tenant1"),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration",
                "https://as.example/.well-known/openid-configuration/tenant1"
            ]
        );
        assert_eq!(
            discovery_urls("https://as.example/"),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
    }
}
