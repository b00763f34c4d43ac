//! Several upstreams behind one endpoint, on real processes: namespaced lists and calls, a
//! dead upstream that blocks nothing and is announced when it comes, a killed upstream that
//! costs the other nothing, and the same over the HTTP front. (Two upstreams listed and called
//! under their names, in one process: `steadfast-gateway/tests/gathering.rs`.)

#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::Duration;

use raw_client::{RawProcess, fake_upstream_script, read_counts};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(10);

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

/// A `[upstreams.NAME]` table running the fake upstream with `extra` arguments.
fn fake_table(name: &str, extra: &[&str]) -> String {
    let mut args = vec![fake_upstream_script().display().to_string()];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    format!(
        "[upstreams.{name}]\ncommand = \"python3\"\nargs = {}\n",
        serde_json::to_string(&args).unwrap()
    )
}

/// A `[upstreams.NAME]` table that starts the fake only once `flag` exists (it fails before).
fn fake_table_after(name: &str, flag: &str, extra: &[&str]) -> String {
    let script = format!(
        "if [ -f {flag} ]; then exec python3 {} {}; else exit 3; fi",
        fake_upstream_script().display(),
        extra.join(" ")
    );
    format!(
        "[upstreams.{name}]\ncommand = \"sh\"\nargs = {}\n",
        serde_json::to_string(&["-c", script.as_str()]).unwrap()
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

async fn list(p: &mut RawProcess, id: i64) -> Value {
    p.call(json!(id), "tools/list", json!({}), ANSWER)
        .await
        .expect("tools/list is answered")
        .response
}

async fn echo(p: &mut RawProcess, id: i64, tool: &str, text: &str) -> raw_client::Answer {
    p.call(
        json!(id),
        "tools/call",
        json!({"name": tool, "arguments": {"text": text}}),
        ANSWER,
    )
    .await
    .unwrap_or_else(|| panic!("{tool} was not answered"))
}

fn echoed(answer: &raw_client::Answer, text: &str) -> bool {
    answer.response["result"]["isError"] != json!(true)
        && answer.response["result"].to_string().contains(text)
}

/// A task-augmented `tools/call`; the task id it was answered with.
async fn start_task(p: &mut RawProcess, id: i64, tool: &str, args: Value) -> String {
    let created = p
        .call(
            json!(id),
            "tools/call",
            json!({"name": tool, "arguments": args, "task": {"ttl": 60000}}),
            ANSWER,
        )
        .await
        .expect("answered")
        .response;
    created
        .pointer("/result/task/taskId")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("a task handle: {created}"))
        .to_owned()
}

/// Reads until a `notifications/tools/list_changed` arrives, within `within`.
async fn await_list_changed(p: &mut RawProcess, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while let Some(left) = deadline.checked_duration_since(tokio::time::Instant::now()) {
        match p.read_message(left).await {
            Some(m) if m["method"] == "notifications/tools/list_changed" => return true,
            Some(_) => {}
            None => return false,
        }
    }
    false
}

#[tokio::test]
async fn a_dead_upstream_blocks_nothing_and_is_announced_when_it_comes() {
    let flag = Temp::new("beta-may-start");
    let config = format!(
        "{FAST}\n{}\n{}",
        fake_table("alpha", &[]),
        fake_table_after("beta", flag.path(), &[])
    );
    let (mut p, _cfg) = gateway(&config);
    let started = tokio::time::Instant::now();
    let init = p.initialize(ANSWER).await.expect("initialize is answered");
    assert!(init.get("result").is_some(), "{init}");
    // Answered after list_timeout (1.5 s), not init_timeout (5 s) or never.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    let listed = tokio::time::Instant::now();
    let names = tool_names(&list(&mut p, 1).await);
    assert!(
        listed.elapsed() < Duration::from_secs(2),
        "{:?}",
        listed.elapsed()
    );
    assert!(names.contains(&"alpha_echo".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("beta_")), "{names:?}");
    assert!(echoed(
        &echo(&mut p, 2, "alpha_echo", "alive").await,
        "alive"
    ));

    std::fs::write(&flag.0, "go").unwrap();
    assert!(
        await_list_changed(&mut p, Duration::from_secs(15)).await,
        "no list_changed after the missing upstream came"
    );
    let names = tool_names(&list(&mut p, 3).await);
    assert!(names.contains(&"beta_echo".to_owned()), "{names:?}");
    assert!(echoed(&echo(&mut p, 4, "beta_echo", "late").await, "late"));
}

#[tokio::test]
async fn a_killed_upstream_costs_the_other_nothing() {
    let pid_file = Temp::new("beta-pid");
    let config = format!(
        "{FAST}\n{}\n{}",
        fake_table("alpha", &[]),
        fake_table("beta", &["--pid-file", pid_file.path()])
    );
    let (mut p, _cfg) = gateway(&config);
    p.initialize(ANSWER).await.expect("initialize is answered");
    assert_eq!(tool_names(&list(&mut p, 1).await).len() % 2, 0);
    let pid: i32 = std::fs::read_to_string(&pid_file.0)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) on a pid this test's child wrote; no memory is involved.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);

    let a = echo(&mut p, 2, "alpha_echo", "unaffected").await;
    assert!(echoed(&a, "unaffected"), "{}", a.response);
    assert!(a.elapsed < Duration::from_secs(2), "{:?}", a.elapsed);
    let names = tool_names(&list(&mut p, 3).await);
    assert!(names.contains(&"alpha_echo".to_owned()), "{names:?}");

    // beta is restarted by its own supervisor and announced.
    assert!(
        await_list_changed(&mut p, Duration::from_secs(15)).await,
        "no list_changed after the restart"
    );
    let b = echo(&mut p, 4, "beta_echo", "back").await;
    assert!(echoed(&b, "back"), "{}", b.response);
}

