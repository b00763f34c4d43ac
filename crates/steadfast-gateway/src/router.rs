//! Which upstream a client's request goes to.
//!
//! With one upstream (`[upstream]`, `--`, or a single `mcpServers` entry) every name passes
//! unchanged: the proxy stays a drop-in. With several, each upstream is a [`Route`]: its tools
//! and prompts are listed under namespaced names (see [`crate::naming`]) and a call finds its
//! upstream by the name; resources keep their URIs and are routed by the URIs each upstream
//! listed. Every route has its own supervisor, breakers and budget, so one dead upstream costs
//! the others nothing.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::tools::Tools;
use crate::upstream::Upstream;

/// Most names a route remembers per kind (tools, prompts) and URIs per upstream: an upstream
/// that lists without end cannot grow the gateway's memory without end.
pub const MAX_NAMES: usize = 10_000;

/// One upstream behind the endpoint, with its tools' state.
pub struct Route {
    /// The upstream's name in the config.
    pub name: String,
    /// Its name as the prefix of its tools' names.
    pub prefix: String,
    /// The connection.
    pub upstream: Arc<Upstream>,
    /// Per-tool state: policies, breakers, budget, metrics.
    pub tools: Arc<Tools>,
    names: RwLock<Names>,
}

#[derive(Default)]
struct Names {
    /// Name clients see → the upstream's own name.
    tools: HashMap<String, String>,
    prompts: HashMap<String, String>,
    /// URIs and URI-template prefixes this upstream listed.
    uris: std::collections::HashSet<String>,
    templates: Vec<String>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What kind of name is being mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A tool.
    Tool,
    /// A prompt.
    Prompt,
}

/// The routes of one endpoint, shared by every session on it.
#[derive(Debug)]
pub struct Router {
    routes: Vec<Arc<Route>>,
    /// `None`: one upstream, names unchanged.
    separator: Option<String>,
}

impl Router {
    /// One upstream; names pass unchanged.
    pub fn single(upstream: Arc<Upstream>, tools: Arc<Tools>) -> Arc<Self> {
        Arc::new(Self {
            routes: vec![Arc::new(Route {
                name: upstream.name.clone(),
                prefix: String::new(),
                upstream,
                tools,
                names: RwLock::default(),
            })],
            separator: None,
        })
    }

    /// Several upstreams, namespaced with `separator`. Fails if two names make tool names
    /// ambiguous (the config refuses those first, with their location).
    pub fn namespaced(
        routes: Vec<(Arc<Upstream>, Arc<Tools>)>,
        separator: &str,
    ) -> Result<Arc<Self>, String> {
        let names: Vec<&str> = routes.iter().map(|(u, _)| u.name.as_str()).collect();
        if let Some((_, _, why)) = crate::naming::ambiguous(&names, separator) {
            return Err(why);
        }
        Ok(Arc::new(Self {
            routes: routes
                .into_iter()
                .map(|(upstream, tools)| {
                    Arc::new(Route {
                        name: upstream.name.clone(),
                        prefix: crate::naming::prefix(&upstream.name),
                        upstream,
                        tools,
                        names: RwLock::default(),
                    })
                })
                .collect(),
            separator: Some(separator.to_owned()),
        }))
    }

    /// Every route.
    pub fn routes(&self) -> &[Arc<Route>] {
        &self.routes
    }

    /// Whether names are namespaced (several upstreams).
    pub fn is_namespaced(&self) -> bool {
        self.separator.is_some()
    }

    /// The first route (the only one without namespacing).
    pub fn first(&self) -> &Arc<Route> {
        &self.routes[0]
    }

    /// Whether the upstreams have been started (by a client's `initialize`).
    pub fn is_started(&self) -> bool {
        self.routes.iter().any(|r| r.upstream.is_started())
    }

    /// The route and the upstream's own name for a name a client sent; `None` if no upstream
    /// owns it.
    pub fn resolve(&self, kind: Kind, name: &str) -> Option<(Arc<Route>, String)> {
        let Some(sep) = &self.separator else {
            return Some((self.first().clone(), name.to_owned()));
        };
        for r in &self.routes {
            let names = r.names.read().unwrap_or_else(|e| e.into_inner());
            let map = match kind {
                Kind::Tool => &names.tools,
                Kind::Prompt => &names.prompts,
            };
            if let Some(original) = map.get(name) {
                return Some((r.clone(), original.clone()));
            }
        }
        // Not listed (yet) in this process: the prefix decides, the rest is the name.
        self.routes.iter().find_map(|r| {
            name.strip_prefix(r.prefix.as_str())
                .and_then(|rest| rest.strip_prefix(sep.as_str()))
                .filter(|rest| !rest.is_empty())
                .map(|rest| (r.clone(), rest.to_owned()))
        })
    }

