//! Returning memory to the system after a burst.
//!
//! The allocator keeps freed memory for reuse, so after a storm of requests (thousands of hung
//! calls, then cancelled) the proxy's resident size would stay at its high-water mark. When a
//! burst ends, the proxy asks glibc to trim its heap — at most once a second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static LAST: AtomicU64 = AtomicU64::new(0);

/// Hands freed heap memory back to the system (glibc), at most once a second.
pub(crate) fn release() {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if LAST.swap(now, Ordering::Relaxed) == now {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory at the top of glibc's heaps.
    unsafe {
        libc::malloc_trim(0);
    }
}
