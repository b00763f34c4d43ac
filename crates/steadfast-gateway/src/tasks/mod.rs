//! Durable tool calls over MCP tasks (2025-11-25): a `tools/call` to a tool marked
//! `durable = true`, from a client that declared task support and asked for a task, is
//! answered at once with a task handle and run as a `steadfast-jobs` job. Its retries wait in
//! the job store, so they survive a client disconnect and a restart of the gateway; `tasks/get`,
//! `tasks/result`, `tasks/list` and `tasks/cancel` are served from the store.
//!
//! Everything else is as before: a client that did not declare tasks, a call without `task`,
//! and a tool whose upstream runs tasks itself (its `execution.taskSupport`) get the live path,
//! and the upstream's own tasks are relayed, never wrapped twice.
//!
//! The job handler reaches upstreams through [`Resolve`], so a router with several upstreams
//! plugs in without touching the handler.

pub(crate) mod admin;
mod attempt;
mod ext;
mod ext_methods;
mod job;
mod methods;
mod store;
#[cfg(test)]
mod tests;
mod watch;
mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use serde_json::Value;
use steadfast::CancellationToken;
use steadfast_jobs::{Clock, Jobs, SystemClock, WorkerConfig, WorkerHandle};

pub(crate) use crate::config::tasks::TasksConfig;

use crate::route::tools::Tools;
use crate::session::Extension;
use crate::session::Session;
use crate::upstream::Upstream;
use futures::future::BoxFuture;

/// Where a durable tool's calls go: the upstream, its per-tool state, and the tool's name there.
#[derive(Debug, Clone)]
pub(crate) struct Destination {
    /// The upstream serving the tool.
    pub upstream: Arc<Upstream>,
    /// Its per-tool state (policies, breakers, budget, call limit).
    pub tools: Arc<Tools>,
    /// The tool's name on that upstream.
    pub name: String,
    /// The name clients see (namespaced when several upstreams share the endpoint): policies,
    /// breakers, call limits and metrics go by it.
    pub key: String,
}

/// Finds the upstream for a tool name as the client writes it.
pub(crate) trait Resolve: Send + Sync + 'static {
    /// Where `tool`'s calls go, if any upstream serves it.
    fn resolve(&self, tool: &str) -> Option<Destination>;
}

/// Durable tool calls find a tool's upstream the way live calls do.
impl Resolve for crate::route::router::Router {
    fn resolve(&self, tool: &str) -> Option<Destination> {
        let (route, name) =
            crate::route::router::Router::resolve(self, crate::route::router::Kind::Tool, tool)?;
        Some(Destination {
            upstream: route.upstream.clone(),
            tools: route.tools.clone(),
            name: name.into_owned(),
            key: tool.to_owned(),
        })
    }
}

/// What the job handler shares with the service.
pub(crate) struct Shared {
    store: OnceLock<store::TaskStore>,
    resolver: Arc<dyn Resolve>,
    clock: Arc<dyn Clock>,
    /// Attempts in flight by task, so `tasks/cancel` can stop one (dropping it cancels its
    /// upstream request).
    running: Mutex<HashMap<String, CancellationToken>>,
}

impl Shared {
    fn now(&self) -> i64 {
        self.clock.now().timestamp_millis()
    }

    fn running(&self, task: &str) -> CancellationToken {
        let ct = CancellationToken::new();
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(task.to_owned(), ct.clone());
        ct
    }

    fn done_running(&self, task: &str) {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(task);
    }

    /// Drops `task`'s attempt if it runs here; whether it did.
    fn cancel_running(&self, task: &str) -> bool {
        let ct = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(task);
        ct.map(|ct| ct.cancel()).is_some()
    }

    /// The tasks whose attempts run here.
    fn running_ids(&self) -> Vec<String> {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }
}

/// The durable-call service: the task store, its jobs and their worker.
pub(crate) struct Durable {
    shared: Arc<Shared>,
    jobs: Jobs,
    config: TasksConfig,
    worker: Mutex<Option<WorkerHandle>>,
    /// Ends the background tasks (purge, cancel watch) at shutdown.
    stop: CancellationToken,
    /// Tools (as the client names them) whose upstream declares `execution.taskSupport`: they
    /// run tasks themselves.
    upstream_tasks: RwLock<HashSet<String>>,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable")
            .field("store", &self.config.store)
            .finish_non_exhaustive()
    }
}

