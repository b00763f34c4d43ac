//! The steadfast side of `benches/jobs-vs-peers` (run it through `run.sh` there): the same
//! scenarios as its graphile-worker and pg-boss runners, one JSON line on stdout.
//!
//! `--scenario=burn|steady|idle|retry --jobs=N --workers=W --enqueue=single|bulk
//! [--config=defaults|tuned]`, the store from `DATABASE_URL` (PostgreSQL, tables in the schema
//! `bench_steadfast`; or `sqlite://path`).
//!
//! `defaults` is what a new user writes: `StoreOptions::new(url)` and
//! `WorkerConfig::new().concurrency(workers)`, nothing else (prefetch 32 since issue 35).
//! `prefetch0` is that with `prefetch 0` (the default before). `tuned` sets `prefetch 64` and
//! 20 connections; `PREFETCH=n` overrides its prefetch. `discard` is the defaults with
//! `keep_done(false)` (successful jobs deleted, graphile-worker's way).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use steadfast::{Backoff, ErrorClass, ErrorCode, Jitter, RetryPolicy};
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
    /// The retry scenario: this job's first attempt fails (every 20th job).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    fail: bool,
}

/// The retry scenario's delay (fixed, no jitter), as in the peers' runners.
const RETRY_DELAY: Duration = Duration::from_secs(1);

fn stamp(c: &Config, i: usize, t: f64) -> Stamp {
    Stamp {
        t,
        fail: c.scenario == "retry" && i.is_multiple_of(20),
    }
}

struct Config {
    scenario: String,
    jobs: usize,
    workers: usize,
    enqueue: String,
    tuned: bool,
    /// `--config=prefetch0`: the defaults with `prefetch 0` (the default before issue 35).
    prefetch0: bool,
    /// `--config=discard`: the defaults with `keep_done(false)`.
    discard: bool,
}

fn config() -> Config {
    let mut c = Config {
        scenario: "burn".into(),
        jobs: 1000,
        workers: 1,
        enqueue: "single".into(),
        tuned: false,
        prefetch0: false,
        discard: false,
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
            "config" => {
                c.tuned = v == "tuned";
                c.prefetch0 = v == "prefetch0";
                c.discard = v == "discard";
            }
            other => panic!("unknown argument {other:?}"),
        }
    }
    c
}

struct Tracker {
    latencies: Mutex<Vec<f64>>,
    /// Retry starts: how late after the failure plus `RETRY_DELAY`.
    late: Mutex<Vec<f64>>,
    failed_at: Mutex<std::collections::HashMap<i64, f64>>,
    started: AtomicUsize,
    total: usize,
    all: Notify,
    ended: Mutex<Option<Instant>>,
}

async fn enqueue_all(jobs: &Jobs, c: &Config) -> Duration {
    let began = Instant::now();
    if c.scenario == "idle" {
        for i in 0..c.jobs {
            jobs.queue("noop", &stamp(c, i, now_ms()), JobOptions::new())
                .await
                .expect("queue");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    } else if c.enqueue == "bulk" {
        let batch = if c.scenario == "burn" { 1000 } else { 100 };
        let mut i = 0;
        while i < c.jobs {
            let n = batch.min(c.jobs - i);
            let t = now_ms();
            jobs.queue_many("noop", (i..i + n).map(|k| stamp(c, k, t)))
                .await
                .expect("queue_many");
            i += n;
        }
    } else {
        let next = Arc::new(AtomicUsize::new(0));
        let retry = c.scenario == "retry";
        let callers = (0..16).map(|_| {
            let (jobs, next, total) = (jobs.clone(), next.clone(), c.jobs);
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    let s = Stamp {
                        t: now_ms(),
                        fail: retry && i % 20 == 0,
                    };
                    jobs.queue("noop", &s, JobOptions::new())
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
    let fails = if c.scenario == "retry" {
        c.jobs.div_ceil(20)
    } else {
        0
    };
    let tracker = Arc::new(Tracker {
        latencies: Mutex::new(Vec::with_capacity(c.jobs)),
        late: Mutex::new(Vec::new()),
        failed_at: Mutex::new(Default::default()),
        started: AtomicUsize::new(0),
        total: c.jobs + fails,
        all: Notify::new(),
        ended: Mutex::new(None),
    });
    let tr = tracker.clone();
    let jobs = Jobs::builder()
        .handler(
            handler("noop", move |ctx: JobContext, p: Stamp| {
                let tr = tr.clone();
                async move {
                    let now = now_ms();
                    let id = ctx.id();
                    if ctx.attempt() > 1 {
                        let failed = tr.failed_at.lock().unwrap().get(&id).copied();
                        if let Some(f) = failed {
                            tr.late
                                .lock()
                                .unwrap()
                                .push(now - f - RETRY_DELAY.as_secs_f64() * 1000.0);
                        }
                    } else {
                        tr.latencies.lock().unwrap().push(now - p.t);
                    }
                    if tr.started.fetch_add(1, Ordering::SeqCst) + 1 == tr.total {
                        *tr.ended.lock().unwrap() = Some(Instant::now());
                        tr.all.notify_one();
                    }
                    if p.fail && ctx.attempt() == 1 {
                        tr.failed_at.lock().unwrap().insert(id, now);
                        return Err(ErrorClass::retriable(ErrorCode::new("FAILS_ONCE")));
                    }
                    Ok::<(), ErrorClass>(())
                }
            })
            .retry(
                RetryPolicy::builder()
                    .max_attempts(3)
                    .backoff(Backoff::Constant)
                    .base_delay(RETRY_DELAY)
                    .jitter(Jitter::None),
            ),
        )
        .connect_with({
            let opts = StoreOptions::new(url.clone());
            let opts = if url.starts_with("sqlite") {
                opts
            } else {
                opts.schema("bench_steadfast")
            };
            if c.tuned {
                opts.max_connections(20)
            } else {
                opts
            }
        })
        .await
        .expect("connect");
    let mut config = WorkerConfig::new().concurrency(c.workers);
    if c.prefetch0 {
        config = config.prefetch(0);
    }
    if c.discard {
        config = config.keep_done(false);
    }
    if c.tuned {
        // Up to 64 claimed jobs kept at hand (pg-boss runs with batches of 50 here).
        config = config.prefetch(
            std::env::var("PREFETCH")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(c.workers.max(64)),
        );
    }
    let worker = jobs.worker(config);
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
    let mut late = tracker.late.lock().unwrap().clone();
    late.sort_by(f64::total_cmp);
    let ql = |p: f64| {
        late.get(((p * late.len() as f64) as usize).min(late.len().saturating_sub(1)))
            .copied()
    };
    println!(
        "{}",
        serde_json::json!({
            "system": match (c.tuned, c.prefetch0, c.discard) {
                (true, _, _) => "steadfast-tuned",
                (_, true, _) => "steadfast-prefetch0",
                (_, _, true) => "steadfast-discard",
                _ => "steadfast",
            },
            "scenario": c.scenario,
            "jobs": c.jobs,
            "workers": c.workers,
            "enqueue": c.enqueue,
            "enqueue_per_s": (c.jobs as f64 / enqueue.as_secs_f64()).round(),
            "processed_per_s": ((c.jobs + fails) as f64 / process.as_secs_f64()).round(),
            "p50_ms": q(0.5),
            "p99_ms": q(0.99),
            "retry_late_p50_ms": ql(0.5),
            "retry_late_p99_ms": ql(0.99),
        })
    );
    handle.shutdown().await.expect("shutdown");
    jobs.store().close().await;
}
