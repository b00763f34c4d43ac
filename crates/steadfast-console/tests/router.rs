//! The jobs console's router, request by request (no browser): pages, the host, session,
//! CSRF and origin checks, actions, sanitizing, hidden arguments, and live updates — on a
//! SQLite store.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use steadfast::ErrorClass;
use steadfast_console::{ConsoleOptions, jobs_router};
use steadfast_jobs::inspect::Inspector;
use steadfast_jobs::{JobContext, JobOptions, JobState, Jobs, WorkerConfig, handler};
use tower::ServiceExt;

const HOST: &str = "127.0.0.1:9090";
const ORIGIN: &str = "http://127.0.0.1:9090";

struct Fixture {
    jobs: Jobs,
    dead: i64,
    _dir: tempfile::TempDir,
}

/// A store with one dead letter (its stored error carries a password) and a queued job
/// whose arguments are a secret.
async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
    let jobs = Jobs::builder()
        .handler(handler("bad", |_ctx: JobContext, _p: String| async move {
            Err::<(), ErrorClass>(ErrorClass::from_status(400))
        }))
        .connect(&url)
        .await
        .unwrap();
    let dead = jobs.queue("bad", &"x", JobOptions::new()).await.unwrap();
    jobs.worker(WorkerConfig::new()).run_once().await.unwrap();
    // An error stored by an older version, or written by hand: the page sanitizes it again.
    sqlx::query(
        "UPDATE steadfast_jobs SET last_error = 'login failed: password=hunter2' WHERE id = $1",
    )
    .bind(dead)
    .execute(jobs.store().pool())
    .await
    .unwrap();
    jobs.queue("mail", &"arg-secret-42", JobOptions::new())
        .await
        .unwrap();
    Fixture {
        jobs,
        dead,
        _dir: dir,
    }
}

fn app(f: &Fixture, opts: ConsoleOptions) -> Router {
    jobs_router(Inspector::new(f.jobs.clone()), opts)
}

fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header(header::HOST, HOST)
        .body(Body::empty())
        .unwrap()
}

fn post(path: &str, form: &str, origin: Option<&str>, cookie: Option<&str>) -> Request<Body> {
    let mut b = Request::post(path)
        .header(header::HOST, HOST)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(o) = origin {
        b = b.header(header::ORIGIN, o);
    }
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    b.body(Body::from(form.to_owned())).unwrap()
}

async fn text(resp: Response<Body>) -> String {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn csrf_of(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 19;
    html[at..].split('"').next().unwrap().to_owned()
}

#[tokio::test]
async fn pages_render_sanitized_with_arguments_hidden() {
    let f = fixture().await;
    let app = app(&f, ConsoleOptions::new());
    let resp = app.clone().oneshot(get("/")).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let csp = resp.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    let html = text(resp).await;
    for part in [
        "Queues",
        "bad",
        "mail",
        "<svg",
        "Newest dead letters",
        &format!("id=\"job-{}\"", f.dead),
    ] {
        assert!(html.contains(part), "front page lacks {part:?}");
    }
    assert!(
        !html.contains("hunter2"),
        "the stored error is sanitized again"
    );
    assert!(html.contains("password=[redacted]"));

    let mail = f.jobs.list(Some(JobState::Available), 1).await.unwrap()[0].id;
    let page = text(
        app.clone()
            .oneshot(get(&format!("/jobs/{mail}")))
            .await
            .unwrap(),
    )
    .await;
    assert!(
        page.contains("Attempts") && !page.contains("arg-secret-42"),
        "arguments hidden"
    );
    let shown = self::app(&f, ConsoleOptions::new().show_arguments(true));
    let page = text(shown.oneshot(get(&format!("/jobs/{mail}"))).await.unwrap()).await;
    assert!(
        page.contains("arg-secret-42"),
        "arguments shown when configured"
    );

    for (path, status) in [
        ("/queues/bad?state=dead", StatusCode::OK),
        ("/dead", StatusCode::OK),
        ("/schedules", StatusCode::OK),
        ("/keys", StatusCode::OK),
        ("/jobs/99999", StatusCode::NOT_FOUND),
        ("/jobs/x", StatusCode::BAD_REQUEST),
        ("/queues/bad?state=zombie", StatusCode::BAD_REQUEST),
        ("/nowhere", StatusCode::NOT_FOUND),
    ] {
        let resp = app.clone().oneshot(get(path)).await.unwrap();
        assert_eq!(resp.status(), status, "{path}");
    }
}

#[tokio::test]
async fn foreign_hosts_origins_and_missing_csrf_are_refused() {
    let f = fixture().await;
    let app = app(&f, ConsoleOptions::new());
    let rebinding = Request::get("/")
        .header(header::HOST, "evil.example:9090")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.clone().oneshot(rebinding).await.unwrap().status(),
        StatusCode::FORBIDDEN
    );

    let csrf = csrf_of(&text(app.clone().oneshot(get("/")).await.unwrap()).await);
    let form = format!("id={}&csrf={csrf}&back=/", f.dead);
    let no_csrf = format!("id={}&back=/", f.dead);
    let wrong = format!("id={}&csrf=0000&back=/", f.dead);
    for (req, why) in [
        (
            post("/actions/retry", &no_csrf, Some(ORIGIN), None),
            "no CSRF token",
        ),
        (
            post("/actions/retry", &wrong, Some(ORIGIN), None),
            "a wrong CSRF token",
        ),
        (
            post("/actions/retry", &form, Some("http://evil.example"), None),
            "another origin",
        ),
        (
            post("/actions/retry", &form, None, None),
            "no Origin or Referer",
        ),
    ] {
        let resp = app.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN, "{why}");
    }
    assert_eq!(
        f.jobs.get(f.dead).await.unwrap().unwrap().state,
        JobState::Dead
    );

    let resp = app
        .clone()
        .oneshot(post("/actions/retry", &form, Some(ORIGIN), None))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()[header::LOCATION], "/");
    assert_eq!(
        f.jobs.get(f.dead).await.unwrap().unwrap().state,
        JobState::Available
    );
    // Again: nothing to retry, said plainly; an open redirect is not followed.
    let form = format!("id={}&csrf={csrf}&back=//evil.example/", f.dead);
    let resp = app
        .clone()
        .oneshot(post("/actions/retry", &form, Some(ORIGIN), None))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    let form = format!("handler=bad&op=pause&csrf={csrf}&back=//evil.example/");
    let resp = app
        .clone()
        .oneshot(post("/actions/queue", &form, Some(ORIGIN), None))
        .await
        .unwrap();
    assert_eq!(resp.headers()[header::LOCATION], "/");
    assert!(
        f.jobs
            .queues()
            .await
            .unwrap()
            .iter()
            .any(|q| q.handler == "bad" && q.paused)
    );
}

