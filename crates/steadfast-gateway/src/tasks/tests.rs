//! The service's rules on an injected clock, with the job worker stepped by hand: what a
//! restarted gateway does with a call that was sent and never answered, and expiry.

use std::sync::Arc;
use std::time::Duration;

use steadfast_jobs::{JobOptions, ManualClock, WorkerConfig};

use super::job::{HANDLER, Payload};
use super::store::{TaskRow, status};
use super::wire::derive;
use super::{Destination, Durable, Resolve, TasksConfig};

/// No upstream: a job that gets as far as sending finds none.
struct Nowhere;

impl Resolve for Nowhere {
    fn resolve(&self, _: &str) -> Option<Destination> {
        None
    }
}

async fn service(clock: &ManualClock) -> (Arc<Durable>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = TasksConfig {
        store: format!("sqlite://{}", dir.path().join("tasks.db").display()),
        result_ttl: Duration::from_secs(60),
        ..TasksConfig::default()
    };
    let d = Durable::open_with(config, Arc::new(Nowhere), Arc::new(clock.clone()))
        .await
        .unwrap();
    (d, dir)
}

/// A task as a gateway that died mid-call left it: attempt 1 sent, never answered.
async fn left_by_a_crash(d: &Durable, id: &str, replay: bool, now: i64) {
    let row = TaskRow {
        task_id: id.into(),
        owner: "stdio".into(),
        job_id: None,
        tool: "charge".into(),
        params: r#"{"name":"charge"}"#.into(),
        replay,
        status: status::WORKING.into(),
        result: None,
        last_failure: Some("sent, outcome unknown".into()),
        sent: 1,
        answered: 0,
        ttl_ms: 60_000,
        created_at: now,
        updated_at: now,
    };
    d.store().insert(&row).await.unwrap();
    let job = d
        .jobs
        .queue(HANDLER, &Payload { task: id.into() }, JobOptions::new())
        .await
        .unwrap();
    d.store().set_job(id, job).await.unwrap();
}

#[tokio::test]
async fn a_sent_unanswered_call_is_resent_only_when_it_may_be_replayed() {
    let clock = ManualClock::at("2030-01-01T00:00:00Z".parse().unwrap());
    let (d, _dir) = service(&clock).await;
    let now = d.shared.now();
    left_by_a_crash(&d, "charge-1", false, now).await;
    left_by_a_crash(&d, "lookup-1", true, now).await;
    let worker = d.jobs.worker(WorkerConfig::new());
    assert_eq!(worker.run_once().await.unwrap(), 2);

    // Not replayable: ends with the error written before it was sent; nothing was resent.
    let charge = d.store().get("charge-1", now).await.unwrap().unwrap();
    let v = derive(&charge, None);
    assert_eq!(v.status, "failed");
    assert_eq!(v.result.as_deref(), Some("sent, outcome unknown"));
    assert_eq!((charge.sent, charge.answered), (1, 0));

    // Replayable: went on to send again (and, with no upstream, failed saying so).
    let lookup = d.store().get("lookup-1", now).await.unwrap().unwrap();
    assert_eq!(lookup.status, "failed");
    assert!(
        lookup
            .result
            .unwrap()
            .contains("no upstream serves this tool")
    );

    // Kept for the TTL from creation, then gone (rows and finished jobs).
    clock.advance(Duration::from_secs(59));
    let later = d.shared.now();
    assert!(d.store().get("charge-1", later).await.unwrap().is_some());
    clock.advance(Duration::from_secs(2));
    d.purge().await;
    let later = d.shared.now();
    assert!(d.store().get("charge-1", later).await.unwrap().is_none());
    assert_eq!(d.store().purge(later).await.unwrap(), 0, "already purged");
    assert_eq!(
        d.jobs.stats().await.unwrap().done,
        0,
        "the finished jobs went too"
    );
}

/// A task whose attempt 1 is in flight (marked sent, not answered).
async fn in_flight(d: &Durable, id: &str, now: i64) -> TaskRow {
    let row = TaskRow {
        last_failure: Some("sent, outcome unknown".into()),
        sent: 1,
        answered: 0,
        ..working(id, now)
    };
    d.store().insert(&row).await.unwrap();
    row
}

fn working(id: &str, now: i64) -> TaskRow {
    TaskRow {
        task_id: id.into(),
        owner: "stdio".into(),
        job_id: None,
        tool: "charge".into(),
        params: r#"{"name":"charge"}"#.into(),
        replay: false,
        status: status::WORKING.into(),
        result: None,
        last_failure: None,
        sent: 0,
        answered: 0,
        ttl_ms: 60_000,
        created_at: now,
        updated_at: now,
    }
}

#[tokio::test]
async fn a_cancel_says_whether_an_attempt_was_in_flight_and_keeps_an_answer_that_came_after() {
    let clock = ManualClock::at("2030-01-01T00:00:00Z".parse().unwrap());
    let (d, _dir) = service(&clock).await;
    let now = d.shared.now();

    // Nothing was running: the call never reached the upstream.
    d.store().insert(&working("idle", now)).await.unwrap();
    let row = d.store().get("idle", now).await.unwrap().unwrap();
    let super::methods::Cancel::Done(row) = super::methods::try_cancel(&d, row).await.unwrap()
    else {
        panic!("cancelled")
    };
    let v = derive(&row, None);
    assert_eq!(v.status, "cancelled");
    assert!(
        v.message.as_deref().unwrap().contains("no attempt"),
        "{v:?}"
    );

    // Cancelled while attempt 1 ran (on another replica, say): the upstream may have acted.
    let row = in_flight(&d, "racing", now).await;
    let super::methods::Cancel::Done(cancelled) =
        super::methods::try_cancel(&d, row.clone()).await.unwrap()
    else {
        panic!("cancelled")
    };
    let v = derive(&cancelled, None);
    assert!(v.message.as_deref().unwrap().contains("in flight"), "{v:?}");
    // The attempt's answer arrives before the cancel reaches the worker running it: the task
    // stays cancelled, and says the call took effect, with its result for `tasks/result`.
    let answer = crate::call::Answer {
        raw: r#"{"content":[{"type":"text","text":"charged 5"}]}"#.into(),
        is_error: false,
    };
    super::job::settle(&d.shared, d.store(), &row, 1, Ok(answer), None)
        .await
        .unwrap();
    let after = d.store().get("racing", now).await.unwrap().unwrap();
    let v = derive(&after, None);
    assert_eq!(v.status, "cancelled");
    assert!(
        v.message.as_deref().unwrap().contains("then completed"),
        "{v:?}"
    );
    assert!(v.result.unwrap().contains("charged 5"));
    assert_eq!((after.sent, after.answered), (1, 1));
}
