//! The config file as serde reads it: every table's raw shape, before validation. Types here
//! are `Option` so tables layer (defaults, globs, exact names) and so a missing key can be told
//! from a given one; `parse.rs` validates them into [`Config`](super::Config).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use steadfast::{
    BreakerConfig, BreakerConfigBuilder, BudgetConfigBuilder, PolicyError, RetryPolicy,
    RetryPolicyBuilder,
};
use steadfast_mcp::{RetryOnIsError, ToolPolicy};

use super::{
    CallLimits, PROXY_IDLE_TIMEOUT, PROXY_MAX_ELAPSED, Ready, ResolvedTool, auth, tasks, telemetry,
};

/// `breaker = false`, `breaker = true`, or `breaker = { … }`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum BreakerSetting {
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
pub(super) struct ToolSettings {
    pub(super) retry: Option<RetryPolicyBuilder>,
    #[serde(default, with = "humantime_serde")]
    pub(super) attempt_max: Option<Duration>,
    pub(super) retry_on_is_error: Option<RetryOnIsError>,
    pub(super) retry_ambiguous: Option<bool>,
    pub(super) breaker: Option<BreakerSetting>,
    pub(super) dependency: Option<String>,
    /// `[tasks]` Run calls as durable MCP tasks when the client asks for a task.
    pub(super) durable: Option<bool>,
}

impl ToolSettings {
    pub(super) fn layer(&self, over: &ToolSettings) -> ToolSettings {
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

    pub(super) fn resolve(&self) -> Result<ResolvedTool, (&'static str, PolicyError)> {
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
pub(super) struct RawUpstream {
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) url: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    /// The gateway's own client-credentials token for an HTTP upstream.
    pub(super) oauth: Option<auth::RawUpstreamOAuth>,
}

/// `[upstreams.NAME]`: an upstream's connection, and settings that apply to its tools only.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNamedUpstream {
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) url: Option<String>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    /// The gateway's own client-credentials token for an HTTP upstream.
    pub(super) oauth: Option<auth::RawUpstreamOAuth>,
    /// Skipped when true (as an `mcpServers` entry's `disabled`).
    #[serde(default)]
    pub(super) disabled: bool,
    /// This upstream's own retry budget instead of a copy of `[budget]`.
    pub(super) budget: Option<BudgetConfigBuilder>,
    /// Per-tool settings by the upstream's own tool names (or globs).
    #[serde(default)]
    pub(super) tools: BTreeMap<String, ToolSettings>,
}

impl RawNamedUpstream {
    pub(super) fn connection(&self) -> RawUpstream {
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

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProxy {
    pub(super) health_tool: Option<String>,
    #[serde(default, with = "humantime_serde")]
    pub(super) reconnect_wait: Option<Duration>,
    pub(super) connect: Option<RetryPolicyBuilder>,
    pub(super) restart: Option<RetryPolicyBuilder>,
    #[serde(default, with = "humantime_serde")]
    pub(super) init_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) request_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub(super) shutdown_grace: Option<Duration>,
    pub(super) max_message_size: Option<usize>,
    pub(super) max_request_size: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    pub(super) drain_timeout: Option<Duration>,
    pub(super) max_in_flight: Option<usize>,
    pub(super) max_queued_notifications: Option<usize>,
    pub(super) max_listens: Option<usize>,
    pub(super) separator: Option<String>,
    #[serde(default, with = "humantime_serde")]
    pub(super) list_timeout: Option<Duration>,
    pub(super) ready: Option<Ready>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) upstream: Option<RawUpstream>,
    #[serde(default)]
    pub(super) upstreams: BTreeMap<String, RawNamedUpstream>,
    #[serde(default)]
    pub(super) limits: CallLimits,
    #[cfg(feature = "redis")]
    #[serde(default)]
    pub(super) state: steadfast_redis::StateConfig,
    #[serde(default)]
    pub(super) proxy: RawProxy,
    #[serde(default)]
    pub(super) defaults: ToolSettings,
    pub(super) budget: Option<BudgetConfigBuilder>,
    #[serde(default)]
    pub(super) tools: BTreeMap<String, ToolSettings>,
    /// `[tasks]` Where durable tool calls are kept.
    #[serde(default)]
    pub(super) tasks: tasks::RawTasks,
    /// `[auth]` OAuth 2.1 resource server on the HTTP front.
    pub(super) auth: Option<auth::RawAuth>,
    /// `[access."…"]` what each scope or claim grants.
    #[serde(default)]
    pub(super) access: BTreeMap<String, auth::AccessRule>,
    /// `[telemetry]` OTLP trace export.
    #[serde(default)]
    pub(super) telemetry: telemetry::RawTelemetry,
}
