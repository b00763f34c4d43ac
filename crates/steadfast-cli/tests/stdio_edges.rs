//! The stdio proxy at its edges, on real processes: what a client sent before closing stdin is
//! answered (within `drain_timeout`), a client's line is held only up to `max_request_size`,
//! and memory comes back after a spike (a huge client line, a large reply).

#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use raw_client::{RawProcess, fake_upstream_command, read_counts, rss_kib};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(10);

/// `steadfast proxy [--config CONFIG] -- python3 fake.py ARGS`.
fn proxy_argv(config: Option<(&Temp, &str)>, fake_args: &[&str]) -> Vec<String> {
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
    ];
    if let Some((file, text)) = config {
        std::fs::write(&file.0, text).expect("write config");
        argv.extend(["--config".to_owned(), file.path().to_owned()]);
    }
    argv.push("--".to_owned());
    argv.extend(fake_upstream_command(fake_args));
    argv
}

fn request(id: i64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn initialize(id: i64) -> String {
    request(
        id,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "t", "version": "1"}}),
    )
}

/// A message cut short for an assertion's text (replies here can be tens of MiB).
fn brief(v: &Value) -> String {
    v.to_string().chars().take(300).collect()
}

fn text_of(response: &Value) -> &str {
    response
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[tokio::test]
async fn requests_piped_before_stdin_ends_are_answered() {
    // printf '<initialize>\n<initialized>\n<call>\n' | steadfast proxy -- <server>
    let input = format!(
        "{}\n{}\n{}\n",
        initialize(1),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        request(
            2,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "piped"}})
        )
    );
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"))
        .arg("proxy")
        .arg("--")
        .args(fake_upstream_command(&[]))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).await.unwrap();
    } // stdin closed: EOF right after the three lines
    let started = Instant::now();
    let out = tokio::time::timeout(ANSWER, child.wait_with_output())
        .await
        .expect("the proxy exits within the bound")
        .unwrap();
    let messages: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let answer = |id: i64| messages.iter().find(|m| m["id"] == id).cloned();
    // Before: nothing at all (the proxy cancelled both at stdin's end and exited).
    let init = answer(1).unwrap_or_else(|| panic!("initialize answered: {messages:?}"));
    assert!(init["result"]["protocolVersion"].is_string(), "{init}");
    let call = answer(2).unwrap_or_else(|| panic!("tools/call answered: {messages:?}"));
    assert_eq!(text_of(&call), "piped", "{call}");
    assert_eq!(out.status.code(), Some(0));
    assert!(started.elapsed() < ANSWER, "{:?}", started.elapsed());
}

#[tokio::test]
async fn at_stdin_end_a_call_still_running_after_drain_timeout_is_cancelled() {
    let config = Temp::new("config");
    let counts = Temp::new("counts");
    let argv = proxy_argv(
        Some((
            &config,
            "[proxy]\ndrain_timeout = \"1s\"\nshutdown_grace = \"300ms\"\n",
        )),
        &["--count-file", counts.path()],
    );
    let mut p = RawProcess::spawn(&argv).unwrap();
    p.initialize(ANSWER).await.expect("initialize is answered");
    p.notify("notifications/initialized", json!({}))
        .await
        .unwrap();
    let echo = json!({"name": "echo", "arguments": {"text": "quick"}});
    p.send_raw(&request(
        2,
        "tools/call",
        json!({"name": "hang", "arguments": {}}),
    ))
    .await
    .unwrap();
    p.send_raw(&request(3, "tools/call", echo)).await.unwrap();
    p.close_stdin();
    let started = Instant::now();
    // What can be answered is, while the hung call holds the drain open.
    let quick = p.wait_for(&json!(3), ANSWER).await.expect("answered");
    assert_eq!(text_of(&quick.response), "quick");
    let exit = p.wait_exit(ANSWER).await;
    let waited = started.elapsed();
    assert_eq!(exit, Some(Some(0)));
    // The drain is bounded by drain_timeout (1 s), then the call is cancelled upstream.
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(5)).contains(&waited),
        "{waited:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let c = read_counts(&counts.0);
        if c["methods"]["notifications/cancelled"] == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the hung call was not cancelled upstream: {c}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The highest RSS of `pid` seen until [`Peak::stop`], sampled every few milliseconds.
