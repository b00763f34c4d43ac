//! `steadfast example-server`: a deliberately unreliable MCP server for the demo, the tests,
//! and for trying a policy by hand.
//!
//! It also lists one prompt (`triage`), to show requests other than tools passing through;
//! getting it fails with an error that leaks credentials, for the proxy to redact.
//!
//! Every failure is deterministic (counters, not dice), so a test can say exactly what must
//! happen. Tools:
//!
//! | tool | annotations | behaviour |
//! |---|---|---|
//! | `echo` | read-only | returns its arguments |
//! | `flaky_search` | read-only | `503 Service Unavailable` on 2 calls of every 3 |
//! | `rate_limited` | idempotent | `429 Too Many Requests` on every other call |
//! | `read_file` | read-only | `file not found: …` (a business failure) with a token and a stack trace in the text |
//! | `strict` | read-only | a JSON-RPC `invalid params` error |
//! | `slow_report` | read-only | takes `seconds` (default 3) and reports progress every second |
//! | `flaky_report` | read-only | reports progress 0, 1 then fails (502); the next call reports 0, 1, 2 and succeeds |
//! | `hang` | read-only | never answers; counts `hang:cancelled` when the client cancels |
//! | `garbage` | read-only | writes a line that is not JSON-RPC to stdout, then answers |
//! | `send_email` | none | answers after `delay_ms` (default 0); a side effect, never idempotent |
//! | `crash` | none | exits the process mid-call |
//! | `log` | read-only | sends a `notifications/message` with its `note` |
//! | `calls` | read-only | how many times each tool was called, since this process started |

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct Flaky {
    calls: Arc<Mutex<BTreeMap<String, u32>>>,
    search: Arc<AtomicU32>,
    limited: Arc<AtomicU32>,
    report: Arc<AtomicU32>,
}

fn schema(props: Value) -> Arc<serde_json::Map<String, Value>> {
    let Value::Object(map) = json!({"type": "object", "properties": props}) else {
        unreachable!("a json! object literal is an object")
    };
    Arc::new(map)
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s.into())])
}

fn tool_error(s: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(s.into())])
}

fn tools() -> Vec<Tool> {
    let ro = ToolAnnotations::new().read_only(true);
    vec![
        Tool::new("echo", "Returns its arguments", schema(json!({}))).with_annotations(ro.clone()),
        Tool::new(
            "flaky_search",
            "Searches; fails with 503 on two calls of every three",
            schema(json!({"query": {"type": "string"}})),
        )
        .with_annotations(ro.clone()),
        Tool::new(
            "rate_limited",
            "Rate limited on every other call",
            schema(json!({})),
        )
        .with_annotations(ToolAnnotations::new().idempotent(true)),
        Tool::new(
            "read_file",
            "Reads a file that does not exist",
            schema(json!({"path": {"type": "string"}})),
        )
        .with_annotations(ro.clone()),
        Tool::new(
            "strict",
            "Rejects every call as invalid params",
            schema(json!({})),
        )
        .with_annotations(ro.clone()),
        Tool::new(
            "slow_report",
            "Takes `seconds` seconds, reporting progress",
            schema(json!({"seconds": {"type": "number"}})),
        )
        .with_annotations(ro.clone()),
        Tool::new(
            "flaky_report",
            "Reports progress, then fails with 502 on every other call",
            schema(json!({})),
        )
        .with_annotations(ro.clone()),
        Tool::new("hang", "Never answers", schema(json!({}))).with_annotations(ro.clone()),
        Tool::new(
            "send_email",
            "Sends an e-mail (a side effect)",
            schema(json!({"to": {"type": "string"}, "delay_ms": {"type": "number"}})),
        )
        .with_annotations(ToolAnnotations::new().idempotent(false).destructive(false)),
        Tool::new(
            "crash",
            "Exits the server process mid-call",
            schema(json!({})),
        ),
        Tool::new(
            "calls",
            "Call counts per tool since this process started",
            schema(json!({})),
        )
        .with_annotations(ro),
    ]
}

impl Flaky {
    fn count(&self, key: &str) {
        *self
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.to_owned())
            .or_default() += 1;
    }
}

