//! Bounds on what one client can make the proxy hold.

/// Per-session bounds.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Requests in flight at once; more are answered with an error at once.
    pub max_in_flight: usize,
    /// Notifications queued toward a client that reads slowly; more are dropped and counted.
    pub max_queued_notifications: usize,
    /// `subscriptions/listen` streams (MCP 2026-07-28 clients) open at once on one front;
    /// more are refused before they are acknowledged.
    pub max_listens: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_in_flight: 256,
            max_queued_notifications: 1024,
            max_listens: 256,
        }
    }
}
