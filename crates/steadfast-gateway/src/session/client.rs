//! The client side of a session: its outbound queue, and the requests the server sent it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::value::RawValue;

use crate::session::input_required::runs::{Runs, ServerAsk};
use crate::upstream::{Declined, Downstream, Link, Relation, Upstream};
use crate::wire::outbound::{Outbound, Refused};
use crate::wire::{era, jsonrpc};

mod server_requests;
#[cfg(test)]
mod tests;

use server_requests::{LocalAnswer, MAX_SERVER_REQUESTS, ServerRequest, ServerRequests};

/// Serials of clients: an upstream remembers a client by it without holding a reference.
static NEXT_CLIENT: AtomicU64 = AtomicU64::new(1);

/// One connected client.
pub(crate) struct Client {
    serial: u64,
    /// What goes to the client.
    pub out: Arc<Outbound>,
    server_requests: ServerRequests,
    next: AtomicU64,
    /// The task feeding the client's event stream (HTTP front): one per client.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) stream: Mutex<Option<tokio_util::sync::CancellationToken>>,
    /// Set once the client's `initialize` was answered: a list change the server announces
    /// before that (while the gateway's own handshake runs) is not news to a client that has
    /// not listed yet, and a notification may not precede the initialize result.
    initialized: std::sync::atomic::AtomicBool,
    /// A MCP 2026-07-28 client (the stdio front's, when its first request was modern): list
    /// changes and resource updates reach it only on its `subscriptions/listen` streams.
    modern: std::sync::atomic::AtomicBool,
    /// The modern requests in flight that can be answered with `input_required`: the
    /// server's requests go to them (`input_required.rs`).
    runs: Runs,
    /// The protocol era this connection opened with, once it did (`Era`): a request of the
    /// other era is refused, as the SDKs' dual-era servers refuse it.
    era: std::sync::atomic::AtomicU8,
    /// How many of this modern client's requests in flight asked for logs at each level
    /// (`_meta` log level, ranked as `era::LOG_LEVELS`): a log reaches it only when some
    /// request asked for its level or a lower one.
    log_levels: Mutex<[u32; 8]>,
    /// Progress of this client's parked and resumed calls (`input_required`), by the first
    /// request's progress token (raw JSON): where it goes now.
    moved_progress: Mutex<HashMap<String, Moved, foldhash::fast::RandomState>>,
}

/// Where the progress of a call answered `input_required` goes.
pub(crate) enum Moved {
    /// Nowhere: the request it was for is answered, the retry has not come (or asked for none).
    Parked,
    /// To the retry: its token, its client (another one, over HTTP) and its stream.
    To {
        token: serde_json::Value,
        client: std::sync::Weak<Client>,
        stream: Option<Arc<Outbound>>,
    },
}

/// The protocol era a connection opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// Not decided yet: no request of either era was accepted.
    Open = 0,
    /// It opened with `initialize`.
    Handshake = 1,
    /// It opened with a modern request (MCP 2026-07-28) that passed its checks.
    Modern = 2,
}

/// Holds a modern request's log level for as long as its call runs (see `Client::log_scope`).
pub(crate) struct LogScope {
    client: Arc<Client>,
    rank: usize,
}

