//! The ready-made dashboard and alert rules (`ops/`) ask only for what `/metrics` exports: a real
//! gateway (HTTP front, three fake upstreams, one of them crash-looping, a durable tool) is
//! driven until every kind of metric exists — a call retried until the retry budget refuses, a
//! breaker opened by failures and then refusing, a call recovered by a retry, a durable call run
//! as a job, an upstream restart — and
//! then every metric name, and every `label="value"` matcher, of every alert expression and
//! every dashboard query must be in the scrape. With `STEADFAST_TEST_PROMTOOL`, `promtool` also
//! lints the scrape (`check metrics`: names, units, help text), checks the rules and runs their
//! unit tests (`ops/prometheus/alerts_test.yml`).
#![cfg(feature = "http")]

#[path = "support/gateway.rs"]
mod gateway;
#[path = "support/http_client.rs"]
mod http_client;
#[path = "support/temp.rs"]
mod temp;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use http_client::exchange;
use serde_json::{Value, json};
use temp::Temp;
use tokio::time::Instant;

const BOUND: Duration = Duration::from_secs(30);
const VERSION: &str = "2025-11-25";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One series of a scrape: its labels.
type Labels = BTreeMap<String, String>;

/// A scrape, by metric name (histograms' `_bucket`, `_sum`, `_count` as exported).
#[derive(Debug, Default)]
struct Scrape(BTreeMap<String, Vec<(Labels, f64)>>);

impl Scrape {
    fn parse(text: &str) -> Self {
        let mut out: BTreeMap<String, Vec<(Labels, f64)>> = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (series, value) = line.rsplit_once(' ').expect("`series value`");
            let value: f64 = value.parse().unwrap_or(f64::NAN);
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => {
                    let body = rest.strip_suffix('}').expect("labels end with }");
                    (
                        name,
                        parse_matchers(body)
                            .into_iter()
                            .map(|m| (m.0, m.2))
                            .collect(),
                    )
                }
                None => (series, Labels::new()),
            };
            out.entry(name.to_owned())
                .or_default()
                .push((labels, value));
        }
        Self(out)
    }

    /// The value of the series of `name` with exactly these labels.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: Labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.0
            .get(name)?
            .iter()
            .find(|(l, _)| *l == want)
            .map(|s| s.1)
    }
}

/// `k="v", k2!="v2"` → (label, operator, value); quotes and escapes respected.
fn parse_matchers(body: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let op_at = rest.find(['=', '!']).expect("a matcher operator");
        let label = rest[..op_at].trim().to_owned();
        let after = &rest[op_at..];
        let op_len =
            if after.starts_with("=~") || after.starts_with("!=") || after.starts_with("!~") {
                2
            } else {
                1
            };
        let op = after[..op_len].to_owned();
        let quoted = after[op_len..].trim_start();
        assert!(quoted.starts_with('"'), "a quoted value in {body:?}");
        let mut value = String::new();
        let mut chars = quoted[1..].char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        value.push(n);
                    }
                }
                '"' => {
                    end = Some(i + 2);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = end.expect("a closing quote");
        out.push((label, op, value));
        rest = quoted[end..]
            .trim_start()
            .trim_start_matches(',')
            .trim_start();
    }
    out
}

/// Every `steadfast_*` metric an expression names, with the equality matchers on it.
fn selectors(expr: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while let Some(at) = expr[i..].find("steadfast_") {
        let start = i + at;
        let mut end = start;
        while end < b.len() && ident(b[end]) {
            end += 1;
        }
        i = end;
        if start > 0 && ident(b[start - 1]) {
            continue;
        }
        let name = expr[start..end].to_owned();
        let mut eq = Vec::new();
        if b.get(end) == Some(&b'{') {
            let close = end + expr[end..].find('}').expect("a closing brace");
            for (label, op, value) in parse_matchers(&expr[end + 1..close]) {
                // Regex and negative matchers, and dashboard variables, match anything.
                if op == "=" && !value.contains('$') {
                    eq.push((label, value));
                }
            }
            i = close;
        }
        out.push((name, eq));
    }
    out
}

/// The alert expressions of `ops/prometheus/alerts.yml` (one `expr:` line per rule).
fn alert_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("ops/prometheus/alerts.yml")).unwrap();
    let exprs: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("expr:"))
        .map(|e| e.trim().to_owned())
        .collect();
    let alerts = text
        .lines()
        .filter(|l| l.trim_start().starts_with("- alert:"))
        .count();
    assert_eq!(exprs.len(), alerts, "every rule has a one-line expr");
    assert!(
        alerts >= 5,
        "breaker, retry ratio, budget, upstream, dead letters"
    );
    exprs
}

