//! Gateway replicas behind a real load balancer: three `steadfast proxy --listen` processes
//! behind HAProxy (round-robin, sticky on `Mcp-Session-Id` only), sharing breakers through
//! Redis and durable tasks through PostgreSQL, as docs/replicas.md tells operators to run them.
//!
//! Needs `STEADFAST_TEST_HAPROXY` (`scripts/haproxy.sh --install` prints it),
//! `STEADFAST_TEST_POSTGRES_URL` and `STEADFAST_TEST_REDIS_URL`; `.ci/run` sets all three.
#![cfg(feature = "http")]

#[path = "support/database.rs"]
mod database;
#[path = "support/http_client.rs"]
mod http_client;
#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::process::Stdio;
use std::time::{Duration, Instant};

use database::Database;
use http_client::{exchange, free_port};
use raw_client::{fake_upstream_command, read_counts};
use serde_json::{Value, json};
use temp::Temp;
use tokio::io::AsyncBufReadExt;

const ANSWER: Duration = Duration::from_secs(10);

/// The environment this test needs, or `None` (it is `#[ignore]`d without it).
struct Env {
    haproxy: String,
    postgres: String,
    redis: String,
}

fn env() -> Env {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    Env {
        haproxy: var("STEADFAST_TEST_HAPROXY"),
        postgres: var("STEADFAST_TEST_POSTGRES_URL"),
        redis: var("STEADFAST_TEST_REDIS_URL"),
    }
}

/// One gateway process over its own fake upstream (whose call counts tell who served a call).
struct Replica {
    child: tokio::process::Child,
    port: u16,
    counts: Temp,
    _config: Temp,
}

async fn replica(config: &str) -> Replica {
    let file = Temp::new("replica-config");
    std::fs::write(&file.0, config).unwrap();
    let counts = Temp::new("replica-counts");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args(["proxy", "--listen", "127.0.0.1:0", "--config"])
        .arg(&file.0)
        .arg("--")
        .args(fake_upstream_command(&[
            "--count-file",
            counts.path(),
            "--flaky-failures",
            "1000",
        ]))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(ANSWER, async {
        while let Ok(Some(line)) = err.next_line().await {
            if let Some(u) = line.strip_prefix("steadfast: serving MCP at ") {
                return u.to_owned();
            }
        }
        panic!("a replica never said where it listens");
    })
    .await
    .unwrap();
    // Keep reading, so a chatty replica never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = err.next_line().await {} });
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    Replica {
        child,
        port,
        counts,
        _config: file,
    }
}

/// HAProxy in front of the replicas: round-robin; a request carrying `Mcp-Session-Id` goes to
/// the replica that issued it while that replica is up. `X-Served-By` names the replica.
struct Balancer {
    _child: tokio::process::Child,
    url: String,
    _config: Temp,
}

async fn balancer(haproxy: &str, replicas: &[Replica]) -> Balancer {
    let port = free_port();
    let mut cfg = format!(
        "global\n  maxconn 512\n\
         defaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n  timeout server 30s\n\
         frontend mcp\n  bind 127.0.0.1:{port}\n  default_backend gateways\n\
         backend gateways\n  balance roundrobin\n  option httpchk GET /healthz\n\
         \x20 stick-table type string len 64 size 10k expire 30m\n\
         \x20 stick on req.hdr(mcp-session-id)\n\
         \x20 stick store-response res.hdr(mcp-session-id)\n\
         \x20 http-response set-header X-Served-By %s\n"
    );
    for (i, r) in replicas.iter().enumerate() {
        cfg.push_str(&format!(
            "  server g{i} 127.0.0.1:{} check inter 100ms fall 1 rise 1\n",
            r.port
        ));
    }
    let file = Temp::new("haproxy-cfg");
    std::fs::write(&file.0, cfg).unwrap();
    let child = tokio::process::Command::new(haproxy)
        .args(["-db", "-f"])
        .arg(&file.0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("haproxy starts");
    let url = format!("http://127.0.0.1:{port}/mcp");
    // Ready once it answers through to a replica.
    let deadline = Instant::now() + ANSWER;
    loop {
        let probe = exchange("GET", &url.replace("/mcp", "/healthz"), &[], "").await;
        if probe.is_ok_and(|r| r.status == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "HAProxy never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Balancer {
        _child: child,
        url,
        _config: file,
    }
}

/// Three replicas on `config` behind HAProxy.
async fn cluster(env: &Env, config: &str) -> ([Replica; 3], Balancer) {
    let replicas = [
        replica(config).await,
        replica(config).await,
        replica(config).await,
    ];
    let b = balancer(&env.haproxy, &replicas).await;
    (replicas, b)
}

/// A JSON-RPC request through the balancer: (HTTP status, the replica that served it, session
/// id header, the answer).
async fn post(
    b: &Balancer,
    session: Option<&str>,
    body: &Value,
) -> (u16, String, Option<String>, Value) {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
    ];
    if let Some(s) = session {
        headers.push(("Mcp-Session-Id", s));
    }
    let r = exchange("POST", &b.url, &headers, &body.to_string())
        .await
        .expect("the balancer answers");
    let served_by = r.header("x-served-by").unwrap_or_default().to_owned();
    let sid = r.header("mcp-session-id").map(str::to_owned);
    (r.status, served_by, sid, r.answer())
}

/// A new handshake-era session: (its id, the replica it lives on).
async fn initialize(b: &Balancer) -> (String, String) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, served_by, sid, answer) = post(b, None, &init).await;
    assert_eq!(status, 200, "{answer}");
    let sid = sid.expect("a session id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, again, _, _) = post(b, Some(&sid), &note).await;
    assert_eq!(status, 202);
    assert_eq!(
        again, served_by,
        "a session's requests stick to its replica"
    );
    (sid, served_by)
}

