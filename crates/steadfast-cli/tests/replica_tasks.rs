//! Durable tasks on gateway replicas sharing one PostgreSQL database, spoken to directly (no
//! balancer: each test picks the replica): replicas started together on a new database all
//! start, and a `tasks/cancel` sent to a replica other than the one running the attempt stops
//! that attempt — the upstream gets `notifications/cancelled`, the tool's side effect does not
//! happen — and the task's final state says what happened upstream.
//!
//! Needs `STEADFAST_TEST_POSTGRES_URL` and `psql` (each test makes a database of its own).
#![cfg(feature = "http")]

#[path = "support/database.rs"]
mod database;
#[path = "support/gateway.rs"]
mod gateway;
#[path = "support/http_client.rs"]
mod http_client;
#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::path::Path;
use std::time::Duration;

use database::Database;
use raw_client::{RawProcess, fake_upstream_command, read_counts};
use serde_json::{Value, json};
use temp::Temp;
use tokio::io::AsyncBufReadExt;
use tokio::time::Instant;

const ANSWER: Duration = Duration::from_secs(10);
/// How soon the replica running an attempt must drop it once the cancel is answered elsewhere.
/// A `NOTIFY` takes milliseconds and the fallback poll a second at most (`poll_interval`
/// below); the margin is for a loaded test machine, and the time taken is printed.
const CANCEL_REACHES: Duration = Duration::from_secs(3);
/// How long the durable tool runs (its side effect at the end): longer than `CANCEL_REACHES`.
const TOOL_SECONDS: u64 = 5;

fn postgres() -> String {
    std::env::var("STEADFAST_TEST_POSTGRES_URL").expect(
        "STEADFAST_TEST_POSTGRES_URL is not set (a PostgreSQL the test may create databases on)",
    )
}

/// The replicas' config (identical on every one): `slow` is durable.
fn config(db: &Database) -> Temp {
    let file = Temp::new("replica-tasks-config");
    let text = format!(
        "[proxy]\ninit_timeout = \"5s\"\nshutdown_grace = \"300ms\"\n\
         [tasks]\nstore = \"{}\"\npoll_interval = \"1s\"\n\
         [tools.slow]\ndurable = true\n",
        db.url
    );
    std::fs::write(&file.0, text).unwrap();
    file
}

/// `steadfast proxy --listen 127.0.0.1:0 --config CONFIG -- fake --count-file COUNTS`.
fn http_command(config: &Temp, counts: &Temp) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args(["proxy", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config.0)
        .arg("--")
        .args(fake_upstream_command(&["--count-file", counts.path()]))
        .env("RUST_LOG", "info");
    cmd
}

/// An HTTP replica: the process, its MCP URL, the count file of its own fake upstream.
struct Replica {
    _child: tokio::process::Child,
    url: String,
    counts: Temp,
    log: gateway::Log,
}

async fn http_replica(config: &Temp) -> Replica {
    let counts = Temp::new("replica-tasks-counts");
    let (child, url, log) = gateway::listening(http_command(config, &counts)).await;
    Replica {
        _child: child,
        url,
        counts,
        log,
    }
}

/// POST one JSON-RPC message; the answer.
async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, Option<String>, Value) {
    let mut h = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    h.extend_from_slice(headers);
    let r = http_client::exchange("POST", url, &h, &body.to_string())
        .await
        .expect("the replica answers");
    let sid = r.header("mcp-session-id").map(str::to_owned);
    (r.status, sid, r.answer())
}

/// A handshake-era (2025-11-25, tasks) session on an HTTP replica; its id.
async fn session(url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"tasks": {"list": {}, "cancel": {}}},
        "clientInfo": {"name": "replica-tasks", "version": "1"}}});
    let (status, sid, r) = post(url, &[], &init).await;
    assert_eq!(status, 200, "{r}");
    let sid = sid.expect("a session id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = post(url, &[("Mcp-Session-Id", &sid)], &note).await;
    assert_eq!(status, 202);
    sid
}