impl Durable {
    /// Opens the task store when some tool is `durable = true` (`None` otherwise: nothing
    /// changes for anyone).
    pub(crate) async fn open(
        config: &crate::Config,
        resolver: Arc<dyn Resolve>,
    ) -> Result<Option<Arc<Self>>, String> {
        if !config.any_durable() {
            return Ok(None);
        }
        Self::open_with(config.tasks.clone(), resolver, Arc::new(SystemClock))
            .await
            .map(Some)
    }

    /// Opens the store with a given clock (tests use a manual one).
    pub(crate) async fn open_with(
        config: TasksConfig,
        resolver: Arc<dyn Resolve>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, String> {
        let shared = Arc::new(Shared {
            store: OnceLock::new(),
            resolver,
            clock: clock.clone(),
            running: Mutex::default(),
        });
        let jobs = Jobs::builder()
            .clock(ClockRef(clock))
            .trace_propagation(LinkToEnqueuer)
            .handler(job::handler(shared.clone()))
            .connect(&config.store)
            .await
            .map_err(|e| {
                format!(
                    "[tasks] cannot open the task store: {}",
                    steadfast::sanitize(&e.to_string())
                )
            })?;
        let store = store::TaskStore::open(jobs.store().pool().clone(), jobs.store().backend())
            .await
            .map_err(|e| {
                format!(
                    "[tasks] cannot create the task table: {}",
                    steadfast::sanitize(&e.to_string())
                )
            })?;
        let _ = shared.store.set(store);
        Ok(Arc::new(Self {
            shared,
            jobs,
            config,
            worker: Mutex::default(),
            stop: CancellationToken::new(),
            upstream_tasks: RwLock::default(),
        }))
    }

    fn store(&self) -> &store::TaskStore {
        // Set in `open_with` before the service exists.
        self.shared.store.get().expect("the task store is open")
    }

    /// Starts the job worker (once) and the purge of expired tasks. Called when a client has
    /// initialized, so the upstream is started before a job needs it.
    pub(crate) fn start(self: &Arc<Self>) {
        let mut worker = self.worker.lock().unwrap_or_else(|e| e.into_inner());
        if worker.is_some() {
            return;
        }
        // A short grace at shutdown: the client is gone; an attempt cut off is cancelled
        // upstream and, being marked sent, is judged by the replay rule after a restart.
        let config = WorkerConfig::new()
            .concurrency(self.config.concurrency)
            .lease(self.config.lease)
            .poll_interval(self.config.poll_interval)
            .grace(std::time::Duration::from_secs(1));
        match self.jobs.worker(config).start() {
            Ok(h) => *worker = Some(h),
            Err(e) => tracing::error!(error = %e, "[tasks] the job worker did not start"),
        }
        watch::spawn(
            &self.shared,
            &self.config.store,
            self.jobs.store().backend(),
            self.config.poll_interval,
            &self.stop,
        );
        let me = Arc::downgrade(self);
        let every = (self.config.result_ttl / 10).clamp(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(60),
        );
        let stop = self.stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.cancelled() => return,
                }
                let Some(d) = me.upgrade() else { return };
                d.purge().await;
            }
        });
    }

    /// Deletes expired tasks and the finished jobs behind them.
    pub(crate) async fn purge(&self) {
        let now = self.shared.now();
        if let Err(e) = self.store().purge(now).await {
            tracing::warn!(error = %steadfast::sanitize(&e.to_string()), "[tasks] purging expired tasks failed");
        }
        for state in [
            steadfast_jobs::JobState::Done,
            steadfast_jobs::JobState::Dead,
            steadfast_jobs::JobState::Cancelled,
        ] {
            let before = now.saturating_sub(
                i64::try_from(self.config.result_ttl.as_millis()).unwrap_or(i64::MAX),
            );
            let _ = self.jobs.store().purge(state, before).await;
        }
    }

    /// Stops the worker: running attempts get its grace period, then are cancelled (their
    /// upstream requests too) and their leases released.
    pub(crate) async fn shutdown(&self) {
        self.stop.cancel();
        let handle = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.shutdown().await;
        }
    }

    fn upstream_runs_tasks(&self, tool: &str) -> bool {
        self.upstream_tasks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(tool)
    }
}

/// Links each job attempt's span (`process steadfast.tools_call`) to the context stored with
/// its job — the SERVER span of the request that created the task — as the messaging
/// conventions ask of a `process` span. Queueing passes that context explicitly
/// (`Durable::enqueue`).
#[derive(Debug)]
struct LinkToEnqueuer;

