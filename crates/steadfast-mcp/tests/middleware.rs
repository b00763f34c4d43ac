//! `Resilient` around a real rmcp server, called by a real rmcp client over in-memory pipes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::json;
use steadfast::{Metrics, RetryPolicy};
use steadfast_mcp::{Resilient, RetryOnIsError, ToolPolicy};

#[derive(Clone, Default)]
struct Server {
    flaky: Arc<AtomicU32>,
    effect: Arc<AtomicU32>,
    business: Arc<AtomicU32>,
}

fn tool(name: &'static str, annotations: Option<ToolAnnotations>) -> Tool {
    let serde_json::Value::Object(schema) = json!({"type": "object"}) else {
        unreachable!()
    };
    let t = Tool::new(name, name, Arc::new(schema));
    match annotations {
        Some(a) => t.with_annotations(a),
        None => t,
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        match name {
            "flaky" => Some(tool("flaky", Some(ToolAnnotations::new().read_only(true)))),
            "effect" => Some(tool("effect", None)),
            _ => None,
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let r = match request.name.as_ref() {
            "flaky" => {
                if self.flaky.fetch_add(1, Ordering::SeqCst) < 2 {
                    CallToolResult::error(vec![ContentBlock::text("503 Service Unavailable")])
                } else {
                    CallToolResult::success(vec![ContentBlock::text("ok")])
                }
            }
            "effect" => {
                if self.effect.fetch_add(1, Ordering::SeqCst) == 0 {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                CallToolResult::success(vec![ContentBlock::text("done")])
            }
            "business" => {
                self.business.fetch_add(1, Ordering::SeqCst);
                CallToolResult::error(vec![ContentBlock::text("no such order: 42")])
            }
            "leaky" => {
                // A tool's own failure that echoes its credentials (the generic layer's kind:
                // no built-in rule names `sshpass -p`).
                let mut r = CallToolResult::error(vec![
                    ContentBlock::text(
                        "sshpass -p q8Zx7R2pLk5TmW3v ssh deploy@web1 failed\n    at run (/app/src/deploy.js:12:7)",
                    ),
                    ContentBlock::text(r#"{"error":"denied","password":"hunter2"}"#),
                ]);
                r.structured_content =
                    Some(json!({"api_key": "abc", "detail": "token=Zf3D0LXCM3EIMbgJ"}));
                r
            }
            _ => return Err(ErrorData::invalid_params("unknown tool", None)),
        };
        Ok(r.into())
    }
}

async fn pair(
    server: Resilient<Server>,
) -> (
    RunningService<RoleClient, ()>,
    RunningService<RoleServer, Resilient<Server>>,
) {
    let (c, s) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(async move { server.serve(tokio::io::split(s)).await.unwrap() });
    let client = ().serve(tokio::io::split(c)).await.unwrap();
    (client, server.await.unwrap())
}

fn fast(policy: RetryPolicy) -> ToolPolicy {
    ToolPolicy::new(policy).unwrap()
}

fn quick() -> RetryPolicy {
    RetryPolicy::builder()
        .base_delay(Duration::from_millis(1))
        .max_delay(Duration::from_millis(5))
        .build()
        .unwrap()
}

#[tokio::test]
async fn transient_is_error_results_are_retried_inside_the_server() {
    let inner = Server::default();
    let metrics = Metrics::new();
    let (client, _server) = pair(
        Resilient::new(inner.clone())
            .default_policy(fast(quick()))
            .metrics(metrics.clone()),
    )
    .await;
    let r = client
        .call_tool(CallToolRequestParams::new("flaky"))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    assert_eq!(inner.flaky.load(Ordering::SeqCst), 3);
    assert_eq!(metrics.tool("flaky").snapshot().successes_after_retry, 1);
}

#[tokio::test]
async fn business_failures_pass_through_once() {
    let inner = Server::default();
    let (client, _server) = pair(Resilient::new(inner.clone()).default_policy(fast(quick()))).await;
    let r = client
        .call_tool(CallToolRequestParams::new("business"))
        .await
        .unwrap();
    assert_eq!(steadfast_mcp::tool_result_text(&r), "no such order: 42");
    assert_eq!(inner.business.load(Ordering::SeqCst), 1);

    // With `always`, the same text is retried — once the unannotated tool may be replayed at
    // all: an `isError` result does not prove the tool did nothing.
    let inner = Server::default();
    let mut always = fast(quick());
    always.retry_on_is_error = RetryOnIsError::Always;
    let (client, _server) =
        pair(Resilient::new(inner.clone()).tool_policy("business", always.clone())).await;
    let r = client
        .call_tool(CallToolRequestParams::new("business"))
        .await
        .unwrap();
    assert_eq!(r.structured_content.unwrap()["attemptsMade"], 1);
    always.retry_ambiguous = Some(true);
    let inner = Server::default();
    let (client, _server) =
        pair(Resilient::new(inner.clone()).tool_policy("business", always)).await;
    let r = client
        .call_tool(CallToolRequestParams::new("business"))
        .await
        .unwrap();
    let e = r.structured_content.unwrap();
    assert_eq!(e["attemptsMade"], 3);
    assert_eq!(inner.business.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_tools_own_is_error_text_is_sanitized() {
    let (client, _server) =
        pair(Resilient::new(Server::default()).default_policy(fast(quick()))).await;
    let r = client
        .call_tool(CallToolRequestParams::new("leaky"))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let texts: Vec<&str> = r
        .content
        .iter()
        .filter_map(|b| b.as_text())
        .map(|t| t.text.as_str())
        .collect();
    assert_eq!(texts[0], "sshpass -p [redacted] ssh deploy@web1 failed\n");
    assert_eq!(texts[1], r#"{"error":"denied","password":"[redacted]"}"#);
    assert_eq!(
        r.structured_content.unwrap(),
        json!({"api_key": "[redacted]", "detail": "token=[redacted]"})
    );
}

#[tokio::test]
async fn an_unannotated_tool_is_not_replayed_after_its_attempt_timeout() {
    let inner = Server::default();
    let policy = fast(
        RetryPolicy::builder()
            .base_delay(Duration::from_millis(1))
            .attempt_timeout(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    let (client, _server) =
        pair(Resilient::new(inner.clone()).default_policy(policy.clone())).await;
    let r = client
        .call_tool(CallToolRequestParams::new("effect"))
        .await
        .unwrap();
    let e = r.structured_content.unwrap();
    assert_eq!(
        (e["code"].as_str(), e["retriable"].as_bool()),
        (Some("OUTCOME_UNKNOWN"), Some(false))
    );
    assert!(e["message"].as_str().unwrap().contains("timed out"), "{e}");
    assert_eq!(inner.effect.load(Ordering::SeqCst), 1);

    // Opting in replays it.
    let inner = Server::default();
    let mut replay = policy;
    replay.retry_ambiguous = Some(true);
    let (client, _server) = pair(Resilient::new(inner.clone()).default_policy(replay)).await;
    let r = client
        .call_tool(CallToolRequestParams::new("effect"))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(inner.effect.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn rpc_errors_become_llm_errors() {
    let (client, _server) = pair(Resilient::new(Server::default())).await;
    let r = client
        .call_tool(CallToolRequestParams::new("nope"))
        .await
        .unwrap();
    let e = r.structured_content.unwrap();
    assert_eq!(e["code"], "INVALID_REQUEST");
    assert_eq!(e["tool"], "nope");
    assert_eq!(e["attemptsMade"], 1);
}
