//! Jobs per second for enqueue + claim + run + complete: steadfast-jobs against apalis, on
//! SQLite and PostgreSQL, with 1, 4 and 16 concurrent workers, in one run.
//!
//! Each iteration enqueues `JOBS` no-op jobs one by one through each library's own API while
//! its workers run, and stops the clock when the last job has completed. Both libraries poll
//! every 10 ms when idle; apalis fetches `concurrency` jobs per poll (its `buffer_size`).
//! A third row, `steadfast-bulk`, enqueues with `queue_many` (apalis 0.7 has no bulk push).
//!
//! PostgreSQL rows run when `STEADFAST_TEST_POSTGRES_URL` is set.
//!
//! ```text
//! cd benches/jobs-vs-apalis && STEADFAST_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test cargo bench
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apalis::prelude::*;
use apalis_sql::Config as ApalisConfig;
use apalis_sql::postgres::PostgresStorage;
use apalis_sql::sqlite::SqliteStorage;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde::{Deserialize, Serialize};
use steadfast::ErrorClass;
use steadfast_jobs::{JobContext, JobOptions, Jobs, StoreOptions, WorkerConfig, handler};
use tokio::sync::Notify;

const JOBS: usize = 1000;
const POLL: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Noop {
    n: usize,
}

/// Counts completions and wakes the bench when the iteration's last job is done.
#[derive(Clone, Default)]
struct Done {
    count: Arc<AtomicUsize>,
    all: Arc<Notify>,
}

impl Done {
    fn hit(&self) {
        if self.count.fetch_add(1, Ordering::SeqCst) + 1 == JOBS {
            self.all.notify_one();
        }
    }
    async fn wait(&self) {
        while self.count.load(Ordering::SeqCst) < JOBS {
            let _ = tokio::time::timeout(Duration::from_millis(50), self.all.notified()).await;
        }
    }
}

async fn steadfast_jobs(opts: StoreOptions, done: Done) -> Jobs {
    Jobs::builder()
        .handler(handler("noop", move |_ctx: JobContext, _p: Noop| {
            let done = done.clone();
            async move {
                done.hit();
                Ok::<(), ErrorClass>(())
            }
        }))
        .connect_with(opts)
        .await
        .expect("steadfast store")
}

async fn run_steadfast(jobs: &Jobs, done: &Done, workers: usize, bulk: bool) -> Duration {
    done.count.store(0, Ordering::SeqCst);
    let start = Instant::now();
    let handle = jobs
        .worker(WorkerConfig::new().concurrency(workers).poll_interval(POLL))
        .start()
        .unwrap();
    if bulk {
        jobs.queue_many("noop", (0..JOBS).map(|n| Noop { n })).await.unwrap();
    } else {
        for n in 0..JOBS {
            jobs.queue("noop", &Noop { n }, JobOptions::new()).await.unwrap();
        }
    }
    done.wait().await;
    let elapsed = start.elapsed();
    handle.shutdown().await.unwrap();
    elapsed
}

async fn apalis_noop(_job: Noop, done: Data<Done>) -> Result<(), Error> {
    done.hit();
    Ok(())
}

/// One apalis iteration: a monitor with one worker of `workers` concurrency, `JOBS` pushes.
macro_rules! apalis_round {
    ($name:ident, $storage:ty) => {
        async fn $name(storage: $storage, workers: usize) -> Duration {
            let done = Done::default();
            let start = Instant::now();
            let mut producer = storage.clone();
            let worker = WorkerBuilder::new("bench")
                .data(done.clone())
                .concurrency(workers)
                .backend(storage)
                .build_fn(apalis_noop);
            let stop = done.clone();
            let monitor = Monitor::new()
                .on_event(|e| {
                    if std::env::var_os("BENCH_APALIS_EVENTS").is_some() {
                        eprintln!("apalis event: {:?}", e.inner());
                    }
                })
                .register(worker)
                .shutdown_timeout(Duration::from_secs(10))
                .run_with_signal(async move {
                    stop.wait().await;
                    Ok(())
                });
            let work = async {
                for n in 0..JOBS {
                    producer.push(Noop { n }).await.unwrap();
                }
                done.wait().await;
                start.elapsed()
            };
            let (_, elapsed) = tokio::join!(monitor, work);
            elapsed
        }
    };
}