fn call(id: i64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": {"text": "hi"}}})
}

fn llm_code(r: &Value) -> String {
    let text = r
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or("{}");
    serde_json::from_str::<Value>(text).unwrap_or_default()["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn config(env: &Env, db: &Database, prefix: &str) -> String {
    format!(
        "[tools.flaky]\nretry = {{ max_attempts = 1 }}\n\
         breaker = {{ failure_threshold = 2, reset_timeout = \"60s\" }}\n\
         [tools.echo]\ndurable = true\n\
         [tasks]\nstore = \"{}\"\npoll_interval = \"100ms\"\n\
         [state]\nredis = \"{}\"\nprefix = \"{prefix}\"\nop_timeout = \"2s\"\n",
        db.url, env.redis
    )
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("steadfast-test-{tag}-{nanos}")
}

/// Sessions until one lives on a replica other than `not`.
async fn session_elsewhere(b: &Balancer, not: &[&str]) -> (String, String) {
    for _ in 0..12 {
        let (sid, on) = initialize(b).await;
        if !not.contains(&on.as_str()) {
            return (sid, on);
        }
    }
    panic!("round-robin never chose a replica other than {not:?}");
}

#[tokio::test]
#[ignore = "needs HAProxy, PostgreSQL and Redis: set STEADFAST_TEST_HAPROXY (scripts/haproxy.sh --install), STEADFAST_TEST_POSTGRES_URL, STEADFAST_TEST_REDIS_URL"]
async fn a_breaker_and_a_durable_task_are_shared_by_every_replica() {
    let env = env();
    let db = Database::new(&env.postgres, "replicas_shared");
    let config = config(&env, &db, &unique("replicas"));
    let (replicas, b) = cluster(&env, &config).await;
    let (a, on_a) = initialize(&b).await;
    let (c, on_c) = session_elsewhere(&b, &[&on_a]).await;

    // Two failures through replica A open `flaky`'s breaker for every replica.
    for id in 10..12 {
        let (_, served, _, r) = post(&b, Some(&a), &call(id, "flaky")).await;
        assert_eq!(served, on_a);
        assert_ne!(llm_code(&r), "", "a failure the model can read: {r}");
    }
    let c_index: usize = on_c[1..].parse().unwrap();
    let started = Instant::now();
    let mut r = Value::Null;
    while started.elapsed() < Duration::from_secs(2) {
        (_, _, _, r) = post(&b, Some(&c), &call(20, "flaky")).await;
        if llm_code(&r) == "CIRCUIT_OPEN" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(llm_code(&r), "CIRCUIT_OPEN", "{r}");
    let c_calls = read_counts(&replicas[c_index].counts.0)["tools"]["flaky"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        c_calls <= 1,
        "replica {on_c} called the failing tool {c_calls} times"
    );

    // A durable call made through replica A is read through replica C (one PostgreSQL store).
    let task_call = json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "made on A"}, "task": {"ttl": 60000}}});
    let (status, _, _, created) = post(&b, Some(&a), &task_call).await;
    assert_eq!(status, 200, "{created}");
    let task = created
        .pointer("/result/task/taskId")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("a task handle: {created}"))
        .to_owned();
    let result =
        json!({"jsonrpc": "2.0", "id": 31, "method": "tasks/result", "params": {"taskId": task}});
    let (_, served, _, r) = post(&b, Some(&c), &result).await;
    assert_eq!(served, on_c);
    assert_eq!(
        r.pointer("/result/content/0/text"),
        Some(&json!("made on A")),
        "{r}"
    );
    drop(b);
}

