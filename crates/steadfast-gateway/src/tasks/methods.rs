//! Creating a durable task, and `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`
//! served from the store. A task id the store does not know is the upstream's own task: the
//! request is relayed to it.

use std::sync::Arc;

use serde_json::{Value, json};
use steadfast_jobs::JobOptions;

use super::job::{HANDLER, Payload};
use super::store::{TaskRow, status};
use super::wire::{self, View, derive, task_json};
use super::{Durable, SessionTasks, owner_of};
use crate::session::Session;
use crate::wire::jsonrpc::{self, code};

/// The methods served here.
pub(crate) const METHODS: [&str; 4] = ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"];

/// Tasks per `tasks/list` page.
const PAGE: i64 = 100;

pub(super) fn store_error(id: &str, e: impl std::fmt::Display) -> Vec<u8> {
    jsonrpc::error_response(
        id,
        code::INTERNAL_ERROR,
        &format!(
            "the task store failed: {}",
            steadfast::sanitize(&e.to_string())
        ),
    )
}

fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Durable {
    /// Answers a task-augmented `tools/call` with a task handle and queues its job.
    pub(crate) async fn create(
        &self,
        tasks: &SessionTasks,
        session: &Arc<Session>,
        id: &str,
        mut params: Value,
    ) -> Vec<u8> {
        // A 2026-07-28 client that declared the tasks extension gets the extension's shapes.
        let extension = super::ext::declares(&params);
        let now = self.shared.now();
        match self.store().active(now).await {
            Ok(n) if n >= self.config.max_active => {
                return jsonrpc::error_response(
                    id,
                    code::OVERLOADED,
                    &format!(
                        "too many durable tasks are working ([tasks] max_active = {}); retry after some finish",
                        self.config.max_active
                    ),
                );
            }
            Err(e) => return store_error(id, e),
            Ok(_) => {}
        }
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let Some(target) = self.shared.resolver.resolve(&name) else {
            return jsonrpc::error_response(id, code::INVALID_PARAMS, "unknown tool");
        };
        let listed = target.upstream.lists(&target.name);
        let entry = target.tools.entry(&target.key, listed);
        let (read_only, idempotent) = target.upstream.hints(&target.name);
        // Decided now and stored: after a restart the hints may not be known yet.
        let replay = entry
            .settings
            .policy
            .retry_ambiguous
            .unwrap_or(read_only || idempotent);
        let max_ttl = millis(self.config.result_ttl);
        let ttl_ms = params
            .pointer("/task/ttl")
            .and_then(Value::as_i64)
            .filter(|t| *t > 0)
            .map_or(max_ttl, |t| t.min(max_ttl));
        upstream_params(&mut params, &target.name);
        let mut row = TaskRow {
            task_id: crate::wire::secret_id::random_hex(),
            owner: owner_of(session),
            job_id: None,
            tool: name,
            params: params.to_string(),
            replay,
            status: status::WORKING.to_owned(),
            result: None,
            last_failure: None,
            sent: 0,
            answered: 0,
            ttl_ms,
            created_at: now,
            updated_at: now,
        };
        if let Err(e) = self.store().insert(&row).await {
            return store_error(id, e);
        }
        if let Err(e) = self.enqueue(&mut row, &entry.settings.policy).await {
            return store_error(id, e);
        }
        tracing::info!(task = %row.task_id, tool = %row.tool, "durable call queued");
        metrics::counter!("steadfast_tasks_created_total").increment(1);
        tasks.remember(id, &row.task_id);
        let view = View {
            status: status::WORKING,
            message: Some("queued".to_owned()),
            result: None,
        };
        if extension {
            return jsonrpc::result_response(id, &super::ext::created(&row, &view, self.poll_ms()));
        }
        let task = task_json(&row, &view, self.poll_ms());
        jsonrpc::result_response(id, &json!({ "task": task }).to_string())
    }

    /// Queues the job that runs `row`'s call (retried with the tool's policy) and records it.
    async fn enqueue(
        &self,
        row: &mut TaskRow,
        policy: &steadfast_mcp::ToolPolicy,
    ) -> Result<(), String> {
        let mut opts = JobOptions::new().retry(policy.engine_policy().to_builder());
        // The creating request's context (its SERVER span): each attempt's `process` span is
        // linked to it (`LinkToEnqueuer`).
        if steadfast::trace::listening()
            && let Some(t) = crate::wire::trace_context::current()
        {
            opts = opts.traceparent(t.traceparent, t.tracestate.as_deref());
        }
        let payload = Payload {
            task: row.task_id.clone(),
        };
        let job_id = self
            .jobs
            .queue(HANDLER, &payload, opts)
            .await
            .map_err(|e| e.to_string())?;
        self.store()
            .set_job(&row.task_id, job_id)
            .await
            .map_err(|e| e.to_string())?;
        row.job_id = Some(job_id);
        Ok(())
    }

    pub(super) fn poll_ms(&self) -> u64 {
        u64::try_from(self.config.poll_interval.as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) async fn view(&self, row: &TaskRow) -> Result<View, steadfast_jobs::JobsError> {
        if crate::tasks::store::status::is_terminal(&row.status) {
            return Ok(derive(row, None));
        }
        let job = match row.job_id {
            Some(j) => self.jobs.get(j).await?,
            None => None,
        };
        let ended = job.as_ref().is_some_and(|j| {
            matches!(
                j.state,
                steadfast_jobs::JobState::Done | steadfast_jobs::JobState::Dead
            )
        });
        if ended {
            // A call's outcome is written to its task before its job ends: a row read before
            // that write and a job read after it would say "no recorded result". Read again.
            if let Ok(Some(fresh)) = self.store().get(&row.task_id, self.shared.now()).await {
                return Ok(derive(&fresh, job.as_ref()));
            }
        }
        Ok(derive(row, job.as_ref()))
    }
}

/// Serves one `tasks/*` request; the line answering it.
pub(crate) async fn serve(
    d: &Durable,
    session: &Arc<Session>,
    id: &str,
    method: &str,
    params: Option<&str>,
) -> Vec<u8> {
    let p: Value = params
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_else(|| json!({}));
    if method == "tasks/list" {
        return list(d, session, id, &p).await;
    }
    let Some(task_id) = p.get("taskId").and_then(Value::as_str) else {
        return jsonrpc::error_response(
            id,
            code::INVALID_PARAMS,
            "invalid params: taskId (a string) is required",
        );
    };
    let row = match d.store().get(task_id, d.shared.now()).await {
        Ok(Some(r)) => r,
        Ok(None) if upstream_has_tasks(session, task_id) => {
            // The upstream's own task (created by a relayed call): relay.
            return session.forward(id, method, params).await;
        }
        Ok(None) => {
            return jsonrpc::error_response(
                id,
                code::INVALID_PARAMS,
                "invalid params: no such task (unknown, or expired)",
            );
        }
        Err(e) => return store_error(id, e),
    };
    match method {
        "tasks/get" => match d.view(&row).await {
            Ok(v) => jsonrpc::result_response(id, &task_json(&row, &v, d.poll_ms()).to_string()),
            Err(e) => store_error(id, e),
        },
        "tasks/result" => result(d, session, id, row).await,
        _ => cancel(d, id, row).await,
    }
}

/// Blocks until the task is terminal (bounded by the proxy's `request_timeout`), then answers
/// with what the call itself would have: its result, or the `isError` result with the
/// `LlmError`.
async fn result(d: &Durable, session: &Session, id: &str, mut row: TaskRow) -> Vec<u8> {
    let bound = d
        .shared
        .resolver
        .resolve(&row.tool)
        .map_or(session.upstream().settings().request_timeout, |t| {
            t.upstream.settings().request_timeout
        });
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let view = match d.view(&row).await {
            Ok(v) => v,
            Err(e) => return store_error(id, e),
        };
        if view.is_terminal() {
            let result = view
                .result
                .unwrap_or_else(|| wire::llm_result(&wire::cancelled(&row.tool)));
            return jsonrpc::result_response(id, &wire::with_related_task(&result, &row.task_id));
        }
        if tokio::time::Instant::now() + d.config.poll_interval > deadline {
            return jsonrpc::error_response(
                id,
                code::UPSTREAM_TIMEOUT,
                &format!(
                    "the task is still working after {bound:?}; poll tasks/get and call tasks/result again"
                ),
            );
        }
        tokio::time::sleep(d.config.poll_interval).await;
        row = match d.store().get(&row.task_id, d.shared.now()).await {
            Ok(Some(r)) => r,
            Ok(None) => {
                return jsonrpc::error_response(id, code::INVALID_PARAMS, "the task expired");
            }
            Err(e) => return store_error(id, e),
        };
    }
}

