//! Change notifications for MCP 2026-07-28 listeners: the open `subscriptions/listen` streams
//! of one front, and what the upstreams announce, fanned out to them.
//!
//! A handshake-era client receives list changes and resource updates on its session; a modern
//! client has no session and asks for them with `subscriptions/listen`, whose response stream
//! carries only the kinds it asked for, each stamped with its request id under
//! `_meta["io.modelcontextprotocol/subscriptionId"]`. Every upstream of a router publishes here
//! what it announces (a handshake-era server on its connection, a modern one on the gateway's
//! own listen toward it, `listen.rs`), and so do the gateway's own announcements (an upstream
//! back after a restart, a reload that changed the set of upstreams).
//!
//! Bounded: at most `max` listeners at once (more are refused before they are acknowledged),
//! at most [`MAX_URIS`] resource URIs each, and each listener's queue is the capped queue of
//! its stream: a listener that falls behind by a full queue is ended with an error saying so
//! (there is no replay in the revision; it listens again and refetches).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

use crate::wire::jsonrpc;
use crate::wire::outbound::Outbound;

/// `_meta` key of the listen request's id on everything its stream carries.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The notification acknowledging a listen (the first message of its stream).
pub(crate) const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// Most resource URIs one listen may ask updates for.
pub(crate) const MAX_URIS: usize = 256;

/// What a listener asked for (the revision's `SubscriptionFilter`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Filter {
    /// `toolsListChanged`.
    pub tools: bool,
    /// `promptsListChanged`.
    pub prompts: bool,
    /// `resourcesListChanged`.
    pub resources: bool,
    /// `resourceSubscriptions`.
    pub uris: BTreeSet<String>,
}

impl Filter {
    /// Reads a listen request's `notifications`; an error naming what is wrong.
    pub(crate) fn parse(notifications: Option<&Value>) -> Result<Self, String> {
        let Some(n) = notifications else {
            return Err(
                "invalid params: subscriptions/listen needs params.notifications (an object)"
                    .into(),
            );
        };
        let Some(n) = n.as_object() else {
            return Err("invalid params: params.notifications must be an object".into());
        };
        let flag = |key: &str| -> Result<bool, String> {
            match n.get(key) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(format!(
                    "invalid params: params.notifications.{key} must be a boolean"
                )),
            }
        };
        let mut uris = BTreeSet::new();
        match n.get("resourceSubscriptions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => {
                for u in a {
                    let Some(u) = u.as_str() else {
                        return Err("invalid params: params.notifications.resourceSubscriptions must be an array of URI strings".into());
                    };
                    uris.insert(u.to_owned());
                }
            }
            Some(_) => {
                return Err("invalid params: params.notifications.resourceSubscriptions must be an array of URI strings".into());
            }
        }
        if uris.len() > MAX_URIS {
            return Err(format!(
                "invalid params: params.notifications.resourceSubscriptions names {} URIs; at most {MAX_URIS} per listen",
                uris.len()
            ));
        }
        Ok(Self {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris,
        })
    }

    /// The filter as the revision writes it (what is off left out).
    pub(crate) fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (key, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                m.insert(key.into(), Value::Bool(true));
            }
        }
        if !self.uris.is_empty() {
            m.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        Value::Object(m)
    }

    fn wants(&self, change: &Change) -> bool {
        match change {
            Change::Tools => self.tools,
            Change::Prompts => self.prompts,
            Change::Resources => self.resources,
            Change::Updated(uri) => self.uris.iter().any(|u| covers(u, uri)),
        }
    }
}

/// Whether an update of `updated` concerns a subscription to `subscribed`: the same URI, or a
/// sub-resource of it (the revision allows servers to announce those).
fn covers(subscribed: &str, updated: &str) -> bool {
    updated == subscribed
        || updated.strip_prefix(subscribed).is_some_and(|rest| {
            subscribed.ends_with('/') || rest.starts_with('/') || rest.starts_with('#')
        })
}

/// One change an upstream (or the gateway) announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// `notifications/tools/list_changed`.
    Tools,
    /// `notifications/prompts/list_changed`.
    Prompts,
    /// `notifications/resources/list_changed`.
    Resources,
    /// `notifications/resources/updated` for this URI.
    Updated(String),
}

