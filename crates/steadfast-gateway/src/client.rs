//! The client side of a session: its outbound queue, and the requests the server sent it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde_json::value::RawValue;

use crate::jsonrpc;
use crate::outbound::Outbound;
use crate::upstream::{Link, Upstream};

/// Requests from servers awaiting the client's answer, at most this many at once.
const MAX_SERVER_REQUESTS: usize = 256;

struct ServerRequest {
    upstream: Weak<Upstream>,
    generation: u64,
    id: String,
}

/// One connected client.
pub struct Client {
    /// What goes to the client.
    pub out: Arc<Outbound>,
    server_requests: Mutex<HashMap<String, ServerRequest>>,
    next: AtomicU64,
    /// Responses awaited by a front that answers each request on its own (an HTTP POST).
    waiters: Mutex<HashMap<String, tokio::sync::oneshot::Sender<Vec<u8>>>>,
    /// The task feeding the client's event stream (HTTP front): one per client.
    pub(crate) stream: Mutex<Option<tokio_util::sync::CancellationToken>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

impl Client {
    /// A client whose queue holds at most `max_notifications` notifications.
    pub fn new(max_notifications: usize) -> Arc<Self> {
        Arc::new(Self {
            out: Arc::new(Outbound::new(max_notifications)),
            server_requests: Mutex::default(),
            next: AtomicU64::new(1),
            waiters: Mutex::default(),
            stream: Mutex::default(),
        })
    }

    /// Delivers the response to request `id` (raw JSON): to the front awaiting it, else in
    /// order with everything else on the client's queue.
    pub fn respond(&self, id: &str, line: Vec<u8>) {
        let waiter = self
            .waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        match waiter {
            Some(tx) => {
                if let Err(line) = tx.send(line) {
                    self.out.push(line);
                }
            }
            None => self.out.push(line),
        }
    }

    /// Like [`Client::respond`], for answers a peer can provoke without limit (to malformed
    /// messages, pings, refusals): on the queue they count against the notification cap, so a
    /// client that floods junk and does not read cannot grow the proxy's memory.
    pub fn respond_capped(&self, id: &str, line: Vec<u8>) {
        let waiter = self
            .waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        match waiter {
            Some(tx) => {
                let _ = tx.send(line);
            }
            None => {
                self.out.push_notification(line);
            }
        }
    }

    /// Awaits the response to request `id` apart from the queue (for a front that answers each
    /// request on its own).
    pub fn await_response(&self, id: &str) -> tokio::sync::oneshot::Receiver<Vec<u8>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_owned(), tx);
        rx
    }

    /// Stops awaiting `id` (the front gave up).
    pub fn forget_response(&self, id: &str) {
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    fn requests(&self) -> std::sync::MutexGuard<'_, HashMap<String, ServerRequest>> {
        self.server_requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Passes a request from a server (sampling, roots, elicitation) to the client under an
    /// id of ours, so the client's answer can be routed back.
    pub fn forward_server_request(
        &self,
        upstream: &Arc<Upstream>,
        link: &Arc<Link>,
        id: &str,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(), String> {
        let ours = format!(
            "\"steadfast-{}\"",
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        {
            let mut reqs = self.requests();
            if reqs.len() >= MAX_SERVER_REQUESTS {
                return Err("too many requests from the server await the client".to_owned());
            }
            reqs.insert(
                ours.clone(),
                ServerRequest {
                    upstream: Arc::downgrade(upstream),
                    generation: link.generation(),
                    id: id.to_owned(),
                },
            );
        }
        self.out
            .push(jsonrpc::request(&ours, method, params.map(RawValue::get)));
        Ok(())
    }

    /// Our id for a server's request id (raw JSON), to rename a cancel.
    pub fn server_request_id(&self, upstream_id: &str) -> Option<String> {
        self.requests()
            .iter()
            .find(|(_, r)| r.id == upstream_id)
            .map(|(k, _)| k.trim_matches('"').to_owned())
    }

    /// Relays the client's answer (result or error, raw) to the server that asked.
    pub fn answer_server(&self, id: &str, result: Option<&RawValue>, error: Option<&RawValue>) {
        let Some(req) = self.requests().remove(id) else {
            return;
        };
        let Some(upstream) = req.upstream.upgrade() else {
            return;
        };
        let line = match (result, error) {
            (Some(r), _) => jsonrpc::result_response(&req.id, r.get()),
            (_, Some(e)) => jsonrpc::raw_error_response(&req.id, e.get()),
            _ => return,
        };
        upstream.reply_to_server(req.generation, line);
    }
}