/// A request of an MCP 2026-07-28 client declaring the tasks extension.
async fn modern(url: &str, id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "replica-tasks", "version": "1"},
    });
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    let name = params["name"].as_str().map(str::to_owned);
    if let Some(n) = name.as_deref() {
        headers.push(("Mcp-Name", n));
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let (status, _, r) = post(url, &headers, &body).await;
    assert_eq!(status, 200, "{r}");
    r
}

/// Waits (bounded by `within`) until `counts` holds `what`; false if it never did.
async fn until(counts: &Path, within: Duration, what: impl Fn(&Value) -> bool) -> bool {
    let started = Instant::now();
    let deadline = started + within;
    loop {
        if what(&read_counts(counts)) {
            println!("reached after {:?}", started.elapsed());
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn ran_slow(c: &Value) -> bool {
    c["tools"]["slow"].as_u64().unwrap_or(0) >= 1
}

fn cancelled_upstream(c: &Value) -> bool {
    c["cancelled"].as_u64().unwrap_or(0) >= 1
}

/// The `LlmError` inside an `isError` result.
fn llm(result: &Value) -> Value {
    let text = result["content"][0]["text"].as_str().unwrap_or("{}");
    serde_json::from_str(text).unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"]
async fn replicas_started_together_on_a_new_database_all_start() {
    let db = Database::new(&postgres(), "tasks_start");
    let config = config(&db);
    let counts: Vec<Temp> = (0..4).map(|_| Temp::new("replica-start-counts")).collect();
    // Four replicas at the same moment: each creates the job tables and the task table.
    let mut children = Vec::new();
    for c in &counts {
        let mut cmd = http_command(&config, c);
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        children.push(cmd.spawn().expect("the steadfast binary starts"));
    }
    let mut outcomes = Vec::new();
    for child in &mut children {
        let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let outcome = tokio::time::timeout(gateway::START_BOUND, async {
            let mut said = Vec::new();
            while let Ok(Some(line)) = err.next_line().await {
                if line.starts_with("steadfast: serving MCP at ") {
                    return Ok(());
                }
                said.push(line);
            }
            Err(said.join("\n"))
        })
        .await
        .unwrap_or_else(|_| Err("neither served nor exited".to_owned()));
        outcomes.push(outcome);
        tokio::spawn(async move { while let Ok(Some(_)) = err.next_line().await {} });
    }
    let failed: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "replicas that did not start: {failed:#?}"
    );
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"]
async fn a_cancel_through_another_replica_stops_the_attempt_where_it_runs() {
    let db = Database::new(&postgres(), "tasks_cancel_elsewhere");
    let config = config(&db);
    let effect = Temp::new("replica-tasks-effect");
    let _ = std::fs::remove_file(&effect.0);
    // Replica A, on the stdio front: its client creates the task and its worker runs it.
    let a_counts = Temp::new("replica-tasks-a-counts");
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        config.path().to_owned(),
        "--".to_owned(),
    ];
    argv.extend(fake_upstream_command(&["--count-file", a_counts.path()]));
    let mut a = RawProcess::spawn(&argv).expect("replica A starts");
    // Replica B, on the HTTP front, started now (a process start can take seconds on a busy
    // machine); it serves no request, so runs no worker, until the cancel.
    let b = http_replica(&config).await;
    let init = json!({"protocolVersion": "2025-11-25",
        "capabilities": {"tasks": {"list": {}, "cancel": {}}},
        "clientInfo": {"name": "replica-tasks", "version": "1"}});
    a.call(json!(0), "initialize", init, ANSWER).await.unwrap();
    a.notify("notifications/initialized", json!({}))
        .await
        .unwrap();
    let slow = json!({"name": "slow", "task": {"ttl": 60000},
        "arguments": {"seconds": TOOL_SECONDS, "steps": TOOL_SECONDS, "write": effect.path()}});
    let created = a.call(json!(1), "tools/call", slow, ANSWER).await.unwrap();
    let task = created.response["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task handle: {}", created.response))
        .to_owned();
    let sent = Instant::now();
    assert!(
        until(&a_counts.0, ANSWER, ran_slow).await,
        "A's upstream runs the call"
    );

    // Cancelled through B once A's worker holds the call.
    let sid = session(&b.url).await;
    let cancel = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel",
        "params": {"taskId": task}});
    let (_, _, r) = post(&b.url, &[("Mcp-Session-Id", &sid)], &cancel).await;
    assert_eq!(r["result"]["status"], "cancelled", "{r}");

    // A learns of it and cancels its upstream request; the tool never writes its file.
    assert!(
        until(&a_counts.0, CANCEL_REACHES, cancelled_upstream).await,
        "A's upstream got no notifications/cancelled within {CANCEL_REACHES:?}: {}",
        read_counts(&a_counts.0)
    );
    let done_by = sent + Duration::from_secs(TOOL_SECONDS) + Duration::from_millis(700);
    tokio::time::sleep_until(done_by).await;
    assert!(
        !Path::new(&effect.0).exists(),
        "the cancelled call's side effect happened"
    );
    assert_eq!(
        read_counts(&b.counts.0)["tools"]["slow"]
            .as_u64()
            .unwrap_or(0),
        0,
        "B never ran it"
    );

    // Every replica tells the same story: cancelled while in flight (the upstream was asked
    // to stop; whether it had acted, the gateway cannot know).
    let message = r["result"]["statusMessage"].as_str().unwrap_or_default();
    assert!(message.contains("in flight"), "{r}");
    let get = json!({"taskId": task});
    let on_a = a
        .call(json!(3), "tasks/get", get.clone(), ANSWER)
        .await
        .unwrap();
    assert_eq!(on_a.response["result"]["status"], "cancelled");
    assert_eq!(on_a.response["result"]["statusMessage"], message);
    let result = json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/result", "params": get});
    let (_, _, r) = post(&b.url, &[("Mcp-Session-Id", &sid)], &result).await;
    let e = llm(&r["result"]);
    assert_eq!(e["code"], "CANCELLED", "{r}");
    assert!(
        e["suggestion"]
            .as_str()
            .unwrap_or_default()
            .contains("took effect"),
        "{r}"
    );
}

