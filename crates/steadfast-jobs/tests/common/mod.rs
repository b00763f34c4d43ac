//! Test databases: a temp SQLite file, or a fresh schema on the PostgreSQL server named by
//! `STEADFAST_TEST_POSTGRES_URL` (tests using it are `#[ignore]`d unless asked for, and fail
//! naming the variable when asked for without it).
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use steadfast_jobs::StoreOptions;

pub struct Db {
    pub opts: StoreOptions,
    pub url: String,
    pub schema: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

impl Db {
    pub fn sqlite() -> Db {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
        Db {
            opts: StoreOptions::new(url.clone()),
            url,
            schema: None,
            _dir: Some(dir),
        }
    }

    /// A unique schema per call, so tests run in parallel and re-run. Panics without
    /// `STEADFAST_TEST_POSTGRES_URL`: a PostgreSQL test that was asked for must not pass unrun.
    pub fn postgres(name: &str) -> Db {
        let url = postgres_url();
        static N: AtomicU32 = AtomicU32::new(0);
        let schema = format!(
            "t_{}_{}_{}_{}",
            name.chars().take(30).collect::<String>(),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            fastrand_u32()
        );
        Db {
            opts: StoreOptions::new(url.clone()).schema(schema.clone()),
            url,
            schema: Some(schema),
            _dir: None,
        }
    }
}

/// The server named by `STEADFAST_TEST_POSTGRES_URL`; panics naming the variable when it is unset.
pub fn postgres_url() -> String {
    std::env::var("STEADFAST_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "this test needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL \
             (e.g. postgres://postgres@127.0.0.1:5432/test)"
        )
    })
}

fn fastrand_u32() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    t % 100_000
}

/// Runs `$name(db)` on SQLite always and on PostgreSQL when asked for.
#[macro_export]
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(super::common::Db::sqlite()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[ignore = "needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"]
            async fn postgres() {
                let db = super::common::Db::postgres(stringify!($name));
                super::$name(db).await;
            }
        }
    )*};
}
