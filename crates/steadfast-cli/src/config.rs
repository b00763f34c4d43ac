//! The proxy's configuration: one TOML file (or a Claude Desktop / Cursor `mcpServers` JSON
//! file), validated when loaded, with every error reported as `file:line: key: constraint`.
//!
//! ```toml
//! [upstream]                      # or: url = "http://…/mcp", headers = { Authorization = "…" }
//!                                 # (https:// needs the `https` feature)
//! command = "python3"
//! args = ["server.py"]
//! env = { API_BASE = "https://example.com" }
//!
//! [proxy]
//! health_tool = "steadfast_health"   # opt in to the health tool
//! reconnect_wait = "10s"             # how long a call waits for a restarting upstream
//! connect = { max_attempts = 3, base_delay = "500ms", max_delay = "5s" }
//! restart = { max_attempts = 10, base_delay = "500ms", max_delay = "30s" }
//!
//! [defaults]                         # every tool
//! retry = { max_attempts = 3, base_delay = "250ms", attempt_timeout = "30s", max_elapsed = "2m" }
//! attempt_max = "5m"                 # hard cap per attempt, progress or not
//! retry_on_is_error = "transient"    # never | transient | always
//! breaker = { failure_threshold = 5, reset_timeout = "30s" }   # or: breaker = false
//!
//! [budget]                           # one retry budget for the upstream
//! retry_ratio = 0.2
//!
//! [tools."search_*"]                 # by name or glob; exact names win over globs
//! retry = { max_attempts = 5 }
//!
//! [tools."db_*"]
//! dependency = "postgres"            # one breaker for every tool of the dependency
//!
//! [tools.send_email]
//! retry_ambiguous = false            # never replay after a timeout (the default unless annotated)
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobMatcher};
use serde::Deserialize;
use steadfast::{
    BreakerConfig, BreakerConfigBuilder, BudgetConfig, BudgetConfigBuilder, PolicyError,
    RetryPolicy, RetryPolicyBuilder,
};
use steadfast_mcp::{RetryOnIsError, ToolPolicy, Upstream};

/// The default per-attempt idle timeout for proxied tool calls.
pub const PROXY_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// A configuration error, located in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or `<command line>`).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key, as a dotted path.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: ", self.file)?,
            None => write!(f, "{}: ", self.file)?,
        }
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// `breaker = false`, `breaker = true`, or `breaker = { … }`.
#[derive(Debug, Clone, PartialEq)]
enum BreakerSetting {
    Off,
    On(BreakerConfigBuilder),
}

impl<'de> Deserialize<'de> for BreakerSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = BreakerSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`false`, `true` or a table of breaker settings")
            }
            fn visit_bool<E>(self, v: bool) -> Result<BreakerSetting, E> {
                Ok(if v {
                    BreakerSetting::On(BreakerConfigBuilder::default())
                } else {
                    BreakerSetting::Off
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<BreakerSetting, A::Error> {
                BreakerConfigBuilder::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(BreakerSetting::On)
            }
        }
        d.deserialize_any(V)
    }
}

/// Per-tool settings, all optional so they layer.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolSettings {
    retry: Option<RetryPolicyBuilder>,
    #[serde(default, with = "humantime_serde")]
    attempt_max: Option<Duration>,
    retry_on_is_error: Option<RetryOnIsError>,
    retry_ambiguous: Option<bool>,
    breaker: Option<BreakerSetting>,
    dependency: Option<String>,
}

impl ToolSettings {
    fn layer(&self, over: &ToolSettings) -> ToolSettings {
        ToolSettings {
            retry: match (&self.retry, &over.retry) {
                (Some(a), Some(b)) => Some(a.clone().layer(b)),
                (a, b) => b.clone().or_else(|| a.clone()),
            },
            attempt_max: over.attempt_max.or(self.attempt_max),
            retry_on_is_error: over.retry_on_is_error.or(self.retry_on_is_error),
            retry_ambiguous: over.retry_ambiguous.or(self.retry_ambiguous),
            dependency: over.dependency.clone().or_else(|| self.dependency.clone()),
            breaker: match (&self.breaker, &over.breaker) {
                (Some(BreakerSetting::On(a)), Some(BreakerSetting::On(b))) => {
                    Some(BreakerSetting::On(a.clone().layer(b)))
                }
                (a, b) => b.clone().or_else(|| a.clone()),
            },
        }
    }

