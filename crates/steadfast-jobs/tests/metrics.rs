//! Counters, the queue-lag histogram and the stored-jobs gauge reach the `metrics` facade.

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use steadfast::{ErrorClass, Jitter, RetryPolicy};
use steadfast_jobs::{
    JobContext, JobOptions, Jobs, ManualClock, StoreOptions, WorkerConfig, handler,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder in this test binary");

    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at("2030-01-01T00:00:00Z".parse().unwrap());
    let jobs = Jobs::builder()
        .defaults(
            RetryPolicy::builder()
                .jitter(Jitter::None)
                .base_delay(Duration::from_secs(1)),
        )
        .handler(handler("m", |ctx: JobContext, status: u16| async move {
            match status {
                0 => Ok(()),
                503 if ctx.attempt() > 1 => Ok(()),
                s => Err(ErrorClass::from_status(s)),
            }
        }))
        .clock(clock.clone())
        .connect_with(StoreOptions::new(format!(
            "sqlite://{}",
            dir.path().join("m.db").display()
        )))
        .await
        .unwrap();
    for status in [0u16, 503, 400] {
        jobs.queue("m", &status, JobOptions::new()).await.unwrap();
    }
    let w = jobs.worker(WorkerConfig::new());
    w.run_once().await.unwrap();
    clock.advance(Duration::from_secs(1));
    w.run_once().await.unwrap();

    let mut counters = std::collections::HashMap::new();
    let mut lags = 0;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let name = key.key().name().to_owned();
        match value {
            DebugValue::Counter(n) => *counters.entry(name).or_insert(0) += n,
            DebugValue::Histogram(v) if name == "steadfast_jobs_queue_lag_seconds" => {
                lags += v.len()
            }
            _ => {}
        }
    }
    assert_eq!(counters.get("steadfast_jobs_queued_total"), Some(&3));
    assert_eq!(counters.get("steadfast_jobs_succeeded_total"), Some(&2));
    assert_eq!(counters.get("steadfast_jobs_retried_total"), Some(&1));
    assert_eq!(counters.get("steadfast_jobs_dead_total"), Some(&1));
    assert_eq!(lags, 4, "one queue-lag sample per claimed attempt");

    // A running worker counts the store's jobs by state into a gauge.
    let handle = jobs.worker(WorkerConfig::new()).start().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let stored = loop {
        let mut stored = std::collections::BTreeMap::new();
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            if let (true, DebugValue::Gauge(v)) =
                (key.key().name() == "steadfast_jobs_stored", value)
            {
                let state = key.key().labels().find(|l| l.key() == "state");
                stored.insert(state.unwrap().value().to_owned(), v.into_inner());
            }
        }
        if !stored.is_empty() || std::time::Instant::now() > deadline {
            break stored;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    handle.shutdown().await.unwrap();
    let want = [
        ("available", 0.0),
        ("cancelled", 0.0),
        ("dead", 1.0),
        ("done", 2.0),
        ("retrying", 0.0),
        ("running", 0.0),
    ];
    let want: std::collections::BTreeMap<_, _> =
        want.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    assert_eq!(stored, want);
}
