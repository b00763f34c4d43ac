//! Which upstream a client's request goes to.
//!
//! With one upstream (`[upstream]`, `--`, or a single `mcpServers` entry) every name passes
//! unchanged: the proxy stays a drop-in. With several, each upstream is a [`Route`]: its tools
//! and prompts are listed under namespaced names (see [`crate::wire::naming`]) and a call finds its
//! upstream by the name; resources keep their URIs and are routed by the URIs each upstream
//! listed. Every route has its own supervisor, breakers and budget, so one dead upstream costs
//! the others nothing.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::route::tools::Tools;
use crate::route::topology::{Topology, UpstreamSet};
use crate::route::upstream_route::{Route, route};
use crate::upstream::{Downstream, Upstream};

mod variants;
pub(crate) use variants::{of_initialize, of_modern};

/// Most names a route remembers per kind (tools, prompts) and URIs per upstream: an upstream
/// that lists without end cannot grow the gateway's memory without end. Each complete list
/// replaces what the previous one taught, so a full table never stays full of names the
/// upstream no longer lists.
pub(crate) const MAX_NAMES: usize = 10_000;

/// The least time between the end of one relist of every upstream's resources (for a URI
/// nobody listed) and the start of the next: a client reading unknown URIs in a loop costs the
/// upstreams one relist a second, not one per read.
pub(crate) const RELIST_EVERY: Duration = Duration::from_secs(1);

/// What one complete list of an upstream taught: it replaces what the previous one did.
#[derive(Debug)]
pub(crate) enum Relisted {
    /// Names clients see → the upstream's own, of tools or prompts.
    Names(Kind, HashMap<String, String>),
    /// Listed resources' URIs.
    Uris(HashSet<String>),
    /// Listed templates' fixed prefixes.
    Templates(Vec<String>),
}

/// One relist at a time, at most one per [`RELIST_EVERY`].
#[derive(Debug, Default)]
pub(crate) struct RelistGate {
    /// When the last relist ended. Waiting for the lock is waiting for the relist in flight.
    last: tokio::sync::Mutex<Option<tokio::time::Instant>>,
}

impl RelistGate {
    /// Runs `relist` unless `found()` says a relist that ended meanwhile already found what was
    /// missing, or one ended less than [`RELIST_EVERY`] ago. Whether it ran.
    pub(crate) async fn run(
        &self,
        found: impl Fn() -> bool,
        relist: impl Future<Output = ()>,
    ) -> bool {
        let mut last = self.last.lock().await;
        if found() || last.is_some_and(|t| t.elapsed() < RELIST_EVERY) {
            return false;
        }
        relist.await;
        *last = Some(tokio::time::Instant::now());
        true
    }
}

/// What kind of name is being mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A tool.
    Tool,
    /// A prompt.
    Prompt,
}

/// The routes in force after a reload, and those of them that are new (to be started).
type NextRoutes = (Vec<Arc<Route>>, Vec<Arc<Route>>);

/// A client the upstreams were started for (an upstream a reload adds is started for it too).
type Started = std::sync::Weak<dyn Downstream>;

/// The routes of one endpoint, shared by every session on it.
pub struct Router {
    /// Replaced as a whole when a reload changes the set; a request works on the snapshot it
    /// took.
    routes: RwLock<Arc<Vec<Arc<Route>>>>,
    /// One upstream or several: fixed at build (a reload cannot change it).
    topology: Topology,
    config: RwLock<Arc<crate::Config>>,
    shared: crate::route::shared::SharedState,
    /// The first client's `initialize` params and every client so far: an upstream added by a
    /// reload is started with them.
    started: std::sync::Mutex<(Option<String>, Vec<Started>)>,
    /// Relists of every upstream's resources for a URI nobody listed.
    pub(crate) relist: RelistGate,
    /// The newest `logging/setLevel` params any client sent, with a serial: an upstream that
    /// connects later (or again) is told before the gateway sends it anything else.
    level: Mutex<Option<(u64, Arc<str>)>>,
    /// The front's `subscriptions/listen` streams (MCP 2026-07-28 clients): every upstream
    /// publishes its announcements there.
    changes: Arc<crate::upstream::changes::Changes>,
    /// Started by the gateway before any client (`start_early`, the HTTP front): clients
    /// declaring other capabilities get connections of their own (`variants.rs`).
    early: std::sync::atomic::AtomicBool,
    variants: variants::Variants,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("routes", &self.routes())
            .finish_non_exhaustive()
    }
}

