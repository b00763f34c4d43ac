//! RunOnce over a store shared with other processes: the claim decides who leads.
//! On tokio's paused clock.

use std::convert::Infallible;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use steadfast::{IdempotencyStore, RunOnce};

/// A store whose key is claimed by "another process" that stores its result at `done_at`.
struct Elsewhere {
    result: Mutex<Option<u32>>,
    claims: AtomicU32,
    released: AtomicU32,
    other_leader_alive: bool,
}

impl IdempotencyStore<u32> for Elsewhere {
    type Error = Infallible;
    async fn get(&self, _key: &str) -> Result<Option<u32>, Infallible> {
        Ok(*self.result.lock().unwrap())
    }
    async fn put(&self, _key: &str, value: u32, _ttl: Duration) -> Result<(), Infallible> {
        *self.result.lock().unwrap() = Some(value);
        Ok(())
    }
    async fn claim(&self, _key: &str, _lease: Duration) -> Result<bool, Infallible> {
        let n = self.claims.fetch_add(1, Ordering::SeqCst);
        Ok(!self.other_leader_alive || n >= 1_000)
    }
    async fn release(&self, _key: &str) -> Result<(), Infallible> {
        self.released.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

fn store(other_leader_alive: bool) -> Elsewhere {
    Elsewhere {
        result: Mutex::new(None),
        claims: AtomicU32::new(0),
        released: AtomicU32::new(0),
        other_leader_alive,
    }
}

#[tokio::test(start_paused = true)]
async fn a_duplicate_waits_for_the_other_processes_result() {
    let once = RunOnce::new(store(true), Duration::from_secs(60));
    let ran = AtomicU32::new(0);
    let call = once.run("k", || async {
        ran.fetch_add(1, Ordering::SeqCst);
        Ok::<_, std::io::Error>(1)
    });
    let other = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        once.store()
            .put("k", 42, Duration::from_secs(60))
            .await
            .unwrap();
    };
    let (got, ()) = tokio::join!(call, other);
    assert_eq!(got.unwrap(), 42);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    // Polling backs off: 2 s of waiting took a handful of claims, not hundreds.
    let claims = once.store().claims.load(Ordering::SeqCst);
    assert!((5..=20).contains(&claims), "{claims} claims");
}

#[tokio::test(start_paused = true)]
async fn a_failed_leader_releases_its_claim() {
    let once = RunOnce::new(store(false), Duration::from_secs(60));
    let failed = once
        .run("k", || async { Err::<u32, _>(std::io::Error::other("no")) })
        .await;
    assert!(failed.is_err());
    assert_eq!(once.store().released.load(Ordering::SeqCst), 1);
    assert_eq!(
        once.run("k", || async { Ok::<_, std::io::Error>(5) })
            .await
            .unwrap(),
        5
    );
    assert_eq!(
        once.store().released.load(Ordering::SeqCst),
        1,
        "successes keep nothing to release"
    );
}
