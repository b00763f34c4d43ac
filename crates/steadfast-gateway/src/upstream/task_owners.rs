//! Which client created each task, so the server's requests about a task (an elicitation or a
//! sampling request while it runs, tagged `_meta["io.modelcontextprotocol/related-task"]`, as
//! MCP 2025-11-25 asks) reach that client, whichever session is busiest at the time.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::Value;

/// Tasks remembered at once; the oldest is forgotten first (a task's own TTL is the server's).
const MAX_TASKS: usize = 4096;

/// A task-creation result is small: longer results are not searched for a task id, so a
/// large tool result costs no scan.
const MAX_CREATE_RESULT: usize = 4096;

/// The related-task key of MCP 2025-11-25.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

#[derive(Default)]
pub(super) struct TaskOwners(Mutex<Owners>);

#[derive(Default)]
struct Owners {
    by_task: HashMap<String, u64>,
    order: VecDeque<String>,
}

impl TaskOwners {
    /// Remembers that the client with serial `owner` created `task`.
    pub(super) fn insert(&self, task: String, owner: u64) {
        let mut o = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if o.by_task.insert(task.clone(), owner).is_none() {
            o.order.push_back(task);
        }
        while o.order.len() > MAX_TASKS {
            if let Some(old) = o.order.pop_front() {
                o.by_task.remove(&old);
            }
        }
    }

    /// The serial of the client that created `task`.
    pub(super) fn get(&self, task: &str) -> Option<u64> {
        let o = self.0.lock().unwrap_or_else(|e| e.into_inner());
        o.by_task.get(task).copied()
    }
}

/// The task id a result creates, if it is one: `{"task": {"taskId": …}}` (MCP 2025-11-25), or
/// `{"resultType": "task", "taskId": …}` (the 2026-07-28 tasks extension).
pub(super) fn created_task(result: &str) -> Option<String> {
    // Every result is searched: the searcher is built once, not per result.
    static TASK_ID: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"taskId\""));
    if result.len() > MAX_CREATE_RESULT || TASK_ID.find(result.as_bytes()).is_none() {
        return None;
    }
    let v: Value = serde_json::from_str(result).ok()?;
    let id = match v.pointer("/task/taskId") {
        Some(id) => id,
        None if v.get("resultType").and_then(Value::as_str) == Some("task") => v.get("taskId")?,
        None => return None,
    };
    id.as_str().map(str::to_owned)
}

/// The task a server request's params say it belongs to.
pub(super) fn related_task(params: &str) -> Option<String> {
    if !params.contains(RELATED_TASK) {
        return None;
    }
    let v: Value = serde_json::from_str(params).ok()?;
    v.get("_meta")?
        .get(RELATED_TASK)?
        .get("taskId")?
        .as_str()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_read_from_creation_results_and_request_meta() {
        let ext = r#"{"resultType":"task","taskId":"t-9","status":"working"}"#;
        assert_eq!(created_task(ext).as_deref(), Some("t-9"));
        assert_eq!(
            created_task(r#"{"resultType":"complete","taskId":"x"}"#),
            None
        );
        let created = r#"{"task":{"taskId":"t-1","status":"working","ttl":60000}}"#;
        assert_eq!(created_task(created).as_deref(), Some("t-1"));
        assert_eq!(created_task(r#"{"content":[],"isError":false}"#), None);
        let big = format!(
            r#"{{"task":{{"taskId":"t-2"}},"pad":"{}"}}"#,
            "x".repeat(5000)
        );
        assert_eq!(created_task(&big), None, "large results are not searched");
        let params =
            r#"{"message":"m","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-1"}}}"#;
        assert_eq!(related_task(params).as_deref(), Some("t-1"));
        assert_eq!(related_task(r#"{"message":"m"}"#), None);
    }

    #[test]
    fn the_oldest_task_is_forgotten_first() {
        let owners = TaskOwners::default();
        for i in 0..=MAX_TASKS {
            owners.insert(format!("t{i}"), i as u64);
        }
        assert!(owners.get("t0").is_none());
        assert!(owners.get("t1").is_some());
        assert!(owners.get(&format!("t{MAX_TASKS}")).is_some());
    }
}
