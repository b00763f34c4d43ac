//! Durable tool calls over MCP tasks, on real processes (raw client → `steadfast proxy` → the
//! fake upstream): a task outlives the gateway that created it — killed with SIGKILL during a
//! retry's backoff, or while a call was in flight — and a restarted gateway on the same store
//! finishes it, without ever sending a non-idempotent call twice. Bounds are short and every
//! wait has one.

#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::Duration;

use raw_client::{RawProcess, fake_upstream_command, read_counts};
use serde_json::{Value, json};
use temp::Temp;
use tokio::time::Instant;

const ANSWER: Duration = Duration::from_secs(10);

/// A store, a config and a counter file that outlive each gateway process.
struct Setup {
    config: Temp,
    counts: Temp,
    db: Temp,
}

impl Setup {
    fn new(extra: &str) -> Self {
        let db = Temp::new("tasks-db");
        let config = Temp::new("tasks-config");
        let counts = Temp::new("tasks-counts");
        let text = format!(
            r#"
[proxy]
init_timeout = "5s"
reconnect_wait = "3s"
shutdown_grace = "300ms"

[tasks]
store = "sqlite://{}"
poll_interval = "100ms"
lease = "1s"

[defaults]
retry = {{ max_attempts = 3, base_delay = "50ms", max_delay = "200ms", attempt_timeout = "30s" }}
{extra}
"#,
            db.path()
        );
        std::fs::write(&config.0, text).expect("write config");
        Self { config, counts, db }
    }

    /// A gateway process over the fake upstream (which counts into the shared file).
    fn gateway(&self, fake_args: &[&str]) -> RawProcess {
        let mut argv = vec![
            env!("CARGO_BIN_EXE_steadfast").to_owned(),
            "proxy".to_owned(),
            "--config".to_owned(),
            self.config.path().to_owned(),
            "--".to_owned(),
        ];
        let mut args = vec!["--count-file", self.counts.path()];
        args.extend_from_slice(fake_args);
        argv.extend(fake_upstream_command(&args));
        RawProcess::spawn(&argv).expect("the gateway starts")
    }

    fn counts(&self) -> Value {
        read_counts(&self.counts.0)
    }

    /// Waits (bounded) until the upstream has seen `n` calls of `tool`.
    async fn wait_calls(&self, tool: &str, n: u64) {
        let deadline = Instant::now() + ANSWER;
        while self.counts()["tools"][tool].as_u64().unwrap_or(0) < n {
            assert!(
                Instant::now() < deadline,
                "the upstream saw {} instead of {n} calls of {tool}",
                self.counts()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.db.path()));
        }
    }
}

/// The handshake: a client that knows tasks (2025-11-25, declaring `tasks`), or an older one.
async fn init(p: &mut RawProcess, tasks: bool) -> Value {
    let (caps, version) = if tasks {
        (json!({"tasks": {"list": {}, "cancel": {}}}), "2025-11-25")
    } else {
        (json!({}), "2025-06-18")
    };
    let params = json!({
        "protocolVersion": version,
        "capabilities": caps,
        "clientInfo": {"name": "durable-test", "version": "0"}
    });
    let a = p
        .call(json!(0), "initialize", params, ANSWER)
        .await
        .expect("initialize is answered");
    p.notify("notifications/initialized", json!({}))
        .await
        .unwrap();
    a.response
}

async fn request(p: &mut RawProcess, id: i64, method: &str, params: Value) -> Value {
    p.call(json!(id), method, params, ANSWER)
        .await
        .unwrap_or_else(|| panic!("{method} answered within {ANSWER:?}"))
        .response
}