apalis_round!(apalis_sqlite_round, SqliteStorage<Noop>);
apalis_round!(apalis_pg_round, PostgresStorage<Noop>);

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pg = std::env::var("STEADFAST_TEST_POSTGRES_URL").ok();

    let mut g = c.benchmark_group("jobs");
    g.throughput(Throughput::Elements(JOBS as u64));
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(5));

    // SQLite.
    let done = Done::default();
    let sf = rt.block_on(steadfast_jobs(
        StoreOptions::new(format!("sqlite://{}", dir.path().join("steadfast.db").display())),
        done.clone(),
    ));
    let apalis_sqlite = rt.block_on(async {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", dir.path().join("apalis.db").display()))
            .await
            .unwrap();
        SqliteStorage::setup(&pool).await.unwrap();
        // apalis 0.7.4 can fetch before its heartbeat has registered the worker, and the
        // foreign key on lock_by then ends its job stream for good: register it up front.
        sqlx::query("INSERT OR IGNORE INTO Workers (id, worker_type, storage_name, layers) VALUES ('bench', 'bench::Noop', 'SqliteStorage', '')")
            .execute(&pool)
            .await
            .unwrap();
        pool
    });
    for workers in [1usize, 4, 16] {
        g.bench_with_input(BenchmarkId::new("sqlite/steadfast", workers), &workers, |b, &w| {
            b.to_async(&rt).iter_custom(|iters| {
                let (sf, done) = (sf.clone(), done.clone());
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += run_steadfast(&sf, &done, w, false).await;
                    }
                    total
                }
            })
        });
        g.bench_with_input(BenchmarkId::new("sqlite/steadfast-bulk", workers), &workers, |b, &w| {
            b.to_async(&rt).iter_custom(|iters| {
                let (sf, done) = (sf.clone(), done.clone());
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += run_steadfast(&sf, &done, w, true).await;
                    }
                    total
                }
            })
        });
        g.bench_with_input(BenchmarkId::new("sqlite/apalis", workers), &workers, |b, &w| {
            b.to_async(&rt).iter_custom(|iters| {
                let pool = apalis_sqlite.clone();
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let config = ApalisConfig::new("bench::Noop").set_poll_interval(POLL).set_buffer_size(w.max(1));
                        let storage: SqliteStorage<Noop> = SqliteStorage::new_with_config(pool.clone(), config);
                        total += apalis_sqlite_round(storage, w).await;
                    }
                    total
                }
            })
        });
    }

    // PostgreSQL.
    if let Some(url) = pg {
        let schema = format!("bench_{}", std::process::id());
        let sf = rt.block_on(steadfast_jobs(StoreOptions::new(url.clone()).schema(schema), done.clone()));
        let apalis_pg = rt.block_on(async {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            PostgresStorage::setup(&pool).await.unwrap();
            // See the SQLite setup: register the worker before its first fetch.
            sqlx::query("INSERT INTO apalis.workers (id, worker_type, storage_name, layers) SELECT 'bench', 'bench::Noop', 'PostgresStorage', '' WHERE NOT EXISTS (SELECT 1 FROM apalis.workers WHERE id = 'bench')")
                .execute(&pool)
                .await
                .unwrap();
            pool
        });
        for workers in [1usize, 4, 16] {
            g.bench_with_input(BenchmarkId::new("postgres/steadfast", workers), &workers, |b, &w| {
                b.to_async(&rt).iter_custom(|iters| {
                    let (sf, done) = (sf.clone(), done.clone());
                    async move {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            total += run_steadfast(&sf, &done, w, false).await;
                        }
                        total
                    }
                })
            });
            g.bench_with_input(BenchmarkId::new("postgres/steadfast-bulk", workers), &workers, |b, &w| {
                b.to_async(&rt).iter_custom(|iters| {
                    let (sf, done) = (sf.clone(), done.clone());
                    async move {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            total += run_steadfast(&sf, &done, w, true).await;
                        }
                        total
                    }
                })
            });
            g.bench_with_input(BenchmarkId::new("postgres/apalis", workers), &workers, |b, &w| {
                b.to_async(&rt).iter_custom(|iters| {
                    let pool = apalis_pg.clone();
                    async move {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            let config = ApalisConfig::new("bench::Noop").set_poll_interval(POLL).set_buffer_size(w.max(1));
                            let storage: PostgresStorage<Noop> = PostgresStorage::new_with_config(pool.clone(), config);
                            total += apalis_pg_round(storage, w).await;
                        }
                        total
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
