//! `steadfast proxy --admin ADDR`, as a process: the admin console listens beside the MCP front
//! (HTTP or stdio) and shows the upstream; `/metrics` is served there when the console holds
//! the recorder (stdio), while the HTTP front keeps its own; an address beyond loopback
//! without an admin token is refused at start.

#[path = "support/http_client.rs"]
mod http_client;

use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;

const BOUND: Duration = Duration::from_secs(20);

fn fake_upstream() -> String {
    format!(
        "{}/tests/support/fake_upstream.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Starts `steadfast proxy <args> -- python3 fake_upstream.py` and reads from its log the
/// admin console's URL and, with `--listen`, the MCP endpoint's.
async fn start(args: &[&str], mcp: bool) -> (tokio::process::Child, String, Option<String>) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.arg("proxy")
        .args(args)
        .args(["--", "python3", &fake_upstream()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("the binary starts");
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut admin, mut front) = (None, None);
    tokio::time::timeout(BOUND, async {
        while admin.is_none() || (mcp && front.is_none()) {
            let line = err.next_line().await.unwrap().expect("it listens first");
            if let Some(u) = line.strip_prefix("steadfast: admin console at ") {
                admin = Some(u.trim_end_matches('/').to_owned());
            }
            if let Some(u) = line.strip_prefix("steadfast: serving MCP at ") {
                front = Some(u.to_owned());
            }
        }
    })
    .await
    .expect("it says where it listens");
    tokio::spawn(async move { while let Ok(Some(_)) = err.next_line().await {} });
    (child, admin.unwrap(), front)
}

async fn get(url: &str) -> http_client::Reply {
    http_client::exchange("GET", url, &[], "")
        .await
        .expect("an answer")
}

#[tokio::test]
async fn beside_the_http_front() {
    let (_child, admin, front) =
        start(&["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"], true).await;
    let start = Instant::now();
    loop {
        let r = get(&format!("{admin}/")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(r.body.contains("<h2>Upstreams</h2>"), "{}", r.body);
        if r.body.contains("data-state=\"connected\"") && r.body.contains("id=\"tool-flaky\"") {
            break;
        }
        assert!(start.elapsed() < BOUND, "never connected: {}", r.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // One recorder in the process: the HTTP front and the console serve the same scrape.
    let front = front.unwrap().replace("/mcp", "/metrics");
    let from_front = get(&front).await;
    assert_eq!(from_front.status, 200);
    let r = get(&format!("{admin}/metrics")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let series = "steadfast_upstream_connected{";
    assert!(from_front.body.contains(series), "{}", from_front.body);
    assert!(r.body.contains(series), "{}", r.body);
}

#[tokio::test]
async fn beside_stdio_with_the_metrics() {
    let (_child, admin, _) = start(&["--admin", "127.0.0.1:0"], false).await;
    // No client yet: a stdio gateway starts its upstream at the first `initialize`.
    let start = Instant::now();
    let page = loop {
        let r = get(&format!("{admin}/")).await;
        if r.body.contains("data-state=\"not started\"") {
            break r.body;
        }
        assert!(start.elapsed() < BOUND, "{}", r.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(page.contains("Sessions"), "{page}");
    let r = get(&format!("{admin}/metrics")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4"));
}

#[tokio::test]
async fn beyond_loopback_needs_a_token() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"))
        .args([
            "proxy",
            "--admin",
            "0.0.0.0:0",
            "--",
            "python3",
            &fake_upstream(),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("beyond loopback"), "{err}");
}

/// Several upstreams: each listed with its tools under the names clients see.
#[tokio::test]
async fn several_upstreams_by_name() {
    let dir = std::env::temp_dir().join(format!("steadfast-admin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("several.toml");
    let script = fake_upstream();
    std::fs::write(
        &config,
        format!(
            "[upstreams.alpha]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\n\
             [upstreams.beta]\ncommand = \"python3\"\nargs = [\"{script}\"]\n"
        ),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--config",
    ])
    .arg(&config)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let admin = tokio::time::timeout(BOUND, async {
        loop {
            let line = err.next_line().await.unwrap().expect("it listens first");
            if let Some(u) = line.strip_prefix("steadfast: admin console at ") {
                return u.trim_end_matches('/').to_owned();
            }
        }
    })
    .await
    .unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = err.next_line().await {} });
    let start = Instant::now();
    loop {
        let r = get(&format!("{admin}/")).await;
        let both = ["alpha_echo", "beta_echo"]
            .iter()
            .all(|t| r.body.contains(&format!("id=\"tool-{t}\"")));
        if both && r.body.matches("data-state=\"connected\"").count() == 2 {
            assert!(
                r.body.contains("<th scope=\"col\">Upstream</th>"),
                "{}",
                r.body
            );
            break;
        }
        assert!(start.elapsed() < BOUND, "{}", r.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}
