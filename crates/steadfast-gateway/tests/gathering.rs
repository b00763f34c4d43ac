//! Several upstreams behind one endpoint, on the test kit (moved from
//! `steadfast-cli/tests/gateway_multi.rs`, same assertions): tools listed and called under
//! their upstream's name, a name nobody owns refused naming the upstreams.

mod support;

use serde_json::{Value, json};
use steadfast_gateway::{NamedUpstream, UpstreamSet};
use support::fake::Fake;
use support::stdio;

const FAST: &str = r#"
[proxy]
init_timeout = "5s"
list_timeout = "1500ms"
reconnect_wait = "2s"
shutdown_grace = "300ms"
restart = { max_attempts = 50, base_delay = "100ms", max_delay = "300ms" }
connect = { max_attempts = 50, base_delay = "100ms", max_delay = "300ms" }

[defaults]
retry = { max_attempts = 3, base_delay = "50ms", max_delay = "200ms", attempt_timeout = "3s" }
"#;

/// The fakes, each under its own name.
fn named(fakes: &[&Fake], names: &[&str]) -> UpstreamSet {
    UpstreamSet::Named(
        fakes
            .iter()
            .zip(names)
            .map(|(f, n)| NamedUpstream {
                name: (*n).to_owned(),
                spec: f.upstream(),
                budget: None,
            })
            .collect(),
    )
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

fn echoed(response: &Value, text: &str) -> bool {
    response["result"]["isError"] != json!(true) && response["result"].to_string().contains(text)
}

fn echo_to(tool: &str, text: &str) -> Value {
    json!({"name": tool, "arguments": {"text": text}})
}

#[tokio::test(start_paused = true)]
async fn two_upstreams_are_listed_and_called_under_their_names() {
    let (alpha, beta) = (Fake::new("alpha"), Fake::new("beta"));
    let mut gw = stdio(
        support::config(FAST),
        named(&[&alpha, &beta], &["alpha", "beta"]),
    );
    let p = &mut gw.client;
    let init = p.initialize().await;
    assert_eq!(init["result"]["serverInfo"]["name"], "steadfast-gateway");
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"],
        json!(true)
    );
    let names = tool_names(&p.call(1, "tools/list", json!({})).await.response);
    assert!(names.contains(&"alpha_echo".to_owned()), "{names:?}");
    assert!(names.contains(&"beta_echo".to_owned()), "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("alpha_") || n.starts_with("beta_"))
    );
    assert_eq!(
        names.iter().filter(|n| n.starts_with("alpha_")).count(),
        names.iter().filter(|n| n.starts_with("beta_")).count()
    );

    let a = p
        .call(2, "tools/call", echo_to("alpha_echo", "to-alpha"))
        .await;
    assert!(echoed(&a.response, "to-alpha"), "{a:?}");
    let a = p
        .call(3, "tools/call", echo_to("beta_echo", "to-beta"))
        .await;
    assert!(echoed(&a.response, "to-beta"), "{a:?}");
    let a = p.call(4, "tools/call", echo_to("beta_echo", "again")).await;
    assert!(echoed(&a.response, "again"), "{a:?}");
    assert_eq!(alpha.calls("echo"), 1);
    assert_eq!(beta.calls("echo"), 2);

    // A name no upstream owns is refused as invalid params, naming the upstreams.
    let unknown = p.call(5, "tools/call", echo_to("gamma_echo", "x")).await;
    assert_eq!(unknown.response["error"]["code"], json!(-32602));
    let message = unknown.response["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("alpha") && message.contains("beta"),
        "{message}"
    );
}
