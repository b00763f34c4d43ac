//! Upstream connections per declared client capability set (the HTTP front's).
//!
//! A handshake-era server decides at `initialize` what it offers from the client's
//! capabilities (server-everything lists `get-roots-list` only to a client that declared
//! `roots`, `trigger-url-elicitation` only to one that declared URL-mode elicitation). The
//! stdio front starts its upstreams with its one client's `initialize`; the HTTP front starts
//! them before any client came, with the gateway's own capabilities. So that each HTTP client
//! sees what it would see direct, a client whose declared capabilities differ from those gets
//! a *variant*: a router over connections of their own to the same upstreams, started with the
//! client's capabilities (and the gateway's client info), shared by every client that declares
//! the same set. A variant shares the routes' per-tool state (policies, breakers, budgets,
//! metrics) with the gateway's own connections, follows its reloads, and stops with it.
//!
//! At most [`MAX_VARIANTS`] exist at once; a variant no request was routed to for [`IDLE`] and
//! whose sessions have all ended makes room for a new set (its connections are stopped); when
//! none can, the client is served by the gateway's own connections (with a warning, once).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::Router;
use crate::route::topology::Topology;
use crate::route::upstream_route::{Route, route};
use crate::upstream::Upstream;

/// Most capability sets served by connections of their own at once.
pub(crate) const MAX_VARIANTS: usize = 8;

/// How long a variant no request was routed to is kept when another set needs its place.
pub(crate) const IDLE: Duration = Duration::from_secs(600);

/// The variants of one router.
#[derive(Default)]
pub(crate) struct Variants {
    table: Mutex<Vec<Variant>>,
    warned_full: AtomicBool,
    /// The canonical key of the capabilities this router was started with, once it was
    /// (they never change after: `Router::start` keeps the first params). Made once rather
    /// than per modern request (decoding the started params and sorting them cost ~6k
    /// instructions, 7% of a modern HTTP call).
    own_key: std::sync::OnceLock<String>,
}

struct Variant {
    /// The capability set, canonical JSON.
    key: String,
    router: Arc<Router>,
    used: tokio::time::Instant,
}

/// `value` as JSON with every object's keys sorted: equal sets give equal keys whatever order
/// a client wrote them in.
fn canonical(value: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// The capabilities an `initialize` body declares (`{}` when it declares none).
pub(crate) fn of_initialize(body: &[u8]) -> Value {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.pointer("/params/capabilities").cloned())
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(Default::default()))
}

/// The capabilities a modern request's envelope declares (`{}` when none).
pub(crate) fn of_modern(params: &Value) -> Value {
    params
        .get("_meta")
        .and_then(|m| m.get(crate::wire::era::CLIENT_CAPABILITIES))
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(Default::default()))
}

