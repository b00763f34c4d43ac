//! What the server sends: replies settled, progress and logs routed to the client (and the
//! stream) they belong to, the server's requests forwarded to the client that should answer.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;
use serde_json::value::RawValue;

use super::pending::progress_id;
use super::{
    Declined, Downstream, Link, LinkState, Relation, Reply, TRANSIENT_SERIAL, Upstream, task_owners,
};
use crate::wire::framing::Frame;
use crate::wire::jsonrpc::{self, Envelope, MessageKind};

/// Where a request from the server goes: a client, and how it was found (with the stream of
/// its request the server is working on, if that request has one).
type Recipient = (Arc<dyn Downstream>, Relation);

impl Upstream {
    /// Handles one frame read from the server.
    pub(crate) fn on_frame(self: &Arc<Self>, link: &Arc<Link>, frame: Frame) {
        self.on_frame_related(link, frame, None);
    }

    /// Handles one frame the server sent while it answers our request `related` (on that
    /// request's HTTP answer stream): requests in it belong to the client that asked.
    pub(crate) fn on_frame_related(
        self: &Arc<Self>,
        link: &Arc<Link>,
        frame: Frame,
        related: Option<u64>,
    ) {
        match frame {
            Frame::Line(line) => self.on_message(link, &line, related),
            Frame::TooLarge { head, tail, len } => {
                // The head's top-level id first (nesting is known there); the last `"id"` of the
                // tail only when the head has none (serializers that write the id last).
                let id = jsonrpc::scan_id(&head)
                    .and_then(|i| i.parse::<u64>().ok())
                    .or_else(|| {
                        jsonrpc::scan_id_in_tail(&tail)
                            .and_then(|i| i.parse::<u64>().ok())
                            .filter(|i| self.pending().contains_key(i))
                    });
                tracing::warn!(
                    upstream = %self.name,
                    bytes = len,
                    max = self.settings.max_message_size,
                    "a message from the upstream exceeds max_message_size; dropped"
                );
                if let Some(id) = id {
                    self.settle(id, Reply::TooLarge(len));
                }
            }
        }
    }