/// Polls `tasks/get` until `done(task)` (bounded); the last task seen.
async fn poll(p: &mut RawProcess, task: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut id = 1000;
    loop {
        id += 1;
        let r = request(p, id, "tasks/get", json!({"taskId": task})).await;
        let t = r["result"].clone();
        if done(&t) {
            return t;
        }
        assert!(Instant::now() < deadline, "task never got there: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn status(t: &Value) -> &str {
    t["status"].as_str().unwrap_or_default()
}

fn text_of(result: &Value) -> String {
    result
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

async fn start_task(p: &mut RawProcess, id: i64, tool: &str, args: Value) -> String {
    let r = request(
        p,
        id,
        "tools/call",
        json!({"name": tool, "arguments": args, "task": {"ttl": 60000}}),
    )
    .await;
    assert_eq!(
        r.pointer("/result/task/status"),
        Some(&json!("working")),
        "{r}"
    );
    r.pointer("/result/task/taskId")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("a task handle: {r}"))
        .to_owned()
}

async fn kill(p: &mut RawProcess) {
    p.child.start_kill().expect("SIGKILL");
    assert!(p.wait_exit(ANSWER).await.is_some(), "the gateway died");
}

#[tokio::test]
async fn a_durable_call_survives_a_gateway_killed_during_its_retry_backoff() {
    let s = Setup::new(
        r#"
[tools.flaky]
durable = true
retry = { max_attempts = 3, base_delay = "3s", max_delay = "3s", jitter = "none" }
"#,
    );
    let fake = ["--flaky-failures", "1", "--flaky-across-restarts"];
    let mut g1 = s.gateway(&fake);
    let init1 = init(&mut g1, true).await;
    assert!(
        init1
            .pointer("/result/capabilities/tasks/requests/tools/call")
            .is_some(),
        "{init1}"
    );
    let list = request(&mut g1, 1, "tools/list", json!({})).await;
    let flaky = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "flaky")
        .unwrap()
        .clone();
    assert_eq!(flaky["execution"]["taskSupport"], "optional", "{flaky}");
    let task = start_task(&mut g1, 2, "flaky", json!({})).await;
    // The first attempt fails (a transient isError) and its retry is stored 3 s out.
    let t = poll(&mut g1, &task, |t| {
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("retry scheduled"))
    })
    .await;
    assert_eq!(status(&t), "working");
    assert_eq!(s.counts()["tools"]["flaky"], 1);
    kill(&mut g1).await;

    // A new gateway on the same store, and a new client session.
    let mut g2 = s.gateway(&fake);
    init(&mut g2, true).await;
    let t = poll(&mut g2, &task, |t| status(t) != "working").await;
    assert_eq!(status(&t), "completed", "{t}");
    let r = request(&mut g2, 3, "tasks/result", json!({"taskId": task})).await;
    assert_eq!(text_of(&r["result"]), "flaky succeeded", "{r}");
    assert_eq!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        json!(task)
    );
    let listed = request(&mut g2, 4, "tasks/list", json!({})).await;
    assert!(
        listed["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["taskId"] == json!(task) && t["status"] == "completed"),
        "{listed}"
    );
    // One failed attempt before the kill, one successful after: nothing else was sent.
    let counts = s.counts();
    assert_eq!(counts["tools"]["flaky"], 2, "{counts}");
    assert_eq!(counts["starts"], 2, "{counts}");
}

