//! The ways a client reaches the gateway: stdio (one client) and streamable HTTP (many).
//! What both do around their clients — build the router, open the durable task store, install
//! the extension on every session, answer signals and reloads, stop in order — is `serve.rs`,
//! once. The top layer: nothing imports it.

pub mod admin;
#[cfg(feature = "http")]
pub(crate) mod auth;
#[cfg(feature = "http")]
pub(crate) mod http;
#[cfg(feature = "http")]
pub(crate) mod prometheus;
pub(crate) mod serve;
pub(crate) mod stdio;