impl Router {
    fn new(
        routes: Vec<Arc<Route>>,
        topology: Topology,
        config: Arc<crate::Config>,
        shared: crate::route::shared::SharedState,
    ) -> Arc<Self> {
        let changes = crate::upstream::changes::Changes::new(config.limits.max_listens);
        for r in &routes {
            r.upstream.publish_to(changes.clone());
        }
        Arc::new(Self {
            changes,
            routes: RwLock::new(Arc::new(routes)),
            topology,
            config: RwLock::new(config),
            shared,
            started: std::sync::Mutex::default(),
            relist: RelistGate::default(),
            level: Mutex::default(),
            early: std::sync::atomic::AtomicBool::new(false),
            variants: variants::Variants::default(),
        })
    }

    /// Every route now (a snapshot: a reload may change the set afterwards).
    pub(crate) fn routes(&self) -> Arc<Vec<Arc<Route>>> {
        self.routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Clients that initialized on this router and are still there (the admin console).
    pub(crate) fn live_clients(&self) -> usize {
        let started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        started.1.iter().filter(|c| c.strong_count() > 0).count()
    }

    /// The routers of clients with other capability sets (the admin console).
    pub(crate) fn variant_routers(&self) -> Vec<Arc<Router>> {
        self.variants()
    }

    /// Whether this router's state is shared with other replicas through Redis.
    pub(crate) fn shared_on_redis(&self) -> bool {
        self.shared.on_redis()
    }

    /// The front's `subscriptions/listen` streams.
    pub(crate) fn changes(&self) -> &Arc<crate::upstream::changes::Changes> {
        &self.changes
    }

    /// The configuration in force.
    pub(crate) fn config(&self) -> Arc<crate::Config> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Starts every upstream (once) with a client's `initialize` params, and sends what they
    /// send to `client` too.
    pub(crate) fn start(&self, params: &str, client: Arc<dyn Downstream>) {
        {
            let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
            if started.0.is_none() {
                started.0 = Some(params.to_owned());
            }
            started.1.retain(|c| c.strong_count() > 0);
            // A client that initializes again is still one client.
            // Compared by address alone: a vtable pointer may differ between codegen units.
            let me = Arc::as_ptr(&client).cast::<()>();
            if !started.1.iter().any(|c| c.as_ptr().cast::<()>() == me) {
                started.1.push(Arc::downgrade(&client));
            }
        }
        for r in self.routes().iter() {
            r.upstream.start(params, client.clone());
        }
    }

    /// Starts every upstream (once) before any client came, with the gateway's own
    /// `initialize` params (`gateway_init_params`); clients that come later are added by
    /// [`Router::start`].
    pub(crate) fn start_early(&self) {
        let params = gateway_init_params();
        {
            let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
            if started.0.is_none() {
                started.0 = Some(params.clone());
                self.early.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        for r in self.routes().iter() {
            r.upstream.start_alone(&params);
        }
    }

    /// One upstream or several: what differs between them is decided by this.
    pub(crate) fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The first route: the only one with a single upstream; with several, its settings stand
    /// for every upstream's (they all come from the same config).
    pub(crate) fn first(&self) -> Arc<Route> {
        match &self.topology {
            Topology::Single(route) => route.clone(),
            Topology::Namespaced { .. } => self.routes()[0].clone(),
        }
    }

    /// The `initialize` result the upstreams (those `connected`, with several) give a client,
    /// before the session's extension amends it.
    pub(crate) fn init_result(&self, connected: &[Arc<Route>]) -> String {
        let health_tool = self.config().health_tool.is_some();
        self.topology.init_result(connected, health_tool)
    }

    /// Names and breakers for the tools an upstream listed when it connected, so calls find
    /// their upstream and a shared breaker hears of an outage before the first call.
    pub(crate) fn expose_listed(&self, route: &Route) {
        for name in route.upstream.listed_names() {
            if let Some(exposed) = self.expose(route, Kind::Tool, &name) {
                route.tools.entry(&exposed, true);
            }
        }
    }

    /// The route and the upstream's own name for a name a client sent; `None` if no upstream
    /// owns it.
    pub(crate) fn resolve<'n>(
        &self,
        kind: Kind,
        name: &'n str,
    ) -> Option<(Arc<Route>, Cow<'n, str>)> {
        let sep = match &self.topology {
            Topology::Single(route) => return Some((route.clone(), Cow::Borrowed(name))),
            Topology::Namespaced { separator } => separator,
        };
        let routes = self.routes();
        for r in routes.iter() {
            let names = r.names.read().unwrap_or_else(|e| e.into_inner());
            let map = match kind {
                Kind::Tool => &names.tools,
                Kind::Prompt => &names.prompts,
            };
            if let Some(original) = map.get(name) {
                return Some((r.clone(), Cow::Owned(original.clone())));
            }
        }
        // Not listed (yet) to a client in this process: the prefix decides the upstream; the
        // tool is the listed one this name stands for (it may have been rewritten to fit),
        // else the rest of the name as written.
        let (route, rest) = routes.iter().find_map(|r| {
            name.strip_prefix(r.prefix.as_str())
                .and_then(|rest| rest.strip_prefix(sep.as_str()))
                .filter(|rest| !rest.is_empty())
                .map(|rest| (r.clone(), rest))
        })?;
        if kind == Kind::Tool {
            let listed = route.upstream.listed_names();
            if let Some(original) = listed
                .iter()
                .find(|o| self.name_for(&route, sep, o, &listed) == name)
            {
                return Some((route.clone(), Cow::Owned(original.clone())));
            }
        }
        Some((route, Cow::Borrowed(rest)))
    }

    /// The name clients see for `original` among the upstream's `listed` tools: the plain
    /// form, unless another listed name has a better claim to it (one written exactly that
    /// way, else the alphabetically first); then the hashed form. The same answer whatever
    /// order the tools are listed in, so names stay stable across restarts.
    fn name_for(&self, route: &Route, sep: &str, original: &str, listed: &[String]) -> String {
        let plain = crate::wire::naming::exposed(&route.prefix, sep, original);
        if crate::wire::naming::is_clean(original) && plain.len() < crate::wire::naming::MAX_NAME {
            return plain;
        }
        let beaten = listed.iter().any(|o| {
            o != original
                && (crate::wire::naming::is_clean(o) || o.as_str() < original)
                && crate::wire::naming::exposed(&route.prefix, sep, o) == plain
        });
        if beaten {
            crate::wire::naming::hashed(&route.prefix, sep, original)
        } else {
            plain
        }
    }

    /// The name clients see for `original` of `route`, remembered for calls; `None` when the
    /// name collides with another of the same upstream after fitting it to the pattern.
    pub(crate) fn expose(&self, route: &Route, kind: Kind, original: &str) -> Option<String> {
        if let Topology::Single(_) = self.topology {
            return Some(original.to_owned());
        }
        let exposed = {
            let names = route.names.read().unwrap_or_else(|e| e.into_inner());
            self.exposed_name(route, kind, original, &names.prompts)
        };
        let mut names = route.names.write().unwrap_or_else(|e| e.into_inner());
        let map = match kind {
            Kind::Tool => &mut names.tools,
            Kind::Prompt => &mut names.prompts,
        };
        if map.len() >= MAX_NAMES && !map.contains_key(&exposed) {
            // Not remembered: a call still finds it by its prefix and the upstream's list.
            tracing::debug!(upstream = %route.name, "the name table is full");
            return Some(exposed);
        }
        // The newest list is the truth: a renamed tool takes its name over.
        map.insert(exposed.clone(), original.to_owned());
        Some(exposed)
    }

    /// The name clients see for `original` of `route`, not remembered; a prompt whose plain
    /// name another prompt of `prompts` already has gets the hashed one.
    pub(crate) fn exposed_name(
        &self,
        route: &Route,
        kind: Kind,
        original: &str,
        prompts: &HashMap<String, String>,
    ) -> String {
        let sep = match &self.topology {
            Topology::Single(_) => return original.to_owned(),
            Topology::Namespaced { separator } => separator,
        };
        match kind {
            Kind::Tool => self.name_for(route, sep, original, &route.upstream.listed_names()),
            Kind::Prompt => {
                let plain = crate::wire::naming::exposed(&route.prefix, sep, original);
                match prompts.get(&plain) {
                    Some(o) if o != original => {
                        crate::wire::naming::hashed(&route.prefix, sep, original)
                    }
                    _ => plain,
                }
            }
        }
    }

    /// Takes what a complete list of `route` taught in place of what the previous one did.
    pub(crate) fn relisted(&self, route: &Route, what: Relisted) {
        if let Topology::Single(_) = self.topology {
            return;
        }
        let mut names = route.names.write().unwrap_or_else(|e| e.into_inner());
        match what {
            Relisted::Names(Kind::Tool, map) => names.tools = map,
            Relisted::Names(Kind::Prompt, map) => names.prompts = map,
            Relisted::Uris(uris) => names.uris = uris,
            Relisted::Templates(templates) => names.templates = templates,
        }
    }

    /// Remembers `level` (`logging/setLevel` params) for every upstream, now and to come.
    pub(crate) fn set_level(&self, params: &str) {
        let mut level = self.level.lock().unwrap_or_else(|e| e.into_inner());
        let serial = level.as_ref().map_or(1, |(s, _)| s + 1);
        *level = Some((serial, params.into()));
    }

    /// Tells `route` the newest level if it offers logging and its connection has not heard
    /// it yet (it connected after the level was set, or again), waiting up to `bound` for its
    /// answer.
    pub(crate) async fn replay_level(&self, route: &Route, bound: Duration) {
        let Some((serial, params)) = self.level.lock().unwrap_or_else(|e| e.into_inner()).clone()
        else {
            return;
        };
        let Some(link) = route.upstream.live_link() else {
            return;
        };
        if !route.upstream.offers("logging") {
            return;
        }
        {
            let mut sent = route.level_sent.lock().unwrap_or_else(|e| e.into_inner());
            if *sent == (link.generation(), serial) {
                return;
            }
            *sent = (link.generation(), serial);
        }
        let (guard, rx) = route.upstream.call(
            &link,
            "logging/setLevel",
            Some(crate::upstream::Params::Raw(&params)),
            None,
        );
        if tokio::time::timeout(bound, rx).await.is_ok() {
            guard.finish();
        }
    }

    /// The route for a resource URI: the upstream that listed it, else the one whose template
    /// prefix matches it longest; `None` if no upstream claimed it.
    pub(crate) fn route_uri(&self, uri: &str) -> Option<Arc<Route>> {
        if let Topology::Single(route) = &self.topology {
            return Some(route.clone());
        }
        let routes = self.routes();
        let mut best: Option<(usize, &Arc<Route>)> = None;
        for r in routes.iter() {
            let names = r.names.read().unwrap_or_else(|e| e.into_inner());
            if names.uris.contains(uri) {
                return Some(r.clone());
            }
            for t in &names.templates {
                if uri.starts_with(t.as_str()) && best.is_none_or(|(len, _)| t.len() > len) {
                    best = Some((t.len(), r));
                }
            }
        }
        best.map(|(_, r)| r.clone())
    }

    /// The only route that listed URIs of this URI's scheme (`demo://…`), if exactly one did.
    pub(crate) fn route_scheme(&self, uri: &str) -> Option<Arc<Route>> {
        let (scheme, _) = uri.split_once("://")?;
        let scheme = format!("{scheme}://");
        let routes = self.routes();
        let mut owners = routes.iter().filter(|r| {
            let names = r.names.read().unwrap_or_else(|e| e.into_inner());
            names.uris.iter().any(|u| u.starts_with(&scheme))
                || names.templates.iter().any(|t| t.starts_with(&scheme))
        });
        match (owners.next(), owners.next()) {
            (Some(only), None) => Some(only.clone()),
            _ => None,
        }
    }
}

impl Router {
    /// Supervisors (not started yet) and tool state for every upstream of `set`.
    pub(crate) fn build(
        set: UpstreamSet,
        config: &Arc<crate::Config>,
        shared: &crate::route::shared::SharedState,
    ) -> Result<Arc<Self>, String> {
        match set {
            UpstreamSet::One(spec) => {
                let upstream = Upstream::new("upstream", spec, config.upstream_settings());
                upstream.authenticate(config); // `oauth = { … }`
                let tools = Arc::new(Tools::with_shared(config.clone(), shared.clone()));
                let only = route(upstream, tools, String::new());
                Ok(Self::new(
                    vec![only.clone()],
                    Topology::Single(only),
                    config.clone(),
                    shared.clone(),
                ))
            }
            UpstreamSet::Named(named) => {
                if named.is_empty() {
                    return Err("no upstream: the set of upstreams is empty".to_owned());
                }
                let names: Vec<&str> = named.iter().map(|n| n.name.as_str()).collect();
                if let Some((_, _, why)) = crate::wire::naming::ambiguous(&names, &config.separator)
                {
                    return Err(why);
                }
                let routes = named
                    .into_iter()
                    .map(|n| Self::make_route(n, config, shared))
                    .collect();
                Ok(Self::new(
                    routes,
                    Topology::Namespaced {
                        separator: config.separator.clone(),
                    },
                    config.clone(),
                    shared.clone(),
                ))
            }
        }
    }

    fn make_route(
        n: crate::config::NamedUpstream,
        config: &Arc<crate::Config>,
        shared: &crate::route::shared::SharedState,
    ) -> Arc<Route> {
        let tools = Tools::for_upstream(&n.name, config.clone(), shared.clone());
        let upstream = Upstream::new(n.name, n.spec, config.upstream_settings());
        upstream.authenticate(config); // `oauth = { … }`
        let prefix = crate::wire::naming::prefix(&upstream.name);
        route(upstream, Arc::new(tools), prefix)
    }

    /// Takes a new configuration: its policies, limits and budgets for calls that start from
    /// now on and, with several upstreams, its set of upstreams. An upstream that is gone or
    /// changed is stopped (its calls in flight fail as lost); one that is new or changed is
    /// started and announced to every client with `list_changed`. Upstreams that did not change
    /// keep their connection, breakers and sessions. A change between one upstream and several
    /// takes a restart (tool names would change under the clients); that is refused, saying so.
    pub(crate) fn reload(&self, config: Arc<crate::Config>) -> Result<Vec<String>, String> {
        let mut changes = Vec::new();
        let current = self.routes();
        let (next, added) = match &self.topology {
            Topology::Single(_) => {
                if !config.upstreams.is_empty() {
                    // One upstream runs (perhaps given after `--`): its policies reload; the
                    // set does not.
                    changes.push(
                        "the new config names several upstreams; going from one upstream to \
                         several takes a restart (policies reloaded, upstream unchanged)"
                            .to_owned(),
                    );
                }
                (current.to_vec(), Vec::new())
            }
            Topology::Namespaced { separator } => {
                self.next_routes(separator, &config, &current, &mut changes)?
            }
        };
        for r in current
            .iter()
            .filter(|r| !next.iter().any(|n| Arc::ptr_eq(n, r)))
        {
            if !changes.iter().any(|c| c.contains(&format!("`{}`", r.name))) {
                changes.push(format!("upstream `{}` removed", r.name));
            }
        }
        for r in &next {
            r.tools.reload(config.clone());
        }
        self.reload_variants(&config, &next);
        self.install(config, next, &added);
        Ok(changes)
    }

    /// Puts `config` and `next` in force: routes no longer in `next` stopped, `added` started
    /// for every client so far, and the clients and listens told when the set changed.
    fn install(&self, config: Arc<crate::Config>, next: Vec<Arc<Route>>, added: &[Arc<Route>]) {
        let current = self.routes();
        let removed: Vec<Arc<Route>> = current
            .iter()
            .filter(|r| !next.iter().any(|n| Arc::ptr_eq(n, r)))
            .cloned()
            .collect();
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
        *self.routes.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        for r in &removed {
            r.upstream.shutdown();
        }
        let (params, clients) = {
            let started = self.started.lock().unwrap_or_else(|e| e.into_inner());
            let clients: Vec<_> = started
                .1
                .iter()
                .filter_map(std::sync::Weak::upgrade)
                .collect();
            (started.0.clone(), clients)
        };
        if let Some(params) = params {
            for r in added {
                if clients.is_empty() {
                    r.upstream.start_alone(&params);
                }
                for c in &clients {
                    r.upstream.start(&params, c.clone());
                }
            }
        }
        if !added.is_empty() || !removed.is_empty() {
            for c in &clients {
                for method in crate::wire::methods::CHANGED {
                    c.push_notification(crate::wire::jsonrpc::notification(method, None));
                }
            }
            self.changes.publish_all_lists();
        }
    }

    /// With several upstreams, the routes `config` names: those unchanged kept, the new or
    /// changed ones made (and returned apart, to be started), each change said in `changes`.
    fn next_routes(
        &self,
        separator: &str,
        config: &Arc<crate::Config>,
        current: &[Arc<Route>],
        changes: &mut Vec<String>,
    ) -> Result<NextRoutes, String> {
        if config.upstreams.is_empty() {
            return Err(
                "the new config names no upstreams (several are running); going from \
                 several upstreams to one takes a restart"
                    .to_owned(),
            );
        }
        if config.separator != separator {
            return Err("a new separator renames every tool; that takes a restart".to_owned());
        }
        let mut next: Vec<Arc<Route>> = Vec::new();
        let mut added = Vec::new();
        for n in &config.upstreams {
            match current.iter().find(|r| {
                r.name == n.name && format!("{:?}", r.upstream.spec()) == format!("{:?}", n.spec)
            }) {
                Some(same) => next.push(same.clone()),
                None => {
                    let r = Self::make_route(n.clone(), config, &self.shared);
                    r.upstream.publish_to(self.changes.clone());
                    changes.push(if current.iter().any(|c| c.name == n.name) {
                        format!("upstream `{}` changed: restarted", n.name)
                    } else {
                        format!("upstream `{}` added", n.name)
                    });
                    added.push(r.clone());
                    next.push(r);
                }
            }
        }
        Ok((next, added))
    }

    /// Stops every upstream and waits (bounded by their shutdown grace) until they are gone.
    pub(crate) async fn shutdown(&self) {
        let mut routes = self.routes().to_vec();
        for v in self.variants() {
            routes.extend(v.routes().iter().cloned());
        }
        for r in routes.iter() {
            r.upstream.shutdown();
        }
        let grace = self.config().upstream_settings().shutdown_grace;
        let all = futures::future::join_all(routes.iter().map(|r| r.upstream.stopped()));
        let _ = tokio::time::timeout(grace * 3 + std::time::Duration::from_secs(1), all).await;
    }

    /// Whether the endpoint is ready (`/readyz`): any upstream connected, or all of them, as
    /// `ready` says; the names of those that are not, otherwise.
    pub(crate) fn ready(&self, ready: crate::config::Ready) -> Result<(), Vec<String>> {
        let routes = self.routes();
        let down: Vec<String> = routes
            .iter()
            .filter(|r| !r.upstream.is_connected())
            .map(|r| r.name.clone())
            .collect();
        let ok = match ready {
            crate::config::Ready::Any => down.len() < routes.len(),
            crate::config::Ready::All => down.is_empty(),
        };
        if ok { Ok(()) } else { Err(down) }
    }
}

/// The `initialize` params the gateway sends an upstream it starts before any client came: the
/// newest handshake-era revision and no client capabilities — what a server offers a client
/// that declares none. A client that declares some is served by connections started with them
/// (`variants.rs`), whose server requests go to the clients of that set.
pub(crate) fn gateway_init_params() -> String {
    serde_json::json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "steadfast-gateway", "version": env!("CARGO_PKG_VERSION")},
    })
    .to_string()
}

#[cfg(test)]
mod tests;
