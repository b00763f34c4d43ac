//! The Rust peers of `benches/jobs-vs-peers` (started by its run.mjs, one JSON line on
//! stdout, the same scenarios and clock as the other runners):
//!
//! - `--system=graphile-rs`: the `graphile_worker` crate in its defaults;
//!   `--system=graphile-rs-preset`: with graphile-worker's performance preset translated to
//!   the crate's builder (`local_queue(size 500)`, `complete_job_batch_delay(0)`,
//!   `fail_job_batch_delay(0)`, `max_pg_conn(25)`).
//! - `--system=apalis`: `apalis` 1.0 with `apalis-postgres` 1.0 (`with_pubsub()` for
//!   LISTEN/NOTIFY, `batch_size(100)`, `concurrency(workers)` + `parallelize(tokio::spawn)`).
//!
//! `--scenario=burn|steady|idle|retry --jobs=N --workers=W --enqueue=single|bulk`, the
//! database from `DATABASE_URL`. apalis runs burn, steady and idle only (its failed task
//! is retried by its worker's retry layer, not stored with a delay: no row to compare).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        * 1000.0
}

#[derive(Clone, Serialize, Deserialize)]
struct Stamp {
    t: f64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    fail: bool,
}

#[derive(Clone)]
struct Config {
    system: String,
    scenario: String,
    jobs: usize,
    workers: usize,
    enqueue: String,
    url: String,
}

fn config() -> Config {
    let mut c = Config {
        system: "graphile-rs".into(),
        scenario: "burn".into(),
        jobs: 1000,
        workers: 16,
        enqueue: "single".into(),
        url: std::env::var("DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into()),
    };
    for a in std::env::args().skip(1) {
        let (k, v) = a
            .trim_start_matches("--")
            .split_once('=')
            .unwrap_or((&a, ""));
        match k {
            "system" => c.system = v.into(),
            "scenario" => c.scenario = v.into(),
            "jobs" => c.jobs = v.parse().expect("--jobs is a number"),
            "workers" => c.workers = v.parse().expect("--workers is a number"),
            "enqueue" => c.enqueue = v.into(),
            other => panic!("unknown argument {other:?}"),
        }
    }
    c
}

fn fails(c: &Config) -> usize {
    if c.scenario == "retry" {
        c.jobs.div_ceil(20)
    } else {
        0
    }
}

fn stamp(c: &Config, i: usize, t: f64) -> Stamp {
    Stamp {
        t,
        fail: c.scenario == "retry" && i % 20 == 0,
    }
}

/// Starts seen by the handlers (first attempts' latency, retries' lateness).
struct Tracker {
    lat: Mutex<Vec<f64>>,
    late: Mutex<Vec<f64>>,
    failed_at: Mutex<HashMap<String, f64>>,
    n: AtomicUsize,
    total: usize,
    ended: Mutex<Option<Instant>>,
    all: Notify,
    retry_ms: f64,
}

static TRACKER: OnceLock<Arc<Tracker>> = OnceLock::new();

impl Tracker {
    /// Records a start; true when this attempt is to fail.
    fn start(&self, s: &Stamp, attempt: i64, id: String) -> bool {
        let now = now_ms();
        if attempt > 1 {
            if let Some(f) = self.failed_at.lock().unwrap().get(&id) {
                self.late.lock().unwrap().push(now - f - self.retry_ms);
            }
        } else {
            self.lat.lock().unwrap().push(now - s.t);
        }
        if self.n.fetch_add(1, Ordering::SeqCst) + 1 == self.total {
            *self.ended.lock().unwrap() = Some(Instant::now());
            self.all.notify_one();
        }
        if s.fail && attempt == 1 {
            self.failed_at.lock().unwrap().insert(id, now);
            return true;
        }
        false
    }
}

fn quantiles(mut xs: Vec<f64>) -> (Option<f64>, Option<f64>) {
    if xs.is_empty() {
        return (None, None);
    }
    xs.sort_by(f64::total_cmp);
    let q = |p: f64| xs[((p * xs.len() as f64) as usize).min(xs.len() - 1)];
    (Some(q(0.5)), Some(q(0.99)))
}

/// One job per call from 16 concurrent callers, batches (1000 for burn, 100 otherwise), or
/// one every 20 ms (idle).
async fn enqueue_all<O, OF, M, MF>(c: &Config, one: O, many: M) -> Duration
where
    O: Fn(Stamp) -> OF + Clone + Send + Sync + 'static,
    OF: Future<Output = ()> + Send,
    M: Fn(Vec<Stamp>) -> MF,
    MF: Future<Output = ()>,
{
    let began = Instant::now();
    if c.scenario == "idle" {
        for i in 0..c.jobs {
            one(stamp(c, i, now_ms())).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    } else if c.enqueue == "bulk" {
        let batch = if c.scenario == "burn" { 1000 } else { 100 };
        let mut i = 0;
        while i < c.jobs {
            let n = batch.min(c.jobs - i);
            let t = now_ms();
            many((i..i + n).map(|k| stamp(c, k, t)).collect()).await;
            i += n;
        }
    } else {
        let next = Arc::new(AtomicUsize::new(0));
        let mut callers = Vec::new();
        for _ in 0..16 {
            let (next, one, c) = (next.clone(), one.clone(), c.clone());
            callers.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= c.jobs {
                        break;
                    }
                    one(stamp(&c, i, now_ms())).await;
                }
            }));
        }
        for h in callers {
            h.await.expect("caller");
        }
    }
    began.elapsed()
}

