//! `[auth]` (the HTTP front as an OAuth 2.1 resource server) and `[access."…"]` (which tools,
//! prompts and resources a token's scopes or claims grant). Pure data: the front builds the
//! validator, the key cache and the policy from it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// Where a secret comes from: an environment variable or a file (never the config itself, so
/// a config file can be shared and logged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// `client_secret_env = "NAME"`.
    Env(String),
    /// `client_secret_file = "/run/secrets/…"`.
    File(PathBuf),
}

/// `introspection = { endpoint, client_id, client_secret_env | client_secret_file }`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIntrospection {
    /// The RFC 7662 introspection endpoint.
    pub endpoint: Option<String>,
    /// The gateway's client id at the authorization server.
    pub client_id: Option<String>,
    /// The environment variable holding the client secret.
    pub client_secret_env: Option<String>,
    /// The file holding the client secret.
    pub client_secret_file: Option<PathBuf>,
    /// Refuse answers without `iss` (RFC 7662 makes it optional; default false).
    pub require_iss: Option<bool>,
}

/// `[auth]` as written in the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAuth {
    /// The authorization server's issuer identifier (tokens' `iss`).
    pub issuer: Option<String>,
    /// This gateway's resource URI (RFC 8707): tokens' `aud` must name it.
    pub resource: Option<String>,
    /// The JWKS URL; discovered from the issuer's metadata when absent.
    pub jwks_uri: Option<String>,
    /// Other `aud` values accepted besides `resource` (Entra's `api://…`, a GUID).
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Require the JWT header's `typ` to be `at+jwt` (RFC 9068 §4).
    pub require_at_jwt: Option<bool>,
    /// Clock skew allowed on `exp` and `nbf`.
    #[serde(default, with = "humantime_serde")]
    pub leeway: Option<Duration>,
    /// Signing algorithms accepted (`RS256`, `ES256`, `EdDSA`).
    pub algorithms: Option<Vec<String>>,
    /// Scopes listed in the Protected Resource Metadata.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// RFC 7662 introspection for opaque (non-JWT) tokens.
    pub introspection: Option<RawIntrospection>,
    /// Bound on each request to the authorization server (discovery, JWKS, introspection).
    #[serde(default, with = "humantime_serde")]
    pub fetch_timeout: Option<Duration>,
    /// Verified tokens remembered at most (each until its `exp`, at most `cache_ttl`).
    pub cache_size: Option<usize>,
    /// The longest a verified token is remembered without being checked again.
    #[serde(default, with = "humantime_serde")]
    pub cache_ttl: Option<Duration>,
    /// Least time between two JWKS fetches caused by unknown `kid`s.
    #[serde(default, with = "humantime_serde")]
    pub jwks_refresh_interval: Option<Duration>,
    /// Age after which the cached keys are fetched again in the background (still used meanwhile).
    #[serde(default, with = "humantime_serde")]
    pub jwks_max_age: Option<Duration>,
}

/// `introspection`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Introspection {
    /// The endpoint.
    pub endpoint: String,
    /// The client id.
    pub client_id: String,
    /// Where the client secret is.
    pub secret: SecretSource,
    /// Answers without `iss` are refused.
    pub require_iss: bool,
}

/// `[auth]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    /// Tokens' `iss`.
    pub issuer: String,
    /// Tokens' `aud`; the Protected Resource Metadata's `resource`.
    pub resource: String,
    /// A configured JWKS URL (else discovered).
    pub jwks_uri: Option<String>,
    /// `aud` values accepted besides `resource`.
    pub audiences: Vec<String>,
    /// JWTs must carry `typ: at+jwt`.
    pub require_at_jwt: bool,
    /// Skew on `exp` / `nbf`.
    pub leeway: Duration,
    /// Accepted algorithms, by their JOSE names.
    pub algorithms: Vec<String>,
    /// For the metadata document.
    pub scopes_supported: Vec<String>,
    /// Opaque tokens, if configured.
    pub introspection: Option<Introspection>,
    /// Bound on each request to the authorization server.
    pub fetch_timeout: Duration,
    /// Verified tokens remembered at most.
    pub cache_size: usize,
    /// The longest a verified token is remembered.
    pub cache_ttl: Duration,
    /// Least time between two JWKS fetches caused by unknown `kid`s.
    pub jwks_refresh_interval: Duration,
    /// Age after which cached keys are refreshed in the background.
    pub jwks_max_age: Duration,
}

/// The algorithms `[auth] algorithms` may name (asymmetric only: RFC 8725 §3.1–3.2).
pub(crate) const ALGORITHMS: [&str; 3] = ["RS256", "ES256", "EdDSA"];

