//! Several upstreams, one still on its first start: a client's first list waits for it
//! (within `list_timeout`) on both fronts, and one that joins after the list went without it is
//! announced on a modern client's listen.

#[path = "support/gateway.rs"]
mod gateway;
#[path = "support/http_client.rs"]
mod http_client;
#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::Duration;

use raw_client::{RawProcess, fake_upstream_script, read_counts};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(10);

/// A `[upstreams.NAME]` table running the fake upstream with `extra` arguments.
fn fake_table(name: &str, extra: &[&str]) -> String {
    let mut args = vec![fake_upstream_script().display().to_string()];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    format!(
        "[upstreams.{name}]\ncommand = \"python3\"\nargs = {}\n",
        serde_json::to_string(&args).unwrap()
    )
}

fn gateway(config: &str) -> (RawProcess, Temp) {
    let file = Temp::new("gateway");
    std::fs::write(&file.0, config).unwrap();
    let argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        file.path().to_owned(),
    ];
    (RawProcess::spawn(&argv).expect("the gateway starts"), file)
}

fn tool_names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a tools list: {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn seen(counts: &Temp, method: &str) -> u64 {
    read_counts(&counts.0)["methods"][method]
        .as_u64()
        .unwrap_or(0)
}

/// Bounds for a slow-starting upstream: a list may wait up to 20 s for it.
const STARTING: &str = r#"
[proxy]
init_timeout = "30s"
list_timeout = "20s"
shutdown_grace = "300ms"
"#;

/// A `[upstreams.NAME]` table whose server starts (reads its input and answers) only once
/// `flag` exists: an upstream still on its first start, for as long as the test wants.
fn fake_table_waiting(name: &str, flag: &str, extra: &[&str]) -> String {
    let script = format!(
        "while [ ! -f {flag} ]; do sleep 0.05; done; exec python3 {} {}",
        fake_upstream_script().display(),
        extra.join(" ")
    );
    format!(
        "[upstreams.{name}]\ncommand = \"sh\"\nargs = {}\n",
        serde_json::to_string(&["-c", script.as_str()]).unwrap()
    )
}

/// MCP 2026-07-28 params: `params` with the per-request envelope.
fn modern(mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    params
}

/// Lets the slow upstream start once the gateway is gathering a client's list: alpha (whose
/// first `tools/list` is the gateway's own, at connect) was asked for it.
async fn release_when_listing(alpha_counts: &Temp, flag: &Temp) {
    tokio::time::timeout(ANSWER, async {
        while seen(alpha_counts, "tools/list") < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the client's list reached alpha");
    std::fs::write(&flag.0, "go").unwrap();
}

/// A client's first list holds the tools of an upstream still starting (waited for within
/// `list_timeout`), not only the fastest upstream's: a modern client on the stdio front, whose
/// first request starts the upstreams and waited only for the first to connect.
#[tokio::test]
async fn a_first_list_waits_for_an_upstream_still_starting_on_stdio() {
    let (ca, flag) = (Temp::new("count-a"), Temp::new("beta-may-start"));
    let config = format!(
        "{STARTING}\n{}\n{}",
        fake_table("alpha", &["--count-file", ca.path()]),
        fake_table_waiting("beta", flag.path(), &[])
    );
    let (mut p, _cfg) = gateway(&config);
    p.request(json!(1), "tools/list", modern(json!({})))
        .await
        .unwrap();
    release_when_listing(&ca, &flag).await;
    let answer = p.wait_for(&json!(1), ANSWER).await.expect("answered");
    let names = tool_names(&answer.response);
    assert!(names.contains(&"alpha_echo".to_owned()), "{names:?}");
    assert!(names.contains(&"beta_echo".to_owned()), "{names:?}");
}

/// The same over the HTTP front, which starts its upstreams with itself: a modern POST's list
/// while one upstream is still starting.
#[cfg(feature = "http")]
#[tokio::test]
async fn a_first_list_waits_for_an_upstream_still_starting_over_http() {
    let (ca, flag) = (Temp::new("count-a"), Temp::new("beta-may-start"));
    let config = format!(
        "{STARTING}\n{}\n{}",
        fake_table("alpha", &["--count-file", ca.path()]),
        fake_table_waiting("beta", flag.path(), &[])
    );
    let file = Temp::new("gateway-http");
    std::fs::write(&file.0, &config).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args(["proxy", "--listen", "127.0.0.1:0", "--config", file.path()]);
    let (_front, url, _log) = gateway::listening(cmd).await;
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": modern(json!({}))});
    let post = tokio::spawn(async move {
        let headers = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ];
        http_client::exchange("POST", &url, &headers, &body.to_string()).await
    });
    release_when_listing(&ca, &flag).await;
    let reply = post.await.unwrap().expect("the list is answered");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let names = tool_names(&reply.answer());
    assert!(names.contains(&"alpha_echo".to_owned()), "{names:?}");
    assert!(names.contains(&"beta_echo".to_owned()), "{names:?}");
}

/// The next message with `method` (others are skipped), within 20 s.
async fn next_of(p: &mut RawProcess, method: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match p.read_message(left).await {
            Some(m) if m["method"] == method => return m,
            Some(_) => {}
            None => panic!("no {method}"),
        }
    }
}

/// An upstream that joins after a list went without it (its start outlasted `list_timeout`)
/// is announced on a modern client's listen: `list_changed`, stamped with the listen's id.
#[tokio::test]
async fn an_upstream_that_joins_after_the_list_is_announced_on_a_listen() {
    let flag = Temp::new("beta-may-start");
    let config = format!(
        "[proxy]\ninit_timeout = \"30s\"\nlist_timeout = \"1500ms\"\nshutdown_grace = \"300ms\"\n{}\n{}",
        fake_table("alpha", &[]),
        fake_table_waiting("beta", flag.path(), &[])
    );
    let (mut p, _cfg) = gateway(&config);
    // The first request starts the upstreams; alpha joins during it, beta does not.
    let answer = p
        .call(json!(1), "tools/list", modern(json!({})), ANSWER)
        .await
        .expect("answered within list_timeout");
    let names = tool_names(&answer.response);
    assert!(names.contains(&"alpha_echo".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("beta_")), "{names:?}");
    let listen = modern(json!({"notifications": {"toolsListChanged": true}}));
    p.request(json!("listen-1"), "subscriptions/listen", listen)
        .await
        .unwrap();
    next_of(&mut p, "notifications/subscriptions/acknowledged").await;
    std::fs::write(&flag.0, "go").unwrap();
    let announced = next_of(&mut p, "notifications/tools/list_changed").await;
    assert_eq!(
        announced["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!("listen-1"),
        "{announced}"
    );
    let listed = p
        .call(json!(2), "tools/list", modern(json!({})), ANSWER)
        .await;
    let names = tool_names(&listed.expect("answered").response);
    assert!(names.contains(&"beta_echo".to_owned()), "{names:?}");
}
