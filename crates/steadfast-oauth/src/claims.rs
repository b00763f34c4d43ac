//! The claims of a validated access token (RFC 9068 §2.2 names; introspection uses the same).

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// What a validated token says about its holder: subject, client, scopes, and every other claim.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Claims {
    /// `iss`: who issued it.
    #[serde(default)]
    pub iss: Option<String>,
    /// `sub`: the subject (user or, for client credentials, the client).
    #[serde(default)]
    pub sub: Option<String>,
    /// `aud`: one string or a list in the token; always a list here.
    #[serde(default, deserialize_with = "one_or_many")]
    pub aud: Vec<String>,
    /// `exp`, seconds since the epoch.
    #[serde(default)]
    pub exp: Option<u64>,
    /// `nbf`, seconds since the epoch.
    #[serde(default)]
    pub nbf: Option<u64>,
    /// `iat`, seconds since the epoch.
    #[serde(default)]
    pub iat: Option<u64>,
    /// `client_id` (RFC 9068 §2.2, RFC 7662 §2.2).
    #[serde(default)]
    pub client_id: Option<String>,
    /// `scope` (space-separated string, RFC 8693 §4.2) or `scp` (a list, as Entra and Okta issue).
    #[serde(default, alias = "scp", deserialize_with = "scopes")]
    pub scope: Vec<String>,
    /// Every other claim, for claim-based access rules.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
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

    /// The value of a claim by name, whether a named field or one of the others.
    pub fn claim(&self, name: &str) -> Option<Value> {
        let s = |v: &Option<String>| v.clone().map(Value::String);
        match name {
            "iss" => s(&self.iss),
            "sub" => s(&self.sub),
            "client_id" => s(&self.client_id),
            "aud" => Some(Value::from(self.aud.clone())),
            "scope" => Some(Value::String(self.scope.join(" "))),
            _ => self.extra.get(name).cloned(),
        }
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