fn is_url(s: &str) -> bool {
    (s.starts_with("https://") || s.starts_with("http://")) && s.len() > "https://".len()
}

impl RawIntrospection {
    /// The validated table, or what it lacks.
    fn validate(&self) -> Result<Introspection, &'static str> {
        let endpoint = self.endpoint.clone().filter(|e| is_url(e));
        let client_id = self.client_id.clone().filter(|c| !c.is_empty());
        let secret = match (&self.client_secret_env, &self.client_secret_file) {
            (Some(e), None) => Some(SecretSource::Env(e.clone())),
            (None, Some(f)) => Some(SecretSource::File(f.clone())),
            _ => None,
        };
        match (endpoint, client_id, secret) {
            (None, _, _) => Err("needs `endpoint`, an http:// or https:// URL"),
            (_, None, _) => Err("needs `client_id`"),
            (_, _, None) => Err("needs one of `client_secret_env` or `client_secret_file`"),
            (Some(endpoint), Some(client_id), Some(secret)) => Ok(Introspection {
                endpoint,
                client_id,
                secret,
                require_iss: self.require_iss.unwrap_or(false),
            }),
        }
    }
}

impl RawAuth {
    /// The validated table, or every offending key (relative to `auth`) and what it must be.
    pub(crate) fn validate(&self) -> Result<AuthConfig, Vec<(&'static str, String)>> {
        let mut errors: Vec<(&'static str, String)> = Vec::new();
        let mut url = |key: &'static str, v: Option<&String>, required: bool| match v {
            Some(u) if is_url(u) => u.clone(),
            Some(_) => {
                errors.push((key, "must be an http:// or https:// URL".into()));
                String::new()
            }
            None if required => {
                errors.push((key, "missing: [auth] needs it".into()));
                String::new()
            }
            None => String::new(),
        };
        let issuer = url("issuer", self.issuer.as_ref(), true);
        let resource = url("resource", self.resource.as_ref(), true);
        let jwks_uri =
            Some(url("jwks_uri", self.jwks_uri.as_ref(), false)).filter(|u| !u.is_empty());
        for a in &self.audiences {
            if a.trim().is_empty() || a.chars().any(char::is_control) {
                errors.push((
                    "audiences",
                    format!("{a:?} must be a non-empty identifier without control characters"),
                ));
            }
        }
        if resource.contains('#') {
            errors.push(("resource", "must not have a fragment (RFC 8707 §2)".into()));
        }
        let algorithms = self
            .algorithms
            .clone()
            .unwrap_or_else(|| ALGORITHMS.iter().map(|a| (*a).to_owned()).collect());
        if algorithms.is_empty() {
            errors.push(("algorithms", "must name at least one algorithm".into()));
        }
        for a in &algorithms {
            if !ALGORITHMS.contains(&a.as_str()) {
                errors.push((
                    "algorithms",
                    format!("{a:?} is not accepted: use RS256, ES256 or EdDSA (never none or HS*)"),
                ));
            }
        }
        let leeway = self.leeway.unwrap_or(Duration::from_secs(60));
        if leeway > Duration::from_secs(300) {
            errors.push(("leeway", "must be at most 5m".into()));
        }
        let fetch_timeout = self.fetch_timeout.unwrap_or(Duration::from_secs(5));
        if fetch_timeout.is_zero() {
            errors.push(("fetch_timeout", "must be longer than 0s".into()));
        }
        let cache_size = self.cache_size.unwrap_or(10_000);
        if !(1..=1_000_000).contains(&cache_size) {
            errors.push(("cache_size", "must be 1 to 1000000".into()));
        }
        let cache_ttl = self.cache_ttl.unwrap_or(Duration::from_secs(300));
        if cache_ttl.is_zero() {
            errors.push(("cache_ttl", "must be longer than 0s".into()));
        }
        let jwks_refresh_interval = self
            .jwks_refresh_interval
            .unwrap_or(Duration::from_secs(30));
        let jwks_max_age = self.jwks_max_age.unwrap_or(Duration::from_secs(600));
        if jwks_max_age.is_zero() {
            errors.push(("jwks_max_age", "must be longer than 0s".into()));
        }
        let introspection = self.introspection.as_ref().and_then(|i| {
            i.validate()
                .map_err(|why| errors.push(("introspection", why.into())))
                .ok()
        });
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(AuthConfig {
            issuer,
            resource,
            jwks_uri,
            audiences: self.audiences.clone(),
            require_at_jwt: self.require_at_jwt.unwrap_or(false),
            leeway,
            algorithms,
            scopes_supported: self.scopes_supported.clone(),
            introspection,
            fetch_timeout,
            cache_size,
            cache_ttl,
            jwks_refresh_interval,
            jwks_max_age,
        })
    }
}

