//! The bottom layer: bytes and JSON-RPC, knowing nothing of upstreams, sessions or policy.
//!
//! Everything here is a pure function or a self-contained type (envelopes, line framing, the
//! bounded outbound queue, `tools/call` parameters, sanitizing of relayed errors), so every
//! other layer may import it and it imports nothing of the crate.

pub mod call_params;
pub mod era;
pub mod framing;
pub mod jsonrpc;
pub(crate) mod memory;
pub mod methods;
pub mod naming;
pub mod outbound;
pub mod sanitize;
pub mod trace_context;