    /// The name clients see for `original` of `route`, remembered for calls; `None` when the
    /// name collides with another of the same upstream after fitting it to the pattern.
    pub fn expose(&self, route: &Route, kind: Kind, original: &str) -> Option<String> {
        let Some(sep) = &self.separator else {
            return Some(original.to_owned());
        };
        let exposed = crate::naming::exposed(&route.prefix, sep, original);
        let mut names = route.names.write().unwrap_or_else(|e| e.into_inner());
        let map = match kind {
            Kind::Tool => &mut names.tools,
            Kind::Prompt => &mut names.prompts,
        };
        match map.get(&exposed) {
            Some(o) if o != original => {
                tracing::error!(
                    upstream = %route.name,
                    name = original,
                    other = %o,
                    exposed,
                    "two names of this upstream map to the same namespaced name; the second is not listed"
                );
                None
            }
            Some(_) => Some(exposed),
            None if map.len() >= MAX_NAMES => None,
            None => {
                map.insert(exposed.clone(), original.to_owned());
                Some(exposed)
            }
        }
    }

    /// Remembers the resources (URIs) and templates (their fixed prefix) `route` listed.
    pub fn learn_resources(&self, route: &Route, uris: &[&str], templates: &[&str]) {
        let mut names = route.names.write().unwrap_or_else(|e| e.into_inner());
        for uri in uris {
            if names.uris.len() < MAX_NAMES {
                names.uris.insert((*uri).to_owned());
            }
        }
        for t in templates {
            let fixed = t.split('{').next().unwrap_or_default();
            if !fixed.is_empty()
                && names.templates.len() < MAX_NAMES
                && !names.templates.iter().any(|p| p == fixed)
            {
                names.templates.push(fixed.to_owned());
            }
        }
    }

    /// The route for a resource URI: the upstream that listed it, else the one whose template
    /// prefix matches it longest; `None` if no upstream claimed it.
    pub fn route_uri(&self, uri: &str) -> Option<Arc<Route>> {
        if self.separator.is_none() {
            return Some(self.first().clone());
        }
        let mut best: Option<(usize, &Arc<Route>)> = None;
        for r in &self.routes {
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
    pub fn route_scheme(&self, uri: &str) -> Option<Arc<Route>> {
        let (scheme, _) = uri.split_once("://")?;
        let scheme = format!("{scheme}://");
        let mut owners = self.routes.iter().filter(|r| {
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

/// The upstreams a front serves: one (names unchanged) or several (namespaced).
#[derive(Debug, Clone)]
pub enum UpstreamSet {
    /// One server: the drop-in proxy.
    One(steadfast_mcp::Upstream),
    /// Several, by name (`[upstreams.NAME]`, or every enabled `mcpServers` entry).
    Named(Vec<crate::config::NamedUpstream>),
}

impl From<steadfast_mcp::Upstream> for UpstreamSet {
    fn from(u: steadfast_mcp::Upstream) -> Self {
        Self::One(u)
    }
}

impl UpstreamSet {
    /// The upstreams `config` names (several win over one), if any.
    pub fn from_config(config: &crate::Config) -> Option<Self> {
        if !config.upstreams.is_empty() {
            return Some(Self::Named(config.upstreams.clone()));
        }
        config.upstream.clone().map(Self::One)
    }
}

impl Router {
    /// Supervisors (not started yet) and tool state for every upstream of `set`.
    pub fn build(
        set: UpstreamSet,
        config: &Arc<crate::Config>,
        shared: &crate::shared::Shared,
    ) -> Result<Arc<Self>, String> {
        let settings = config.upstream_settings();
        match set {
            UpstreamSet::One(spec) => Ok(Self::single(
                Upstream::new("upstream", spec, settings),
                Arc::new(Tools::with_shared(config.clone(), shared.clone())),
            )),
            UpstreamSet::Named(named) => {
                if named.is_empty() {
                    return Err("no upstream: the set of upstreams is empty".to_owned());
                }
                let routes = named
                    .into_iter()
                    .map(|n| {
                        let tools = Tools::for_upstream(&n.name, config.clone(), shared.clone());
                        (
                            Upstream::new(n.name, n.spec, settings.clone()),
                            Arc::new(tools),
                        )
                    })
                    .collect();
                Self::namespaced(routes, &config.separator)
            }
        }
    }

    /// A new configuration's policies, limits and budgets, for calls that start from now on.
    pub fn reload(&self, config: Arc<crate::Config>) {
        for r in &self.routes {
            r.tools.reload(config.clone());
        }
    }

    /// Stops every upstream and waits (bounded by their shutdown grace) until they are gone.
    pub async fn shutdown(&self) {
        for r in &self.routes {
            r.upstream.shutdown();
        }
        let grace = self.first().upstream.settings().shutdown_grace;
        let all = futures::future::join_all(self.routes.iter().map(|r| r.upstream.stopped()));
        let _ = tokio::time::timeout(grace * 3 + std::time::Duration::from_secs(1), all).await;
    }

    /// Whether at least one upstream is connected (`/readyz`).
    pub fn any_connected(&self) -> bool {
        self.routes.iter().any(|r| r.upstream.is_connected())
    }
}