#[tokio::test]
async fn a_mcp_servers_file_with_several_entries_serves_them_all() {
    let file = Temp::new("mcp-servers");
    let script = fake_upstream_script().display().to_string();
    let doc = json!({"mcpServers": {
        "one": {"command": "python3", "args": [script]},
        "two": {"command": "python3", "args": [script]},
        "off": {"command": "false", "disabled": true},
    }});
    std::fs::write(&file.0, doc.to_string()).unwrap();
    let path = format!("{}.json", file.path());
    std::fs::rename(&file.0, &path).unwrap();
    let argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        path.clone(),
    ];
    let mut p = RawProcess::spawn(&argv).unwrap();
    p.initialize(ANSWER).await.expect("initialize is answered");
    let names = tool_names(&list(&mut p, 1).await);
    let _ = std::fs::remove_file(&path);
    assert!(names.contains(&"one_echo".to_owned()), "{names:?}");
    assert!(names.contains(&"two_echo".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("off_")), "{names:?}");
}

#[cfg(feature = "http")]
#[tokio::test]
async fn two_upstreams_behind_the_http_front() {
    use tokio::io::AsyncBufReadExt;
    let config = format!(
        "{FAST}\n{}\n{}",
        fake_table("alpha", &[]),
        fake_table("beta", &[])
    );
    let file = Temp::new("gateway-http");
    std::fs::write(&file.0, &config).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"))
        .args(["proxy", "--listen", "127.0.0.1:0", "--config", file.path()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(ANSWER, async {
        while let Ok(Some(line)) = err.next_line().await {
            if let Some(u) = line.strip_prefix("steadfast: serving MCP at ") {
                return u.to_owned();
            }
        }
        panic!("the front never said where it listens");
    })
    .await
    .unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = err.next_line().await {} });

    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, headers, _) = raw_client::http_post(&url, None, &init, ANSWER)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let session = headers
        .iter()
        .find(|(k, _)| k == "mcp-session-id")
        .map(|(_, v)| v.clone())
        .expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    raw_client::http_post(&url, Some(&session), &initialized, ANSWER)
        .await
        .unwrap();
    let ask = |id: i64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let (_, _, body) = raw_client::http_post(
        &url,
        Some(&session),
        &ask(1, "tools/list", json!({})),
        ANSWER,
    )
    .await
    .unwrap();
    let listed = raw_client::http_messages(&body).pop().expect("a response");
    let names = tool_names(&listed);
    assert!(
        names.contains(&"alpha_echo".to_owned()) && names.contains(&"beta_echo".to_owned()),
        "{names:?}"
    );
    let call = ask(
        2,
        "tools/call",
        json!({"name": "beta_echo", "arguments": {"text": "over-http"}}),
    );
    let (_, _, body) = raw_client::http_post(&url, Some(&session), &call, ANSWER)
        .await
        .unwrap();
    let answer = raw_client::http_messages(&body).pop().expect("a response");
    assert!(
        answer["result"].to_string().contains("over-http"),
        "{answer}"
    );
}

