//! MCP method names the proxy itself emits or acts on.

/// What a client is told when an upstream missing from its lists comes back, or when a reload
/// changed which upstreams are served.
pub(crate) const CHANGED: [&str; 3] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
];
