//! Idempotency keys and run-once semantics.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use steadfast::{ErrorClass, MemoryStore, OnceError, Retry, RetryPolicy, RunOnce, idempotency_key};

fn reversed(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m.iter().rev() {
                out.insert(k.clone(), reversed(v));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
        v => v.clone(),
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z\"\\\\ ]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,3}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn key_ignores_object_key_order(v in json_value()) {
        prop_assert_eq!(idempotency_key("s", "t", &v), idempotency_key("s", "t", &reversed(&v)));
    }

    #[test]
    fn different_arguments_give_different_keys(a in json_value(), b in json_value()) {
        prop_assume!(a != b);
        prop_assert_ne!(idempotency_key("s", "t", &a), idempotency_key("s", "t", &b));
    }
}

#[test]
fn key_is_stable_across_releases() {
    // A changed key would replay side effects that a deployed store already recorded.
    assert_eq!(
        idempotency_key(
            "session-1",
            "send_email",
            &json!({"to": "a@example.com", "n": 1})
        ),
        idempotency_key(
            "session-1",
            "send_email",
            &json!({"n": 1, "to": "a@example.com"})
        )
    );
    assert_eq!(
        idempotency_key(
            "session-1",
            "send_email",
            &json!({"to": "a@example.com", "n": 1})
        ),
        // sha256(`["session-1","send_email",{"n":1,"to":"a@example.com"}]`), checked with Python.
        "074db1cc21ce79fb41f773706a1f454d"
    );
}

#[tokio::test(start_paused = true)]
async fn concurrent_duplicates_run_the_side_effect_once() {
    let once: Arc<RunOnce<u32>> =
        Arc::new(RunOnce::new(MemoryStore::new(), Duration::from_secs(60)));
    let runs = Arc::new(AtomicU32::new(0));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (once, runs) = (once.clone(), runs.clone());
            tokio::spawn(async move {
                once.run("k", || async {
                    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok::<_, std::io::Error>(n * 10)
                })
                .await
                .unwrap()
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), 10);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // A later duplicate gets the stored result.
    let later = once
        .run("k", || async { Ok::<_, std::io::Error>(99) })
        .await
        .unwrap();
    assert_eq!(later, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_duplicates_across_threads_run_once() {
    for round in 0..20 {
        let once: Arc<RunOnce<u32>> =
            Arc::new(RunOnce::new(MemoryStore::new(), Duration::from_secs(60)));
        let runs = Arc::new(AtomicU32::new(0));
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (once, runs) = (once.clone(), runs.clone());
                tokio::spawn(async move {
                    once.run("k", || async {
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        Ok::<_, std::io::Error>(round)
                    })
                    .await
                    .unwrap()
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap(), round);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "round {round}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_not_stored_and_a_waiter_takes_over() {
    let once: Arc<RunOnce<&'static str>> =
        Arc::new(RunOnce::new(MemoryStore::new(), Duration::from_secs(60)));
    let runs = Arc::new(AtomicU32::new(0));
    let call = |once: Arc<RunOnce<&'static str>>, runs: Arc<AtomicU32>| async move {
        once.run("k", || async {
            let n = runs.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            if n == 0 { Err("HTTP 503") } else { Ok("sent") }
        })
        .await
    };
    let (first, second) = tokio::join!(
        call(once.clone(), runs.clone()),
        call(once.clone(), runs.clone())
    );
    assert!(matches!(first, Err(OnceError::Failed("HTTP 503"))));
    assert_eq!(second.unwrap(), "sent");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_leader_hands_over_to_a_waiter() {
    let once: Arc<RunOnce<u32>> =
        Arc::new(RunOnce::new(MemoryStore::new(), Duration::from_secs(60)));
    let leader = tokio::spawn({
        let once = once.clone();
        async move {
            once.run("k", || async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, std::io::Error>(1)
            })
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    let waiter = tokio::spawn({
        let once = once.clone();
        async move { once.run("k", || async { Ok::<_, std::io::Error>(2) }).await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    leader.abort();
    assert_eq!(waiter.await.unwrap().unwrap(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_expired_result_runs_again() {
    let once = RunOnce::new(MemoryStore::new(), Duration::from_secs(60));
    let first = once
        .run("k", || async { Ok::<_, std::io::Error>(1) })
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(61)).await;
    let second = once
        .run("k", || async { Ok::<_, std::io::Error>(2) })
        .await
        .unwrap();
    assert_eq!((first, second), (1, 2));
}

#[tokio::test(start_paused = true)]
async fn retries_around_run_once_never_repeat_a_completed_side_effect() {
    // The side effect completes, then the response is lost: the retry must get the stored
    // result rather than send again.
    let once: RunOnce<String> = RunOnce::new(MemoryStore::new(), Duration::from_secs(60));
    let sent = AtomicU32::new(0);
    let retry = Retry::<String, ErrorClass>::new(RetryPolicy::default());
    let key = idempotency_key("s", "send_email", &json!({"to": "x"}));
    let out = retry
        .run(|attempt| {
            let (once, sent, key) = (&once, &sent, key.clone());
            async move {
                let result = once
                    .run(&key, || async {
                        sent.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ErrorClass>("queued".to_owned())
                    })
                    .await
                    .map_err(|_| ErrorClass::unknown())?;
                if attempt == 1 {
                    return Err(ErrorClass::from_status(502)); // the reply was lost
                }
                Ok(result)
            }
        })
        .await
        .unwrap();
    assert_eq!(out, "queued");
    assert_eq!(sent.load(Ordering::SeqCst), 1);
}
