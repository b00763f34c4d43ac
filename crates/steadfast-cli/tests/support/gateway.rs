//! `steadfast proxy --listen 127.0.0.1:0` as a real process: started with the arguments given,
//! its address read from the line it prints, killed on drop. For tests that drive the HTTP front
//! with an outside client.
#![allow(dead_code)] // each test file uses a different part

use std::time::Duration;

use tokio::io::AsyncBufReadExt;

/// How long the gateway may take to start listening (it starts its upstreams first).
pub const START_BOUND: Duration = Duration::from_secs(30);

/// A running HTTP gateway.
pub struct HttpGateway {
    _child: tokio::process::Child,
    /// The MCP endpoint, e.g. `http://127.0.0.1:40123/mcp`.
    pub url: String,
}

impl HttpGateway {
    /// Starts `steadfast proxy --listen 127.0.0.1:0 <args>` with `env` set, and waits until it
    /// says where it listens and its upstreams are ready (its log is read, so the pipe never
    /// fills).
    pub async fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steadfast"));
        cmd.args(["proxy", "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info");
        let (child, url, _log) = listening(cmd).await;
        let gateway = Self { _child: child, url };
        tokio::time::timeout(START_BOUND, gateway.until_ready())
            .await
            .expect("the gateway's upstreams are ready within the bound");
        gateway
    }

    /// Waits until `/readyz` answers 200, as a load balancer would before sending clients: the
    /// upstreams started with the gateway have finished their handshake.
    async fn until_ready(&self) {
        let addr = self
            .url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        loop {
            if let Ok(mut s) = tokio::net::TcpStream::connect(&addr).await {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let ask =
                    format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
                let mut answer = String::new();
                if s.write_all(ask.as_bytes()).await.is_ok()
                    && s.read_to_string(&mut answer).await.is_ok()
                    && answer.starts_with("HTTP/1.1 200")
                {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The log lines a gateway printed after it said where it listens, as they come.
pub type Log = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// Spawns `cmd` (a `steadfast proxy --listen …`; its stdio is set here, killed on drop), waits
/// within [`START_BOUND`] for the line saying where it listens, and keeps reading its log so it
/// never blocks on a full pipe: (the child, the MCP endpoint's URL, the later log lines).
pub async fn listening(mut cmd: tokio::process::Command) -> (tokio::process::Child, String, Log) {
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("the steadfast binary starts");
    let mut err = tokio::io::BufReader::new(child.stderr.take().expect("piped")).lines();
    let url = tokio::time::timeout(START_BOUND, async {
        while let Ok(Some(line)) = err.next_line().await {
            if let Some(u) = line.strip_prefix("steadfast: serving MCP at ") {
                return u.to_owned();
            }
        }
        panic!("the gateway exited before it listened");
    })
    .await
    .expect("the gateway listens within the bound");
    let log = Log::default();
    let sink = log.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = err.next_line().await {
            sink.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    });
    (child, url, log)
}
