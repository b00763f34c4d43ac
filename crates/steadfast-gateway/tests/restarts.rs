//! Restarts, backoff and failing fast, on the test kit and tokio's paused clock (moved from
//! `steadfast-cli/tests/faults.rs` and `fail_fast.rs`, same assertions; the waits that were
//! real seconds there are virtual here): a server that dies after every `initialize` is
//! restarted on the policy's backoff, not in a hot loop; once restarts are spent a call fails
//! at once saying the server is down; a call to a down server tries one start at once, at most
//! one a second; a server that can start again is picked up by the probes.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::fake::{Fake, Step};
use support::{echo, stdio, text_of};
use tokio::time::sleep;

const FAST: &str = r#"
[proxy]
init_timeout = "2s"
reconnect_wait = "2s"
shutdown_grace = "300ms"
restart = { max_attempts = 4, base_delay = "100ms", max_delay = "1s" }
connect = { max_attempts = 3, base_delay = "100ms", max_delay = "1s" }

[defaults]
retry = { max_attempts = 3, base_delay = "50ms", max_delay = "200ms", attempt_timeout = "3s" }
"#;

#[tokio::test(start_paused = true)]
async fn an_upstream_that_dies_after_initialize_is_restarted_on_backoff() {
    // Answers initialize, then exits (fake_upstream.py's exit-after-initialize).
    let fake = Fake::new("dies").on(|m| {
        if m["method"] == "initialize" {
            Step::And(Box::new(Step::Default), Box::new(Step::Die))
        } else {
            Step::Default
        }
    });
    let mut gw = stdio(support::config(FAST), fake.upstream());
    let p = &mut gw.client;
    let a = p
        .call(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "kit", "version": "0"}}),
        )
        .await;
    assert!(
        a.response.get("error").is_some() || a.response.get("result").is_some(),
        "initialize is answered: {a:?}"
    );
    sleep(Duration::from_secs(4)).await;
    let starts = fake.starts();
    // 100 ms doubling to 1 s: about 8 starts in 4 s; a hot loop makes hundreds.
    assert!((2..=12).contains(&starts), "{starts} starts in 4 s");
    let mut list_changed = 0;
    while let Some(m) = p.read(Duration::from_millis(100)).await {
        if m["method"] == "notifications/tools/list_changed" {
            list_changed += 1;
        }
    }
    assert_eq!(
        list_changed, 0,
        "no restart of this upstream ever succeeded"
    );
}