impl Drop for LogScope {
    fn drop(&mut self) {
        let mut levels = self
            .client
            .log_levels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        levels[self.rank] = levels[self.rank].saturating_sub(1);
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

impl Client {
    /// A client whose queue holds at most `max_notifications` notifications.
    pub(crate) fn new(max_notifications: usize) -> Arc<Self> {
        Arc::new(Self {
            serial: NEXT_CLIENT.fetch_add(1, Ordering::Relaxed),
            out: Arc::new(Outbound::new(max_notifications)),
            server_requests: ServerRequests::default(),
            next: AtomicU64::new(1),
            stream: Mutex::default(),
            initialized: std::sync::atomic::AtomicBool::new(false),
            modern: std::sync::atomic::AtomicBool::new(false),
            runs: Runs::default(),
            era: std::sync::atomic::AtomicU8::new(Era::Open as u8),
            log_levels: Mutex::default(),
            moved_progress: Mutex::default(),
        })
    }

    /// The client's modern requests that may carry input requests.
    pub(crate) fn runs(&self) -> &Runs {
        &self.runs
    }

    /// The client of one modern HTTP request: modern, with a serial marked
    /// [`crate::upstream::TRANSIENT_SERIAL`] (no upstream knows it as a client).
    pub(crate) fn transient(max_notifications: usize) -> Arc<Self> {
        let mut c = Self::new(max_notifications);
        if let Some(me) = Arc::get_mut(&mut c) {
            me.serial |= crate::upstream::TRANSIENT_SERIAL;
            me.modern = std::sync::atomic::AtomicBool::new(true);
        }
        c
    }

    /// Records that the client speaks MCP 2026-07-28 (see the field).
    pub(crate) fn mark_modern(&self) {
        self.modern.store(true, Ordering::Relaxed);
    }

    /// Locks the connection's era to `era` if it is not decided yet; the era it has now.
    pub(crate) fn lock_era(&self, era: Era) -> Era {
        match self.era.compare_exchange(
            Era::Open as u8,
            era as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => era,
            Err(now) => Era::from_u8(now),
        }
    }

    /// The era the connection opened with.
    pub(crate) fn era(&self) -> Era {
        Era::from_u8(self.era.load(Ordering::Acquire))
    }

    /// Counts a modern request's log level (`rank` in `era::LOG_LEVELS`) while the returned
    /// scope lives; `None` (no scope) for a request that asked for no logs.
    pub(crate) fn log_scope(self: &Arc<Self>, rank: Option<usize>) -> Option<LogScope> {
        let rank = rank.filter(|r| *r < era::LOG_LEVELS.len())?;
        self.log_levels.lock().unwrap_or_else(|e| e.into_inner())[rank] += 1;
        Some(LogScope {
            client: self.clone(),
            rank,
        })
    }

    /// Whether `line` may go to this client: anything but a log goes to a handshake-era
    /// client; a modern client gets a `notifications/message` only when one of its requests
    /// in flight asked for logs at its level or a lower one (MCP 2026-07-28: a request without
    /// a log level gets no logs). Over stdio a server does not say which request a log is for:
    /// any request of the client that asked for the level lets it through.
    fn may_send(&self, line: &[u8]) -> bool {
        if !self.modern.load(Ordering::Relaxed) || !is_log(line) {
            return true;
        }
        #[derive(serde::Deserialize)]
        struct Params<'a> {
            #[serde(borrow)]
            level: Option<std::borrow::Cow<'a, str>>,
        }
        #[derive(serde::Deserialize)]
        struct Log<'a> {
            #[serde(borrow)]
            method: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            params: Option<Params<'a>>,
        }
        let Ok(log) = serde_json::from_slice::<Log<'_>>(line) else {
            return true;
        };
        if log.method.as_deref() != Some("notifications/message") {
            return true; // the text appeared elsewhere (a request's params, say)
        }
        let rank = log
            .params
            .and_then(|p| p.level)
            .and_then(|l| era::log_rank(&l));
        let Some(rank) = rank else {
            return false; // not a level: nobody asked for it
        };
        let levels = self.log_levels.lock().unwrap_or_else(|e| e.into_inner());
        levels[..=rank].iter().any(|n| *n > 0)
    }

    /// Sends the progress of the call started with progress token `token` (raw JSON) where
    /// `to` says, until [`Client::end_moved_progress`].
    pub(crate) fn move_progress(&self, token: &str, to: Moved) {
        self.moved_progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.to_owned(), to);
    }

    /// The call started with progress token `token` ended: nothing more to move.
    pub(crate) fn end_moved_progress(&self, token: &str) {
        self.moved_progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(token);
    }

    /// A progress notification of a moved call, delivered where it goes now (true: taken,
    /// or dropped on purpose); `Err` gives back any other line.
    fn moved(&self, line: Vec<u8>) -> Result<bool, Vec<u8>> {
        static PROGRESS: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"notifications/progress"));
        if PROGRESS.find(&line).is_none() {
            return Err(line);
        }
        let target = {
            let moved = self
                .moved_progress
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if moved.is_empty() {
                return Err(line);
            }
            let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&line) else {
                return Err(line);
            };
            let key = v["params"]["progressToken"].to_string();
            match moved.get(&key) {
                None => return Err(line),
                Some(Moved::Parked) => return Ok(true),
                Some(Moved::To {
                    token,
                    client,
                    stream,
                }) => {
                    v["params"]["progressToken"] = token.clone();
                    let params = v["params"].to_string();
                    let line = jsonrpc::notification("notifications/progress", Some(&params));
                    (client.clone(), stream.clone(), line)
                }
            }
        };
        let (client, stream, line) = target;
        Ok(client
            .upgrade()
            .is_some_and(|c| c.deliver_related(stream.as_deref(), line)))
    }

    /// [`Downstream::push_related`] once the line is known to go to this client.
    fn deliver_related(&self, stream: Option<&Outbound>, line: Vec<u8>) -> bool {
        let line = match stream {
            None => line,
            Some(s) => match s.offer(line) {
                Ok(()) => return true,
                Err(Refused::Full) => {
                    self.out.count_dropped();
                    return false;
                }
                Err(Refused::Closed(line)) => line,
            },
        };
        self.out.push_notification(line)
    }

    /// Records that the client's `initialize` was answered with a result.
    pub(crate) fn mark_initialized(&self) {
        self.initialized.store(true, Ordering::Relaxed);
    }

    /// Relays the client's answer (result or error, raw) to the server that asked.
    pub(crate) fn answer_server(
        &self,
        id: &str,
        result: Option<&RawValue>,
        error: Option<&RawValue>,
    ) {
        let Some(mut req) = self.server_requests.remove(id) else {
            return;
        };
        if let Some(tx) = req.local.take() {
            let _ = tx.send(match (result, error) {
                (Some(r), _) => Ok(r.get().to_owned()),
                (_, Some(e)) => Err(e.get().to_owned()),
                _ => return,
            });
            return;
        }
        let line = match (result, error) {
            (Some(r), _) => jsonrpc::result_response(&req.id, r.get()),
            (_, Some(e)) => jsonrpc::raw_error_response(&req.id, e.get()),
            _ => return,
        };
        req.reply(line);
    }

    /// Requests from servers awaiting this client now (tests read it).
    #[cfg(test)]
    pub(crate) fn server_requests_waiting(&self) -> usize {
        self.server_requests.len()
    }

    fn expire_server_request(&self, ours: &str, after: Duration) {
        let Some(req) = self.server_requests.remove(ours) else {
            return;
        };
        let message = format!(
            "the client did not answer {} within {after:?} (the proxy's request_timeout)",
            req.method
        );
        tracing::warn!(method = %req.method, "a request from the server timed out awaiting the client");
        let line = jsonrpc::error_response(&req.id, jsonrpc::code::UPSTREAM_TIMEOUT, &message);
        let stream = req.stream.clone();
        req.reply(line);
        self.tell_cancelled(ours, stream.as_deref(), &message);
    }

    /// `notifications/cancelled` to the client for our request id `ours` (raw JSON), on the
    /// stream the request went out on while that is open.
    fn tell_cancelled(&self, ours: &str, stream: Option<&Outbound>, reason: &str) {
        let id: serde_json::Value = serde_json::from_str(ours).unwrap_or(serde_json::Value::Null);
        let params = serde_json::json!({"requestId": id, "reason": reason}).to_string();
        self.push_related(
            stream,
            jsonrpc::notification("notifications/cancelled", Some(&params)),
        );
    }

    /// Puts a request of the gateway's own to the client (an input request of a modern
    /// upstream, `input_required/handshake.rs`), on `stream` while that is open; the answer
    /// (the result, or the error object, raw JSON) comes on the receiver, which is dropped
    /// unanswered when the client does not answer within `timeout` or goes away.
    pub(crate) fn ask(
        self: &Arc<Self>,
        method: &str,
        params: Option<&str>,
        stream: Option<Arc<Outbound>>,
        timeout: Duration,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<String, String>>, Declined> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let entry = Pending {
            upstream: std::sync::Weak::new(),
            generation: 0,
            id: String::new(),
            local: Some(tx),
        };
        self.send_server_request(entry, timeout, method, params, stream)?;
        Ok(rx)
    }

    /// Sends a request to the client under an id of ours, entered in the table until it is
    /// answered or `timeout` passes (see `forward_server_request`).
    fn send_server_request(
        self: &Arc<Self>,
        entry: Pending,
        timeout: Duration,
        method: &str,
        params: Option<&str>,
        stream: Option<Arc<Outbound>>,
    ) -> Result<(), Declined> {
        let ours = format!(
            "\"steadfast-{}\"",
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let weak = Arc::downgrade(self);
        let key = ours.clone();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            if let Some(client) = weak.upgrade() {
                client.expire_server_request(&key, timeout);
            }
        });
        let entry = ServerRequest {
            upstream: entry.upstream,
            generation: entry.generation,
            id: entry.id,
            method: method.to_owned(),
            timer: timer.abort_handle(),
            stream: stream.clone(),
            local: entry.local,
        };
        if let Err(entry) = self.server_requests.insert(ours.clone(), entry) {
            entry.timer.abort();
            return Err(Declined::overloaded(format!(
                "too many requests from the server await the client (at most {MAX_SERVER_REQUESTS})"
            )));
        }
        // Counted against the queue's cap like a notification: a client that does not read
        // (an HTTP client with no event stream open) cannot make the queue grow without end;
        // the server hears at once instead.
        let line = jsonrpc::request(&ours, method, params);
        if !self.push_related(stream.as_deref(), line) {
            self.server_requests.remove(&ours);
            return Err(Declined::overloaded(
                "the client is not taking messages (its queue is full)".to_owned(),
            ));
        }
        Ok(())
    }
}