impl steadfast_jobs::TracePropagation for LinkToEnqueuer {
    fn attach(&self, span: &tracing::Span, stored: &steadfast_jobs::TraceContext) {
        let trace = crate::wire::trace_context::TraceParent {
            traceparent: stored.traceparent.clone(),
            tracestate: stored.tracestate.clone(),
        };
        crate::wire::trace_context::link(span, &trace);
    }
}

/// `steadfast-jobs` takes its clock by value; this shares ours.
#[derive(Debug)]
struct ClockRef(Arc<dyn Clock>);

impl Clock for ClockRef {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.0.now()
    }
}

/// A session's view of the service, installed by the front as the session's extension, and
/// whether this client knows tasks (so the server's task support is advertised to it).
#[derive(Debug)]
pub(crate) struct SessionTasks {
    durable: Arc<Durable>,
    client: AtomicBool,
    /// The tasks this session's `tools/call` requests created, by request id, newest last, so
    /// a `notifications/cancelled` for one cancels its task (at most `REMEMBERED`).
    requests: Mutex<std::collections::VecDeque<(String, String)>>,
}

/// Request ids remembered per session for `notifications/cancelled`.
const REMEMBERED: usize = 256;

impl SessionTasks {
    /// The service for one session.
    pub(crate) fn new(durable: Arc<Durable>) -> Arc<Self> {
        Arc::new(Self {
            durable,
            client: AtomicBool::new(false),
            requests: Mutex::default(),
        })
    }

    fn remember(&self, request: &str, task: &str) {
        let mut r = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        if r.len() >= REMEMBERED {
            r.pop_front();
        }
        r.push_back((request.to_owned(), task.to_owned()));
    }

    fn forget(&self, request: &str) -> Option<String> {
        let mut r = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        let i = r.iter().position(|(q, _)| q == request)?;
        r.remove(i).map(|(_, t)| t)
    }
}

/// Who may list a task: the stdio front's one client across restarts, an HTTP session itself.
/// Any client holding a task id may get, await or cancel it (ids are 128 random bits).
fn owner_of(session: &Session) -> String {
    if session.id.starts_with("stdio-") {
        "stdio".to_owned()
    } else {
        session.id.clone()
    }
}

impl Extension for SessionTasks {
    /// Session hook, `initialize`: for a client that knows tasks — it declared `capabilities.tasks`,
    /// or it speaks 2025-11-25 or later, where tasks are part of the protocol — the server's
    /// result gains the tasks capability (a requestor-only client, such as the Python SDK's, has
    /// nothing to declare: it asks per request, with `params.task`). Older clients see the
    /// server's result as it is. Starts the worker.
    fn on_initialize(&self, _session: &Session, params: &str, result: String) -> String {
        self.durable.start();
        let declared = serde_json::from_str::<Value>(params).ok().is_some_and(|p| {
            p.pointer("/capabilities/tasks")
                .is_some_and(Value::is_object)
                || p.get("protocolVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|v| v >= "2025-11-25")
        });
        if !declared {
            return result;
        }
        self.client.store(true, Ordering::Relaxed);
        let Ok(mut v) = serde_json::from_str::<Value>(&result) else {
            return result;
        };
        if let Some(caps) = v.get_mut("capabilities").and_then(Value::as_object_mut) {
            let tasks = caps
                .entry("tasks")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(t) = tasks.as_object_mut() {
                t.entry("list").or_insert_with(|| serde_json::json!({}));
                t.entry("cancel").or_insert_with(|| serde_json::json!({}));
                let requests = t.entry("requests").or_insert_with(|| serde_json::json!({}));
                if let Some(r) = requests.as_object_mut() {
                    let tools = r.entry("tools").or_insert_with(|| serde_json::json!({}));
                    if let Some(tools) = tools.as_object_mut() {
                        tools.entry("call").or_insert_with(|| serde_json::json!({}));
                    }
                }
            }
        }
        v.to_string()
    }

    /// Session hook, `tools/list`: learns which tools the upstream runs as tasks itself, and (for
    /// a client that declared tasks) marks durable tools `execution.taskSupport = "optional"`.
    /// True when the page was changed.
    fn on_tools_list(&self, _session: &Session, page: &mut Value) -> bool {
        let d = &self.durable;
        let client = self.client.load(Ordering::Relaxed);
        let mut changed = false;
        let Some(tools) = page.get_mut("tools").and_then(Value::as_array_mut) else {
            return false;
        };
        let mut own = d.upstream_tasks.write().unwrap_or_else(|e| e.into_inner());
        for t in tools {
            let Some(name) = t.get("name").and_then(Value::as_str).map(str::to_owned) else {
                continue;
            };
            let support = t
                .pointer("/execution/taskSupport")
                .and_then(Value::as_str)
                .unwrap_or("forbidden");
            if support != "forbidden" {
                own.insert(name);
                continue;
            }
            own.remove(&name);
            let durable = d
                .shared
                .resolver
                .resolve(&name)
                .is_some_and(|t| t.tools.config().tool(&t.key).durable);
            if client
                && durable
                && let Some(o) = t.as_object_mut()
            {
                let exec = o
                    .entry("execution")
                    .or_insert_with(|| serde_json::json!({}));
                if let Some(e) = exec.as_object_mut() {
                    e.insert("taskSupport".into(), Value::String("optional".into()));
                    changed = true;
                }
            }
        }
        changed
    }

    /// Session hook, `tools/call`: the service, when this call is to become a durable task (a
    /// task-augmented call — the client asked for a task — to a durable tool the upstream does not
    /// run as a task itself). Every other call is live, as before.
    fn claims_call(&self, _session: &Session, params: &Value) -> bool {
        let d = &self.durable;
        // Asked for a task (2025-11-25), or declared the tasks extension (2026-07-28: the server
        // decides; a durable tool always becomes a task for such a client).
        if !params.get("task").is_some_and(Value::is_object) && !ext::declares(params) {
            return false;
        }
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return false;
        };
        let Some(target) = d.shared.resolver.resolve(name) else {
            return false;
        };
        if d.upstream_runs_tasks(name) || !target.tools.config().tool(&target.key).durable {
            return false;
        }
        // A tool not listed yet, on an upstream that runs tool calls as tasks: whether it is one of
        // those is unknown, so the call goes to the upstream as it is rather than risk a wrap.
        target.upstream.lists(&target.name) || !upstream_runs_task_calls(&target.upstream)
    }

