//! A scriptable MCP server in the test's own process, reached by the gateway as a
//! `steadfast_mcp::Upstream::InProcess` over `tokio::io::duplex` pipes.
//!
//! It answers like the CLI tests' `fake_upstream.py` in its normal mode (an `echo` tool and a
//! few with replay hints, `initialize` in the handshake era, `server/discover` refused unless
//! [`Fake::modern`]), and a test scripts anything else with [`Fake::on`]: answers, delays,
//! errors, silence, a death of the connection, server requests and notifications before an
//! answer. It counts starts and records every message it received. Delays are
//! `tokio::time::sleep`, so a test on the paused clock runs them in no real time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The modern revision's version string.
pub const MODERN: &str = "2026-07-28";
/// The envelope's version key.
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// Handshake-era versions the fake knows (the first is its default).
const KNOWN: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// What the fake does with one request.
pub enum Step {
    /// Answers with this result.
    Result(Value),
    /// Answers with this JSON-RPC error.
    Error(i64, String),
    /// Waits, then does the step.
    After(Duration, Box<Step>),
    /// Never answers.
    Silence,
    /// Closes the connection, as a server process that dies.
    Die,
    /// Writes these messages (notifications, server requests), then does the step.
    Send(Vec<Value>, Box<Step>),
    /// What the fake would do without the script.
    Default,
    /// Does the first step, then the second (an answer, then [`Step::Die`]).
    And(Box<Step>, Box<Step>),
}

impl Step {
    /// `step` after `delay`.
    pub fn after(delay: Duration, step: Step) -> Self {
        Self::After(delay, Box::new(step))
    }

    /// A tool result with one text block.
    pub fn text(text: &str) -> Self {
        Self::Result(text_result(text))
    }
}

/// A tool result with one text block (`isError: false`, as `fake_upstream.py` writes it).
pub fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

type Script = Arc<dyn Fn(&Value) -> Step + Send + Sync>;

struct Live {
    out: mpsc::UnboundedSender<Value>,
    killed: CancellationToken,
}

struct Inner {
    name: String,
    modern: bool,
    script: Mutex<Option<Script>>,
    refuse: Mutex<Option<String>>,
    starts: AtomicUsize,
    seen: Mutex<Vec<Value>>,
    /// Open connections (one per gateway that started it).
    live: Mutex<Vec<Live>>,
    /// How long a new connection reads nothing (a server still starting).
    start_delay: Mutex<Duration>,
}

/// The fake server; clones share it.
#[derive(Clone)]
pub struct Fake(Arc<Inner>);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Fake {
    /// A handshake-era server (it refuses `server/discover`).
    pub fn new(name: &str) -> Self {
        Self::build(name, false)
    }

    /// A server of MCP 2026-07-28 only: `server/discover` answered, `initialize` refused.
    pub fn modern(name: &str) -> Self {
        Self::build(name, true)
    }

    fn build(name: &str, modern: bool) -> Self {
        Self(Arc::new(Inner {
            name: name.to_owned(),
            modern,
            script: Mutex::new(None),
            refuse: Mutex::new(None),
            starts: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
            live: Mutex::new(Vec::new()),
            start_delay: Mutex::new(Duration::ZERO),
        }))
    }

    /// Scripts the answers: `script` sees every request and says what to do
    /// ([`Step::Default`] for the normal answer).
    pub fn on(self, script: impl Fn(&Value) -> Step + Send + Sync + 'static) -> Self {
        *lock(&self.0.script) = Some(Arc::new(script));
        self
    }

    /// Each new connection reads nothing for `delay` (as a server that takes that long to
    /// start: `fake_upstream.py --start-delay-ms`).
    pub fn start_delay(self, delay: Duration) -> Self {
        *lock(&self.0.start_delay) = delay;
        self
    }

    /// How many requests carried the 2026-07-28 envelope at `version`.
    pub fn envelopes(&self, version: &str) -> usize {
        lock(&self.0.seen)
            .iter()
            .filter(|m| m.get("id").is_some() && m["params"]["_meta"][VERSION_KEY] == version)
            .count()
    }

    /// The upstream the gateway is given.
    pub fn upstream(&self) -> steadfast_mcp::Upstream {
        let me = self.clone();
        steadfast_mcp::Upstream::InProcess(steadfast_mcp::InProcess::new(
            self.0.name.clone(),
            move || me.connect(),
        ))
    }

    /// From now on a start fails with `why` (`None`: starts succeed again).
    pub fn refuse(&self, why: Option<&str>) {
        *lock(&self.0.refuse) = why.map(str::to_owned);
    }

