//! One upstream or several, decided once when the router is built ([`Topology`]).
//!
//! What differs between the two lives behind this one decision: how names are mapped (the
//! router's `resolve`/`expose`), what `initialize` answers ([`Topology::init_result`]), what
//! the health tool reports ([`Topology::health`]), and which path a session takes for a
//! request (the single-upstream relay, `session/relay.rs`, or the gathering over several,
//! `session/gather.rs`). A reload cannot change it: going from one upstream to several
//! renames every tool under the clients, so that takes a restart.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::route::upstream_route::Route;

/// The upstreams a front serves: one (names unchanged) or several (namespaced).
#[derive(Debug, Clone)]
pub enum UpstreamSet {
    /// One server: the drop-in proxy.
    One(steadfast_mcp::Upstream),
    /// Several, by name (`[upstreams.NAME]`, or every enabled `mcpServers` entry).
    Named(Vec<crate::config::NamedUpstream>),
}

impl From<steadfast_mcp::Upstream> for UpstreamSet {
    fn from(u: steadfast_mcp::Upstream) -> Self {
        Self::One(u)
    }
}

impl UpstreamSet {
    /// The upstreams `config` names (several win over one), if any.
    pub fn from_config(config: &crate::Config) -> Option<Self> {
        if !config.upstreams.is_empty() {
            return Some(Self::Named(config.upstreams.clone()));
        }
        config.upstream.clone().map(Self::One)
    }
}

/// How the endpoint presents its upstreams, from the [`UpstreamSet`] it was built with.
#[derive(Debug)]
pub(crate) enum Topology {
    /// One upstream: the drop-in proxy. Every name passes unchanged and every request is
    /// relayed to it as it is. Held here so a call finds it without looking at the set.
    Single(Arc<Route>),
    /// Several: tools and prompts listed as `{prefix}{separator}{name}`, lists gathered from
    /// each, and every other request routed by the name or URI it carries.
    Namespaced {
        /// Between an upstream's prefix and its tool's own name.
        separator: String,
    },
}

impl Topology {
    /// Whether names clients see differ from the upstreams' own, so a `tools/call`'s params
    /// must be decoded to rewrite the name.
    pub(crate) fn renames(&self) -> bool {
        matches!(self, Self::Namespaced { .. })
    }

    /// The `initialize` result a client gets (before the session's extension amends it): the
    /// upstream's own, with the tools capability added when only the health tool provides
    /// tools; with several, what the `connected` ones offer merged ([`merged_init`]).
    pub(crate) fn init_result(&self, connected: &[Arc<Route>], health_tool: bool) -> String {
        match self {
            Self::Single(route) => {
                let result = route
                    .upstream
                    .init_result()
                    .unwrap_or_else(|| "{}".to_owned());
                with_tools_capability(result, health_tool)
            }
            Self::Namespaced { .. } => merged_init(connected).to_string(),
        }
    }

    /// The health tool's report of the upstreams: `upstream` (its state) with one, `upstreams`
    /// (each one's by name) with several.
    pub(crate) fn health(&self, routes: &[Arc<Route>]) -> (&'static str, Value) {
        match self {
            Self::Single(route) => ("upstream", upstream_state(&route.upstream)),
            Self::Namespaced { .. } => (
                "upstreams",
                Value::Object(
                    routes
                        .iter()
                        .map(|r| (r.name.clone(), upstream_state(&r.upstream)))
                        .collect(),
                ),
            ),
        }
    }
}

/// `result` with an empty `tools` capability when it declares none and the health tool is on.
fn with_tools_capability(result: String, health_tool: bool) -> String {
    if !health_tool || result.contains("\"tools\"") {
        return result;
    }
    match serde_json::from_str::<Value>(&result) {
        Ok(mut v) => {
            if let Some(caps) = v.get_mut("capabilities").and_then(Value::as_object_mut) {
                caps.entry("tools")
                    .or_insert_with(|| Value::Object(Default::default()));
            }
            v.to_string()
        }
        Err(_) => result,
    }
}

/// Whether an upstream is connected, how often it restarted, and why it is not connected
/// (`down: true` when calls to it fail at once until a probe brings it back).
fn upstream_state(up: &crate::upstream::Upstream) -> Value {
    let mut state = json!({
        "connected": up.is_connected(),
        "restarts": up.restarts(),
    });
    if let Some(why) = up.down_reason() {
        state["reason"] = Value::String(steadfast::sanitize(&why).into_owned());
        state["down"] = Value::Bool(up.is_down());
    }
    state
}

/// The gateway's own `initialize` result: the union of what the connected upstreams offer.
///
/// MCP has no notification for changed capabilities, so what an upstream that comes later
/// may add is declared from the start where the gateway can serve it for any upstream: list
/// changes (announced with `notifications/*/list_changed` when it comes), `logging` (the
/// gateway keeps the level and tells every upstream that offers logging, whenever it
/// connects) and `completions` (an upstream without them completes nothing). A later
/// upstream's resource subscriptions are not declared to a client already initialized.
///
/// The protocol revision is the oldest any connected upstream negotiated: each agreed to it or
/// a newer one (revisions are dates, so they order as text).
fn merged_init(connected: &[Arc<Route>]) -> Value {
    let mut version: Option<String> = None;
    let mut subscribe = false;
    let mut instructions = Vec::new();
    for r in connected {
        let Some(v) = r
            .upstream
            .init_result()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        if let Some(p) = v.get("protocolVersion").and_then(Value::as_str) {
            if let Some(oldest) = version.as_ref().filter(|o| o.as_str() != p) {
                tracing::info!(
                    upstream = %r.name,
                    version = %steadfast::sanitize(p),
                    other = %steadfast::sanitize(oldest),
                    "upstreams negotiated different protocol revisions; the client is told the oldest"
                );
            }
            if version.as_deref().is_none_or(|o| p < o) {
                version = Some(p.to_owned());
            }
        }
        let caps = &v["capabilities"];
        subscribe |= caps
            .pointer("/resources/subscribe")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if let Some(i) = v.get("instructions").and_then(Value::as_str) {
            instructions.push(format!("[{}] {i}", r.name));
        }
    }
    let caps = json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": subscribe},
        "logging": {},
        "completions": {},
    });
    let mut result = json!({
        "protocolVersion": version.unwrap_or_else(|| "2025-06-18".to_owned()),
        "capabilities": caps,
        "serverInfo": {"name": "steadfast-gateway", "version": env!("CARGO_PKG_VERSION")},
    });
    if !instructions.is_empty() {
        result["instructions"] = Value::String(instructions.join("\n\n"));
    }
    result
}
