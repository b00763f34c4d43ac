//! Helpers shared by the benchmarks.

use std::time::{Duration, Instant};

/// Runs `op` `iters` times on each of `threads` threads at once; returns the wall time, so
/// criterion reports time per operation per thread.
pub fn contended(threads: usize, iters: u64, op: &(impl Fn() + Sync)) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..iters {
                    op();
                }
            });
        }
    });
    start.elapsed()
}
