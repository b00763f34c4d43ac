//! The requests waiting for the server's answers: the pending table (keyed by our own ids),
//! writing a request (renumbered, its progress token replaced, traced), settling a reply, and
//! the guard that cancels a request its caller gave up on.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use super::{Downstream, Link, LinkState, Upstream};
use crate::wire::jsonrpc;
use crate::wire::outbound::Outbound;

/// How a reply came back (or did not).
#[derive(Debug)]
pub(crate) enum Reply {
    /// A result, as raw JSON text.
    Result(String),
    /// A JSON-RPC error object, as raw JSON text.
    Error(String),
    /// The request provably never reached the server.
    NotSent(String),
    /// The connection was lost after the request was sent.
    Lost(String),
    /// The reply exceeded `max_message_size` (its length).
    TooLarge(usize),
    /// The HTTP upstream answered with an error status.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    Http(u16, String),
}

/// Where progress for a request goes.
#[derive(Debug, Clone)]
pub(crate) struct ProgressRoute {
    /// The client's queue.
    pub client: Arc<dyn Downstream>,
    /// The client's own token, as raw JSON.
    pub token: Arc<str>,
    /// The highest progress relayed for this token (a retried attempt starts over, and MCP
    /// requires progress to increase).
    pub high: Arc<Mutex<f64>>,
    /// Woken on every progress message: an attempt's idle timeout starts again.
    pub activity: Arc<Notify>,
    /// The stream of the client's request (an HTTP POST answered with server-sent events):
    /// progress goes there while it is open, else to the client's queue.
    pub stream: Option<Arc<Outbound>>,
}

pub(super) struct Pending {
    pub(super) generation: u64,
    pub(super) tx: oneshot::Sender<Reply>,
    pub(super) progress: Option<ProgressRoute>,
    /// The client whose request this is: a server request the server relates to it (sent on
    /// its HTTP answer stream) goes to that client.
    /// (A client's serial: no reference count is touched per call.)
    pub(super) origin: Option<u64>,
    /// The stream of the client's request, when a front streams its related messages: the
    /// server's requests and logs related to this call go there.
    pub(super) stream: Option<Arc<Outbound>>,
    /// Ends the request's HTTP exchange (connect, headers, body) when the entry goes: the
    /// reply came, or whoever waited gave up (its own bound passed, or it was cancelled).
    pub(super) _exchange: Option<tokio_util::sync::DropGuard>,
}