impl Router {
    /// The router whose upstream connections were started with `capabilities`: this one for
    /// the capabilities it was started with (or when it was started by a client, on stdio),
    /// else a variant (made and started on first use).
    pub(crate) fn for_capabilities(self: &Arc<Self>, capabilities: &Value) -> Arc<Router> {
        let own = match self.variants.own_key.get() {
            Some(own) => own,
            None => {
                let Some(own) = self.own_capabilities() else {
                    return self.clone();
                };
                self.variants.own_key.get_or_init(|| canonical(&own))
            }
        };
        let key = canonical(capabilities);
        if key == *own {
            return self.clone();
        }
        let mut table = self
            .variants
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let now = tokio::time::Instant::now();
        if let Some(v) = table.iter_mut().find(|v| v.key == key) {
            v.used = now;
            return v.router.clone();
        }
        if table.len() >= MAX_VARIANTS {
            let idle = table
                .iter()
                .enumerate()
                .filter(|(_, v)| now.duration_since(v.used) >= IDLE && !v.router.has_live_clients())
                .min_by_key(|(_, v)| v.used)
                .map(|(i, _)| i);
            match idle {
                Some(i) => {
                    let gone = table.swap_remove(i);
                    for r in gone.router.routes().iter() {
                        r.upstream.shutdown();
                    }
                }
                None => {
                    if !self.variants.warned_full.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "{MAX_VARIANTS} client capability sets have upstream connections of \
                             their own; clients declaring another set are served by the \
                             gateway's own connections (what they list may differ from what the \
                             servers would list to them direct)"
                        );
                    }
                    return self.clone();
                }
            }
        }
        let router = self.variant(capabilities);
        table.push(Variant {
            key,
            router: router.clone(),
            used: now,
        });
        router
    }

    /// The capabilities this router's upstreams were started with by the gateway itself
    /// (`start_early`); `None` when a client started them.
    fn own_capabilities(&self) -> Option<Value> {
        if !self.early.load(Ordering::Relaxed) {
            return None;
        }
        let started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        let params: Value = serde_json::from_str(started.0.as_deref()?).ok()?;
        params.get("capabilities").cloned()
    }

    /// A router over new connections to this router's upstreams, started with `capabilities`.
    fn variant(&self, capabilities: &Value) -> Arc<Router> {
        let config = self.config();
        let routes: Vec<Arc<Route>> = self
            .routes()
            .iter()
            .map(|r| variant_route(r, &config))
            .collect();
        let topology = match &self.topology {
            Topology::Single(_) => Topology::Single(routes[0].clone()),
            Topology::Namespaced { separator } => Topology::Namespaced {
                separator: separator.clone(),
            },
        };
        let child = Router::new(routes, topology, config, self.shared.clone());
        let mut params: Value =
            serde_json::from_str(&super::gateway_init_params()).unwrap_or_default();
        params["capabilities"] = capabilities.clone();
        let params = params.to_string();
        child.started.lock().unwrap_or_else(|e| e.into_inner()).0 = Some(params.clone());
        for r in child.routes().iter() {
            r.upstream.start_alone(&params);
        }
        tracing::info!(capabilities = %capabilities, "upstream connections for a new client capability set");
        child
    }

    /// Whether a client that initialized on this router is still there (its session holds
    /// the router's connections).
    fn has_live_clients(&self) -> bool {
        let started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        started.1.iter().any(|c| c.strong_count() > 0)
    }

    /// Every variant now.
    pub(super) fn variants(&self) -> Vec<Arc<Router>> {
        self.variants
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|v| v.router.clone())
            .collect()
    }

    /// Makes each variant follow a reload of this router: its config, and a connection of its
    /// own for each route in `next` (kept for a route it already follows, made and started
    /// for a new one; stopped for one that is gone).
    pub(super) fn reload_variants(&self, config: &Arc<crate::Config>, next: &[Arc<Route>]) {
        for v in self.variants() {
            let current = v.routes();
            let mut routes = Vec::new();
            let mut added = Vec::new();
            for p in next {
                match current.iter().find(|c| Arc::ptr_eq(&c.tools, &p.tools)) {
                    Some(kept) => routes.push(kept.clone()),
                    None => {
                        let r = variant_route(p, config);
                        r.upstream.publish_to(v.changes.clone());
                        added.push(r.clone());
                        routes.push(r);
                    }
                }
            }
            v.install(config.clone(), routes, &added);
        }
    }
}

/// A new connection to `parent`'s upstream, sharing its per-tool state.
fn variant_route(parent: &Route, config: &crate::Config) -> Arc<Route> {
    let upstream = Upstream::new(
        parent.name.clone(),
        parent.upstream.spec().clone(),
        config.upstream_settings(),
    );
    upstream.authenticate(config);
    route(upstream, parent.tools.clone(), parent.prefix.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_sets_written_in_another_order_are_one_key() {
        let a = json!({"roots": {"listChanged": true}, "elicitation": {"url": {}, "form": {}}});
        let b = json!({"elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}});
        assert_eq!(canonical(&a), canonical(&b));
        assert_ne!(canonical(&a), canonical(&json!({"roots": {}})));
    }
}
