//! Which tools, prompts and resources a client may see and call, by scope or claim.
//!
//! Configuration is a table of rules, keyed by what grants them:
//!
//! ```toml
//! [access."tools:write"]            # holders of the scope tools:write
//! tools = ["*_create*", "memory_*"]
//! [access."claim:role=admin"]       # tokens whose `role` claim is (or contains) "admin"
//! tools = ["*"]
//! prompts = ["*"]
//! resources = ["*"]
//! ```
//!
//! Everything not granted by some rule is denied; the globs are `globset` globs.

use std::collections::BTreeMap;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_json::Value;

use crate::Claims;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    prompts: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
}

#[derive(Debug, Clone)]
enum Grantor {
    Scope(String),
    Claim { name: String, value: String },
}

impl Grantor {
    fn parse(key: &str) -> Result<Self, String> {
        let Some(rest) = key.strip_prefix("claim:") else {
            return Ok(Self::Scope(key.to_owned()));
        };
        match rest.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok(Self::Claim {
                name: name.into(),
                value: value.into(),
            }),
            _ => Err(format!(
                "access.{key:?}: a claim rule is written \"claim:NAME=VALUE\""
            )),
        }
    }

    fn grants(&self, claims: &Claims) -> bool {
        match self {
            Self::Scope(scope) => claims.has_scope(scope),
            Self::Claim { name, value } => match claims.claim(name) {
                Some(Value::String(s)) => s == *value,
                Some(Value::Array(items)) => items.iter().any(|v| v.as_str() == Some(value)),
                Some(Value::Bool(b)) => b.to_string() == *value,
                Some(Value::Number(n)) => n.to_string() == *value,
                _ => false,
            },
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    grantor: Grantor,
    tools: GlobSet,
    prompts: GlobSet,
    resources: GlobSet,
}

/// An access policy: `[access."<scope>"]` or `[access."claim:<name>=<value>"]` tables of globs.
///
/// ```
/// use steadfast_oauth::{AccessPolicy, Claims};
/// let policy: AccessPolicy = toml::from_str(r#"
///     ["tools:write"]
///     tools = ["*_create*", "memory_*"]
/// "#).unwrap();
/// let writer: Claims = serde_json::from_str(r#"{"scope": "tools:write"}"#).unwrap();
/// assert!(policy.allows_tool(&writer, "issue_create"));
/// assert!(!policy.allows_tool(&writer, "shell_exec"));
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "BTreeMap<String, RawRule>")]
pub struct AccessPolicy {
    rules: Vec<Rule>,
}

fn globs(key: &str, field: &str, patterns: &[String]) -> Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for p in patterns {
        builder
            .add(Glob::new(p).map_err(|e| format!("access.{key:?}.{field}: bad glob {p:?}: {e}"))?);
    }
    builder
        .build()
        .map_err(|e| format!("access.{key:?}.{field}: {e}"))
}

impl TryFrom<BTreeMap<String, RawRule>> for AccessPolicy {
    type Error = String;

    fn try_from(raw: BTreeMap<String, RawRule>) -> Result<Self, String> {
        let rules = raw
            .iter()
            .map(|(key, r)| {
                Ok(Rule {
                    grantor: Grantor::parse(key)?,
                    tools: globs(key, "tools", &r.tools)?,
                    prompts: globs(key, "prompts", &r.prompts)?,
                    resources: globs(key, "resources", &r.resources)?,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { rules })
    }
}

impl AccessPolicy {
    fn allows(&self, claims: &Claims, name: &str, set: impl Fn(&Rule) -> &GlobSet) -> bool {
        self.rules
            .iter()
            .any(|r| r.grantor.grants(claims) && set(r).is_match(name))
    }

    /// Whether the token may see and call the tool `name`.
    pub fn allows_tool(&self, claims: &Claims, name: &str) -> bool {
        self.allows(claims, name, |r| &r.tools)
    }

    /// Whether the token may see and get the prompt `name`.
    pub fn allows_prompt(&self, claims: &Claims, name: &str) -> bool {
        self.allows(claims, name, |r| &r.prompts)
    }

    /// Whether the token may see and read the resource `uri`.
    pub fn allows_resource(&self, claims: &Claims, uri: &str) -> bool {
        self.allows(claims, uri, |r| &r.resources)
    }

    /// The scopes that would grant the tool `name` (for an `insufficient_scope` challenge).
    pub fn scopes_for_tool(&self, name: &str) -> Vec<&str> {
        self.rules
            .iter()
            .filter_map(|r| match &r.grantor {
                Grantor::Scope(s) if r.tools.is_match(name) => Some(s.as_str()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> AccessPolicy {
        toml::from_str(
            r#"
            ["tools:read"]
            tools = ["*_get*", "*_list*", "*_search*"]
            resources = ["file:///docs/**"]
            ["tools:write"]
            tools = ["*_create*", "memory_*"]
            ["claim:role=admin"]
            tools = ["*"]
            prompts = ["*"]
            ["claim:groups=ops"]
            prompts = ["incident_*"]
            "#,
        )
        .unwrap()
    }

    fn claims(json: &str) -> Claims {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn scopes_grant_their_globs_only() {
        let p = policy();
        let reader = claims(r#"{"scope": "tools:read"}"#);
        assert!(p.allows_tool(&reader, "issue_get"));
        assert!(!p.allows_tool(&reader, "issue_create"));
        assert!(p.allows_resource(&reader, "file:///docs/a/b.md"));
        assert!(!p.allows_resource(&reader, "file:///etc/passwd"));
        assert!(!p.allows_prompt(&reader, "anything"));
        let both = claims(r#"{"scope": "tools:read tools:write"}"#);
        assert!(p.allows_tool(&both, "issue_create") && p.allows_tool(&both, "memory_store"));
        assert!(
            !p.allows_tool(&claims("{}"), "issue_get"),
            "no scope, no access"
        );
    }

    #[test]
    fn claims_grant_by_string_or_membership() {
        let p = policy();
        assert!(p.allows_tool(&claims(r#"{"role": "admin"}"#), "shell_exec"));
        assert!(!p.allows_tool(&claims(r#"{"role": "administrator"}"#), "shell_exec"));
        let ops = claims(r#"{"groups": ["dev", "ops"]}"#);
        assert!(p.allows_prompt(&ops, "incident_review"));
        assert!(!p.allows_prompt(&ops, "release_notes"));
        assert!(!p.allows_tool(&ops, "issue_get"));
    }

    #[test]
    fn the_scopes_that_would_grant_a_tool_are_listed() {
        assert_eq!(policy().scopes_for_tool("issue_create"), ["tools:write"]);
        assert!(policy().scopes_for_tool("shell_exec").is_empty());
    }

    #[test]
    fn bad_config_names_the_rule_and_field() {
        let err = toml::from_str::<AccessPolicy>("[\"x\"]\ntools = [\"a[\"]")
            .unwrap_err()
            .to_string();
        assert!(err.contains(r#"access."x".tools: bad glob"#), "{err}");
        let err = toml::from_str::<AccessPolicy>("[\"claim:role\"]\ntools = []")
            .unwrap_err()
            .to_string();
        assert!(err.contains("claim:NAME=VALUE"), "{err}");
        let err = toml::from_str::<AccessPolicy>("[\"x\"]\ntool = []")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field"), "{err}");
    }
}
