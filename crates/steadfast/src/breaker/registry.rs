//! Breakers by name: one per tool, or one per dependency shared by several tools.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, RwLock};

use super::{BreakerConfig, BreakerStats, CircuitBreaker};

struct Inner {
    default: BreakerConfig,
    configs: HashMap<String, BreakerConfig>,
    breakers: RwLock<HashMap<String, CircuitBreaker>>,
}

/// Circuit breakers keyed by name, created on first use from a per-key configuration or the
/// default. Cheap to clone: clones share the breakers.
///
/// Key by dependency when several tools call the same service (so one outage opens one breaker
/// for all of them), by tool otherwise.
///
/// ```
/// use steadfast::{BreakerConfig, BreakerRegistry};
///
/// let registry = BreakerRegistry::new(BreakerConfig::default())
///     .with_config("payments", BreakerConfig::builder().failure_threshold(2).build().unwrap());
/// let a = registry.get("search");
/// let b = registry.get("search");
/// b.isolate();
/// assert_eq!(a.state(), steadfast::BreakerState::Isolated, "the same breaker");
/// assert_eq!(registry.get("payments").config().failure_threshold(), 2);
/// assert_eq!(registry.get("search").config().failure_threshold(), 5);
/// ```
#[derive(Clone)]
pub struct BreakerRegistry {
    inner: Arc<Inner>,
}

impl fmt::Debug for BreakerRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerRegistry")
            .field("default", &self.inner.default)
            .field("configured", &self.inner.configs.keys().collect::<Vec<_>>())
            .field("created", &self.keys())
            .finish()
    }
}

impl BreakerRegistry {
    /// A registry whose breakers use `default` unless configured otherwise.
    ///
    /// See [`BreakerRegistry`] for an example.
    pub fn new(default: BreakerConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                default,
                configs: HashMap::new(),
                breakers: RwLock::new(HashMap::new()),
            }),
        }
    }

    /// Sets the configuration of the breaker named `key`. Call before sharing the registry:
    /// a breaker already created keeps its configuration.
    ///
    /// See [`BreakerRegistry`] for an example.
    pub fn with_config(mut self, key: impl Into<String>, config: BreakerConfig) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => {
                inner.configs.insert(key.into(), config);
                self
            }
            None => {
                // Shared already: build a new registry holding the same breakers.
                let mut configs = self.inner.configs.clone();
                configs.insert(key.into(), config);
                let breakers = self
                    .inner
                    .breakers
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                Self {
                    inner: Arc::new(Inner {
                        default: self.inner.default.clone(),
                        configs,
                        breakers: RwLock::new(breakers),
                    }),
                }
            }
        }
    }

    /// The breaker named `key`, created on first use.
    ///
    /// See [`BreakerRegistry`] for an example.
    pub fn get(&self, key: &str) -> CircuitBreaker {
        if let Some(b) = self
            .inner
            .breakers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
        {
            return b.clone();
        }
        let mut map = self
            .inner
            .breakers
            .write()
            .unwrap_or_else(|p| p.into_inner());
        map.entry(key.to_owned())
            .or_insert_with(|| {
                let config = self.inner.configs.get(key).unwrap_or(&self.inner.default);
                CircuitBreaker::named(key.to_owned(), config.clone())
            })
            .clone()
    }

    /// The names of the breakers created so far, sorted.
    ///
    /// ```
    /// let r = steadfast::BreakerRegistry::new(Default::default());
    /// r.get("b");
    /// r.get("a");
    /// assert_eq!(r.keys(), ["a", "b"]);
    /// ```
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<_> = self
            .inner
            .breakers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    }

    /// A snapshot of every breaker created so far, for a health check.
    ///
    /// ```
    /// let r = steadfast::BreakerRegistry::new(Default::default());
    /// r.get("search").isolate();
    /// let stats = r.stats();
    /// assert_eq!(stats["search"].state, steadfast::BreakerState::Isolated);
    /// ```
    pub fn stats(&self) -> BTreeMap<String, BreakerStats> {
        let breakers: Vec<_> = self
            .inner
            .breakers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, b)| (k.clone(), b.clone()))
            .collect();
        breakers.into_iter().map(|(k, b)| (k, b.stats())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_first_use_creates_one_breaker() {
        let r = BreakerRegistry::new(BreakerConfig::default());
        let breakers: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8).map(|_| s.spawn(|| r.get("dep"))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        breakers[0].isolate();
        assert!(
            breakers
                .iter()
                .all(|b| b.state() == crate::BreakerState::Isolated)
        );
        assert_eq!(r.keys(), ["dep"]);
    }

    #[test]
    fn configuring_a_shared_registry_keeps_existing_breakers() {
        let r = BreakerRegistry::new(BreakerConfig::default());
        let clone = r.clone();
        let existing = r.get("a");
        let r = r.with_config(
            "b",
            BreakerConfig::builder()
                .failure_threshold(1)
                .build()
                .unwrap(),
        );
        existing.isolate();
        assert_eq!(r.get("a").state(), crate::BreakerState::Isolated);
        assert_eq!(r.get("b").config().failure_threshold(), 1);
        assert_eq!(r.get("a").name(), Some("a"));
        drop(clone);
    }
}