/// Every query of `ops/grafana/steadfast.json`: panel targets and template variables.
fn dashboard_exprs() -> Vec<String> {
    fn walk(v: &Value, key: &str, out: &mut Vec<String>) {
        match v {
            Value::String(s) if matches!(key, "expr" | "query" | "definition") => {
                out.push(s.clone())
            }
            Value::Object(m) => m.iter().for_each(|(k, v)| walk(v, k, out)),
            Value::Array(a) => a.iter().for_each(|v| walk(v, key, out)),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(repo().join("ops/grafana/steadfast.json")).unwrap();
    let dash: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut out = Vec::new();
    walk(&dash, "", &mut out);
    let targets = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["targets"].as_array().map_or(0, Vec::len))
        .sum::<usize>();
    assert!(targets >= 15, "{targets} panel queries");
    out.retain(|e| e.contains("steadfast_"));
    out
}

/// What the scrape lacks of what `exprs` ask for.
fn missing(scrape: &Scrape, exprs: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for expr in exprs {
        let sels = selectors(expr);
        assert!(!sels.is_empty(), "no steadfast metric in {expr:?}");
        for (name, eq) in sels {
            let Some(series) = scrape.0.get(&name) else {
                out.insert(name);
                continue;
            };
            for (label, value) in eq {
                if !series.iter().any(|(l, _)| l.get(&label) == Some(&value)) {
                    out.insert(format!("{name}{{{label}=\"{value}\"}}"));
                }
            }
        }
    }
    out
}

struct Gateway {
    _child: tokio::process::Child,
    url: String,
    _files: (Temp, Temp),
}

async fn gateway() -> Gateway {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake_upstream.py");
    let script = script.display();
    let db = Temp::new("ops-db");
    let config = Temp::new("ops-config");
    let text = format!(
        r#"
[proxy]
init_timeout = "5s"
list_timeout = "2s"
shutdown_grace = "300ms"
restart = {{ max_attempts = 1000, base_delay = "100ms", max_delay = "200ms" }}

# One retry per 10 s, whatever the traffic: the second retry of a failing call is refused.
[budget]
retry_ratio = 0.0
min_retries_per_sec = 0.1
ttl = "10s"

[tasks]
store = "sqlite://{db}"
poll_interval = "100ms"
lease = "1s"

[defaults]
retry = {{ max_attempts = 3, base_delay = "10ms", max_delay = "20ms", jitter = "none", attempt_timeout = "10s" }}
breaker = {{ failure_threshold = 3, reset_timeout = "5m" }}

[upstreams.main]
command = "python3"
args = ["{script}", "--flaky-failures", "1000"]

[upstreams.main.tools.lookup]
durable = true

# Fails once, then succeeds: a call recovered by its retry (this upstream has its own budget).
[upstreams.other]
command = "python3"
args = ["{script}", "--flaky-failures", "1"]

# Killed a second after each start, once it has listed its tools: restarts.
[upstreams.flappy]
command = "timeout"
args = ["1", "python3", "{script}"]
"#,
        db = db.path()
    );
    std::fs::write(&config.0, text).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--config",
        config.path(),
    ]);
    let (child, url, _log) = gateway::listening(cmd).await;
    Gateway {
        _child: child,
        url,
        _files: (db, config),
    }
}

/// A client session on the HTTP front.
struct Client {
    url: String,
    session: String,
    next: i64,
}

impl Client {
    async fn connect(url: &str) -> Self {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION,
            "capabilities": {"tasks": {"list": {}, "cancel": {}}},
            "clientInfo": {"name": "ops-rules", "version": "1"}}});
        let r = exchange("POST", url, &Self::headers(None), &init.to_string())
            .await
            .expect("initialize");
        assert_eq!(r.status, 200, "{}", r.body);
        let session = r.header("mcp-session-id").expect("a session").to_owned();
        let c = Self {
            url: url.to_owned(),
            session,
            next: 1,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        exchange(
            "POST",
            url,
            &Self::headers(Some(&c.session)),
            &note.to_string(),
        )
        .await
        .unwrap();
        c
    }

    fn headers(session: Option<&str>) -> Vec<(&str, &str)> {
        let mut h = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", VERSION),
        ];
        if let Some(s) = session {
            h.push(("Mcp-Session-Id", s));
        }
        h
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        let r = exchange(
            "POST",
            &self.url,
            &Self::headers(Some(&self.session)),
            &body.to_string(),
        )
        .await
        .unwrap_or_else(|e| panic!("{method}: {e}"));
        r.answer()
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }
}

/// The parsed scrape and its text.
async fn scrape(url: &str) -> (Scrape, String) {
    let r = exchange("GET", &url.replace("/mcp", "/metrics"), &[], "")
        .await
        .expect("a scrape");
    assert_eq!(r.status, 200, "{}", r.body);
    (Scrape::parse(&r.body), r.body)
}

