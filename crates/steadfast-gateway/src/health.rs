//! The health tool: what the proxy absorbed, per tool, and the state of each breaker.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::config::Config;
use crate::session::Session;

/// The health tool's definition, if the config enables it.
pub fn tool(config: &Config) -> Option<Value> {
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
pub fn result(session: &Arc<Session>) -> Value {
    let report = json!({
        "upstream": {
            "connected": session.upstream.is_connected(),
            "restarts": session.upstream.restarts(),
        },
        "client": {
            "in_flight": session.in_flight(),
            "notifications_dropped": session.client.out.dropped(),
        },
        "tools": session.tools.metrics.snapshot().tools,
        "breakers": session.tools.breaker_stats(),
    });
    json!({
        "content": [{"type": "text", "text": report.to_string()}],
        "structuredContent": report,
        "isError": false
    })
}