impl Change {
    /// The change a notification announces (`params` raw), if it is one listeners take.
    pub(crate) fn of(method: &str, params: Option<&str>) -> Option<Change> {
        Some(match method {
            "notifications/tools/list_changed" => Change::Tools,
            "notifications/prompts/list_changed" => Change::Prompts,
            "notifications/resources/list_changed" => Change::Resources,
            "notifications/resources/updated" => {
                #[derive(serde::Deserialize)]
                struct P {
                    uri: String,
                }
                let p: P = serde_json::from_str(params?).ok()?;
                Change::Updated(p.uri)
            }
            _ => return None,
        })
    }

    fn method(&self) -> &'static str {
        match self {
            Change::Tools => "notifications/tools/list_changed",
            Change::Prompts => "notifications/prompts/list_changed",
            Change::Resources => "notifications/resources/list_changed",
            Change::Updated(_) => "notifications/resources/updated",
        }
    }

    /// The notification for a listen `id` (raw JSON) on its stream.
    fn line_for(&self, id: &Value) -> Vec<u8> {
        let mut params = json!({"_meta": {SUBSCRIPTION_ID: id}});
        if let Change::Updated(uri) = self {
            params["uri"] = Value::String(uri.clone());
        }
        jsonrpc::notification(self.method(), Some(&params.to_string()))
    }
}

/// How a listen ended, other than by its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// The gateway is stopping: a graceful close (the listen's result).
    Closed,
    /// Its queue was full when a change came: the error to answer with.
    FellBehind(usize),
}

/// One open listen.
#[derive(Debug)]
pub(crate) struct Listener {
    /// The listen request's id, as raw JSON (its subscription id).
    id: String,
    id_value: Value,
    filter: Filter,
    out: Arc<Outbound>,
    /// Set once the acknowledgment is queued: nothing is delivered before it.
    acked: std::sync::atomic::AtomicBool,
    end: Mutex<Option<End>>,
    ended: Notify,
}

impl Listener {
    /// Waits until the gateway ends this listen; how.
    pub(crate) async fn ended(&self) -> End {
        loop {
            let wait = self.ended.notified();
            if let Some(e) = self.end.lock().unwrap_or_else(|e| e.into_inner()).clone() {
                return e;
            }
            wait.await;
        }
    }

    fn finish(&self, why: End) {
        let mut end = self.end.lock().unwrap_or_else(|e| e.into_inner());
        if end.is_none() {
            *end = Some(why);
            drop(end);
            self.ended.notify_waiters();
            self.ended.notify_one();
        }
    }
}

/// Why a listen was not opened.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `max` listens are open.
    Full(usize),
    /// The gateway is stopping.
    Closing,
}

/// The resource URIs the listeners watch together, and a serial that grows with each change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// Bumped whenever `uris` changes.
    pub serial: u64,
    /// Every URI some listener watches.
    pub uris: Arc<BTreeSet<String>>,
}

/// The open listens of one front, and the resource URIs they watch together.
#[derive(Debug)]
pub(crate) struct Changes {
    max: usize,
    listeners: Mutex<Vec<Arc<Listener>>>,
    closing: std::sync::atomic::AtomicBool,
    /// Every URI some listener watches: upstreams follow it (`listen.rs`).
    wanted: watch::Sender<Wanted>,
    /// The upstream connections that follow `wanted`, each with the serial it covers (its
    /// subscriptions or its own listen include those URIs).
    followers: Mutex<Vec<Arc<std::sync::atomic::AtomicU64>>>,
    covered: Notify,
}

/// One upstream connection following the URIs wanted; unregistered when dropped.
#[derive(Debug)]
pub(crate) struct Follower {
    hub: Arc<Changes>,
    slot: Arc<std::sync::atomic::AtomicU64>,
}

impl Follower {
    /// The connection now delivers updates for the URIs of `serial`.
    pub(crate) fn covered(&self, serial: u64) {
        self.slot
            .fetch_max(serial, std::sync::atomic::Ordering::AcqRel);
        self.hub.covered.notify_waiters();
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.hub
            .followers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|f| !Arc::ptr_eq(f, &self.slot));
        self.hub.covered.notify_waiters();
    }
}