/// Who a request to the client is for: a server (its id, on its connection), or the gateway.
struct Pending {
    upstream: std::sync::Weak<Upstream>,
    generation: u64,
    id: String,
    local: Option<LocalAnswer>,
}

impl Downstream for Client {
    fn push_notification(&self, line: Vec<u8>) -> bool {
        // The revision forbids sending a modern client change notifications it did not ask
        // for: its listens get them stamped (`upstream::changes`).
        if self.modern.load(Ordering::Relaxed) && is_change(&line) {
            return true;
        }
        // A log no request of a modern client asked for is not sent (dropped as delivered).
        if !self.may_send(&line) {
            return true;
        }
        self.out.push_notification(line)
    }

    /// Whether the client's `initialize` was answered with a result.
    fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::Relaxed)
    }

    /// This client's serial, unique in the process (never 0).
    fn serial(&self) -> u64 {
        self.serial
    }

    /// Queues a message related to a request (progress, a log, a request from the server, a
    /// cancel of one) on that request's stream while it is open, else on the client's queue;
    /// counted against the cap of whichever takes it. False if it was dropped.
    fn push_related(&self, stream: Option<&Outbound>, line: Vec<u8>) -> bool {
        if !self.may_send(&line) {
            return true;
        }
        // The progress of a call answered `input_required` goes to its retry, with the retry's
        // token (the first request's is answered: a client drops progress for it).
        match self.moved(line) {
            Ok(taken) => taken,
            Err(line) => self.deliver_related(stream, line),
        }
    }

    /// Passes a request from a server (sampling, roots, elicitation) to the client under an
    /// id of ours, so the client's answer can be routed back; on `stream` (the stream of the
    /// client's request that caused it) while that is open, else on the client's queue. The
    /// entry ends when the client answers, the server cancels it, the server's connection
    /// ends, or the upstream's `request_timeout` passes (the server is then answered with an
    /// error, so it does not wait for ever either).
    fn forward_server_request(
        self: Arc<Self>,
        upstream: &Arc<Upstream>,
        link: &Arc<Link>,
        id: &str,
        method: &str,
        params: Option<&RawValue>,
        relation: Relation,
    ) -> Result<(), Declined> {
        // A modern client cannot be sent a request: it gets it as an input request in the
        // answer to its own (`input_required.rs`), if it declared the capability.
        if self.modern.load(Ordering::Relaxed) {
            // Roots are asked for a connection (at its start, when they change), not for a
            // call: guessed, it would answer an unrelated call `input_required`.
            if method == "roots/list" && matches!(relation, Relation::Guessed(_)) {
                return Err(Declined::unrelated(method));
            }
            let ask = ServerAsk {
                upstream: Arc::downgrade(upstream),
                generation: link.generation(),
                id: id.to_owned(),
                method: method.to_owned(),
                params: params.map(|p| p.get().to_owned()),
            };
            return self.runs.offer(relation.stream(), ask);
        }
        let entry = Pending {
            upstream: Arc::downgrade(upstream),
            generation: link.generation(),
            id: id.to_owned(),
            local: None,
        };
        self.send_server_request(
            entry,
            upstream.settings().request_timeout,
            method,
            params.map(RawValue::get),
            relation.into_stream(),
        )
    }

    /// The server cancelled its request `upstream_id` (raw JSON) sent on connection
    /// `generation`: the entry ends, and the client is told under our id.
    fn server_cancelled(
        &self,
        upstream: &Upstream,
        generation: u64,
        upstream_id: &str,
        reason: Option<&str>,
    ) -> bool {
        let found = self
            .server_requests
            .take_where(|r| r.from(upstream) && r.generation == generation && r.id == upstream_id);
        let Some((ours, req)) = found.into_iter().next() else {
            return false;
        };
        self.tell_cancelled(
            &ours,
            req.stream.as_deref(),
            reason.unwrap_or("the server cancelled its request"),
        );
        true
    }

    /// The server's connection `generation` ended (a restart, a lost session, shutdown): its
    /// requests can no longer be answered, so their entries end and the client is told.
    fn server_connection_ended(&self, upstream: &Upstream, generation: u64, why: &str) {
        let gone = self
            .server_requests
            .take_where(|r| r.from(upstream) && r.generation <= generation);
        for (ours, req) in gone {
            self.tell_cancelled(
                &ours,
                req.stream.as_deref(),
                &format!(
                    "the server's connection ended: {}",
                    steadfast::sanitize(why)
                ),
            );
        }
    }
}

impl Drop for Client {
    /// A client that goes away with server requests unanswered: each server hears so at once
    /// rather than waiting for its own timeout.
    fn drop(&mut self) {
        for (_, req) in self.server_requests.take_where(|_| true) {
            let line = jsonrpc::error_response(
                &req.id,
                jsonrpc::code::INTERNAL_ERROR,
                "the client session ended before it answered",
            );
            req.reply(line);
        }
    }
}

impl Era {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Handshake,
            2 => Self::Modern,
            _ => Self::Open,
        }
    }
}

/// Whether a line is a log (`notifications/message`).
fn is_log(line: &[u8]) -> bool {
    static LOG: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"notifications/message\""));
    LOG.find(line).is_some()
}

/// Whether a notification line is a list change or a resource update.
fn is_change(line: &[u8]) -> bool {
    static METHODS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 2]> =
        std::sync::LazyLock::new(|| {
            [
                memchr::memmem::Finder::new(b"/list_changed\""),
                memchr::memmem::Finder::new(b"\"notifications/resources/updated\""),
            ]
        });
    METHODS.iter().any(|m| m.find(line).is_some())
}
