//! synaptic's middleware chain with Steadfast's `ToolRetry` in place of `ToolRetryMiddleware`,
//! executing a tool directly (no model, no API key):
//! `cargo run -p steadfast-agents --features synaptic --example synaptic_middleware`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use serde_json::{Value, json};
use steadfast_agents::synaptic::ToolRetry;
use synaptic_core::{SynapticError, ToolCall};
use synaptic_middleware::{
    AgentMiddleware, MiddlewareChain, ToolCallLimitMiddleware, ToolCallRequest, ToolCaller,
};

/// The tool behind the chain: a search that times out once, and a lookup that is told its
/// arguments are wrong.
#[derive(Default)]
struct Tools(AtomicU32);

#[async_trait]
impl ToolCaller for Tools {
    async fn call(&self, request: ToolCallRequest) -> Result<Value, SynapticError> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        println!("  {} (call {n})", request.call.name);
        match request.call.name.as_str() {
            "search" if n == 1 => Err(SynapticError::Timeout("search backend".into())),
            "search" => Ok(json!({"hits": 3})),
            _ => Err(SynapticError::Validation("`id` must be a number".into())),
        }
    }
}

fn request(name: &str) -> ToolCallRequest {
    ToolCallRequest {
        call: ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: json!({}),
        },
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // Listed after the retry, synaptic's own limit counts every attempt.
    let middleware: Vec<Arc<dyn AgentMiddleware>> = vec![
        Arc::new(ToolRetry::new(3)),
        Arc::new(ToolCallLimitMiddleware::new(10)),
    ];
    let chain = MiddlewareChain::new(middleware);
    let tools = Tools::default();
    println!(
        "search -> {:?}",
        chain.call_tool(request("search"), &tools).await
    );
    // Not retried; the model reads a sanitized LlmError instead of the run failing.
    println!(
        "lookup -> {:?}",
        chain.call_tool(request("lookup"), &tools).await
    );
}
