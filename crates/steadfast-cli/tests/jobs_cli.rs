//! `steadfast jobs` as an operator runs it: the real binary, one process per command, against a
//! store a worker filled (a job done, one dead with a secret in its error, one waiting) — on
//! SQLite always, on PostgreSQL with `STEADFAST_TEST_POSTGRES_URL` (`#[ignore]`d otherwise, and
//! failing naming the variable when asked for without it).

#[path = "support/temp.rs"]
mod temp;

use std::process::{Command, Output};
use std::time::Duration;

use steadfast::{Classify, ErrorClass, ErrorCode, RetryPolicy};
use steadfast_jobs::{JobContext, JobOptions, Jobs, StoreOptions, WorkerConfig, handler};
use temp::Temp;

const SECRET: &str = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c";

/// A permanent failure whose text carries a credential (as an upstream's error might).
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "upstream refused api_key={SECRET}")
    }
}

impl Classify for Refused {
    fn classify(&self) -> ErrorClass {
        ErrorClass::non_retriable(ErrorCode::new("BAD_KEY"))
    }
}

/// `steadfast jobs --db URL [--schema S] ARGS…`, bounded: a command that hangs fails the test.
fn jobs(db: &Store, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.arg("jobs").arg("--db").arg(&db.url);
    if let Some(s) = &db.schema {
        cmd.arg("--schema").arg(s);
    }
    let mut child = cmd
        .args(args)
        .env_remove("STEADFAST_JOBS_DB")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("steadfast runs");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("steadfast jobs {args:?} did not finish within 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

fn ok(db: &Store, args: &[&str]) -> String {
    let out = jobs(db, args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "steadfast jobs {args:?} failed: {stdout}{stderr}"
    );
    stdout
}

fn fails(db: &Store, args: &[&str]) -> String {
    let out = jobs(db, args);
    assert!(
        !out.status.success(),
        "steadfast jobs {args:?} should fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

struct Store {
    url: String,
    schema: Option<String>,
    _file: Option<Temp>,
}

/// Fills the store through the library, as a worker process would: one job done, one dead
/// (its error carries a secret), one waiting. Returns the dead job's id.
async fn fill(db: &Store) -> i64 {
    let mut opts = StoreOptions::new(db.url.clone());
    if let Some(s) = &db.schema {
        opts = opts.schema(s.clone());
    }
    let jobs = Jobs::builder()
        .handler(handler("ok", |_: JobContext, _: serde_json::Value| async {
            Ok::<(), ErrorClass>(())
        }))
        .handler(
            handler("boom", |_: JobContext, _: serde_json::Value| async {
                Err::<(), _>(Refused)
            })
            .retry(RetryPolicy::builder().max_attempts(1)),
        )
        .connect_with(opts)
        .await
        .expect("store");
    jobs.queue("ok", &serde_json::json!({}), JobOptions::new())
        .await
        .unwrap();
    let dead = jobs
        .queue("boom", &serde_json::json!({"n": 1}), JobOptions::new())
        .await
        .unwrap();
    let worker = jobs.worker(WorkerConfig::new().concurrency(4));
    assert_eq!(worker.run_once().await.unwrap(), 2);
    jobs.queue(
        "later",
        &serde_json::json!({}),
        JobOptions::new().limit_key("tenant-a"),
    )
    .await
    .unwrap();
    jobs.store().close().await;
    dead
}

async fn operator_session(db: Store) {
    let dead = fill(&db).await;
    let id = dead.to_string();

    let stats = ok(&db, &["stats"]);
    assert!(
        stats.contains("available 1 ") && stats.contains("done 1") && stats.contains("dead 1"),
        "{stats}"
    );

    let listed = ok(&db, &["list", "--state", "dead"]);
    assert!(listed.contains(&id) && listed.contains("boom"), "{listed}");
    assert!(!listed.contains(" ok "), "only dead jobs: {listed}");

    let shown = ok(&db, &["show", &id]);
    assert!(shown.contains("state:        dead"), "{shown}");
    assert!(shown.contains("[BAD_KEY]"), "{shown}");
    assert!(!shown.contains(SECRET), "show leaks the secret: {shown}");

    let dead_json: serde_json::Value =
        serde_json::from_str(&ok(&db, &["--json", "dead"])).expect("--json dead is JSON");
    let ids: Vec<i64> = dead_json
        .as_array()
        .expect("an array")
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![dead]);
    assert!(!dead_json.to_string().contains(SECRET));

    assert!(ok(&db, &["requeue", &id]).contains(&format!("job {id} requeued")));
    let stats = ok(&db, &["stats"]);
    assert!(
        stats.contains("available 2 ") && stats.contains("dead 0"),
        "{stats}"
    );
    // Not dead any more: refused, naming the job.
    let err = fails(&db, &["requeue", &id]);
    assert!(err.contains(&format!("job {id} is not dead")), "{err}");

    assert!(
        ok(
            &db,
            &[
                "set-limits",
                "tenant-a",
                "--max-running",
                "2",
                "--rate",
                "60/1m"
            ]
        )
        .contains("limits of tenant-a set")
    );
    assert!(ok(&db, &["pause", "--queue", "boom"]).contains("queue boom paused"));
    let limits = ok(&db, &["limits"]);
    let row = limits
        .lines()
        .find(|l| l.starts_with("tenant-a"))
        .unwrap_or_else(|| panic!("tenant-a listed: {limits}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cols,
        ["tenant-a", "active", "2", "60/1m", "0", "1"],
        "{limits}"
    );
    assert!(limits.contains("queue boom paused"), "{limits}");
    assert!(ok(&db, &["pause", "--key", "tenant-a"]).contains("key tenant-a paused"));
    assert!(ok(&db, &["limits"]).contains("tenant-a                         paused"));
    assert!(ok(&db, &["resume", "--key", "tenant-a"]).contains("key tenant-a resumed"));
    assert!(ok(&db, &["resume", "--queue", "boom"]).contains("queue boom resumed"));
    assert!(ok(&db, &["resume", "--queue", "boom"]).contains("queue boom was not paused"));

    // Bad input: refused, naming the argument.
    let err = fails(&db, &["set-limits", "tenant-a", "--rate", "60"]);
    assert!(
        err.contains("--rate") && err.contains("N/DURATION"),
        "{err}"
    );
    let err = fails(&db, &["pause"]);
    assert!(err.contains("--key") && err.contains("--queue"), "{err}");
    let err = fails(&db, &["purge", "--older-than", "soon"]);
    assert!(err.contains("--older-than"), "{err}");
    assert!(ok(&db, &["purge", "--older-than", "7d"]).contains("purged 0 dead jobs"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_session_on_sqlite() {
    let file = Temp::new("jobs-cli.db");
    operator_session(Store {
        url: format!("sqlite://{}", file.path()),
        schema: None,
        _file: Some(file),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"]
async fn an_operator_session_on_postgres() {
    let url = std::env::var("STEADFAST_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| panic!("this test needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    operator_session(Store {
        url,
        schema: Some(format!("t_jobs_cli_{}_{nanos}", std::process::id())),
        _file: None,
    })
    .await;
}
