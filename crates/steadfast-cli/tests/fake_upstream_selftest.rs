//! The fault-injection fake upstream (`tests/support/fake_upstream.py`), driven directly with
//! the raw client and no proxy in between, so a proxy test that uses a mode knows the mode
//! does what it says. Real processes on real time: every wait is bounded (seconds), and no
//! assertion is on a duration except "answered within".

#[path = "support/raw_client.rs"]
mod raw_client;

use std::path::PathBuf;
use std::time::Duration;

use raw_client::{RawProcess, alive, fake_upstream_command, http_messages, http_post, read_counts};
use serde_json::{Value, json};

/// Generous: the CI machine is shared, and Python starts slowly under load.
const ANSWER: Duration = Duration::from_secs(10);
const QUIET: Duration = Duration::from_millis(300);

fn fake(args: &[&str]) -> RawProcess {
    RawProcess::spawn(&fake_upstream_command(args)).expect("python3 runs the fake upstream")
}

/// A fresh path in the temp dir, removed on drop.
struct TempPath(PathBuf);

impl TempPath {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "steadfast-fake-{tag}-{}-{}",
            std::process::id(),
            fastrand_suffix()
        ));
        Self(p)
    }
    fn arg(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn call_params(name: &str, arguments: Value, token: Option<Value>) -> Value {
    let mut p = json!({"name": name, "arguments": arguments});
    if let Some(t) = token {
        p["_meta"] = json!({"progressToken": t});
    }
    p
}

#[tokio::test]
async fn normal_mode_lists_annotated_tools_answers_once_and_counts_calls() {
    let counts = TempPath::new("counts");
    let mut p = fake(&["--count-file", counts.arg()]);
    let init = p.initialize(ANSWER).await.expect("initialize answered");
    assert_eq!(init["result"]["serverInfo"]["name"], "fake-upstream");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");

    let list = p
        .call(json!(1), "tools/list", json!({}), ANSWER)
        .await
        .unwrap();
    let tools = list.response["result"]["tools"].as_array().unwrap().clone();
    let by_name = |n: &str| tools.iter().find(|t| t["name"] == n).cloned().unwrap();
    assert_eq!(by_name("lookup")["annotations"]["readOnlyHint"], true);
    assert_eq!(by_name("charge")["annotations"]["idempotentHint"], false);

    p.request(
        json!(2),
        "tools/call",
        call_params("echo", json!({"text": "hi"}), None),
    )
    .await
    .unwrap();
    let answer = p.assert_answered_once(&json!(2), ANSWER, QUIET).await;
    assert_eq!(answer.response["result"]["content"][0]["text"], "hi");

    // flaky fails twice with a transient-looking isError, then succeeds
    let mut texts = Vec::new();
    for id in 3..6 {
        let a = p
            .call(
                json!(id),
                "tools/call",
                call_params("flaky", json!({}), None),
                ANSWER,
            )
            .await;
        let r = a.expect("flaky answered").response["result"].clone();
        texts.push((
            r["isError"].as_bool(),
            r["content"][0]["text"].as_str().map(str::to_owned),
        ));
    }
    assert_eq!(texts[0].0, Some(true));
    assert!(texts[1].1.as_deref().unwrap().contains("503"));
    assert_eq!(texts[2], (Some(false), Some("flaky succeeded".to_owned())));

    let c = read_counts(&counts.0);
    assert_eq!(c["starts"], 1);
    assert_eq!(c["tools"]["echo"], 1);
    assert_eq!(c["tools"]["flaky"], 3);
    assert_eq!(c["methods"]["tools/call"], 4);
}

#[tokio::test]
async fn slow_reports_progress_and_a_cancel_stops_hang_without_an_answer() {
    let counts = TempPath::new("cancel");
    let mut p = fake(&["--count-file", counts.arg()]);
    p.initialize(ANSWER).await.unwrap();
    let params = call_params(
        "slow",
        json!({"seconds": 0.2, "steps": 3}),
        Some(json!("tok")),
    );
    let a = p
        .call(json!(1), "tools/call", params, ANSWER)
        .await
        .unwrap();
    let progress: Vec<f64> = a
        .before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, vec![1.0, 2.0, 3.0]);

    p.request(json!(2), "tools/call", call_params("hang", json!({}), None))
        .await
        .unwrap();
    p.notify("notifications/cancelled", json!({"requestId": 2}))
        .await
        .unwrap();
    // A later request is answered; the cancelled one never is.
    let ping = p.call(json!(3), "ping", json!({}), ANSWER).await.unwrap();
    assert!(
        ping.before.iter().all(|m| m["id"] != 2),
        "{:?}",
        ping.before
    );
    assert!(p.read_message(QUIET).await.is_none());
    assert_eq!(read_counts(&counts.0)["cancelled"], 1);
}

