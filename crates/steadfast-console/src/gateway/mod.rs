//! The gateway console: upstreams, tools and their breakers, budgets and durable tool calls of
//! a running gateway, as a [`Pages`] source on the shared shell, with its one action (cancel a
//! durable call) and the process's `/metrics`.

mod pages;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Form};
use steadfast_gateway::admin::{Admin, Cancelled, Snapshot};

use crate::layout::{self, Page};
use crate::options::ConsoleOptions;
use crate::security::Visitor;
use crate::shell::{self, Core, PageError, PageFuture, Pages};

/// The gateway pages over one [`Admin`] handle.
struct GatewayPages {
    core: Arc<Core>,
    admin: Admin,
    refresh: Duration,
    /// The last snapshot and when it was read: read at most once per refresh period however
    /// many browsers watch (the task list is a query on the task store).
    cache: tokio::sync::Mutex<Option<(Instant, Arc<Snapshot>)>>,
}

/// The router of a gateway console over `admin` (a handle the gateway runs under, see
/// [`Admin::attach`]): its pages, the cancel action and `/metrics`. Mount it, or serve it with
/// [`serve`](crate::serve).
///
/// ```no_run
/// use steadfast_console::{ConsoleOptions, gateway_router, serve};
/// use steadfast_gateway::{Config, admin::Admin, serve_stdio};
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let admin = Admin::new();
/// let opts = ConsoleOptions::new();
/// let console = gateway_router(admin.clone(), opts.clone());
/// tokio::spawn(async move { serve("127.0.0.1:9091".parse().unwrap(), console, &opts).await });
/// let upstream = steadfast_mcp::Upstream::command("python3", ["server.py"]);
/// admin.attach(serve_stdio(Config::default(), upstream)).await?;
/// # Ok(()) }
/// ```
pub fn router(admin: Admin, opts: ConsoleOptions) -> Router {
    let refresh = opts.refresh;
    let core = Core::new(opts);
    let pages = Arc::new(GatewayPages {
        core: core.clone(),
        admin,
        refresh,
        cache: tokio::sync::Mutex::new(None),
    });
    let actions = Router::new()
        .route("/actions/cancel-task", post(cancel_task))
        .with_state(pages.clone());
    let scrape = Router::new()
        .route("/metrics", get(metrics))
        .with_state(pages.clone());
    shell::router(core, pages, actions).merge(scrape)
}

impl GatewayPages {
    async fn snapshot(&self) -> Arc<Snapshot> {
        let mut cache = self.cache.lock().await;
        if let Some((at, s)) = &*cache
            && at.elapsed() < self.refresh
        {
            return s.clone();
        }
        let s = Arc::new(self.admin.snapshot().await);
        *cache = Some((Instant::now(), s.clone()));
        s
    }

    async fn page(&self, path: &str, visitor: &Visitor) -> Result<Page, PageError> {
        let snap = self.snapshot().await;
        let c = pages::Ctx {
            base: &self.core.opts.base,
            csrf: &visitor.csrf,
            back: self.core.link(path),
        };
        let (title, sections) = match path.trim_end_matches('/') {
            "" => ("Gateway", pages::overview(&c, &snap)),
            "/tasks" => ("Durable tool calls", pages::tasks_page(&c, &snap)),
            _ => return Err(PageError::NotFound(format!("no page at {path}"))),
        };
        Ok(Page {
            title: title.to_owned(),
            live: true,
            sections,
        })
    }
}

impl Pages for GatewayPages {
    fn nav(&self) -> Vec<(&'static str, &'static str)> {
        vec![
            ("Gateway", "/"),
            ("Durable calls", "/tasks"),
            ("Metrics", "/metrics"),
        ]
    }

    fn render<'a>(
        &'a self,
        path: &'a str,
        _query: &'a HashMap<String, String>,
        visitor: &'a Visitor,
    ) -> PageFuture<'a> {
        Box::pin(self.page(path, visitor))
    }
}

/// The cancel form.
#[derive(Debug, serde::Deserialize)]
struct CancelForm {
    csrf: Option<String>,
    back: Option<String>,
    id: Option<String>,
}

/// Cancels a durable call: the guard checked the host, session and `Origin`; this checks the
/// form's CSRF token.
async fn cancel_task(
    State(p): State<Arc<GatewayPages>>,
    Extension(visitor): Extension<Visitor>,
    Form(form): Form<CancelForm>,
) -> Response {
    let core = &p.core;
    if let Err(why) = core.security.check_csrf(&visitor, form.csrf.as_deref()) {
        return core.refuse(why, &Method::POST);
    }
    let failed = |status, text: String| {
        (
            status,
            layout::message(&core.opts.base, "The action failed", &text),
        )
            .into_response()
    };
    let Some(id) = form.id.filter(|i| !i.is_empty()) else {
        return failed(StatusCode::BAD_REQUEST, "the form lacks id".into());
    };
    let result = p.admin.cancel_task(&id).await;
    *p.cache.lock().await = None;
    match result {
        Ok(Cancelled::Done) => core.back(form.back.as_deref()).into_response(),
        Ok(Cancelled::NotFound) => failed(StatusCode::NOT_FOUND, format!("no task {id}")),
        Ok(Cancelled::AlreadyEnded(s)) => failed(
            StatusCode::CONFLICT,
            format!("task {id} is already {s}: it cannot be cancelled"),
        ),
        Ok(_) => failed(StatusCode::CONFLICT, format!("task {id} was not cancelled")),
        Err(e) => failed(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

/// The process's Prometheus scrape. Outside the page guard (a scraper has no session): the
/// same `Host` rule, and with an admin token an `Authorization: Bearer` header carrying it.
async fn metrics(State(p): State<Arc<GatewayPages>>, headers: HeaderMap) -> Response {
    if let Err(why) = p.core.security.admit_scrape(&headers) {
        return p.core.refuse(why, &Method::POST);
    }
    match p.admin.metrics() {
        Some(text) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "no metrics here: the gateway is starting, or the process has another metrics \
             recorder (a library user's)\n",
        )
            .into_response(),
    }
}
