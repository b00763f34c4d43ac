//! The part of a console that does not depend on what it shows: the guard every request
//! passes (host, session, origin), the login page, the assets, the page and live-update
//! routes over a [`Pages`] source, and the helpers its action handlers use. The jobs console
//! is one [`Pages`] source; the gateway's admin listener can be another on the same shell.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use futures_util::Stream;
use maud::Markup;

use crate::layout::{self, Page};
use crate::options::ConsoleOptions;
use crate::security::{self, Refusal, Security, Visitor};

/// What a page source answers with.
pub type PageResult = Result<Page, PageError>;

/// A boxed future of a page.
pub type PageFuture<'a> = Pin<Box<dyn Future<Output = PageResult> + Send + 'a>>;

/// Why a page could not be shown.
#[derive(Debug)]
pub enum PageError {
    /// No such page (or no such job, queue, schedule).
    NotFound(String),
    /// A bad query string.
    Bad(String),
    /// The store failed (shown sanitized).
    Store(String),
}

impl PageError {
    fn status(&self) -> (StatusCode, &'static str, &str) {
        match self {
            Self::NotFound(m) => (StatusCode::NOT_FOUND, "Not found", m),
            Self::Bad(m) => (StatusCode::BAD_REQUEST, "Bad request", m),
            Self::Store(m) => (StatusCode::SERVICE_UNAVAILABLE, "The store failed", m),
        }
    }
}

/// A source of pages: renders the page at `path` (relative to the console's base) with
/// `query`, for `visitor` (whose CSRF token its forms carry).
pub trait Pages: Send + Sync + 'static {
    /// The navigation links: (label, path relative to the base).
    fn nav(&self) -> Vec<(&'static str, &'static str)>;
    /// Renders a page.
    fn render<'a>(
        &'a self,
        path: &'a str,
        query: &'a HashMap<String, String>,
        visitor: &'a Visitor,
    ) -> PageFuture<'a>;
}

/// What every route of a console shares.
pub struct Core {
    /// The settings.
    pub opts: ConsoleOptions,
    /// Sessions and checks.
    pub security: Security,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("opts", &self.opts).finish()
    }
}

impl Core {
    /// A console's shared state.
    pub fn new(opts: ConsoleOptions) -> Arc<Self> {
        let security = Security::new(&opts);
        Arc::new(Self { opts, security })
    }

    /// A link to `path` under the base.
    pub fn link(&self, path: &str) -> String {
        format!("{}{path}", self.opts.base)
    }

    /// A refusal as a response: the login page's redirect for a GET without a session, else
    /// 403 with a page that says why.
    pub fn refuse(&self, why: Refusal, method: &Method) -> Response {
        if why == Refusal::Login && *method == Method::GET {
            return Redirect::to(&self.link("/login")).into_response();
        }
        let status = match why {
            Refusal::Login => StatusCode::UNAUTHORIZED,
            _ => StatusCode::FORBIDDEN,
        };
        let page = layout::message(&self.opts.base, "Refused", why.message());
        (status, page).into_response()
    }

    /// Where an action sends the browser back to: `back` if it is a path of this console,
    /// else the console's front page.
    pub fn back(&self, back: Option<&str>) -> Redirect {
        let base = &self.opts.base;
        let ok = back.filter(|b| {
            b.starts_with(&format!("{base}/"))
                && !b.starts_with("//")
                && !b.contains('\\')
                && !b.contains("://")
        });
        Redirect::to(&ok.map_or_else(|| self.link("/"), str::to_owned))
    }
}

/// The guard in front of every route: host, session and origin checks; a visitor let in
/// is handed to the handlers as a request extension.
pub async fn guard(State(core): State<Arc<Core>>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let public = path == "/login" || path.starts_with("/assets/");
    match core.security.admit(req.method(), req.headers(), public) {
        Ok(visitor) => {
            req.extensions_mut().insert(visitor);
            let mut resp = next.run(req).await;
            let h = resp.headers_mut();
            // No framing by other sites, no sniffing, no referrer leaks, scripts only our own.
            h.insert(header::X_FRAME_OPTIONS, "DENY".parse().expect("static"));
            h.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                "nosniff".parse().expect("static"),
            );
            h.insert(
                header::REFERRER_POLICY,
                "same-origin".parse().expect("static"),
            );
            h.insert(
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"
                    .parse()
                    .expect("static"),
            );
            resp
        }
        Err(why) => core.refuse(why, req.method()),
    }
}

#[derive(Clone)]
struct Shell {
    core: Arc<Core>,
    pages: Arc<dyn Pages>,
}

/// The shell's routes (pages, live updates, assets, login) over `pages`, with the guard in
/// front of them and of `actions` (the source's POST routes, already given their state).
pub fn router(core: Arc<Core>, pages: Arc<dyn Pages>, actions: Router) -> Router {
    let shell = Shell {
        core: core.clone(),
        pages,
    };
    Router::new()
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .route("/live", get(live))
        .route("/login", get(login_page).post(login))
        .route("/logout", axum::routing::post(logout))
        .route("/", get(page))
        .route("/{*rest}", get(page))
        .with_state(shell)
        .merge(actions)
        .layer(axum::middleware::from_fn_with_state(core, guard))
}