mod graphile {
    use super::*;
    use graphile_worker::{
        IntoTaskHandlerResult, JobSpec, LocalQueueConfig, TaskHandler, WorkerContext, WorkerOptions,
    };

    #[derive(Clone, Serialize, Deserialize)]
    pub struct Noop(pub Stamp);

    impl TaskHandler for Noop {
        const IDENTIFIER: &'static str = "noop";
        async fn run(self, ctx: WorkerContext) -> impl IntoTaskHandlerResult {
            let tr = TRACKER.get().expect("tracker");
            let job = ctx.job();
            if tr.start(&self.0, i64::from(*job.attempts()), job.id().to_string()) {
                return Err("fails once".to_string());
            }
            Ok::<(), String>(())
        }
    }

    pub async fn worker(c: &Config, preset: bool) -> graphile_worker::Worker {
        let mut o = WorkerOptions::default()
            .database_url(&c.url)
            .schema("bench_graphile_rs")
            .concurrency(c.workers)
            .define_job::<Noop>();
        if preset {
            o = o
                .max_pg_conn(25.max(c.workers as u32 + 1))
                .local_queue(LocalQueueConfig::default().with_size(500))
                .complete_job_batch_delay(Duration::ZERO)
                .fail_job_batch_delay(Duration::ZERO);
        }
        o.init().await.expect("graphile_worker init")
    }

    pub async fn enqueue(c: &Config, w: &graphile_worker::Worker) -> Duration {
        let utils = Arc::new(w.create_utils());
        let u1 = utils.clone();
        let one = move |s: Stamp| {
            let u = u1.clone();
            async move {
                u.add_job(Noop(s), JobSpec::default())
                    .await
                    .expect("add_job");
            }
        };
        let many = |ss: Vec<Stamp>| {
            let u = utils.clone();
            async move {
                let spec = JobSpec::default();
                let jobs: Vec<(Noop, &JobSpec)> =
                    ss.into_iter().map(|s| (Noop(s), &spec)).collect();
                u.add_jobs(&jobs).await.expect("add_jobs");
            }
        };
        enqueue_all(c, one, many).await
    }
}

mod apalis_pg {
    use super::*;
    use apalis::prelude::*;
    use apalis_postgres::{Config as PgConfig, PostgresStorage};
    use sqlx::postgres::PgPoolOptions;

    async fn noop(s: Stamp) -> Result<(), BoxDynError> {
        let tr = TRACKER.get().expect("tracker");
        tr.start(&s, 1, String::new());
        Ok(())
    }