#[tokio::test]
async fn a_non_idempotent_call_in_flight_when_the_gateway_dies_is_never_resent() {
    let s = Setup::new(
        r#"
[tools.slow]
durable = true
retry_ambiguous = false
"#,
    );
    let mut g1 = s.gateway(&[]);
    init(&mut g1, true).await;
    request(&mut g1, 1, "tools/list", json!({})).await;
    let task = start_task(&mut g1, 2, "slow", json!({"seconds": 30, "steps": 2})).await;
    s.wait_calls("slow", 1).await;
    kill(&mut g1).await;

    let mut g2 = s.gateway(&[]);
    init(&mut g2, true).await;
    // Once the dead worker's lease (1 s) runs out, the job is looked at again: it was sent
    // and never answered, and the tool may not be replayed.
    let t = poll(&mut g2, &task, |t| status(t) != "working").await;
    assert_eq!(status(&t), "failed", "{t}");
    let r = request(&mut g2, 3, "tasks/result", json!({"taskId": task})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let llm = &r["result"]["structuredContent"];
    assert!(
        llm["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("The outcome of this call is unknown"),
        "{llm}"
    );
    assert_eq!(llm["tool"], "slow");
    assert_eq!(s.counts()["tools"]["slow"], 1, "{}", s.counts());
}

#[tokio::test]
async fn a_client_without_task_support_gets_a_live_answer() {
    let s = Setup::new(
        r#"
[tools.flaky]
durable = true
"#,
    );
    let mut g = s.gateway(&["--flaky-failures", "1"]);
    let init_r = init(&mut g, false).await;
    assert!(
        init_r.pointer("/result/capabilities/tasks").is_none(),
        "{init_r}"
    );
    let list = request(&mut g, 1, "tools/list", json!({})).await;
    assert!(
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("execution").is_none()),
        "{list}"
    );
    let r = request(
        &mut g,
        2,
        "tools/call",
        json!({"name": "flaky", "arguments": {}}),
    )
    .await;
    assert_eq!(text_of(&r["result"]), "flaky succeeded", "{r}");
    assert!(r["result"].get("task").is_none());
    assert_eq!(s.counts()["tools"]["flaky"], 2);
}

#[tokio::test]
async fn a_task_client_calling_without_a_task_gets_a_live_answer() {
    let s = Setup::new("[tools.flaky]\ndurable = true\n");
    let mut g = s.gateway(&["--flaky-failures", "0"]);
    init(&mut g, true).await;
    request(&mut g, 1, "tools/list", json!({})).await;
    let r = request(
        &mut g,
        2,
        "tools/call",
        json!({"name": "flaky", "arguments": {}}),
    )
    .await;
    assert_eq!(text_of(&r["result"]), "flaky succeeded", "{r}");
}

#[tokio::test]
async fn cancelling_a_durable_task_cancels_its_upstream_request() {
    let s = Setup::new("[tools.slow]\ndurable = true\n");
    let mut g = s.gateway(&[]);
    init(&mut g, true).await;
    request(&mut g, 1, "tools/list", json!({})).await;
    let task = start_task(&mut g, 2, "slow", json!({"seconds": 30, "steps": 2})).await;
    s.wait_calls("slow", 1).await;
    let r = request(&mut g, 3, "tasks/cancel", json!({"taskId": task})).await;
    assert_eq!(r["result"]["status"], "cancelled", "{r}");
    let deadline = Instant::now() + ANSWER;
    while s.counts()["cancelled"].as_u64().unwrap_or(0) < 1 {
        assert!(
            Instant::now() < deadline,
            "no cancel upstream: {}",
            s.counts()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = request(&mut g, 4, "tasks/result", json!({"taskId": task})).await;
    assert_eq!(r["result"]["structuredContent"]["code"], "CANCELLED", "{r}");
    let r = request(&mut g, 5, "tasks/cancel", json!({"taskId": task})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = request(&mut g, 6, "tasks/get", json!({"taskId": "no-such-task"})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(s.counts()["tools"]["slow"], 1);

    // `notifications/cancelled` for the request that created a task cancels the task too.
    let second = start_task(&mut g, 7, "slow", json!({"seconds": 30, "steps": 2})).await;
    s.wait_calls("slow", 2).await;
    g.notify("notifications/cancelled", json!({"requestId": 7}))
        .await
        .unwrap();
    let t = poll(&mut g, &second, |t| status(t) != "working").await;
    assert_eq!(status(&t), "cancelled", "{t}");
    let deadline = Instant::now() + ANSWER;
    while s.counts()["cancelled"].as_u64().unwrap_or(0) < 2 {
        assert!(
            Instant::now() < deadline,
            "no cancel upstream: {}",
            s.counts()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
#[ignore = "needs the Python MCP SDK 1.30.0 (STEADFAST_TEST_MCP_PYTHON): run scripts/tasks-sdk.sh"]
async fn the_python_sdk_task_client_finishes_a_task_across_a_gateway_restart() {
    let Ok(python) = std::env::var("STEADFAST_TEST_MCP_PYTHON") else {
        panic!("set STEADFAST_TEST_MCP_PYTHON to a python with mcp==1.30.0 (scripts/tasks-sdk.sh)");
    };
    let s = Setup::new(
        r#"
[tools.flaky]
durable = true
retry = { max_attempts = 3, base_delay = "3s", max_delay = "3s", jitter = "none" }
"#,
    );
    let pid = Temp::new("tasks-fake-pid");
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/tasks_sdk_client.py");
    let run = tokio::process::Command::new(python)
        .arg(script)
        .args([
            env!("CARGO_BIN_EXE_steadfast"),
            s.config.path(),
            raw_client::fake_upstream_script().to_str().unwrap(),
            s.counts.path(),
            pid.path(),
        ])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("the SDK client finished within 90 s")
        .expect("the SDK client ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("JSON");
    assert_eq!(seen["task_support"], "optional", "{seen}");
    assert_eq!(seen["created_status"], "working", "{seen}");
    assert_eq!(seen["status_before_kill"], "working", "{seen}");
    assert_eq!(seen["final_status"], "completed", "{seen}");
    assert_eq!(seen["text"], "flaky succeeded", "{seen}");
    assert_eq!(seen["is_error"], false, "{seen}");
    assert!(
        seen["listed"]
            .as_array()
            .is_some_and(|l| l.contains(&seen["task_id"])),
        "{seen}"
    );
    let counts = s.counts();
    assert_eq!(
        (counts["tools"]["flaky"].as_u64(), counts["starts"].as_u64()),
        (Some(2), Some(2)),
        "{counts}"
    );
}

#[tokio::test]
async fn an_upstream_task_is_relayed_not_wrapped_twice() {
    // Every tool durable, and the upstream runs `research` as a task itself.
    let s = Setup::new("[tools.\"*\"]\ndurable = true\n");
    let mut g = s.gateway(&["--mode", "tasks", "--task-seconds", "0.3"]);
    init(&mut g, true).await;
    let list = request(&mut g, 1, "tools/list", json!({})).await;
    let support = |name: &str| {
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["execution"]["taskSupport"].clone())
    };
    assert_eq!(support("research"), Some(json!("required")), "{list}");
    assert_eq!(support("echo"), Some(json!("optional")), "{list}");
    // The upstream's task comes back as the upstream wrote it, and is followed through it.
    let theirs = start_task(&mut g, 2, "research", json!({"topic": "tides"})).await;
    let t = request(&mut g, 3, "tasks/get", json!({"taskId": theirs})).await;
    assert_eq!(t["result"]["statusMessage"], "researching tides", "{t}");
    let r = request(&mut g, 4, "tasks/result", json!({"taskId": theirs})).await;
    assert_eq!(text_of(&r["result"]), "findings on tides", "{r}");
    // A durable tool of the same session gets the gateway's own task.
    let ours = start_task(&mut g, 5, "echo", json!({"text": "hi"})).await;
    let r = request(&mut g, 6, "tasks/result", json!({"taskId": ours})).await;
    assert_eq!(text_of(&r["result"]), "hi", "{r}");
    let counts = s.counts();
    assert_eq!(counts["methods"]["tasks/result"], 1, "{counts}");
    assert_eq!(counts["tools"]["research"], 1, "{counts}");
}

#[tokio::test]
async fn a_durable_call_that_gives_up_ends_with_the_live_calls_llm_error() {
    let s = Setup::new(
        r#"
[tools.flaky]
durable = true
retry = { max_attempts = 2, base_delay = "50ms", max_delay = "50ms" }
"#,
    );
    let mut g = s.gateway(&["--flaky-failures", "100"]);
    init(&mut g, true).await;
    request(&mut g, 1, "tools/list", json!({})).await;
    let live = request(
        &mut g,
        2,
        "tools/call",
        json!({"name": "flaky", "arguments": {}}),
    )
    .await;
    assert_eq!(live["result"]["isError"], true, "{live}");
    let task = start_task(&mut g, 3, "flaky", json!({})).await;
    let t = poll(&mut g, &task, |t| status(t) != "working").await;
    assert_eq!(status(&t), "failed", "{t}");
    let durable = request(&mut g, 4, "tasks/result", json!({"taskId": task})).await;
    assert_eq!(
        durable["result"]["structuredContent"], live["result"]["structuredContent"],
        "the same LlmError, live and durable"
    );
    assert_eq!(durable["result"]["content"], live["result"]["content"]);
    assert_eq!(live["result"]["structuredContent"]["attemptsMade"], 2);
    assert_eq!(s.counts()["tools"]["flaky"], 4, "two attempts each");
}

/// Issue 19, item 4: a tool that may not be replayed, failing with an `isError` that reads as
/// transient, is not repeated, and the model is told so — live and durable alike: the outcome
/// is unknown, not retriable, check before calling again (before: `SERVICE_UNAVAILABLE`,
/// `retriable: true`, "Retry the operation").
#[tokio::test]
async fn a_transient_failure_that_is_not_replayed_is_outcome_unknown_live_and_durable() {
    let s = Setup::new(
        r#"
[tools.flaky]
durable = true
retry_ambiguous = false
breaker = false
retry = { max_attempts = 3, base_delay = "50ms", max_delay = "50ms" }
"#,
    );
    let mut g = s.gateway(&["--flaky-failures", "100"]);
    init(&mut g, true).await;
    request(&mut g, 1, "tools/list", json!({})).await;
    let live = request(
        &mut g,
        2,
        "tools/call",
        json!({"name": "flaky", "arguments": {}}),
    )
    .await;
    let e = &live["result"]["structuredContent"];
    assert_eq!(live["result"]["isError"], true, "{live}");
    assert_eq!(e["code"], "OUTCOME_UNKNOWN", "{live}");
    assert_eq!(e["retriable"], false, "{live}");
    assert_eq!(e["attemptsMade"], 1, "{live}");
    let suggestion = e["suggestion"].as_str().unwrap_or_default();
    assert!(suggestion.contains("before calling the tool again"), "{e}");
    assert!(!suggestion.contains("Retry"), "{e}");
    assert_eq!(s.counts()["tools"]["flaky"], 1, "not repeated");

    let task = start_task(&mut g, 3, "flaky", json!({})).await;
    let t = poll(&mut g, &task, |t| status(t) != "working").await;
    assert_eq!(status(&t), "failed", "{t}");
    let durable = request(&mut g, 4, "tasks/result", json!({"taskId": task})).await;
    assert_eq!(
        durable["result"]["structuredContent"], live["result"]["structuredContent"],
        "the same LlmError, live and durable"
    );
    assert_eq!(s.counts()["tools"]["flaky"], 2, "one attempt each");
}

/// Issue 19, item 5: a durable task's status message names the code the live call would
/// give (`SERVICE_UNAVAILABLE` for a 503), not the job store's class (`SERVER_ERROR`).
#[tokio::test]
async fn a_retry_scheduled_status_names_the_live_calls_code() {
    let s = Setup::new(
        r#"
[tools.flaky]
durable = true
retry = { max_attempts = 3, base_delay = "3s", max_delay = "3s", jitter = "none" }
"#,
    );
    let mut g = s.gateway(&["--flaky-failures", "1"]);
    init(&mut g, true).await;
    request(&mut g, 1, "tools/list", json!({})).await;
    let task = start_task(&mut g, 2, "flaky", json!({})).await;
    let t = poll(&mut g, &task, |t| {
        t["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("retry scheduled"))
    })
    .await;
    assert_eq!(
        t["statusMessage"], "attempt 1 of 3 failed (SERVICE_UNAVAILABLE); retry scheduled",
        "{t}"
    );
}

/// `_meta` of a 2026-07-28 request; `tasks` declares the tasks extension.
fn modern_meta(tasks: bool) -> Value {
    let extensions = if tasks {
        json!({"io.modelcontextprotocol/tasks": {}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
    })
}

// The tasks extension of MCP 2026-07-28 on the same store: a call to a durable tool from a
// client that declares the extension is answered with a task unasked (`resultType: "task"`),
// `tasks/get` carries the result inline once it is there, `tasks/update` and `tasks/cancel`
// acknowledge, and a request that does not declare the extension is refused with -32021.
#[tokio::test]
async fn the_tasks_extension_of_2026_07_28_runs_durable_calls_from_the_same_store() {
    let s = Setup::new("[tools.echo]\ndurable = true\n[tools.slow]\ndurable = true\n");
    let mut g = s.gateway(&[]);
    // A modern connection throughout: the era is locked by its first request (issue 36, 13b).
    request(
        &mut g,
        1,
        "tools/list",
        json!({"_meta": modern_meta(false)}),
    )
    .await;
    let call = |id: i64, tool: &str, args: Value, tasks: bool| {
        (
            id,
            tool.to_owned(),
            json!({"name": tool, "arguments": args, "_meta": modern_meta(tasks)}),
        )
    };
    let (id, _, params) = call(2, "echo", json!({"text": "later"}), true);
    let r = request(&mut g, id, "tools/call", params).await;
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    assert!(
        r["result"]["ttlMs"].is_i64() && r["result"]["pollIntervalMs"].is_u64(),
        "{r}"
    );
    let task = r["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let get = json!({"taskId": task, "_meta": modern_meta(true)});
    let deadline = Instant::now() + ANSWER;
    let done = loop {
        let r = request(&mut g, 3, "tasks/get", get.clone()).await;
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
        if r["result"]["status"] != "working" {
            break r;
        }
        assert!(Instant::now() < deadline, "the task never ended: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(text_of(&done["result"]["result"]), "later", "{done}");

    // Without the extension declared on the request: refused, naming what is missing.
    let bare = json!({"taskId": task, "_meta": modern_meta(false)});
    let r = request(&mut g, 4, "tasks/get", bare).await;
    assert_eq!(r["error"]["code"], -32021, "{r}");
    assert!(
        r.pointer("/error/data/requiredCapabilities/extensions/io.modelcontextprotocol~1tasks")
            .is_some(),
        "{r}"
    );
    // The same durable tool, called without the extension: a live answer.
    let (id, _, params) = call(5, "echo", json!({"text": "now"}), false);
    let r = request(&mut g, id, "tools/call", params).await;
    assert_eq!(text_of(&r["result"]), "now", "{r}");

    // Cancelling a working task: an acknowledgement, and the task ends cancelled.
    let (id, _, params) = call(6, "slow", json!({"seconds": 30, "steps": 2}), true);
    let r = request(&mut g, id, "tools/call", params).await;
    let slow = r["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    s.wait_calls("slow", 1).await;
    let update =
        json!({"taskId": slow, "inputResponses": {"nope": {}}, "_meta": modern_meta(true)});
    let r = request(&mut g, 7, "tasks/update", update).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
    let cancel = json!({"taskId": slow, "_meta": modern_meta(true)});
    let r = request(&mut g, 8, "tasks/cancel", cancel).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
    let r = request(
        &mut g,
        9,
        "tasks/get",
        json!({"taskId": slow, "_meta": modern_meta(true)}),
    )
    .await;
    assert_eq!(r["result"]["status"], "cancelled", "{r}");
    let r = request(
        &mut g,
        10,
        "tasks/get",
        json!({"taskId": "nope", "_meta": modern_meta(true)}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // `tasks/update` is not a method of the 2025-11-25 tasks (asked on a handshake-era
    // connection: the modern one refuses a request without the envelope).
    drop(g);
    let mut g = s.gateway(&[]);
    init(&mut g, false).await;
    let r = request(
        &mut g,
        11,
        "tasks/update",
        json!({"taskId": slow, "inputResponses": {}}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
}