#[tokio::test]
async fn progress_burst_writes_every_notification_before_the_result() {
    let mut p = fake(&["--mode", "progress-burst", "--burst", "50"]);
    p.initialize(ANSWER).await.unwrap();
    let params = call_params("echo", json!({"text": "x"}), Some(json!(7)));
    let a = p
        .call(json!(1), "tools/call", params, ANSWER)
        .await
        .unwrap();
    assert_eq!(a.before.len(), 50);
    assert!(a.before.iter().all(|m| m["params"]["progressToken"] == 7));
    assert_eq!(a.before[49]["params"]["progress"], 50);
}

#[tokio::test]
async fn oversized_reply_and_log_flood_sizes_are_configurable() {
    let mut p = fake(&["--mode", "oversized-reply", "--reply-mib", "1.5"]);
    p.initialize(ANSWER).await.unwrap();
    p.request(
        json!(1),
        "tools/call",
        call_params("echo", json!({"text": "x"}), None),
    )
    .await
    .unwrap();
    let line = p.read_line(ANSWER).await.expect("the oversized line");
    assert!(line.len() > 1_572_864, "{} bytes", line.len());
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["id"], 1);

    let mut p = fake(&[
        "--mode",
        "log-flood",
        "--flood",
        "2500",
        "--flood-bytes",
        "10",
    ]);
    p.initialize(ANSWER).await.unwrap();
    let a = p
        .call(
            json!(1),
            "tools/call",
            call_params("echo", json!({"text": "x"}), None),
            ANSWER,
        )
        .await
        .unwrap();
    assert_eq!(a.before.len(), 2500);
    assert!(
        a.before
            .iter()
            .all(|m| m["method"] == "notifications/message")
    );
}

#[tokio::test]
async fn handshake_faults_never_answer_and_end_on_eof() {
    for mode in ["never-answers-initialize", "garbage-then-sleep"] {
        let mut p = fake(&["--mode", mode]);
        if mode == "garbage-then-sleep" {
            let first = p.read_line(ANSWER).await.expect("garbage first");
            assert!(serde_json::from_str::<Value>(&first).is_err(), "{first}");
        }
        p.request(json!(0), "initialize", json!({})).await.unwrap();
        assert!(
            p.wait_for(&json!(0), Duration::from_millis(500))
                .await
                .is_none(),
            "{mode}"
        );
        p.close_stdin();
        assert_eq!(
            p.wait_exit(ANSWER).await,
            Some(Some(0)),
            "{mode} ends on EOF"
        );
    }
}

#[tokio::test]
async fn exit_after_initialize_answers_then_exits_and_counts_starts() {
    let counts = TempPath::new("starts");
    for _ in 0..2 {
        let mut p = fake(&[
            "--mode",
            "exit-after-initialize",
            "--count-file",
            counts.arg(),
        ]);
        // (not `initialize()`: its `initialized` notification may meet a closed pipe)
        let init = p.call(json!(0), "initialize", json!({}), ANSWER).await;
        assert!(
            init.expect("initialize is answered").response["result"]["capabilities"].is_object()
        );
        assert_eq!(p.wait_exit(ANSWER).await, Some(Some(0)));
    }
    assert_eq!(read_counts(&counts.0)["starts"], 2);
}

#[tokio::test]
async fn ignores_eof_survives_eof_and_sigterm_until_killed() {
    let mut p = fake(&["--mode", "ignores-eof"]);
    p.initialize(ANSWER).await.unwrap();
    let pid = p.pid().unwrap();
    p.close_stdin();
    assert!(p.wait_exit(Duration::from_millis(500)).await.is_none());
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    assert!(p.wait_exit(Duration::from_millis(500)).await.is_none());
    assert!(alive(pid));
    assert!(p.rss_kib().is_some_and(|kib| kib > 0));
    p.child.start_kill().unwrap();
    assert!(p.wait_exit(ANSWER).await.is_some());
}

