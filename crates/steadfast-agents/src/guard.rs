//! The framework-neutral half of every adapter: which policy, breaker, budget and call limit
//! govern a call to a given tool.
//!
//! Each framework hands tools to its agent differently (rig as typed tools, synaptic through a
//! middleware chain, rmcp as remote calls), but what decides whether a failed call is tried
//! again is the same: the tool's policy, the breaker of its dependency (two tools backed by one
//! API should trip together), that dependency's retry budget, and the session's call limit,
//! which counts every attempt. [`Guard`] holds those once; the adapters only translate their
//! framework's errors into [`ErrorClass`]es and the final [`LlmError`] back into the
//! framework's error.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use steadfast::{
    BreakerConfig, BreakerRegistry, BudgetConfig, CallCounter, CallKeys, CallLimit,
    CallLimitExceeded, CircuitBreaker, Classify, Limited, LlmError, Metrics, Retry, RetryBudget,
    RetryError, RetryPolicy,
};

type Acquire = dyn Fn(CallKeys) -> Pin<Box<dyn Future<Output = Result<(), CallLimitExceeded>> + Send>>
    + Send
    + Sync;

/// The policies, breakers, budgets and call limit shared by every tool an adapter wraps.
/// Cheap to clone: clones share breakers, budgets, counts and metrics.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{BreakerConfig, CallKeys, CallLimit, RetryPolicy};
/// use steadfast_agents::Guard;
///
/// let guard = Guard::builder()
///     .policy(RetryPolicy::builder().max_attempts(3).build().unwrap())
///     .dependency("search", "web-api")       // these two tools trip one breaker
///     .dependency("fetch_page", "web-api")
///     .breaker(BreakerConfig::builder().failure_threshold(5).build().unwrap())
///     .call_limit(
///         CallLimit::builder().per_session(50, Duration::from_secs(3600)).build().unwrap(),
///         CallKeys::new().session("conversation-1"),
///     )
///     .build();
/// assert_eq!(guard.dependency_of("fetch_page"), "web-api");
/// assert_eq!(guard.dependency_of("weather"), "weather");
/// ```
#[derive(Clone)]
pub struct Guard {
    inner: Arc<Inner>,
}

struct Inner {
    policy: RetryPolicy,
    policies: HashMap<String, RetryPolicy>,
    dependencies: HashMap<String, String>,
    default_dependency: Option<String>,
    breakers: Option<BreakerRegistry>,
    budget: Option<BudgetConfig>,
    budgets: Mutex<HashMap<String, RetryBudget>>,
    limit: Option<(Arc<Acquire>, CallKeys)>,
    metrics: Metrics,
    seed: Option<u64>,
    /// Tool names given their own state so far (see [`Guard::admit`]).
    seen: Mutex<HashSet<String>>,
}

/// How many tool names get breakers, budgets and metrics of their own. Tool names usually come
/// from a model, which can invent any number of them; past this many, a tool not configured by
/// name ([`GuardBuilder::dependency`], [`GuardBuilder::tool_policy`]) shares the state kept
/// under [`OTHER_TOOLS`], so memory stays bounded.
pub const MAX_TRACKED_TOOLS: usize = 1024;

/// The name under which tools beyond [`MAX_TRACKED_TOOLS`] share their state.
pub const OTHER_TOOLS: &str = "(other tools)";

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("policy", &self.inner.policy)
            .field("dependencies", &self.inner.dependencies)
            .field("breakers", &self.inner.breakers.is_some())
            .field("budget", &self.inner.budget)
            .field("call_limit", &self.inner.limit.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for Guard {
    fn default() -> Self {
        Self::builder().build()
    }
}

/// Builds a [`Guard`]; see there for an example.
pub struct GuardBuilder {
    policy: RetryPolicy,
    policies: HashMap<String, RetryPolicy>,
    dependencies: HashMap<String, String>,
    default_dependency: Option<String>,
    breaker: Option<BreakerConfig>,
    breaker_configs: Vec<(String, BreakerConfig)>,
    no_breaker: bool,
    budget: Option<BudgetConfig>,
    limit: Option<(Arc<Acquire>, CallKeys)>,
    metrics: Metrics,
    seed: Option<u64>,
}

impl fmt::Debug for GuardBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardBuilder")
            .field("policy", &self.policy)
            .field("dependencies", &self.dependencies)
            .finish_non_exhaustive()
    }
}

impl GuardBuilder {
    /// The policy for every tool without its own (default: [`RetryPolicy::default`]: 3
    /// attempts, 100 ms base, full jitter).
    pub fn policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// `tool`'s own policy.
    ///
    /// ```
    /// let guard = steadfast_agents::Guard::builder()
    ///     .tool_policy("send_email", steadfast::RetryPolicy::no_retry())
    ///     .build();
    /// assert_eq!(guard.policy_for("send_email").max_attempts(), 1);
    /// ```
    pub fn tool_policy(mut self, tool: impl Into<String>, policy: RetryPolicy) -> Self {
        self.policies.insert(tool.into(), policy);
        self
    }

