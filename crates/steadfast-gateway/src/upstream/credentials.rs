//! The gateway's own OAuth token for an HTTP upstream (`oauth = { … }` on the upstream): the
//! client-credentials grant (RFC 6749 §4.4) with the upstream's resource indicator (RFC 8707),
//! cached and refreshed before it expires by `steadfast_oauth::ClientCredentials`. It is the
//! only `Authorization` an upstream ever gets besides its static `headers`: a client's token is
//! never passed on (the HTTP front does not copy any client header upstream).
//!
//! The secret is read from its variable or file once, at start; it and the tokens are
//! `Secret`s (redacted in `Debug` and `Display`) and never logged.

use std::sync::Arc;
use std::time::Duration;

use steadfast_oauth::{ClientCredentials, ClientCredentialsConfig, Secret};

use crate::config::auth::{SecretSource, TokenEndpoint, UpstreamOAuth};

/// A token source for one upstream; the token endpoint is discovered at the first request
/// when only the issuer is configured.
pub(crate) struct UpstreamToken {
    config: UpstreamOAuth,
    /// The secret, or why it could not be read (every request then fails with that reason).
    secret: Result<Secret, String>,
    timeout: Duration,
    source: tokio::sync::OnceCell<ClientCredentials>,
}

impl UpstreamToken {
    /// A token source for `config`, reading its secret now.
    pub(crate) fn new(config: UpstreamOAuth, timeout: Duration) -> Arc<Self> {
        let secret = match &config.secret {
            SecretSource::Env(name) => Secret::from_env(name),
            SecretSource::File(path) => Secret::from_file(path),
        };
        if let Err(e) = &secret {
            tracing::error!("an upstream's oauth client secret: {e}");
        }
        Arc::new(Self {
            config,
            secret,
            timeout,
            source: tokio::sync::OnceCell::new(),
        })
    }

    /// A valid access token (cached; refreshed 60 s before it expires).
    pub(crate) async fn access_token(&self) -> Result<Secret, String> {
        let source = self
            .source
            .get_or_try_init(|| async {
                let token_endpoint = match &self.config.endpoint {
                    TokenEndpoint::Url(u) => u.clone(),
                    TokenEndpoint::Issuer(issuer) => {
                        steadfast_oauth::discover(issuer, self.timeout)
                            .await?
                            .token_endpoint
                            .ok_or_else(|| {
                                format!("{issuer}: its metadata names no token_endpoint")
                            })?
                    }
                };
                ClientCredentials::new(ClientCredentialsConfig {
                    token_endpoint,
                    client_id: self.config.client_id.clone(),
                    client_secret: self.secret.clone()?,
                    scope: self.config.scope.clone(),
                    resource: self.config.resource.clone(),
                    timeout: self.timeout,
                })
            })
            .await?;
        source.access_token().await
    }
}
