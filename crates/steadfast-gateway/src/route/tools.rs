//! Per-tool state: settings resolved from the config, breakers (per tool or per dependency),
//! the retry budget and metrics.
//!
//! State is kept only for tools the upstream lists: a client can send any number of made-up
//! tool names, and each must not cost memory for good. Calls to unlisted names share one
//! entry built from the defaults and are not counted per name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use steadfast::{BreakerStats, CircuitBreaker, Metrics, RetryBudget};

use crate::config::{Config, ResolvedTool};

/// A tool's settings and its breaker.
#[derive(Debug)]
pub(crate) struct ToolEntry {
    /// Policy, breaker config, dependency.
    pub settings: ResolvedTool,
    /// The breaker, unless disabled.
    pub breaker: Option<CircuitBreaker>,
    /// The `tool` label of its latency histogram: its name, or `unlisted` for the shared
    /// entry (one string for every call).
    pub(crate) label: Arc<str>,
}

/// What a config reload replaces: settings, the budget and the call limit.
struct Policies {
    config: Arc<Config>,
    unlisted: Arc<ToolEntry>,
    budget: Option<RetryBudget>,
    call_limit: Option<Arc<steadfast::CallLimit<crate::route::shared::Counter>>>,
}

/// Every tool's state for one upstream.
pub(crate) struct Tools {
    /// The upstream these tools belong to (its budget, and the budget's shared key).
    upstream: String,
    policies: RwLock<Arc<Policies>>,
    /// Looked up on every call: a fast hasher, seeded per process (names come from the
    /// upstream's list).
    entries: Mutex<HashMap<String, Arc<ToolEntry>, foldhash::fast::RandomState>>,
    breakers: Mutex<HashMap<String, CircuitBreaker>>,
    /// Per-tool metrics.
    pub metrics: Metrics,
    shared: crate::route::shared::SharedState,
}

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tools").finish_non_exhaustive()
    }
}

impl Tools {
    /// State for the tools configured in `config`; breakers, the budget and call counts are
    /// shared through `shared` when it has a Redis.
    pub(crate) fn with_shared(
        config: Arc<Config>,
        shared: crate::route::shared::SharedState,
    ) -> Self {
        Self::for_upstream("upstream", config, shared)
    }

    /// State for the tools of the upstream named `upstream` among several: its own budget
    /// (`[upstreams.NAME.budget]`, else a copy of `[budget]`); call counts stay shared with
    /// the other upstreams through `shared`, so a session's cap covers all of them.
    pub(crate) fn for_upstream(
        upstream: &str,
        config: Arc<Config>,
        shared: crate::route::shared::SharedState,
    ) -> Self {
        let policies = Self::policies(upstream, config, &shared);
        Self {
            upstream: upstream.to_owned(),
            policies: RwLock::new(Arc::new(policies)),
            shared,
            entries: Mutex::default(),
            breakers: Mutex::default(),
            metrics: Metrics::new(),
        }
    }

    fn policies(
        upstream: &str,
        config: Arc<Config>,
        shared: &crate::route::shared::SharedState,
    ) -> Policies {
        let own = config
            .upstreams
            .iter()
            .find(|u| u.name == upstream)
            .and_then(|u| u.budget.clone());
        let budget = own.or_else(|| config.budget.clone()).map(RetryBudget::new);
        if let Some(b) = &budget {
            shared.budget(upstream, b);
        }
        let call_limit = config
            .call_limits
            .any()
            .then(|| config.call_limits.build(shared.counter()).ok())
            .flatten()
            .map(Arc::new);
        Policies {
            unlisted: Arc::new(ToolEntry {
                settings: config.tool(""),
                breaker: None,
                label: "unlisted".into(),
            }),
            config,
            budget,
            call_limit,
        }
    }

    fn current(&self) -> Arc<Policies> {
        self.policies
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Takes a new configuration's policies, limits and budget: calls that start from now on
    /// use them; calls in flight finish under the old ones. Breakers keep their state (a
    /// dependency that is down stays known to be down).
    pub(crate) fn reload(&self, config: Arc<Config>) {
        let policies = Self::policies(&self.upstream, config, &self.shared);
        *self.policies.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(policies);
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The configuration in force.
    pub(crate) fn config(&self) -> Arc<Config> {
        self.current().config.clone()
    }

    /// The retry budget, if configured.
    pub(crate) fn budget(&self) -> Option<RetryBudget> {
        self.current().budget.clone()
    }

    /// The tool-call limit, if configured.
    pub(crate) fn call_limit(
        &self,
    ) -> Option<Arc<steadfast::CallLimit<crate::route::shared::Counter>>> {
        self.current().call_limit.clone()
    }

    /// The entry for `name`; a tool the upstream does not list gets the shared default entry.
    pub(crate) fn entry(&self, name: &str, listed: bool) -> Arc<ToolEntry> {
        let policies = self.current();
        if !listed {
            return policies.unlisted.clone();
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.get(name) {
            return e.clone();
        }
        let settings = policies.config.tool(name);
        let breaker = settings.breaker.clone().map(|c| {
            let key = settings
                .dependency
                .clone()
                .unwrap_or_else(|| name.to_owned());
            self.breakers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key.clone())
                .or_insert_with(|| {
                    let b = CircuitBreaker::named(key, c);
                    self.shared.breaker(&b);
                    b
                })
                .clone()
        });
        let entry = Arc::new(ToolEntry {
            settings,
            breaker,
            label: name.into(),
        });
        entries.insert(name.to_owned(), entry.clone());
        entry
    }

    /// Breaker states by tool, or by dependency for tools that share one.
    pub(crate) fn breaker_stats(&self) -> std::collections::BTreeMap<String, BreakerStats> {
        self.breakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, b)| (k.clone(), b.stats()))
            .collect()
    }
}
