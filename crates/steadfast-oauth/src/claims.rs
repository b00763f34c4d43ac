//! The claims of a validated access token (RFC 9068 §2.2 names; introspection uses the same).

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// What a validated token says about its holder: subject, client, scopes, and every other claim.
///
/// Read as real issuers write them: `scope` (a space-separated string, RFC 8693 §4.2) and
/// `scp` (a list, as Entra and Okta issue; or a string) may both be present — the scopes are
/// their union, `scope`'s first; `exp`/`nbf`/`iat` may be fractional (RFC 7519 NumericDate):
/// `exp` is rounded down and `nbf`/`iat` up, so a rounding never lengthens a token's life.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "RawClaims")]
pub struct Claims {
    /// `iss`: who issued it.
    pub iss: Option<String>,
    /// `sub`: the subject (user or, for client credentials, the client).
    pub sub: Option<String>,
    /// `aud`: one string or a list in the token; always a list here.
    pub aud: Vec<String>,
    /// `exp`, seconds since the epoch (rounded down).
    pub exp: Option<u64>,
    /// `nbf`, seconds since the epoch (rounded up).
    pub nbf: Option<u64>,
    /// `iat`, seconds since the epoch (rounded up).
    pub iat: Option<u64>,
    /// `client_id` (RFC 9068 §2.2, RFC 7662 §2.2).
    pub client_id: Option<String>,
    /// `scope` and `scp`, united (`scope`'s first, no duplicates).
    pub scope: Vec<String>,
    /// Every other claim, for claim-based access rules.
    pub extra: Map<String, Value>,
}

/// The claims as written; [`Claims`] is built from them.
#[derive(Deserialize)]
struct RawClaims {
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default, deserialize_with = "one_or_many")]
    aud: Vec<String>,
    #[serde(default, deserialize_with = "numeric_date")]
    exp: Option<f64>,
    #[serde(default, deserialize_with = "numeric_date")]
    nbf: Option<f64>,
    #[serde(default, deserialize_with = "numeric_date")]
    iat: Option<f64>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default, deserialize_with = "scopes")]
    scope: Vec<String>,
    #[serde(default, deserialize_with = "scopes")]
    scp: Vec<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl From<RawClaims> for Claims {
    fn from(raw: RawClaims) -> Self {
        let mut scope = raw.scope;
        for s in raw.scp {
            if !scope.contains(&s) {
                scope.push(s);
            }
        }
        // (Casts saturate; `numeric_date` refused negatives and non-finite values.)
        Self {
            iss: raw.iss,
            sub: raw.sub,
            aud: raw.aud,
            exp: raw.exp.map(|t| t.floor() as u64),
            nbf: raw.nbf.map(|t| t.ceil() as u64),
            iat: raw.iat.map(|t| t.ceil() as u64),
            client_id: raw.client_id,
            scope,
            extra: raw.extra,
        }
    }
}

impl Claims {
    /// Whether the token carries `scope`.
    ///
    /// ```
    /// let claims: steadfast_oauth::Claims =
    ///     serde_json::from_str(r#"{"scope": "tools:read tools:write"}"#).unwrap();
    /// assert!(claims.has_scope("tools:write"));
    /// assert!(!claims.has_scope("admin"));
    /// ```
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scope.iter().any(|s| s == scope)
    }

    /// `Ok` when every scope in `required` is granted; otherwise the refusal naming them all,
    /// which becomes a 403 `insufficient_scope` challenge.
    pub fn require_scopes(&self, required: &[&str]) -> Result<(), crate::TokenError> {
        if required.iter().all(|s| self.has_scope(s)) {
            return Ok(());
        }
        Err(crate::TokenError::InsufficientScope {
            required: required.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// Who holds the token, for binding sessions and keying limits: `sub` (RFC 9068 §2.2
    /// requires it), else `client_id`, else `azp` (OpenID's authorized party, which Keycloak
    /// and Auth0 put in client-credentials tokens); `None` when the token names none of them
    /// (or only empty ones): such a token cannot be told from another client's.
    ///
    /// ```
    /// let c: steadfast_oauth::Claims = serde_json::from_str(r#"{"azp": "svc-a"}"#).unwrap();
    /// assert_eq!(c.subject(), Some("svc-a"));
    /// let none: steadfast_oauth::Claims = serde_json::from_str(r#"{"sub": ""}"#).unwrap();
    /// assert_eq!(none.subject(), None);
    /// ```
    pub fn subject(&self) -> Option<&str> {
        [self.sub.as_deref(), self.client_id.as_deref()]
            .into_iter()
            .flatten()
            .chain(self.extra.get("azp").and_then(Value::as_str))
            .find(|s| !s.is_empty())
    }

    /// The value of a claim by name, whether a named field or one of the others. A name that
    /// is no top-level claim is read as a dotted path into nested objects (Keycloak's
    /// `realm_access.roles`, `resource_access.my.client.roles`: keys may hold dots themselves,
    /// every split is tried).
    ///
    /// ```
    /// let c: steadfast_oauth::Claims = serde_json::from_str(
    ///     r#"{"resource_access": {"mcp.gw": {"roles": ["reader"]}}}"#).unwrap();
    /// assert_eq!(c.claim("resource_access.mcp.gw.roles").unwrap()[0], "reader");
    /// ```
    pub fn claim(&self, name: &str) -> Option<Value> {
        let s = |v: &Option<String>| v.clone().map(Value::String);
        match name {
            "iss" => s(&self.iss),
            "sub" => s(&self.sub),
            "client_id" => s(&self.client_id),
            "aud" => Some(Value::from(self.aud.clone())),
            "scope" => Some(Value::String(self.scope.join(" "))),
            _ => nested(&self.extra, name, 0).cloned(),
        }
    }
}

/// How deep a dotted claim path is followed at most (tokens' nesting is shallow).
const MAX_CLAIM_DEPTH: usize = 8;

/// The value at `path` in `object`: the key `path` itself, else some key that is a prefix of
/// it up to a dot, followed into its object.
fn nested<'a>(object: &'a Map<String, Value>, path: &str, depth: usize) -> Option<&'a Value> {
    if let Some(v) = object.get(path) {
        return Some(v);
    }
    if depth >= MAX_CLAIM_DEPTH {
        return None;
    }
    path.match_indices('.').find_map(|(i, _)| {
        let inner = object.get(&path[..i])?.as_object()?;
        nested(inner, &path[i + 1..], depth + 1)
    })
}

/// A NumericDate (RFC 7519 §2): a non-negative number of seconds, fractions allowed.
fn numeric_date<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    match Option::<f64>::deserialize(d)? {
        Some(t) if !t.is_finite() || t < 0.0 => Err(serde::de::Error::custom(
            "a NumericDate must be a non-negative number of seconds",
        )),
        t => Ok(t),
    }
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => Vec::new(),
        Some(OneOrMany::One(s)) => vec![s],
        Some(OneOrMany::Many(v)) => v,
    })
}

fn scopes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Scopes {
        Spaced(String),
        List(Vec<String>),
    }
    Ok(match Option::<Scopes>::deserialize(d)? {
        None => Vec::new(),
        Some(Scopes::Spaced(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(Scopes::List(v)) => v,
    })
}
