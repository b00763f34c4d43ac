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
    /// The largest message read from a stdio client, in bytes; a larger request is answered
    /// with an error naming this cap (`[proxy] max_request_size`). Requests are small, so
    /// this is well below the cap on what upstreams send (`max_message_size`).
    pub max_request_size: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_in_flight: 256,
            max_queued_notifications: 1024,
            max_listens: 256,
            // A request carries a tool's arguments, not a file read back: 16 MiB is far above
            // any real one, and it is what the stdio reader may hold for a client.
            max_request_size: 16 * 1024 * 1024,
        }
    }
}
