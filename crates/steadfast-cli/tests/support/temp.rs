//! A fresh path in the temp dir, removed on drop (configs, counter files, pid files of tests).
#![allow(dead_code)] // each test file uses a different part

use std::path::PathBuf;

/// A unique temp path for `tag`; the file (if any) is removed on drop.
pub struct Temp(pub PathBuf);

impl Temp {
    pub fn new(tag: &str) -> Self {
        // A serial as well as the clock: tests of one binary run on parallel threads, and two
        // of them asking for the same tag at the same clock reading would share a file (two
        // fakes counting into one file, two gateways on one task store).
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("steadfast-{tag}-{}-{n}-{nanos}", std::process::id());
        Self(std::env::temp_dir().join(name))
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        // The lock file beside a fake's count file (`fake_upstream.py`'s `Counter`).
        let mut lock = self.0.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(lock);
    }
}
