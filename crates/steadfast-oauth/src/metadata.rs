//! Protected Resource Metadata (RFC 9728) and the `WWW-Authenticate` challenges that point
//! clients to it (RFC 9728 §5.1, RFC 6750 §3).

use serde::{Deserialize, Serialize};

use crate::ClientError;

/// The document served at `/.well-known/oauth-protected-resource` (RFC 9728 §2).
///
/// ```
/// use steadfast_oauth::ProtectedResourceMetadata;
/// let meta = ProtectedResourceMetadata::new("https://mcp.example/mcp")
///     .authorization_server("https://as.example")
///     .scopes(["tools:read", "tools:write"]);
/// assert_eq!(meta.well_known_url(), "https://mcp.example/.well-known/oauth-protected-resource/mcp");
/// let json = serde_json::to_value(&meta).unwrap();
/// assert_eq!(json["bearer_methods_supported"][0], "header");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedResourceMetadata {
    /// The resource identifier (the URI tokens must name as audience).
    pub resource: String,
    /// Issuers of tokens this resource accepts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorization_servers: Vec<String>,
    /// Scopes used in authorization requests for this resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    /// How tokens may be sent: only `header` here (RFC 6750 §2.1; MCP forbids query strings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bearer_methods_supported: Vec<String>,
    /// Human-readable documentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_documentation: Option<String>,
}

impl ProtectedResourceMetadata {
    /// Metadata for `resource`, tokens in the `Authorization` header only.
    pub fn new(resource: impl Into<String>) -> Self {
        Self {
            resource: resource.into(),
            authorization_servers: Vec::new(),
            scopes_supported: Vec::new(),
            bearer_methods_supported: vec!["header".into()],
            resource_documentation: None,
        }
    }

    /// Add an authorization server (its issuer identifier).
    pub fn authorization_server(mut self, issuer: impl Into<String>) -> Self {
        self.authorization_servers.push(issuer.into());
        self
    }

    /// Set the supported scopes.
    pub fn scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes_supported = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Where this document is served: RFC 9728 §3.1 inserts the well-known segment between the
    /// host and the resource's path.
    pub fn well_known_url(&self) -> String {
        let r = self.resource.trim_end_matches('/');
        match r
            .find("://")
            .and_then(|i| r[i + 3..].find('/').map(|j| i + 3 + j))
        {
            Some(split) => format!(
                "{}/.well-known/oauth-protected-resource{}",
                &r[..split],
                &r[split..]
            ),
            None => format!("{r}/.well-known/oauth-protected-resource"),
        }
    }

    /// The path part of [`Self::well_known_url`], for routing.
    pub fn well_known_path(&self) -> String {
        let url = self.well_known_url();
        let after_scheme = url.find("://").map_or(0, |i| i + 3);
        url[after_scheme..]
            .find('/')
            .map_or("/".into(), |i| url[after_scheme + i..].to_string())
    }
}

fn quoted(value: &str) -> String {
    // RFC 9110 §5.6.4 quoted-string; control characters cannot be escaped, so they are dropped.
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars().filter(|c| !c.is_control()) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The 401 challenge without an error code, for a request with no token (RFC 6750 §3.1, RFC
/// 9728 §5.1): `Bearer resource_metadata="…"`.
///
/// ```
/// assert_eq!(
///     steadfast_oauth::challenge_401("https://mcp.example/.well-known/oauth-protected-resource/mcp"),
///     r#"Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp""#
/// );
/// ```
pub fn challenge_401(resource_metadata: &str) -> String {
    format!("Bearer resource_metadata={}", quoted(resource_metadata))
}

/// The 403 challenge: `Bearer error="insufficient_scope", scope="…", resource_metadata="…"`.
pub fn challenge_403(scope: &str, resource_metadata: &str) -> String {
    format!(
        "Bearer error=\"insufficient_scope\", scope={}, resource_metadata={}",
        quoted(scope),
        quoted(resource_metadata)
    )
}

/// The `WWW-Authenticate` value for a refusal: `invalid_token` (401), `insufficient_scope`
/// (403) or none (503, no challenge).
///
/// ```
/// use steadfast_oauth::{ClientError, challenge_for};
/// let h = challenge_for(&ClientError::InvalidToken, "https://m.example/.well-known/oauth-protected-resource");
/// assert_eq!(h.unwrap(), r#"Bearer error="invalid_token", resource_metadata="https://m.example/.well-known/oauth-protected-resource""#);
/// ```
pub fn challenge_for(error: &ClientError, resource_metadata: &str) -> Option<String> {
    match error {
        ClientError::InvalidToken => Some(format!(
            "Bearer error=\"invalid_token\", resource_metadata={}",
            quoted(resource_metadata)
        )),
        ClientError::InsufficientScope { scope } => Some(challenge_403(scope, resource_metadata)),
        ClientError::TemporarilyUnavailable => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_paths_follow_rfc_9728_section_3_1() {
        let at = |r: &str| ProtectedResourceMetadata::new(r);
        assert_eq!(
            at("https://m.example").well_known_url(),
            "https://m.example/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            at("https://m.example/").well_known_path(),
            "/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            at("https://m.example:8443/a/mcp").well_known_path(),
            "/.well-known/oauth-protected-resource/a/mcp"
        );
    }

    #[test]
    fn challenges_quote_and_escape() {
        assert_eq!(
            challenge_403("tools:write", "https://m/x\"y"),
            r#"Bearer error="insufficient_scope", scope="tools:write", resource_metadata="https://m/x\"y""#
        );
        assert_eq!(challenge_401("a\r\nb"), r#"Bearer resource_metadata="ab""#);
        assert_eq!(
            challenge_for(&ClientError::TemporarilyUnavailable, "x"),
            None
        );
    }

    #[test]
    fn metadata_round_trips_and_omits_empty_fields() {
        let meta = ProtectedResourceMetadata::new("https://m/mcp");
        let json = serde_json::to_string(&meta).unwrap();
        assert_eq!(
            json,
            r#"{"resource":"https://m/mcp","bearer_methods_supported":["header"]}"#
        );
        assert_eq!(
            serde_json::from_str::<ProtectedResourceMetadata>(&json).unwrap(),
            meta
        );
    }
}
