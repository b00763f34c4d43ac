//! What one upstream connection must be asked so that its announcements reach the gateway.
//!
//! A handshake-era server sends list changes on its connection unasked, and resource updates
//! for the URIs subscribed with `resources/subscribe`: the gateway subscribes (and
//! unsubscribes) the URIs its modern listeners watch. A modern (2026-07-28) server sends
//! nothing unasked: the gateway keeps a `subscriptions/listen` of its own open on the
//! connection, for the list changes the server declares and the URIs the listeners watch,
//! and listens again when that set of URIs changes. What arrives goes to the sessions and the
//! listeners alike (`inbound.rs`), so a handshake-era client in front of a modern server gets
//! list changes too.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::changes::{Follower, Wanted};
use super::{Link, Params, Reply, Upstream};

/// Listens the gateway's own listen may fail in a row on one connection before it gives up
/// (until the next connection).
const MAX_FAILURES: u32 = 5;

/// What a connection that completed its handshake will be asked (from its capabilities),
/// prepared before the connection is published: a listen the front acknowledges from then on
/// waits for this connection to watch its URIs too.
pub(super) struct Plan {
    lists: [(&'static str, bool); 3],
    follower: Option<Follower>,
    wanted: tokio::sync::watch::Receiver<Wanted>,
}

/// The plan for `up`'s new connection; `None` when no front listens through this upstream.
pub(super) fn plan(up: &Upstream) -> Option<Plan> {
    let changes = up.changes()?;
    let caps = up
        .init_result()
        .and_then(|r| serde_json::from_str::<Value>(&r).ok())
        .and_then(|v| v.get("capabilities").cloned())
        .unwrap_or(Value::Null);
    let flag = |path: &str| caps.pointer(path).and_then(Value::as_bool) == Some(true);
    let subscribe = flag("/resources/subscribe");
    let lists = [
        ("toolsListChanged", flag("/tools/listChanged")),
        ("promptsListChanged", flag("/prompts/listChanged")),
        ("resourcesListChanged", flag("/resources/listChanged")),
    ];
    // Only a connection that can deliver resource updates holds a new listen's
    // acknowledgment back until it watches the listen's URIs.
    Some(Plan {
        lists,
        follower: subscribe.then(|| changes.follower()),
        wanted: changes.wanted(),
    })
}

/// Follows the connection `link` until it ends: the gateway's listen (modern server) or its
/// resource subscriptions (handshake-era server).
pub(super) async fn follow(up: Arc<Upstream>, link: Arc<Link>, plan: Plan) {
    let Plan {
        lists,
        follower,
        wanted,
    } = plan;
    let work = async {
        if up.is_modern() {
            listen(&up, &link, lists, follower.as_ref(), wanted).await;
        } else if let Some(f) = &follower {
            subscriptions(&up, &link, f, wanted).await;
        }
    };
    tokio::select! {
        _ = work => {}
        _ = link.closed() => {}
        _ = up.shutting_down() => {}
    }
}

/// Waits (bounded by `request_timeout`) until the server acknowledged the gateway's listen
/// `id`.
async fn acknowledged(up: &Upstream, id: u64) {
    let mut acked = up.listen_acked.subscribe();
    let wait = async {
        loop {
            if *acked.borrow_and_update() >= id || acked.changed().await.is_err() {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(up.settings.request_timeout, wait).await;
}

/// A modern server: one listen of the gateway's own open at a time; when the URIs wanted
/// change, the new listen is opened before the old one ends (no gap; a change announced on
/// both is a level trigger, harmless twice). `follower` (a server that offers resource
/// subscriptions) says which URIs it watches once the server acknowledged them.
async fn listen(
    up: &Arc<Upstream>,
    link: &Arc<Link>,
    lists: [(&str, bool); 3],
    follower: Option<&Follower>,
    mut wanted: tokio::sync::watch::Receiver<Wanted>,
) {
    let mut failures = 0u32;
    let mut open = None;
    loop {
        let now = wanted.borrow_and_update().clone();
        let uris = if follower.is_some() {
            now.uris.clone()
        } else {
            Arc::default()
        };
        let mut filter = serde_json::Map::new();
        for (key, on) in lists {
            if on {
                filter.insert(key.into(), Value::Bool(true));
            }
        }
        if !uris.is_empty() {
            filter.insert("resourceSubscriptions".into(), json!(*uris));
        }
        if filter.is_empty() {
            // Nothing to listen for (yet): wait for URIs.
            drop(open.take());
            let Some(f) = follower else { return };
            f.covered(now.serial);
            if wanted.changed().await.is_err() {
                return;
            }
            continue;
        }
        let params = json!({"notifications": filter});
        let (guard, mut reply) = up.call(
            link,
            "subscriptions/listen",
            Some(Params::Value(&params)),
            None,
        );
        let id = guard.id();
        // The old listen ends once the new one is sent.
        drop(open.replace(guard));
        let mut acked = std::pin::pin!(acknowledged(up, id));
        let mut told = false;
        loop {
            tokio::select! {
                r = &mut reply => {
                    open = None;
                    match ended(up, link, r, &mut failures) {
                        Some(pause) => tokio::time::sleep(pause).await,
                        None => return,
                    }
                    break;
                }
                _ = &mut acked, if !told => {
                    told = true;
                    if let Some(f) = follower {
                        f.covered(now.serial);
                    }
                }
                changed = wanted.changed(), if follower.is_some() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
            }
        }
    }
}

/// The gateway's listen on the server ended with `r`: how long to wait before listening
/// again, or `None` to stop on this connection.
fn ended(
    up: &Upstream,
    link: &Link,
    r: Result<Reply, tokio::sync::oneshot::error::RecvError>,
    failures: &mut u32,
) -> Option<Duration> {
    let why = match r {
        // The server ended it gracefully (it is stopping, or shedding listens).
        Ok(Reply::Result(_)) => "the server closed it".to_owned(),
        Ok(Reply::Error(e)) => {
            let code = serde_json::from_str::<Value>(&e)
                .ok()
                .and_then(|v| v["code"].as_i64());
            if code == Some(-32601) {
                tracing::info!(upstream = %up.name, "the upstream does not serve subscriptions/listen: its list changes are not relayed");
                return None;
            }
            format!("refused: {}", steadfast::sanitize(&e))
        }
        Ok(other) => steadfast::sanitize(&format!("{other:?}")).into_owned(),
        Err(_) => "dropped".to_owned(),
    };
    if link.is_closed() {
        return None;
    }
    *failures += 1;
    tracing::warn!(upstream = %up.name, failures = *failures, reason = %why, "the gateway's subscriptions/listen on the upstream ended");
    if *failures >= MAX_FAILURES {
        tracing::warn!(upstream = %up.name, "not listening to the upstream again until it reconnects");
        return None;
    }
    Some(Duration::from_millis(500) * *failures)
}

/// A handshake-era server that offers resource subscriptions: `resources/subscribe` for each
/// URI a listener watches, `resources/unsubscribe` when none does any more.
///
/// A handshake-era client's own subscription to the same URI on the same server is the
/// server's one subscription too: the gateway's unsubscribe ends it (documented).
async fn subscriptions(
    up: &Arc<Upstream>,
    link: &Arc<Link>,
    follower: &Follower,
    mut wanted: tokio::sync::watch::Receiver<Wanted>,
) {
    let mut held: BTreeSet<String> = BTreeSet::new();
    loop {
        let now = wanted.borrow_and_update().clone();
        let add: Vec<String> = now.uris.difference(&held).cloned().collect();
        let gone: Vec<String> = held.difference(&now.uris).cloned().collect();
        for uri in add {
            if ask(up, link, "resources/subscribe", &uri).await {
                held.insert(uri);
            }
        }
        for uri in gone {
            ask(up, link, "resources/unsubscribe", &uri).await;
            held.remove(&uri);
        }
        follower.covered(now.serial);
        if wanted.changed().await.is_err() {
            return;
        }
    }
}
/// Sends `method` for `uri` and waits (bounded by `request_timeout`) for the answer; whether
/// it was a result.
async fn ask(up: &Arc<Upstream>, link: &Arc<Link>, method: &str, uri: &str) -> bool {
    let params = json!({"uri": uri});
    let (guard, reply) = up.call(link, method, Some(Params::Value(&params)), None);
    match tokio::time::timeout(up.settings.request_timeout, reply).await {
        Ok(Ok(Reply::Result(_))) => {
            guard.finish();
            true
        }
        Ok(r) => {
            guard.finish();
            tracing::debug!(upstream = %up.name, method, reply = ?r.ok(), "a resource subscription for a listener was not taken");
            false
        }
        Err(_) => false,
    }
}
