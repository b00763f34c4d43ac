//! The bottom layer: bytes and JSON-RPC, knowing nothing of upstreams, sessions or policy.
//!
//! Everything here is a pure function or a self-contained type (envelopes, line framing, the
//! bounded outbound queue, `tools/call` parameters, sanitizing of relayed errors), so every
//! other layer may import it and it imports nothing of the crate.

pub(crate) mod call_params;
pub(crate) mod envelope_text;
pub(crate) mod era;
pub(crate) mod framing;
pub(crate) mod jsonrpc;
pub(crate) mod memory;
pub(crate) mod methods;
pub(crate) mod naming;
pub(crate) mod outbound;
pub(crate) mod sanitize;
pub(crate) mod secret_id;
pub(crate) mod trace_context;