async fn css() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        layout::CSS,
    )
}

async fn js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        layout::JS,
    )
}

fn nav(s: &Shell) -> Vec<(&'static str, String)> {
    s.pages
        .nav()
        .into_iter()
        .map(|(label, path)| (label, s.core.link(path)))
        .collect()
}

async fn page(
    State(s): State<Shell>,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    axum::Extension(visitor): axum::Extension<Visitor>,
) -> Response {
    match s.pages.render(uri.path(), &query, &visitor).await {
        Ok(page) => {
            let logout = s
                .core
                .security
                .requires_login()
                .then_some(visitor.csrf.as_str());
            layout::shell(&s.core.opts.base, &nav(&s), &page, logout).into_response()
        }
        Err(e) => {
            let (status, title, text) = e.status();
            (status, layout::message(&s.core.opts.base, title, text)).into_response()
        }
    }
}

/// Live updates of one page: every refresh period its sections are rendered again, and those
/// that changed since the last event are sent as JSON `{id: {"h": digest, "html": html}}`
/// (the first event holds them all; the page skips those whose digest it already shows).
async fn live(
    State(s): State<Shell>,
    Query(query): Query<HashMap<String, String>>,
    axum::Extension(visitor): axum::Extension<Visitor>,
) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>> {
    let target = query.get("path").cloned().unwrap_or_else(|| "/".to_owned());
    let (path, q) = match target.split_once('?') {
        Some((p, q)) => (p.to_owned(), q.to_owned()),
        None => (target, String::new()),
    };
    let live = Live {
        shell: s.clone(),
        path,
        query: query_pairs(&q),
        visitor,
        sent: HashMap::new(),
        first: true,
    };
    let every = s.core.opts.refresh;
    let stream = futures_util::stream::unfold(live, move |mut l| async move {
        loop {
            if !l.first {
                tokio::time::sleep(every).await;
            }
            l.first = false;
            if let Some(event) = l.changes().await {
                return Some((Ok(event), l));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// One live stream's state: what it watches, and the digests it sent last.
struct Live {
    shell: Shell,
    path: String,
    query: HashMap<String, String>,
    visitor: Visitor,
    sent: HashMap<&'static str, String>,
    first: bool,
}

impl Live {
    /// The sections that changed, as an event; `None` when none did (or the page failed:
    /// the next period tries again, and the page keeps what it shows).
    async fn changes(&mut self) -> Option<Event> {
        let page = self
            .shell
            .pages
            .render(&self.path, &self.query, &self.visitor)
            .await
            .ok()?;
        let mut changed = serde_json::Map::new();
        for sec in page.sections {
            let html = sec.html.into_string();
            let h = layout::digest(&html);
            if self.sent.get(sec.id) != Some(&h) {
                changed.insert(
                    sec.id.to_owned(),
                    serde_json::json!({ "h": h, "html": html }),
                );
                self.sent.insert(sec.id, h);
            }
        }
        (!changed.is_empty()).then(|| {
            Event::default()
                .event("sections")
                .data(serde_json::Value::Object(changed).to_string())
        })
    }
}

/// `a=1&b=2` into pairs (percent-decoded); malformed pairs are skipped.
fn query_pairs(q: &str) -> HashMap<String, String> {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

async fn login_page(
    State(s): State<Shell>,
    axum::Extension(visitor): axum::Extension<Visitor>,
) -> Markup {
    layout::login(&s.core.opts.base, &visitor.csrf, false)
}

/// The login form.
#[derive(serde::Deserialize)]
struct LoginForm {
    csrf: Option<String>,
    token: String,
}

async fn login(
    State(s): State<Shell>,
    method: Method,
    axum::Extension(visitor): axum::Extension<Visitor>,
    axum::Form(form): axum::Form<LoginForm>,
) -> Response {
    if let Err(why) = s.core.security.check_csrf(&visitor, form.csrf.as_deref()) {
        return s.core.refuse(why, &method);
    }
    match s.core.security.login(&form.token) {
        Some(id) => {
            let cookie = security::session_cookie(&id, &s.core.opts.base);
            (
                [(header::SET_COOKIE, cookie)],
                Redirect::to(&s.core.link("/")),
            )
                .into_response()
        }
        None => (
            StatusCode::UNAUTHORIZED,
            layout::login(&s.core.opts.base, &visitor.csrf, true),
        )
            .into_response(),
    }
}

async fn logout(State(s): State<Shell>, headers: HeaderMap) -> Response {
    s.core.security.logout(&headers);
    let cookie = security::cleared_cookie(&s.core.opts.base);
    (
        [(header::SET_COOKIE, cookie)],
        Redirect::to(&s.core.link("/login")),
    )
        .into_response()
}
