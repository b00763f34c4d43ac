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

pub mod auth;
pub mod limits;
mod locate;
mod mcp_servers;
pub mod settings;
pub mod tasks;
pub mod telemetry;

use locate::{find_key_line, locate_offset, quote_key, with_duration_hint};
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
    /// The gateway's own client-credentials token for an HTTP upstream.
    oauth: Option<auth::RawUpstreamOAuth>,
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
    /// The gateway's own client-credentials token for an HTTP upstream.
    oauth: Option<auth::RawUpstreamOAuth>,
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
            oauth: self.oauth.clone(),
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
    tasks: tasks::RawTasks,
    /// `[auth]` OAuth 2.1 resource server on the HTTP front.
    auth: Option<auth::RawAuth>,
    /// `[access."…"]` what each scope or claim grants.
    #[serde(default)]
    access: BTreeMap<String, auth::AccessRule>,
    /// `[telemetry]` OTLP trace export.
    #[serde(default)]
    telemetry: telemetry::RawTelemetry,
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
    pub limits: limits::Limits,
    /// Tool-call caps (`[limits]`).
    pub call_limits: Limits,
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
            .unwrap_or_else(|| crate::wire::naming::DEFAULT_SEPARATOR.to_owned());
        if let Err(message) = crate::wire::naming::check_separator(&separator) {
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
            if let Err(message) = crate::wire::naming::check_upstream_name(name) {
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
            let prefix = crate::wire::naming::prefix(name);
            for (tool, settings) in &u.tools {
                let pattern = if tool.contains(['*', '?', '[', '{']) {
                    // Glob syntax stays; other characters change as the names clients see do.
                    let glob: String = tool
                        .chars()
                        .map(|c| {
                            if crate::wire::naming::allowed(c) || "*?[]{},!".contains(c) {
                                c
                            } else {
                                '_'
                            }
                        })
                        .collect();
                    format!("{prefix}{separator}{glob}")
                } else {
                    crate::wire::naming::exposed(&prefix, &separator, tool)
                };
                tool_entries.push((
                    pattern,
                    format!("{table}.tools.{}", quote_key(tool)),
                    settings.clone(),
                ));
            }
        }
        let names: Vec<&String> = upstreams.iter().map(|u| &u.name).collect();
        if let Some((_, long, message)) = crate::wire::naming::ambiguous(&names, &separator) {
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
            tasks::TasksConfig::default()
        });
        let auth = check_auth(&raw, file, text, &mut errors);
        let upstream_oauth = check_upstream_oauth(&raw, file, text, &mut errors);
        // [telemetry] OTLP export.
        if let Err(found) = raw.telemetry.validate() {
            for (key, message) in found {
                errors.push(ConfigError {
                    file: file.to_owned(),
                    line: find_key_line(text, "telemetry", key),
                    key: format!("telemetry.{key}"),
                    message,
                });
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let reconnect_wait = p.reconnect_wait.unwrap_or(Duration::from_secs(10));
        let defaults = settings::Settings::default();
        let settings = settings::Settings {
            init_timeout: p.init_timeout.unwrap_or(defaults.init_timeout),
            reconnect_wait,
            connect: connect.clone(),
            restart: restart.clone(),
            max_message_size: p.max_message_size.unwrap_or(defaults.max_message_size),
            request_timeout: p.request_timeout.unwrap_or(defaults.request_timeout),
            shutdown_grace: p.shutdown_grace.unwrap_or(defaults.shutdown_grace),
            ..defaults
        };
        let limit_defaults = limits::Limits::default();
        let limits = limits::Limits {
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
            auth,
            access: raw.access,
            upstream_oauth,
            telemetry: raw.telemetry.clone(),
            settings,
            warnings,
            defaults: raw.defaults,
            tools,
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
    pub fn upstream_settings(&self) -> settings::Settings {
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

/// `[auth]` and `[access]`: validated, each problem pushed as `file:line: key: message`.
fn check_auth(
    raw: &RawConfig,
    file: &str,
    text: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<auth::AuthConfig> {
    let at = |table: &str, key: &str, message: String| ConfigError {
        file: file.to_owned(),
        line: find_key_line(text, table, key),
        key: if key.is_empty() {
            table.to_owned()
        } else {
            format!("{table}.{key}")
        },
        message,
    };
    for (key, field, message) in auth::check_access(&raw.access) {
        errors.push(at(&format!("access.{}", quote_key(&key)), field, message));
    }
    if raw.auth.is_none() && !raw.access.is_empty() {
        errors.push(at(
            "access",
            "",
            "needs an [auth] table (access rules apply to its tokens)".into(),
        ));
    }
    match raw.auth.as_ref()?.validate() {
        Ok(a) => Some(a),
        Err(found) => {
            for (key, message) in found {
                errors.push(at("auth", key, message));
            }
            None
        }
    }
}

/// `oauth = { … }` of each HTTP upstream: validated, by upstream name.
fn check_upstream_oauth(
    raw: &RawConfig,
    file: &str,
    text: &str,
    errors: &mut Vec<ConfigError>,
) -> BTreeMap<String, auth::UpstreamOAuth> {
    let single = raw
        .upstream
        .iter()
        .map(|u| ("upstream".to_owned(), "upstream".to_owned(), u.clone()));
    let named = raw
        .upstreams
        .iter()
        .filter(|(_, u)| !u.disabled)
        .map(|(n, u)| {
            (
                n.clone(),
                format!("upstreams.{}", quote_key(n)),
                u.connection(),
            )
        });
    let mut found = BTreeMap::new();
    for (name, table, u) in single.chain(named) {
        let Some(o) = &u.oauth else { continue };
        let at = |key: &str, message: String| ConfigError {
            file: file.to_owned(),
            line: find_key_line(text, &table, "oauth"),
            key: if key.is_empty() {
                format!("{table}.oauth")
            } else {
                format!("{table}.oauth.{key}")
            },
            message,
        };
        if u.url.is_none() {
            errors.push(at("", "only an HTTP upstream (`url`) takes `oauth`".into()));
            continue;
        }
        match o.validate() {
            Ok(v) => {
                found.insert(name, v);
            }
            Err((key, message)) => errors.push(at(key, message)),
        }
    }
    found
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

#[cfg(test)]
mod tests;