/// One `[access."<scope>"]` or `[access."claim:<name>=<value>"]` table: globs of what it grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AccessRule {
    /// Tool names (as clients see them) the grantor may list and call.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Prompt names it may list and get.
    #[serde(default)]
    pub prompts: Vec<String>,
    /// Resource URIs it may list and read.
    #[serde(default)]
    pub resources: Vec<String>,
}

/// Checks `[access]`: each key is a scope or `claim:NAME=VALUE`, each pattern a glob. Returns
/// `(table key, field, message)` for each problem.
pub(crate) fn check_access(
    access: &BTreeMap<String, AccessRule>,
) -> Vec<(String, &'static str, String)> {
    let mut errors = Vec::new();
    for (key, rule) in access {
        if key.is_empty() {
            errors.push((
                key.clone(),
                "",
                "the key must be a scope or claim:NAME=VALUE".into(),
            ));
        }
        if let Some(rest) = key.strip_prefix("claim:")
            && rest.split_once('=').is_none_or(|(n, _)| n.is_empty())
        {
            errors.push((
                key.clone(),
                "",
                "a claim rule is written \"claim:NAME=VALUE\"".into(),
            ));
        }
        for (field, patterns) in [
            ("tools", &rule.tools),
            ("prompts", &rule.prompts),
            ("resources", &rule.resources),
        ] {
            for p in patterns {
                if let Err(e) = globset::Glob::new(p) {
                    errors.push((key.clone(), field, format!("bad glob {p:?}: {e}")));
                }
            }
        }
    }
    errors
}

/// `oauth = { … }` on an HTTP upstream: the gateway's own client-credentials token for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUpstreamOAuth {
    /// The authorization server's token endpoint.
    pub token_url: Option<String>,
    /// Or its issuer: the token endpoint is discovered from its metadata.
    pub issuer: Option<String>,
    /// The gateway's client id there.
    pub client_id: Option<String>,
    /// The environment variable holding the client secret.
    pub client_secret_env: Option<String>,
    /// The file holding the client secret.
    pub client_secret_file: Option<PathBuf>,
    /// Space-separated scopes to ask for.
    pub scope: Option<String>,
    /// The upstream's resource URI (RFC 8707), sent with the token request.
    pub resource: Option<String>,
}

/// Where an upstream's token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenEndpoint {
    /// `token_url`.
    Url(String),
    /// `issuer`: discovered at the first token request.
    Issuer(String),
}

/// `oauth = { … }` on an HTTP upstream, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamOAuth {
    /// The token endpoint, or the issuer to discover it from.
    pub endpoint: TokenEndpoint,
    /// The client id.
    pub client_id: String,
    /// Where the secret is.
    pub secret: SecretSource,
    /// Scopes asked for.
    pub scope: Option<String>,
    /// The resource indicator sent.
    pub resource: Option<String>,
}