/// Cancels a task the client started with request `request` (its `notifications/cancelled`
/// came after the task handle answered it).
pub(crate) async fn cancel_task(d: &Durable, task: &str) {
    if let Ok(Some(row)) = d.store().get(task, d.shared.now()).await {
        let _ = cancel(d, "null", row).await;
    }
}

async fn cancel(d: &Durable, id: &str, row: TaskRow) -> Vec<u8> {
    match try_cancel(d, row).await {
        Ok(Cancel::Done(row)) => {
            let v = derive(&row, None);
            jsonrpc::result_response(id, &task_json(&row, &v, d.poll_ms()).to_string())
        }
        Ok(Cancel::AlreadyEnded(status)) => jsonrpc::error_response(
            id,
            code::INVALID_PARAMS,
            &format!("invalid params: the task is already {status}"),
        ),
        Ok(Cancel::JustEnded) => jsonrpc::error_response(
            id,
            code::INVALID_PARAMS,
            "invalid params: the task has just finished",
        ),
        Err(e) => store_error(id, e),
    }
}

/// What cancelling a task did.
pub(super) enum Cancel {
    /// Cancelled: the row as it is now.
    Done(Box<TaskRow>),
    /// It had ended before (with this status).
    AlreadyEnded(&'static str),
    /// It ended while being cancelled.
    JustEnded,
}

/// Cancels a task that is still working: marks it cancelled in the store, cancels its job and
/// stops its attempt in flight, wherever it runs — here, or on another replica, which hears of
/// it through the store (`watch`) and drops the attempt, cancelling its upstream request.
pub(super) async fn try_cancel(d: &Durable, row: TaskRow) -> Result<Cancel, String> {
    let view = d.view(&row).await.map_err(|e| e.to_string())?;
    if view.is_terminal() {
        return Ok(Cancel::AlreadyEnded(view.status));
    }
    let now = d.shared.now();
    let in_flight = wire::llm_result(&wire::cancelled_in_flight(&row.tool));
    let idle = wire::llm_result(&wire::cancelled_idle(&row.tool));
    let cancelled = d
        .store()
        .cancel(&row.task_id, &in_flight, &idle, now)
        .await
        .map_err(|e| e.to_string())?;
    if !cancelled {
        return Ok(Cancel::JustEnded);
    }
    // A job waiting for its retry is cancelled in the store; an attempt in flight is dropped,
    // which sends `notifications/cancelled` upstream: here at once, on another replica when
    // the announcement (or its poll) reaches it.
    if let Some(job) = row.job_id {
        let _ = d.jobs.cancel(job).await;
    }
    d.shared.cancel_running(&row.task_id);
    if let Err(e) = d.store().announce_cancel(&row.task_id).await {
        tracing::warn!(error = %steadfast::sanitize(&e.to_string()), "[tasks] announcing a cancel failed; the replica running the task finds out by polling");
    }
    let row = match d.store().get(&row.task_id, now).await {
        Ok(Some(fresh)) => fresh,
        _ => {
            let mut row = row;
            row.status = status::CANCELLED.to_owned();
            row.result = Some(if row.sent > row.answered {
                in_flight
            } else {
                idle
            });
            row.updated_at = now;
            row
        }
    };
    Ok(Cancel::Done(Box::new(row)))
}

async fn list(d: &Durable, session: &Session, id: &str, p: &Value) -> Vec<u8> {
    let offset = match p.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(c) => match c.as_str().and_then(|c| c.parse::<i64>().ok()) {
            Some(o) if o >= 0 => o,
            _ => {
                return jsonrpc::error_response(
                    id,
                    code::INVALID_PARAMS,
                    "invalid params: unknown cursor",
                );
            }
        },
    };
    let rows = match d
        .store()
        .list(&owner_of(session), d.shared.now(), offset, PAGE)
        .await
    {
        Ok(r) => r,
        Err(e) => return store_error(id, e),
    };
    let mut tasks = Vec::with_capacity(rows.len());
    for row in &rows {
        match d.view(row).await {
            Ok(v) => tasks.push(task_json(row, &v, d.poll_ms())),
            Err(e) => return store_error(id, e),
        }
    }
    let mut out = json!({ "tasks": tasks });
    if i64::try_from(rows.len()).unwrap_or(0) == PAGE {
        out["nextCursor"] = Value::String((offset + PAGE).to_string());
    }
    jsonrpc::result_response(id, &out.to_string())
}

