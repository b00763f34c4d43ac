//! The seam through which a feature extends every session without the session naming it.
//!
//! Durable tool calls (`tasks/`) hook into a session at a few points: the `initialize` result,
//! each `tools/list` page, a `tools/call` it may take over, methods it serves itself, and a
//! client's cancellation. The session owns this trait and calls it at those points; the
//! extension (which sits above the session and may call back into it) implements it, and the
//! front installs one per session. With none installed each hook costs one `OnceLock` read.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::session::Session;

/// What an extension may change or take over in one session.
pub(crate) trait Extension: Send + Sync + 'static {
    /// The `initialize` result (raw JSON) the client is about to get, possibly amended.
    fn on_initialize(&self, session: &Session, params: &str, result: String) -> String;

    /// Amends one `tools/list` page; true when it changed it.
    fn on_tools_list(&self, session: &Session, page: &mut Value) -> bool;

    /// Whether this `tools/call` (decoded params) is the extension's to answer.
    fn claims_call(&self, session: &Session, params: &Value) -> bool;

    /// Answers a claimed `tools/call`; the line answering it.
    fn call<'a>(
        &'a self,
        session: &'a Arc<Session>,
        id: &'a str,
        params: Value,
    ) -> BoxFuture<'a, Vec<u8>>;

    /// Whether the extension serves `method` itself.
    fn serves(&self, method: &str) -> bool;

    /// Answers a request for a method it serves; the line answering it.
    fn serve<'a>(
        &'a self,
        session: &'a Arc<Session>,
        id: &'a str,
        method: &'a str,
        params: Option<&'a str>,
    ) -> BoxFuture<'a, Vec<u8>>;

    /// Amends the capabilities `server/discover` answers a modern client with.
    fn on_discover(&self, capabilities: &mut serde_json::Map<String, Value>) {
        let _ = capabilities;
    }

    /// The client cancelled its request `id` (raw JSON).
    fn on_cancelled(&self, session: &Arc<Session>, id: &str);
}
