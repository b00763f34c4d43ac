//! The tasks extension's methods for 2026-07-28 clients: `tasks/get`, `tasks/update` and
//! `tasks/cancel`, served from the store in the extension's shapes (`ext.rs`), with what the
//! 2025-11-25 methods share (`methods.rs`).

use serde_json::{Value, json};

use super::Durable;
use super::ext::{EXTENSION, declares, detailed};
use super::methods::{store_error, try_cancel, upstream_has_tasks};
use crate::session::Session;
use crate::wire::era;
use crate::wire::jsonrpc::{self, code};

/// The methods the extension defines (`tasks/get` and `tasks/cancel` exist in 2025-11-25 too,
/// with other shapes: the request's era decides which answers).
pub(crate) const METHODS: [&str; 3] = ["tasks/get", "tasks/update", "tasks/cancel"];

/// `-32021`, reserved by MCP 2026-07-28: the request needs a capability the client did not
/// declare.
pub(crate) const MISSING_CLIENT_CAPABILITY: i64 = era::code::MISSING_CLIENT_CAPABILITY;

/// The acknowledgement `tasks/update` and `tasks/cancel` answer with.
const ACK: &str = r#"{"resultType":"complete"}"#;

fn missing_capability(id: &str) -> Vec<u8> {
    let error = json!({
        "code": MISSING_CLIENT_CAPABILITY,
        "message": format!("Missing required client capability: declare the {EXTENSION} extension in this request's _meta"),
        "data": {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    });
    jsonrpc::raw_error_response(id, &error.to_string())
}

/// Serves `tasks/get`, `tasks/update` or `tasks/cancel` of a 2026-07-28 client; the line
/// answering it. A task id the store does not know is the upstream's own task, relayed.
pub(crate) async fn serve(
    d: &Durable,
    session: &std::sync::Arc<Session>,
    id: &str,
    method: &str,
    params: Option<&str>,
) -> Vec<u8> {
    let p: Value = params
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_else(|| json!({}));
    if !declares(&p) {
        return missing_capability(id);
    }
    let Some(task_id) = p.get("taskId").and_then(Value::as_str) else {
        return jsonrpc::error_response(
            id,
            code::INVALID_PARAMS,
            "invalid params: taskId (a string) is required",
        );
    };
    if method == "tasks/update" && !p.get("inputResponses").is_some_and(Value::is_object) {
        return jsonrpc::error_response(
            id,
            code::INVALID_PARAMS,
            "invalid params: inputResponses (an object) is required",
        );
    }
    let row = match d.store().get(task_id, d.shared.now()).await {
        Ok(Some(r)) => r,
        Ok(None) if upstream_has_tasks(session, task_id) => {
            return session.forward(id, method, params).await;
        }
        Ok(None) => {
            return jsonrpc::error_response(
                id,
                code::INVALID_PARAMS,
                "Failed to retrieve task: no such task (unknown, or expired)",
            );
        }
        Err(e) => return store_error(id, e),
    };
    match method {
        "tasks/get" => match d.view(&row).await {
            Ok(v) => jsonrpc::result_response(id, &detailed(&row, &v, d.poll_ms())),
            Err(e) => store_error(id, e),
        },
        // A durable call never asks its client for input, so no key is ever outstanding: the
        // extension asks servers to ignore responses to keys that are not.
        "tasks/update" => jsonrpc::result_response(id, ACK),
        _ => match try_cancel(d, row).await {
            // Cancelling a task that already ended is acknowledged too: cancellation is
            // cooperative and the task keeps its terminal status.
            Ok(_) => jsonrpc::result_response(id, ACK),
            Err(e) => store_error(id, e),
        },
    }
}
