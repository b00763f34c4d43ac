//! One upstream behind the endpoint ([`Route`]): the connection, its tools' state and the names
//! its lists taught. Below both the router (which holds the routes) and the topology (which
//! holds the only route when there is one upstream).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use crate::route::tools::Tools;
use crate::upstream::Upstream;

/// One upstream behind the endpoint, with its tools' state.
pub(crate) struct Route {
    /// The upstream's name in the config.
    pub name: String,
    /// Its name as the prefix of its tools' names.
    pub prefix: String,
    /// The connection.
    pub upstream: Arc<Upstream>,
    /// Per-tool state: policies, breakers, budget, metrics.
    pub tools: Arc<Tools>,
    /// What its lists taught: names clients see and URIs it serves.
    pub(super) names: RwLock<Names>,
    /// The connection (generation) and level (serial) this upstream was last told with
    /// `logging/setLevel`.
    pub(super) level_sent: Mutex<(u64, u64)>,
}

/// What an upstream's latest complete lists taught.
#[derive(Default)]
pub(super) struct Names {
    /// Name clients see → the upstream's own name.
    pub(super) tools: HashMap<String, String>,
    pub(super) prompts: HashMap<String, String>,
    /// URIs and URI-template prefixes this upstream listed.
    pub(super) uris: HashSet<String>,
    pub(super) templates: Vec<String>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A route to `upstream` with its tools' state, its names not yet learned.
pub(super) fn route(upstream: Arc<Upstream>, tools: Arc<Tools>, prefix: String) -> Arc<Route> {
    Arc::new(Route {
        name: upstream.name.clone(),
        prefix,
        upstream,
        tools,
        names: RwLock::default(),
        level_sent: Mutex::default(),
    })
}