#[tokio::test]
#[ignore = "needs HAProxy, PostgreSQL and Redis: set STEADFAST_TEST_HAPROXY (scripts/haproxy.sh --install), STEADFAST_TEST_POSTGRES_URL, STEADFAST_TEST_REDIS_URL"]
async fn a_dead_replicas_sessions_get_404_and_start_again_elsewhere() {
    let env = env();
    let db = Database::new(&env.postgres, "replicas_dead");
    let config = config(&env, &db, &unique("replicas-dead"));
    let (mut replicas, b) = cluster(&env, &config).await;
    let (doomed, on_doomed) = initialize(&b).await;
    let (other, on_other) = session_elsewhere(&b, &[&on_doomed]).await;
    for id in 2..5 {
        let (_, served, _, r) = post(&b, Some(&doomed), &call(id, "echo")).await;
        assert_eq!(served, on_doomed, "{r}");
    }
    let i: usize = on_doomed[1..].parse().unwrap();
    let echoed = |r: &Replica| {
        read_counts(&r.counts.0)["tools"]["echo"]
            .as_u64()
            .unwrap_or(0)
    };
    assert_eq!(
        echoed(&replicas[i]),
        3,
        "every call of the session went to {on_doomed}"
    );

    replicas[i].child.start_kill().unwrap();
    let _ = replicas[i].child.wait().await;
    // Once HAProxy's health check sees it gone (100 ms checks), the session's requests reach
    // a replica that never knew it: 404, which tells a client to initialize again.
    let started = Instant::now();
    let (mut status, mut served) = (0, String::new());
    while started.elapsed() < Duration::from_secs(5) {
        (status, served, _, _) = post(&b, Some(&doomed), &call(9, "echo")).await;
        if status == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 404, "a dead replica's session is unknown elsewhere");
    assert_ne!(served, on_doomed);
    let (again, on_again) = initialize(&b).await;
    assert_ne!(on_again, on_doomed);
    let (status, _, _, r) = post(&b, Some(&again), &call(10, "echo")).await;
    assert_eq!(
        (status, r.pointer("/result/content/0/text")),
        (200, Some(&json!("hi"))),
        "{r}"
    );
    // A session on a live replica never noticed.
    let (status, served, _, r) = post(&b, Some(&other), &call(11, "echo")).await;
    assert_eq!((status, served.as_str()), (200, on_other.as_str()), "{r}");
    drop(b);
}

#[tokio::test]
#[ignore = "needs HAProxy, PostgreSQL and Redis: set STEADFAST_TEST_HAPROXY (scripts/haproxy.sh --install), STEADFAST_TEST_POSTGRES_URL, STEADFAST_TEST_REDIS_URL"]
async fn a_durable_call_on_a_replica_killed_mid_call_is_finished_by_another() {
    let env = env();
    let db = Database::new(&env.postgres, "replicas_durable");
    let config = format!(
        "{}[tools.slow]\ndurable = true\n",
        config(&env, &db, &unique("replicas-durable")).replace(
            "poll_interval = \"100ms\"\n",
            "poll_interval = \"100ms\"\nlease = \"1s\"\n"
        )
    );
    let (mut replicas, b) = cluster(&env, &config).await;
    let (a, _) = initialize(&b).await;
    let slow = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 2, "steps": 2}, "task": {"ttl": 60000}}});
    let (status, _, _, created) = post(&b, Some(&a), &slow).await;
    assert_eq!(status, 200, "{created}");
    let task = created
        .pointer("/result/task/taskId")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("a task handle: {created}"))
        .to_owned();
    // Whichever replica's worker claimed the call is killed while its upstream runs it.
    let slow_calls = |r: &Replica| {
        read_counts(&r.counts.0)["tools"]["slow"]
            .as_u64()
            .unwrap_or(0)
    };
    let started = Instant::now();
    let running = loop {
        if let Some(i) = replicas.iter().position(|r| slow_calls(r) > 0) {
            break i;
        }
        assert!(
            started.elapsed() < ANSWER,
            "no replica ran the durable call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    replicas[running].child.start_kill().unwrap();
    let _ = replicas[running].child.wait().await;
    // A session on a live replica awaits the result; another worker takes the call over once
    // the dead one's lease runs out, and runs it again (`slow` is read-only: replay is safe).
    let (watcher, on) = session_elsewhere(&b, &[&format!("g{running}")]).await;
    let result =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": task}});
    let (status, served, _, r) = post(&b, Some(&watcher), &result).await;
    assert_eq!((status, served.as_str()), (200, on.as_str()), "{r}");
    assert_eq!(
        r.pointer("/result/content/0/text"),
        Some(&json!("slept 2.0s")),
        "{r}"
    );
    let reran: u64 = replicas
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != running)
        .map(|(_, r)| slow_calls(r))
        .sum();
    assert_eq!(reran, 1, "exactly one live replica ran the call again");
    drop(b);
}

