//! What a client holds of its modern requests' runs ([`Runs`]) and what it hands them: a
//! server's request ([`ServerAsk`]), checked against the capabilities the request declared
//! ([`Caps`]). Below both the client (which routes a server's requests here) and the rest of
//! `input_required` (which starts the runs and answers the asks).

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::upstream::{Declined, Upstream, capability_for};
use crate::wire::era;
use crate::wire::jsonrpc::code;
use crate::wire::outbound::Outbound;

/// Server requests outstanding for one call, at most.
pub(crate) const MAX_ASKS: usize = 16;

/// Events of one run queued for its responder, at most (a server that floods requests is
/// refused beyond it).
pub(super) const EVENTS: usize = MAX_ASKS;

/// The client capabilities of a modern request (`_meta` client capabilities) that input
/// requests need.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Caps {
    pub(super) elicitation: bool,
    pub(super) sampling: bool,
    pub(super) roots: bool,
}

impl Caps {
    /// The capabilities a modern request's params declare.
    pub(crate) fn of(params: &Value) -> Self {
        let caps = params
            .get("_meta")
            .and_then(|m| m.get(era::CLIENT_CAPABILITIES))
            .and_then(Value::as_object)
            .filter(|c| !c.is_empty()); // most clients declare none: no lookups then
        let Some(caps) = caps else {
            return Self::default();
        };
        let caps = Some(caps);
        let has = |k: &str| caps.and_then(|c| c.get(k)).is_some_and(Value::is_object);
        Self {
            elicitation: has("elicitation"),
            sampling: has("sampling"),
            roots: has("roots"),
        }
    }

    /// The capabilities a handshake-era client's `initialize` params (raw JSON) declare.
    pub(crate) fn of_initialize(params: &str) -> Self {
        let v: Value = serde_json::from_str(params).unwrap_or_default();
        let caps = v.get("capabilities");
        let has = |k: &str| caps.and_then(|c| c.get(k)).is_some_and(Value::is_object);
        Self {
            elicitation: has("elicitation"),
            sampling: has("sampling"),
            roots: has("roots"),
        }
    }

    /// Whether any input request could be put to the client.
    pub(crate) fn any(self) -> bool {
        self.elicitation || self.sampling || self.roots
    }

    pub(crate) fn has(self, capability: &str) -> bool {
        match capability {
            "elicitation" => self.elicitation,
            "sampling" => self.sampling,
            "roots" => self.roots,
            _ => false,
        }
    }
}

/// The refusal a server hears when the client did not declare what its request needs.
pub(crate) fn missing_capability(method: &str) -> Declined {
    Declined::missing_capability(method)
}

/// One request from a server, taken from the connection it came on.
pub(crate) struct ServerAsk {
    pub(crate) upstream: Weak<Upstream>,
    /// The connection it came on: an answer after a restart goes nowhere.
    pub(crate) generation: u64,
    /// The server's own id, raw JSON.
    pub(crate) id: String,
    pub(crate) method: String,
    /// Its params, raw JSON.
    pub(crate) params: Option<String>,
}

impl ServerAsk {
    pub(super) fn reply(&self, line: Vec<u8>) {
        if let Some(up) = self.upstream.upgrade() {
            up.reply_to_server(self.generation, line);
        }
    }

    pub(super) fn bound(&self) -> Duration {
        self.upstream
            .upgrade()
            .map_or(Duration::from_secs(60), |u| u.settings().request_timeout)
    }

    /// The input request as the client gets it: `{method, params}`.
    pub(super) fn as_input_request(&self) -> Value {
        let mut r = json!({"method": self.method});
        if let Some(p) = self.params.as_deref() {
            r["params"] = serde_json::from_str(p).unwrap_or_else(|_| json!({}));
        } else if self.method != "roots/list" {
            r["params"] = json!({});
        }
        r
    }
}

pub(super) enum Event {
    /// A request from the server, for the client.
    Input(ServerAsk),
    /// The run's answer (written for the first request's id); `None`: it was cancelled.
    Done(Option<Vec<u8>>),
}

/// One modern request's run, as its client routes the server's requests to it.
pub(crate) struct RunLink {
    pub(super) serial: u64,
    pub(super) caps: Caps,
    /// The request's own stream (an HTTP POST answered with server-sent events), if any: a
    /// server request related to the call names it.
    pub(super) stream: Option<Arc<Outbound>>,
    pub(super) tx: mpsc::Sender<Event>,
}

pub(super) static NEXT_RUN: AtomicU64 = AtomicU64::new(1);

/// The runs of one client that may be answered with `input_required`.
#[derive(Default)]
pub(crate) struct Runs(Mutex<Vec<Arc<RunLink>>>);

impl Runs {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<RunLink>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn remove(&self, link: &Arc<RunLink>) {
        self.lock().retain(|l| !Arc::ptr_eq(l, link));
    }

    /// Hands a server request to the run it relates to: the one whose stream it came on,
    /// else the newest (stdio carries no relation; servers ask while they work on a request).
    /// Declined (the ask given back) when no run can put it to the client.
    pub(crate) fn offer(
        &self,
        stream: Option<&Arc<Outbound>>,
        ask: ServerAsk,
    ) -> Result<(), Declined> {
        let link = {
            let runs = self.lock();
            let related = stream.and_then(|s| {
                runs.iter()
                    .find(|l| l.stream.as_ref().is_some_and(|x| Arc::ptr_eq(x, s)))
            });
            related
                .or_else(|| runs.iter().max_by_key(|l| l.serial))
                .cloned()
        };
        let Some(link) = link else {
            return Err(missing_capability(&ask.method));
        };
        match capability_for(&ask.method) {
            Some(c) if link.caps.has(c) => {}
            _ => return Err(missing_capability(&ask.method)),
        }
        link.tx.try_send(Event::Input(ask)).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => Declined {
                code: code::OVERLOADED,
                message: format!(
                    "too many requests from the server await this client's request (at most {MAX_ASKS})"
                ),
                data: None,
            },
            // The call's park was just dropped (expired, or the client cancelled it).
            mpsc::error::TrySendError::Closed(_) => Declined::internal(
                "the client's request this belongs to was cancelled or expired".to_owned(),
            ),
        })
    }
}

/// A run registered on `runs` with `caps`, as `prepare` registers one, for tests elsewhere in
/// the crate; the methods of the server requests put to it, as they arrive.
#[cfg(test)]
pub(crate) fn test_run(runs: &Runs, caps: &Value) -> impl FnMut() -> Vec<String> + use<> {
    let (tx, mut rx) = mpsc::channel(EVENTS);
    runs.lock().push(Arc::new(RunLink {
        serial: NEXT_RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        caps: Caps::of(caps),
        stream: None,
        tx,
    }));
    move || {
        let mut asked = Vec::new();
        while let Ok(event) = rx.try_recv() {
            if let Event::Input(ask) = event {
                asked.push(ask.method);
            }
        }
        asked
    }
}