#[tokio::test]
async fn sighup_adds_and_removes_upstreams_without_dropping_the_session() {
    let alpha_pid = Temp::new("alpha-pid");
    let alpha = fake_table("alpha", &["--pid-file", alpha_pid.path()]);
    let (mut p, cfg) = gateway(&format!("{FAST}\n{alpha}"));
    p.initialize(ANSWER).await.expect("initialize is answered");
    let names = tool_names(&list(&mut p, 1).await);
    assert!(names.iter().all(|n| n.starts_with("alpha_")), "{names:?}");
    let gateway_pid = p.pid().unwrap() as i32;

    // Add beta.
    std::fs::write(
        &cfg.0,
        format!("{FAST}\n{alpha}\n{}", fake_table("beta", &[])),
    )
    .unwrap();
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    assert_eq!(unsafe { libc::kill(gateway_pid, libc::SIGHUP) }, 0);
    assert!(
        await_list_changed(&mut p, Duration::from_secs(10)).await,
        "no list_changed after an upstream was added"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut id = 10;
    loop {
        id += 1;
        let names = tool_names(&list(&mut p, id).await);
        if names.contains(&"beta_echo".to_owned()) {
            assert!(names.contains(&"alpha_echo".to_owned()), "{names:?}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "beta never listed: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(echoed(
        &echo(&mut p, 100, "beta_echo", "added").await,
        "added"
    ));

    // Remove alpha: its process ends, its tools are gone, beta stays.
    let pid: i32 = std::fs::read_to_string(&alpha_pid.0)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(&cfg.0, format!("{FAST}\n{}", fake_table("beta", &[]))).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(gateway_pid, libc::SIGHUP) }, 0);
    assert!(await_list_changed(&mut p, Duration::from_secs(10)).await);
    let names = tool_names(&list(&mut p, 101).await);
    assert!(!names.iter().any(|n| n.starts_with("alpha_")), "{names:?}");
    assert!(names.contains(&"beta_echo".to_owned()), "{names:?}");
    let gone = echo(&mut p, 102, "alpha_echo", "x").await;
    assert_eq!(
        gone.response["error"]["code"],
        json!(-32602),
        "{}",
        gone.response
    );
    assert!(echoed(
        &echo(&mut p, 103, "beta_echo", "stays").await,
        "stays"
    ));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while raw_client::alive(pid as u32) {
        assert!(tokio::time::Instant::now() < deadline, "alpha still runs");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A config that goes back to one [upstream] is refused; the session goes on.
    std::fs::write(&cfg.0, format!("{FAST}\n[upstream]\ncommand = \"true\"\n")).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(gateway_pid, libc::SIGHUP) }, 0);
    assert!(echoed(
        &echo(&mut p, 104, "beta_echo", "still").await,
        "still"
    ));
}

#[tokio::test]
async fn a_durable_call_finds_its_upstream_by_its_namespaced_name() {
    let db = Temp::new("multi-tasks-db");
    let (cb, ca) = (Temp::new("count-b"), Temp::new("count-a"));
    let config = format!(
        "{FAST}\n[tasks]\nstore = \"sqlite://{}\"\npoll_interval = \"100ms\"\n\n\
         [upstreams.beta.tools.echo]\ndurable = true\n\n{}\n{}",
        db.path(),
        fake_table("alpha", &["--count-file", ca.path()]),
        fake_table("beta", &["--count-file", cb.path()])
    );
    let (mut p, _cfg) = gateway(&config);
    let init = p.initialize(ANSWER).await.expect("initialize is answered");
    assert!(
        init["result"]["capabilities"].get("tasks").is_some(),
        "tasks advertised: {init}"
    );
    let task = start_task(&mut p, 1, "beta_echo", json!({"text": "durable"})).await;
    let r = p
        .call(json!(2), "tasks/result", json!({"taskId": task}), ANSWER)
        .await
        .expect("answered")
        .response;
    assert_eq!(
        r.pointer("/result/content/0/text"),
        Some(&json!("durable")),
        "{r}"
    );
    assert_eq!(read_counts(&cb.0)["tools"]["echo"], json!(1));
    assert!(read_counts(&ca.0)["tools"].get("echo").is_none());
    // Only the durable tool is advertised as taking tasks.
    let listed = list(&mut p, 3).await;
    let support = |name: &str| {
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .and_then(|t| t.pointer("/execution/taskSupport").cloned())
    };
    assert_eq!(support("beta_echo"), Some(json!("optional")), "{listed}");
    assert_eq!(support("alpha_echo"), None, "{listed}");
    drop(p);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.path()));
    }
}

