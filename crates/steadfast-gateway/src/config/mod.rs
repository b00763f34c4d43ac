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

pub(crate) mod auth;
pub(crate) mod layered;
pub(crate) mod limits;
mod locate;
mod mcp_servers;
mod parse;
mod raw;
pub(crate) mod settings;
pub(crate) mod tasks;
pub(crate) mod telemetry;

use parse::upstream_from;
use raw::*;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::GlobMatcher;
use serde::Deserialize;
use steadfast::{BreakerConfig, BudgetConfig, PolicyError, RetryPolicy};
use steadfast_mcp::{ToolPolicy, Upstream};

/// The default per-attempt idle timeout for proxied tool calls: an attempt silent this long
/// (no result, no progress) is abandoned and the upstream told.
pub(crate) const PROXY_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The default time budget of one proxied tool call, retries included: with the defaults, a
/// tool that never answers is answered (TIMEOUT) within three minutes.
pub(crate) const PROXY_MAX_ELAPSED: Duration = Duration::from_secs(170);

/// How long a list waits for each upstream, by default, before answering without it.
pub(crate) const DEFAULT_LIST_TIMEOUT: Duration = Duration::from_secs(5);

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

/// One upstream of several behind one endpoint.
#[derive(Debug, Clone)]
pub struct NamedUpstream {
    /// Its name in the config; its tools are listed as `NAME` + separator + tool.
    pub name: String,
    /// How to reach it.
    pub spec: Upstream,
    /// Its own retry budget (`[upstreams.NAME.budget]`), else a copy of `[budget]`.
    pub budget: Option<BudgetConfig>,
}

/// When the HTTP front's `/readyz` answers 200 (`[proxy] ready`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ready {
    /// At least one upstream is connected (the endpoint can serve something).
    #[default]
    Any,
    /// Every upstream is connected.
    All,
}

/// One cap: at most `max` calls (attempts) per `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cap {
    /// Calls allowed in a window.
    pub max: u64,
    /// The window.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

/// What the model gets when a call limit refuses a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnLimit {
    /// An `isError` result carrying the `TOOL_CALL_LIMIT` LLM error (the model reads it).
    #[default]
    LlmError,
    /// A JSON-RPC error (-32005) instead.
    JsonrpcError,
}

/// `[limits]`: tool-call caps, where every attempt sent upstream counts.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallLimits {
    /// Per client session.
    pub per_session: Option<Cap>,
    /// Per tool (in a session).
    pub per_tool: Option<Cap>,
    /// Per upstream (every session).
    pub per_upstream: Option<Cap>,
    /// How a refusal is answered.
    #[serde(default)]
    pub on_limit: OnLimit,
}

impl CallLimits {
    /// Whether any cap is set.
    pub(crate) fn any(&self) -> bool {
        self.per_session.is_some() || self.per_tool.is_some() || self.per_upstream.is_some()
    }

    /// The library's limit with these caps.
    pub(crate) fn build<C: steadfast::CallCounter>(
        &self,
        counter: C,
    ) -> Result<steadfast::CallLimit<C>, PolicyError> {
        let mut b = steadfast::CallLimit::builder();
        if let Some(c) = self.per_session {
            b = b.per_session(c.max, c.window);
        }
        if let Some(c) = self.per_tool {
            b = b.per_tool(c.max, c.window);
        }
        if let Some(c) = self.per_upstream {
            b = b.per_upstream(c.max, c.window);
        }
        b.build_with(counter)
    }
}

/// One tool's effective settings.
#[derive(Debug, Clone)]
pub struct ResolvedTool {
    /// Retry and timeouts.
    pub policy: ToolPolicy,
    /// The tool's breaker, unless disabled.
    pub breaker: Option<BreakerConfig>,
    /// Tools naming the same dependency share one breaker (tables that configure it
    /// differently are a config error).
    pub dependency: Option<String>,
    /// Calls become durable MCP tasks when the client asks for a task (`durable = true`).
    pub durable: bool,
}

enum Pattern {
    Exact(String),
    Glob(String, GlobMatcher),
}

