//! The console's page timings on a queue of a million jobs, and its load on the store
//! (BENCHMARKS.md, "The jobs console"). Not run in CI:
//!
//! ```text
//! cargo run --release -p steadfast-console --example million -- sqlite:///tmp/million.db
//! cargo run --release -p steadfast-console --example million -- postgres://postgres@127.0.0.1:5432/test
//! ```
//!
//! Fills the store once (1,000,000 jobs of one queue: 90 % waiting, 5 % done in the last
//! hour, 5 % dead), then times, each the median of 20 runs: the inspector's queries and the
//! console's pages through its router (HTML rendered, as a browser gets it), with the page
//! cache off (a refresh period of 0 is raised to 250 ms, so each timed request waits it out).

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, header};
use http_body_util::BodyExt;
use steadfast_console::{ConsoleOptions, jobs_router};
use steadfast_jobs::inspect::{Inspector, JobFilter};
use steadfast_jobs::{JobState, Jobs, StoreOptions};
use tower::ServiceExt;

const N: usize = 1_000_000;
const RUNS: usize = 20;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn time<F, Fut, T>(f: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut v = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        std::hint::black_box(f().await);
        v.push(t.elapsed());
    }
    median(v)
}

async fn fill(jobs: &Jobs) {
    let have: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM steadfast_jobs")
        .fetch_one(jobs.store().pool())
        .await
        .unwrap();
    if have as usize >= N {
        return;
    }
    let t = Instant::now();
    for chunk in 0..N / 10_000 {
        jobs.queue_many("bench", (0..10_000).map(|i| chunk * 10_000 + i))
            .await
            .unwrap();
    }
    let now = chrono::Utc::now().timestamp_millis();
    // 5 % done and 5 % dead, finished over the last hour, started 0–999 ms late.
    sqlx::query(
        "UPDATE steadfast_jobs SET state = CASE WHEN id % 20 = 0 THEN 'dead' ELSE 'done' END, attempts = 1, \
         first_attempt_at = run_at + (id % 1000), finished_at = $1 - (id % 3600000), \
         last_error = CASE WHEN id % 20 = 0 THEN 'non_retriable (CLIENT_ERROR): upstream answered 400' END \
         WHERE id % 10 = 0",
    )
    .bind(now)
    .execute(jobs.store().pool())
    .await
    .unwrap();
    if jobs.store().backend() == steadfast_jobs::Backend::Postgres {
        sqlx::query("VACUUM ANALYZE steadfast_jobs")
            .execute(jobs.store().pool())
            .await
            .unwrap();
    } else {
        sqlx::query("ANALYZE")
            .execute(jobs.store().pool())
            .await
            .unwrap();
    }
    eprintln!("filled {N} jobs in {:.1?}", t.elapsed());
}

#[tokio::main]
async fn main() {
    let url = std::env::args().nth(1).expect("usage: million STORE_URL");
    let mut opts = StoreOptions::new(url);
    if std::env::args().nth(2).is_some() {
        opts = opts.schema(std::env::args().nth(2).unwrap());
    }
    let jobs = Jobs::builder().connect_with(opts).await.unwrap();
    fill(&jobs).await;
    let i = Inspector::new(jobs.clone());
    let last_id: i64 = sqlx::query_scalar("SELECT MAX(id) FROM steadfast_jobs")
        .fetch_one(jobs.store().pool())
        .await
        .unwrap();

    println!("| what | median of {RUNS} |");
    println!("| --- | ---: |");
    let row = |what: &str, d: Duration| println!("| {what} | {:.1} ms |", d.as_secs_f64() * 1e3);
    row(
        "queues(): counts per queue and state",
        time(|| i.queues()).await,
    );
    let first = JobFilter::new(JobState::Available).handler("bench");
    row(
        "page(): first 50 waiting jobs of the queue",
        time(|| i.page(&first)).await,
    );
    let deep = JobFilter::new(JobState::Available)
        .handler("bench")
        .before(Some(last_id / 2));
    row(
        "page(): 50 waiting jobs from the middle (keyset)",
        time(|| i.page(&deep)).await,
    );
    let dead = JobFilter::new(JobState::Dead);
    row(
        "page(): first 50 dead letters, all queues",
        time(|| i.page(&dead)).await,
    );
    let fresh = || async { Inspector::new(jobs.clone()).minutes(60).await };
    row(
        "minutes(60), cold (a new console: the newest 7 minutes)",
        time(fresh).await,
    );
    i.minutes(60).await.unwrap();
    row(
        "minutes(60), warm (the last 2 minutes)",
        time(|| i.minutes(60)).await,
    );

    // Through the router, as a browser asks: the cache is emptied by waiting out the refresh.
    let app = jobs_router(
        i.clone(),
        ConsoleOptions::new().refresh(Duration::from_millis(250)),
    );
    for (what, path) in [
        ("GET / (front page)", "/"),
        ("GET /queues/bench (first page)", "/queues/bench"),
        ("GET /dead", "/dead"),
    ] {
        let mut v = Vec::new();
        for _ in 0..RUNS / 2 {
            tokio::time::sleep(Duration::from_millis(260)).await;
            let req = Request::get(path)
                .header(header::HOST, "127.0.0.1")
                .body(Body::empty())
                .unwrap();
            let t = Instant::now();
            let resp = app.clone().oneshot(req).await.unwrap();
            assert!(resp.status().is_success(), "{path}: {}", resp.status());
            resp.into_body().collect().await.unwrap();
            v.push(t.elapsed());
        }
        row(&format!("{what}, uncached"), median(v));
    }
    let req = || {
        Request::get("/")
            .header(header::HOST, "127.0.0.1")
            .body(Body::empty())
            .unwrap()
    };
    app.clone().oneshot(req()).await.unwrap();
    let t = time(|| async {
        app.clone()
            .oneshot(req())
            .await
            .unwrap()
            .into_body()
            .collect()
            .await
            .unwrap()
    })
    .await;
    row("GET / within the refresh period (cached)", t);
}