#[tokio::test]
async fn an_upstreams_own_task_is_followed_through_the_upstream_that_made_it() {
    let config = format!(
        "{FAST}\n{}\n{}",
        fake_table("alpha", &[]),
        fake_table("beta", &["--mode", "tasks", "--task-seconds", "0.2"])
    );
    let (mut p, _cfg) = gateway(&config);
    p.initialize(ANSWER).await.expect("initialize is answered");
    let task = start_task(&mut p, 1, "beta_research", json!({"topic": "x"})).await;
    let got = p
        .call(json!(2), "tasks/get", json!({"taskId": task}), ANSWER)
        .await
        .expect("answered")
        .response;
    assert!(
        got.get("result").is_some(),
        "tasks/get routed to beta: {got}"
    );
    let result = p
        .call(json!(3), "tasks/result", json!({"taskId": task}), ANSWER)
        .await
        .expect("answered")
        .response;
    assert!(
        result.get("result").is_some(),
        "tasks/result routed to beta: {result}"
    );
    let unknown = p
        .call(
            json!(4),
            "tasks/get",
            json!({"taskId": "nobody-made-this"}),
            ANSWER,
        )
        .await
        .expect("answered")
        .response;
    assert_eq!(unknown["error"]["code"], json!(-32602), "{unknown}");
}

#[tokio::test]
async fn a_call_to_an_upstream_that_a_reload_removes_ends_at_once() {
    let counts = Temp::new("alpha-counts");
    let alpha = fake_table("alpha", &["--count-file", counts.path()]);
    let beta = fake_table("beta", &[]);
    let (mut p, cfg) = gateway(&format!("{FAST}\n{alpha}\n{beta}"));
    p.initialize(ANSWER).await.expect("initialize is answered");
    list(&mut p, 1).await;
    p.request(
        json!(2),
        "tools/call",
        json!({"name": "alpha_slow", "arguments": {"seconds": 30}}),
    )
    .await
    .unwrap();
    // The call is in flight at alpha before the reload.
    let deadline = tokio::time::Instant::now() + ANSWER;
    while read_counts(&counts.0)["tools"]["slow"] != json!(1) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call never reached alpha"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::fs::write(&cfg.0, format!("{FAST}\n{beta}")).unwrap();
    let reloaded = tokio::time::Instant::now();
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    assert_eq!(
        unsafe { libc::kill(p.pid().unwrap() as i32, libc::SIGHUP) },
        0
    );
    let answer = p
        .wait_for(&json!(2), ANSWER)
        .await
        .expect("the call is answered");
    // Before: every retry waited reconnect_wait (2 s here) for an upstream that was gone.
    assert!(
        reloaded.elapsed() < Duration::from_secs(3),
        "answered after {:?}: {}",
        reloaded.elapsed(),
        answer.response
    );
    assert_eq!(
        answer.response["result"]["structuredContent"]["code"],
        json!("SERVICE_UNAVAILABLE"),
        "{}",
        answer.response
    );
}