    /// Starts asked for so far, refused ones included.
    pub fn starts(&self) -> usize {
        self.0.starts.load(Ordering::SeqCst)
    }

    /// Ends every open connection, as a server killed with SIGKILL.
    pub fn kill(&self) {
        for live in lock(&self.0.live).drain(..) {
            live.killed.cancel();
        }
    }

    /// Whether a connection is open.
    pub fn connected(&self) -> bool {
        lock(&self.0.live).iter().any(|l| !l.killed.is_cancelled())
    }

    /// Writes `message` on every open connection (a notification or a server request).
    pub fn send(&self, message: Value) {
        for live in lock(&self.0.live).iter() {
            let _ = live.out.send(message.clone());
        }
    }

    /// Every message received so far.
    pub fn seen(&self) -> Vec<Value> {
        lock(&self.0.seen).clone()
    }

    /// How many messages with `method` were received.
    pub fn count(&self, method: &str) -> usize {
        lock(&self.0.seen)
            .iter()
            .filter(|m| m["method"] == method)
            .count()
    }

    /// How many `tools/call`s of `tool` were received.
    pub fn calls(&self, tool: &str) -> usize {
        lock(&self.0.seen)
            .iter()
            .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
            .count()
    }

    fn connect(&self) -> std::io::Result<steadfast_mcp::Pipe> {
        self.0.starts.fetch_add(1, Ordering::SeqCst);
        if let Some(why) = lock(&self.0.refuse).clone() {
            return Err(std::io::Error::other(why));
        }
        let (gateway_side, server_side) = tokio::io::duplex(1 << 20);
        let (out, rx) = mpsc::unbounded_channel();
        let killed = CancellationToken::new();
        let mut live = lock(&self.0.live);
        live.retain(|l| !l.killed.is_cancelled());
        live.push(Live {
            out: out.clone(),
            killed: killed.clone(),
        });
        drop(live);
        tokio::spawn(self.clone().serve(server_side, out, rx, killed));
        let (reader, writer) = tokio::io::split(gateway_side);
        Ok(steadfast_mcp::Pipe {
            reader: Box::new(reader),
            writer: Box::new(writer),
        })
    }

