//! Per-dependency guards shared by every worker task of a process: the core library's
//! circuit breaker, retry budget and a concurrency limit.

use std::collections::HashMap;
use std::sync::Mutex;

use steadfast::{
    BreakerConfig, BreakerRegistry, BudgetConfig, CircuitBreaker, ConcurrencyConfig,
    ConcurrencyLimit, RetryBudget, WhenFull,
};

use crate::JobsError;

/// How one dependency is guarded.
///
/// ```
/// use steadfast::BreakerConfig;
/// use steadfast_jobs::DependencyOptions;
/// let opts = DependencyOptions::new()
///     .breaker(BreakerConfig::builder().failure_threshold(3).build().unwrap())
///     .max_concurrency(4);
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DependencyOptions {
    /// The breaker's configuration (the library's default when `None`).
    pub breaker: Option<BreakerConfig>,
    /// The retry budget's configuration (the library's default when `None`).
    pub budget: Option<BudgetConfig>,
    /// At most this many of its jobs run at once in this process (no limit when `None`).
    pub max_concurrency: Option<u32>,
}

impl DependencyOptions {
    /// Library defaults, no concurrency limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the breaker.
    pub fn breaker(mut self, config: BreakerConfig) -> Self {
        self.breaker = Some(config);
        self
    }

    /// Sets the retry budget.
    pub fn budget(mut self, config: BudgetConfig) -> Self {
        self.budget = Some(config);
        self
    }

    /// Caps concurrent jobs of this dependency.
    pub fn max_concurrency(mut self, n: u32) -> Self {
        self.max_concurrency = Some(n);
        self
    }
}

#[derive(Debug)]
pub(crate) struct Guards {
    breakers: BreakerRegistry,
    budgets: Mutex<HashMap<String, RetryBudget>>,
    budget_configs: HashMap<String, BudgetConfig>,
    limits: HashMap<String, ConcurrencyLimit>,
}

impl Guards {
    pub(crate) fn new(deps: &HashMap<String, DependencyOptions>) -> Result<Self, JobsError> {
        let mut breakers = BreakerRegistry::new(BreakerConfig::default());
        let mut limits = HashMap::new();
        let mut budget_configs = HashMap::new();
        for (name, opts) in deps {
            if let Some(c) = &opts.breaker {
                breakers = breakers.with_config(name.clone(), c.clone());
            }
            if let Some(b) = &opts.budget {
                budget_configs.insert(name.clone(), b.clone());
            }
            if let Some(n) = opts.max_concurrency {
                let config = ConcurrencyConfig::new(n, WhenFull::GiveUp).map_err(|e| {
                    JobsError::invalid(
                        "max_concurrency",
                        format!("{} (dependency {name:?})", e.constraint()),
                    )
                })?;
                limits.insert(name.clone(), ConcurrencyLimit::new(config));
            }
        }
        Ok(Self {
            breakers,
            budgets: Mutex::new(HashMap::new()),
            budget_configs,
            limits,
        })
    }

    pub(crate) fn breaker(&self, dep: &str) -> CircuitBreaker {
        self.breakers.get(dep)
    }

    pub(crate) fn budget(&self, dep: &str) -> RetryBudget {
        let mut budgets = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
        budgets
            .entry(dep.to_owned())
            .or_insert_with(|| {
                RetryBudget::new(self.budget_configs.get(dep).cloned().unwrap_or_default())
            })
            .clone()
    }

    pub(crate) fn limit(&self, dep: &str) -> Option<&ConcurrencyLimit> {
        self.limits.get(dep)
    }
}