    /// Puts `tool` behind `dependency`: every tool of one dependency shares its breaker, its
    /// budget and its `upstream` call-limit key. A tool named in no `dependency` call is its
    /// own dependency.
    pub fn dependency(mut self, tool: impl Into<String>, dependency: impl Into<String>) -> Self {
        self.dependencies.insert(tool.into(), dependency.into());
        self
    }

    /// The dependency of every tool not named in a [`dependency`](Self::dependency) call —
    /// typically the one MCP server or API all of an agent's tools go to — so they trip one
    /// breaker together.
    ///
    /// ```
    /// let guard = steadfast_agents::Guard::builder().default_dependency("github-mcp").build();
    /// assert_eq!(guard.dependency_of("list_issues"), "github-mcp");
    /// ```
    pub fn default_dependency(mut self, dependency: impl Into<String>) -> Self {
        self.default_dependency = Some(dependency.into());
        self
    }

    /// The breaker configuration for every dependency (default: [`BreakerConfig::default`]).
    pub fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = Some(config);
        self
    }

    /// One dependency's (or tool's) own breaker configuration.
    pub fn breaker_for(mut self, dependency: impl Into<String>, config: BreakerConfig) -> Self {
        self.breaker_configs.push((dependency.into(), config));
        self
    }

    /// No breakers at all.
    pub fn no_breaker(mut self) -> Self {
        self.no_breaker = true;
        self
    }

    /// A retry budget per dependency, so retries stay a bounded share of its traffic.
    pub fn budget(mut self, config: BudgetConfig) -> Self {
        self.budget = Some(config);
        self
    }

    /// Counts every attempt — a retry is a call — against `limit` under `session` keys (the
    /// tool's name and its dependency, as `upstream`, are added per call). A refused attempt is
    /// not made, not retried, and ends the call with `TOOL_CALL_LIMIT`.
    pub fn call_limit<C>(mut self, limit: CallLimit<C>, session: CallKeys) -> Self
    where
        C: CallCounter + Clone + 'static,
    {
        let acquire: Arc<Acquire> = Arc::new(move |keys: CallKeys| {
            let limit = limit.clone();
            Box::pin(async move { limit.acquire(&keys).await })
        });
        self.limit = Some((acquire, session));
        self
    }

    /// Counts into `metrics` instead of a fresh registry.
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Seeds the jitter, for reproducible tests.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The guard.
    pub fn build(self) -> Guard {
        let breakers = (!self.no_breaker).then(|| {
            let mut registry = BreakerRegistry::new(self.breaker.unwrap_or_default());
            for (key, config) in self.breaker_configs {
                registry = registry.with_config(key, config);
            }
            registry
        });
        Guard {
            inner: Arc::new(Inner {
                policy: self.policy,
                policies: self.policies,
                dependencies: self.dependencies,
                default_dependency: self.default_dependency,
                breakers,
                budget: self.budget,
                budgets: Mutex::new(HashMap::new()),
                limit: self.limit,
                metrics: self.metrics,
                seed: self.seed,
                seen: Mutex::new(HashSet::new()),
            }),
        }
    }
}

impl Guard {
    /// A builder with the defaults: [`RetryPolicy::default`], a default breaker per tool, no
    /// budget, no call limit.
    pub fn builder() -> GuardBuilder {
        GuardBuilder {
            policy: RetryPolicy::default(),
            policies: HashMap::new(),
            dependencies: HashMap::new(),
            default_dependency: None,
            breaker: None,
            breaker_configs: Vec::new(),
            no_breaker: false,
            budget: None,
            limit: None,
            metrics: Metrics::new(),
            seed: None,
        }
    }

    /// The dependency `tool` belongs to: the one set for it, else the default dependency,
    /// else the tool itself.
    pub fn dependency_of<'a>(&'a self, tool: &'a str) -> &'a str {
        match self.inner.dependencies.get(tool) {
            Some(dep) => dep,
            None => self.inner.default_dependency.as_deref().unwrap_or(tool),
        }
    }

    /// The policy `tool` runs under.
    pub fn policy_for(&self, tool: &str) -> &RetryPolicy {
        self.inner.policies.get(tool).unwrap_or(&self.inner.policy)
    }

    /// The breaker guarding `tool`'s dependency, unless breakers are off.
    ///
    /// ```
    /// let guard = steadfast_agents::Guard::builder().dependency("a", "db").dependency("b", "db").build();
    /// let (a, b) = (guard.breaker("a").unwrap(), guard.breaker("b").unwrap());
    /// assert_eq!(a.name(), b.name());
    /// ```
    pub fn breaker(&self, tool: &str) -> Option<CircuitBreaker> {
        let key = self.dependency_of(tool);
        self.inner.breakers.as_ref().map(|r| r.get(key))
    }

