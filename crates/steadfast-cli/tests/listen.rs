//! `subscriptions/listen` (MCP 2026-07-28) on real processes, in raw JSON-RPC: a modern client
//! listening through the gateway receives the list changes and resource updates it asked for
//! (and nothing else), stamped with its subscription id, from a handshake-era upstream (which
//! the gateway subscribes to the URIs) and from a modern-only one (on which the gateway keeps
//! a listen of its own); over stdio and HTTP; with the front's caps enforced and a graceful
//! end when the gateway stops. The fake upstream's `announce-changes` mode announces when its
//! lists file changes.

#[path = "support/gateway.rs"]
mod gateway;
#[path = "support/raw_client.rs"]
mod raw_client;
#[path = "support/temp.rs"]
mod temp;

use std::time::Duration;

use raw_client::{RawProcess, fake_upstream_command, read_counts};
use serde_json::{Value, json};
use temp::Temp;

const ANSWER: Duration = Duration::from_secs(15);
/// How long nothing more may arrive for "nothing else was sent" (a change is relayed within
/// milliseconds; the fake polls its file every 50 ms).
const QUIET: Duration = Duration::from_millis(600);
const MODERN: &str = "2026-07-28";
const SUB: &str = "io.modelcontextprotocol/subscriptionId";

fn modern(extra: Value) -> Value {
    let mut p = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-listener", "version": "0"},
    }});
    if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    p
}

fn listen_params(filter: Value) -> Value {
    modern(json!({"notifications": filter}))
}

/// A config, a counter file and a lists file (two resources, one prompt).
struct Files {
    config: Temp,
    counts: Temp,
    lists: Temp,
}

fn files(config: &str) -> Files {
    let f = Files {
        config: Temp::new("listen-config"),
        counts: Temp::new("listen-counts"),
        lists: Temp::new("listen-lists"),
    };
    std::fs::write(&f.config.0, config).unwrap();
    f.change(&[]);
    f
}

impl Files {
    /// Rewrites the lists file (the fake announces the change), naming `updated` as updated.
    fn change(&self, updated: &[&str]) {
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let lists = json!({
            "resources": ["file:///a", "file:///b"],
            "prompts": ["p"],
            "updated": updated,
            "serial": n.to_string(),
        });
        // Written whole, then renamed over the old file: the fake polls the file, and a write
        // in place could be seen truncated first (two announcements for one change).
        let tmp = self.lists.0.with_extension("tmp");
        std::fs::write(&tmp, lists.to_string()).unwrap();
        std::fs::rename(&tmp, &self.lists.0).unwrap();
    }

    fn fake_args(&self, extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = [
            "--count-file",
            self.counts.path(),
            "--lists-file",
            self.lists.path(),
            "--mode",
            "announce-changes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }

    /// Waits until the fake's counts satisfy `ok` (what the gateway asked of it).
    async fn until_counted(&self, what: &str, ok: impl Fn(&Value) -> bool) {
        let wait = async {
            loop {
                if ok(&read_counts(&self.counts.0)) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        if tokio::time::timeout(ANSWER, wait).await.is_err() {
            panic!("{what}: {}", read_counts(&self.counts.0));
        }
    }
}

const CONFIG: &str = "[proxy]\ninit_timeout = \"10s\"\nreconnect_wait = \"5s\"\n";

fn stdio_gateway(f: &Files, fake: &[&str]) -> RawProcess {
    let mut argv = vec![
        env!("CARGO_BIN_EXE_steadfast").to_owned(),
        "proxy".to_owned(),
        "--config".to_owned(),
        f.config.path().to_owned(),
        "--".to_owned(),
    ];
    let args = f.fake_args(fake);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    argv.extend(fake_upstream_command(&args));
    RawProcess::spawn(&argv).expect("the gateway starts")
}

/// Reads messages for `within`, keeping all of them.
async fn drain(p: &mut RawProcess, within: Duration) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + within;
    let mut got = Vec::new();
    while let Some(left) = deadline.checked_duration_since(tokio::time::Instant::now()) {
        match p.read_message(left).await {
            Some(m) => got.push(m),
            None => break,
        }
    }
    got
}

/// Reads until `n` messages matching `wanted` came (within [`ANSWER`]), then for [`QUIET`]
/// more; everything read.
async fn read_until(p: &mut RawProcess, n: usize, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + ANSWER;
    let mut got = Vec::new();
    while got.iter().filter(|m| wanted(m)).count() < n {
        let left = deadline
            .checked_duration_since(tokio::time::Instant::now())
            .unwrap_or_else(|| panic!("only {got:?}"));
        match p.read_message(left).await {
            Some(m) => got.push(m),
            None => panic!("the gateway went quiet after {got:?}"),
        }
    }
    got.extend(drain(p, QUIET).await);
    got
}

fn methods_for(got: &[Value], sub: &str) -> Vec<String> {
    got.iter()
        .filter(|m| m["params"]["_meta"][SUB] == json!(sub))
        .map(|m| {
            let mut s = m["method"].as_str().unwrap_or("(response)").to_owned();
            if let Some(u) = m["params"]["uri"].as_str() {
                s = format!("{s} {u}");
            }
            s
        })
        .collect()
}

#[tokio::test]
async fn stdio_listen_to_a_handshake_upstream() {
    let f = files(CONFIG);
    let mut p = stdio_gateway(&f, &[]);
    let d = p
        .call(json!(1), "server/discover", modern(json!({})), ANSWER)
        .await
        .unwrap()
        .response;
    let caps = &d["result"]["capabilities"];
    assert_eq!(caps["tools"]["listChanged"], true, "served again: {d}");
    assert_eq!(caps["resources"]["subscribe"], true, "{d}");

    let filter = json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]});
    p.request(
        json!("listen-1"),
        "subscriptions/listen",
        listen_params(filter.clone()),
    )
    .await
    .unwrap();
    let ack = p.read_message(ANSWER).await.expect("acknowledged");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(ack["params"]["_meta"][SUB], "listen-1");
    assert_eq!(ack["params"]["notifications"], filter, "all of it honoured");
    // The gateway subscribes the handshake-era upstream to the URI before it acknowledges
    // (unless the upstream takes longer than the gateway's 5 s bound, as a loaded machine can
    // make it: waited for, bounded).
    f.until_counted("the upstream subscribed to the URI", |c| {
        c["methods"]["resources/subscribe"] == 1
    })
    .await;

