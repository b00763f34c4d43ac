//! A fresh path in the temp dir, removed on drop (configs, counter files, pid files of tests).
#![allow(dead_code)] // each test file uses a different part

use std::path::PathBuf;

/// A unique temp path for `tag`; the file (if any) is removed on drop.
pub struct Temp(pub PathBuf);

impl Temp {
    pub fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self(std::env::temp_dir().join(format!("steadfast-{tag}-{}-{nanos}", std::process::id())))
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
