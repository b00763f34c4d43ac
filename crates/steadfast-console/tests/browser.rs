//! The console in a real browser: Debian's Chromium, headless, driven through chromedriver
//! (WebDriver) named by `STEADFAST_TEST_CHROMEDRIVER` (`scripts/chromium.sh --install` prints
//! it). Against SQLite, and PostgreSQL when `STEADFAST_TEST_POSTGRES_URL` is set too:
//!
//! * a job that fails appears among the dead letters within 3 s, without a reload;
//! * its Retry button (a POST with the CSRF token) queues it again, and the page shows it
//!   done (it succeeds the second time);
//! * a POST without the CSRF token, and a form posted from another origin, are refused (403);
//! * with an admin token, the console opens on its login page, and the token lets one in;
//! * (feature `gateway`) the gateway console over a real gateway whose tool fails: its
//!   breaker's opening shows on the page within 3 s, without a reload; a durable call's Cancel
//!   button cancels it.
//!
//! Screenshots of the pages go to `target/tmp/console-screenshots/` (CI keeps them). Each
//! main page is also checked with axe-core (no serious or critical WCAG 2 A/AA violation),
//! and the gateway page for keyboard focus.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(feature = "gateway")]
#[path = "support/gateway.rs"]
mod gateway_support;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use steadfast::ErrorClass;
use steadfast_console::{ConsoleOptions, jobs_router, serve_on};
use steadfast_jobs::inspect::Inspector;
use steadfast_jobs::{JobContext, JobOptions, JobState, Jobs, StoreOptions, WorkerConfig, handler};

fn chromedriver() -> String {
    std::env::var("STEADFAST_TEST_CHROMEDRIVER").unwrap_or_else(|_| {
        panic!(
            "this test needs Chromium and chromedriver: set STEADFAST_TEST_CHROMEDRIVER \
             (bash scripts/chromium.sh --install prints it)"
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: set STEADFAST_TEST_CHROMEDRIVER (scripts/chromium.sh --install)"]
async fn console_in_chromium_on_sqlite() {
    let driver = chromedriver();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("jobs.db").display());
    scenario(&driver, StoreOptions::new(url), "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium and PostgreSQL: set STEADFAST_TEST_CHROMEDRIVER and STEADFAST_TEST_POSTGRES_URL"]
async fn console_in_chromium_on_postgres() {
    let driver = chromedriver();
    let url = std::env::var("STEADFAST_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| panic!("this test needs PostgreSQL: set STEADFAST_TEST_POSTGRES_URL"));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = format!("console_browser_{}_{nanos}", std::process::id());
    scenario(&driver, StoreOptions::new(url).schema(schema), "postgres").await;
}

/// chromedriver on a free port, ended when dropped.
struct Driver(Child, String);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_driver(path: &str) -> Driver {
    let port = free_port();
    let child = Command::new(path)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {path}: {e}"));
    let driver = Driver(child, format!("http://127.0.0.1:{port}"));
    // Ready when it accepts connections (it takes a moment to start).
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    driver
}

async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    let mut chrome = json!({
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"]
    });
    if let Ok(bin) = which("chromium") {
        chrome["binary"] = json!(bin);
    }
    caps.insert("goog:chromeOptions".into(), chrome);
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.1)
        .await
        .expect("a Chromium session")
}

fn which(name: &str) -> Result<String, ()> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|f| f.is_file())
        })
        .map(|f| f.display().to_string())
        .ok_or(())
}

/// Serves `app` on a free loopback port.
async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_on(listener, app));
    addr
}

async fn screenshot(c: &Client, name: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = c.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// axe-core's serious and critical violations on the page now (WCAG 2 A and AA rules), as
/// "rule: how many elements" lines. axe-core comes from npm, installed by
/// `scripts/chromium.sh --install` into `target/axe` (nothing is downloaded at test time); a
/// run with a browser but without it fails rather than skip the check.
async fn accessibility_violations(c: &Client) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/axe/node_modules/axe-core/axe.min.js");
    let axe = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "axe-core at {} ({e}): run `bash scripts/chromium.sh --install`",
            path.display()
        )
    });
    c.execute(&axe, vec![]).await.expect("axe-core loads");
    let run = "const done = arguments[arguments.length - 1];
        axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}})
          .then(r => done(r.violations
            .filter(v => v.impact === 'serious' || v.impact === 'critical')
            .map(v => v.id + ': ' + v.nodes.length + ' (' + v.nodes[0].target.join(' ') + ')')))
          .catch(e => done(['axe failed: ' + e]));";
    let found = c.execute_async(run, vec![]).await.expect("axe-core runs");
    serde_json::from_value(found).expect("a list of violations")
}

/// Asserts the page has no serious or critical WCAG 2 A/AA violation (axe-core).
async fn assert_accessible(c: &Client, page: &str) {
    let found = accessibility_violations(c).await;
    assert!(found.is_empty(), "{page}: axe-core found {found:?}");
}

