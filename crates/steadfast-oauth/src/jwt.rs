//! JWT access-token validation (RFC 9068 profile, RFC 8725 best practices).
//!
//! The header is parsed here, before any key is touched, so the algorithm decision is ours and
//! not the token's: only the allow-listed asymmetric algorithms pass, `none` and every HMAC
//! algorithm are refused by name, and a key is used only with the algorithm family it was
//! published for (a public key never becomes an HMAC secret). `jsonwebtoken` then verifies the
//! signature; issuer, audience and times are checked here against an injectable clock.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use crate::jwks::{Key, KeySource};
use crate::{Claims, TokenError};

/// Longest token accepted; real access tokens are a few KiB.
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// The asymmetric algorithms a validator may allow. HMAC and `none` are not representable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SigningAlg {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// ECDSA P-256 with SHA-256.
    Es256,
    /// Ed25519.
    EdDsa,
}

impl SigningAlg {
    fn from_header(alg: &str) -> Option<Self> {
        match alg {
            "RS256" => Some(Self::Rs256),
            "ES256" => Some(Self::Es256),
            "EdDSA" => Some(Self::EdDsa),
            _ => None,
        }
    }

    fn jwt(self) -> Algorithm {
        match self {
            Self::Rs256 => Algorithm::RS256,
            Self::Es256 => Algorithm::ES256,
            Self::EdDsa => Algorithm::EdDSA,
        }
    }
}

/// What a validator checks: issuer, audience (this resource's URI), leeway and algorithms.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    issuer: String,
    /// `aud` must name one of these (the resource's URI first).
    audiences: Vec<String>,
    leeway: Duration,
    algorithms: Vec<SigningAlg>,
    require_at_jwt: bool,
}

impl JwtConfig {
    /// Tokens from `issuer` for the resource `audience`; leeway 60 s; RS256, ES256 and EdDSA.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            audiences: vec![audience.into()],
            leeway: Duration::from_secs(60),
            algorithms: vec![SigningAlg::Rs256, SigningAlg::Es256, SigningAlg::EdDsa],
            require_at_jwt: false,
        }
    }

    /// Also accept tokens whose `aud` names one of `audiences`: identifiers that are not the
    /// resource's URL, as some issuers write them (Entra's `api://…` application ID URI, or the
    /// application's GUID).
    pub fn also_audiences<S: Into<String>>(
        mut self,
        audiences: impl IntoIterator<Item = S>,
    ) -> Self {
        self.audiences.extend(audiences.into_iter().map(Into::into));
        self
    }

    /// Clock skew tolerated on `exp`, `nbf` and `iat`.
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// Narrow the allowed algorithms (an empty list refuses every token).
    pub fn algorithms(mut self, algorithms: impl IntoIterator<Item = SigningAlg>) -> Self {
        self.algorithms = algorithms.into_iter().collect();
        self
    }

    /// Require the header's `typ` to be `at+jwt` (RFC 9068 §4), which keeps ID tokens and other
    /// JWTs from the same issuer out. Off by default: several issuers still send `JWT`.
    pub fn require_access_token_typ(mut self, require: bool) -> Self {
        self.require_at_jwt = require;
        self
    }

    /// The configured issuer.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }
}

type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Validates JWT access tokens against a key source.
///
/// ```
/// # async fn demo(jwks: steadfast_oauth::Jwks) {
/// use steadfast_oauth::{JwtConfig, JwtValidator};
/// let validator = JwtValidator::new(JwtConfig::new("https://as.example", "https://mcp.example/mcp"), jwks);
/// match validator.validate("eyJ...").await {
///     Ok(claims) => println!("subject {:?}", claims.sub),
///     Err(e) => println!("refused: {e}; the client sees {:?}", e.client_error()),
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct JwtValidator {
    config: JwtConfig,
    keys: KeySource,
    now: Clock,
}

impl std::fmt::Debug for JwtValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtValidator")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
pub(crate) struct Header {
    pub(crate) alg: String,
    #[serde(default)]
    pub(crate) kid: Option<String>,
    #[serde(default)]
    typ: Option<String>,
}

