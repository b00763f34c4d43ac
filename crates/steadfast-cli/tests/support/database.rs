//! A PostgreSQL database of a test's own on the test server (`psql` creates it), dropped at the
//! end: the task store's workers of one test must not claim another test's calls.
#![allow(dead_code)] // each test file uses a different part

use std::process::Stdio;

/// A fresh database; its URL in `url`.
pub struct Database {
    admin: String,
    name: String,
    /// `postgres://…/NAME`.
    pub url: String,
}

impl Database {
    /// Drops any leftover of the same name, then creates `steadfast_{tag}_{pid}`.
    pub fn new(admin: &str, tag: &str) -> Self {
        let name = format!("steadfast_{tag}_{}", std::process::id());
        let psql = |sql: &str| {
            std::process::Command::new("psql")
                .args([admin, "-q", "-c", sql])
                .env("PGOPTIONS", "--client-min-messages=warning")
                .stdout(Stdio::null())
                .status()
                .expect("psql runs")
        };
        psql(&format!("DROP DATABASE IF EXISTS {name}"));
        assert!(psql(&format!("CREATE DATABASE {name}")).success());
        let base = admin.rsplit_once('/').map_or(admin, |(b, _)| b);
        Self {
            admin: admin.to_owned(),
            url: format!("{base}/{name}"),
            name,
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = std::process::Command::new("psql")
            .args([
                &self.admin,
                "-q",
                "-c",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .stdout(Stdio::null())
            .status();
    }
}