impl RawUpstreamOAuth {
    /// The validated table, or the offending key (relative to `oauth`) and what it must be.
    pub(crate) fn validate(&self) -> Result<UpstreamOAuth, (&'static str, String)> {
        let endpoint = match (&self.token_url, &self.issuer) {
            (Some(u), None) if is_url(u) => TokenEndpoint::Url(u.clone()),
            (None, Some(i)) if is_url(i) => TokenEndpoint::Issuer(i.clone()),
            (Some(_), None) => {
                return Err(("token_url", "must be an http:// or https:// URL".into()));
            }
            (None, Some(_)) => return Err(("issuer", "must be an http:// or https:// URL".into())),
            _ => {
                return Err((
                    "token_url",
                    "give one of `token_url` or `issuer` (its metadata names the token endpoint)"
                        .into(),
                ));
            }
        };
        let client_id = self
            .client_id
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or(("client_id", "missing: the gateway's client id".to_owned()))?;
        let secret = match (&self.client_secret_env, &self.client_secret_file) {
            (Some(e), None) => SecretSource::Env(e.clone()),
            (None, Some(f)) => SecretSource::File(f.clone()),
            _ => {
                return Err((
                    "client_secret_env",
                    "give one of `client_secret_env` or `client_secret_file` (never the secret itself)"
                        .into(),
                ));
            }
        };
        if let Some(r) = &self.resource
            && (!is_url(r) || r.contains('#'))
        {
            return Err((
                "resource",
                "must be an http:// or https:// URL without a fragment".into(),
            ));
        }
        Ok(UpstreamOAuth {
            endpoint,
            client_id,
            secret,
            scope: self.scope.clone(),
            resource: self.resource.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const AUTH: &str =
        "[auth]\nissuer = \"https://as.example\"\nresource = \"https://mcp.example/mcp\"\n";

    #[test]
    fn the_auth_table_is_read_with_its_defaults() {
        let c = Config::parse_toml(AUTH, "t.toml").unwrap();
        let a = c.auth.as_ref().unwrap();
        assert_eq!(a.issuer, "https://as.example");
        assert_eq!(a.resource, "https://mcp.example/mcp");
        assert_eq!(a.leeway.as_secs(), 60);
        assert_eq!(a.algorithms, ["RS256", "ES256", "EdDSA"]);
        assert!(a.introspection.is_none() && a.jwks_uri.is_none());
        assert!(Config::parse_toml("", "t.toml").unwrap().auth.is_none());
    }

    #[test]
    fn bad_auth_keys_are_named_with_their_line() {
        let err = |text: &str| Config::parse_toml(text, "t.toml").unwrap_err().to_string();
        assert_eq!(
            err("[auth]\nissuer = \"https://as.example\"\n"),
            "t.toml:1: auth.resource: missing: [auth] needs it"
        );
        assert_eq!(
            err(&format!("{AUTH}algorithms = [\"HS256\"]\n")),
            "t.toml:4: auth.algorithms: \"HS256\" is not accepted: use RS256, ES256 or EdDSA (never none or HS*)"
        );
        assert_eq!(
            err(&format!(
                "{AUTH}introspection = {{ endpoint = \"https://as/i\", client_id = \"gw\" }}\n"
            )),
            "t.toml:4: auth.introspection: needs one of `client_secret_env` or `client_secret_file`"
        );
        assert_eq!(
            err(&format!("{AUTH}jwks_uri = \"ftp://x\"\n")),
            "t.toml:4: auth.jwks_uri: must be an http:// or https:// URL"
        );
        assert!(err(&format!("{AUTH}leway = \"1s\"\n")).starts_with("t.toml:4: "));
    }

    #[test]
    fn access_tables_are_checked() {
        let c = Config::parse_toml(
            &format!("{AUTH}\n[access.\"tools:read\"]\ntools = [\"get_*\"]\n"),
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.access["tools:read"].tools, ["get_*"]);
        let e = Config::parse_toml(
            &format!("{AUTH}\n[access.\"claim:role\"]\ntools = [\"*\"]\n"),
            "t.toml",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.toml:5: access.\"claim:role\": a claim rule is written \"claim:NAME=VALUE\""
        );
        let e = Config::parse_toml(&format!("{AUTH}\n[access.w]\ntools = [\"a[\"]\n"), "t.toml")
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t.toml:6: access.w.tools: bad glob"),
            "{e}"
        );
        let e = Config::parse_toml("[access.w]\ntools = [\"*\"]\n", "t.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.toml:1: access: needs an [auth] table (access rules apply to its tokens)"
        );
    }

    #[test]
    fn upstream_oauth_is_read_and_checked() {
        let c = Config::parse_toml(
            "[upstreams.a]\nurl = \"http://a/mcp\"\noauth = { issuer = \"https://as\", client_id = \"gw\", client_secret_env = \"A_SECRET\", scope = \"x\", resource = \"http://a/mcp\" }\n",
            "t.toml",
        )
        .unwrap();
        let o = &c.upstream_oauth["a"];
        assert_eq!(
            o.endpoint,
            super::TokenEndpoint::Issuer("https://as".into())
        );
        assert_eq!(o.secret, super::SecretSource::Env("A_SECRET".into()));
        let err = |text: &str| Config::parse_toml(text, "t.toml").unwrap_err().to_string();
        assert_eq!(
            err(
                "[upstream]\nurl = \"http://a/mcp\"\noauth = { token_url = \"https://as/token\", client_id = \"gw\" }\n"
            ),
            "t.toml:3: upstream.oauth.client_secret_env: give one of `client_secret_env` or `client_secret_file` (never the secret itself)"
        );
        assert_eq!(
            err(
                "[upstream]\ncommand = \"x\"\noauth = { token_url = \"https://as/token\", client_id = \"gw\", client_secret_env = \"S\" }\n"
            ),
            "t.toml:3: upstream.oauth: only an HTTP upstream (`url`) takes `oauth`"
        );
    }
}
