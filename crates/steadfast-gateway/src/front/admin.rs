//! What an admin console sees of a running gateway, and the one thing it may do (cancel a
//! durable tool call). The gateway does not serve pages itself: a console (the
//! `steadfast-console` crate's `gateway` feature, `steadfast proxy --admin ADDR`) holds an
//! [`Admin`], runs the gateway inside [`Admin::attach`], and reads [`Admin::snapshot`].
//!
//! ```no_run
//! # async fn f() -> std::io::Result<()> {
//! use steadfast_gateway::{Config, admin::Admin};
//! let admin = Admin::new();
//! let upstream = steadfast_mcp::Upstream::command("python3", ["server.py"]);
//! let serving = steadfast_gateway::serve_stdio(Config::default(), upstream);
//! let reader = admin.clone();
//! tokio::spawn(async move {
//!     let snap = reader.snapshot().await;
//!     println!("{} upstreams", snap.upstreams.len());
//! });
//! admin.attach(serving).await?;
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};

use chrono::{DateTime, Utc};

use crate::route::router::Router;
use crate::tasks::Durable;

pub use crate::route::snapshot::{BreakerView, ToolView, UpstreamStatus, UpstreamView};
pub use crate::tasks::admin::{Cancelled, TaskView};
pub use steadfast::BreakerState;

/// Tasks shown at most (the newest).
const TASKS_SHOWN: i64 = 50;

tokio::task_local! {
    /// The admin handle of the gateway being built on this task (see [`Admin::attach`]).
    static ADMIN: Admin;
}

/// A handle on a gateway for an admin console: empty until the gateway it
/// [attached](Admin::attach) to is built, then a window on its state. Clones share it.
#[derive(Clone, Default)]
pub struct Admin {
    inner: Arc<Inner>,
}

/// The gateway built under a handle: its router and, with `[tasks]`, its durable calls.
type Attached = (Weak<Router>, Option<Weak<Durable>>);

/// (upstream, breaker) → (times opened, when first seen open in that opening).
type Openings = HashMap<(String, String), (u64, DateTime<Utc>)>;

#[derive(Default)]
struct Inner {
    gateway: Mutex<Option<Attached>>,
    opened: Mutex<Openings>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("attached", &self.is_attached())
            .finish_non_exhaustive()
    }
}

/// The gateway's durable tool calls (`[tasks]`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TasksView {
    /// `postgres` (replicas on one database share their tasks) or `sqlite`.
    pub store: &'static str,
    /// The newest tasks, newest first, or why they could not be read (sanitized).
    pub tasks: Result<Vec<TaskView>, String>,
}

/// The gateway as the console shows it, read at [`Snapshot::at`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Snapshot {
    /// When it was read.
    pub at: DateTime<Utc>,
    /// Whether the gateway has been built yet (everything else is empty before).
    pub running: bool,
    /// Each upstream.
    pub upstreams: Vec<UpstreamView>,
    /// Each tool listed or called, by upstream.
    pub tools: Vec<ToolView>,
    /// Breakers no listed tool names (a dependency's, or an unlisted tool's), by upstream.
    pub other_breakers: Vec<(String, BreakerView)>,
    /// Clients (sessions) that initialized and are still there.
    pub sessions: usize,
    /// Requests sent to upstreams and not answered yet.
    pub in_flight: usize,
    /// Whether breakers, budgets and call counts are shared with other replicas on Redis.
    pub shared_on_redis: bool,
    /// Durable tool calls, when `[tasks]` is on.
    pub tasks: Option<TasksView>,
}

/// Registers the gateway just built with the [`Admin`] it runs under, if any.
pub(crate) fn publish(router: &Arc<Router>, durable: Option<&Arc<Durable>>) {
    let _ = ADMIN.try_with(|a| {
        *a.inner.gateway.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Arc::downgrade(router), durable.map(Arc::downgrade)));
        // Now, so the scrape counts from the start; after the front's own attempt (the HTTP
        // front installs its recorder earlier in the build, and keeps it).
        a.recorder();
    });
}

