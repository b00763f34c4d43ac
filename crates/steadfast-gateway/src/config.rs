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

/// The default per-attempt idle timeout for proxied tool calls: an attempt silent this long
/// (no result, no progress) is abandoned and the upstream told.
pub const PROXY_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The default time budget of one proxied tool call, retries included: with the defaults, a
/// tool that never answers is answered (TIMEOUT) within three minutes.
pub const PROXY_MAX_ELAPSED: Duration = Duration::from_secs(170);

/// How long a list waits for each upstream, by default, before answering without it.
pub const DEFAULT_LIST_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// `[tasks]` Run calls as durable MCP tasks when the client asks for a task.
    durable: Option<bool>,
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
            durable: over.durable.or(self.durable),
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
            .max_elapsed(PROXY_MAX_ELAPSED)
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
            durable: self.durable.unwrap_or(false),
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

/// `[upstreams.NAME]`: an upstream's connection, and settings that apply to its tools only.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNamedUpstream {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Skipped when true (as an `mcpServers` entry's `disabled`).
    #[serde(default)]
    disabled: bool,
    /// This upstream's own retry budget instead of a copy of `[budget]`.
    budget: Option<BudgetConfigBuilder>,
    /// Per-tool settings by the upstream's own tool names (or globs).
    #[serde(default)]
    tools: BTreeMap<String, ToolSettings>,
}

