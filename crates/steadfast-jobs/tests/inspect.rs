//! The inspection API (`steadfast_jobs::inspect`, what the console reads): counts, keyset
//! pages, a job's detail, dead letters and their repair, schedules with pause and resume,
//! keys, and the per-minute history with its cache — on a manual clock, on SQLite always and
//! on PostgreSQL when asked for.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::Db;
use steadfast::ErrorClass;
use steadfast_jobs::inspect::{COUNT_CAP, Inspector, JobFilter, ScheduleStatus};
use steadfast_jobs::{
    JobContext, JobOptions, JobState, Jobs, KeyLimits, ManualClock, ScheduleOptions, When,
    WorkerConfig, handler,
};

fn t0() -> DateTime<Utc> {
    "2030-01-01T00:00:30Z".parse().unwrap()
}

/// `ok` succeeds; `bad` fails for good (a dead letter at once).
async fn connect(db: &Db, clock: &ManualClock) -> Jobs {
    Jobs::builder()
        .handler(handler("ok", |_ctx: JobContext, _p: String| async move {
            Ok::<(), ErrorClass>(())
        }))
        .handler(handler("bad", |_ctx: JobContext, _p: String| async move {
            Err::<(), ErrorClass>(ErrorClass::from_status(400))
        }))
        .clock(clock.clone())
        .connect_with(db.opts.clone())
        .await
        .expect("connect")
}

both!(
    counts_pages_and_detail,
    dead_letters_retry_discard_and_bulk,
    schedules_pause_resume_cancel,
    keys_and_paused_queues,
    minutes_count_finished_jobs_and_latency,
    counts_stop_at_the_cap,
    a_new_inspector_reads_the_hour_back_a_few_minutes_at_a_time,
);

async fn counts_pages_and_detail(db: Db) {
    let clock = ManualClock::at(t0());
    let jobs = connect(&db, &clock).await;
    let ids = jobs
        .queue_many("ok", (0..7).map(|i| format!("job {i}")))
        .await
        .unwrap();
    jobs.queue("bad", &"x", JobOptions::new()).await.unwrap();
    let i = Inspector::new(jobs.clone());
    let q = i.queues().await.unwrap();
    assert_eq!(q.len(), 2);
    assert_eq!(
        (q[0].handler.as_str(), q[0].available, q[0].dead),
        ("bad", 1, 0)
    );
    assert_eq!((q[1].handler.as_str(), q[1].available), ("ok", 7));

    // Keyset pages of 3, newest first, cover every job once.
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let f = JobFilter::new(JobState::Available)
            .handler("ok")
            .limit(3)
            .before(before);
        let page = i.page(&f).await.unwrap();
        assert!(page.jobs.len() <= 3);
        seen.extend(page.jobs.iter().map(|j| j.id));
        match page.next {
            Some(n) => before = Some(n),
            None => break,
        }
    }
    let mut want = ids.clone();
    want.reverse();
    assert_eq!(seen, want);
    // Every queue: the `bad` job too; another state: none.
    let all = i
        .page(&JobFilter::new(JobState::Available).limit(500))
        .await
        .unwrap();
    assert_eq!(all.jobs.len(), 8);
    assert!(
        i.page(&JobFilter::new(JobState::Done))
            .await
            .unwrap()
            .jobs
            .is_empty()
    );

    let d = i.job(ids[0]).await.unwrap().unwrap();
    assert_eq!(d.job.state, JobState::Available);
    assert_eq!(d.next_run, Some(t0()));
    assert_eq!((d.locked_by.as_deref(), d.lease_until), (None, None));
    assert!(i.job(999_999).await.unwrap().is_none());

    // Running: the worker holding it and its lease are shown.
    let w = jobs.worker(WorkerConfig::new().concurrency(8));
    w.run_once().await.unwrap();
    let q = i.queues().await.unwrap();
    assert_eq!((q[0].dead, q[1].done, q[1].available), (1, 7, 0));
}

