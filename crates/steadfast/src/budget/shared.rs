//! A retry budget shared with other processes.
//!
//! Replicas that each keep their own budget each allow `retry_ratio` extra load: together they
//! still stay within the share, but each floor (`min_retries_per_sec`) is multiplied by the
//! number of replicas, and one replica seeing all the failures cannot use the credit the others
//! earn. A shared budget counts calls and retries across replicas. As with breakers, the
//! decision stays local and never waits: a [`SharedBudget`] answers from state it keeps up to
//! date in the background (the `steadfast-redis` crate holds a small lease of retries taken from
//! a budget in Redis), and returns `None` to let the local budget decide when its store is away.

use std::sync::Arc;

use super::RetryBudget;
use crate::AlreadyShared;

/// Where a budget's calls go and who decides its retries: a store shared with other processes.
///
/// Both methods run inside calls: they must not block or wait on I/O.
pub trait SharedBudget: Send + Sync + 'static {
    /// A call was made (a deposit).
    fn deposited(&self);

    /// A retry wants to withdraw: `Some(allowed)` if the shared budget decides, `None` to let
    /// the local budget decide (the shared store is away).
    fn try_withdraw(&self) -> Option<bool>;
}

impl RetryBudget {
    /// Connects this budget to a shared store. Once per budget (clones share it). Deposits
    /// are still counted locally, so the local budget can take over at once when the store is
    /// away.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use steadfast::{RetryBudget, SharedBudget};
    ///
    /// #[derive(Default)]
    /// struct NoRetries(AtomicU32);
    /// impl SharedBudget for NoRetries {
    ///     fn deposited(&self) { self.0.fetch_add(1, Ordering::Relaxed); }
    ///     fn try_withdraw(&self) -> Option<bool> { Some(false) }
    /// }
    ///
    /// let shared = Arc::new(NoRetries::default());
    /// let budget = RetryBudget::new(Default::default());
    /// budget.share(shared.clone()).unwrap();
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// budget.deposit();
    /// assert!(!budget.try_withdraw(), "the shared budget decides");
    /// # });
    /// assert_eq!(shared.0.load(Ordering::Relaxed), 1);
    /// ```
    pub fn share(&self, shared: Arc<dyn SharedBudget>) -> Result<(), AlreadyShared> {
        self.inner.shared.set(shared).map_err(|_| AlreadyShared)
    }

    /// Whether [`share`](Self::share) connected a store.
    pub fn is_shared(&self) -> bool {
        self.inner.shared.get().is_some()
    }

    #[inline]
    pub(super) fn share_deposit(&self) {
        if let Some(s) = self.inner.shared.get() {
            s.deposited();
        }
    }

    #[inline]
    pub(super) fn shared_withdraw(&self) -> Option<bool> {
        self.inner.shared.get().and_then(|s| s.try_withdraw())
    }
}
