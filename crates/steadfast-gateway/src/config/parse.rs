//! TOML text to a validated [`Config`]: one function per table, each pushing its problems as
//! `file:line: key: message`, and a short driver that calls them in the file's order (so the
//! first error reported is the one it always was) and builds the config when none was found.

use std::collections::BTreeMap;
use std::time::Duration;

use globset::Glob;
use steadfast::{BudgetConfig, PolicyError, RetryPolicy, RetryPolicyBuilder};
use steadfast_mcp::Upstream;

use super::auth::{AuthConfig, UpstreamOAuth, check_access};
use super::locate::{find_key_line, locate_offset, quote_key, with_duration_hint};
use super::raw::{RawConfig, RawUpstream, ToolSettings};
use super::{
    Config, ConfigError, DEFAULT_LIST_TIMEOUT, NamedUpstream, Pattern, limits, settings, tasks,
};
use crate::wire::naming;

/// A tool settings table to check: the pattern on the names clients see, its table (for
/// errors) and its settings.
type ToolEntry = (String, String, ToolSettings);

/// The text being parsed and the errors found so far.
struct Check<'a> {
    file: &'a str,
    text: &'a str,
    errors: Vec<ConfigError>,
}

impl Check<'_> {
    /// An error at `key` of `table` (the table itself when `key` is empty), with `key_path`
    /// the dotted key shown.
    fn push(&mut self, table: &str, key: &str, key_path: String, message: String) {
        self.errors.push(ConfigError {
            file: self.file.to_owned(),
            line: find_key_line(self.text, table, key),
            key: key_path,
            message,
        });
    }

    /// A policy's constraint broken in `table` (`sub` names its sub-table, if any).
    fn policy(&mut self, table: &str, sub: &str, e: PolicyError) {
        let key = if sub.is_empty() {
            format!("{table}.{}", e.field())
        } else {
            format!("{table}.{sub}.{}", e.field())
        };
        self.push(table, e.field(), key, format!("must {}", e.constraint()));
    }

    /// `[upstream]`: the one server.
    fn single_upstream(&mut self, raw: &RawConfig) -> Option<Upstream> {
        let u = raw.upstream.clone()?;
        upstream_from(u, self.file, self.text)
            .map_err(|e| self.errors.push(e))
            .ok()
    }

    /// `[proxy] separator`, and `[upstream]` with `[upstreams.*]` refused.
    fn separator(&mut self, raw: &RawConfig) -> String {
        let separator = raw
            .proxy
            .separator
            .clone()
            .unwrap_or_else(|| naming::DEFAULT_SEPARATOR.to_owned());
        if let Err(message) = naming::check_separator(&separator) {
            self.push("proxy", "separator", "proxy.separator".into(), message);
        }
        if raw.upstream.is_some() && !raw.upstreams.is_empty() {
            self.push(
                "upstream",
                "",
                "upstream".into(),
                "give either [upstream] (one server; its tools keep their names) or \
                 [upstreams.NAME] tables (several; tools are namespaced), not both"
                    .into(),
            );
        }
        separator
    }

    /// `[upstreams.NAME]`: the servers, and their per-tool settings as patterns on the names
    /// clients see, after the `[tools.*]` entries.
    fn named_upstreams(
        &mut self,
        raw: &RawConfig,
        separator: &str,
    ) -> (Vec<NamedUpstream>, Vec<ToolEntry>) {
        let mut upstreams = Vec::new();
        let mut tool_entries: Vec<ToolEntry> = raw
            .tools
            .iter()
            .map(|(n, s)| (n.clone(), format!("tools.{}", quote_key(n)), s.clone()))
            .collect();
        for (name, u) in raw.upstreams.iter().filter(|(_, u)| !u.disabled) {
            let table = format!("upstreams.{}", quote_key(name));
            if let Err(message) = naming::check_upstream_name(name) {
                self.push(&table, "", table.clone(), message);
            }
            let budget = self.budget(&table, "budget", u.budget.as_ref());
            match upstream_in(u.connection(), self.file, self.text, &table) {
                Ok(spec) => upstreams.push(NamedUpstream {
                    name: name.clone(),
                    spec,
                    budget,
                }),
                Err(e) => self.errors.push(e),
            }
            let prefix = naming::prefix(name);
            for (tool, settings) in &u.tools {
                tool_entries.push((
                    tool_pattern(&prefix, separator, tool),
                    format!("{table}.tools.{}", quote_key(tool)),
                    settings.clone(),
                ));
            }
        }
        let names: Vec<&String> = upstreams.iter().map(|u| &u.name).collect();
        if let Some((_, long, message)) = naming::ambiguous(&names, separator) {
            let table = format!("upstreams.{}", quote_key(&long));
            self.push(&table, "", table.clone(), message);
        }
        (upstreams, tool_entries)
    }

    /// A retry budget table, built.
    fn budget(
        &mut self,
        table: &str,
        sub: &str,
        b: Option<&steadfast::BudgetConfigBuilder>,
    ) -> Option<BudgetConfig> {
        match b.map(|b| b.build()) {
            Some(Ok(b)) => Some(b),
            Some(Err(e)) => {
                self.policy(table, sub, e);
                None
            }
            None => None,
        }
    }

    /// `[defaults]` and every tool table, each checked layered on valid defaults (so one bad
    /// default is reported once). Two tables that configure different breakers for one
    /// dependency are an error: a dependency has one breaker, and which configuration it got
    /// would depend on which tool was called first.
    fn tools(
        &mut self,
        raw: &RawConfig,
        tool_entries: Vec<ToolEntry>,
    ) -> Vec<(Pattern, ToolSettings)> {
        let base = match raw.defaults.resolve() {
            Ok(_) => raw.defaults.clone(),
            Err((sub, e)) => {
                self.policy("defaults", sub, e);
                ToolSettings::default()
            }
        };
        let mut tools = Vec::new();
        let mut breaker_owner: BTreeMap<String, (String, Option<steadfast::BreakerConfig>)> =
            BTreeMap::new();
        for (name, table, settings) in tool_entries {
            let resolved = match base.layer(&settings).resolve() {
                Ok(r) => r,
                Err((sub, e)) => {
                    self.policy(&table, sub, e);
                    continue;
                }
            };
            if let (Some(dep), Some(_)) = (&settings.dependency, &settings.breaker) {
                match breaker_owner.get(dep) {
                    Some((first, breaker)) if *breaker != resolved.breaker => self.push(
                        &table,
                        "breaker",
                        format!("{table}.breaker"),
                        format!(
                            "{first} and {table} configure different breakers for dependency \
                             `{dep}`; the tools of a dependency share one breaker, so configure \
                             it the same in both (or in one table only)"
                        ),
                    ),
                    Some(_) => {}
                    None => {
                        breaker_owner.insert(dep.clone(), (table.clone(), resolved.breaker));
                    }
                }
            }
            let pattern = if name.contains(['*', '?', '[', '{']) {
                match Glob::new(&name) {
                    Ok(glob) => Pattern::Glob(name, glob.compile_matcher()),
                    Err(e) => {
                        self.push(&table, "", table.clone(), format!("invalid glob: {e}"));
                        continue;
                    }
                }
            } else {
                Pattern::Exact(name)
            };
            tools.push((pattern, settings));
        }
        tools
    }

    /// `[proxy] connect` and `restart` layered on the defaults, then `[budget]`.
    fn policies(&mut self, raw: &RawConfig) -> (RetryPolicy, RetryPolicy, Option<BudgetConfig>) {
        let connect = connect_default()
            .layer(&raw.proxy.connect.clone().unwrap_or_default())
            .build()
            .unwrap_or_else(|e| {
                self.policy("proxy", "connect", e);
                steadfast_mcp::default_connect_policy()
            });
        let restart = restart_default()
            .layer(&raw.proxy.restart.clone().unwrap_or_default())
            .build()
            .unwrap_or_else(|e| {
                self.policy("proxy", "restart", e);
                steadfast_mcp::default_reconnect_policy()
            });
        let budget = self.budget("budget", "", raw.budget.as_ref());
        (connect, restart, budget)
    }

    /// `[proxy]`'s scalars: a named health tool, sizes of at least 1, durations above zero.
    fn proxy_values(&mut self, raw: &RawConfig) {
        let p = &raw.proxy;
        if p.health_tool.as_ref().is_some_and(|n| n.trim().is_empty()) {
            self.push(
                "proxy",
                "health_tool",
                "proxy.health_tool".into(),
                "must not be empty".into(),
            );
        }
        for (key, v) in [
            ("max_message_size", p.max_message_size),
            ("max_request_size", p.max_request_size),
            ("max_in_flight", p.max_in_flight),
            ("max_queued_notifications", p.max_queued_notifications),
            ("max_listens", p.max_listens),
        ] {
            if v == Some(0) {
                self.push(
                    "proxy",
                    key,
                    format!("proxy.{key}"),
                    "must be at least 1".into(),
                );
            }
        }
        for (key, d) in [
            ("init_timeout", p.init_timeout),
            ("request_timeout", p.request_timeout),
            ("list_timeout", p.list_timeout),
        ] {
            if d == Some(Duration::ZERO) {
                self.push(
                    "proxy",
                    key,
                    format!("proxy.{key}"),
                    "must be longer than 0s".into(),
                );
            }
        }
    }

    /// `[limits]` and (with Redis) `[state]`.
    fn limits_and_state(&mut self, raw: &RawConfig) {
        if raw.limits.any()
            && let Err(e) = raw.limits.build(steadfast::MemoryCounter::new())
        {
            self.policy("limits", "", e);
        }
        #[cfg(feature = "redis")]
        if let Err(e) = raw.state.validate() {
            self.errors.push(ConfigError {
                file: self.file.to_owned(),
                line: find_key_line(self.text, "state", "redis")
                    .or_else(|| find_key_line(self.text, "state", "")),
                key: "state".into(),
                message: e.to_string(),
            });
        }
    }

    /// A table whose own validation returns `(key, message)` pairs (`[tasks]`, `[telemetry]`).
    fn table_found(&mut self, table: &str, found: Vec<(&str, String)>) {
        for (key, message) in found {
            self.push(table, key, format!("{table}.{key}"), message);
        }
    }
}

