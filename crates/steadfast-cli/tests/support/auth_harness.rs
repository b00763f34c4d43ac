//! Process harness of tests/auth.rs: the `oidc-provider` authorization server
//! (crates/steadfast-oauth/tests/support/provider.mjs), the fake upstream over HTTP, gateway
//! processes with `[auth]`, and forged tokens.
#![allow(dead_code)] // not every helper is used by every test

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::http_client::{Reply, exchange};
use crate::raw_client::fake_upstream_command;
use crate::temp;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const RESOURCE: &str = "https://mcp.test/mcp";
pub const STATIC: &str = "static-operator-token";
pub const BOUND: Duration = Duration::from_secs(30);

/// The authorization server, killed on drop.
pub struct Provider {
    pub issuer: String,
    pub secret: String,
    _child: Child,
}

pub fn form(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                b' ' => "+".into(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

impl Provider {
    pub async fn start() -> Self {
        let Ok(dir) = std::env::var("STEADFAST_TEST_OIDC") else {
            panic!("set STEADFAST_TEST_OIDC (scripts/oidc-provider.sh --install)")
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let secret = format!("s{nanos:x}{}", std::process::id());
        let mut child = Command::new("node")
            .arg(format!("{dir}/provider.mjs"))
            .env("OIDC_CLIENT_SECRET", &secret)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("node starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let issuer = tokio::time::timeout(BOUND, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(issuer) = line.strip_prefix("READY ") {
                    return issuer.to_owned();
                }
            }
            panic!("provider.mjs exited before READY")
        })
        .await
        .expect("the provider is ready in time");
        // Keep draining stdout: a closed pipe would kill node at its next log line.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            issuer,
            secret,
            _child: child,
        }
    }

    /// A client-credentials access token for `scope` and `resource`.
    pub async fn token(&self, scope: &str, resource: &str) -> String {
        self.token_for("gateway", scope, resource).await
    }

    /// [`Self::token`] for another client (`gateway` or `other`: two subjects).
    pub async fn token_for(&self, client: &str, scope: &str, resource: &str) -> String {
        let basic = STANDARD.encode(format!("{client}:{}", self.secret));
        let auth = format!("Basic {basic}");
        let body = form(&[
            ("grant_type", "client_credentials"),
            ("scope", scope),
            ("resource", resource),
        ]);
        let r = exchange(
            "POST",
            &format!("{}/token", self.issuer),
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &body,
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let v: Value = serde_json::from_str(&r.body).unwrap();
        v["access_token"].as_str().unwrap().to_owned()
    }

    /// A JWT with exactly `claims` (and `header`'s fields over `typ: at+jwt`), signed with the
    /// provider's current key: the shapes other identity providers issue.
    pub async fn sign(&self, header: Value, claims: Value) -> String {
        let body = json!({"header": header, "claims": claims}).to_string();
        let r = exchange("POST", &format!("{}/admin/sign", self.issuer), &[], &body)
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let v: Value = serde_json::from_str(&r.body).unwrap();
        v["token"].as_str().unwrap().to_owned()
    }

    pub async fn admin(&self, what: &str) {
        let r = exchange("POST", &format!("{}/admin/{what}", self.issuer), &[], "")
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }

    pub async fn jwks(&self) -> Value {
        let r = exchange("GET", &format!("{}/jwks", self.issuer), &[], "")
            .await
            .unwrap();
        serde_json::from_str(&r.body).unwrap()
    }
}