#[tokio::test]
async fn an_admin_token_means_a_login_page_and_a_strict_cookie() {
    let f = fixture().await;
    let app = app(&f, ConsoleOptions::new().admin_token("a-long-admin-token"));
    // Any Host is served with a token, but only after logging in.
    let req = Request::get("/")
        .header(header::HOST, "jobs.example.com")
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()[header::LOCATION], "/login");
    let login = text(app.clone().oneshot(get("/login")).await.unwrap()).await;
    assert!(login.contains("Admin token"));
    let csrf = csrf_of(&login);
    let bad = format!("csrf={csrf}&token=guess");
    let resp = app
        .clone()
        .oneshot(post("/login", &bad, Some(ORIGIN), None))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let no_csrf = "token=a-long-admin-token";
    let resp = app
        .clone()
        .oneshot(post("/login", no_csrf, Some(ORIGIN), None))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);

    let good = format!("csrf={csrf}&token=a-long-admin-token");
    let resp = app
        .clone()
        .oneshot(post("/login", &good, Some(ORIGIN), None))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let set = resp.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_owned();
    let req = Request::get("/")
        .header(header::HOST, HOST)
        .header(header::COOKIE, &cookie)
        .body(Body::empty())
        .unwrap();
    let page = text(app.clone().oneshot(req).await.unwrap()).await;
    assert!(page.contains("Queues") && page.contains("Log out"));
    // The session's forms carry its own token; the login page's does not act.
    let mine = csrf_of(&page);
    assert_ne!(mine, csrf);
    let form = format!("id={}&csrf={csrf}&back=/", f.dead);
    let resp = app
        .clone()
        .oneshot(post("/actions/retry", &form, Some(ORIGIN), Some(&cookie)))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let form = format!("id={}&csrf={mine}&back=/", f.dead);
    let resp = app
        .clone()
        .oneshot(post("/actions/retry", &form, Some(ORIGIN), None))
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        StatusCode::UNAUTHORIZED,
        "no session, no action"
    );
    let resp = app
        .clone()
        .oneshot(post("/actions/retry", &form, Some(ORIGIN), Some(&cookie)))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn live_updates_send_the_sections_of_a_page() {
    let f = fixture().await;
    let app = app(&f, ConsoleOptions::new());
    let resp = app
        .oneshot(get("/live?path=%2Fqueues%2Fbad%3Fstate%3Ddead"))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/event-stream");
    let mut body = resp.into_body();
    let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
    let event = String::from_utf8(frame.to_vec()).unwrap();
    assert!(
        event.starts_with("event: sections\ndata: {\"jobs\":{\"h\":"),
        "{event}"
    );
    assert!(event.contains(&format!("job-{}", f.dead)));
    assert!(!event.contains("hunter2"));
}