struct Peak {
    max: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Peak {
    fn sample(pid: u32) -> Self {
        let max = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (m, d) = (max.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            while !d.load(Ordering::Relaxed) {
                if let Some(kib) = rss_kib(pid) {
                    m.fetch_max(kib, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Self {
            max,
            done,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> u64 {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.max.load(Ordering::Relaxed)
    }
}

/// RSS of `pid` once it is below `target` KiB, or the last reading after `within`.
async fn rss_settles(pid: u32, target: u64, within: Duration) -> u64 {
    let deadline = Instant::now() + within;
    loop {
        let now = rss_kib(pid).unwrap();
        if now < target || Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_huge_client_line_is_refused_at_max_request_size_and_memory_comes_back() {
    const MIB: u64 = 1024;
    // The default settings: client lines are capped at 16 MiB, upstream replies at 128 MiB.
    let mut p = RawProcess::spawn(&proxy_argv(None, &[])).unwrap();
    p.initialize(ANSWER).await.expect("initialize is answered");
    p.notify("notifications/initialized", json!({}))
        .await
        .unwrap();
    let echo = json!({"name": "echo", "arguments": {"text": "warm"}});
    let warm = p.call(json!(2), "tools/call", echo, ANSWER).await.unwrap();
    assert_eq!(text_of(&warm.response), "warm");
    let pid = p.pid().unwrap();
    let base = rss_kib(pid).unwrap();

    // 64 MB of garbage on one line.
    let peak = Peak::sample(pid);
    p.send_raw(&"g".repeat(64 << 20)).await.unwrap();
    // A request beyond the cap whose id can be read is answered, naming the cap.
    let big = request(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "y".repeat(20 << 20)}}),
    );
    p.send_raw(&big).await.unwrap();
    let refused = p.wait_for(&json!(3), ANSWER).await.expect("answered");
    let spike = peak.stop();
    assert_eq!(
        refused.response["error"]["code"],
        -32004,
        "{}",
        brief(&refused.response)
    );
    let message = refused.response["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("max_request_size") && message.contains("16777216"),
        "{message}"
    );
    // Still serving; memory back to within ~20 MB of the baseline.
    let echo = json!({"name": "echo", "arguments": {"text": "after"}});
    let after = p.call(json!(4), "tools/call", echo, ANSWER).await.unwrap();
    assert_eq!(text_of(&after.response), "after");
    let settled = rss_settles(pid, base + 20 * MIB, Duration::from_secs(5)).await;
    eprintln!("client line: RSS {base} KiB → spike {spike} KiB → after {settled} KiB");
    assert!(
        settled < base + 20 * MIB,
        "RSS {base} KiB → {spike} KiB → {settled} KiB after the client's spike"
    );

    // A large reply (allowed up to max_message_size) is relayed, and its memory comes back.
    let base = rss_kib(pid).unwrap();
    let peak = Peak::sample(pid);
    let reply = p
        .call(
            json!(5),
            "tools/call",
            json!({"name": "big", "arguments": {"mib": 40}}),
            Duration::from_secs(30),
        )
        .await
        .expect("answered");
    let spike = peak.stop();
    assert_eq!(
        text_of(&reply.response).len(),
        40 << 20,
        "{}",
        brief(&reply.response)
    );
    drop(reply);
    let settled = rss_settles(pid, base + 20 * MIB, Duration::from_secs(5)).await;
    eprintln!("40 MiB reply: RSS {base} KiB → spike {spike} KiB → after {settled} KiB");
    assert!(spike > base + 40 * MIB, "the reply was held: {spike} KiB");
    assert!(
        settled < base + 20 * MIB,
        "RSS {base} KiB → {spike} KiB → {settled} KiB after a large reply"
    );
}
