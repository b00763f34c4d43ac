//! A cap on how many calls to one dependency may be retrying at once.
//!
//! A budget bounds retries as a share of traffic over time; this bounds them in the moment. When
//! a dependency stumbles, every in-flight call starts retrying at once; with a limit of N, only N
//! of them do, and the others give up their retry (or wait for a slot, if configured). A call
//! takes a slot when it enters its retry phase — after its first failure — and holds it until it
//! ends, so first attempts are never limited.

use std::fmt;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::PolicyError;

/// What a call does when it wants to retry and every slot is taken.
///
/// ```
/// let w: steadfast::WhenFull = serde_json::from_str("\"wait\"").unwrap();
/// assert_eq!(w, steadfast::WhenFull::Wait);
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// Give up at once with the last failure (reason `ConcurrencyLimit`).
    #[default]
    GiveUp,
    /// Wait for a slot (cancellation still applies), then retry.
    Wait,
}

/// A validated concurrency limit configuration.
///
/// ```
/// let c: steadfast::ConcurrencyConfig = toml::from_str("max_retrying = 4\nwhen_full = \"wait\"").unwrap();
/// assert_eq!((c.max_retrying(), c.when_full()), (4, steadfast::WhenFull::Wait));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "RawConcurrency", into = "RawConcurrency")]
pub struct ConcurrencyConfig {
    max_retrying: u32,
    when_full: WhenFull,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConcurrency {
    max_retrying: u32,
    #[serde(default)]
    when_full: WhenFull,
}

impl TryFrom<RawConcurrency> for ConcurrencyConfig {
    type Error = PolicyError;

    fn try_from(r: RawConcurrency) -> Result<Self, PolicyError> {
        Self::new(r.max_retrying, r.when_full)
    }
}

impl From<ConcurrencyConfig> for RawConcurrency {
    fn from(c: ConcurrencyConfig) -> Self {
        Self {
            max_retrying: c.max_retrying,
            when_full: c.when_full,
        }
    }
}

impl ConcurrencyConfig {
    /// At most `max_retrying` calls in their retry phase at once (at least 1).
    ///
    /// ```
    /// let e = steadfast::ConcurrencyConfig::new(0, steadfast::WhenFull::GiveUp).unwrap_err();
    /// assert_eq!(e.to_string(), "invalid concurrency limit: max_retrying must be >= 1 (got 0)");
    /// ```
    pub fn new(max_retrying: u32, when_full: WhenFull) -> Result<Self, PolicyError> {
        if max_retrying == 0 {
            return Err(PolicyError::in_section(
                "concurrency limit",
                "max_retrying",
                "be >= 1 (got 0)",
            ));
        }
        Ok(Self {
            max_retrying,
            when_full,
        })
    }

    /// The number of slots.
    ///
    /// ```
    /// assert_eq!(steadfast::ConcurrencyConfig::new(3, Default::default()).unwrap().max_retrying(), 3);
    /// ```
    pub fn max_retrying(&self) -> u32 {
        self.max_retrying
    }

    /// What a call does when every slot is taken.
    ///
    /// ```
    /// let c = steadfast::ConcurrencyConfig::new(3, steadfast::WhenFull::Wait).unwrap();
    /// assert_eq!(c.when_full(), steadfast::WhenFull::Wait);
    /// ```
    pub fn when_full(&self) -> WhenFull {
        self.when_full
    }
}

/// A shared limit on calls in their retry phase. Cheap to clone: clones share the slots.
///
/// ```
/// use steadfast::{ConcurrencyConfig, ConcurrencyLimit, WhenFull};
/// let limit = ConcurrencyLimit::new(ConcurrencyConfig::new(1, WhenFull::GiveUp).unwrap());
/// let slot = limit.try_enter().unwrap();
/// assert!(limit.try_enter().is_none());
/// drop(slot);
/// assert_eq!(limit.available(), 1);
/// ```
#[derive(Clone)]
pub struct ConcurrencyLimit {
    config: ConcurrencyConfig,
    slots: Arc<Semaphore>,
}

impl fmt::Debug for ConcurrencyLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimit")
            .field("config", &self.config)
            .field("available", &self.available())
            .finish()
    }
}

/// A slot in the retry phase, released when dropped.
#[derive(Debug)]
pub struct RetrySlot {
    // Held only for its `Drop`, which returns the slot.
    _permit: OwnedSemaphorePermit,
}

impl ConcurrencyLimit {
    /// A limit with this configuration.
    ///
    /// See [`ConcurrencyLimit`] for an example.
    pub fn new(config: ConcurrencyConfig) -> Self {
        Self {
            config,
            slots: Arc::new(Semaphore::new(config.max_retrying as usize)),
        }
    }

    /// The configuration.
    ///
    /// ```
    /// let l = steadfast::ConcurrencyLimit::new(steadfast::ConcurrencyConfig::new(2, Default::default()).unwrap());
    /// assert_eq!(l.config().max_retrying(), 2);
    /// ```
    pub fn config(&self) -> &ConcurrencyConfig {
        &self.config
    }

    /// Takes a slot if one is free.
    ///
    /// See [`ConcurrencyLimit`] for an example.
    pub fn try_enter(&self) -> Option<RetrySlot> {
        let permit = self.slots.clone().try_acquire_owned().ok()?;
        Some(RetrySlot { _permit: permit })
    }

    /// Waits for a slot.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let l = steadfast::ConcurrencyLimit::new(steadfast::ConcurrencyConfig::new(1, Default::default()).unwrap());
    /// let slot = l.enter().await;
    /// assert_eq!(l.available(), 0);
    /// # drop(slot);
    /// # }
    /// ```
    pub async fn enter(&self) -> RetrySlot {
        // The semaphore is never closed, so acquiring cannot fail.
        let permit = self.slots.clone().acquire_owned().await;
        RetrySlot {
            _permit: permit.unwrap_or_else(|_| unreachable!("the retry semaphore is never closed")),
        }
    }

    /// Free slots.
    ///
    /// See [`ConcurrencyLimit`] for an example.
    pub fn available(&self) -> usize {
        self.slots.available_permits()
    }
}
