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
    let mut tools = serde_json::Map::new();
    let mut breakers = serde_json::Map::new();
    let routes = session.router.routes();
    for r in routes.iter() {
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
    // `upstream` with one, `upstreams` by name with several.
    let (key, upstreams) = session.router.topology().health(&routes);
    report[key] = upstreams;
    json!({
        "content": [{"type": "text", "text": report.to_string()}],
        "structuredContent": report,
        "isError": false
    })
}