async fn dead_letters_retry_discard_and_bulk(db: Db) {
    let clock = ManualClock::at(t0());
    let jobs = connect(&db, &clock).await;
    let ids = jobs
        .queue_many("bad", (0..4).map(|i| format!("{i}")))
        .await
        .unwrap();
    let w = jobs.worker(WorkerConfig::new().concurrency(8));
    w.run_once().await.unwrap();
    let i = Inspector::new(jobs.clone());
    let dead = i.page(&JobFilter::new(JobState::Dead)).await.unwrap();
    assert_eq!(dead.jobs.len(), 4);
    assert!(
        dead.jobs[0]
            .last_error
            .as_deref()
            .unwrap()
            .contains("CLIENT_ERROR")
    );

    assert!(i.retry(ids[0]).await.unwrap());
    assert!(!i.retry(ids[0]).await.unwrap(), "no longer dead");
    assert_eq!(
        jobs.get(ids[0]).await.unwrap().unwrap().state,
        JobState::Available
    );
    assert!(i.discard(ids[1]).await.unwrap());
    assert!(jobs.get(ids[1]).await.unwrap().is_none());
    assert!(
        !i.discard(ids[0]).await.unwrap(),
        "only dead letters are discarded"
    );

    let other = i.retry_dead(Some("ok")).await.unwrap();
    assert_eq!((other.retried, other.more), (0, false));
    let bulk = i.retry_dead(Some("bad")).await.unwrap();
    assert_eq!((bulk.retried, bulk.skipped, bulk.more), (2, 0, false));
    assert!(
        i.page(&JobFilter::new(JobState::Dead))
            .await
            .unwrap()
            .jobs
            .is_empty()
    );
    assert_eq!(i.queues().await.unwrap()[0].available, 3);
}

