//! Several upstreams behind one session: one handshake for all, lists gathered from each, and
//! every other request routed by the name or URI it carries.
//!
//! Nothing waits on an upstream that is down: the handshake answers once every upstream is
//! connected or `list_timeout` has passed (whichever comes first; only when none is connected
//! does it wait out `init_timeout`), and a list answers with what the connected upstreams
//! listed within `list_timeout` — an upstream still on its first start is waited for within
//! that bound, so a client's first list is complete. An upstream missing from an answer is
//! watched, and the client is told its lists changed when it comes back.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::route::router::{Kind, MAX_NAMES, Relisted};
use crate::route::upstream_route::Route;
use crate::session::Session;
use crate::session::relay::InitAnswer;
use crate::upstream::Page;
use crate::wire::jsonrpc::{self, code};
use crate::wire::methods::CHANGED;
use futures::StreamExt;

/// Most pages gathered from one upstream for one list.
const MAX_PAGES: usize = 100;

/// The lists: method, the result's key, the capability that offers it.
const LISTS: [(&str, &str, &str); 4] = [
    ("tools/list", "tools", "tools"),
    ("prompts/list", "prompts", "prompts"),
    ("resources/list", "resources", "resources"),
    ("resources/templates/list", "resourceTemplates", "resources"),
];

/// The longest a watcher waits between two looks at an upstream missing from a list.
const MAX_WATCH_BACKOFF: Duration = Duration::from_secs(30);

