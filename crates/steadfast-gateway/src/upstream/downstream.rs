//! What an upstream needs of a client, as a trait the upstream owns.
//!
//! The upstream layer sits below the session: it relays what a server sends (progress, logs,
//! list changes, its own requests) to the clients that started it, but it must not know the
//! session's client type, or the two would import each other. `Client` implements this trait;
//! the upstream holds `Weak<dyn Downstream>` (and `Arc<dyn Downstream>` while it routes
//! progress), which costs one pointer-sized vtable per reference and no allocation per call.

use std::sync::Arc;

use serde_json::value::RawValue;

use super::{Link, Upstream};
use crate::wire::outbound::Outbound;

/// The bit set in the serial of a client of one modern HTTP request (`Client::transient`): it
/// is no upstream's client, so a server request related to its request is refused `-32021`
/// unless the client registered itself ([`super::register_transient`]: it declared a
/// capability an input request needs).
pub(crate) const TRANSIENT_SERIAL: u64 = 1 << 63;

/// One connected client, as seen from an upstream.
pub(crate) trait Downstream: Send + Sync + 'static {
    /// A number unique to the client in this process: an upstream remembers a client by it
    /// without holding a reference.
    fn serial(&self) -> u64;

    /// Whether the client's `initialize` was answered (a list change before that is not news).
    fn is_initialized(&self) -> bool;

    /// Queues a notification for the client; false if it was dropped (the queue is full).
    fn push_notification(&self, line: Vec<u8>) -> bool;

    /// Queues a message related to one of the client's requests on that request's `stream`
    /// while it is open, else on the client's queue; false if it was dropped.
    fn push_related(&self, stream: Option<&Outbound>, line: Vec<u8>) -> bool;

    /// Passes a request from the server (sampling, roots, elicitation) to the client, so that
    /// its answer is routed back to `upstream` on `link`; an error says why it was refused.
    fn forward_server_request(
        self: Arc<Self>,
        upstream: &Arc<Upstream>,
        link: &Arc<Link>,
        id: &str,
        method: &str,
        params: Option<&RawValue>,
        relation: Relation,
    ) -> Result<(), Declined>;

    /// The server cancelled its request `upstream_id` sent on connection `generation`; true
    /// if this client held it.
    fn server_cancelled(
        &self,
        upstream: &Upstream,
        generation: u64,
        upstream_id: &str,
        reason: Option<&str>,
    ) -> bool;

    /// The server's connection `generation` ended: its requests to the client end too.
    fn server_connection_ended(&self, upstream: &Upstream, generation: u64, why: &str);
}

/// How a request from the server was matched to the client it goes to.
#[derive(Debug, Clone)]
pub(crate) enum Relation {
    /// The server related it to one of the client's requests (it came on that request's HTTP
    /// answer stream, or it names a task the client created): that request's stream, if it
    /// has one.
    Known(Option<Arc<Outbound>>),
    /// Nothing on the wire relates it (stdio, or an HTTP server's standalone stream): the
    /// client was guessed — the one with the newest request in flight there (its stream, if
    /// it has one), or the most recently active.
    Guessed(Option<Arc<Outbound>>),
}

impl Relation {
    /// The stream of the client request it was related to, or guessed to be.
    pub(crate) fn stream(&self) -> Option<&Arc<Outbound>> {
        match self {
            Relation::Known(s) | Relation::Guessed(s) => s.as_ref(),
        }
    }

    /// Takes the stream out.
    pub(crate) fn into_stream(self) -> Option<Arc<Outbound>> {
        match self {
            Relation::Known(s) | Relation::Guessed(s) => s,
        }
    }
}

/// The client capability a server request needs (`None`: not an input request).
pub(crate) fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// Why a client refused a request from the server: the JSON-RPC error the server hears.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Declined {
    pub(crate) code: i64,
    pub(crate) message: String,
    /// The error's `data`, if any (`-32021` names the capability it needed).
    pub(crate) data: Option<serde_json::Value>,
}

impl Declined {
    /// The client cannot take more (`-32003`).
    pub(crate) fn overloaded(message: String) -> Self {
        Self {
            code: crate::wire::jsonrpc::code::OVERLOADED,
            message,
            data: None,
        }
    }

    /// Something went wrong on the gateway's side (`-32603`).
    pub(crate) fn internal(message: String) -> Self {
        Self {
            code: crate::wire::jsonrpc::code::INTERNAL_ERROR,
            message,
            data: None,
        }
    }

    /// The client did not declare the capability `method` needs (`-32021`, with
    /// `data.requiredCapabilities` as the Python SDK's servers say it), or it is a MCP
    /// 2026-07-28 client and `method` is no input request.
    pub(crate) fn missing_capability(method: &str) -> Self {
        use crate::wire::era;
        let capability = capability_for(method);
        let message = match capability {
            Some(c) => format!(
                "the client did not declare the {c} capability in this request's \
                 _meta[\"{}\"], so it cannot be asked {method}",
                era::CLIENT_CAPABILITIES
            ),
            None => format!(
                "a MCP 2026-07-28 client cannot be sent {method}: only sampling, elicitation \
                 and roots requests are put to it (as input requests)"
            ),
        };
        Self {
            code: era::code::MISSING_CLIENT_CAPABILITY,
            message: steadfast::sanitize(&message).into_owned(),
            data: capability.map(|c| serde_json::json!({"requiredCapabilities": {c: {}}})),
        }
    }

    /// `method` relates to no request of a MCP 2026-07-28 client, so it is put to none of
    /// them (`-32021`, without `data`: no capability would help). A guessed `roots/list` is
    /// such a request: a server asks for roots when a connection starts or its roots change,
    /// not for a call, and putting it to whatever call is in flight answers that call
    /// `input_required` for a question it never asked.
    pub(crate) fn unrelated(method: &str) -> Self {
        let message = format!(
            "{method} relates to no request of this MCP 2026-07-28 client (nothing on the \
             wire relates it, and a server asks it for its connection, not for a call): it \
             is put to no call"
        );
        Self {
            code: crate::wire::era::code::MISSING_CLIENT_CAPABILITY,
            message,
            data: None,
        }
    }

    /// The error response to the server's request `id` (raw JSON).
    pub(crate) fn response(&self, id: &str) -> Vec<u8> {
        let mut e = serde_json::json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.data {
            e["data"] = d.clone();
        }
        crate::wire::jsonrpc::raw_error_response(id, &e.to_string())
    }
}

impl std::fmt::Debug for dyn Downstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Downstream")
            .field("serial", &self.serial())
            .finish_non_exhaustive()
    }
}