impl RawNamedUpstream {
    fn connection(&self) -> RawUpstream {
        RawUpstream {
            command: self.command.clone(),
            args: self.args.clone(),
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
        }
    }
}

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

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProxy {
    health_tool: Option<String>,
    #[serde(default, with = "humantime_serde")]
    reconnect_wait: Option<Duration>,
    connect: Option<RetryPolicyBuilder>,
    restart: Option<RetryPolicyBuilder>,
    #[serde(default, with = "humantime_serde")]
    init_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    request_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    shutdown_grace: Option<Duration>,
    max_message_size: Option<usize>,
    max_in_flight: Option<usize>,
    max_queued_notifications: Option<usize>,
    separator: Option<String>,
    #[serde(default, with = "humantime_serde")]
    list_timeout: Option<Duration>,
    ready: Option<Ready>,
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
pub struct Limits {
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

impl Limits {
    /// Whether any cap is set.
    pub fn any(&self) -> bool {
        self.per_session.is_some() || self.per_tool.is_some() || self.per_upstream.is_some()
    }

    /// The library's limit with these caps.
    pub fn build<C: steadfast::CallCounter>(
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

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    upstream: Option<RawUpstream>,
    #[serde(default)]
    upstreams: BTreeMap<String, RawNamedUpstream>,
    #[serde(default)]
    limits: Limits,
    #[cfg(feature = "redis")]
    #[serde(default)]
    state: steadfast_redis::StateConfig,
    #[serde(default)]
    proxy: RawProxy,
    #[serde(default)]
    defaults: ToolSettings,
    budget: Option<BudgetConfigBuilder>,
    #[serde(default)]
    tools: BTreeMap<String, ToolSettings>,
    /// `[tasks]` Where durable tool calls are kept.
    #[serde(default)]
    tasks: crate::tasks::RawTasks,
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
    pub limits: crate::Limits,
    /// Tool-call caps (`[limits]`).
    pub call_limits: Limits,
    /// Shared state across replicas (`[state]`).
    #[cfg(feature = "redis")]
    pub state: steadfast_redis::StateConfig,
    /// The durable task store (`[tasks]`), used when some tool is `durable = true`.
    pub tasks: crate::tasks::TasksConfig,
    settings: crate::upstream::Settings,
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

    /// Parses TOML text and reports every validation error (a syntax or type error stops the
    /// parse where it is, so it comes alone).
    pub fn parse_toml_all(text: &str, file: &str) -> Result<Self, Vec<ConfigError>> {
        let mut errors: Vec<ConfigError> = Vec::new();
        let raw: RawConfig = toml::from_str(text)
            .map_err(|e| {
                let (line, key) = e
                    .span()
                    .map(|s| locate_offset(text, s.start))
                    .unwrap_or((None, String::new()));
                ConfigError {
                    file: file.to_owned(),
                    line,
                    key,
                    message: with_duration_hint(e.message().trim()),
                }
            })
            .map_err(|e| vec![e])?;
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
        let upstream = match raw.upstream.clone().map(|u| upstream_from(u, file, text)) {
            Some(Ok(u)) => Some(u),
            Some(Err(e)) => {
                errors.push(e);
                None
            }
            None => None,
        };
        let separator = raw
            .proxy
            .separator
            .clone()
            .unwrap_or_else(|| crate::naming::DEFAULT_SEPARATOR.to_owned());
        if let Err(message) = crate::naming::check_separator(&separator) {
            errors.push(ConfigError {
                file: file.to_owned(),
                line: find_key_line(text, "proxy", "separator"),
                key: "proxy.separator".into(),
                message,
            });
        }
        if raw.upstream.is_some() && !raw.upstreams.is_empty() {
            errors.push(ConfigError {
                file: file.to_owned(),
                line: find_key_line(text, "upstream", ""),
                key: "upstream".into(),
                message: "give either [upstream] (one server; its tools keep their names) or \
                          [upstreams.NAME] tables (several; tools are namespaced), not both"
                    .into(),
            });
        }
        let mut upstreams = Vec::new();
        // Per-upstream tool settings become patterns on the names clients see.
        let mut tool_entries: Vec<(String, String, ToolSettings)> = raw
            .tools
            .iter()
            .map(|(n, s)| (n.clone(), format!("tools.{}", quote_key(n)), s.clone()))
            .collect();
        for (name, u) in raw.upstreams.iter().filter(|(_, u)| !u.disabled) {
            let table = format!("upstreams.{}", quote_key(name));
            if let Err(message) = crate::naming::check_upstream_name(name) {
                errors.push(ConfigError {
                    file: file.to_owned(),
                    line: find_key_line(text, &table, ""),
                    key: table.clone(),
                    message,
                });
            }
            let budget = match u.budget.as_ref().map(|b| b.build()) {
                Some(Ok(b)) => Some(b),
                Some(Err(e)) => {
                    errors.push(policy_err(&table, "budget", e));
                    None
                }
                None => None,
            };
            match upstream_in(u.connection(), file, text, &table) {
                Ok(spec) => upstreams.push(NamedUpstream {
                    name: name.clone(),
                    spec,
                    budget,
                }),
                Err(e) => errors.push(e),
            }
            let prefix = crate::naming::prefix(name);
            for (tool, settings) in &u.tools {
                let pattern = if tool.contains(['*', '?', '[', '{']) {
                    // Glob syntax stays; other characters change as the names clients see do.
                    let glob: String = tool
                        .chars()
                        .map(|c| {
                            if crate::naming::allowed(c) || "*?[]{},!".contains(c) {
                                c
                            } else {
                                '_'
                            }
                        })
                        .collect();
                    format!("{prefix}{separator}{glob}")
                } else {
                    crate::naming::exposed(&prefix, &separator, tool)
                };
                tool_entries.push((
                    pattern,
                    format!("{table}.tools.{}", quote_key(tool)),
                    settings.clone(),
                ));
            }
        }
        let names: Vec<&String> = upstreams.iter().map(|u| &u.name).collect();
        if let Some((_, long, message)) = crate::naming::ambiguous(&names, &separator) {
            let table = format!("upstreams.{}", quote_key(&long));
            errors.push(ConfigError {
                file: file.to_owned(),
                line: find_key_line(text, &table, ""),
                key: table,
                message,
            });
        }
        // Tools are checked on valid defaults, so one bad default is reported once.
        let base = match raw.defaults.resolve() {
            Ok(_) => raw.defaults.clone(),
            Err((sub, e)) => {
                errors.push(policy_err("defaults", sub, e));
                ToolSettings::default()
            }
        };
        let mut tools = Vec::new();
        let mut breaker_owner: BTreeMap<String, String> = BTreeMap::new();
        let mut warnings = Vec::new();
        for (name, table, settings) in tool_entries {
            if let Err((sub, e)) = base.layer(&settings).resolve() {
                errors.push(policy_err(&table, sub, e));
                continue;
            }
            if let (Some(dep), Some(_)) = (&settings.dependency, &settings.breaker) {
                if let Some(first) = breaker_owner.insert(dep.clone(), table.clone()) {
                    warnings.push(format!(
                        "{file}: {table} and {first} both configure the breaker of dependency                          `{dep}`; the first tool called decides which one it gets"
                    ));
                }
            }
            let pattern = if name.contains(['*', '?', '[', '{']) {
                match Glob::new(&name) {
                    Ok(glob) => Pattern::Glob(name, glob.compile_matcher()),
                    Err(e) => {
                        errors.push(ConfigError {
                            file: file.to_owned(),
                            line: find_key_line(text, &table, ""),
                            key: table.clone(),
                            message: format!("invalid glob: {e}"),
                        });
                        continue;
                    }
                }
            } else {
                Pattern::Exact(name)
            };
            tools.push((pattern, settings));
        }
        let connect = connect_default()
            .layer(&raw.proxy.connect.clone().unwrap_or_default())
            .build()
            .unwrap_or_else(|e| {
                errors.push(policy_err("proxy", "connect", e));
                steadfast_mcp::default_connect_policy()
            });
        let restart = restart_default()
            .layer(&raw.proxy.restart.clone().unwrap_or_default())
            .build()
            .unwrap_or_else(|e| {
                errors.push(policy_err("proxy", "restart", e));
                steadfast_mcp::default_reconnect_policy()
            });
        let budget = match raw.budget.as_ref().map(|b| b.build()) {
            Some(Ok(b)) => Some(b),
            Some(Err(e)) => {
                errors.push(policy_err("budget", "", e));
                None
            }
            None => None,
        };
        if let Some(name) = &raw.proxy.health_tool {
            if name.trim().is_empty() {
                errors.push(ConfigError {
                    file: file.to_owned(),
                    line: find_key_line(text, "proxy", "health_tool"),
                    key: "proxy.health_tool".into(),
                    message: "must not be empty".into(),
                });
            }
        }
        let p = &raw.proxy;
        for (key, v) in [
            ("max_message_size", p.max_message_size),
            ("max_in_flight", p.max_in_flight),
            ("max_queued_notifications", p.max_queued_notifications),
        ] {
            if v == Some(0) {
                errors.push(ConfigError {
                    file: file.to_owned(),
                    line: find_key_line(text, "proxy", key),
                    key: format!("proxy.{key}"),
                    message: "must be at least 1".into(),
                });
            }
        }
        let zero_duration = [
            ("init_timeout", p.init_timeout),
            ("request_timeout", p.request_timeout),
            ("list_timeout", p.list_timeout),
        ];
        for (key, d) in zero_duration {
            if d == Some(Duration::ZERO) {
                errors.push(ConfigError {
                    file: file.to_owned(),
                    line: find_key_line(text, "proxy", key),
                    key: format!("proxy.{key}"),
                    message: "must be longer than 0s".into(),
                });
            }
        }
        if raw.limits.any() {
            if let Err(e) = raw.limits.build(steadfast::MemoryCounter::new()) {
                errors.push(policy_err("limits", "", e));
            }
        }
        #[cfg(feature = "redis")]
        if let Err(e) = raw.state.validate() {
            errors.push(ConfigError {
                file: file.to_owned(),
                line: find_key_line(text, "state", "redis")
                    .or_else(|| find_key_line(text, "state", "")),
                key: "state".into(),
                message: e.to_string(),
            });
        }
        // [tasks] the store, TTL and intervals of durable tool calls.
        let tasks = raw.tasks.validate().unwrap_or_else(|found| {
            for (key, message) in found {
                errors.push(ConfigError {
                    file: file.to_owned(),
                    line: find_key_line(text, "tasks", key),
                    key: format!("tasks.{key}"),
                    message,
                });
            }
            crate::tasks::TasksConfig::default()
        });
        if !errors.is_empty() {
            return Err(errors);
        }
        let reconnect_wait = p.reconnect_wait.unwrap_or(Duration::from_secs(10));
        let defaults = crate::upstream::Settings::default();
        let settings = crate::upstream::Settings {
            init_timeout: p.init_timeout.unwrap_or(defaults.init_timeout),
            reconnect_wait,
            connect: connect.clone(),
            restart: restart.clone(),
            max_message_size: p.max_message_size.unwrap_or(defaults.max_message_size),
            request_timeout: p.request_timeout.unwrap_or(defaults.request_timeout),
            shutdown_grace: p.shutdown_grace.unwrap_or(defaults.shutdown_grace),
            ..defaults
        };
        let limit_defaults = crate::Limits::default();
        let limits = crate::Limits {
            max_in_flight: p.max_in_flight.unwrap_or(limit_defaults.max_in_flight),
            max_queued_notifications: p
                .max_queued_notifications
                .unwrap_or(limit_defaults.max_queued_notifications),
        };
        Ok(Config {
            upstream,
            upstreams,
            separator,
            list_timeout: p.list_timeout.unwrap_or(DEFAULT_LIST_TIMEOUT),
            ready: p.ready.unwrap_or_default(),
            health_tool: raw.proxy.health_tool,
            reconnect_wait,
            connect,
            restart,
            budget,
            limits,
            call_limits: raw.limits.clone(),
            #[cfg(feature = "redis")]
            state: raw.state.clone(),
            tasks,
            settings,
            warnings,
            defaults: raw.defaults,
            tools,
        })
    }

    /// Parses a Claude Desktop / Cursor / VS Code / Claude Code config
    /// (`{"mcpServers": {"name": {…}}}`); the proxy then runs with default policies.
    ///
    /// Keys those clients write (`type`, `disabled`, `transport`, `url`, `headers`, …) are
    /// understood, and unknown keys are ignored, so a real client's file works as it is:
    /// `type = "http"` (or `"streamable-http"`) with `url` is an HTTP upstream, and
    /// `disabled: true` entries are skipped. An entry that runs `steadfast proxy` on this same
    /// file and entry is refused: it would wrap itself without end.
    pub fn parse_mcp_servers(
        text: &str,
        file: &str,
        server: Option<&str>,
    ) -> Result<Self, ConfigError> {
        #[derive(Deserialize)]
        struct Doc {
            #[serde(rename = "mcpServers", alias = "servers")]
            mcp_servers: BTreeMap<String, serde_json::Value>,
        }
        #[derive(Deserialize, Default)]
        struct Entry {
            command: Option<String>,
            #[serde(default)]
            args: Vec<String>,
            #[serde(default)]
            env: BTreeMap<String, String>,
            cwd: Option<PathBuf>,
            url: Option<String>,
            #[serde(default)]
            headers: BTreeMap<String, String>,
            #[serde(rename = "type")]
            kind: Option<String>,
            transport: Option<String>,
            #[serde(default)]
            disabled: bool,
        }
        let err = |line: Option<usize>, key: String, message: String| ConfigError {
            file: file.to_owned(),
            line,
            key,
            message,
        };
        let doc: Doc = serde_json::from_str(text)
            .map_err(|e| err(Some(e.line()), String::new(), e.to_string()))?;
        let line_of = |name: &str| {
            text.lines()
                .position(|l| l.contains(&format!("\"{name}\"")))
                .map(|i| i + 1)
        };
        let enabled: Vec<&String> = doc
            .mcp_servers
            .iter()
            .filter(|(_, v)| v.get("disabled").and_then(serde_json::Value::as_bool) != Some(true))
            .map(|(k, _)| k)
            .collect();
        let entry_upstream = |name: &str| -> Result<Upstream, ConfigError> {
            let key = format!("mcpServers.{name}");
            let entry: Entry = serde_json::from_value(doc.mcp_servers[name].clone())
                .map_err(|e| err(line_of(name), key.clone(), e.to_string()))?;
            let _ = entry.disabled;
            let kind = entry
                .kind
                .as_deref()
                .or(entry.transport.as_deref())
                .map(|k| k.to_ascii_lowercase().replace(['_', '-'], ""));
            let raw = match kind.as_deref() {
                Some("http" | "streamablehttp" | "streamable") => RawUpstream {
                    url: entry.url,
                    headers: entry.headers,
                    ..RawUpstream::default()
                },
                Some("sse") => {
                    return Err(err(
                        line_of(name),
                        format!("{key}.type"),
                        "the SSE transport is deprecated and not supported; use the server's streamable HTTP endpoint (type \"http\")".into(),
                    ));
                }
                Some("stdio") | None => RawUpstream {
                    command: entry.command,
                    args: entry.args,
                    env: entry.env,
                    cwd: entry.cwd,
                    url: entry.url,
                    headers: entry.headers,
                },
                Some(other) => {
                    return Err(err(
                        line_of(name),
                        format!("{key}.type"),
                        format!("unknown transport `{other}`: expected \"stdio\" or \"http\""),
                    ));
                }
            };
            if wraps_itself(&raw, file, name) {
                return Err(err(
                    line_of(name),
                    key,
                    "runs `steadfast proxy` on this same file and entry: it would start itself \
                     without end. Point the entry at the real server, and wrap it from another \
                     file or entry"
                        .into(),
                ));
            }
            let upstream = upstream_from(raw, file, text).map_err(|mut e| {
                e.key = e.key.replacen("upstream", &key, 1);
                e.line = e.line.or_else(|| line_of(name));
                e
            })?;
            Ok(upstream)
        };
        let name = match server {
            Some(s) => {
                let Some(v) = doc.mcp_servers.get(s) else {
                    return Err(err(
                        None,
                        format!("mcpServers.{s}"),
                        format!(
                            "no such server (the file has: {})",
                            doc.mcp_servers
                                .keys()
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                };
                if v.get("disabled").and_then(serde_json::Value::as_bool) == Some(true) {
                    return Err(err(
                        line_of(s),
                        format!("mcpServers.{s}"),
                        "is disabled (\"disabled\": true)".into(),
                    ));
                }
                s.to_owned()
            }
            None if enabled.len() == 1 => enabled[0].clone(),
            None if enabled.is_empty() => {
                return Err(err(
                    None,
                    "mcpServers".into(),
                    "has no enabled server".into(),
                ));
            }
            None => {
                // Every enabled entry, behind one endpoint.
                let mut upstreams = Vec::new();
                for name in &enabled {
                    upstreams.push(NamedUpstream {
                        name: (*name).clone(),
                        spec: entry_upstream(name)?,
                        budget: None,
                    });
                }
                let names: Vec<&String> = upstreams.iter().map(|u| &u.name).collect();
                let defaults = Config::default();
                if let Some((_, long, message)) =
                    crate::naming::ambiguous(&names, &defaults.separator)
                {
                    return Err(err(line_of(&long), format!("mcpServers.{long}"), message));
                }
                if let Some(bad) = names
                    .iter()
                    .find(|n| crate::naming::check_upstream_name(n).is_err())
                {
                    let message = crate::naming::check_upstream_name(bad)
                        .err()
                        .unwrap_or_default();
                    return Err(err(line_of(bad), format!("mcpServers.{bad}"), message));
                }
                return Ok(Config {
                    upstreams,
                    ..defaults
                });
            }
        };
        Ok(Config {
            upstream: Some(entry_upstream(&name)?),
            ..Config::default()
        })
    }

    /// Tool names the config gives settings for by exact name (not by glob).
    pub fn exact_tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().filter_map(|(p, _)| match p {
            Pattern::Exact(n) => Some(n.as_str()),
            Pattern::Glob(..) => None,
        })
    }

    /// `[tasks]` Whether any tool may be durable (`durable = true` in the defaults or any tool
    /// table): only then is the task store opened.
    pub fn any_durable(&self) -> bool {
        self.defaults.durable == Some(true)
            || self.tools.iter().any(|(_, s)| s.durable == Some(true))
    }

    /// How the upstream is connected, supervised and bounded.
    pub fn upstream_settings(&self) -> crate::upstream::Settings {
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

/// serde's "expected a duration" says nothing of the form a duration takes.
fn with_duration_hint(message: &str) -> String {
    if message.contains("duration") {
        format!(
            "{message}: write a positive number with a unit, such as \"250ms\", \"30s\", \"5m\" or \"1h\""
        )
    } else {
        message.to_owned()
    }
}

/// Whether an entry runs this proxy on this same config file and entry.
fn wraps_itself(u: &RawUpstream, file: &str, name: &str) -> bool {
    let Some(command) = &u.command else {
        return false;
    };
    let program = Path::new(command)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default();
    if !program.starts_with("steadfast") || !u.args.iter().any(|a| a == "proxy") {
        return false;
    }
    let same = |a: &str| {
        let a = Path::new(a).canonicalize().ok();
        a.is_some() && a == Path::new(file).canonicalize().ok()
    };
    let arg_after = |flags: &[&str]| {
        u.args
            .iter()
            .position(|a| flags.contains(&a.as_str()))
            .and_then(|i| u.args.get(i + 1))
            .cloned()
            .or_else(|| {
                u.args.iter().find_map(|a| {
                    flags
                        .iter()
                        .find_map(|f| a.strip_prefix(&format!("{f}=")).map(str::to_owned))
                })
            })
    };
    let config_is_this = arg_after(&["--config", "-c"]).is_some_and(|c| same(&c));
    let server = arg_after(&["--server"]);
    config_is_this && server.is_none_or(|s| s == name)
}

fn upstream_from(u: RawUpstream, file: &str, text: &str) -> Result<Upstream, ConfigError> {
    upstream_in(u, file, text, "upstream")
}

fn upstream_in(
    u: RawUpstream,
    file: &str,
    text: &str,
    table: &str,
) -> Result<Upstream, ConfigError> {
    let err = |key: &str, message: &str| ConfigError {
        file: file.to_owned(),
        line: find_key_line(text, table, key),
        key: format!("{table}.{key}"),
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
    fn attempts_time_out_after_a_silent_minute_unless_lifted() {
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
        // Without --server, every enabled entry, behind one endpoint.
        let c = Config::parse_mcp_servers(json, "claude.json", None).unwrap();
        assert!(c.upstream.is_none());
        let names: Vec<&str> = c.upstreams.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["remote", "weather"]);
        let e = Config::parse_mcp_servers("{\"mcpServers\": {\n\"a\": 3}}", "c.json", None)
            .unwrap_err();
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn with_defaults_a_silent_tool_is_answered_within_three_minutes() {
        let c = Config::default();
        let p = c.tool("anything").policy;
        let budget = p
            .engine_policy()
            .max_elapsed()
            .expect("a default time budget");
        assert!(budget <= Duration::from_secs(180), "{budget:?}");
        // Each attempt is cut by its idle timeout well before that.
        assert!(p.idle_timeout().unwrap() * 2 < budget);
    }

    #[test]
    fn real_client_files_with_their_own_keys_work() {
        let json = r#"{"mcpServers": {
            "files": {"type": "stdio", "command": "npx", "args": ["-y", "server-filesystem", "/tmp"], "disabled": false, "autoApprove": [], "timeout": 60},
            "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X": "y"}},
            "streamy": {"transport": "streamable-http", "url": "http://127.0.0.1:9/mcp"},
            "off": {"command": "nothing", "disabled": true},
            "broken": {"args": "not a list"}
        }}"#;
        let c = Config::parse_mcp_servers(json, "mcp.json", Some("files")).unwrap();
        assert_eq!(
            c.upstream.unwrap().to_string(),
            "npx -y server-filesystem /tmp"
        );
        for name in ["remote", "streamy"] {
            let c = Config::parse_mcp_servers(json, "mcp.json", Some(name)).unwrap();
            assert!(matches!(c.upstream, Some(Upstream::Http { .. })), "{name}");
        }
        let e = Config::parse_mcp_servers(json, "mcp.json", Some("off")).unwrap_err();
        assert!(e.to_string().contains("disabled"), "{e}");
        // A broken entry only fails when it is the one chosen.
        let e = Config::parse_mcp_servers(json, "mcp.json", Some("broken")).unwrap_err();
        assert!(e.to_string().contains("mcpServers.broken"), "{e}");
        // Without --server, disabled entries do not count.
        let one =
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "disabled": true}}}"#;
        let c = Config::parse_mcp_servers(one, "mcp.json", None).unwrap();
        assert_eq!(c.upstream.unwrap().to_string(), "x");
    }

    #[test]
    fn an_entry_that_wraps_itself_is_refused() {
        let dir = std::env::temp_dir().join(format!("steadfast-selfwrap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mcp.json");
        let json = format!(
            r#"{{"mcpServers": {{"me": {{"command": "/usr/local/bin/steadfast", "args": ["proxy", "--config", "{}", "--server", "me"]}},
                "other": {{"command": "steadfast", "args": ["proxy", "--config", "{}", "--server", "real"]}},
                "real": {{"command": "python3", "args": ["s.py"]}}}}}}"#,
            path.display(),
            path.display()
        );
        std::fs::write(&path, &json).unwrap();
        let file = path.display().to_string();
        let e = Config::parse_mcp_servers(&json, &file, Some("me")).unwrap_err();
        assert!(e.to_string().contains("would start itself"), "{e}");
        // Wrapping another entry of the same file is a chain, not a loop.
        assert!(Config::parse_mcp_servers(&json, &file, Some("other")).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_validation_error_is_reported_and_durations_say_their_form() {
        let text = "[defaults]\nretry = { max_attempts = 0 }\n[tools.x]\nretry = { base_delay = \"5s\", max_delay = \"3s\" }\n[proxy]\nmax_in_flight = 0\n";
        let errors = Config::parse_toml_all(text, "t.toml").unwrap_err();
        let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(all.len(), 3, "{all:#?}");
        assert!(
            all[0].starts_with("t.toml:2: defaults.retry.max_attempts"),
            "{}",
            all[0]
        );
        assert!(
            all[1].contains("tools.x.retry") && all[1].contains("5s > 3s"),
            "{}",
            all[1]
        );
        assert!(all[2].contains("proxy.max_in_flight"), "{}", all[2]);
        for bad in ["\"-5s\"", "\"250\""] {
            let e = Config::parse_toml(&format!("[proxy]\nreconnect_wait = {bad}\n"), "t.toml")
                .unwrap_err();
            assert!(e.to_string().contains("\"250ms\""), "{e}");
        }
    }

    #[test]
    fn a_second_breaker_for_one_dependency_is_warned_about() {
        let text = "[tools.a]\ndependency = \"db\"\nbreaker = { failure_threshold = 3 }\n[tools.b]\ndependency = \"db\"\nbreaker = { failure_threshold = 9 }\n";
        let c = Config::parse_toml(text, "t.toml").unwrap();
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("`db`"));
    }

    /// The field names a serde struct asks for, read by a deserializer that only listens.
    fn field_names<T: serde::de::DeserializeOwned>() -> Vec<&'static str> {
        use serde::de::{Error as _, Visitor};
        struct Listen<'a>(&'a mut Vec<&'static str>);
        impl<'de> serde::Deserializer<'de> for Listen<'_> {
            type Error = serde::de::value::Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
                Err(Self::Error::custom("listening"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                self.0.extend_from_slice(fields);
                Err(Self::Error::custom("listening"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
                enum identifier ignored_any
            }
        }
        let mut names = Vec::new();
        let _ = T::deserialize(Listen(&mut names));
        names
    }

    #[test]
    fn every_config_key_is_documented() {
        let doc = include_str!("../../../docs/config.md");
        let mut keys = Vec::new();
        keys.extend(field_names::<RawConfig>());
        keys.extend(field_names::<RawUpstream>());
        keys.extend(field_names::<RawNamedUpstream>());
        keys.extend(field_names::<RawProxy>());
        keys.extend(field_names::<ToolSettings>());
        keys.extend(field_names::<RetryPolicyBuilder>());
        keys.extend(field_names::<BreakerConfigBuilder>());
        keys.extend(field_names::<BudgetConfigBuilder>());
        keys.extend(field_names::<Limits>());
        keys.extend(field_names::<Cap>());
        keys.extend(field_names::<crate::tasks::RawTasks>());
        #[cfg(feature = "redis")]
        keys.extend(field_names::<steadfast_redis::StateConfig>());
        assert!(keys.len() > 40, "introspection found only {keys:?}");
        let missing: Vec<_> = keys
            .iter()
            .filter(|k| !doc.contains(&format!("`{k}`")) && !doc.contains(&format!("[{k}]")))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/config.md does not document {missing:?}"
        );
        // And its complete example is a valid config.
        let example = doc
            .split("```toml")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("docs/config.md has a TOML example");
        Config::parse_toml(example, "docs/config.md").unwrap();
    }

    const TWO: &str =
        "[upstreams.github]\ncommand = \"gh-mcp\"\n\n[upstreams.files]\ncommand = \"fs-mcp\"\n";

    #[test]
    fn several_upstreams_are_named_and_their_tool_settings_namespaced() {
        let c = Config::parse_toml(
            &format!(
                "{TWO}\n[upstreams.github.tools.create_issue]\nretry = {{ max_attempts = 7 }}\n\
                 [upstreams.files.tools.\"read_*\"]\nretry = {{ max_attempts = 2 }}\n\
                 [upstreams.files.budget]\nretry_ratio = 0.5\n\n[upstreams.off]\ncommand = \"x\"\ndisabled = true\n"
            ),
            "gw.toml",
        )
        .unwrap();
        assert!(c.upstream.is_none());
        let names: Vec<&str> = c.upstreams.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["files", "github"]);
        assert_eq!(c.separator, "_");
        let max = |tool: &str| c.tool(tool).policy.engine_policy().max_attempts();
        assert_eq!(max("github_create_issue"), 7);
        assert_eq!(max("files_read_text"), 2);
        assert_eq!(max("files_write"), 3);
        assert!(c.upstreams[0].budget.is_some());
        assert!(c.upstreams[1].budget.is_none());
    }

    #[test]
    fn ambiguous_or_mixed_upstreams_are_refused_where_they_are() {
        let e = error("[upstreams.a]\ncommand = \"x\"\n\n[upstreams.a_b]\ncommand = \"y\"\n");
        assert!(e.starts_with("steadfast.toml:4: upstreams.a_b:"), "{e}");
        assert!(e.contains("could belong to either"), "{e}");
        // A longer separator resolves it.
        Config::parse_toml(
            "[proxy]\nseparator = \"__\"\n[upstreams.a]\ncommand = \"x\"\n[upstreams.a_b]\ncommand = \"y\"\n",
            "t.toml",
        )
        .unwrap();
        let e = error("[upstream]\ncommand = \"x\"\n\n[upstreams.b]\ncommand = \"y\"\n");
        assert!(e.starts_with("steadfast.toml:1: upstream:"), "{e}");
        assert!(e.contains("not both"), "{e}");
        let e = error("[proxy]\nseparator = \".\"\n");
        assert!(e.starts_with("steadfast.toml:2: proxy.separator:"), "{e}");
        let e = error("[upstreams.b]\nurl = \"ftp://x\"\n");
        assert!(e.starts_with("steadfast.toml:2: upstreams.b.url:"), "{e}");
        let e = error("[upstreams.b]\ncommand = \"y\"\nbudget = { retry_ratio = -1.0 }\n");
        assert!(e.contains("upstreams.b.budget.retry_ratio"), "{e}");
        let e = error("[proxy]\nlist_timeout = \"0s\"\n");
        assert!(
            e.contains("proxy.list_timeout: must be longer than 0s"),
            "{e}"
        );
    }
}