impl Session {
    /// `initialize` with several upstreams ([`crate::route::topology::Topology::Namespaced`]): every one is started; the answer comes when all are
    /// connected or `list_timeout` has passed, from what is connected then.
    pub(crate) async fn initialize_all(self: &Arc<Self>, id: &str, params: &str) -> InitAnswer {
        self.router.start(params, self.client.clone());
        let routes = self.router.routes().to_vec();
        let config = self.router.config();
        let init_timeout = config.upstream_settings().init_timeout;
        let gather = init_timeout.min(config.list_timeout);
        futures::future::join_all(routes.iter().map(|r| r.upstream.wait_connected(gather))).await;
        if !routes.iter().any(|r| r.upstream.is_connected()) {
            // None yet: the first to come answers, within the handshake's bound.
            let rest = init_timeout.saturating_sub(gather);
            let first = futures::future::select_ok(
                routes
                    .iter()
                    .map(|r| Box::pin(r.upstream.wait_connected(rest))),
            )
            .await;
            if first.is_err() {
                let why = routes
                    .iter()
                    .map(|r| {
                        format!(
                            "{} ({}): {}",
                            r.name,
                            r.upstream.describe(),
                            r.upstream.down_reason().unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                let hopeless = routes.iter().all(|r| r.upstream.is_down());
                let what = if hopeless {
                    "no upstream could be started".to_owned()
                } else {
                    format!("no upstream completed its handshake within {init_timeout:?}")
                };
                let line = jsonrpc::error_response(
                    id,
                    code::UPSTREAM_UNAVAILABLE,
                    &steadfast::sanitize(&format!("{what}: {why}")),
                );
                return match hopeless {
                    true => InitAnswer::Unstartable(line),
                    false => InitAnswer::Refused(line),
                };
            }
        }
        let mut connected = Vec::new();
        for r in &routes {
            if r.upstream.is_connected() {
                self.router.expose_listed(r);
                connected.push(r.clone());
            } else {
                tracing::warn!(
                    upstream = %r.name,
                    reason = %steadfast::sanitize(&r.upstream.down_reason().unwrap_or_default()),
                    "answering initialize without this upstream; clients are told when it comes"
                );
                self.watch(r.clone());
            }
        }
        if let Some(h) = config.health_tool.as_deref()
            && let Some((route, _)) = self
                .router
                .resolve(Kind::Tool, h)
                .filter(|(r, original)| r.upstream.lists(original))
        {
            return InitAnswer::Refused(jsonrpc::error_response(
                id,
                code::INVALID_REQUEST,
                &format!(
                    "[proxy] health_tool = \"{h}\" is also the name of a tool of upstream \
                         `{}`; rename the health tool",
                    route.name
                ),
            ));
        }
        let result = self.extend_initialize(params, self.router.init_result(&connected));
        InitAnswer::Started(jsonrpc::result_response(id, &result))
    }

    /// Routes a request (other than `tools/call`) among several upstreams.
    pub(crate) async fn dispatch(
        self: &Arc<Self>,
        id: &str,
        method: &str,
        params: Option<&str>,
    ) -> Vec<u8> {
        if let Some((_, key, capability)) = LISTS.iter().find(|(m, ..)| *m == method) {
            return self.list_all(id, method, key, capability, params).await;
        }
        let mut p: Value = params
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
        let uri = |pointer: &str| {
            p.pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let target = match method {
            "prompts/get" => self.rename(&mut p, "/name", Kind::Prompt),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                match uri("/uri") {
                    Some(u) => self.route_resource(&u).await,
                    None => None,
                }
            }
            "completion/complete" => match p.pointer("/ref/type").and_then(Value::as_str) {
                Some("ref/prompt") => self.rename(&mut p, "/ref/name", Kind::Prompt),
                Some("ref/resource") => match uri("/ref/uri") {
                    Some(u) => self.route_resource(&u).await,
                    None => None,
                },
                _ => None,
            },
            "logging/setLevel" => return self.set_level(id, params).await,
            // An upstream's own task: the upstream that created it for one of our calls.
            "tasks/get" | "tasks/result" | "tasks/cancel" => {
                let task = p.get("taskId").and_then(Value::as_str);
                let routes = self.router.routes();
                task.and_then(|t| routes.iter().find(|r| r.upstream.has_task(t)).cloned())
            }
            _ => {
                return jsonrpc::error_response(
                    id,
                    code::METHOD_NOT_FOUND,
                    &format!(
                        "method not found: `{}` cannot be routed here, where several upstreams \
                         share one endpoint",
                        steadfast::sanitize(method)
                    ),
                );
            }
        };
        match target {
            // Declared for every upstream (see `merged_init`): one that has none completes nothing.
            Some(route)
                if method == "completion/complete" && !route.upstream.offers("completions") =>
            {
                jsonrpc::result_response(id, r#"{"completion":{"values":[],"hasMore":false}}"#)
            }
            Some(route) => {
                let params = (!p.is_null()).then(|| p.to_string());
                self.router
                    .replay_level(&route, self.router.config().list_timeout)
                    .await;
                self.forward_to(&route, id, method, params.as_deref()).await
            }
            None => self.not_routed(id, method, &p),
        }
    }

    /// The answer to a request no upstream of this endpoint can take: what it named (or that
    /// it named nothing).
    fn not_routed(&self, id: &str, method: &str, p: &Value) -> Vec<u8> {
        let named = ["/name", "/uri", "/ref/name", "/ref/uri"]
            .iter()
            .find_map(|ptr| p.pointer(ptr).and_then(Value::as_str));
        match named {
            // MCP's "resource not found".
            Some(uri) if method.starts_with("resources/") => jsonrpc::error_response(
                id,
                code::RESOURCE_NOT_FOUND,
                &format!(
                    "resource not found: no upstream of this endpoint lists `{}` \
                     (upstreams: {})",
                    steadfast::sanitize(uri),
                    self.upstream_names()
                ),
            ),
            Some(name) => jsonrpc::error_response(
                id,
                code::INVALID_PARAMS,
                &format!(
                    "invalid params: no upstream of this endpoint has `{}` (upstreams: \
                     {})",
                    steadfast::sanitize(name),
                    self.upstream_names()
                ),
            ),
            None => jsonrpc::error_response(
                id,
                code::INVALID_PARAMS,
                &format!(
                    "invalid params: {} needs the name or URI it is about",
                    steadfast::sanitize(method)
                ),
            ),
        }
    }

    /// The upstream for a resource URI. A client may read a URI it never listed (a tool's
    /// result links to it, or it was listed before a restart): then every upstream's resources
    /// are listed once more — one such relist at a time for the whole endpoint, at most one per
    /// [`crate::route::router::RELIST_EVERY`] — and failing that the URI's scheme or the only upstream
    /// offering resources decides.
    async fn route_resource(self: &Arc<Self>, uri: &str) -> Option<Arc<Route>> {
        if let Some(r) = self.router.route_uri(uri) {
            return Some(r);
        }
        let routes = self.router.routes().to_vec();
        let lists = routes.iter().flat_map(|r| {
            [
                self.list_from(r, "resources/list", "resources", "resources"),
                self.list_from(
                    r,
                    "resources/templates/list",
                    "resourceTemplates",
                    "resources",
                ),
            ]
        });
        let relist = async {
            futures::future::join_all(lists).await;
        };
        let found = || self.router.route_uri(uri).is_some();
        self.router.relist.run(found, relist).await;
        self.router
            .route_uri(uri)
            .or_else(|| self.router.route_scheme(uri))
            .or_else(|| {
                let mut offering = routes.iter().filter(|r| r.upstream.offers("resources"));
                match (offering.next(), offering.next()) {
                    (Some(only), None) => Some(only.clone()),
                    _ => None,
                }
            })
    }

    /// The route owning the name at `pointer` in `params`, with the name replaced by the
    /// upstream's own.
    fn rename(&self, params: &mut Value, pointer: &str, kind: Kind) -> Option<Arc<Route>> {
        let slot = params.pointer_mut(pointer)?;
        let (route, original) = self.router.resolve(kind, slot.as_str()?)?;
        let original = original.into_owned();
        *slot = Value::String(original);
        Some(route)
    }

    pub(crate) fn upstream_names(&self) -> String {
        crate::call::resolve::upstream_names(&self.router)
    }

    /// `logging/setLevel`: remembered for every upstream and sent to those that offer logging
    /// and are connected; one that connects later (or again) is told before the gateway sends
    /// it anything else, and one that is down is watched so it is told when it comes. Answers
    /// `{}`: the level is the gateway's, whatever an upstream answered.
    async fn set_level(self: &Arc<Self>, id: &str, params: Option<&str>) -> Vec<u8> {
        let bound = self.router.config().list_timeout;
        self.router.set_level(params.unwrap_or("{}"));
        let routes = self.router.routes().to_vec();
        for r in routes.iter().filter(|r| r.upstream.live_link().is_none()) {
            self.watch(r.clone());
        }
        let sends = routes.iter().map(|r| self.router.replay_level(r, bound));
        futures::future::join_all(sends).await;
        jsonrpc::result_response(id, "{}")
    }

    /// A list gathered from every upstream; one that is down or slow is left out (and watched).
    async fn list_all(
        self: &Arc<Self>,
        id: &str,
        method: &str,
        key: &str,
        capability: &str,
        params: Option<&str>,
    ) -> Vec<u8> {
        // The gateway never hands out a cursor: one page holds everything.
        let has_cursor = params
            .and_then(|p| serde_json::from_str::<Value>(p).ok())
            .is_some_and(|p| p.get("cursor").is_some_and(|c| !c.is_null()));
        if has_cursor {
            return jsonrpc::result_response(id, &json!({ key: [] }).to_string());
        }
        let routes = self.router.routes().to_vec();
        let lists = futures::future::join_all(
            routes
                .iter()
                .map(|r| self.list_from(r, method, key, capability)),
        )
        .await;
        let mut items = Vec::new();
        for (r, got) in routes.iter().zip(lists) {
            match got {
                Ok(list) => items.extend(list),
                Err(why) => {
                    tracing::info!(
                        upstream = %r.name,
                        reason = %steadfast::sanitize(&why),
                        "{method} answered without this upstream"
                    );
                    // Only an upstream that is down is watched: one that is connected and
                    // fails this list would be announced back at once, and a client that
                    // lists again on every announcement would loop.
                    if r.upstream.live_link().is_none() {
                        self.watch(r.clone());
                    }
                }
            }
        }
        let mut result = json!({ key: items });
        if method == "tools/list" {
            self.extend_tools_list(&mut result);
            if let Some(health) = crate::session::health::tool(&self.router.config())
                && let Some(tools) = result["tools"].as_array_mut()
            {
                tools.push(health);
            }
        }
        jsonrpc::result_response(id, &result.to_string())
    }

    /// Every page of one upstream's list, names namespaced, within `list_timeout`.
    async fn list_from(
        &self,
        route: &Arc<Route>,
        method: &str,
        key: &str,
        capability: &str,
    ) -> Result<Vec<Value>, String> {
        let upstream = &route.upstream;
        let bound = self.router.config().list_timeout;
        let deadline = tokio::time::Instant::now() + bound;
        let link = match upstream.live_link() {
            Some(link) => Some(link),
            // Still on its first start (the gateway, or this client's first request, just
            // started it): waited for within the list's bound, so a first list is complete.
            None if upstream.is_starting() => {
                let _ = upstream.wait_connected(bound).await;
                upstream.live_link()
            }
            None => None,
        };
        let Some(link) = link else {
            return Err(upstream
                .down_reason()
                .unwrap_or_else(|| "not connected".to_owned()));
        };
        if !upstream.offers(capability) {
            return Ok(Vec::new());
        }
        // A gathered list is at most as large as one message from the upstream could be.
        let cap = upstream.settings().max_message_size;
        let gather = async {
            self.router.replay_level(route, bound).await;
            let mut out = Vec::new();
            let mut taught = Taught::default();
            let mut bytes = 0usize;
            let pages = upstream.pages(&link, method, Some(&*self.client), MAX_PAGES);
            futures::pin_mut!(pages);
            let mut page = 0;
            let mut more = false;
            while let Some(next) = pages.next().await {
                let Page {
                    mut value,
                    bytes: n,
                } = next.map_err(|e| format!("{method}: {e}"))?;
                bytes = bytes.saturating_add(n);
                if bytes > cap {
                    tracing::warn!(upstream = %route.name, "{method}: more than {cap} bytes (max_message_size) in all; the rest is left out");
                    break;
                }
                self.learn(route, method, &value, page == 0, &mut taught);
                let items = value
                    .get_mut(key)
                    .and_then(Value::as_array_mut)
                    .map(std::mem::take)
                    .unwrap_or_default();
                out.extend(
                    items
                        .into_iter()
                        .filter_map(|item| self.namespace(route, method, item, &mut taught.names)),
                );
                more = value.get("nextCursor").is_some_and(|c| !c.is_null());
                page += 1;
            }
            if more && page >= MAX_PAGES {
                tracing::warn!(upstream = %route.name, "{method}: the list is cut short; the rest is left out");
            }
            // What this list taught replaces what the previous one did.
            if let Some(what) = taught.relisted(method) {
                self.router.relisted(route, what);
            }
            Ok(out)
        };
        tokio::time::timeout_at(deadline, gather)
            .await
            .map_err(|_| format!("it did not answer {method} within {bound:?}"))?
    }

    /// What a page teaches: tool hints, resource URIs.
    fn learn(
        &self,
        route: &Route,
        method: &str,
        page: &Value,
        first_page: bool,
        taught: &mut Taught,
    ) {
        let strings = |key: &str, field: &'static str| {
            page.get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(move |r| r.get(field).and_then(Value::as_str))
        };
        match method {
            "tools/list" => route.upstream.learn_tools(page, first_page),
            "resources/list" => {
                for uri in strings("resources", "uri") {
                    if taught.uris.len() < MAX_NAMES {
                        taught.uris.insert(uri.to_owned());
                    }
                }
            }
            "resources/templates/list" => {
                for t in strings("resourceTemplates", "uriTemplate") {
                    let fixed = t.split('{').next().unwrap_or_default();
                    if !fixed.is_empty()
                        && taught.templates.len() < MAX_NAMES
                        && taught.seen.insert(fixed.to_owned())
                    {
                        taught.templates.push(fixed.to_owned());
                    }
                }
            }
            _ => {}
        }
    }

    /// One listed item under the name clients see, remembered in `names` (this list's).
    fn namespace(
        &self,
        route: &Route,
        method: &str,
        mut item: Value,
        names: &mut HashMap<String, String>,
    ) -> Option<Value> {
        let kind = match method {
            "tools/list" => Kind::Tool,
            "prompts/list" => Kind::Prompt,
            _ => return Some(item),
        };
        let name = item.get("name").and_then(Value::as_str)?.to_owned();
        let exposed = self.router.exposed_name(route, kind, &name, names);
        if kind == Kind::Tool {
            route.tools.entry(&exposed, true);
        }
        if names.len() < MAX_NAMES || names.contains_key(&exposed) {
            // The newest name wins: a renamed tool takes its name over.
            names.insert(exposed.clone(), name);
        } else {
            // Not remembered: a call still finds a tool by its prefix and the upstream's list.
            tracing::debug!(upstream = %route.name, "the name table is full");
        }
        item["name"] = Value::String(exposed);
        Some(item)
    }

    /// Watches an upstream missing from an answer: when it answers a list again, the client
    /// is told its lists changed. One watcher per upstream per session, ended with the session.
    pub(crate) fn watch(self: &Arc<Self>, route: Arc<Route>) {
        // By route, not by name: a reload that replaces an upstream gets a watcher of its own.
        let key = Arc::as_ptr(&route) as usize;
        if !self
            .watching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key)
        {
            return;
        }
        /// Frees the slot however the watcher ends.
        struct Slot(std::sync::Weak<Session>, usize);
        impl Drop for Slot {
            fn drop(&mut self) {
                if let Some(s) = self.0.upgrade() {
                    s.watching
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&self.1);
                }
            }
        }
        let weak = Arc::downgrade(self);
        let closed = self.closed.clone();
        tokio::spawn(async move {
            let _slot = Slot(weak.clone(), key);
            let mut backoff = Duration::from_millis(500);
            loop {
                tokio::select! {
                    _ = closed.cancelled() => return,
                    _ = route.upstream.shutting_down() => return,
                    _ = route.upstream.wait_connected(Duration::from_secs(3600)) => {}
                }
                let Some(me) = weak.upgrade() else { return };
                if route.upstream.is_connected()
                    && me
                        .list_from(&route, "tools/list", "tools", "tools")
                        .await
                        .is_ok()
                {
                    tracing::info!(upstream = %route.name, "an upstream missing from a list is back; the client is told");
                    // Through the client's filter: a modern client gets these only on its
                    // listens (stamped, `announce_first_connection` and the supervisor).
                    for method in CHANGED {
                        crate::upstream::Downstream::push_notification(
                            &*me.client,
                            jsonrpc::notification(method, None),
                        );
                    }
                    return;
                }
                drop(me);
                tokio::select! {
                    _ = closed.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_WATCH_BACKOFF);
            }
        });
    }
}

/// What one complete list of an upstream taught, to replace what its previous list taught.
#[derive(Default)]
struct Taught {
    names: HashMap<String, String>,
    uris: HashSet<String>,
    templates: Vec<String>,
    /// The templates' prefixes so far, so a long list is not compared pairwise.
    seen: HashSet<String>,
}

impl Taught {
    fn relisted(self, method: &str) -> Option<Relisted> {
        Some(match method {
            "tools/list" => Relisted::Names(Kind::Tool, self.names),
            "prompts/list" => Relisted::Names(Kind::Prompt, self.names),
            "resources/list" => Relisted::Uris(self.uris),
            "resources/templates/list" => Relisted::Templates(self.templates),
            _ => return None,
        })
    }
}
