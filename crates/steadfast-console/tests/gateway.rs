//! The gateway console over a real gateway (in this process, over the CLI tests' fake
//! upstream): a failing tool's breaker shows open, a durable call is listed and cancelled from
//! the console, and the console's guard refuses a POST without the CSRF token or from another
//! origin, and a foreign `Host`.
#![cfg(feature = "gateway")]

#[path = "support/gateway.rs"]
mod support;

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use steadfast_console::{ConsoleOptions, gateway_router};
use steadfast_gateway::admin::BreakerState;
use tower::ServiceExt;

const HOST: &str = "127.0.0.1:9091";
const ORIGIN: &str = "http://127.0.0.1:9091";

async fn send(app: &Router, req: Request<Body>) -> (StatusCode, String) {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header(header::HOST, HOST)
        .body(Body::empty())
        .unwrap()
}

fn post(path: &str, origin: Option<&str>, form: &str) -> Request<Body> {
    let mut r = Request::post(path)
        .header(header::HOST, HOST)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(o) = origin {
        r = r.header(header::ORIGIN, o);
    }
    r.body(Body::from(form.to_owned())).unwrap()
}

/// The page's CSRF token (every form carries it).
fn csrf(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with a token")
        + 19;
    page[at..at + page[at..].find('"').unwrap()].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_opens_tasks_cancel_and_refusals() {
    let g = support::start().await;
    let app = gateway_router(
        g.admin.clone(),
        ConsoleOptions::new().refresh(Duration::from_millis(250)),
    );

    // Before any failure: the upstream connected, the tool's breaker not made yet or closed.
    let (status, page) = send(&app, get("/")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("connected"), "{page}");
    assert!(page.contains("id=\"tool-flaky\""), "{page}");
    assert!(!page.contains("data-state=\"open\""), "{page}");

    // Two failures open the breaker (threshold 2); the third call is refused by it.
    let mut c = support::Client::connect(&g.mcp).await;
    for _ in 0..3 {
        let r = c.fail_once().await;
        assert_eq!(
            r.pointer("/result/isError"),
            Some(&serde_json::json!(true)),
            "{r}"
        );
    }
    let snap = g.admin.snapshot().await;
    let flaky = snap
        .tools
        .iter()
        .find(|t| t.name == "flaky")
        .expect("flaky");
    let b = flaky.breaker.as_ref().expect("a breaker");
    assert_eq!(b.state, BreakerState::Open, "{b:?}");
    assert!(b.open_since.is_some() && b.times_opened == 1, "{b:?}");
    assert_eq!(flaky.errors, 3, "{flaky:?}");
    assert_eq!(snap.sessions, 1, "{snap:?}");
    // The page reads the snapshot at most once per refresh period.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, page) = send(&app, get("/")).await;
    let row = &page[page.find("id=\"tool-flaky\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("data-state=\"open\""), "{row}");
    assert!(row.contains("probes at"), "{row}");

    // A durable call, listed and working.
    let task = c.start_task().await;
    let start = Instant::now();
    let page = loop {
        let (_, page) = send(&app, get("/tasks")).await;
        if page.contains(&format!("id=\"task-{task}\"")) && page.contains("data-status=\"working\"")
        {
            break page;
        }
        assert!(
            start.elapsed() < support::BOUND,
            "the task never showed: {page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let token = csrf(&page);
    let form = |csrf: Option<&str>| {
        let mut f = format!("id={task}&back=%2Ftasks");
        if let Some(t) = csrf {
            f.push_str(&format!("&csrf={t}"));
        }
        f
    };

    // Refused: no CSRF token; a wrong one; another origin; no origin; a foreign Host.
    for (req, why) in [
        (
            post("/actions/cancel-task", Some(ORIGIN), &form(None)),
            "no token",
        ),
        (
            post(
                "/actions/cancel-task",
                Some(ORIGIN),
                &form(Some("0123abcd")),
            ),
            "a wrong token",
        ),
        (
            post(
                "/actions/cancel-task",
                Some("http://evil.example"),
                &form(Some(&token)),
            ),
            "another origin",
        ),
        (
            post("/actions/cancel-task", None, &form(Some(&token))),
            "no origin",
        ),
    ] {
        let (status, body) = send(&app, req).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{why}: {body}");
    }
    let foreign = Request::get("/")
        .header(header::HOST, "evil.example")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, foreign).await.0, StatusCode::FORBIDDEN);
    let scrape = Request::get("/metrics")
        .header(header::HOST, "evil.example")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, scrape).await.0, StatusCode::FORBIDDEN);
    let snap = g.admin.snapshot().await;
    let t = snap.tasks.as_ref().unwrap().tasks.as_ref().unwrap();
    assert_eq!(t.iter().find(|t| t.id == task).unwrap().status, "working");

    // Cancelled from the console: back to the page, and the task says so.
    let (status, body) = send(
        &app,
        post("/actions/cancel-task", Some(ORIGIN), &form(Some(&token))),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    let snap = g.admin.snapshot().await;
    let t = snap.tasks.as_ref().unwrap().tasks.as_ref().unwrap();
    assert_eq!(t.iter().find(|t| t.id == task).unwrap().status, "cancelled");
    let r = c
        .request("tasks/get", serde_json::json!({"taskId": task}))
        .await;
    assert_eq!(
        r.pointer("/result/status"),
        Some(&serde_json::json!("cancelled")),
        "{r}"
    );
    // Once more: it has ended.
    let (status, body) = send(
        &app,
        post("/actions/cancel-task", Some(ORIGIN), &form(Some(&token))),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

#[tokio::test]
async fn before_the_gateway_runs_the_console_says_so() {
    let admin = steadfast_gateway::admin::Admin::new();
    let app = gateway_router(admin.clone(), ConsoleOptions::new());
    let (status, page) = send(&app, get("/")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("The gateway is starting"), "{page}");
    let (status, _) = send(&app, get("/metrics")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        admin.cancel_task("x").await.unwrap_err(),
        "the gateway is not running"
    );
}

/// An upstream that cannot start, whose command line carries a credential: the page shows it
/// not connected, with a reason, and never the credential (the sanitizer redacts it in the
/// command shown and in the reason).
#[tokio::test]
async fn a_failing_upstream_is_shown_sanitized() {
    use tokio::io::AsyncWriteExt;
    let admin = steadfast_gateway::admin::Admin::new();
    let upstream = steadfast_mcp::Upstream::command(
        "sh",
        [
            "-c",
            "echo 'cannot reach postgres://admin:hunter2@db.internal:5432/app' >&2; exit 3",
            "postgres://admin:hunter2@db.internal:5432/app",
        ],
    );
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let (reader, writer) = tokio::io::split(server);
    let serving = admin.clone();
    let task = tokio::spawn(async move {
        let config =
            steadfast_gateway::Config::parse_toml("[proxy]\ninit_timeout = \"2s\"\n", "test.toml")
                .unwrap();
        let _ = serving
            .attach(steadfast_gateway::serve_io(
                config, upstream, reader, writer, None,
            ))
            .await;
    });
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    client
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let start = Instant::now();
    let snap = loop {
        let s = admin.snapshot().await;
        if s.upstreams.first().is_some_and(|u| u.reason.is_some()) {
            break s;
        }
        assert!(start.elapsed() < support::BOUND, "no reason shown: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let app = gateway_router(admin, ConsoleOptions::new());
    let (status, page) = send(&app, get("/")).await;
    assert_eq!(status, StatusCode::OK);
    let up = &snap.upstreams[0];
    assert!(
        page.contains(&format!("data-state=\"{}\"", up.status.as_str())),
        "{page}"
    );
    assert!(!page.contains("hunter2"), "{page}");
    assert!(!format!("{snap:?}").contains("hunter2"), "{snap:?}");
    task.abort();
}