    fn resolve(&self) -> Result<ResolvedTool, (&'static str, PolicyError)> {
        // The proxy's one default that differs from the library's: an attempt silent for five
        // minutes is abandoned (and the upstream told), so a hung tool cannot hold a client, or
        // a breaker's half-open probe slot, forever. `attempt_timeout = "none"` lifts it.
        let retry = RetryPolicy::builder()
            .attempt_timeout(PROXY_IDLE_TIMEOUT)
            .layer(&self.retry.clone().unwrap_or_default())
            .build()
            .map_err(|e| ("retry", e))?;
        let mut policy = ToolPolicy::new(retry).map_err(|e| ("retry", e))?;
        policy.attempt_max = self.attempt_max;
        policy.retry_on_is_error = self.retry_on_is_error.unwrap_or_default();
        policy.retry_ambiguous = self.retry_ambiguous;
        let breaker = match &self.breaker {
            Some(BreakerSetting::Off) => None,
            Some(BreakerSetting::On(b)) => Some(b.build().map_err(|e| ("breaker", e))?),
            None => Some(BreakerConfig::default()),
        };
        Ok(ResolvedTool {
            policy,
            breaker,
            dependency: self.dependency.clone(),
        })
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpstream {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProxy {
    health_tool: Option<String>,
    #[serde(default, with = "humantime_serde")]
    reconnect_wait: Option<Duration>,
    connect: Option<RetryPolicyBuilder>,
    restart: Option<RetryPolicyBuilder>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    upstream: Option<RawUpstream>,
    #[serde(default)]
    proxy: RawProxy,
    #[serde(default)]
    defaults: ToolSettings,
    budget: Option<BudgetConfigBuilder>,
    #[serde(default)]
    tools: BTreeMap<String, ToolSettings>,
}

/// One tool's effective settings.
#[derive(Debug, Clone)]
pub struct ResolvedTool {
    /// Retry and timeouts.
    pub policy: ToolPolicy,
    /// The tool's breaker, unless disabled.
    pub breaker: Option<BreakerConfig>,
    /// Tools naming the same dependency share one breaker (the first one's configuration).
    pub dependency: Option<String>,
}

enum Pattern {
    Exact(String),
    Glob(String, GlobMatcher),
}

/// A loaded, validated configuration.
pub struct Config {
    /// The server to proxy, if the file names one.
    pub upstream: Option<Upstream>,
    /// The health tool's name, if enabled.
    pub health_tool: Option<String>,
    /// How long a call waits for a restarting upstream before it counts as not sent.
    pub reconnect_wait: Duration,
    /// Retries for the first connection.
    pub connect: RetryPolicy,
    /// Retries for restarting a dead upstream.
    pub restart: RetryPolicy,
    /// One retry budget for the upstream, if configured.
    pub budget: Option<BudgetConfig>,
    defaults: ToolSettings,
    tools: Vec<(Pattern, ToolSettings)>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("upstream", &self.upstream)
            .field("health_tool", &self.health_tool)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl Default for Config {
    fn default() -> Self {
        match Self::parse_toml("", "<defaults>") {
            Ok(c) => c,
            Err(e) => unreachable!("the empty configuration is valid: {e}"),
        }
    }
}

fn restart_default() -> RetryPolicyBuilder {
    steadfast_mcp::default_reconnect_policy().to_builder()
}

fn connect_default() -> RetryPolicyBuilder {
    steadfast_mcp::default_connect_policy().to_builder()
}

impl Config {
    /// Loads a TOML file, or a JSON file in the `mcpServers` shape (picking `server` if it has
    /// several entries).
    pub fn load(path: &Path, server: Option<&str>) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            line: None,
            key: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        let json =
            path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
        if json {
            Self::parse_mcp_servers(&text, &file, server)
        } else {
            Self::parse_toml(&text, &file)
        }
    }

    /// Parses and validates TOML text; `file` names it in errors.
    pub fn parse_toml(text: &str, file: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let (line, key) = e
                .span()
                .map(|s| locate_offset(text, s.start))
                .unwrap_or((None, String::new()));
            ConfigError {
                file: file.to_owned(),
                line,
                key,
                message: e.message().trim().to_owned(),
            }
        })?;
        let policy_err = |table: &str, sub: &str, e: PolicyError| ConfigError {
            file: file.to_owned(),
            line: find_key_line(text, table, e.field()),
            key: if sub.is_empty() {
                format!("{table}.{}", e.field())
            } else {
                format!("{table}.{sub}.{}", e.field())
            },
            message: format!("must {}", e.constraint()),
        };
        let upstream = raw
            .upstream
            .map(|u| upstream_from(u, file, text))
            .transpose()?;
        raw.defaults
            .resolve()
            .map_err(|(sub, e)| policy_err("defaults", sub, e))?;
        let mut tools = Vec::new();
        for (name, settings) in raw.tools {
            let table = format!("tools.{}", quote_key(&name));
            raw.defaults
                .layer(&settings)
                .resolve()
                .map_err(|(sub, e)| policy_err(&table, sub, e))?;
            let pattern = if name.contains(['*', '?', '[', '{']) {
                let glob = Glob::new(&name).map_err(|e| ConfigError {
                    file: file.to_owned(),
                    line: find_key_line(text, &table, ""),
                    key: table.clone(),
                    message: format!("invalid glob: {e}"),
                })?;
                Pattern::Glob(name, glob.compile_matcher())
            } else {
                Pattern::Exact(name)
            };
            tools.push((pattern, settings));
        }
        let connect = connect_default()
            .layer(&raw.proxy.connect.unwrap_or_default())
            .build()
            .map_err(|e| policy_err("proxy", "connect", e))?;
        let restart = restart_default()
            .layer(&raw.proxy.restart.unwrap_or_default())
            .build()
            .map_err(|e| policy_err("proxy", "restart", e))?;
        let budget = raw
            .budget
            .map(|b| b.build())
            .transpose()
            .map_err(|e| policy_err("budget", "", e))?;
        if let Some(name) = &raw.proxy.health_tool {
            if name.trim().is_empty() {
                return Err(ConfigError {
                    file: file.to_owned(),
                    line: find_key_line(text, "proxy", "health_tool"),
                    key: "proxy.health_tool".into(),
                    message: "must not be empty".into(),
                });
            }
        }
        Ok(Config {
            upstream,
            health_tool: raw.proxy.health_tool,
            reconnect_wait: raw.proxy.reconnect_wait.unwrap_or(Duration::from_secs(10)),
            connect,
            restart,
            budget,
            defaults: raw.defaults,
            tools,
        })
    }

    /// Parses a Claude Desktop / Cursor config (`{"mcpServers": {"name": {…}}}`); the proxy
    /// then runs with default policies.
    pub fn parse_mcp_servers(
        text: &str,
        file: &str,
        server: Option<&str>,
    ) -> Result<Self, ConfigError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Doc {
            mcp_servers: BTreeMap<String, RawUpstream>,
        }
        let err = |line: Option<usize>, key: String, message: String| ConfigError {
            file: file.to_owned(),
            line,
            key,
            message,
        };
        let doc: Doc = serde_json::from_str(text)
            .map_err(|e| err(Some(e.line()), String::new(), e.to_string()))?;
        let (name, entry) = match server {
            Some(s) => doc
                .mcp_servers
                .get_key_value(s)
                .ok_or_else(|| err(None, format!("mcpServers.{s}"), "no such server".into()))?,
            None if doc.mcp_servers.len() == 1 => doc
                .mcp_servers
                .iter()
                .next()
                .unwrap_or_else(|| unreachable!()),
            None => {
                return Err(err(
                    None,
                    "mcpServers".into(),
                    format!(
                        "has {} servers; choose one with --server ({})",
                        doc.mcp_servers.len(),
                        doc.mcp_servers
                            .keys()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        };
        let upstream = upstream_from(entry.clone(), file, text).map_err(|mut e| {
            e.key = format!("mcpServers.{name}");
            e
        })?;
        Ok(Config {
            upstream: Some(upstream),
            ..Config::default()
        })
    }

    /// The settings for `tool`: the defaults, then matching globs from least to most specific,
    /// then the exact entry.
    pub fn tool(&self, tool: &str) -> ResolvedTool {
        let mut matching: Vec<(usize, &ToolSettings)> = self
            .tools
            .iter()
            .filter_map(|(p, s)| match p {
                Pattern::Exact(n) if n == tool => Some((usize::MAX, s)),
                Pattern::Glob(g, m) if m.is_match(tool) => {
                    Some((g.chars().filter(|c| !"*?[]{}".contains(*c)).count(), s))
                }
                _ => None,
            })
            .collect();
        matching.sort_by_key(|(specificity, _)| *specificity);
        let settings = matching
            .into_iter()
            .fold(self.defaults.clone(), |acc, (_, s)| acc.layer(s));
        settings.resolve().unwrap_or_else(|(_, e)| {
            // Each entry was validated on the defaults; only a combination of globs can fail.
            tracing::warn!(tool, error = %e, "combined tool settings are invalid; using the defaults");
            self.defaults.resolve().unwrap_or_else(|_| ResolvedTool {
                policy: ToolPolicy::default(),
                breaker: Some(BreakerConfig::default()),
                dependency: None,
            })
        })
    }
}

fn upstream_from(u: RawUpstream, file: &str, text: &str) -> Result<Upstream, ConfigError> {
    let err = |key: &str, message: &str| ConfigError {
        file: file.to_owned(),
        line: find_key_line(text, "upstream", key),
        key: format!("upstream.{key}"),
        message: message.to_owned(),
    };
    match (u.command, u.url) {
        (Some(_), Some(_)) => Err(err("url", "give either `command` or `url`, not both")),
        (None, None) => Err(err(
            "command",
            "missing: give `command` (a child process) or `url`",
        )),
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(err("command", "must not be empty"));
            }
            let mut up = Upstream::command(command, u.args);
            if let Upstream::Command { env, cwd, .. } = &mut up {
                *env = u.env;
                *cwd = u.cwd;
            }
            Ok(up)
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(err("url", "must start with http:// or https://"));
            }
            if url.starts_with("https://") && !cfg!(feature = "https") {
                return Err(err(
                    "url",
                    "https upstreams need steadfast built with the `https` feature \
                     (cargo install steadfast-cli --features https)",
                ));
            }
            if !cfg!(feature = "http") {
                return Err(err(
                    "url",
                    "HTTP upstreams need steadfast built with the `http` feature",
                ));
            }
            Ok(Upstream::Http {
                url,
                headers: u.headers,
            })
        }
    }
}

fn quote_key(k: &str) -> String {
    if k.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_owned()
    } else {
        format!("{k:?}")
    }
}

