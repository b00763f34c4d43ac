//! The requests a server sent a client (sampling, elicitation, roots) that await its answer.
//!
//! Every entry ends one way or another: the client answers; the server cancels; the server's
//! connection ends; the proxy's `request_timeout` passes; the client goes away. The table is
//! capped, so a server that asks and never hears back cannot grow the proxy's memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::task::AbortHandle;

use crate::upstream::Upstream;
use crate::wire::outbound::Outbound;

/// Requests from servers awaiting one client's answer, at most this many at once.
pub(crate) const MAX_SERVER_REQUESTS: usize = 256;

/// One request from a server, known to the client under an id of ours.
pub(crate) struct ServerRequest {
    pub(crate) upstream: Weak<Upstream>,
    /// The connection it came on: an answer after a restart goes nowhere.
    pub(crate) generation: u64,
    /// The server's own id, raw JSON.
    pub(crate) id: String,
    pub(crate) method: String,
    /// The timer that ends the entry at `request_timeout`.
    pub(crate) timer: AbortHandle,
    /// The stream of the client's request it went out on (an HTTP POST answered with
    /// server-sent events): a cancel of it follows it there.
    pub(crate) stream: Option<Arc<Outbound>>,
    /// A request of the gateway's own (an input request of a modern upstream, put to a
    /// handshake-era client): the answer goes here — the result, or the error object (raw
    /// JSON) — and not to an upstream. Dropped unanswered: the client did not answer.
    pub(crate) local: Option<LocalAnswer>,
}

/// Where the answer to a request of the gateway's own goes.
pub(crate) type LocalAnswer = tokio::sync::oneshot::Sender<Result<String, String>>;

impl ServerRequest {
    /// Whether it came from `upstream`.
    pub(crate) fn from(&self, upstream: &Upstream) -> bool {
        std::ptr::eq(self.upstream.as_ptr(), upstream)
    }

    /// Sends `line` (the answer) to the server, if its connection still lives.
    pub(crate) fn reply(self, line: Vec<u8>) {
        if let Some(up) = self.upstream.upgrade() {
            up.reply_to_server(self.generation, line);
        }
    }
}

impl Drop for ServerRequest {
    fn drop(&mut self) {
        self.timer.abort();
    }
}

/// The table, keyed by our id (raw JSON).
#[derive(Default)]
pub(crate) struct ServerRequests(Mutex<HashMap<String, ServerRequest>>);

impl ServerRequests {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, ServerRequest>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an entry; gives it back when the table is full.
    pub(crate) fn insert(&self, ours: String, req: ServerRequest) -> Result<(), ServerRequest> {
        let mut map = self.lock();
        if map.len() >= MAX_SERVER_REQUESTS {
            return Err(req);
        }
        map.insert(ours, req);
        Ok(())
    }

    /// Removes the entry under our id.
    pub(crate) fn remove(&self, ours: &str) -> Option<ServerRequest> {
        self.lock().remove(ours)
    }

    /// Removes every entry that matches.
    pub(crate) fn take_where(
        &self,
        matches: impl Fn(&ServerRequest) -> bool,
    ) -> Vec<(String, ServerRequest)> {
        let mut map = self.lock();
        let keys: Vec<String> = map
            .iter()
            .filter(|(_, r)| matches(r))
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter()
            .filter_map(|k| map.remove_entry(&k))
            .collect()
    }

    /// Entries now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