/// A request's params: decoded, or raw text to pass on as it is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Params<'a> {
    /// A value.
    Value(&'a Value),
    /// Raw JSON text.
    Raw(&'a str),
    /// Raw JSON text already found without the 2026-07-28 envelope (`call::resolve` looks):
    /// a handshake-era upstream gets it as it is, unscanned.
    Plain(&'a str),
}

impl Upstream {
    pub(super) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, Pending, foldhash::fast::FixedState>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends a request whose reply the caller awaits. The returned guard sends
    /// `notifications/cancelled` upstream if it is dropped before the reply arrives. With a
    /// progress route, the request's progress token is replaced by its upstream id.
    pub(crate) fn call(
        self: &Arc<Self>,
        link: &Arc<Link>,
        method: &str,
        params: Option<Params<'_>>,
        progress: Option<ProgressRoute>,
    ) -> (InFlight, oneshot::Receiver<Reply>) {
        self.call_from(link, method, params, progress, None)
    }

    /// [`Upstream::call`] on behalf of `origin`, the client whose request this is: requests the
    /// server sends while it works on it (sampling, elicitation, roots) are routed to that
    /// client.
    pub(crate) fn call_from(
        self: &Arc<Self>,
        link: &Arc<Link>,
        method: &str,
        params: Option<Params<'_>>,
        progress: Option<ProgressRoute>,
        origin: Option<&dyn Downstream>,
    ) -> (InFlight, oneshot::Receiver<Reply>) {
        self.call_related(link, method, params, progress, origin, None)
    }

    /// [`Upstream::call_from`] for a client request that has a stream of its own (`stream`,
    /// opened by the front): requests and logs the server relates to this call go
    /// on it.
    pub(crate) fn call_related(
        self: &Arc<Self>,
        link: &Arc<Link>,
        method: &str,
        params: Option<Params<'_>>,
        progress: Option<ProgressRoute>,
        origin: Option<&dyn Downstream>,
        stream: Option<Arc<Outbound>>,
    ) -> (InFlight, oneshot::Receiver<Reply>) {
        let origin = origin.map(|c| c.serial());
        if let Some(o) = origin {
            self.last_active.store(o, Ordering::Relaxed);
        }
        let id = self.next_id();
        let (tx, rx) = oneshot::channel();
        let token = progress.as_ref().map(|_| id);
        let params: Option<std::borrow::Cow<'_, str>> = match params {
            None => self.in_era(None),
            Some(Params::Value(v)) => Some(self.value_in_era(v, token).into()),
            Some(Params::Raw(raw) | Params::Plain(raw)) if token.is_some() => {
                match serde_json::from_str::<Value>(raw) {
                    Ok(v) => Some(self.value_in_era(&v, token).into()),
                    Err(_) => self.in_era(Some(raw.into())),
                }
            }
            // `in_era` would scan it for the envelope the session found absent.
            Some(Params::Plain(raw)) if !self.is_modern() => Some(raw.into()),
            Some(Params::Raw(raw) | Params::Plain(raw)) => self.in_era(Some(raw.into())),
        };
        // Traced: this request carries the current (CLIENT) span's context in `_meta`.
        let params = if steadfast::trace::listening() {
            traced_params(params, id)
        } else {
            params
        };
        let exchange = link.is_http().then(CancellationToken::new);
        self.pending().insert(
            id,
            Pending {
                generation: link.generation(),
                tx,
                progress,
                origin,
                stream,
                _exchange: exchange.clone().map(CancellationToken::drop_guard),
            },
        );
        let guard = InFlight {
            upstream: self.clone(),
            link: link.clone(),
            id,
            done: false,
        };
        let line = jsonrpc::request_numbered(id, method, params.as_deref());
        if let Err(why) = link.send_request(line, id, exchange) {
            self.settle(id, Reply::NotSent(why));
        }
        (guard, rx)
    }

    /// Sends a notification from the client to the server, if connected.
    pub(crate) fn notify(&self, line: Vec<u8>) {
        if let LinkState::Up(link) = &*self.state.borrow() {
            let _ = link.send(line, None);
        }
    }

    /// Delivers a reply to whoever waits for request `id`.
    pub(super) fn settle(&self, id: u64, reply: Reply) {
        if let Some(p) = self.pending().remove(&id) {
            let _ = p.tx.send(reply);
        }
    }

    /// Fails every request sent on connection `generation` (the connection is gone).
    pub(super) fn fail_generation(&self, generation: u64, not_sent: bool, why: &str) {
        let gone: Vec<Pending> = {
            let mut pending = self.pending();
            let ids: Vec<u64> = pending
                .iter()
                .filter(|(_, p)| p.generation == generation)
                .map(|(id, _)| *id)
                .collect();
            ids.iter().filter_map(|id| pending.remove(id)).collect()
        };
        for client in self.clients() {
            client.server_connection_ended(self, generation, why);
        }
        for p in gone {
            let reply = if not_sent {
                Reply::NotSent(why.to_owned())
            } else {
                Reply::Lost(why.to_owned())
            };
            let _ = p.tx.send(reply);
        }
    }
}

/// Our progress tokens are the request's upstream id, as a number.
pub(super) fn progress_id(token: &Value) -> Option<u64> {
    token
        .as_u64()
        .or_else(|| token.as_str().and_then(|s| s.parse().ok()))
}

/// `params` with the current span's `traceparent` in `_meta` (when the span is an
/// OpenTelemetry one), and the request's id recorded on the span.
#[inline(never)]
fn traced_params(
    params: Option<std::borrow::Cow<'_, str>>,
    id: u64,
) -> Option<std::borrow::Cow<'_, str>> {
    let span = tracing::Span::current();
    // On an attempt's CLIENT span only (a SERVER span's id is the client's).
    if span.metadata().is_some_and(|m| m.name() == "mcp.client") {
        span.record("jsonrpc.request.id", id);
    }
    match crate::wire::trace_context::current() {
        Some(t) => crate::wire::trace_context::inject(params.as_deref(), &t)
            .map(std::borrow::Cow::Owned)
            .or(params),
        None => params,
    }
}

/// `params` with `_meta.progressToken` set to `token` (or as it is).
pub(super) fn with_progress_token(params: &Value, token: Option<u64>) -> String {
    match token {
        Some(t) => {
            let mut p = params.clone();
            if let Some(obj) = p.as_object_mut() {
                let meta = obj
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Some(m) = meta.as_object_mut() {
                    m.insert("progressToken".into(), Value::from(t));
                }
            }
            p.to_string()
        }
        None => params.to_string(),
    }
}

/// A request in flight; dropping it before the reply tells the server to stop.
pub(crate) struct InFlight {
    upstream: Arc<Upstream>,
    link: Arc<Link>,
    id: u64,
    done: bool,
}

impl InFlight {
    /// The request's upstream id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Marks the reply as received: nothing to cancel.
    pub(crate) fn finish(mut self) {
        self.done = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.done && self.upstream.pending().remove(&self.id).is_some() {
            self.link
                .cancel(self.id, "the proxy abandoned this request");
        }
    }
}
