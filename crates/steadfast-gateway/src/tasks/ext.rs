//! Durable tool calls for clients of MCP 2026-07-28, through the tasks extension
//! (`io.modelcontextprotocol/tasks`, SEP-2663).
//!
//! The same store and jobs as the 2025-11-25 tasks (`methods.rs`); only what the client sees
//! differs. The revision moved tasks out of the core: a client declares the extension in each
//! request's `_meta["io.modelcontextprotocol/clientCapabilities"].extensions`, the server
//! decides per call whether to answer with a task (`resultType: "task"`, unasked — there is no
//! `params.task`), and the client polls `tasks/get`, whose answer carries the final result
//! inline; `tasks/update` delivers input, `tasks/cancel` is an acknowledgement. There is no
//! `tasks/list` and no blocking `tasks/result`.
//!
//! One mapping is not one-to-one: the extension's `failed` status is for JSON-RPC errors only,
//! and a durable call that gave up ends with the live call's `isError` result (an `LlmError`),
//! so it is `completed` here with that result, as the extension asks of tool errors.
//!
//! This file holds the extension's shapes (what a request declares, what a task looks like);
//! `ext_methods.rs` serves its methods from them.

use serde_json::{Value, json};

use super::store::{TaskRow, status};
use super::wire::View;

/// The extension's identifier, as clients and servers declare it.
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";

use crate::wire::era::{self, CLIENT_CAPABILITIES};

/// Whether a request's params come from a 2026-07-28 client (see [`era::is_modern`]).
pub(crate) fn is_modern(params: &Value) -> bool {
    era::is_modern(params)
}

/// Whether the request declares the tasks extension in its per-request capabilities.
pub(crate) fn declares(params: &Value) -> bool {
    params
        .pointer("/_meta")
        .and_then(|m| m.get(CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION))
        .is_some_and(Value::is_object)
}

/// Declares the extension in a `server/discover` result's capabilities (there are durable
/// tools, or the extension would not be installed).
pub(crate) fn advertise(capabilities: &mut serde_json::Map<String, Value>) {
    let ext = capabilities
        .entry("extensions")
        .or_insert_with(|| json!({}));
    if let Some(e) = ext.as_object_mut() {
        e.entry(EXTENSION).or_insert_with(|| json!({}));
    }
}

/// Whether a (modern) upstream declared the extension itself: a task id the store does not know
/// may be its own, created through another replica (task owners are remembered per process).
pub(crate) fn offered_by(upstream: &crate::upstream::Upstream) -> bool {
    upstream
        .init_result()
        .and_then(|r| serde_json::from_str::<Value>(&r).ok())
        .is_some_and(|v| {
            v.get("capabilities")
                .and_then(|c| c.get("extensions"))
                .and_then(|e| e.get(EXTENSION))
                .is_some()
        })
}

/// Removes the extension from a request's `_meta` (the call it belongs to is run as a task here,
/// so the upstream must answer it plainly).
pub(crate) fn undeclare(meta: &mut serde_json::Map<String, Value>) {
    if let Some(e) = meta
        .get_mut(CLIENT_CAPABILITIES)
        .and_then(|c| c.get_mut("extensions"))
        .and_then(Value::as_object_mut)
    {
        e.remove(EXTENSION);
    }
}

/// The extension's `Task` fields for a row in the state `view`.
fn task(row: &TaskRow, view: &View, poll_ms: u64) -> serde_json::Map<String, Value> {
    let mut t = serde_json::Map::new();
    t.insert("taskId".into(), row.task_id.clone().into());
    t.insert("status".into(), ext_status(view).into());
    t.insert("createdAt".into(), super::wire::iso(row.created_at).into());
    t.insert(
        "lastUpdatedAt".into(),
        super::wire::iso(row.updated_at).into(),
    );
    t.insert("ttlMs".into(), row.ttl_ms.into());
    t.insert("pollIntervalMs".into(), poll_ms.into());
    if let Some(m) = &view.message {
        t.insert(
            "statusMessage".into(),
            steadfast::sanitize(m).into_owned().into(),
        );
    }
    t
}

/// Our status as the extension names it (see the module docs for `failed`).
fn ext_status(view: &View) -> &'static str {
    match view.status {
        status::COMPLETED | status::FAILED => "completed",
        status::CANCELLED => "cancelled",
        _ => "working",
    }
}