/// Polls the page until `js` returns true, for at most `limit`; returns how long it took.
async fn until(c: &Client, js: &str, limit: Duration, what: &str) -> Duration {
    let start = Instant::now();
    loop {
        if c.execute(js, vec![]).await.unwrap() == json!(true) {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Clicks the element `css` selects; again if a live update replaced it meanwhile.
async fn click(c: &Client, css: &str) {
    for _ in 0..5 {
        let el = c.find(Locator::Css(css)).await.unwrap();
        match el.click().await {
            Ok(()) => return,
            Err(e) if e.to_string().contains("stale") => continue,
            Err(e) => panic!("click {css}: {e}"),
        }
    }
    panic!("click {css}: the element kept being replaced");
}

async fn scenario(driver_path: &str, store: StoreOptions, name: &str) {
    // `flaky` fails for good the first time it sees a payload, and succeeds after.
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let jobs = Jobs::builder()
        .handler(handler("flaky", move |_ctx: JobContext, p: String| {
            let first = seen.lock().unwrap().insert(p);
            async move {
                if first {
                    Err(ErrorClass::from_status(400))
                } else {
                    Ok(())
                }
            }
        }))
        .connect_with(store)
        .await
        .unwrap();
    let worker = jobs
        .worker(WorkerConfig::new().poll_interval(Duration::from_millis(100)))
        .start()
        .unwrap();
    let opts = ConsoleOptions::new().refresh(Duration::from_millis(500));
    let console = serve(jobs_router(Inspector::new(jobs.clone()), opts)).await;
    let base = format!("http://{console}");
    let driver = start_driver(driver_path).await;
    let c = browser(&driver).await;

    c.goto(&format!("{base}/")).await.unwrap();
    c.execute("window.__same_page = 42; return true;", vec![])
        .await
        .unwrap();
    let id = jobs
        .queue("flaky", &"boom", JobOptions::new())
        .await
        .unwrap();
    let queued = Instant::now();
    let probe = jobs.clone();
    let died = tokio::spawn(async move {
        while probe.get(id).await.unwrap().unwrap().state != JobState::Dead {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        queued.elapsed()
    });
    // The worker's part (claim, run, store the dead letter) is not the console's: the page
    // must show it within 3 s of its being stored, and the whole within a sane bound.
    let shown = until(
        &c,
        &format!("return document.querySelector('#dead #job-{id}') !== null;"),
        Duration::from_secs(10),
        "the dead letter on the page",
    )
    .await;
    let died = died.await.unwrap();
    eprintln!("{name}: dead letter stored {died:?} and shown {shown:?} after it was queued");
    assert!(
        shown.saturating_sub(died) < Duration::from_secs(3),
        "shown {shown:?} after queueing, stored {died:?}: the page lagged 3 s or more"
    );
    let same = c
        .execute("return window.__same_page === 42;", vec![])
        .await
        .unwrap();
    assert_eq!(same, json!(true), "the page was not reloaded");
    assert_eq!(jobs.get(id).await.unwrap().unwrap().state, JobState::Dead);
    screenshot(&c, &format!("overview-{name}")).await;
    assert_accessible(&c, &format!("overview-{name}")).await;

    // A POST without the CSRF token, from the page itself: refused.
    let status = c
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch('/actions/retry', {method: 'POST', headers: {'content-type': 'application/x-www-form-urlencoded'},
               body: 'id=' + arguments[0] + '&back=/'}).then(r => done(r.status));",
            vec![json!(id)],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403));

    // The same form with the token, posted from another origin: refused.
    let csrf = c
        .execute(
            "return document.querySelector('input[name=csrf]').value;",
            vec![],
        )
        .await
        .unwrap();
    let evil_page = format!(
        "<!doctype html><form id=f method=post action='{base}/actions/retry'>\
         <input name=id value={id}><input name=csrf value={}><input name=back value=/></form>\
         <script>document.getElementById('f').submit()</script>",
        csrf.as_str().unwrap()
    );
    let evil = serve(axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let page = evil_page.clone();
            async move { axum::response::Html(page) }
        }),
    ))
    .await;
    c.goto(&format!("http://{evil}/")).await.unwrap();
    until(
        &c,
        "return document.body !== null && document.body.innerText.includes('another origin');",
        Duration::from_secs(5),
        "the refusal of a cross-origin form",
    )
    .await;
    assert_eq!(jobs.get(id).await.unwrap().unwrap().state, JobState::Dead);

    // Retry from the page: queued again, runs, succeeds; the page shows it.
    c.goto(&format!("{base}/")).await.unwrap();
    click(
        &c,
        &format!("#job-{id} form[action$='/actions/retry'] button"),
    )
    .await;
    until(
        &c,
        &format!(
            "return document.querySelector('#dead #job-{id}') === null && \
             document.querySelector('#queues').innerText.match(/flaky\\s+0\\s+0\\s+1\\s+0/) !== null;"
        ),
        Duration::from_secs(3),
        "the retried job done on the page",
    )
    .await;
    assert_eq!(jobs.get(id).await.unwrap().unwrap().state, JobState::Done);
    c.goto(&format!("{base}/jobs/{id}")).await.unwrap();
    let job = c
        .find(Locator::Css("#job"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(job.contains("done") && job.contains("Attempts"), "{job}");
    screenshot(&c, &format!("job-{name}")).await;
    assert_accessible(&c, &format!("job-{name}")).await;

    // With an admin token: the login page first, then the console.
    let token = "browser-test-admin-token";
    let locked = ConsoleOptions::new().admin_token(token);
    let locked = serve(jobs_router(Inspector::new(jobs.clone()), locked)).await;
    c.goto(&format!("http://{locked}/")).await.unwrap();
    let url = c.current_url().await.unwrap();
    assert_eq!(url.path(), "/login");
    screenshot(&c, &format!("login-{name}")).await;
    assert_accessible(&c, &format!("login-{name}")).await;
    c.find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    c.find(Locator::Css("form button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(
        &c,
        "return document.querySelector('#queues') !== null;",
        Duration::from_secs(5),
        "the console after logging in",
    )
    .await;

    c.close().await.unwrap();
    worker.shutdown().await.unwrap();
}

#[cfg(feature = "gateway")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Chromium: set STEADFAST_TEST_CHROMEDRIVER (scripts/chromium.sh --install)"]
async fn gateway_console_in_chromium() {
    let driver_path = chromedriver();
    let g = gateway_support::start().await;
    let opts = ConsoleOptions::new().refresh(Duration::from_millis(500));
    let console = serve(steadfast_console::gateway_router(g.admin.clone(), opts)).await;
    let base = format!("http://{console}");
    let driver = start_driver(&driver_path).await;
    let c = browser(&driver).await;

    c.goto(&format!("{base}/")).await.unwrap();
    until(
        &c,
        "return document.querySelector('#tool-flaky') !== null;",
        Duration::from_secs(5),
        "the failing tool listed",
    )
    .await;
    c.execute("window.__same_page = 42; return true;", vec![])
        .await
        .unwrap();
    let open = "return document.querySelector('#tool-flaky [data-state=open]') !== null;";
    assert_eq!(c.execute(open, vec![]).await.unwrap(), json!(false));

    // Two failures (the threshold): the breaker is open once the second is answered.
    let mut client = gateway_support::Client::connect(&g.mcp).await;
    client.fail_once().await;
    client.fail_once().await;
    let opened = Instant::now();
    let shown = until(
        &c,
        open,
        Duration::from_secs(3),
        "the open breaker on the page",
    )
    .await;
    eprintln!(
        "gateway: breaker open on the page {shown:?} after it opened ({:?} in all)",
        opened.elapsed()
    );
    let same = c
        .execute("return window.__same_page === 42;", vec![])
        .await
        .unwrap();
    assert_eq!(same, json!(true), "the page was not reloaded");
    screenshot(&c, "gateway").await;
    assert_accessible(&c, "gateway").await;
    // The keyboard reaches the page's controls: Tab from the top focuses a link or a button.
    let body = c.find(Locator::Css("body")).await.unwrap();
    body.send_keys("\u{E004}").await.unwrap(); // WebDriver's Tab
    let focused = c
        .execute("return document.activeElement.tagName;", vec![])
        .await
        .unwrap();
    assert!(
        matches!(focused.as_str(), Some("A" | "BUTTON" | "INPUT")),
        "Tab focused {focused}"
    );
    // The check can fail: an image without a text alternative is found.
    c.execute(
        "document.body.insertAdjacentHTML('beforeend', '<img src=\"/x.png\">');",
        vec![],
    )
    .await
    .unwrap();
    let found = accessibility_violations(&c).await;
    assert!(
        found.iter().any(|v| v.starts_with("image-alt")),
        "axe-core did not see a known violation: {found:?}"
    );

    // A durable call that never ends, cancelled with its button on the tasks page.
    let task = client.start_task().await;
    c.goto(&format!("{base}/tasks")).await.unwrap();
    let row = format!("document.getElementById('task-{task}')");
    until(
        &c,
        &format!("return {row} !== null && {row}.querySelector('[data-status=working]') !== null;"),
        Duration::from_secs(5),
        "the working task on the page",
    )
    .await;
    screenshot(&c, "gateway-tasks").await;
    assert_accessible(&c, "gateway-tasks").await;
    let button = c
        .execute(
            &format!("return {row}.querySelector('form[action$=\\'/actions/cancel-task\\'] button') !== null;"),
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(button, json!(true));
    c.execute(
        &format!("{row}.querySelector('form button').click(); return true;"),
        vec![],
    )
    .await
    .unwrap();
    until(
        &c,
        &format!("const r = {row}; return r !== null && r.querySelector('[data-status=cancelled]') !== null;"),
        Duration::from_secs(5),
        "the cancelled task on the page",
    )
    .await;
    let r = client.request("tasks/get", json!({"taskId": task})).await;
    assert_eq!(
        r.pointer("/result/status"),
        Some(&json!("cancelled")),
        "{r}"
    );
    c.close().await.unwrap();
}