/// Issue 19, item 9: a call retrying when a reload replaces its upstream sends its next
/// attempt to the replacement (the route is resolved per attempt, not once per call).
#[tokio::test]
async fn a_retry_after_a_reload_replaced_the_upstream_goes_to_the_replacement() {
    let (old_counts, new_counts) = (Temp::new("old-alpha"), Temp::new("new-alpha"));
    // The old alpha fails every call with a transient error; its replacement succeeds.
    let old = fake_table(
        "alpha",
        &[
            "--count-file",
            old_counts.path(),
            "--flaky-failures",
            "1000",
        ],
    );
    let new = fake_table(
        "alpha",
        &["--count-file", new_counts.path(), "--flaky-failures", "0"],
    );
    let beta = fake_table("beta", &[]);
    // Retries for about 6 s: time for the reload and the new alpha's start.
    let tool = "[tools.alpha_flaky]\nbreaker = false\n\
                retry = { max_attempts = 40, base_delay = \"150ms\", max_delay = \"150ms\", jitter = \"none\" }\n";
    let (mut p, cfg) = gateway(&format!("{FAST}\n{tool}\n{old}\n{beta}"));
    p.initialize(ANSWER).await.expect("initialize is answered");
    list(&mut p, 1).await;
    p.request(
        json!(2),
        "tools/call",
        json!({"name": "alpha_flaky", "arguments": {}}),
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + ANSWER;
    while read_counts(&old_counts.0)["tools"]["flaky"]
        .as_u64()
        .unwrap_or(0)
        < 2
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call never retried at the old alpha"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::fs::write(&cfg.0, format!("{FAST}\n{tool}\n{new}\n{beta}")).unwrap();
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    assert_eq!(
        unsafe { libc::kill(p.pid().unwrap() as i32, libc::SIGHUP) },
        0
    );
    let answer = p
        .wait_for(&json!(2), ANSWER)
        .await
        .expect("the call is answered");
    // Before: every retry went to the stopped alpha and the call ended SERVICE_UNAVAILABLE.
    assert!(echoed(&answer, "flaky succeeded"), "{}", answer.response);
    assert_eq!(
        read_counts(&new_counts.0)["tools"]["flaky"],
        json!(1),
        "{}",
        answer.response
    );
}

/// Writes the fake's `--lists-file` (read again on every list).
fn write_lists(file: &Temp, resources: &[&str], prompts: &[String]) {
    let doc = json!({"resources": resources, "prompts": prompts});
    std::fs::write(&file.0, doc.to_string()).unwrap();
}

/// How many times the fake counted `method`.
fn seen(counts: &Temp, method: &str) -> u64 {
    read_counts(&counts.0)["methods"][method]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test]
async fn reads_of_a_uri_nobody_listed_relist_once_not_per_request() {
    let (la, lb) = (Temp::new("lists-a"), Temp::new("lists-b"));
    let (ca, cb) = (Temp::new("count-a"), Temp::new("count-b"));
    write_lists(&la, &["a://one"], &[]);
    write_lists(&lb, &["b://one"], &[]);
    let config = format!(
        "{FAST}\n{}\n{}",
        fake_table(
            "alpha",
            &["--lists-file", la.path(), "--count-file", ca.path()]
        ),
        fake_table(
            "beta",
            &["--lists-file", lb.path(), "--count-file", cb.path()]
        )
    );
    let (mut p, _cfg) = gateway(&config);
    p.initialize(ANSWER).await.expect("initialize is answered");
    let started = tokio::time::Instant::now();
    let read = |id: i64| (json!(id), json!({"uri": "nobody://listed"}));
    // 20 at once, then 20 one after the other.
    for id in 100..120 {
        let (id, params) = read(id);
        p.request(id, "resources/read", params).await.unwrap();
    }
    for id in 100..120 {
        let a = p.wait_for(&json!(id), ANSWER).await.expect("answered");
        assert_eq!(a.response["error"]["code"], json!(-32002), "{}", a.response);
    }
    for id in 200..220 {
        let (id, params) = read(id);
        let a = p.call(id, "resources/read", params, ANSWER).await.unwrap();
        assert_eq!(a.response["error"]["code"], json!(-32002), "{}", a.response);
    }
    let elapsed = started.elapsed();
    // One relist at a time, at most one a second (plus the first).
    let bound = 2 + elapsed.as_secs();
    for (name, counts) in [("alpha", &ca), ("beta", &cb)] {
        let relists = seen(counts, "resources/list");
        eprintln!("{name}: {relists} relists for 40 reads of an unknown URI in {elapsed:?}");
        assert!(
            relists <= bound,
            "{name} relisted {relists} times for 40 reads in {elapsed:?}"
        );
    }
    // A URI listed since is still found at once (the bound does not hide new URIs for long).
    write_lists(&lb, &["b://one", "b://new"], &[]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let a = p
        .call(
            json!(300),
            "resources/read",
            json!({"uri": "b://new"}),
            ANSWER,
        )
        .await
        .unwrap();
    assert_eq!(
        a.response["result"]["contents"][0]["text"],
        json!("content of b://new"),
        "{}",
        a.response
    );
}

#[tokio::test]
async fn a_uri_that_moved_to_another_upstream_is_routed_to_it_after_a_relist() {
    let (la, lb) = (Temp::new("lists-a"), Temp::new("lists-b"));
    write_lists(&la, &["shared://x"], &[]);
    write_lists(&lb, &[], &[]);
    let config = format!(
        "{FAST}\n{}\n{}",
        fake_table("alpha", &["--lists-file", la.path()]),
        fake_table("beta", &["--lists-file", lb.path()])
    );
    let (mut p, _cfg) = gateway(&config);
    p.initialize(ANSWER).await.expect("initialize is answered");
    let listed = p
        .call(json!(1), "resources/list", json!({}), ANSWER)
        .await
        .unwrap()
        .response;
    assert_eq!(listed["result"]["resources"][0]["uri"], json!("shared://x"));
    write_lists(&la, &[], &[]);
    write_lists(&lb, &["shared://x"], &[]);
    let listed = p
        .call(json!(2), "resources/list", json!({}), ANSWER)
        .await
        .unwrap()
        .response;
    assert_eq!(listed["result"]["resources"].as_array().unwrap().len(), 1);
    let read = p
        .call(
            json!(3),
            "resources/read",
            json!({"uri": "shared://x"}),
            ANSWER,
        )
        .await
        .unwrap()
        .response;
    assert_eq!(
        read["result"]["contents"][0]["text"],
        json!("content of shared://x"),
        "routed to the upstream that lists it now: {read}"
    );
}

#[tokio::test]
async fn a_full_name_table_makes_room_when_the_upstream_relists() {
    let la = Temp::new("lists-a");
    let many: Vec<String> = (0..10_000).map(|i| format!("p{i}")).collect();
    write_lists(&la, &[], &many);
    let config = format!(
        "{FAST}\n{}\n{}",
        fake_table("alpha", &["--lists-file", la.path()]),
        fake_table("beta", &[])
    );
    let (mut p, _cfg) = gateway(&config);
    p.initialize(ANSWER).await.expect("initialize is answered");
    let listed = p
        .call(json!(1), "prompts/list", json!({}), ANSWER)
        .await
        .unwrap()
        .response;
    assert_eq!(
        listed["result"]["prompts"].as_array().unwrap().len(),
        10_000
    );
    // The upstream now lists one prompt whose name must be rewritten to fit.
    write_lists(&la, &[], &["get.file".to_owned()]);
    let listed = p
        .call(json!(2), "prompts/list", json!({}), ANSWER)
        .await
        .unwrap()
        .response;
    assert_eq!(
        listed["result"]["prompts"][0]["name"],
        json!("alpha_get_file")
    );
    let got = p
        .call(
            json!(3),
            "prompts/get",
            json!({"name": "alpha_get_file"}),
            ANSWER,
        )
        .await
        .unwrap()
        .response;
    assert_eq!(
        got["result"]["messages"][0]["content"]["text"],
        json!("get.file"),
        "{got}"
    );
}

#[tokio::test]
async fn a_gathered_list_is_capped_in_bytes_per_upstream() {
    let la = Temp::new("lists-a");
    let uris: Vec<String> = (0..400).map(|i| format!("a://{i}")).collect();
    let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
    write_lists(&la, &uris, &[]);
    // Pages of ~50 KB, 400 KB in all; one message may be 200 KiB.
    let fast = FAST.replacen("[proxy]\n", "[proxy]\nmax_message_size = 204800\n", 1);
    let config = format!(
        "{fast}\n{}\n{}",
        fake_table(
            "alpha",
            &[
                "--lists-file",
                la.path(),
                "--page-size",
                "50",
                "--list-padding",
                "1000"
            ]
        ),
        fake_table("beta", &[])
    );
    let (mut p, _cfg) = gateway(&config);
    p.initialize(ANSWER).await.expect("initialize is answered");
    let listed = p
        .call(json!(1), "resources/list", json!({}), ANSWER)
        .await
        .unwrap()
        .response;
    let got = listed["result"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .len();
    eprintln!("{got} of 400 resources listed under a 200 KiB cap");
    // Whole pages up to the cap: 3 pages of 50 (~53 KB each) fit in 200 KiB, a 4th does not.
    assert!((150..=200).contains(&got), "{got} of 400 listed");
    assert_eq!(listed["result"]["resources"][0]["uri"], json!("a://0"));
}

#[tokio::test]
async fn a_later_upstream_hears_the_log_level_and_its_capabilities_are_declared() {
    let flag = Temp::new("beta-may-start");
    let (cb, pid) = (Temp::new("count-b"), Temp::new("beta-pid"));
    let config = format!(
        "{FAST}\n{}\n{}",
        fake_table("alpha", &["--without-capability", "logging"]),
        fake_table_after(
            "beta",
            flag.path(),
            &["--count-file", cb.path(), "--pid-file", pid.path()]
        )
    );
    let (mut p, _cfg) = gateway(&config);
    let init = p.initialize(ANSWER).await.expect("initialize is answered");
    // No connected upstream logs yet; the gateway serves logging/setLevel for those to come.
    assert!(
        init["result"]["capabilities"].get("logging").is_some(),
        "{init}"
    );
    // Completions too: an upstream without them completes nothing (not -32601).
    assert!(
        init["result"]["capabilities"].get("completions").is_some(),
        "{init}"
    );
    let ref_prompt = json!({"ref": {"type": "ref/prompt", "name": "alpha_p"},
                            "argument": {"name": "a", "value": ""}});
    let done = p
        .call(json!(9), "completion/complete", ref_prompt, ANSWER)
        .await
        .unwrap()
        .response;
    assert_eq!(done["result"]["completion"]["values"], json!([]), "{done}");
    let set = p
        .call(
            json!(1),
            "logging/setLevel",
            json!({"level": "debug"}),
            ANSWER,
        )
        .await
        .unwrap()
        .response;
    assert_eq!(set["result"], json!({}), "{set}");
    std::fs::write(&flag.0, "go").unwrap();
    assert!(
        await_list_changed(&mut p, Duration::from_secs(15)).await,
        "no list_changed after the missing upstream came"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while seen(&cb, "logging/setLevel") < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the later upstream never heard the level: {}",
            read_counts(&cb.0)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A restarted upstream hears it again before the client's next list reaches it.
    let beta: i32 = std::fs::read_to_string(&pid.0)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) on a pid this test's child wrote; no memory is involved.
    assert_eq!(unsafe { libc::kill(beta, libc::SIGKILL) }, 0);
    assert!(await_list_changed(&mut p, Duration::from_secs(15)).await);
    list(&mut p, 2).await;
    assert_eq!(seen(&cb, "logging/setLevel"), 2, "{}", read_counts(&cb.0));
}

#[tokio::test]
async fn the_protocol_revision_told_is_one_every_upstream_speaks() {
    let config = format!(
        "{FAST}\n{}\n{}",
        fake_table("alpha", &["--only-version", "2025-11-25"]),
        fake_table("beta", &["--only-version", "2025-06-18"])
    );
    let (mut p, _cfg) = gateway(&config);
    let init = p.initialize(ANSWER).await.expect("initialize is answered");
    assert_eq!(
        init["result"]["protocolVersion"],
        json!("2025-06-18"),
        "{init}"
    );
}