/// A request of an MCP 2026-07-28 client: the per-request envelope (declaring the tasks
/// extension), the routing headers, no session. Through the balancer: (HTTP status, the
/// replica that served it, whether a session id came back, the answer).
async fn modern_post(
    b: &Balancer,
    id: i64,
    method: &str,
    params: Value,
) -> (u16, String, bool, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "replicas-modern", "version": "1"},
    });
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if let Some(n) = name.as_deref() {
        headers.push(("Mcp-Name", n));
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let r = exchange("POST", &b.url, &headers, &body.to_string())
        .await
        .expect("the balancer answers");
    let served_by = r.header("x-served-by").unwrap_or_default().to_owned();
    let session = r.header("mcp-session-id").is_some();
    (r.status, served_by, session, r.answer())
}

#[tokio::test]
#[ignore = "needs HAProxy, PostgreSQL and Redis: set STEADFAST_TEST_HAPROXY (scripts/haproxy.sh --install), STEADFAST_TEST_POSTGRES_URL, STEADFAST_TEST_REDIS_URL"]
async fn modern_clients_are_served_by_any_replica_without_stickiness() {
    let env = env();
    let db = Database::new(&env.postgres, "replicas_modern");
    let config = config(&env, &db, &unique("replicas-modern"));
    let (replicas, b) = cluster(&env, &config).await;

    // No session: round-robin spreads one client's requests over every replica.
    let mut served = std::collections::BTreeSet::new();
    for id in 1..=6 {
        let (status, by, session, r) = modern_post(&b, id, "server/discover", json!({})).await;
        assert_eq!(status, 200, "{r}");
        assert!(!session, "a modern client gets no session");
        let ext = r.pointer("/result/capabilities/extensions/io.modelcontextprotocol~1tasks");
        assert!(
            ext.is_some(),
            "durable tools: the tasks extension is declared: {r}"
        );
        served.insert(by);
    }
    assert_eq!(
        served.len(),
        3,
        "every replica served the client: {served:?}"
    );

    // Failing calls, wherever they land, open `flaky`'s breaker for every replica.
    let flaky = json!({"name": "flaky", "arguments": {"text": "hi"}});
    let started = Instant::now();
    loop {
        let (_, _, _, r) = modern_post(&b, 10, "tools/call", flaky.clone()).await;
        if llm_code(&r) == "CIRCUIT_OPEN" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the breaker never opened: {r}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut open_on = std::collections::BTreeSet::new();
    for id in 20..23 {
        let (_, by, _, r) = modern_post(&b, id, "tools/call", flaky.clone()).await;
        assert_eq!(llm_code(&r), "CIRCUIT_OPEN", "replica {by}: {r}");
        open_on.insert(by);
    }
    assert_eq!(open_on.len(), 3, "open on every replica: {open_on:?}");
    let calls: Vec<u64> = replicas
        .iter()
        .map(|r| {
            read_counts(&r.counts.0)["tools"]["flaky"]
                .as_u64()
                .unwrap_or(0)
        })
        .collect();
    assert!(
        calls.iter().sum::<u64>() <= 4,
        "the open breaker kept calls away: {calls:?}"
    );

    // A durable call through the tasks extension: created on one replica, read and cancelled
    // through the others (one PostgreSQL store).
    let (status, made_on, _, created) = modern_post(
        &b,
        30,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "made modern"}}),
    )
    .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let mut read_on = std::collections::BTreeSet::new();
    let started = Instant::now();
    let done = loop {
        let (status, by, _, r) = modern_post(&b, 31, "tasks/get", json!({"taskId": task})).await;
        assert_eq!(status, 200, "{r}");
        read_on.insert(by);
        if r["result"]["status"] == "completed" {
            break r;
        }
        assert!(started.elapsed() < ANSWER, "the task never completed: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "made modern",
        "{done}"
    );
    // Round-robin: two more reads land on the two other replicas at least once between them.
    for id in 32..34 {
        let (_, by, _, r) = modern_post(&b, id, "tasks/get", json!({"taskId": task})).await;
        assert_eq!(r["result"]["status"], "completed", "{r}");
        read_on.insert(by);
    }
    assert!(
        read_on.iter().any(|r| *r != made_on),
        "read through another replica than {made_on}: {read_on:?}"
    );
    let (status, cancelled_on, _, ack) =
        modern_post(&b, 40, "tasks/cancel", json!({"taskId": task})).await;
    assert_eq!(
        (status, &ack["result"]["resultType"]),
        (200, &json!("complete")),
        "{ack}"
    );
    let (_, _, _, after) = modern_post(&b, 41, "tasks/get", json!({"taskId": task})).await;
    assert_eq!(
        after["result"]["status"], "completed",
        "an ended task keeps its status: {after}"
    );
    let _ = cancelled_on;
    drop(b);
}

