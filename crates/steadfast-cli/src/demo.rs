//! `steadfast demo`: the proxy in front of the bundled example server, driven by a real MCP
//! client over stdio pipes, with a summary of what the proxy absorbed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rmcp::model::{CallToolRequestParams, ClientConfig, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

/// The policy the demo runs: short delays so it finishes in seconds.
const DEMO_CONFIG: &str = r#"
[proxy]
health_tool = "steadfast_health"

[defaults]
retry = { max_attempts = 4, base_delay = "50ms", max_delay = "400ms", attempt_timeout = "2s" }
breaker = { failure_threshold = 3, reset_timeout = "2s" }

[tools.hang]
retry = { max_attempts = 2, attempt_timeout = "300ms" }
"#;

#[derive(Clone, Default)]
struct DemoClient {
    progress: Arc<AtomicU32>,
    list_changed: Arc<AtomicU32>,
}

impl ClientHandler for DemoClient {
    async fn on_progress(
        &self,
        _p: ProgressNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        self.progress.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_tool_list_changed(&self, _c: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(name.to_owned());
    if let Value::Object(m) = args {
        p.arguments = Some(m);
    }
    p
}

/// The calls the demo makes, in order: mostly flaky reads, with every failure kind mixed in.
fn script(n: u32) -> Vec<(&'static str, Value)> {
    let mut calls = Vec::new();
    for i in 0..n {
        calls.push(match i % 10 {
            0 | 2 | 4 | 6 => ("flaky_search", json!({"query": format!("q{i}")})),
            1 => ("rate_limited", json!({})),
            3 => ("read_file", json!({"path": "/etc/app/config.yml"})),
            5 => ("echo", json!({"i": i})),
            7 => ("strict", json!({})),
            8 => ("send_email", json!({"to": "ops@example.com"})),
            _ => ("hang", json!({})),
        });
    }
    if n >= 10 {
        calls.insert(calls.len() / 2, ("crash", json!({})));
        calls.insert(calls.len() / 2 + 1, ("echo", json!({"after": "crash"})));
        calls.push(("slow_report", json!({"seconds": 2})));
    }
    calls
}

/// Runs the demo: `calls` tool calls through the proxy, then a summary.
pub async fn run(calls: u32) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find the steadfast binary")?;
    let config_path =
        std::env::temp_dir().join(format!("steadfast-demo-{}.toml", std::process::id()));
    std::fs::write(&config_path, DEMO_CONFIG).context("cannot write the demo config")?;

    let mut cmd = tokio::process::Command::new(&exe);
    cmd.arg("proxy")
        .arg("--config")
        .arg(&config_path)
        .arg("--")
        .arg(&exe)
        .arg("example-server")
        .kill_on_drop(true);
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("cannot start the proxy")?;
    let handler = DemoClient::default();
    let client = handler
        .clone()
        .serve(transport)
        .await
        .context("MCP initialize failed")?;
    let info = client.peer_info().map(|i| i.server_info.clone());
    say!(
        "steadfast demo: a real MCP client → steadfast proxy → example server ({})",
        info.flatten().map(|s| s.name).unwrap_or_else(|| "?".into())
    );

    let script = script(calls);
    let bar = indicatif::ProgressBar::new(script.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let (mut ok, mut business, mut llm_errors, mut refused) = (0u32, 0u32, 0u32, 0u32);
    let mut examples: Vec<(String, String)> = Vec::new();
    // By tool, the codes the model was told for the calls that failed: the table shows these,
    // not the engine's class of the last attempt's failure (a crash mid-call is a lost
    // connection to the engine, and OUTCOME_UNKNOWN to the model when the tool may not be
    // replayed).
    let mut told: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (name, args) in &script {
        bar.set_message(name.to_string());
        let result = tokio::time::timeout(
            Duration::from_secs(30),
            client.call_tool(call(name, args.clone())),
        )
        .await
        .context("a call took longer than 30 s")?;
        match result {
            Ok(r) if r.is_error != Some(true) => ok += 1,
            Ok(r) => {
                let text = steadfast_mcp::tool_result_text(&r);
                let code = r
                    .structured_content
                    .as_ref()
                    .and_then(|s| s.get("code"))
                    .and_then(Value::as_str);
                if let Some(code) = code {
                    llm_errors += 1;
                    *told
                        .entry(name.to_string())
                        .or_default()
                        .entry(code.to_owned())
                        .or_default() += 1;
                } else {
                    business += 1;
                }
                if !examples.iter().any(|(n, _)| n == name) {
                    examples.push((name.to_string(), text));
                }
            }
            // A request the upstream said was wrong keeps its class through the proxy: the
            // model's host gets the JSON-RPC error (with its code) it would get direct.
            Err(e) => {
                refused += 1;
                let told_as = match &e {
                    rmcp::ServiceError::McpError(data) => format!("JSON-RPC {}", data.code.0),
                    _ => "transport error".to_owned(),
                };
                *told
                    .entry(name.to_string())
                    .or_default()
                    .entry(told_as)
                    .or_default() += 1;
                if !examples.iter().any(|(n, _)| n == name) {
                    examples.push((name.to_string(), e.to_string()));
                }
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();

    let health = client
        .call_tool(call("steadfast_health", json!({})))
        .await
        .context("health tool failed")?;
    let report = health.structured_content.unwrap_or(Value::Null);
    let tools = report["tools"].as_object().cloned().unwrap_or_default();
    let sum = |key: &str| {
        tools
            .values()
            .map(|t| t[key].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let trips: u64 = report["breakers"]
        .as_object()
        .map(|b| {
            b.values()
                .map(|s| s["times_opened"].as_u64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0);

    say!(
        "\n{} calls in {:.1}s",
        script.len(),
        started.elapsed().as_secs_f64()
    );
    let rows = [
        ("succeeded", ok as u64),
        (
            "  of which after retries (failures absorbed)",
            sum("successes_after_retry"),
        ),
        (
            "business failures passed to the model (sanitized)",
            business as u64,
        ),
        (
            "permanent failures returned as LLM errors",
            llm_errors as u64,
        ),
        (
            "requests refused as invalid (JSON-RPC errors)",
            refused as u64,
        ),
        ("retries made", sum("retries")),
        ("breaker trips", trips),
        (
            "upstream restarts",
            report["upstream"]["restarts"].as_u64().unwrap_or(0),
        ),
        (
            "progress notifications relayed",
            handler.progress.load(Ordering::SeqCst) as u64,
        ),
    ];
    for (label, n) in rows {
        say!("  {label:<52} {n:>5}");
    }
    say!("\nper tool (calls / retries / failures by the code the model was told):");
    for (name, t) in &tools {
        let failures = told
            .get(name)
            .map(|codes| serde_json::to_string(codes).unwrap_or_default())
            .unwrap_or_else(|| "{}".to_owned());
        say!(
            "  {name:<14} {:>4} / {:>4} / {failures}",
            t["calls"].as_u64().unwrap_or(0),
            t["retries"].as_u64().unwrap_or(0),
        );
    }
    say!("\nwhat the model saw for some failures:");
    for (name, text) in examples.iter().take(6) {
        let short: String = text.chars().take(160).collect();
        say!("  {name}: {short}");
    }
    let _ = std::fs::remove_file(&config_path);
    client.cancel().await.ok();
    Ok(())
}