#[tokio::test]
#[ignore = "needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"]
async fn a_cancel_arriving_after_the_upstream_acted_does_not_say_the_call_never_ran() {
    let db = Database::new(&postgres(), "tasks_cancel_late");
    let config = config(&db);
    let effect = Temp::new("replica-tasks-late-effect");
    let _ = std::fs::remove_file(&effect.0);
    // A 2026-07-28 client: the call becomes a task on A (whose worker runs it), and the
    // upstream acts at once, answering only later.
    let a = http_replica(&config).await;
    let b = http_replica(&config).await;
    let call = json!({"name": "slow", "arguments": {"seconds": TOOL_SECONDS, "steps": TOOL_SECONDS,
        "write": effect.path(), "write_first": true}});
    let created = modern(&a.url, 1, "tools/call", call).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + ANSWER;
    while !Path::new(&effect.0).exists() {
        assert!(Instant::now() < deadline, "the upstream never acted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Cancelled through B after the action took effect (B served nothing before: its worker
    // is not running, so A's holds the call).
    let ack = modern(&b.url, 2, "tasks/cancel", json!({"taskId": task})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    if !until(&a.counts.0, CANCEL_REACHES, cancelled_upstream).await {
        let got = modern(&b.url, 9, "tasks/get", json!({"taskId": task})).await;
        panic!(
            "A's upstream got no notifications/cancelled within {CANCEL_REACHES:?}; the task: {got}; A's counts {}; A's log: {:#?}; B's log: {:#?}",
            read_counts(&a.counts.0),
            a.log.lock().unwrap(),
            b.log.lock().unwrap()
        );
    }
    for (url, id) in [(&a.url, 3), (&b.url, 4)] {
        let got = modern(url, id, "tasks/get", json!({"taskId": task})).await;
        assert_eq!(got["result"]["status"], "cancelled", "{got}");
        let message = got["result"]["statusMessage"].as_str().unwrap_or_default();
        assert!(
            message.contains("in flight") && message.contains("may have acted"),
            "a cancel after the upstream acted must not read as if the call never ran: {got}"
        );
    }
}