    pub async fn run(c: &Config) -> (Duration, Instant) {
        let pool = PgPoolOptions::new()
            .max_connections(25)
            .connect(&c.url)
            .await
            .expect("connect");
        PostgresStorage::setup(&pool).await.expect("setup");
        let config = PgConfig::default().queue("noop").batch_size(100);
        let backend = PostgresStorage::new(&pool)
            .with_config(config)
            .with_pubsub();
        let worker = WorkerBuilder::new("bench")
            .backend(backend.clone())
            .concurrency(c.workers)
            .parallelize(tokio::spawn)
            .build(noop);
        let sink = Arc::new(tokio::sync::Mutex::new(backend));
        let s1 = sink.clone();
        let one = move |s: Stamp| {
            let b = s1.clone();
            async move {
                let mut b = b.lock().await.clone();
                b.push(s).await.expect("push");
            }
        };
        let many = |ss: Vec<Stamp>| {
            let b = sink.clone();
            async move {
                let mut b = b.lock().await.clone();
                b.push_bulk(ss).await.expect("push_bulk");
            }
        };
        // Its worker future is polled here, not spawned (its type is not `'static` enough for
        // `tokio::spawn`): in burn it starts after the enqueue, as the other runners do.
        let run = worker.run();
        tokio::pin!(run);
        let finished = async {
            let tr = TRACKER.get().expect("tracker");
            while tr.ended.lock().unwrap().is_none() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        if c.scenario == "burn" {
            let e = enqueue_all(c, one, many).await;
            let began = Instant::now();
            tokio::select! {
                _ = &mut run => panic!("apalis worker stopped"),
                _ = finished => {}
            }
            (e, began)
        } else {
            let work = async {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let began = Instant::now();
                let e = enqueue_all(c, one, many).await;
                finished.await;
                (e, began)
            };
            tokio::select! {
                _ = &mut run => panic!("apalis worker stopped"),
                r = work => r,
            }
        }
    }
}

#[tokio::main]
async fn main() {
    let c = config();
    let retry_ms = if c.system.starts_with("graphile") {
        1f64.exp() * 1000.0
    } else {
        1000.0
    };
    let tr = Arc::new(Tracker {
        lat: Mutex::new(Vec::with_capacity(c.jobs)),
        late: Mutex::new(Vec::new()),
        failed_at: Mutex::new(HashMap::new()),
        n: AtomicUsize::new(0),
        total: c.jobs + fails(&c),
        ended: Mutex::new(None),
        all: Notify::new(),
        retry_ms,
    });
    TRACKER.set(tr.clone()).ok().expect("one tracker");
    let all = tr.all.notified();
    tokio::pin!(all);
    all.as_mut().enable();
    let (enqueue, began) = match c.system.as_str() {
        "graphile-rs" | "graphile-rs-preset" => {
            let w = Arc::new(graphile::worker(&c, c.system.ends_with("preset")).await);
            let run = |w: Arc<graphile_worker::Worker>| {
                tokio::spawn(async move {
                    let _ = w.run().await;
                })
            };
            if c.scenario == "burn" {
                let e = graphile::enqueue(&c, &w).await;
                let began = Instant::now();
                run(w.clone());
                (e, began)
            } else {
                run(w.clone());
                tokio::time::sleep(Duration::from_millis(500)).await;
                let began = Instant::now();
                (graphile::enqueue(&c, &w).await, began)
            }
        }
        "apalis" => {
            assert!(
                c.scenario != "retry",
                "apalis runs burn, steady and idle only"
            );
            apalis_pg::run(&c).await
        }
        other => panic!("unknown system {other:?}"),
    };
    all.await;
    let ended = tr.ended.lock().unwrap().expect("ended");
    let process = ended - began;
    let (p50, p99) = quantiles(tr.lat.lock().unwrap().clone());
    let (l50, l99) = quantiles(tr.late.lock().unwrap().clone());
    println!(
        "{}",
        serde_json::json!({
            "system": c.system,
            "scenario": c.scenario,
            "jobs": c.jobs,
            "workers": c.workers,
            "enqueue": c.enqueue,
            "enqueue_per_s": (c.jobs as f64 / enqueue.as_secs_f64()).round(),
            "processed_per_s": ((c.jobs + fails(&c)) as f64 / process.as_secs_f64()).round(),
            "p50_ms": p50,
            "p99_ms": p99,
            "retry_late_p50_ms": l50,
            "retry_late_p99_ms": l99,
        })
    );
    // The runtimes' own shutdown is not what is measured: leave at once.
    std::process::exit(0);
}