    fn on_message(self: &Arc<Self>, link: &Arc<Link>, line: &[u8], related: Option<u64>) {
        let (env, kind) = match Envelope::parse(line) {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!(upstream = %self.name, error = ?e, "ignored a malformed message from the upstream");
                let head = String::from_utf8_lossy(&line[..line.len().min(200)]);
                let head = steadfast::sanitize(head.trim()).into_owned();
                *self.noise.lock().unwrap_or_else(|e| e.into_inner()) = Some(head);
                self.noise_seen.notify_one();
                return;
            }
        };
        match kind {
            MessageKind::Response => {
                let Some(id) = env.id.and_then(|i| i.get().parse::<u64>().ok()) else {
                    return;
                };
                let reply = match (env.result, env.error) {
                    (Some(r), _) => {
                        if let Some(task) = task_owners::created_task(r.get()) {
                            let origin = self.pending().get(&id).and_then(|p| p.origin);
                            if let Some(origin) = origin {
                                self.task_owners.insert(task, origin);
                            }
                        }
                        Reply::Result(r.get().to_owned())
                    }
                    (_, Some(e)) => Reply::Error(e.get().to_owned()),
                    _ => return,
                };
                self.settle(id, reply);
            }
            MessageKind::Notification => self.on_notification(link, &env, related),
            MessageKind::Request => self.on_request(link, &env, related),
        }
    }

    /// A notification from the server: progress and cancels routed to the request or client
    /// they concern, a related log to the client that asked, the acknowledgment of the
    /// gateway's own listen kept, and the rest (list changes, resource updates, logs) to every
    /// client.
    fn on_notification(&self, link: &Link, env: &Envelope<'_>, related: Option<u64>) {
        let method = env.method.as_deref().unwrap_or_default();
        match method {
            "notifications/progress" => self.on_progress(method, env),
            // The server cancels a request it sent to the client: rename the id.
            "notifications/cancelled" => self.on_server_cancelled(link, env),
            // A log the server sent on our request's answer stream is that request's: it goes
            // to the client that asked (on the request's own stream, if it has one), not to
            // every client. List changes and resource updates concern every session.
            "notifications/message" if related.is_some() => {
                self.on_related_log(method, env, related);
            }
            // The acknowledgment of the gateway's own listen (`listen.rs`): nobody else's.
            super::changes::ACKNOWLEDGED => self.on_listen_acknowledged(env),
            _ => self.broadcast(method, env),
        }
    }

    /// A request's progress, to its client with the client's own token, only increasing.
    fn on_progress(&self, method: &str, env: &Envelope<'_>) {
        let Some(params) = env.params else { return };
        let Ok(mut v) = serde_json::from_str::<Value>(params.get()) else {
            return;
        };
        let Some(id) = v.get("progressToken").and_then(progress_id) else {
            return;
        };
        let route = self.pending().get(&id).and_then(|p| p.progress.clone());
        let Some(route) = route else { return };
        route.activity.notify_one();
        let value = v.get("progress").and_then(Value::as_f64).unwrap_or(0.0);
        {
            let mut high = route.high.lock().unwrap_or_else(|e| e.into_inner());
            if value <= *high && *high > 0.0 {
                return;
            }
            *high = value;
        }
        if let Ok(token) = serde_json::from_str::<Value>(&route.token) {
            v["progressToken"] = token;
        }
        route.client.push_related(
            route.stream.as_deref(),
            jsonrpc::notification(method, Some(&v.to_string())),
        );
    }

    /// The server cancelled a request it sent to a client: that client's entry ends.
    fn on_server_cancelled(&self, link: &Link, env: &Envelope<'_>) {
        let clients = self.clients();
        let Some(params) = env.params else {
            return;
        };
        if let Ok(v) = serde_json::from_str::<Value>(params.get()) {
            let up = v.get("requestId").map(Value::to_string).unwrap_or_default();
            let reason = v
                .get("reason")
                .and_then(Value::as_str)
                .map(|r| steadfast::sanitize(r).into_owned());
            // The entry ends with the cancel: a late answer from the client goes
            // nowhere, and the slot is free again.
            for client in &clients {
                if client.server_cancelled(self, link.generation(), &up, reason.as_deref()) {
                    break;
                }
            }
        }
    }

    /// A log related to one of our requests: to the client that sent it.
    fn on_related_log(&self, method: &str, env: &Envelope<'_>, related: Option<u64>) {
        let clients = self.clients();
        let target = related.and_then(|id| {
            let pending = self.pending();
            let p = pending.get(&id)?;
            Some((p.origin?, p.stream.clone()))
        });
        let found = target.and_then(|(serial, stream)| {
            let client = clients.iter().find(|c| c.serial() == serial)?;
            Some((client, stream))
        });
        let line = jsonrpc::notification(method, env.params.map(RawValue::get));
        match found {
            Some((client, stream)) => {
                client.push_related(stream.as_deref(), line);
            }
            None => {
                for client in &clients {
                    client.push_notification(line.clone());
                }
            }
        }
    }

    /// The acknowledgment of the gateway's own listen: the newest acknowledged serial.
    fn on_listen_acknowledged(&self, env: &Envelope<'_>) {
        #[derive(serde::Deserialize)]
        struct Meta {
            #[serde(rename = "io.modelcontextprotocol/subscriptionId")]
            id: Option<Value>,
        }
        #[derive(serde::Deserialize)]
        struct Ack {
            #[serde(rename = "_meta")]
            meta: Option<Meta>,
        }
        let id = env
            .params
            .and_then(|p| serde_json::from_str::<Ack>(p.get()).ok())
            .and_then(|a| a.meta?.id)
            .and_then(|id| progress_id(&id));
        if let Some(id) = id {
            self.listen_acked.send_if_modified(|last| {
                let newer = id > *last;
                if newer {
                    *last = id;
                }
                newer
            });
        }
    }

    /// Everything else: to the listens' hub and every client.
    fn broadcast(&self, method: &str, env: &Envelope<'_>) {
        let clients = self.clients();
        if method == "notifications/tools/list_changed" {
            let me = self.name.clone();
            tracing::info!(upstream = %me, "the upstream's tool list changed");
        }
        let mut params = env.params.map(RawValue::get);
        if let Some(changes) = self.changes() {
            changes.publish(method, params);
        }
        // On the gateway's listen, a modern server stamps its own subscription id:
        // meaningless to a session, so left out (a resource update keeps its URI).
        let unstamped;
        if self.is_modern() && params.is_some_and(|p| p.contains(super::changes::SUBSCRIPTION_ID)) {
            unstamped = unstamp(params.unwrap_or_default());
            params = unstamped.as_deref();
        }
        let list_changed = method.ends_with("/list_changed");
        for client in &clients {
            if list_changed && !client.is_initialized() {
                continue;
            }
            client.push_notification(jsonrpc::notification(method, params));
        }
    }

    fn on_request(self: &Arc<Self>, link: &Arc<Link>, env: &Envelope<'_>, related: Option<u64>) {
        let id = env.id.map(RawValue::get).unwrap_or("null");
        let method = env.method.as_deref().unwrap_or_default();
        if method == "ping" {
            let _ = link.send(jsonrpc::result_response(id, "{}"), None);
            return;
        }
        let task = env.params.and_then(|p| task_owners::related_task(p.get()));
        let routed = self
            .route_server_request(method, related, task.as_deref())
            .and_then(|(client, relation)| {
                client.forward_server_request(self, link, id, method, env.params, relation)
            });
        if let Err(declined) = routed {
            let _ = link.send(declined.response(id), None);
        }
    }

    /// The client a request from the server goes to: the one whose request the server relates
    /// it to (it came on that request's HTTP answer stream, or it names a task that client
    /// created); else the one with the newest request in flight here (MCP servers ask while
    /// they work on a client's request, and stdio carries no relation); else the one that most
    /// recently sent a request; else any. With the client, the stream of the client request
    /// it was related to (or guessed to be), when that request has one: a client that never
    /// opened its session's event stream still gets it.
    fn route_server_request(
        &self,
        method: &str,
        related: Option<u64>,
        task: Option<&str>,
    ) -> Result<Recipient, Declined> {
        let live = self.clients();
        // A session of one modern HTTP request is not among the upstream's clients (it gets
        // no notifications): it is found among the transient ones while its request runs.
        let find = |serial: u64| {
            live.iter()
                .find(|c| c.serial() == serial)
                .cloned()
                .or_else(|| transient(serial))
        };
        // A transient client that did not register: it declared no capability for input
        // requests (`session/input_required`).
        let gone = |serial: u64, why: &str| {
            if serial & TRANSIENT_SERIAL != 0 {
                Declined::missing_capability(method)
            } else {
                Declined::internal(why.to_owned())
            }
        };
        // A related client that is gone: no other session may answer in its name. A task
        // outlives the request that created it: its requests go to the session's own stream.
        if let Some(owner) = task.and_then(|t| self.task_owners.get(t)) {
            return find(owner)
                .map(|c| (c, Relation::Known(None)))
                .ok_or_else(|| gone(owner, "the client session that created this task has ended"));
        }
        let (related, mut in_flight) = {
            let pending = self.pending();
            let related = related.and_then(|id| {
                let p = pending.get(&id)?;
                Some((p.origin?, p.stream.clone()))
            });
            let in_flight: Vec<(u64, u64)> = pending
                .iter()
                .filter_map(|(id, p)| Some((*id, p.origin?)))
                .collect();
            (related, in_flight)
        };
        if let Some((origin, stream)) = related {
            return find(origin)
                .map(|c| (c, Relation::Known(stream)))
                .ok_or_else(|| {
                    gone(
                        origin,
                        "the client session this request belongs to has ended",
                    )
                });
        }
        in_flight.sort_unstable_by_key(|&(id, _)| std::cmp::Reverse(id));
        // The newest call in flight whose client can be asked. A modern HTTP call without
        // input capabilities (a transient client, registered nowhere) is passed over: the
        // request may be another client's, which must not be refused for it. Only when such
        // calls are all that is in flight is it theirs: refused as they would refuse it.
        let mut transient = None;
        for (id, serial) in in_flight {
            if let Some(client) = find(serial) {
                let stream = self.pending().get(&id).and_then(|p| p.stream.clone());
                return Ok((client, Relation::Guessed(stream)));
            }
            if serial & TRANSIENT_SERIAL != 0 {
                transient.get_or_insert(serial);
            }
        }
        if let Some(serial) = transient {
            return Err(gone(serial, ""));
        }
        find(self.last_active.load(Ordering::Relaxed))
            .or_else(|| live.first().cloned())
            .map(|c| (c, Relation::Guessed(None)))
            .ok_or_else(|| Declined::internal("no client is connected".to_owned()))
    }

    /// Relays a client's reply to a request the server sent, if its connection still lives.
    pub(crate) fn reply_to_server(&self, generation: u64, line: Vec<u8>) {
        if let LinkState::Up(link) = &*self.state.borrow()
            && link.generation() == generation
        {
            let _ = link.send(line, None);
        }
    }
}