    fn call<'a>(
        &'a self,
        session: &'a Arc<Session>,
        id: &'a str,
        params: Value,
    ) -> BoxFuture<'a, Vec<u8>> {
        // A 2026-07-28 client never initializes: its first durable call starts the worker.
        self.durable.start();
        Box::pin(self.durable.create(self, session, id, params))
    }

    /// Session hook, `server/discover`: durable tools are offered through the tasks extension.
    fn on_discover(&self, capabilities: &mut serde_json::Map<String, Value>) {
        ext::advertise(capabilities);
    }

    fn serves(&self, method: &str) -> bool {
        methods::METHODS.contains(&method) || ext_methods::METHODS.contains(&method)
    }

    fn serve<'a>(
        &'a self,
        session: &'a Arc<Session>,
        id: &'a str,
        method: &'a str,
        params: Option<&'a str>,
    ) -> BoxFuture<'a, Vec<u8>> {
        self.durable.start();
        Box::pin(async move {
            let modern = params
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .is_some_and(|p| ext::is_modern(&p));
            if modern {
                ext_methods::serve(&self.durable, session, id, method, params).await
            } else if ext_methods::METHODS.contains(&method) && !methods::METHODS.contains(&method)
            {
                crate::wire::jsonrpc::error_response(
                    id,
                    crate::wire::jsonrpc::code::METHOD_NOT_FOUND,
                    &format!(
                        "{method} belongs to the tasks extension of MCP 2026-07-28; this request is not of that revision"
                    ),
                )
            } else {
                methods::serve(&self.durable, session, id, method, params).await
            }
        })
    }

    /// Session hook, `notifications/cancelled` for request `id` (raw JSON): a durable call's
    /// request was answered with its task already, so the cancel applies to the task — its job
    /// and its attempt in flight (MCP 2025-11-25 asks clients to use `tasks/cancel`; both work).
    fn on_cancelled(&self, session: &Arc<Session>, id: &str) {
        let d = self.durable.clone();
        if self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
        {
            return;
        }
        let _ = session;
        let Some(task) = self.forget(id) else {
            return;
        };
        tokio::spawn(async move { methods::cancel_task(&d, &task).await });
    }
}

fn upstream_runs_task_calls(upstream: &Upstream) -> bool {
    upstream
        .init_result()
        .and_then(|r| serde_json::from_str::<Value>(&r).ok())
        .is_some_and(|v| {
            v.pointer("/capabilities/tasks/requests/tools/call")
                .is_some()
        })
}