impl JwtValidator {
    /// A validator using `keys` (a fixed [`crate::KeySet`] or a remote [`crate::Jwks`]).
    pub fn new(config: JwtConfig, keys: impl Into<KeySource>) -> Self {
        crate::install_crypto_provider();
        let now: Clock = Arc::new(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
        Self {
            config,
            keys: keys.into(),
            now,
        }
    }

    /// Replace the wall clock (seconds since the epoch), for tests and replays.
    pub fn with_clock(mut self, now: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        self.now = Arc::new(now);
        self
    }

    /// The configuration this validator checks against.
    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// Verify `token`'s signature and claims; `Ok` carries the claims.
    pub async fn validate(&self, token: &str) -> Result<Claims, TokenError> {
        let (alg, kid) = self.check_header(token)?;
        let keys = self.keys.keys_for(kid.as_deref()).await?;
        let claims = verify_with(token, alg, &keys)?;
        self.check_claims(&claims)?;
        Ok(claims)
    }

    fn check_header(&self, token: &str) -> Result<(SigningAlg, Option<String>), TokenError> {
        let header = parse_header(token)?;
        if self.config.require_at_jwt
            && !header.typ.as_deref().is_some_and(|t| {
                t.eq_ignore_ascii_case("at+jwt") || t.eq_ignore_ascii_case("application/at+jwt")
            })
        {
            return Err(TokenError::Malformed(
                "typ is not at+jwt (RFC 9068 §4)".into(),
            ));
        }
        let alg = SigningAlg::from_header(&header.alg)
            .filter(|a| self.config.algorithms.contains(a))
            .ok_or_else(|| {
                TokenError::AlgorithmNotAllowed(header.alg.chars().take(32).collect())
            })?;
        Ok((alg, header.kid))
    }

    fn check_claims(&self, claims: &Claims) -> Result<(), TokenError> {
        if claims.iss.as_deref() != Some(self.config.issuer.as_str()) {
            return Err(TokenError::WrongIssuer);
        }
        if !claims.aud.iter().any(|a| self.config.audiences.contains(a)) {
            return Err(TokenError::WrongAudience);
        }
        let now = (self.now)();
        let leeway = self.config.leeway.as_secs();
        let exp = claims.exp.ok_or(TokenError::MissingClaim("exp"))?;
        if exp.saturating_add(leeway) <= now {
            return Err(TokenError::Expired { exp, now });
        }
        if let Some(nbf) = claims.nbf
            && nbf > now.saturating_add(leeway)
        {
            return Err(TokenError::NotYetValid { nbf, now });
        }
        // A token issued in the future was minted by a clock (or a forger) not to be trusted
        // (RFC 7519 §4.1.6 leaves the check to the recipient; RFC 9068 §4 asks for it).
        if let Some(iat) = claims.iat
            && iat > now.saturating_add(leeway)
        {
            return Err(TokenError::IssuedInTheFuture { iat, now });
        }
        Ok(())
    }
}

/// Parse a compact JWS header without trusting anything in it yet.
pub(crate) fn parse_header(token: &str) -> Result<Header, TokenError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::Malformed(format!(
            "longer than {MAX_TOKEN_LEN} bytes"
        )));
    }
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed(
            "not three dot-separated parts".into(),
        ));
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| TokenError::Malformed("header is not base64url".into()))?;
    serde_json::from_slice(&bytes)
        .map_err(|_| TokenError::Malformed("header is not a JSON object with alg".into()))
}

fn verify_with(token: &str, alg: SigningAlg, keys: &[Arc<Key>]) -> Result<Claims, TokenError> {
    let mut validation = Validation::new(alg.jwt());
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let mut last = TokenError::UnknownKey(None);
    for key in keys.iter().filter(|k| k.accepts(alg.jwt())) {
        match jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation) {
            Ok(data) => return Ok(data.claims),
            Err(e) => last = map_error(e),
        }
    }
    Err(last)
}

fn map_error(e: jsonwebtoken::errors::Error) -> TokenError {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidSignature | K::InvalidEcdsaKey | K::InvalidEddsaKey | K::InvalidRsaKey(_) => {
            TokenError::BadSignature
        }
        K::InvalidAlgorithm | K::InvalidAlgorithmName | K::UnsupportedAlgorithm => {
            TokenError::AlgorithmNotAllowed("key and algorithm do not match".into())
        }
        K::Json(err) => TokenError::Malformed(format!("claims: {err}")),
        other => TokenError::Malformed(format!("{other:?}")),
    }
}