/// The line of byte `offset`, and the dotted key written there (table header + key).
fn locate_offset(text: &str, offset: usize) -> (Option<usize>, String) {
    let before = &text[..offset.min(text.len())];
    let line_no = before.matches('\n').count() + 1;
    let mut table = String::new();
    for l in before.lines() {
        let t = l.trim();
        if t.starts_with('[') {
            table = t.trim_matches(|c| c == '[' || c == ']').trim().to_owned();
        }
    }
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    let key = line
        .split('=')
        .next()
        .filter(|_| line.contains('='))
        .map(str::trim)
        .unwrap_or("");
    let full = match (table.is_empty(), key.is_empty()) {
        (true, _) => key.to_owned(),
        (false, true) => table,
        (false, false) => format!("{table}.{key}"),
    };
    (Some(line_no), full)
}

/// The line where `key` is set inside `table` (or its sub-tables, or inline tables), if found.
fn find_key_line(text: &str, table: &str, key: &str) -> Option<usize> {
    let mut in_table = table.is_empty();
    let mut table_line = None;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.starts_with('[') {
            let name = t.trim_matches(|c| c == '[' || c == ']').trim();
            in_table = name == table || name.starts_with(&format!("{table}."));
            if in_table && table_line.is_none() {
                table_line = Some(i + 1);
            }
            continue;
        }
        if in_table && !key.is_empty() {
            let found = t.split(['{', ',']).any(|part| {
                part.trim_start()
                    .strip_prefix(key)
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            });
            if found {
                return Some(i + 1);
            }
        }
    }
    table_line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_is_valid() {
        let doc = include_str!("config.rs")
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| l.trim_start_matches("//!").strip_prefix(' ').unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let c = Config::parse_toml(&doc, "doc").unwrap();
        assert_eq!(c.health_tool.as_deref(), Some("steadfast_health"));
        assert_eq!(
            c.tool("search_web").policy.engine_policy().max_attempts(),
            5
        );
        assert_eq!(c.tool("other").policy.engine_policy().max_attempts(), 3);
        assert_eq!(c.tool("send_email").policy.retry_ambiguous, Some(false));
        assert_eq!(
            c.tool("x").policy.idle_timeout(),
            Some(Duration::from_secs(30))
        );
        assert_eq!(c.tool("x").breaker.unwrap().failure_threshold(), 5);
        assert!(c.budget.is_some());
        assert_eq!(c.tool("db_read").dependency.as_deref(), Some("postgres"));
        assert_eq!(c.tool("search_web").dependency, None);
    }

    #[test]
    fn attempts_time_out_after_five_silent_minutes_unless_lifted() {
        let c = Config::parse_toml("", "t.toml").unwrap();
        assert_eq!(c.tool("x").policy.idle_timeout(), Some(PROXY_IDLE_TIMEOUT));
        let c = Config::parse_toml(
            "[tools.long]\nretry = { attempt_timeout = \"none\" }\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.tool("long").policy.idle_timeout(), None);
        assert_eq!(
            c.tool("other").policy.idle_timeout(),
            Some(PROXY_IDLE_TIMEOUT)
        );
    }

    #[test]
    fn exact_names_beat_globs_and_specific_globs_beat_general_ones() {
        let c = Config::parse_toml(
            r#"
[tools."*"]
retry = { max_attempts = 2 }
[tools."db_*"]
retry = { max_attempts = 4 }
[tools.db_write]
retry = { max_attempts = 1 }
breaker = false
"#,
            "t.toml",
        )
        .unwrap();
        assert_eq!(c.tool("web").policy.engine_policy().max_attempts(), 2);
        assert_eq!(c.tool("db_read").policy.engine_policy().max_attempts(), 4);
        assert_eq!(c.tool("db_write").policy.engine_policy().max_attempts(), 1);
        assert!(c.tool("db_write").breaker.is_none());
        assert!(c.tool("db_read").breaker.is_some());
    }

    fn error(text: &str) -> String {
        Config::parse_toml(text, "steadfast.toml")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn errors_name_file_line_key_and_constraint() {
        assert_eq!(
            error("[defaults]\nretry = { base_delay = \"5s\", max_delay = \"3s\" }\n"),
            "steadfast.toml:2: defaults.retry.base_delay: must be <= max_delay (5s > 3s)"
        );
        assert_eq!(
            error("[upstream]\ncommand = \"x\"\n\n[tools.search]\nretry = { max_attempts = 0 }\n"),
            "steadfast.toml:5: tools.search.retry.max_attempts: must be >= 1 (got 0)"
        );
        assert_eq!(
            error("[tools.\"db_*\".breaker]\nfailure_threshold = 0\n"),
            "steadfast.toml:2: tools.\"db_*\".breaker.failure_threshold: must be >= 1 (got 0)"
        );
        let unknown = error("[defaults]\nretries = 3\n");
        assert!(
            unknown.starts_with("steadfast.toml:2: defaults.retries: unknown field `retries`"),
            "{unknown}"
        );
        let ty = error("[defaults]\nretry_on_is_error = \"sometimes\"\n");
        assert!(
            ty.starts_with(
                "steadfast.toml:2: defaults.retry_on_is_error: unknown variant `sometimes`"
            ),
            "{ty}"
        );
        let bad_duration = error("[defaults]\nattempt_max = \"soon\"\n");
        assert!(
            bad_duration.starts_with("steadfast.toml:2: defaults.attempt_max:"),
            "{bad_duration}"
        );
        assert_eq!(
            error("[upstream]\nargs = [\"x\"]\n"),
            "steadfast.toml:1: upstream.command: missing: give `command` (a child process) or `url`"
        );
        let syntax = error("[defaults\n");
        assert!(syntax.starts_with("steadfast.toml:1:"), "{syntax}");
    }

    #[test]
    fn https_urls_need_the_https_feature() {
        let r = Config::parse_toml(
            "[upstream]\nurl = \"https://mcp.example.com/mcp\"\n",
            "t.toml",
        );
        if cfg!(feature = "https") {
            assert!(r.is_ok());
        } else {
            let e = r.unwrap_err().to_string();
            assert!(
                e.starts_with("t.toml:2: upstream.url: https upstreams need"),
                "{e}"
            );
        }
        let e = Config::parse_toml("[upstream]\nurl = \"ftp://x\"\n", "t.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.toml:2: upstream.url: must start with http:// or https://"
        );
    }

    #[test]
    fn mcp_servers_json_is_accepted() {
        let json = r#"{"mcpServers": {"weather": {"command": "node", "args": ["weather.js"], "env": {"KEY": "v"}},
                       "remote": {"url": "http://localhost:8080/mcp", "headers": {"Authorization": "Bearer x"}}}}"#;
        let c = Config::parse_mcp_servers(json, "claude.json", Some("weather")).unwrap();
        assert_eq!(c.upstream.unwrap().to_string(), "node weather.js");
        let c = Config::parse_mcp_servers(json, "claude.json", Some("remote")).unwrap();
        assert!(matches!(c.upstream, Some(Upstream::Http { .. })));
        let e = Config::parse_mcp_servers(json, "claude.json", None).unwrap_err();
        assert!(
            e.to_string()
                .contains("choose one with --server (remote, weather)"),
            "{e}"
        );
        let e = Config::parse_mcp_servers("{\"mcpServers\": {\n\"a\": 3}}", "c.json", None)
            .unwrap_err();
        assert_eq!(e.line, Some(2));
    }
}