impl ServerHandler for Flaky {
    // `enable_logging`: deprecated by SEP-2577, still part of what the proxy must relay.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_logging()
            .build();
        if let Some(t) = capabilities.tools.as_mut() {
            t.list_changed = Some(true);
        }
        ServerConfig::new(capabilities)
            .with_server_info(rmcp::model::Implementation::new(
                "steadfast-example-server",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("An unreliable server for trying steadfast")
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        Ok(rmcp::model::ListPromptsResult::with_all_items(vec![
            rmcp::model::Prompt::new("triage", Some("Triage an incident"), None),
        ]))
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        // A careless error that leaks a credential, for the proxy to redact.
        Err(ErrorData::invalid_params(
            format!(
                "prompt `{}` failed: GET https://admin:hunter22@internal.example.com/prompts \
                 (Authorization: Bearer sk-live-abcdefghijklmnopqrstuvwx)",
                request.name
            ),
            Some(json!({"token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"})),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        self.count(&name);
        let result = match name.as_str() {
            "echo" => text(args.to_string()),
            "flaky_search" => {
                let n = self.search.fetch_add(1, Ordering::SeqCst);
                if n % 3 < 2 {
                    tool_error("503 Service Unavailable: search backend overloaded")
                } else {
                    text(format!(
                        "results for {}",
                        args["query"].as_str().unwrap_or("")
                    ))
                }
            }
            "rate_limited" => {
                if self
                    .limited
                    .fetch_add(1, Ordering::SeqCst)
                    .is_multiple_of(2)
                {
                    tool_error("429 Too Many Requests")
                } else {
                    text("ok")
                }
            }
            "read_file" => tool_error(format!(
                "file not found: {}\n    at readFile (/srv/app/node_modules/fs/index.js:42:13)\n    \
                 request had Authorization: Bearer sk-live-abcdefghijklmnopqrstuvwx",
                args["path"].as_str().unwrap_or("?")
            )),
            "strict" => {
                return Err(ErrorData::invalid_params(
                    "argument `mode` is required",
                    None,
                ));
            }
            "slow_report" => {
                let seconds = args["seconds"].as_f64().unwrap_or(3.0).clamp(0.0, 600.0) as u32;
                let token = context.meta.get_progress_token();
                for i in 0..seconds {
                    if let Some(token) = &token {
                        let p = ProgressNotificationParam::new(token.clone(), f64::from(i))
                            .with_total(f64::from(seconds))
                            .with_message(format!("step {} of {seconds}", i + 1));
                        let _ = context.peer.notify_progress(p).await;
                    }
                    tokio::select! {
                        _ = context.ct.cancelled() => return Err(ErrorData::internal_error("cancelled", None)),
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
                text(format!("report done in {seconds}s"))
            }
            "flaky_report" => {
                // Odd calls report two steps then fail transiently; even calls report three.
                let n = self.report.fetch_add(1, Ordering::SeqCst);
                let steps = if n.is_multiple_of(2) { 2 } else { 3 };
                if let Some(token) = context.meta.get_progress_token() {
                    for i in 0..steps {
                        let p = ProgressNotificationParam::new(token.clone(), f64::from(i));
                        let _ = context.peer.notify_progress(p).await;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                if n.is_multiple_of(2) {
                    tool_error("502 Bad Gateway")
                } else {
                    text("report done")
                }
            }
            "hang" => {
                context.ct.cancelled().await;
                self.count("hang:cancelled");
                return Err(ErrorData::internal_error("cancelled", None));
            }
            "garbage" => {
                // A line that is not JSON-RPC, on the protocol stream.
                use std::io::Write as _;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(b"this is not json\n");
                let _ = out.flush();
                text("ok after garbage")
            }
            "send_email" => {
                let delay = args["delay_ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(delay)).await;
                text(format!("sent to {}", args["to"].as_str().unwrap_or("?")))
            }
            "crash" => {
                eprintln!("example-server: crashing on purpose");
                std::process::exit(3);
            }
            // Logging is deprecated by SEP-2577 but still spoken by current servers.
            #[allow(deprecated)]
            "log" => {
                let msg = rmcp::model::LoggingMessageNotificationParam::new(
                    rmcp::model::LoggingLevel::Warning,
                    json!({"note": args["note"]}),
                );
                let _ = context.peer.notify_logging_message(msg).await;
                text("logged")
            }
            "calls" => {
                let calls = self
                    .calls
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                text(serde_json::to_string(&calls).unwrap_or_default())
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{other}`"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

/// Serves the example server over streamable HTTP at `addr` until killed, printing the URL
/// (stdout is not the protocol in this mode). The counters are the process's: rmcp serves a
/// request of an MCP 2026-07-28 client (no session) with a fresh handler each time, so
/// per-handler counters would restart at every call and `flaky_search` would never succeed.
#[cfg(feature = "http")]
pub async fn run_http(addr: std::net::SocketAddr) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let mut config = StreamableHttpServerConfig::default();
    config.sse_keep_alive = None;
    let service = StreamableHttpService::new(
        {
            let shared = Flaky::default();
            move || Ok(shared.clone())
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{}/mcp", listener.local_addr()?)?;
        out.flush()?;
    }
    loop {
        let (stream, _) = listener.accept().await?;
        let svc = hyper_util::service::TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, svc)
                .await;
        });
    }
}

/// Serves the example server on stdio until the client disconnects.
pub async fn run() -> anyhow::Result<()> {
    let server = Flaky::default().serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(())
}