#[tokio::test]
async fn tasks_mode_follows_the_2025_11_25_task_flow() {
    let mut p = fake(&["--mode", "tasks", "--task-seconds", "0.3"]);
    let init = p.initialize(ANSWER).await.unwrap();
    assert!(init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object());
    let list = p
        .call(json!(1), "tools/list", json!({}), ANSWER)
        .await
        .unwrap();
    let research = list.response["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "research")
        .cloned()
        .unwrap();
    assert_eq!(research["execution"]["taskSupport"], "required");

    // Without task augmentation: -32601, as the spec requires for "required".
    let plain = p
        .call(
            json!(2),
            "tools/call",
            call_params("research", json!({"topic": "t"}), None),
            ANSWER,
        )
        .await
        .unwrap();
    assert_eq!(plain.response["error"]["code"], -32601);

    let mut params = call_params("research", json!({"topic": "t"}), None);
    params["task"] = json!({"ttl": 60000});
    let created = p
        .call(json!(3), "tools/call", params, ANSWER)
        .await
        .unwrap();
    let task = &created.response["result"]["task"];
    assert_eq!(task["status"], "working");
    let id = task["taskId"].clone();

    let listed = p
        .call(json!(4), "tasks/list", json!({}), ANSWER)
        .await
        .unwrap();
    assert_eq!(listed.response["result"]["tasks"][0]["taskId"], id);
    let result = p
        .call(json!(5), "tasks/result", json!({"taskId": id}), ANSWER)
        .await
        .unwrap();
    assert_eq!(
        result.response["result"]["content"][0]["text"],
        "findings on t"
    );
    assert_eq!(
        result.response["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id
    );
    let got = p
        .call(json!(6), "tasks/get", json!({"taskId": id}), ANSWER)
        .await
        .unwrap();
    assert_eq!(got.response["result"]["status"], "completed");
    let unknown = p
        .call(json!(7), "tasks/get", json!({"taskId": "nope"}), ANSWER)
        .await
        .unwrap();
    assert_eq!(unknown.response["error"]["code"], -32602);
}

/// Starts the fake over HTTP and returns it with its URL (its first stdout line).
async fn http_fake(args: &[&str]) -> (RawProcess, String) {
    let mut all = vec!["--http", "0"];
    all.extend_from_slice(args);
    let mut p = fake(&all);
    let url = p.read_line(ANSWER).await.expect("the URL line");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (p, url)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

async fn http_initialize(url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}});
    let (status, headers, _) = http_post(url, None, &init, ANSWER).await.unwrap();
    assert_eq!(status, 200);
    header(&headers, "mcp-session-id")
        .expect("a session id")
        .to_owned()
}

#[tokio::test]
async fn http_session_loss_answers_the_old_session_400_or_404() {
    for (status, code) in [(400u16, -32000), (404, -32600)] {
        let s = status.to_string();
        let (_p, url) = http_fake(&[
            "--mode",
            "session-loss",
            "--session-loss-after",
            "2",
            "--session-loss-status",
            &s,
        ])
        .await;
        let sid = http_initialize(&url).await;
        let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        let (ok, _, body) = http_post(&url, Some(&sid), &ping, ANSWER).await.unwrap();
        assert_eq!(ok, 200);
        assert_eq!(http_messages(&body)[0]["result"], json!({}));
        // Request 3: the "restart" has happened; the old session is gone.
        let (gone, _, body) = http_post(&url, Some(&sid), &ping, ANSWER).await.unwrap();
        assert_eq!(gone, status);
        assert_eq!(http_messages(&body)[0]["error"]["code"], code);
        // A new session works.
        let fresh = http_initialize(&url).await;
        assert_ne!(fresh, sid);
        let (ok, _, _) = http_post(&url, Some(&fresh), &ping, ANSWER).await.unwrap();
        assert_eq!(ok, 200);
    }
}

#[tokio::test]
async fn http_progress_burst_streams_as_sse_and_accept_and_never_answer_hangs() {
    let (_p, url) = http_fake(&["--mode", "progress-burst", "--burst", "5"]).await;
    let sid = http_initialize(&url).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": call_params("echo", json!({"text": "x"}), Some(json!("p")))});
    let (status, headers, body) = http_post(&url, Some(&sid), &call, ANSWER).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "content-type"), Some("text/event-stream"));
    let messages = http_messages(&body);
    assert_eq!(messages.len(), 6);
    assert_eq!(messages[5]["id"], 1);

    let (_q, url) = http_fake(&["--mode", "accept-and-never-answer"]).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}});
    let err = http_post(&url, None, &init, Duration::from_millis(700)).await;
    assert!(err.is_err(), "{err:?}");
}
