//! Why a token was refused, in two voices: the operator's (every failed check named, for logs at
//! `-v`) and the client's (only what RFC 6750 §3.1 lets a resource server say).

use std::fmt;

/// A token that did not pass, naming the check that failed.
///
/// `Display` is for operators and logs; it never contains the token itself. What the client
/// may be told is [`TokenError::client_error`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a JWT (three base64url parts with a JSON header and claims), or a claim has the wrong type.
    Malformed(String),
    /// The header's `alg` is not on the allow list (`none` and HMAC never are).
    AlgorithmNotAllowed(String),
    /// No key with this `kid` in the issuer's key set, even after a refresh.
    UnknownKey(Option<String>),
    /// The signature does not verify with the key the header names.
    BadSignature,
    /// `exp` (plus the leeway) is in the past.
    Expired {
        /// The token's `exp`, seconds since the epoch.
        exp: u64,
        /// The validator's clock when it checked.
        now: u64,
    },
    /// `nbf` (minus the leeway) is in the future.
    NotYetValid {
        /// The token's `nbf`, seconds since the epoch.
        nbf: u64,
        /// The validator's clock when it checked.
        now: u64,
    },
    /// `iat` (minus the leeway) is in the future.
    IssuedInTheFuture {
        /// The token's `iat`, seconds since the epoch.
        iat: u64,
        /// The validator's clock when it checked.
        now: u64,
    },
    /// `aud` does not contain this resource (RFC 8707 / RFC 9068 §4).
    WrongAudience,
    /// `iss` is not the configured issuer.
    WrongIssuer,
    /// A claim the configuration requires is absent.
    MissingClaim(&'static str),
    /// The introspection endpoint said `active: false` (RFC 7662 §2.2).
    Inactive,
    /// The keys or the introspection endpoint could not be reached in time; the token may be fine.
    Unavailable(String),
    /// The token is valid but lacks a scope the request needs.
    InsufficientScope {
        /// The scopes the request needs (space-joined in the challenge).
        required: Vec<String>,
    },
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(why) => write!(f, "malformed token: {why}"),
            Self::AlgorithmNotAllowed(alg) => write!(f, "algorithm not allowed: {alg:?}"),
            Self::UnknownKey(Some(kid)) => {
                write!(f, "unknown key: kid {kid:?} is not in the issuer's key set")
            }
            Self::UnknownKey(None) => write!(
                f,
                "unknown key: no kid and no key in the issuer's key set verifies"
            ),
            Self::BadSignature => write!(f, "bad signature"),
            Self::Expired { exp, now } => write!(
                f,
                "expired: exp {exp} is before now {now} (leeway included)"
            ),
            Self::NotYetValid { nbf, now } => write!(
                f,
                "not yet valid: nbf {nbf} is after now {now} (leeway included)"
            ),
            Self::IssuedInTheFuture { iat, now } => write!(
                f,
                "issued in the future: iat {iat} is after now {now} (leeway included)"
            ),
            Self::WrongAudience => write!(f, "wrong audience: aud does not name this resource"),
            Self::WrongIssuer => write!(f, "wrong issuer"),
            Self::MissingClaim(claim) => write!(f, "missing claim: {claim}"),
            Self::Inactive => write!(
                f,
                "inactive: the introspection endpoint reports the token inactive"
            ),
            Self::Unavailable(why) => write!(f, "keys unavailable: {why}"),
            Self::InsufficientScope { required } => {
                write!(f, "insufficient scope: needs {:?}", required.join(" "))
            }
        }
    }
}

impl std::error::Error for TokenError {}

impl TokenError {
    /// What the client may be told (RFC 6750 §3.1): `invalid_token` for every failed check,
    /// `insufficient_scope` with the needed scope, and a retryable 503 when keys are unreachable.
    ///
    /// ```
    /// use steadfast_oauth::{ClientError, TokenError};
    /// let e = TokenError::Expired { exp: 1, now: 100 };
    /// assert_eq!(e.client_error(), ClientError::InvalidToken);
    /// assert_eq!(e.client_error().status(), 401);
    /// ```
    pub fn client_error(&self) -> ClientError {
        match self {
            Self::InsufficientScope { required } => ClientError::InsufficientScope {
                scope: required.join(" "),
            },
            Self::Unavailable(_) => ClientError::TemporarilyUnavailable,
            _ => ClientError::InvalidToken,
        }
    }
}

/// The part of a refusal a client may see (RFC 6750 §3.1 error codes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// `invalid_token`: 401, whatever the check was (the client is not told which).
    InvalidToken,
    /// `insufficient_scope`: 403 with the scope that would be enough.
    InsufficientScope {
        /// Space-separated scopes the request needs.
        scope: String,
    },
    /// The server could not check the token now (keys unreachable): 503, retry later.
    TemporarilyUnavailable,
}

impl ClientError {
    /// The HTTP status the response should carry.
    pub fn status(&self) -> u16 {
        match self {
            Self::InvalidToken => 401,
            Self::InsufficientScope { .. } => 403,
            Self::TemporarilyUnavailable => 503,
        }
    }

    /// The RFC 6750 `error` code, if the response carries one.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Self::InvalidToken => Some("invalid_token"),
            Self::InsufficientScope { .. } => Some("insufficient_scope"),
            Self::TemporarilyUnavailable => None,
        }
    }
}