/// A loaded, validated configuration.
pub struct Config {
    /// The server to proxy, if the file names one (`[upstream]`, or one `mcpServers` entry).
    pub upstream: Option<Upstream>,
    /// Several servers behind one endpoint (`[upstreams.NAME]`, or every enabled `mcpServers`
    /// entry), their tools and prompts namespaced.
    pub upstreams: Vec<NamedUpstream>,
    /// Between an upstream's name and its tools' names (`[proxy] separator`, default `_`).
    pub separator: String,
    /// How long a list (tools, prompts, resources) waits for each upstream before answering
    /// with what the others listed.
    pub list_timeout: Duration,
    /// When `/readyz` answers 200: any upstream connected, or all.
    pub ready: Ready,
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
    /// Bounds per client session.
    pub limits: limits::SessionLimits,
    /// Tool-call caps (`[limits]`).
    pub call_limits: CallLimits,
    /// Shared state across replicas (`[state]`).
    #[cfg(feature = "redis")]
    pub state: steadfast_redis::StateConfig,
    /// The durable task store (`[tasks]`), used when some tool is `durable = true`.
    pub tasks: tasks::TasksConfig,
    /// `[auth]` the HTTP front as an OAuth 2.1 resource server, if configured.
    pub auth: Option<auth::AuthConfig>,
    /// `[access."…"]` which tools, prompts and resources each scope or claim grants.
    pub access: BTreeMap<String, auth::AccessRule>,
    /// `oauth = { … }` of HTTP upstreams, by upstream name (`upstream` for `[upstream]`).
    pub upstream_oauth: BTreeMap<String, auth::UpstreamOAuth>,
    /// `[telemetry]` as written; `RawTelemetry::resolve` adds the environment.
    pub telemetry: telemetry::RawTelemetry,
    settings: settings::Settings,
    /// Things that are allowed but probably not meant (a second breaker config for one
    /// dependency, `--server` with a TOML file, …), for the caller to print.
    pub warnings: Vec<String>,
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

impl Config {
    /// Loads a TOML file, or a JSON file in the `mcpServers` shape (picking `server` if it has
    /// several entries).
    pub fn load(path: &Path, server: Option<&str>) -> Result<Self, ConfigError> {
        Self::load_all(path, server).map_err(|mut errors| errors.remove(0))
    }

    /// Like [`Config::load`], reporting every error found (at least one on failure).
    pub fn load_all(path: &Path, server: Option<&str>) -> Result<Self, Vec<ConfigError>> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![ConfigError {
                file: file.clone(),
                line: None,
                key: String::new(),
                message: format!("cannot read: {e}"),
            }]
        })?;
        let json =
            path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
        if json {
            Self::parse_mcp_servers(&text, &file, server).map_err(|e| vec![e])
        } else {
            let mut config = Self::parse_toml_all(&text, &file)?;
            if let Some(s) = server {
                config.warnings.push(format!(
                    "{file}: --server {s} is ignored: it picks an entry of an mcpServers JSON \
                     file, and this is a TOML config"
                ));
            }
            Ok(config)
        }
    }

    /// Parses and validates TOML text; `file` names it in errors.
    pub fn parse_toml(text: &str, file: &str) -> Result<Self, ConfigError> {
        Self::parse_toml_all(text, file).map_err(|mut errors| errors.remove(0))
    }

    /// Tool names the config gives settings for by exact name (not by glob).
    pub(crate) fn exact_tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().filter_map(|(p, _)| match p {
            Pattern::Exact(n) => Some(n.as_str()),
            Pattern::Glob(..) => None,
        })
    }

    /// `[tasks]` Whether any tool may be durable (`durable = true` in the defaults or any tool
    /// table): only then is the task store opened.
    pub(crate) fn any_durable(&self) -> bool {
        self.defaults.durable == Some(true)
            || self.tools.iter().any(|(_, s)| s.durable == Some(true))
    }

    /// How the upstream is connected, supervised and bounded.
    pub(crate) fn upstream_settings(&self) -> settings::Settings {
        self.settings.clone()
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
                durable: false,
            })
        })
    }
}

#[cfg(test)]
mod tests;