    async fn serve(
        self,
        io: tokio::io::DuplexStream,
        out: mpsc::UnboundedSender<Value>,
        mut rx: mpsc::UnboundedReceiver<Value>,
        killed: CancellationToken,
    ) {
        let (read, mut write) = tokio::io::split(io);
        let writer_killed = killed.clone();
        let writer = tokio::spawn(async move {
            loop {
                // Biased: what was written before the end still goes out.
                let m = tokio::select! {
                    biased;
                    m = rx.recv() => match m { Some(m) => m, None => break },
                    _ = writer_killed.cancelled() => break,
                };
                let mut line = m.to_string().into_bytes();
                line.push(b'\n');
                if write.write_all(&line).await.is_err() {
                    break;
                }
            }
        });
        let delay = *lock(&self.0.start_delay);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = killed.cancelled() => {}
        }
        let mut lines = BufReader::new(read).lines();
        loop {
            let line = tokio::select! {
                l = lines.next_line() => l,
                _ = killed.cancelled() => break,
            };
            let Ok(Some(line)) = line else { break };
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            lock(&self.0.seen).push(msg.clone());
            if msg.get("method").is_none() || msg.get("id").is_none() {
                continue;
            }
            let step = match lock(&self.0.script).clone() {
                Some(script) => script(&msg),
                None => Step::Default,
            };
            let (me, out, killed) = (self.clone(), out.clone(), killed.clone());
            tokio::spawn(async move { me.run(msg, step, out, killed).await });
        }
        // The server's end: its output closes too.
        killed.cancel();
        let _ = writer.await;
    }

    async fn run(
        self,
        msg: Value,
        step: Step,
        out: mpsc::UnboundedSender<Value>,
        killed: CancellationToken,
    ) {
        let id = msg["id"].clone();
        let mut steps = std::collections::VecDeque::from([step]);
        while let Some(step) = steps.pop_front() {
            match step {
                Step::Default => steps.push_front(self.default_step(&msg)),
                Step::And(first, then) => {
                    steps.push_front(*then);
                    steps.push_front(*first);
                }
                Step::After(d, next) => {
                    tokio::select! {
                        _ = tokio::time::sleep(d) => {}
                        _ = killed.cancelled() => return,
                    }
                    steps.push_front(*next);
                }
                Step::Send(messages, next) => {
                    for m in messages {
                        let _ = out.send(m);
                    }
                    steps.push_front(*next);
                }
                Step::Silence => return,
                Step::Die => {
                    killed.cancel();
                    return;
                }
                Step::Result(r) => {
                    let _ = out.send(json!({"jsonrpc": "2.0", "id": id, "result": r}));
                }
                Step::Error(code, message) => {
                    let _ = out.send(json!({"jsonrpc": "2.0", "id": id,
                                            "error": {"code": code, "message": message}}));
                }
            }
        }
    }

    fn capabilities(&self) -> Value {
        json!({"tools": {"listChanged": true}, "logging": {}})
    }

    /// A modern-only server's refusals (`fake_upstream.py --mode modern-only`): `initialize`
    /// or another version -32022, a request without the envelope -32602.
    fn modern_refusal(&self, msg: &Value) -> Option<Step> {
        let params = &msg["params"];
        let meta = &params["_meta"];
        let version = meta[VERSION_KEY].as_str();
        if msg["method"] == "initialize" || version.is_some_and(|v| v != MODERN) {
            let requested = version
                .map(str::to_owned)
                .or_else(|| params["protocolVersion"].as_str().map(str::to_owned));
            return Some(Step::Send(
                vec![json!({"jsonrpc": "2.0", "id": msg["id"], "error": {
                    "code": -32022, "message": "Unsupported protocol version",
                    "data": {"supported": [MODERN], "requested": requested}}})],
                Box::new(Step::Silence),
            ));
        }
        if version.is_none()
            || meta
                .get("io.modelcontextprotocol/clientCapabilities")
                .is_none()
        {
            return Some(Step::Error(
                -32602,
                "params._meta lacks the 2026-07-28 envelope".into(),
            ));
        }
        None
    }

    /// The normal answer, as `fake_upstream.py` gives it.
    fn default_step(&self, msg: &Value) -> Step {
        let method = msg["method"].as_str().unwrap_or_default();
        let server_info = json!({"name": self.0.name, "version": "1.0.0"});
        if self.0.modern {
            if let Some(refused) = self.modern_refusal(msg) {
                return refused;
            }
            if method == "tools/call" {
                // As the Python SDK 2.x's servers mark a call's result.
                return match self.normal_step(msg, &server_info) {
                    Step::Result(mut r) => {
                        r["resultType"] = json!("complete");
                        r["_meta"] = json!({"io.modelcontextprotocol/serverInfo": server_info});
                        Step::Result(r)
                    }
                    other => other,
                };
            }
        }
        self.normal_step(msg, &server_info)
    }

    fn normal_step(&self, msg: &Value, server_info: &Value) -> Step {
        let params = &msg["params"];
        let method = msg["method"].as_str().unwrap_or_default();
        match method {
            "initialize" => {
                let asked = params["protocolVersion"].as_str().unwrap_or_default();
                let version = KNOWN.iter().find(|v| **v == asked).unwrap_or(&KNOWN[0]);
                Step::Result(json!({
                    "protocolVersion": version,
                    "capabilities": self.capabilities(),
                    "serverInfo": server_info,
                    "instructions": "A fake MCP server in the test's process.",
                }))
            }
            "server/discover" if self.0.modern => Step::Result(json!({
                "resultType": "complete",
                "supportedVersions": [MODERN],
                "capabilities": self.capabilities(),
                "_meta": {"io.modelcontextprotocol/serverInfo": server_info},
                "instructions": "A modern-only fake.",
            })),
            "ping" | "logging/setLevel" => Step::Result(json!({})),
            "tools/list" => Step::Result(json!({"tools": tools()})),
            "tools/call" => {
                let name = params["name"].as_str().unwrap_or_default();
                match name {
                    "echo" => Step::text(params["arguments"]["text"].as_str().unwrap_or("")),
                    "lookup" | "charge" | "flaky" => Step::text(name),
                    _ => Step::Error(-32602, format!("Unknown tool: {name}")),
                }
            }
            _ => Step::Error(-32601, format!("Method not found: {method}")),
        }
    }
}

/// The tools the fake lists: `echo` (read-only), `lookup` (read-only, idempotent), `charge`
/// (not idempotent), `flaky` (idempotent).
pub fn tools() -> Value {
    let object = json!({"type": "object"});
    json!([
        {"name": "echo", "description": "Returns its `text` argument.",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
         "annotations": {"readOnlyHint": true}},
        {"name": "lookup", "description": "Reads a record.", "inputSchema": object,
         "annotations": {"readOnlyHint": true, "idempotentHint": true}},
        {"name": "charge", "description": "Charges a card.", "inputSchema": object,
         "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false}},
        {"name": "flaky", "description": "Fails, then succeeds.", "inputSchema": object,
         "annotations": {"readOnlyHint": false, "idempotentHint": true}},
    ])
}
