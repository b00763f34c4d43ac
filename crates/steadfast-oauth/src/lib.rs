//! OAuth 2.1 resource-server building blocks for Steadfast's HTTP front.
//!
//! MCP's authorization spec makes a remote MCP server an OAuth resource server. This crate holds
//! the pieces that do not depend on the HTTP server itself, so the gateway can wire them in:
//!
//! - [`JwtValidator`]: JWT access tokens (issuer, audience, `exp`/`nbf` with leeway, an
//!   allow list of asymmetric algorithms) against a [`KeySet`] or a cached remote [`Jwks`];
//! - [`Introspector`]: opaque tokens by RFC 7662 introspection, cached until `exp`;
//! - [`TokenError`]: the failed check for the operator, [`ClientError`] for the client;
//! - [`ProtectedResourceMetadata`] (RFC 9728) and the `WWW-Authenticate` challenges
//!   ([`challenge_401`], [`challenge_403`], [`challenge_for`]);
//! - [`ClientCredentials`]: the gateway's own tokens for upstreams (RFC 6749 §4.4 + RFC 8707);
//! - [`AccessPolicy`]: which tools, prompts and resources a token's scopes or claims grant.
//!
//! The gateway's HTTP front uses them for `[auth]`, `[access]` and upstream `oauth`
//! (`docs/auth.md`).
//!
//! ```
//! use steadfast_oauth::{JwtConfig, JwtValidator, KeySet, TokenError};
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let keys: jsonwebtoken::jwk::JwkSet = serde_json::from_str(r#"{"keys": []}"#).unwrap();
//! let validator = JwtValidator::new(
//!     JwtConfig::new("https://as.example", "https://mcp.example/mcp"),
//!     KeySet::new(&keys),
//! );
//! // `alg: none` is refused before any key is looked up.
//! let none = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.";
//! assert_eq!(validator.validate(none).await, Err(TokenError::AlgorithmNotAllowed("none".into())));
//! # }
//! ```

mod claims;
mod client_credentials;
mod error;
mod http;
mod introspect;
mod jwks;
mod jwt;
mod metadata;
mod policy;
mod secret;

pub use claims::Claims;
pub use client_credentials::{
    ClientCredentials, ClientCredentialsConfig, TokenFetchFn, TokenResponse,
};
pub use error::{ClientError, TokenError};
pub use http::{HttpJwksFetcher, ServerMetadata, discover, discovery_urls};
pub use introspect::{IntrospectFn, Introspector};
pub use jwks::{BoxFuture, FetchJwks, Jwks, JwksOptions, KeySet, KeySource};
pub use jwt::{JwtConfig, JwtValidator, SigningAlg};
pub use metadata::{ProtectedResourceMetadata, challenge_401, challenge_403, challenge_for};
pub use policy::AccessPolicy;
pub use secret::Secret;

/// Select the pure-Rust crypto backend for `jsonwebtoken` explicitly, so the process does not
/// panic if another crate in the build also enables the `aws_lc_rs` backend.
pub(crate) fn install_crypto_provider() {
    let _ = jsonwebtoken::crypto::CryptoProvider::install_default(
        &jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER,
    );
}
