//! The health tool: what the proxy absorbed, per tool, and the state of each breaker.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::config::Config;
use crate::session::Session;

/// The health tool's definition, if the config enables it.
pub(crate) fn tool(config: &Config) -> Option<Value> {
    let name = config.health_tool.as_ref()?;
    Some(json!({
        "name": name,
        "description": "Steadfast proxy health: per-tool calls, retries, retry success rate, \
                        permanent failures by code, breaker states and upstream restarts",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": true}
    }))
}

/// The health tool's result for `session`.
pub(crate) fn result(session: &Arc<Session>) -> Value {
    let mut upstreams = serde_json::Map::new();
    let mut tools = serde_json::Map::new();
    let mut breakers = serde_json::Map::new();
    for r in session.router.routes().iter() {
        upstreams.insert(r.name.clone(), upstream_state(&r.upstream));
        if let Ok(Value::Object(t)) = serde_json::to_value(r.tools.metrics.snapshot().tools) {
            tools.extend(t);
        }
        if let Ok(Value::Object(b)) = serde_json::to_value(r.tools.breaker_stats()) {
            breakers.extend(b);
        }
    }
    let mut report = json!({
        "client": {
            "in_flight": session.in_flight(),
            "notifications_dropped": session.client.out.dropped(),
        },
        "tools": tools,
        "breakers": breakers,
    });
    if session.router.is_namespaced() {
        report["upstreams"] = Value::Object(upstreams);
    } else {
        report["upstream"] = upstream_state(&session.upstream());
    }
    json!({
        "content": [{"type": "text", "text": report.to_string()}],
        "structuredContent": report,
        "isError": false
    })
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