    /// The per-tool metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The seed for the jitter, if one was set.
    #[cfg(feature = "rmcp")]
    pub(crate) fn seed_value(&self) -> Option<u64> {
        self.inner.seed
    }

    /// The retry budget of `tool`'s dependency, if budgets are on.
    #[cfg(feature = "rmcp")]
    pub(crate) fn budget_for(&self, tool: &str) -> Option<RetryBudget> {
        self.budget(self.dependency_of(tool))
    }

    fn budget(&self, key: &str) -> Option<RetryBudget> {
        let config = self.inner.budget.as_ref()?;
        let mut budgets = self
            .inner
            .budgets
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Some(
            budgets
                .entry(key.to_owned())
                .or_insert_with(|| RetryBudget::new(config.clone()))
                .clone(),
        )
    }

    /// The engine for one call to `tool`, with its policy, breaker, budget and metrics.
    /// The name `tool`'s breaker, budget and metrics are kept under (see [`MAX_TRACKED_TOOLS`]).
    pub(crate) fn admit<'a>(&self, tool: &'a str) -> &'a str {
        if self.inner.dependencies.contains_key(tool) || self.inner.policies.contains_key(tool) {
            return tool;
        }
        let mut seen = self
            .inner
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if seen.contains(tool) {
            return tool;
        }
        if seen.len() < MAX_TRACKED_TOOLS {
            seen.insert(tool.to_owned());
            return tool;
        }
        OTHER_TOOLS
    }

    pub(crate) fn retry<T, E>(&self, tool: &str, fallback: Option<&RetryPolicy>) -> Retry<T, E> {
        let policy = match (self.inner.policies.get(tool), fallback) {
            (Some(own), _) => own,
            (None, Some(fallback)) => fallback,
            (None, None) => &self.inner.policy,
        };
        let tracked = self.admit(tool);
        let mut retry = Retry::new(policy.clone())
            .name(tool.to_owned())
            .metrics(self.inner.metrics.tool(tracked));
        if let Some(b) = self.breaker(tracked) {
            retry = retry.breaker(b);
        }
        if let Some(b) = self.budget(self.dependency_of(tracked)) {
            retry = retry.budget(b);
        }
        if let Some(seed) = self.inner.seed {
            retry = retry.seed(seed);
        }
        retry
    }

    /// Counts one attempt at `tool` against the call limit, if there is one.
    pub(crate) async fn acquire(&self, tool: &str) -> Result<(), CallLimitExceeded> {
        let Some((acquire, session)) = &self.inner.limit else {
            return Ok(());
        };
        let mut keys = session.clone().tool(tool);
        let dep = self.dependency_of(tool);
        if dep != tool {
            keys = keys.upstream(dep.to_owned());
        }
        acquire(keys).await
    }

    /// Runs `op` as one call to `tool`: attempt `n` (1-based) is `op(n)`, each attempt counted
    /// against the call limit first, retried under the tool's policy, breaker and budget.
    ///
    /// ```
    /// use steadfast::{ErrorClass, LlmErrorCode};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let guard = steadfast_agents::Guard::default();
    /// let ok = guard.run("search", |n| async move {
    ///     if n == 1 { Err(ErrorClass::from_status(503)) } else { Ok("hits") }
    /// }).await;
    /// assert_eq!(ok.unwrap(), "hits");
    ///
    /// let err = guard.run("search", |_| async { Err::<(), _>(ErrorClass::from_status(404)) }).await.unwrap_err();
    /// assert_eq!(err.attempts(), 1);
    /// assert_eq!(guard.llm_error("search", &err).code, LlmErrorCode::InvalidRequest);
    /// # }
    /// ```
    pub async fn run<T, E, F, Fut>(&self, tool: &str, op: F) -> Result<T, RetryError<Limited<E>>>
    where
        E: Classify,
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.run_with(tool, None, op).await
    }

    /// [`run`](Self::run) with `fallback` as the policy of a tool that has none of its own.
    pub(crate) async fn run_with<T, E, F, Fut>(
        &self,
        tool: &str,
        fallback: Option<&RetryPolicy>,
        mut op: F,
    ) -> Result<T, RetryError<Limited<E>>>
    where
        E: Classify,
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let retry = self.retry::<T, Limited<E>>(tool, fallback);
        retry
            .run(|n| {
                let fut = op(n);
                async move {
                    self.acquire(tool).await.map_err(Limited::Exceeded)?;
                    fut.await.map_err(Limited::Failed)
                }
            })
            .await
    }

    /// The sanitized error a model should read after `run` gave up on `tool`.
    pub fn llm_error<E: fmt::Display>(&self, tool: &str, err: &RetryError<Limited<E>>) -> LlmError {
        err.to_llm_error(tool)
    }
}
