//! The Steadfast MCP proxy as a library: a JSON-RPC relay with resilient `tools/call`.
//!
//! The proxy sits between an MCP client and an upstream MCP server. It relays every message
//! as it is — field for field, whatever protocol revision either side speaks — and acts on
//! those that need its own answer: `tools/call` runs through Steadfast's retry engine
//! (breakers, budgets, replay safety from tool annotations, sanitized LLM errors),
//! `tools/list` learns those annotations (and lists the health tool), cancellation and
//! progress are routed across the renumbering that lets a request survive an upstream
//! restart, `initialize` / `server/discover` are answered for the upstreams (translating
//! between the 2025-11-25 and 2026-07-28 revisions), the tasks methods serve durable calls
//! (with `[tasks]`), `subscriptions/listen` fans out what upstreams announce, and with
//! several upstreams lists are gathered and gets, reads and completions routed by name.
//!
//! Everything a peer can make it hold is bounded: message size, requests in flight,
//! notifications queued toward a slow client, requests from the server awaiting the client,
//! and every wait (handshake, forwarded requests, attempts, reconnection).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use steadfast_gateway::{Config, Exit, serve_stdio};
//! let upstream = steadfast_mcp::Upstream::command("python3", ["server.py"]);
//! let exit: Exit = serve_stdio(Config::default(), upstream).await?;
//! std::process::exit(exit.code());
//! # }
//! ```

pub(crate) mod call;
pub(crate) mod config;
mod front;
pub(crate) mod route;
pub(crate) mod session;
pub(crate) mod tasks;
pub(crate) mod upstream;
pub(crate) mod wire;

pub use config::layered::Overrides;
pub use config::limits::SessionLimits;
pub use config::telemetry::{RawTelemetry, Telemetry};
pub use config::{Config, ConfigError, NamedUpstream};
pub use front::admin;
#[cfg(feature = "http")]
pub use front::http::{HttpOptions, serve_http};
pub use front::serve::{Exit, Reload, reload_file};
pub use front::stdio::{serve_io, serve_stdio, serve_stdio_with};
pub use route::router::Router;
pub use route::topology::UpstreamSet;
pub use upstream::{DEPTH_VAR, MAX_DEPTH, check_depth};
pub use wire::memory::set_release_hook as set_memory_release_hook;

/// Installs rustls's ring crypto provider as the process default unless one is installed.
/// With the `https` feature reqwest is built without a provider of its own, and every HTTP
/// client built in the process (the gateway's upstream clients, an OTLP exporter's) panics
/// without one; a no-op without the feature.
pub fn install_crypto_provider() {
    #[cfg(feature = "https")]
    let _ = rustls::crypto::ring::default_provider().install_default();
}