/// Drives the traffic, then checks every name the alerts and the dashboard use.
#[tokio::test]
async fn every_metric_the_alerts_and_the_dashboard_use_is_exported() {
    let exprs: Vec<String> = alert_exprs().into_iter().chain(dashboard_exprs()).collect();
    let g = gateway().await;
    let mut c = Client::connect(&g.url).await;

    let ok = c.call("main_echo", json!({"text": "hi"})).await;
    assert_eq!(
        ok.pointer("/result/content/0/text"),
        Some(&json!("hi")),
        "{ok}"
    );
    // Four calls to a tool that keeps failing: the first retries once (the budget's only retry)
    // and each is refused its next retry by the budget; the three failed calls open the
    // breaker (threshold 3), which refuses the fourth without an attempt.
    for _ in 0..4 {
        let r = c.call("main_flaky", json!({})).await;
        assert_eq!(r.pointer("/result/isError"), Some(&json!(true)), "{r}");
    }
    let r = c.call("other_flaky", json!({})).await;
    assert_eq!(
        r.pointer("/result/content/0/text"),
        Some(&json!("flaky succeeded")),
        "{r}"
    );
    // A durable call: a task, run as a job.
    let r = c
        .request(
            "tools/call",
            json!({"name": "main_lookup", "arguments": {"key": "k"}, "task": {"ttl": 60000}}),
        )
        .await;
    let task = r
        .pointer("/result/task/taskId")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("a task: {r}"))
        .to_owned();
    let deadline = Instant::now() + BOUND;
    loop {
        let t = c.request("tasks/get", json!({"taskId": task})).await;
        if t.pointer("/result/status") == Some(&json!("completed")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the durable call never completed: {t}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // What the traffic must have made, then every name the rules and panels use. Gauges set by
    // background loops (an upstream restart, the job store count) arrive within the bound.
    let deadline = Instant::now() + BOUND;
    let (s, text) = loop {
        let (s, text) = scrape(&g.url).await;
        let gaps = missing(&s, &exprs);
        if gaps.is_empty() {
            break (s, text);
        }
        assert!(
            Instant::now() < deadline,
            "used by ops/ but not exported: {gaps:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let flaky = [("tool", "main_flaky")];
    assert_eq!(
        s.value("steadfast_breaker_state", &flaky),
        Some(2.0),
        "open"
    );
    let give_ups = |reason| {
        s.value(
            "steadfast_give_ups_total",
            &[("reason", reason), ("tool", "main_flaky")],
        )
        .unwrap_or(0.0)
    };
    let all = s.0.get("steadfast_give_ups_total");
    assert_eq!(give_ups("budget_exhausted"), 3.0, "{all:?}");
    assert_eq!(give_ups("circuit_open"), 1.0, "{all:?}");
    assert_eq!(
        s.value("steadfast_retries_total", &flaky),
        Some(1.0),
        "the budget's only retry"
    );
    assert_eq!(
        s.value("steadfast_attempts_total", &flaky),
        Some(4.0),
        "2 + 1 + 1 + none"
    );
    assert_eq!(
        s.value(
            "steadfast_successes_after_retry_total",
            &[("tool", "other_flaky")]
        ),
        Some(1.0)
    );
    assert_eq!(
        s.value("steadfast_upstream_connected", &[("upstream", "main")]),
        Some(1.0)
    );
    assert!(
        s.value(
            "steadfast_upstream_restarts_total",
            &[("upstream", "flappy")]
        )
        .is_some_and(|n| n >= 1.0)
    );
    let queued = s.0["steadfast_jobs_queued_total"]
        .iter()
        .map(|x| x.1)
        .sum::<f64>();
    assert_eq!(queued, 1.0, "the durable call was one job");

    // Prometheus's own linter on the exposition (names, units, types), where promtool is.
    if let Ok(promtool) = std::env::var("STEADFAST_TEST_PROMTOOL") {
        use std::io::Write;
        let mut child = std::process::Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool check metrics: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_checker_sees_names_and_matchers() {
    let sels = selectors(
        r#"sum by (tool) (rate(steadfast_give_ups_total{reason="budget_exhausted", tool=~"$tool"}[5m])) / steadfast_calls_total > x_steadfast_no"#,
    );
    assert_eq!(
        sels,
        [
            (
                "steadfast_give_ups_total".to_owned(),
                vec![("reason".to_owned(), "budget_exhausted".to_owned())]
            ),
            ("steadfast_calls_total".to_owned(), vec![]),
        ]
    );
    let s = Scrape::parse(
        "# TYPE steadfast_give_ups_total counter\nsteadfast_give_ups_total{tool=\"a\",reason=\"exhausted\"} 2\n",
    );
    let exprs = [r#"steadfast_give_ups_total{reason="budget_exhausted"}"#.to_owned()];
    assert_eq!(
        missing(&s, &exprs),
        BTreeSet::from([r#"steadfast_give_ups_total{reason="budget_exhausted"}"#.to_owned()])
    );
    assert_eq!(
        s.value(
            "steadfast_give_ups_total",
            &[("reason", "exhausted"), ("tool", "a")]
        ),
        Some(2.0)
    );
}

/// `promtool check rules` and the rules' unit tests.
#[test]
#[ignore = "needs promtool: set STEADFAST_TEST_PROMTOOL (scripts/promtool.sh --install)"]
fn promtool_accepts_the_rules_and_their_unit_tests_pass() {
    let promtool = std::env::var("STEADFAST_TEST_PROMTOOL").unwrap_or_else(|_| {
        panic!(
            "this test needs promtool: set STEADFAST_TEST_PROMTOOL (scripts/promtool.sh --install)"
        )
    });
    let dir = repo().join("ops/prometheus");
    for args in [
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts_test.yml"],
    ] {
        let out = std::process::Command::new(&promtool)
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("promtool runs");
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
