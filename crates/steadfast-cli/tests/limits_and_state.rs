//! State shared by two proxy processes through a real Redis (`STEADFAST_TEST_REDIS_URL`): a
//! breaker opened by one replica fails the other fast, and an upstream's call count is one
//! count across replicas. (Tool-call limits in one gateway are tested in the gateway's own
//! crate, `steadfast-gateway/tests/limits.rs`.)

#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::Duration;

use raw_client::{RawProcess, fake_upstream_command, read_counts};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(10);

fn proxy(config: &str, fake_args: &[&str]) -> (RawProcess, Temp) {
    let file = Temp::new("config");
    std::fs::write(&file.0, config).unwrap();
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
        "--".to_owned(),
    ];
    argv.extend(fake_upstream_command(fake_args));
    (RawProcess::spawn(&argv).unwrap(), file)
}

async fn init(p: &mut RawProcess) {
    let r = p.initialize(ANSWER).await.expect("initialize answered");
    assert!(r.pointer("/result/protocolVersion").is_some(), "{r}");
    p.notify("notifications/initialized", json!({}))
        .await
        .unwrap();
}

async fn call(p: &mut RawProcess, id: i64, name: &str) -> Value {
    p.request(
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": {"text": "x"}}),
    )
    .await
    .unwrap();
    p.wait_for(&json!(id), ANSWER)
        .await
        .expect("answered")
        .response
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

fn redis_url() -> Option<String> {
    std::env::var("STEADFAST_TEST_REDIS_URL").ok()
}

fn unique_prefix(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("steadfast-test-{tag}-{nanos}")
}

#[tokio::test]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL"]
async fn a_breaker_opened_by_one_proxy_fails_the_other_fast_through_redis() {
    let Some(url) = redis_url() else { return };
    let prefix = unique_prefix("breaker");
    let config = format!(
        "[proxy]\nhealth_tool = \"h\"\n\
         [tools.flaky]\nretry = {{ max_attempts = 1 }}\nbreaker = {{ failure_threshold = 2, reset_timeout = \"60s\" }}\n\
         [state]\nredis = \"{url}\"\nprefix = \"{prefix}\"\nop_timeout = \"2s\"\n"
    );
    let counts_b = Temp::new("b");
    // `flaky` with a huge failure count always fails, transiently.
    let (mut a, _ca) = proxy(&config, &["--flaky-failures", "1000"]);
    let (mut b, _cb) = proxy(
        &config,
        &["--count-file", counts_b.path(), "--flaky-failures", "1000"],
    );
    init(&mut a).await;
    init(&mut b).await;
    // B knows the tool (a breaker exists once a tool has been called or listed); A then sees
    // the dependency fail twice: its breaker opens, and Redis is told.
    call(&mut b, 5, "echo").await;
    for i in 0..2 {
        call(&mut a, 10 + i, "flaky").await;
    }
    // Replica B fails fast, without ever calling its upstream's flaky, within a second.
    let started = std::time::Instant::now();
    let mut r = Value::Null;
    while started.elapsed() < Duration::from_secs(1) {
        r = call(&mut b, 20, "flaky").await;
        if llm_code(&r) == "CIRCUIT_OPEN" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let b_calls = read_counts(&counts_b.0)["tools"]["flaky"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(llm_code(&r), "CIRCUIT_OPEN", "{r}");
    // At most the first probing call reached B's upstream before the open state arrived.
    assert!(
        b_calls <= 1,
        "replica B called its failing upstream {b_calls} times"
    );
}

#[tokio::test]
#[ignore = "needs Redis: set STEADFAST_TEST_REDIS_URL"]
async fn an_upstream_call_limit_is_one_count_across_proxies_through_redis() {
    let Some(url) = redis_url() else { return };
    let prefix = unique_prefix("limit");
    let config = format!(
        "[limits]\nper_upstream = {{ max = 3, window = \"1h\" }}\n[state]\nredis = \"{url}\"\nprefix = \"{prefix}\"\n\
         op_timeout = \"2s\"\n"
    );
    // (A generous op_timeout: on a loaded CI machine a Redis round trip can pass the default
    // 50 ms, and a replica then counts locally by design — not what this test is about.)
    let (mut a, _ca) = proxy(&config, &[]);
    let (mut b, _cb) = proxy(&config, &[]);
    init(&mut a).await;
    init(&mut b).await;
    assert_eq!(
        call(&mut a, 1, "echo").await["result"]["content"][0]["text"],
        "x"
    );
    assert_eq!(
        call(&mut a, 2, "echo").await["result"]["content"][0]["text"],
        "x"
    );
    assert_eq!(
        call(&mut b, 3, "echo").await["result"]["content"][0]["text"],
        "x"
    );
    assert_eq!(llm_code(&call(&mut b, 4, "echo").await), "TOOL_CALL_LIMIT");
    assert_eq!(llm_code(&call(&mut a, 5, "echo").await), "TOOL_CALL_LIMIT");
}
