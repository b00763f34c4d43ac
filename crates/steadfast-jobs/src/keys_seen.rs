//! Whether any key has limits or a pause, cached per store (the claim's fast-path check).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Whether any key has a row (limits or a pause, so that a key resumed by another process is
/// seen at once), cached per store.
#[derive(Debug, Default)]
pub(crate) struct KeysSeen {
    pub(crate) exist: AtomicBool,
    /// Milliseconds since `epoch` of the last check, plus one (0: never).
    pub(crate) checked: AtomicU64,
    /// A refresh is under way (see `Store::keys_may_exist`).
    pub(crate) refreshing: AtomicBool,
    epoch: std::sync::OnceLock<Instant>,
}

impl KeysSeen {
    pub(crate) fn elapsed_ms(&self) -> u64 {
        let epoch = self.epoch.get_or_init(Instant::now);
        u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// This process changed a key: look at the limited path from the next claim on.
    pub(crate) fn mark(&self) {
        self.exist.store(true, Ordering::Relaxed);
        self.checked.store(self.elapsed_ms() + 1, Ordering::Relaxed);
    }
}