/// Clients that are not among any upstream's (a session of one modern HTTP request), by
/// serial, while one of their requests runs: a server request related to it finds its client.
type TransientTable =
    std::collections::HashMap<u64, std::sync::Weak<dyn Downstream>, foldhash::fast::FixedState>;

static TRANSIENT: std::sync::LazyLock<std::sync::Mutex<TransientTable>> =
    std::sync::LazyLock::new(std::sync::Mutex::default);

fn transient_table() -> std::sync::MutexGuard<'static, TransientTable> {
    TRANSIENT.lock().unwrap_or_else(|e| e.into_inner())
}

fn transient(serial: u64) -> Option<Arc<dyn Downstream>> {
    transient_table().get(&serial)?.upgrade()
}

/// Keeps a client findable by the serial its requests carry upstream, until dropped.
#[derive(Debug)]
pub(crate) struct Transient(u64);

/// Makes `client` findable for the server requests related to its requests (see
/// [`Transient`]); the table holds one weak reference per registered client.
pub(crate) fn register_transient(client: &Arc<dyn Downstream>) -> Transient {
    let serial = client.serial();
    transient_table().insert(serial, Arc::downgrade(client));
    Transient(serial)
}

impl Drop for Transient {
    fn drop(&mut self) {
        transient_table().remove(&self.0);
    }
}

/// A notification's params without the subscription id a modern server stamped in `_meta`
/// (and without `_meta` when nothing else is left in it); `None` when nothing is left at all.
fn unstamp(params: &str) -> Option<String> {
    let mut v: Value = serde_json::from_str(params).ok()?;
    let p = v.as_object_mut()?;
    if let Some(meta) = p.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(super::changes::SUBSCRIPTION_ID);
        if meta.is_empty() {
            p.remove("_meta");
        }
    }
    (!p.is_empty()).then(|| v.to_string())
}