impl Changes {
    /// A hub that lets at most `max` listens be open at once.
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            listeners: Mutex::default(),
            closing: std::sync::atomic::AtomicBool::new(false),
            wanted: watch::Sender::new(Wanted::default()),
            followers: Mutex::default(),
            covered: Notify::new(),
        })
    }

    /// Registers an upstream connection that follows the URIs wanted.
    pub(crate) fn follower(self: &Arc<Self>) -> Follower {
        let slot = Arc::new(std::sync::atomic::AtomicU64::new(0));
        self.followers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(slot.clone());
        Follower {
            hub: self.clone(),
            slot,
        }
    }

    /// Waits, up to `bound`, until every follower covers the URIs of `serial` (a new listen's
    /// URIs are watched upstream before it is acknowledged).
    pub(crate) async fn wait_covered(&self, serial: u64, bound: std::time::Duration) {
        let all = async {
            loop {
                let wake = self.covered.notified();
                let behind = self
                    .followers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .any(|f| f.load(std::sync::atomic::Ordering::Acquire) < serial);
                if !behind {
                    return;
                }
                wake.await;
            }
        };
        let _ = tokio::time::timeout(bound, all).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Listener>>> {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Listens open now.
    #[cfg(test)]
    pub(crate) fn open_count(&self) -> usize {
        self.lock().len()
    }

    /// The URIs listeners watch, and their changes.
    pub(crate) fn wanted(&self) -> watch::Receiver<Wanted> {
        self.wanted.subscribe()
    }

    /// Opens listen `id` (raw JSON) delivering on `out`, not acknowledged yet (nothing is
    /// delivered to it before [`Changes::acknowledge`]); with the serial of the URIs wanted
    /// once its own are.
    pub(crate) fn open(
        &self,
        id: &str,
        filter: Filter,
        out: Arc<Outbound>,
    ) -> Result<(Arc<Listener>, u64), Refused> {
        let id_value: Value = serde_json::from_str(id).unwrap_or(Value::Null);
        let listener = Arc::new(Listener {
            id: id.to_owned(),
            id_value,
            filter,
            out,
            acked: std::sync::atomic::AtomicBool::new(false),
            end: Mutex::default(),
            ended: Notify::new(),
        });
        let mut all = self.lock();
        if self.closing.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Refused::Closing);
        }
        if all.len() >= self.max {
            return Err(Refused::Full(self.max));
        }
        all.push(listener.clone());
        let watches = !listener.filter.uris.is_empty();
        drop(all);
        if watches {
            self.recompute_wanted();
        }
        let serial = self.wanted.borrow().serial;
        Ok((listener, serial))
    }

    /// Queues the listen's acknowledgment, the first message of its stream; changes published
    /// from then on reach it (under the same lock: none can come before the acknowledgment).
    pub(crate) fn acknowledge(&self, listener: &Listener) {
        let _all = self.lock();
        if listener
            .end
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            return;
        }
        let ack = json!({
            "_meta": {SUBSCRIPTION_ID: listener.id_value},
            "notifications": listener.filter.to_json(),
        });
        listener
            .out
            .push_notification(jsonrpc::notification(ACKNOWLEDGED, Some(&ack.to_string())));
        listener
            .acked
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Removes a listen (its client left, or it ended).
    pub(crate) fn remove(&self, listener: &Arc<Listener>) {
        let mut all = self.lock();
        let before = all.len();
        all.retain(|l| !Arc::ptr_eq(l, listener));
        let removed = all.len() != before;
        drop(all);
        if removed && !listener.filter.uris.is_empty() {
            self.recompute_wanted();
        }
    }

    fn recompute_wanted(&self) {
        let union: BTreeSet<String> = self
            .lock()
            .iter()
            .flat_map(|l| l.filter.uris.iter().cloned())
            .collect();
        self.wanted.send_if_modified(|w| {
            if *w.uris == union {
                return false;
            }
            w.uris = Arc::new(union);
            w.serial += 1;
            true
        });
    }

    /// Delivers a notification an upstream (or the gateway) sent to the listeners that asked
    /// for its kind; other notifications are not for listeners.
    pub(crate) fn publish(&self, method: &str, params: Option<&str>) {
        if self.lock().is_empty() {
            return; // (no URI parsed for nobody)
        }
        if let Some(change) = Change::of(method, params) {
            self.publish_change(change);
        }
    }

    /// Delivers `change` to every listener that asked for it; a listener whose queue is full
    /// is ended (it fell behind).
    pub(crate) fn publish_change(&self, change: Change) {
        let all = self.lock();
        if all.is_empty() {
            return;
        }
        let mut behind = Vec::new();
        let acked = |l: &&Arc<Listener>| l.acked.load(std::sync::atomic::Ordering::Acquire);
        for l in all.iter().filter(acked).filter(|l| l.filter.wants(&change)) {
            if !l.out.push_notification(change.line_for(&l.id_value)) {
                behind.push(l.clone());
            }
        }
        drop(all);
        for l in behind {
            tracing::warn!(listen = %steadfast::sanitize(&l.id), "a subscriptions/listen stream fell behind (its queue is full): ended");
            l.finish(End::FellBehind(l.out_cap()));
            self.remove(&l);
        }
    }

    /// Every list changed (a reload changed the set of upstreams).
    pub(crate) fn publish_all_lists(&self) {
        for c in [Change::Tools, Change::Prompts, Change::Resources] {
            self.publish_change(c);
        }
    }

    /// Ends every listen gracefully and refuses new ones (the gateway is stopping); waits up
    /// to `bound` for each to be answered (its serving task drops the listener when it has
    /// queued the result).
    pub(crate) async fn close_all(&self, bound: std::time::Duration) {
        self.closing
            .store(true, std::sync::atomic::Ordering::Release);
        let all: Vec<_> = self.lock().drain(..).collect();
        let served: Vec<_> = all.iter().map(Arc::downgrade).collect();
        for l in all {
            l.finish(End::Closed);
        }
        self.recompute_wanted();
        let answered = async {
            while served.iter().any(|l| l.strong_count() > 0) {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        };
        let _ = tokio::time::timeout(bound, answered).await;
    }
}