pub(super) fn upstream_has_tasks(session: &Session, task_id: &str) -> bool {
    use crate::route::topology::Topology;
    match session.router.topology() {
        Topology::Single(route) => {
            let up = &route.upstream;
            up.offers("tasks") || up.has_task(task_id) || super::ext::offered_by(up)
        }
        // With several upstreams, the one that created the task for one of our calls.
        Topology::Namespaced { .. } => session
            .router
            .routes()
            .iter()
            .any(|r| r.upstream.has_task(task_id)),
    }
}

/// A durable call's params as the upstream gets them: the tool's own name, no task request,
/// no progress token (no client follows a durable attempt's progress), the current trace
/// context kept.
fn upstream_params(params: &mut Value, name: &str) {
    if let Some(o) = params.as_object_mut() {
        o.remove("task");
        o.insert("name".into(), Value::String(name.to_owned()));
        // No client follows a durable attempt's progress.
        if let Some(meta) = o.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove("progressToken");
            // The gateway runs this call as a task; the upstream must not make another.
            super::ext::undeclare(meta);
        }
        // Traced: the task keeps this request's (SERVER span's) context, so its attempts,
        // in this process or after a restart, join the request's trace.
        if steadfast::trace::listening()
            && let Some(t) = crate::wire::trace_context::current()
        {
            let meta = o
                .entry("_meta")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(m) = meta.as_object_mut() {
                m.insert("traceparent".into(), Value::from(t.traceparent));
                match t.tracestate {
                    Some(ts) => m.insert("tracestate".into(), Value::from(ts)),
                    None => m.remove("tracestate"),
                };
            }
        }
    }
}
