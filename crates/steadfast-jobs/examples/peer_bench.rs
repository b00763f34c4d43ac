//! The steadfast side of `benches/jobs-vs-peers` (run it through `run.sh` there): the same
//! scenarios as its graphile-worker and pg-boss runners, one JSON line on stdout.
//!
//! `--scenario=burn|steady|idle --jobs=N --workers=W --enqueue=single|bulk`, the store from
//! `DATABASE_URL` (PostgreSQL, tables in the schema `bench_steadfast`; or `sqlite://path`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use steadfast::ErrorClass;
use steadfast_jobs::{JobContext, JobOptions, Jobs, StoreOptions, WorkerConfig, handler};
use tokio::sync::Notify;

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        * 1000.0
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Stamp {
    t: f64,
}

struct Config {
    scenario: String,
    jobs: usize,
    workers: usize,
    enqueue: String,
}

fn config() -> Config {
    let mut c = Config {
        scenario: "burn".into(),
        jobs: 1000,
        workers: 1,
        enqueue: "single".into(),
    };
    for a in std::env::args().skip(1) {
        let (k, v) = a
            .trim_start_matches("--")
            .split_once('=')
            .unwrap_or((&a, ""));
        match k {
            "scenario" => c.scenario = v.into(),
            "jobs" => c.jobs = v.parse().expect("--jobs is a number"),
            "workers" => c.workers = v.parse().expect("--workers is a number"),
            "enqueue" => c.enqueue = v.into(),
            other => panic!("unknown argument {other:?}"),
        }
    }
    c
}

struct Tracker {
    latencies: Mutex<Vec<f64>>,
    started: AtomicUsize,
    total: usize,
    all: Notify,
    ended: Mutex<Option<Instant>>,
}

async fn enqueue_all(jobs: &Jobs, c: &Config) -> Duration {
    let began = Instant::now();
    if c.scenario == "idle" {
        for _ in 0..c.jobs {
            jobs.queue("noop", &Stamp { t: now_ms() }, JobOptions::new())
                .await
                .expect("queue");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    } else if c.enqueue == "bulk" {
        let batch = if c.scenario == "steady" { 100 } else { 1000 };
        let mut i = 0;
        while i < c.jobs {
            let n = batch.min(c.jobs - i);
            let t = now_ms();
            jobs.queue_many("noop", (0..n).map(|_| Stamp { t }))
                .await
                .expect("queue_many");
            i += n;
        }
    } else {
        let next = Arc::new(AtomicUsize::new(0));
        let callers = (0..16).map(|_| {
            let (jobs, next, total) = (jobs.clone(), next.clone(), c.jobs);
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    jobs.queue("noop", &Stamp { t: now_ms() }, JobOptions::new())
                        .await
                        .expect("queue");
                }
            })
        });
        for c in callers.collect::<Vec<_>>() {
            c.await.expect("caller");
        }
    }
    began.elapsed()
}

#[tokio::main]
async fn main() {
    let c = config();
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let tracker = Arc::new(Tracker {
        latencies: Mutex::new(Vec::with_capacity(c.jobs)),
        started: AtomicUsize::new(0),
        total: c.jobs,
        all: Notify::new(),
        ended: Mutex::new(None),
    });
    let tr = tracker.clone();
    let jobs = Jobs::builder()
        .handler(handler("noop", move |_ctx: JobContext, p: Stamp| {
            let tr = tr.clone();
            async move {
                tr.latencies.lock().unwrap().push(now_ms() - p.t);
                if tr.started.fetch_add(1, Ordering::SeqCst) + 1 == tr.total {
                    *tr.ended.lock().unwrap() = Some(Instant::now());
                    tr.all.notify_one();
                }
                Ok::<(), ErrorClass>(())
            }
        }))
        .connect_with(if url.starts_with("sqlite") {
            StoreOptions::new(url).max_connections(8)
        } else {
            StoreOptions::new(url)
                .schema("bench_steadfast")
                .max_connections(20)
        })
        .await
        .expect("connect");
    // Up to 64 claimed jobs kept at hand (pg-boss runs with batches of 50 in this benchmark);
    // the default is 0.
    let worker = jobs.worker(
        WorkerConfig::new().concurrency(c.workers).prefetch(
            std::env::var("PREFETCH")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(c.workers.max(64)),
        ),
    );
    let all = tracker.all.notified();
    tokio::pin!(all);
    all.as_mut().enable();
    let (enqueue, began, handle) = if c.scenario == "burn" {
        let enqueue = enqueue_all(&jobs, &c).await;
        let began = Instant::now();
        (enqueue, began, worker.start().expect("start"))
    } else {
        let handle = worker.start().expect("start");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let began = Instant::now();
        (enqueue_all(&jobs, &c).await, began, handle)
    };
    all.await;
    let ended = tracker.ended.lock().unwrap().expect("ended");
    let process = ended - began;
    let mut lat = tracker.latencies.lock().unwrap().clone();
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| lat[((p * lat.len() as f64) as usize).min(lat.len() - 1)];
    println!(
        "{}",
        serde_json::json!({
            "system": "steadfast",
            "scenario": c.scenario,
            "jobs": c.jobs,
            "workers": c.workers,
            "enqueue": c.enqueue,
            "enqueue_per_s": (c.jobs as f64 / enqueue.as_secs_f64()).round(),
            "processed_per_s": (c.jobs as f64 / process.as_secs_f64()).round(),
            "p50_ms": q(0.5),
            "p99_ms": q(0.99),
        })
    );
    handle.shutdown().await.expect("shutdown");
    jobs.store().close().await;
}