    f.change(&["file:///a", "file:///b"]);
    let got = read_until(&mut p, 2, |m| m["params"]["_meta"][SUB] == "listen-1").await;
    assert_eq!(
        methods_for(&got, "listen-1"),
        [
            "notifications/tools/list_changed",
            "notifications/resources/updated file:///a"
        ],
        "only what it asked for: {got:?}"
    );
    assert_eq!(
        got.len(),
        2,
        "nothing unstamped for a modern client: {got:?}"
    );

    // A second listen; each gets its own kinds.
    p.request(
        json!(7),
        "subscriptions/listen",
        listen_params(json!({"promptsListChanged": true})),
    )
    .await
    .unwrap();
    let ack = p.read_message(ANSWER).await.unwrap();
    assert_eq!(ack["params"]["_meta"][SUB], 7, "{ack}");
    f.change(&[]);
    let got = read_until(&mut p, 2, |m| m["params"]["_meta"][SUB] != Value::Null).await;
    assert_eq!(
        methods_for(&got, "listen-1"),
        ["notifications/tools/list_changed"]
    );
    let seven: Vec<_> = got
        .iter()
        .filter(|m| m["params"]["_meta"][SUB] == 7)
        .collect();
    assert_eq!(seven.len(), 1, "{got:?}");
    assert_eq!(seven[0]["method"], "notifications/prompts/list_changed");

    // Cancelled: no answer, and the upstream is unsubscribed.
    p.notify("notifications/cancelled", json!({"requestId": "listen-1"}))
        .await
        .unwrap();
    f.until_counted("resources/unsubscribe sent", |c| {
        c["methods"]["resources/unsubscribe"] == 1
    })
    .await;
    f.change(&["file:///a"]);
    let got = drain(&mut p, QUIET * 2).await;
    assert!(
        got.iter().all(|m| m["params"]["_meta"][SUB] == 7),
        "nothing for the cancelled listen, not even an answer: {got:?}"
    );

    // The client leaves: the open listen ends gracefully.
    p.close_stdin();
    let end = p.wait_for(&json!(7), ANSWER).await.expect("a graceful end");
    assert_eq!(
        end.response["result"],
        json!({"resultType": "complete", "_meta": {SUB: 7}}),
        "{end:?}"
    );
}

