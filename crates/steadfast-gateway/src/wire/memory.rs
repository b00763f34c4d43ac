//! Returning memory to the system after a burst or a spike.
//!
//! The allocator keeps freed memory for reuse, so after a storm of requests (thousands of hung
//! calls, then cancelled) or one huge message, the proxy's resident size would stay at its
//! high-water mark. When a burst ends or a large buffer is let go, the proxy asks the
//! allocator to hand its free memory back: glibc's `malloc_trim`, and the hook the binary
//! installs for its own allocator ([`set_release_hook`]; the `steadfast` binary runs on
//! mimalloc, for which `malloc_trim` does nothing).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

static LAST: AtomicU64 = AtomicU64::new(0);
static HOOK: OnceLock<fn()> = OnceLock::new();
static SCHEDULED: AtomicBool = AtomicBool::new(false);

/// A message at least this large was read: once it is let go, its memory is handed back.
pub(crate) const LARGE: usize = 1024 * 1024;

/// Installs what hands the process allocator's free memory back to the system (for mimalloc:
/// `mi_collect(true)`), called besides glibc's `malloc_trim` after a burst or a large message.
/// Set once; a second call is ignored.
pub fn set_release_hook(hook: fn()) {
    let _ = HOOK.set(hook);
}

/// Hands freed heap memory back to the system, at most once a second.
pub(crate) fn release() {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if LAST.swap(now, Ordering::Relaxed) == now {
        return;
    }
    release_now();
}

/// After a large message was read: hands the memory back once its reader and its consumer
/// let it go. The consumer (a relay writing the reply to a client) may hold it a while, so
/// the release runs a moment later and once more after that; one schedule at a time, so a
/// stream of large messages costs two releases per period, not two per message.
pub(crate) fn release_soon() {
    if SCHEDULED.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        SCHEDULED.store(false, Ordering::Release);
        release_now();
        return;
    };
    runtime.spawn(async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        release_now();
        tokio::time::sleep(Duration::from_secs(1)).await;
        SCHEDULED.store(false, Ordering::Release);
        release_now();
    });
}

fn release_now() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory at the top of glibc's heaps.
    unsafe {
        libc::malloc_trim(0);
    }
    if let Some(hook) = HOOK.get() {
        hook();
    }
}