/// The fake upstream over streamable HTTP, counting what it sees in `counts`; it also lists
/// two prompts and three resources (from a lists file, removed with the returned `Temp`).
pub async fn http_upstream(counts: &temp::Temp) -> (Child, String, temp::Temp) {
    let lists = temp::Temp::new("auth-lists");
    std::fs::write(
        &lists.0,
        json!({"prompts": ["greet", "secret_prompt"], "resources": ["file:///docs/a.md", "file:///docs/b.md", "file:///etc/passwd"]}).to_string(),
    )
    .unwrap();
    let mut server = Command::new("python3")
        .args(
            fake_upstream_command(&[
                "--http",
                "0",
                "--count-file",
                counts.path(),
                "--lists-file",
                lists.path(),
            ])
            .iter()
            .skip(1),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = BufReader::new(server.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(BOUND, out.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    (server, url.trim().to_owned(), lists)
}

/// A gateway process: its URL and its stderr so far.
pub struct Gateway {
    _child: Child,
    pub url: String,
    pub log: Arc<Mutex<Vec<String>>>,
    _config: temp::Temp,
}

/// `steadfast proxy --listen` with `config` (static token [`STATIC`] too), at -v.
pub async fn gateway(config: &str, listen: &str) -> Gateway {
    gateway_env(config, listen, &[]).await
}

/// [`gateway`] with more environment variables.
pub async fn gateway_env(config: &str, listen: &str, env: &[(&str, &str)]) -> Gateway {
    spawn_gateway(config, listen, env, true).await
}

/// A gateway, with the static token [`STATIC`] or without any.
pub async fn spawn_gateway(
    config: &str,
    listen: &str,
    env: &[(&str, &str)],
    static_token: bool,
) -> Gateway {
    let file = temp::Temp::new("auth-gw");
    std::fs::write(&file.0, config).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_steadfast"));
    cmd.args(["-v", "proxy", "--listen", listen]);
    if static_token {
        cmd.args(["--token-env", "FRONT_TOKEN"]);
    }
    let mut child = cmd
        .arg("--config")
        .arg(&file.0)
        .env("FRONT_TOKEN", STATIC)
        .envs(env.iter().copied())
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    let log = Arc::new(Mutex::new(Vec::new()));
    let url = tokio::time::timeout(BOUND, async {
        while let Ok(Some(line)) = err.next_line().await {
            if let Some(u) = line.strip_prefix("steadfast: serving MCP at ") {
                return u.to_owned();
            }
            log.lock().unwrap().push(line);
        }
        panic!("the gateway did not start: {:?}", log.lock().unwrap());
    })
    .await
    .unwrap();
    let sink = log.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = err.next_line().await {
            sink.lock().unwrap().push(line);
        }
    });
    Gateway {
        _child: child,
        url,
        log,
        _config: file,
    }
}

pub fn auth_config(issuer: &str, extra: &str, upstream: &str) -> String {
    format!(
        "[upstream]\nurl = \"{upstream}\"\n\n[auth]\nissuer = \"{issuer}\"\nresource = \"{RESOURCE}\"\n\
         scopes_supported = [\"tools:read\", \"tools:write\"]\njwks_refresh_interval = \"0s\"\n\
         fetch_timeout = \"1s\"\n{extra}\n\
         [access.\"tools:read\"]\ntools = [\"echo\", \"lookup\"]\nprompts = [\"greet\"]\n\
         resources = [\"file:///docs/*\"]\n\n\
         [access.\"tools:write\"]\ntools = [\"echo\", \"lookup\", \"charge\"]\n"
    )
}

pub fn init_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

impl Gateway {
    pub async fn post(&self, token: Option<&str>, session: Option<&str>, body: &Value) -> Reply {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(a) = &auth {
            headers.push(("Authorization", a));
        }
        if let Some(s) = session {
            headers.push(("Mcp-Session-Id", s));
        }
        exchange("POST", &self.url, &headers, &body.to_string())
            .await
            .unwrap()
    }

    pub async fn initialize(&self, token: &str) -> String {
        let r = self.post(Some(token), None, &init_body()).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.header("mcp-session-id").expect("a session id").to_owned()
    }

    pub async fn tools(&self, token: &str, sid: &str) -> Vec<String> {
        let r = self
            .post(
                Some(token),
                Some(sid),
                &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let mut names: Vec<String> = r.answer()["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", r.body))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    }

    pub async fn call(&self, token: &str, sid: &str, tool: &str) -> Reply {
        self.post(
            Some(token),
            Some(sid),
            &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": tool, "arguments": {"text": "hi"}}}),
        )
        .await
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> Reply {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        exchange("GET", &self.url.replace("/mcp", path), &headers, "")
            .await
            .unwrap()
    }

    /// Whether the log has a line with every one of `needles`.
    pub fn logged(&self, needles: &[&str]) -> bool {
        self.log
            .lock()
            .unwrap()
            .iter()
            .any(|l| needles.iter().all(|n| l.contains(n)))
    }

    /// Asserts a refusal: 401 `invalid_token` with the metadata URL, and the check in the log.
    pub async fn assert_refused(&self, token: &str, check: &str) {
        let r = self.post(Some(token), None, &init_body()).await;
        assert_eq!(r.status, 401, "{check}: {}", r.body);
        let challenge = r.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains("error=\"invalid_token\"")
                && challenge.contains(
                    "resource_metadata=\"https://mcp.test/.well-known/oauth-protected-resource/mcp\""
                ),
            "{check}: {challenge}"
        );
        // The client hears only `invalid_token`, never which check failed.
        assert!(!r.body.contains(check), "{}", r.body);
        self.wait_log(&["a token was refused", check]).await;
    }

    pub async fn wait_log(&self, needles: &[&str]) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !self.logged(needles) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "never logged {needles:?}: {:?}",
                self.log.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub fn b64json(part: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
}

/// `token` with its header replaced by `header` (payload and signature kept).
pub fn reheader(token: &str, header: &Value) -> String {
    let mut parts = token.split('.');
    let _ = parts.next();
    let rest: Vec<&str> = parts.collect();
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        rest.join(".")
    )
}

/// An HS256 token over `payload`, keyed with `key` (here: the server's public key).
pub fn hs256(payload: &str, key: &[u8]) -> String {
    use hmac::Mac as _;
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","typ":"at+jwt"}"#);
    let input = format!("{header}.{payload}");
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(input.as_bytes());
    let sig = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("{input}.{sig}")
}

/// A free loopback port (for a gateway whose resource URI must be its own URL).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The status of an exchange whose answer may be an endless stream (`GET /mcp`): the status
/// line only, read within [`BOUND`].
pub async fn status_only(url: &str, method: &str, headers: &[(&str, &str)]) -> u16 {
    use tokio::io::AsyncWriteExt;
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut head =
        format!("{method} /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: 0\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let io = async {
        let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).await.unwrap();
        line
    };
    let line = tokio::time::timeout(BOUND, io)
        .await
        .expect("a status line");
    line.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {line:?}"))
}