/// `CreateTaskResult`: the answer to a `tools/call` that became a task.
pub(crate) fn created(row: &TaskRow, view: &View, poll_ms: u64) -> String {
    let mut t = task(row, view, poll_ms);
    t.insert("resultType".into(), "task".into());
    Value::Object(t).to_string()
}

/// `GetTaskResult`: the task with its result inline once it has one.
pub(crate) fn detailed(row: &TaskRow, view: &View, poll_ms: u64) -> String {
    let mut t = task(row, view, poll_ms);
    t.insert("resultType".into(), "complete".into());
    if ext_status(view) == "completed" {
        let result = view
            .result
            .as_deref()
            .and_then(|r| serde_json::from_str::<Value>(r).ok())
            .unwrap_or_else(|| json!({"content": [], "isError": true}));
        t.insert("result".into(), result);
    }
    Value::Object(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: &str, result: Option<&str>) -> TaskRow {
        TaskRow {
            task_id: "t1".into(),
            owner: "stdio".into(),
            job_id: Some(1),
            tool: "echo".into(),
            params: "{}".into(),
            replay: true,
            status: status.into(),
            result: result.map(str::to_owned),
            last_failure: None,
            sent: 1,
            answered: 1,
            ttl_ms: 60_000,
            created_at: 1_700_000_000_000,
            updated_at: 1_700_000_001_000,
        }
    }

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn eras_and_the_declared_extension_are_read_from_meta() {
        let modern = json!({"name": "x", "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}}}});
        assert!(is_modern(&modern) && declares(&modern));
        let without = json!({"name": "x", "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {}}}});
        assert!(is_modern(&without) && !declares(&without));
        let old = json!({"name": "x", "task": {"ttl": 1000}, "_meta": {"progressToken": 1}});
        assert!(!is_modern(&old) && !declares(&old));
        let mut meta = modern["_meta"].as_object().unwrap().clone();
        undeclare(&mut meta);
        assert!(!declares(&json!({"_meta": meta})));
        assert!(
            is_modern(&json!({"_meta": meta})),
            "only the extension is removed"
        );
    }

    #[test]
    fn a_created_task_is_a_task_result_with_the_extensions_field_names() {
        let r = TaskRow {
            job_id: None,
            ..row(status::WORKING, None)
        };
        let view = super::super::wire::derive(&r, None);
        let v = parse(&created(&r, &view, 250));
        assert_eq!(v["resultType"], "task");
        assert_eq!(v["status"], "working");
        assert_eq!(
            (v["ttlMs"].as_i64(), v["pollIntervalMs"].as_u64()),
            (Some(60_000), Some(250))
        );
        assert!(
            v.get("ttl").is_none() && v.get("pollInterval").is_none(),
            "{v}"
        );
        assert_eq!(v["createdAt"], "2023-11-14T22:13:20.000Z");
    }

    #[test]
    fn a_finished_task_carries_its_result_inline_and_a_tool_error_is_completed() {
        let ok = r#"{"content":[{"type":"text","text":"hi"}]}"#;
        let r = row(status::COMPLETED, Some(ok));
        let v = parse(&detailed(&r, &super::super::wire::derive(&r, None), 100));
        assert_eq!(
            (v["resultType"].as_str(), v["status"].as_str()),
            (Some("complete"), Some("completed"))
        );
        assert_eq!(v["result"]["content"][0]["text"], "hi");
        let gave_up = r#"{"content":[{"type":"text","text":"{}"}],"isError":true}"#;
        let r = row(status::FAILED, Some(gave_up));
        let v = parse(&detailed(&r, &super::super::wire::derive(&r, None), 100));
        assert_eq!(
            v["status"], "completed",
            "failed is for JSON-RPC errors only: {v}"
        );
        assert_eq!(v["result"]["isError"], true);
        let r = row(status::CANCELLED, Some(gave_up));
        let v = parse(&detailed(&r, &super::super::wire::derive(&r, None), 100));
        assert_eq!(v["status"], "cancelled");
        assert!(v.get("result").is_none(), "{v}");
        // Its attempt's answer, a tool error, came after the cancel: said so, not "completed".
        let said = v["statusMessage"].as_str().unwrap_or_default();
        assert!(said.contains("which then failed"), "{v}");
    }
}