impl Admin {
    /// A handle not attached to any gateway yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `serving` (one of the `serve_*` futures) with this handle attached: the gateway it
    /// builds becomes the one [`Admin::snapshot`] reads.
    pub async fn attach<F: Future>(&self, serving: F) -> F::Output {
        ADMIN.scope(self.clone(), serving).await
    }

    /// Whether the gateway is built and still running.
    pub fn is_attached(&self) -> bool {
        self.parts().0.is_some()
    }

    fn parts(&self) -> (Option<Arc<Router>>, Option<Arc<Durable>>) {
        match &*self.inner.gateway.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((r, d)) => (r.upgrade(), d.as_ref().and_then(Weak::upgrade)),
            None => (None, None),
        }
    }

    /// The gateway's state now (empty, `running: false`, before it is built).
    pub async fn snapshot(&self) -> Snapshot {
        let at = Utc::now();
        let (router, durable) = self.parts();
        let mut snap = Snapshot {
            at,
            running: router.is_some(),
            upstreams: Vec::new(),
            tools: Vec::new(),
            other_breakers: Vec::new(),
            sessions: 0,
            in_flight: 0,
            shared_on_redis: false,
            tasks: None,
        };
        let Some(router) = router else {
            return snap;
        };
        let view = crate::route::snapshot::read(&router);
        snap.in_flight = view.upstreams.iter().map(|u| u.in_flight).sum();
        snap.upstreams = view.upstreams;
        snap.tools = view.tools;
        snap.other_breakers = view.other_breakers;
        snap.sessions = view.clients;
        snap.shared_on_redis = router.shared_on_redis();
        self.stamp_openings(&mut snap);
        if let Some(d) = durable {
            snap.tasks = Some(TasksView {
                store: crate::tasks::admin::backend(&d),
                tasks: crate::tasks::admin::recent(&d, TASKS_SHOWN).await,
            });
        }
        snap
    }

    /// Gives each open breaker the time it was first seen open in its current opening.
    fn stamp_openings(&self, snap: &mut Snapshot) {
        let mut opened = self.inner.opened.lock().unwrap_or_else(|e| e.into_inner());
        let mut live = std::collections::HashSet::new();
        let breakers = snap
            .tools
            .iter_mut()
            .filter_map(|t| t.breaker.as_mut().map(|b| (t.upstream.clone(), b)))
            .chain(snap.other_breakers.iter_mut().map(|(u, b)| (u.clone(), b)));
        for (upstream, b) in breakers {
            if b.state == BreakerState::Closed {
                continue;
            }
            let key = (upstream, b.key.clone());
            let entry = opened
                .entry(key.clone())
                .or_insert((b.times_opened, snap.at));
            if entry.0 != b.times_opened {
                *entry = (b.times_opened, snap.at);
            }
            b.open_since = Some(entry.1);
            live.insert(key);
        }
        opened.retain(|k, _| live.contains(k));
    }

    /// Cancels durable task `id` as `tasks/cancel` would (whoever created it).
    pub async fn cancel_task(&self, id: &str) -> Result<Cancelled, String> {
        match self.parts() {
            (Some(_), Some(d)) => crate::tasks::admin::cancel(&d, id).await,
            (Some(_), None) => Err("durable tool calls are off ([tasks])".into()),
            _ => Err("the gateway is not running".into()),
        }
    }

    /// The Prometheus scrape of this process: the recorder the HTTP front's `/metrics` serves
    /// too (installed by whichever asks first), unless a library user installed their own.
    pub fn metrics(&self) -> Option<String> {
        if !self.is_attached() {
            return None;
        }
        self.recorder()
    }

    /// The process's recorder (installed once, shared with the HTTP front); its scrape.
    fn recorder(&self) -> Option<String> {
        #[cfg(feature = "http")]
        {
            crate::front::prometheus::recorder().map(|h| h.render())
        }
        #[cfg(not(feature = "http"))]
        None
    }
}