async fn schedules_pause_resume_cancel(db: Db) {
    let clock = ManualClock::at(t0());
    let jobs = connect(&db, &clock).await;
    let first = jobs
        .schedule(
            When::every(Duration::from_secs(60)),
            "ok",
            &"tick",
            ScheduleOptions::new().key("tick"),
        )
        .await
        .unwrap();
    let i = Inspector::new(jobs.clone());
    let page = i.schedules(None, 10).await.unwrap();
    assert_eq!(page.schedules.len(), 1);
    let s = &page.schedules[0];
    let due = t0() + chrono::Duration::seconds(60);
    assert_eq!(
        (s.status, s.key.as_deref(), s.pending_at),
        (ScheduleStatus::Active, Some("tick"), Some(due))
    );
    assert_eq!(
        s.next_fires,
        [
            due,
            due + chrono::Duration::seconds(60),
            due + chrono::Duration::seconds(120)
        ]
    );
    let id = s.id;

    assert!(i.pause_schedule(id).await.unwrap());
    assert!(!i.pause_schedule(id).await.unwrap());
    assert_eq!(
        jobs.get(first).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    let s = &i.schedules(None, 10).await.unwrap().schedules[0];
    assert_eq!(
        (s.status, s.pending_at, s.next_fires.len()),
        (ScheduleStatus::Paused, None, 0)
    );

    clock.advance(Duration::from_secs(600));
    assert!(i.resume_schedule(id).await.unwrap());
    assert!(!i.resume_schedule(id).await.unwrap());
    let s = &i.schedules(None, 10).await.unwrap().schedules[0];
    let resumed = t0() + chrono::Duration::seconds(660);
    assert_eq!(
        (s.status, s.pending_at),
        (ScheduleStatus::Active, Some(resumed))
    );
    // The resumed fire time runs and plans the next one.
    clock.advance(Duration::from_secs(60));
    jobs.worker(WorkerConfig::new()).run_once().await.unwrap();
    let s = &i.schedules(None, 10).await.unwrap().schedules[0];
    assert_eq!(s.pending_at, Some(resumed + chrono::Duration::seconds(60)));

    assert!(i.cancel_schedule(id).await.unwrap());
    let s = &i.schedules(None, 10).await.unwrap().schedules[0];
    assert_eq!((s.status, s.pending_at), (ScheduleStatus::Cancelled, None));
    assert!(
        !i.resume_schedule(id).await.unwrap(),
        "a cancelled schedule is not resumed"
    );
    assert!(
        i.schedules(Some(id), 10)
            .await
            .unwrap()
            .schedules
            .is_empty()
    );
}

async fn keys_and_paused_queues(db: Db) {
    let clock = ManualClock::at(t0());
    let jobs = connect(&db, &clock).await;
    jobs.set_limits(
        "openai",
        KeyLimits::new()
            .max_running(4)
            .rate(60, Duration::from_secs(60)),
    )
    .await
    .unwrap();
    jobs.queue("ok", &"a", JobOptions::new().limit_key("openai"))
        .await
        .unwrap();
    let i = Inspector::new(jobs.clone());
    i.pause_key("tenant").await.unwrap();
    let keys = i.keys().await.unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(
        (
            keys[0].key.as_str(),
            keys[0].limits.max_running,
            keys[0].waiting
        ),
        ("openai", Some(4), 1)
    );
    assert!(keys[1].paused);
    assert!(i.resume_key("tenant").await.unwrap());
    assert_eq!(i.keys().await.unwrap().len(), 1);
    jobs.pause_queue("idle").await.unwrap();
    let q = i.queues().await.unwrap();
    assert!(
        q.iter()
            .any(|q| q.handler == "idle" && q.paused && q.available == 0)
    );
}

async fn minutes_count_finished_jobs_and_latency(db: Db) {
    let clock = ManualClock::at(t0());
    let jobs = connect(&db, &clock).await;
    let i = Inspector::new(jobs.clone());
    let w = jobs.worker(WorkerConfig::new().concurrency(16));
    // Minute 0: three jobs start 5 s late (due at 00:30, run at 00:35); one dead letter.
    jobs.queue_many("ok", ["a", "b", "c"]).await.unwrap();
    jobs.queue("bad", &"x", JobOptions::new()).await.unwrap();
    clock.advance(Duration::from_secs(5));
    w.run_once().await.unwrap();
    // Minute 2: one job starts at once.
    clock.advance(Duration::from_secs(120));
    jobs.queue("ok", &"d", JobOptions::new()).await.unwrap();
    w.run_once().await.unwrap();

    let m = i.minutes(5).await.unwrap();
    assert_eq!(m.len(), 5);
    let first = &m[2];
    assert_eq!(
        first.at,
        "2030-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
    );
    assert_eq!((first.done, first.dead), (3, 1));
    // 5 s lands in the (2.5 s, 5 s] bucket's neighbour: [5 s, 10 s).
    assert_eq!(first.latency.iter().sum::<u64>(), 4);
    assert_eq!(first.quantile_ms(0.5), Some(10_000));
    let last = &m[4];
    assert_eq!((last.done, last.quantile_ms(0.99)), (1, Some(10)));
    assert_eq!((m[0].done, m[3].done), (0, 0));

    // Minute 0 is settled now: cached, so deleting its jobs does not change it, while the
    // current minute is read again.
    jobs.store().purge(JobState::Done, i64::MAX).await.unwrap();
    let m = i.minutes(5).await.unwrap();
    assert_eq!((m[2].done, m[4].done), (3, 0));
}

async fn counts_stop_at_the_cap(db: Db) {
    let clock = ManualClock::at(t0());
    let jobs = connect(&db, &clock).await;
    let over = COUNT_CAP as usize + 5;
    jobs.queue_many("ok", (0..over).map(|i| i.to_string()))
        .await
        .unwrap();
    jobs.queue_many("bad", ["a", "b"]).await.unwrap();
    jobs.pause_queue("idle").await.unwrap();
    let q = Inspector::new(jobs).queues().await.unwrap();
    let names: Vec<_> = q.iter().map(|q| q.handler.as_str()).collect();
    assert_eq!(names, ["bad", "idle", "ok"]);
    assert_eq!(
        (q[0].available, q[2].available, q[2].done),
        (2, COUNT_CAP + 1, 0)
    );
}

async fn a_new_inspector_reads_the_hour_back_a_few_minutes_at_a_time(db: Db) {
    let clock = ManualClock::at(t0());
    let jobs = connect(&db, &clock).await;
    let w = jobs.worker(WorkerConfig::new());
    // One job done in each of 20 minutes.
    for i in 0..20 {
        jobs.queue("ok", &format!("{i}"), JobOptions::new())
            .await
            .unwrap();
        w.run_once().await.unwrap();
        clock.advance(Duration::from_secs(60));
    }
    let i = Inspector::new(jobs.clone());
    let known = |m: &[steadfast_jobs::inspect::Minute]| m.iter().filter(|m| m.read).count();
    let done = |m: &[steadfast_jobs::inspect::Minute]| m.iter().map(|m| m.done).sum::<u64>();
    // The current and previous minutes, and the 5 newest settled ones: 7 of 30.
    let m = i.minutes(30).await.unwrap();
    assert_eq!((known(&m), done(&m)), (7, 6));
    let m = i.minutes(30).await.unwrap();
    assert_eq!((known(&m), done(&m)), (12, 11));
    for _ in 0..4 {
        i.minutes(30).await.unwrap();
    }
    let m = i.minutes(30).await.unwrap();
    assert_eq!((known(&m), done(&m)), (30, 20));
}
