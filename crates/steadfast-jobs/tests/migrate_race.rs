//! Two openers of one new SQLite store at the same moment (two gateways started together on
//! the same `[tasks] store`, an editor opening two windows): sqlx takes no migration lock on
//! SQLite, so both may try the same migration; each must still end up with the store open.

use steadfast_jobs::Store;
use steadfast_jobs::StoreOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_openers_of_a_new_sqlite_store_both_succeed() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
        let open = |url: String| async move { Store::connect(StoreOptions::new(url)).await };
        let (a, b, c) = tokio::join!(
            tokio::spawn(open(url.clone())),
            tokio::spawn(open(url.clone())),
            tokio::spawn(open(url.clone())),
        );
        for (who, r) in [("a", a), ("b", b), ("c", c)] {
            if let Err(e) = r.unwrap() {
                panic!("round {round}: opener {who} failed: {e}");
            }
        }
    }
}
