//! `subscriptions/listen` of an MCP 2026-07-28 client: change notifications on the request's
//! own stream (HTTP: its response stream; stdio: the shared output, each message stamped with
//! the listen's id).
//!
//! The listen is acknowledged first (`notifications/subscriptions/acknowledged` with the
//! filter honoured: every kind asked for, since the gateway relays whatever its upstreams
//! announce) — once the upstreams watch its resource URIs (`upstream/listen.rs`), bounded by
//! [`COVERED_BOUND`] —, then carries the changes its filter asks for (`upstream::changes`) until the
//! client cancels it (HTTP: closes the stream; stdio: `notifications/cancelled`) — no answer
//! then —, the gateway stops (the graceful result), or it falls behind (an error saying so).

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::session::Session;
use crate::upstream::changes::{self, Filter, Refused};
use crate::wire::jsonrpc::{self, code};

/// The method.
pub(crate) const LISTEN: &str = "subscriptions/listen";

/// How long a listen with resource URIs waits for the upstreams to watch them before it is
/// acknowledged anyway (an upstream that does not answer must not hold every listen).
const COVERED_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

/// Removes the listener from the hub however the listen ends.
struct Open {
    hub: Arc<changes::Changes>,
    listener: Arc<changes::Listener>,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.hub.remove(&self.listener);
    }
}

impl Session {
    /// Serves one listen until it ends; the line that ends it (`None`: the client cancelled
    /// it, which is not answered).
    pub(crate) async fn listen(
        self: &Arc<Self>,
        id: &str,
        params: &Value,
        ct: &CancellationToken,
    ) -> Option<Vec<u8>> {
        let mut filter = match Filter::parse(params.get("notifications")) {
            Ok(f) => f,
            Err(why) => return Some(jsonrpc::error_response(id, code::INVALID_PARAMS, &why)),
        };
        // [auth] URIs the token may not read are not watched for it (and not acknowledged).
        filter.uris.retain(|uri| self.may_read(uri));
        // HTTP: the request's own stream; stdio: the client's queue.
        let out = self
            .request_stream(id)
            .unwrap_or_else(|| self.client.out.clone());
        let hub = self.router.changes().clone();
        let watches = !filter.uris.is_empty();
        let (listener, serial) = match hub.open(id, filter, out) {
            Ok(l) => l,
            Err(Refused::Full(max)) => {
                return Some(jsonrpc::error_response(
                    id,
                    code::INTERNAL_ERROR,
                    &format!(
                        "too many subscriptions/listen streams are open (max_listens = {max}); \
                         close one or retry later"
                    ),
                ));
            }
            Err(Refused::Closing) => {
                return Some(changes::end_line(id, &changes::End::Closed));
            }
        };
        let open = Open { hub, listener };
        // Acknowledged once the upstreams watch its URIs (bounded): an update right after the
        // acknowledgment is not lost between the two.
        if watches {
            tokio::select! {
                _ = open.hub.wait_covered(serial, COVERED_BOUND) => {}
                _ = ct.cancelled() => return None,
            }
        }
        open.hub.acknowledge(&open.listener);
        tokio::select! {
            end = open.listener.ended() => Some(changes::end_line(id, &end)),
            _ = ct.cancelled() => None,
        }
    }
}