#[tokio::test]
#[ignore = "needs HAProxy, PostgreSQL and Redis: set STEADFAST_TEST_HAPROXY (scripts/haproxy.sh --install), STEADFAST_TEST_POSTGRES_URL, STEADFAST_TEST_REDIS_URL"]
async fn a_replica_killed_under_modern_load_answers_each_request_once_or_fails_it_clearly() {
    let env = env();
    let db = Database::new(&env.postgres, "replicas_modern_kill");
    let config = config(&env, &db, &unique("replicas-modern-kill"));
    let (mut replicas, b) = cluster(&env, &config).await;
    let b = std::sync::Arc::new(b);
    let slow = json!({"name": "slow", "arguments": {"seconds": 0.5, "steps": 1}});
    let mut load = tokio::task::JoinSet::new();
    for id in 0..24 {
        let (b, slow) = (b.clone(), slow.clone());
        load.spawn(async move {
            let body = {
                let mut params = slow;
                params["_meta"] = json!({
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                });
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
            };
            let headers = [
                ("Content-Type", "application/json"),
                ("Accept", "application/json"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "slow"),
            ];
            exchange("POST", &b.url, &headers, &body.to_string())
                .await
                .map(|r| (r.status, r.answer()))
        });
    }
    // Killed while it runs some of the calls.
    let victim = 1;
    let slow_calls = |r: &Replica| {
        read_counts(&r.counts.0)["tools"]["slow"]
            .as_u64()
            .unwrap_or(0)
    };
    let started = Instant::now();
    while slow_calls(&replicas[victim]) == 0 {
        assert!(started.elapsed() < ANSWER, "the victim never ran a call");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    replicas[victim].child.start_kill().unwrap();
    let _ = replicas[victim].child.wait().await;
    let (mut answered, mut failed) = (0u64, 0u64);
    while let Some(outcome) = load.join_next().await {
        match outcome.unwrap() {
            Ok((200, r)) => {
                assert_eq!(r["result"]["content"][0]["text"], "slept 0.5s", "{r}");
                answered += 1;
            }
            // The balancer's answer for a backend that died mid-request: retriable.
            Ok((status, r)) => {
                assert!((502..=504).contains(&status), "{status}: {r}");
                failed += 1;
            }
            // The connection closed without an answer: the client retries.
            Err(_) => failed += 1,
        }
    }
    assert!(
        answered >= 12,
        "most calls answered: {answered} answered, {failed} failed"
    );
    println!("modern load with a replica killed: {answered} answered, {failed} failed");
    // Exactly once: every answered call ran once; a failed one ran at most once.
    let ran: u64 = replicas.iter().map(slow_calls).sum();
    assert!(
        (answered..=answered + failed).contains(&ran),
        "{ran} runs for {answered} answers and {failed} failures"
    );
    // Once HAProxy's check has marked the replica down, every request is served by the others.
    let mut streak = 0;
    let started = Instant::now();
    while streak < 6 {
        assert!(
            started.elapsed() < ANSWER,
            "the dead replica was never taken out"
        );
        let lookup = json!({"name": "lookup", "arguments": {"key": "after"}});
        let (status, by, _, r) = modern_post(&b, 99, "tools/call", lookup).await;
        if status == 200 && r["result"]["content"][0]["text"] == "record after" {
            assert_ne!(by, format!("g{victim}"));
            streak += 1;
        } else {
            streak = 0;
        }
    }
}
