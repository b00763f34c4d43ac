//! The ways a client reaches the gateway: stdio (one client) and streamable HTTP (many).
//! Each builds the router, opens the durable task store, installs the extension on every
//! session and runs the signal and reload loop. The top layer: nothing imports it.

#[cfg(feature = "http")]
pub(crate) mod auth;
#[cfg(feature = "http")]
pub(crate) mod http;
pub(crate) mod stdio;