#[tokio::test]
async fn stdio_listen_to_a_modern_only_upstream_and_a_handshake_client_too() {
    let f = files(CONFIG);
    let mut p = stdio_gateway(&f, &["--mode", "modern-only"]);
    let filter = json!({"toolsListChanged": true, "resourcesListChanged": true, "resourceSubscriptions": ["file:///b"]});
    let ack = p
        .call(json!(1), "tools/list", modern(json!({})), ANSWER)
        .await
        .unwrap();
    assert!(ack.response["result"]["tools"].is_array());
    p.request(json!(2), "subscriptions/listen", listen_params(filter))
        .await
        .unwrap();
    let ack = p.read_message(ANSWER).await.unwrap();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    // The gateway listens on the modern upstream itself, for the URI its listener watches,
    // acknowledged by the upstream before the gateway acknowledges its client (within the
    // gateway's 5 s bound: waited for, bounded, as a loaded machine can exceed it).
    f.until_counted("the gateway's own listen upstream", |c| {
        c["listen_uris"]["file:///b"] == 1
    })
    .await;
    f.change(&["file:///a", "file:///b"]);
    let got = read_until(&mut p, 3, |m| m["params"]["_meta"][SUB] == 2).await;
    let mut two: Vec<String> = got
        .iter()
        .filter(|m| m["params"]["_meta"][SUB] == 2)
        .map(|m| format!("{} {}", m["method"], m["params"]["uri"]))
        .collect();
    two.sort();
    assert_eq!(
        two,
        [
            "\"notifications/resources/list_changed\" null",
            "\"notifications/resources/updated\" \"file:///b\"",
            "\"notifications/tools/list_changed\" null",
        ],
        "{got:?}"
    );
    assert_eq!(
        got.len(),
        3,
        "the upstream's own stamps and ack never reach the client: {got:?}"
    );
    let seen = read_counts(&f.counts.0);
    assert!(seen["methods"].get("initialize").is_none(), "{seen}");
}

#[tokio::test]
async fn handshake_client_gets_list_changes_of_a_modern_only_upstream() {
    let f = files(CONFIG);
    let mut p = stdio_gateway(&f, &["--mode", "modern-only"]);
    p.initialize(ANSWER).await.expect("initialized");
    f.until_counted("the gateway's own listen", |c| c["listens"] == 1)
        .await;
    f.change(&[]);
    let got = read_until(&mut p, 1, |m| {
        m["method"] == "notifications/tools/list_changed"
    })
    .await;
    let tools = got
        .iter()
        .find(|m| m["method"] == "notifications/tools/list_changed")
        .unwrap();
    assert!(
        tools.get("params").is_none() || tools["params"].get("_meta").is_none(),
        "the upstream's subscription id is not the session's business: {tools}"
    );
    assert!(
        !got.iter()
            .any(|m| m["method"] == "notifications/subscriptions/acknowledged"),
        "{got:?}"
    );
}

// --- HTTP ---------------------------------------------------------------------------------

#[cfg(feature = "http")]
mod http {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A listen POST kept open: its status and the events it carries as they come.
    pub struct Stream {
        pub status: u16,
        pub head: String,
        reader: BufReader<tokio::net::TcpStream>,
    }

    pub async fn open(url: &str, id: Value, filter: Value, accept: &str) -> Stream {
        let rest = url.strip_prefix("http://").unwrap();
        let (authority, path) = rest.split_once('/').unwrap();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": listen_params(filter)}).to_string();
        let head = format!(
            "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
             Accept: {accept}\r\nContent-Length: {}\r\nMCP-Protocol-Version: {MODERN}\r\n\
             Mcp-Method: subscriptions/listen\r\n\r\n",
            body.len()
        );
        let mut s = tokio::net::TcpStream::connect(authority).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(body.as_bytes()).await.unwrap();
        let mut reader = BufReader::new(s);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            let n = tokio::time::timeout(ANSWER, reader.read_line(&mut line))
                .await
                .expect("answered")
                .unwrap();
            if n == 0 || line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        Stream {
            status,
            head: head.to_ascii_lowercase(),
            reader,
        }
    }

    impl Stream {
        /// The next event's message (or a plain body's), `None` at the end or after `within`.
        pub async fn next(&mut self, within: Duration) -> Option<Value> {
            let deadline = tokio::time::Instant::now() + within;
            loop {
                let left = deadline.checked_duration_since(tokio::time::Instant::now())?;
                let mut line = String::new();
                let n = tokio::time::timeout(left, self.reader.read_line(&mut line))
                    .await
                    .ok()?
                    .ok()?;
                if n == 0 {
                    return None;
                }
                let line = line.trim();
                let data = line.strip_prefix("data: ").unwrap_or(line);
                if let Ok(v) = serde_json::from_str::<Value>(data)
                    && v.is_object()
                {
                    return Some(v);
                }
            }
        }
    }