impl Listener {
    fn out_cap(&self) -> usize {
        self.out.cap()
    }
}

/// The result a listen ends with: graceful (`Closed`) or the error a fallen-behind listener
/// is told.
pub(crate) fn end_line(id: &str, end: &End) -> Vec<u8> {
    let id_value: Value = serde_json::from_str(id).unwrap_or(Value::Null);
    match end {
        End::Closed => jsonrpc::result_response(
            id,
            &json!({"resultType": "complete", "_meta": {SUBSCRIPTION_ID: id_value}}).to_string(),
        ),
        End::FellBehind(cap) => jsonrpc::error_response(
            id,
            jsonrpc::code::INTERNAL_ERROR,
            &format!(
                "this subscriptions/listen stream fell behind: {cap} notifications were queued \
                 unread (the gateway's max_queued_notifications); listen again and refetch"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(v: Value) -> Filter {
        Filter::parse(Some(&v)).unwrap()
    }

    #[test]
    fn filters_are_read_and_checked() {
        let f = filter(json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]}));
        assert!(f.tools && !f.prompts && !f.resources);
        assert_eq!(
            f.to_json(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]})
        );
        assert_eq!(
            filter(json!({"toolsListChanged": false})).to_json(),
            json!({})
        );
        for bad in [
            json!({"toolsListChanged": "yes"}),
            json!({"resourceSubscriptions": "file:///a"}),
            json!({"resourceSubscriptions": [1]}),
            json!([]),
        ] {
            let e = Filter::parse(Some(&bad)).unwrap_err();
            assert!(e.starts_with("invalid params: params.notifications"), "{e}");
        }
        assert!(
            Filter::parse(None)
                .unwrap_err()
                .contains("params.notifications")
        );
        let many: Vec<String> = (0..=MAX_URIS).map(|i| format!("file:///{i}")).collect();
        let e = Filter::parse(Some(&json!({"resourceSubscriptions": many}))).unwrap_err();
        assert!(e.contains("at most 256"), "{e}");
    }

    #[test]
    fn updates_match_the_uri_or_its_sub_resources() {
        assert!(covers("file:///a", "file:///a"));
        assert!(covers("file:///a", "file:///a/b"));
        assert!(covers("file:///dir/", "file:///dir/x"));
        assert!(!covers("file:///a", "file:///ab"));
        assert!(!covers("file:///a/b", "file:///a"));
    }

    fn lines(out: &Outbound) -> Vec<Value> {
        let mut v = Vec::new();
        while !out.is_empty() {
            let line = futures::executor::block_on(out.next_message()).unwrap().0;
            v.push(serde_json::from_slice(&line).unwrap());
        }
        v
    }

    #[tokio::test]
    async fn the_ack_comes_first_and_only_asked_kinds_follow_stamped() {
        let hub = Changes::new(4);
        let out = Arc::new(Outbound::new(16));
        let f = filter(json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]}));
        let (l, serial) = hub.open("\"listen-1\"", f, out.clone()).unwrap();
        hub.publish("notifications/tools/list_changed", None);
        assert!(out.is_empty(), "nothing before the acknowledgment");
        // A follower that covers the URIs lets the acknowledgment go.
        let follower = hub.follower();
        let waiting = hub.wait_covered(serial, std::time::Duration::from_secs(5));
        follower.covered(serial);
        waiting.await;
        hub.acknowledge(&l);
        hub.publish("notifications/prompts/list_changed", None);
        hub.publish(
            "notifications/tools/list_changed",
            Some(r#"{"_meta":{"x":1}}"#),
        );
        hub.publish(
            "notifications/resources/updated",
            Some(r#"{"uri":"file:///b"}"#),
        );
        hub.publish(
            "notifications/resources/updated",
            Some(r#"{"uri":"file:///a"}"#),
        );
        hub.publish(
            "notifications/message",
            Some(r#"{"level":"info","data":"x"}"#),
        );
        let got = lines(&out);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0]["method"], ACKNOWLEDGED);
        assert_eq!(got[0]["params"]["_meta"][SUBSCRIPTION_ID], "listen-1");
        assert_eq!(got[0]["params"]["notifications"]["toolsListChanged"], true);
        assert_eq!(got[1]["method"], "notifications/tools/list_changed");
        assert_eq!(
            got[1]["params"],
            json!({"_meta": {SUBSCRIPTION_ID: "listen-1"}})
        );
        assert_eq!(got[2]["params"]["uri"], "file:///a");
        assert_eq!(
            *hub.wanted().borrow().uris,
            BTreeSet::from(["file:///a".to_owned()])
        );
        hub.remove(&l);
        assert!(hub.wanted().borrow().uris.is_empty());
        assert_eq!(hub.wanted().borrow().serial, serial + 1);
        assert_eq!(hub.open_count(), 0);
    }

    #[tokio::test]
    async fn at_most_max_listens_and_a_listener_that_falls_behind_is_ended() {
        let hub = Changes::new(2);
        let slow = Arc::new(Outbound::new(2));
        let (l, _) = hub
            .open("7", filter(json!({"toolsListChanged": true})), slow.clone())
            .unwrap();
        hub.acknowledge(&l);
        let other = Arc::new(Outbound::new(64));
        let (_o, _) = hub
            .open(
                "8",
                filter(json!({"toolsListChanged": true})),
                other.clone(),
            )
            .unwrap();
        hub.acknowledge(&_o);
        assert_eq!(
            hub.open("9", Filter::default(), Arc::new(Outbound::new(4)))
                .unwrap_err(),
            Refused::Full(2)
        );
        // The ack and one change fill the slow one's queue; the next change ends it.
        hub.publish_change(Change::Tools);
        assert_eq!(hub.open_count(), 2);
        hub.publish_change(Change::Tools);
        assert_eq!(l.ended().await, End::FellBehind(2));
        assert_eq!(hub.open_count(), 1, "its slot is free again");
        assert_eq!(
            lines(&other).len(),
            3,
            "the other listener is not held back"
        );
        let e: Value = serde_json::from_slice(&end_line("7", &End::FellBehind(2))).unwrap();
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("fell behind")
        );
        let ended = tokio::spawn({
            let o = _o.clone();
            async move { o.ended().await }
        });
        hub.close_all(std::time::Duration::from_millis(10)).await;
        assert_eq!(ended.await.unwrap(), End::Closed);
        let r: Value = serde_json::from_slice(&end_line("8", &End::Closed)).unwrap();
        assert_eq!(
            r["result"],
            json!({"resultType": "complete", "_meta": {SUBSCRIPTION_ID: 8}})
        );
        assert_eq!(
            hub.open("10", Filter::default(), Arc::new(Outbound::new(4)))
                .unwrap_err(),
            Refused::Closing
        );
    }
}