/// `[upstreams.NAME.tools."…"]` as a pattern on the names clients see: glob syntax stays;
/// other characters change as the names clients see do.
fn tool_pattern(prefix: &str, separator: &str, tool: &str) -> String {
    if tool.contains(['*', '?', '[', '{']) {
        let glob: String = tool
            .chars()
            .map(|c| {
                if naming::allowed(c) || "*?[]{},!".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{prefix}{separator}{glob}")
    } else {
        naming::exposed(prefix, separator, tool)
    }
}

impl Config {
    /// Parses TOML text and reports every validation error (a syntax or type error stops the
    /// parse where it is, so it comes alone).
    pub fn parse_toml_all(text: &str, file: &str) -> Result<Self, Vec<ConfigError>> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| {
            let (line, key) = e
                .span()
                .map(|s| locate_offset(text, s.start))
                .unwrap_or((None, String::new()));
            vec![ConfigError {
                file: file.to_owned(),
                line,
                key,
                message: with_duration_hint(e.message().trim()),
            }]
        })?;
        let mut cx = Check {
            file,
            text,
            errors: Vec::new(),
        };
        let upstream = cx.single_upstream(&raw);
        let separator = cx.separator(&raw);
        let (upstreams, tool_entries) = cx.named_upstreams(&raw, &separator);
        let tools = cx.tools(&raw, tool_entries);
        let (connect, restart, budget) = cx.policies(&raw);
        cx.proxy_values(&raw);
        cx.limits_and_state(&raw);
        // [tasks] the store, TTL and intervals of durable tool calls.
        let tasks = raw.tasks.validate().unwrap_or_else(|found| {
            cx.table_found("tasks", found);
            tasks::TasksConfig::default()
        });
        let auth = check_auth(&raw, file, text, &mut cx.errors);
        let upstream_oauth = check_upstream_oauth(&raw, file, text, &mut cx.errors);
        // [telemetry] OTLP export.
        if let Err(found) = raw.telemetry.validate() {
            cx.table_found("telemetry", found);
        }
        if !cx.errors.is_empty() {
            return Err(cx.errors);
        }
        let p = &raw.proxy;
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
            drain_timeout: p.drain_timeout.unwrap_or(defaults.drain_timeout),
            ..defaults
        };
        let limit_defaults = limits::SessionLimits::default();
        let limits = limits::SessionLimits {
            max_in_flight: p.max_in_flight.unwrap_or(limit_defaults.max_in_flight),
            max_queued_notifications: p
                .max_queued_notifications
                .unwrap_or(limit_defaults.max_queued_notifications),
            max_listens: p.max_listens.unwrap_or(limit_defaults.max_listens),
            // A config that lowered max_message_size meant both ways, as it used to.
            max_request_size: p.max_request_size.unwrap_or(
                limit_defaults
                    .max_request_size
                    .min(settings.max_message_size),
            ),
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
            warnings: Vec::new(),
            defaults: raw.defaults,
            tools,
        })
    }
}

/// `[auth]` and `[access]`: validated, each problem pushed as `file:line: key: message`.
fn check_auth(
    raw: &RawConfig,
    file: &str,
    text: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<AuthConfig> {
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
    for (key, field, message) in check_access(&raw.access) {
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
) -> BTreeMap<String, UpstreamOAuth> {
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

fn restart_default() -> RetryPolicyBuilder {
    steadfast_mcp::default_reconnect_policy().to_builder()
}

fn connect_default() -> RetryPolicyBuilder {
    steadfast_mcp::default_connect_policy().to_builder()
}

pub(super) fn upstream_from(
    u: RawUpstream,
    file: &str,
    text: &str,
) -> Result<Upstream, ConfigError> {
    upstream_in(u, file, text, "upstream")
}

pub(super) fn upstream_in(
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