    async fn front(f: &Files, fake: &[&str]) -> (tokio::process::Child, String) {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
        cmd.args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--config",
            f.config.path(),
            "--",
        ]);
        let args = f.fake_args(fake);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cmd.args(fake_upstream_command(&args))
            .env("RUST_LOG", "info");
        let (child, url, _log) = gateway::listening(cmd).await;
        (child, url)
    }

    const SSE: &str = "application/json, text/event-stream";

    #[tokio::test]
    async fn http_listen_streams_changes_caps_and_ends_gracefully() {
        let f = files(&format!("{CONFIG}max_listens = 2\n"));
        let (child, url) = front(&f, &[]).await;

        let refused = open(
            &url,
            json!(1),
            json!({"toolsListChanged": true}),
            "application/json",
        )
        .await;
        assert_eq!(refused.status, 406, "a listen is always a stream");

        let filter = json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]});
        let mut one = open(&url, json!(1), filter.clone(), SSE).await;
        assert_eq!(one.status, 200);
        assert!(
            one.head.contains("content-type: text/event-stream"),
            "{}",
            one.head
        );
        assert!(one.head.contains("x-accel-buffering: no"), "{}", one.head);
        assert!(!one.head.contains("mcp-session-id"), "{}", one.head);
        let ack = one.next(ANSWER).await.unwrap();
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        assert_eq!(ack["params"]["notifications"], filter);
        let mut two = open(&url, json!("b"), json!({"promptsListChanged": true}), SSE).await;
        assert_eq!(two.next(ANSWER).await.unwrap()["params"]["_meta"][SUB], "b");

        // max_listens = 2: a third is refused before it is acknowledged, saying why.
        let mut three = open(&url, json!(3), json!({"toolsListChanged": true}), SSE).await;
        let e = three.next(ANSWER).await.unwrap();
        assert_eq!(e["error"]["code"], -32603, "{e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("max_listens = 2"),
            "{e}"
        );

        f.until_counted("the upstream subscribed before the ack (within 5 s)", |c| {
            c["methods"]["resources/subscribe"] == 1
        })
        .await;
        f.change(&["file:///a"]);
        let mut got = vec![
            one.next(ANSWER).await.unwrap(),
            one.next(ANSWER).await.unwrap(),
        ];
        got.sort_by_key(|m| m["method"].to_string());
        assert_eq!(
            got[0]["method"], "notifications/resources/updated",
            "{got:?}"
        );
        assert_eq!(
            got[0]["params"],
            json!({"_meta": {SUB: 1}, "uri": "file:///a"})
        );
        assert_eq!(got[1]["method"], "notifications/tools/list_changed");
        let p = two.next(ANSWER).await.unwrap();
        assert_eq!(p["method"], "notifications/prompts/list_changed", "{p}");
        assert!(one.next(QUIET).await.is_none(), "nothing else");

        // The client that leaves frees its slot (and the URI is unsubscribed).
        drop(one);
        f.until_counted("resources/unsubscribe sent", |c| {
            c["methods"]["resources/unsubscribe"] == 1
        })
        .await;
        let mut again = open(&url, json!(4), json!({"toolsListChanged": true}), SSE).await;
        let ack = again.next(ANSWER).await.unwrap();
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );

        // The gateway stops: each open listen ends with its graceful result.
        unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
        let end = again.next(ANSWER).await.expect("a graceful end");
        assert_eq!(end["id"], 4);
        assert_eq!(
            end["result"],
            json!({"resultType": "complete", "_meta": {SUB: 4}})
        );
        let end = two.next(ANSWER).await.expect("a graceful end");
        assert_eq!(end["result"]["_meta"][SUB], "b", "{end}");
    }

    #[tokio::test]
    async fn http_listen_through_a_modern_only_http_upstream() {
        let f = files(CONFIG);
        // The fake upstream over HTTP, modern-only: the gateway's own listen is a POST stream.
        let mut fake = tokio::process::Command::new("python3");
        let args = f.fake_args(&["--mode", "modern-only", "--http", "0"]);
        fake.arg(raw_client::fake_upstream_script())
            .args(&args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut fake = fake.spawn().unwrap();
        let mut out = BufReader::new(fake.stdout.take().unwrap());
        let mut upstream = String::new();
        out.read_line(&mut upstream).await.unwrap();
        let upstream = upstream.trim().to_owned();

        std::fs::write(
            &f.config.0,
            format!("{CONFIG}\n[upstream]\nurl = \"{upstream}\"\n"),
        )
        .unwrap();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
        cmd.args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--config",
            f.config.path(),
        ]);
        cmd.env("RUST_LOG", "info");
        let (_gw, url, _log) = gateway::listening(cmd).await;

        let mut s = open(
            &url,
            json!(9),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]}),
            SSE,
        )
        .await;
        let ack = s.next(ANSWER).await.unwrap();
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        f.until_counted("the upstream listened before the ack (within 5 s)", |c| {
            c["listen_uris"]["file:///a"] == 1
        })
        .await;
        f.change(&["file:///a"]);
        let mut got = vec![s.next(ANSWER).await.unwrap(), s.next(ANSWER).await.unwrap()];
        got.sort_by_key(|m| m["method"].to_string());
        assert_eq!(
            got[0]["params"],
            json!({"_meta": {SUB: 9}, "uri": "file:///a"}),
            "{got:?}"
        );
        assert_eq!(
            got[1]["method"], "notifications/tools/list_changed",
            "{got:?}"
        );
        drop(fake);
    }
}