#[tokio::test(start_paused = true)]
async fn an_upstream_that_becomes_startable_again_is_picked_up() {
    let config = "[proxy]\nhealth_tool = \"health\"\ninit_timeout = \"2s\"\nreconnect_wait = \"1s\"\n\
         shutdown_grace = \"300ms\"\nrestart = { max_attempts = 2, base_delay = \"100ms\", max_delay = \"300ms\" }\n";
    let fake = Fake::new("flag");
    let mut gw = stdio(support::config(config), fake.upstream());
    let p = &mut gw.client;
    p.initialize().await;
    // The server goes, and cannot start again for now.
    fake.refuse(Some("cannot start now"));
    fake.kill();
    sleep(Duration::from_secs(1)).await;
    let down = p.call(6, "tools/call", echo("x")).await;
    // Answered as soon as the start the call asked for fails.
    assert!(down.elapsed < Duration::from_secs(2), "{:?}", down.elapsed);
    assert!(
        text_of(&down.response).contains("is down"),
        "{}",
        down.response
    );
    // Startable again: the next probe (every 300 ms) picks it up (watched through the health
    // tool: calls to a down server would open its breaker).
    fake.refuse(None);
    let deadline = tokio::time::Instant::now() + support::ANSWER;
    let mut id = 7;
    loop {
        let h = p
            .call(id, "tools/call", json!({"name": "health", "arguments": {}}))
            .await;
        if h.response["result"]["structuredContent"]["upstream"]["connected"] == true {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{}", h.response);
        sleep(Duration::from_millis(100)).await;
        id += 1;
    }
    let a = p.call(100, "tools/call", echo("back")).await;
    assert_eq!(text_of(&a.response), "back", "{}", a.response);
}

const SPENT: &str =
    "[proxy]\nrestart = { max_attempts = 2, base_delay = \"50ms\", max_delay = \"30s\" }\n";

#[tokio::test(start_paused = true)]
async fn once_restarts_are_spent_a_call_fails_at_once_saying_the_server_is_down() {
    let fake = Fake::new("licensed");
    let mut gw = stdio(support::config(SPENT), fake.upstream());
    let p = &mut gw.client;
    p.initialize().await;
    let ok = p.call(2, "tools/call", echo("hi")).await;
    assert_eq!(ok.response["result"]["content"][0]["text"], "hi");
    // The server dies; the restart burst (2 attempts, 50 ms apart) fails: every restart is
    // refused at once.
    fake.refuse(Some("license expired"));
    fake.kill();
    sleep(Duration::from_millis(1500)).await;
    let failed = p.call(3, "tools/call", echo("hi")).await;
    // Before: the call waited reconnect_wait (10 s) for the next probe.
    assert!(
        failed.elapsed < Duration::from_millis(1500),
        "{:?}",
        failed.elapsed
    );
    let llm = &failed.response["result"]["structuredContent"];
    assert_eq!(llm["code"], "SERVICE_UNAVAILABLE", "{}", failed.response);
    assert_eq!(llm["retriable"], true);
    let message = llm["message"].as_str().unwrap();
    assert!(
        message.contains("is down") && message.contains("license expired"),
        "{message}"
    );
    let suggestion = llm["suggestion"].as_str().unwrap();
    assert!(!suggestion.contains("Retry the operation"), "{suggestion}");
    assert_eq!(llm["retryAfterMs"], 30_000, "the next probe");
}

#[tokio::test(start_paused = true)]
async fn a_call_to_a_down_upstream_tries_a_start_at_once_at_most_one_a_second() {
    let fake = Fake::new("startable");
    // Restarts spent after 2 quick attempts; the next probe 30 s away.
    let mut gw = stdio(support::config(SPENT), fake.upstream());
    let p = &mut gw.client;
    p.initialize().await;
    let ok = p.call(2, "tools/call", echo("hi")).await;
    assert_eq!(ok.response["result"]["content"][0]["text"], "hi");
    fake.refuse(Some("license expired"));
    fake.kill();
    // The restart burst fails: the upstream is down (the first start, then one restart: two
    // attempts of the restart policy, the crash counting as the first).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while fake.starts() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} starts",
            fake.starts()
        );
        sleep(Duration::from_millis(50)).await;
    }
    sleep(Duration::from_millis(1200)).await;
    let down = |a: &Value| a["result"]["structuredContent"]["code"] == "SERVICE_UNAVAILABLE";
    // Still not startable: the call tries one start and is answered as soon as it fails.
    let before = fake.starts();
    let failed = p.call(3, "tools/call", echo("hi")).await;
    assert!(down(&failed.response), "{}", failed.response);
    assert!(
        failed.elapsed < Duration::from_secs(2),
        "{:?}",
        failed.elapsed
    );
    assert_eq!(fake.starts(), before + 1, "the call tried one start");
    // A second call within the second: answered at once, no start.
    let again = p.call(4, "tools/call", echo("hi")).await;
    assert!(down(&again.response), "{}", again.response);
    assert_eq!(fake.starts(), before + 1, "at most one start a second");
    // The server becomes startable: the next call (a second later) gets it back, long before
    // the probe 30 s away. Before: "down" until that probe.
    fake.refuse(None);
    sleep(Duration::from_millis(1100)).await;
    let back = p.call(5, "tools/call", echo("hi")).await;
    assert_eq!(
        back.response["result"]["content"][0]["text"], "hi",
        "{}",
        back.response
    );
    assert!(back.elapsed < Duration::from_secs(5), "{:?}", back.elapsed);
}
