//! How one upstream is kept connected and how long things may take: built from `[proxy]`,
//! read by the upstream's supervisor.

use std::time::Duration;

use steadfast::RetryPolicy;

/// How an upstream is kept connected and how long things may take.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The bound on a handshake (and on a client's `initialize` waiting for one).
    pub init_timeout: Duration,
    /// How long a call waits for a (re)starting upstream before it counts as not sent.
    pub reconnect_wait: Duration,
    /// Backoff for the first connection.
    pub connect: RetryPolicy,
    /// Backoff for restarts.
    pub restart: RetryPolicy,
    /// The largest message read from the upstream.
    pub max_message_size: usize,
    /// The bound on a forwarded request other than `tools/call`.
    pub request_timeout: Duration,
    /// A connection that lived this long was a good start: the failure count starts over.
    pub stable_after: Duration,
    /// Between closing a child's input, TERM and KILL.
    pub shutdown_grace: Duration,
    /// When a stdio client closes its input: how long the requests it sent before may take to
    /// be answered before they are cancelled.
    pub drain_timeout: Duration,
    /// Messages queued toward the upstream.
    pub max_queue: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            init_timeout: Duration::from_secs(25),
            reconnect_wait: Duration::from_secs(10),
            connect: steadfast_mcp::default_connect_policy(),
            restart: steadfast_mcp::default_reconnect_policy(),
            // The official SDKs read messages of any size; a file read through a filesystem
            // server comes back twice (text and structured content), so 16 MiB refused a 9 MB
            // file. Memory stays bounded: each reader holds at most one message of this size,
            // and a relayed reply is held once until written.
            max_message_size: 128 * 1024 * 1024,
            request_timeout: Duration::from_secs(60),
            stable_after: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(2),
            // Long enough for a server to start and answer a call or two (`printf … | steadfast
            // proxy -- server`); a client that left mid-call is not kept waiting on much more.
            drain_timeout: Duration::from_secs(10),
            max_queue: 4096,
        }
    }
}
