//! Three real processes sharing state through a real Redis.
//!
//! This test binary is its own child: run as `replicas replica ARGS…` it is one replica (the
//! same code as the `replica` example). It has no libtest harness, so it gates itself like an
//! `#[ignore]`d test: it runs only with `--ignored` / `--include-ignored`, and then fails
//! naming `STEADFAST_TEST_REDIS_URL` when that is unset; otherwise it reports the tests as ignored.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A test: its name and its body, given the Redis URL.
type Test = (&'static str, fn(&str));

const TESTS: [Test; 3] = [
    (
        "one_failing_replica_opens_the_breaker_for_all_within_a_second",
        breaker_opens_for_all,
    ),
    (
        "with_quorum_2_one_failing_replica_alone_does_not_open_it",
        quorum_holds,
    ),
    (
        "hundred_duplicates_across_three_processes_run_once",
        duplicates_run_once,
    ),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("replica") {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        if let Err(usage) = rt.block_on(support::replica::run(&args[2..])) {
            eprintln!("{usage}");
            std::process::exit(2);
        }
        return;
    }
    if args.iter().any(|a| a == "--list") {
        for (name, _) in TESTS {
            println!("{name}: test");
        }
        return;
    }
    let wanted = args
        .iter()
        .any(|a| a == "--ignored" || a == "--include-ignored");
    if !wanted {
        for (name, _) in TESTS {
            println!("test {name} ... ignored, needs Redis: set STEADFAST_TEST_REDIS_URL");
        }
        return;
    }
    // Positional arguments are name filters, as with libtest; skip the values of its options.
    let mut filter = Vec::new();
    let mut rest = args[1..].iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--test-threads" | "--skip" | "--format" | "--color" | "--logfile" | "-Z"
            | "--shuffle-seed" => {
                rest.next();
            }
            _ if a.starts_with('-') => {}
            _ => filter.push(a),
        }
    }
    let chosen: Vec<Test> = TESTS
        .into_iter()
        .filter(|(name, _)| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())))
        .collect();
    if chosen.is_empty() {
        return;
    }
    // Asked for without Redis: fail, as a libtest `#[ignore]`d test that panics would.
    let Ok(url) = std::env::var("STEADFAST_TEST_REDIS_URL") else {
        eprintln!("these tests need Redis: set STEADFAST_TEST_REDIS_URL");
        std::process::exit(101);
    };
    for (name, test) in chosen {
        let started = Instant::now();
        test(&url);
        println!("test {name} ... ok ({:.1?})", started.elapsed());
    }
}

fn prefix(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("sf-test-{test}-{}-{nanos}", std::process::id())
}

/// A child replica and the lines it prints, as they arrive.
struct Replica {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Replica {
    fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(std::env::current_exe().expect("test binary path"))
            .arg("replica")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn replica");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The next line starting with `word`, within `within`; lines before it are dropped.
    fn wait_for(&self, word: &str, within: Duration) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(word) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// Every line until the process ends (bounded), then its exit.
    fn finish(mut self, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => out.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!("replica did not finish within {within:?}; output so far: {out:?}");
                }
            }
        }
        let status = self.child.wait().expect("wait for replica");
        assert!(
            status.success(),
            "replica failed: {status}; output: {out:?}"
        );
        out
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stamp(line: &str) -> u128 {
    line.split_whitespace()
        .nth(1)
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no timestamp in {line:?}"))
}

const READY: Duration = Duration::from_secs(20);

fn breaker_opens_for_all(url: &str) {
    let p = prefix("open");
    let healthy: Vec<Replica> = ["b", "c"]
        .iter()
        .map(|r| Replica::spawn(&["breaker", url, &p, r, "1", "ok", "6000"]))
        .collect();
    for r in &healthy {
        r.wait_for("ready", READY).expect("healthy replica ready");
    }
    let failing = Replica::spawn(&["breaker", url, &p, "a", "1", "fail", "3000"]);
    let opened = stamp(
        &failing
            .wait_for("opened", READY)
            .expect("the failing replica's breaker opens"),
    );
    for r in &healthy {
        let rejected = r
            .wait_for("rejected", Duration::from_secs(5))
            .expect("a healthy replica fails fast once the breaker is open for all");
        let lag = stamp(&rejected).saturating_sub(opened);
        assert!(
            lag <= 1000,
            "a healthy replica failed fast only after {lag} ms"
        );
    }
}

fn quorum_holds(url: &str) {
    let p = prefix("quorum");
    let healthy: Vec<Replica> = ["b", "c"]
        .iter()
        .map(|r| Replica::spawn(&["breaker", url, &p, r, "2", "ok", "8000"]))
        .collect();
    for r in &healthy {
        r.wait_for("ready", READY).expect("healthy replica ready");
    }
    let first = Replica::spawn(&["breaker", url, &p, "a1", "2", "fail", "2500"]);
    first
        .wait_for("opened", READY)
        .expect("the failing replica opens its own breaker");
    for r in &healthy {
        assert_eq!(
            r.wait_for("rejected", Duration::from_millis(1500)),
            None,
            "one failing replica must not open the breaker for the others under quorum 2"
        );
    }
    // The control: a second failing replica makes the quorum, and the breaker opens for all.
    let second = Replica::spawn(&["breaker", url, &p, "a2", "2", "fail", "2500"]);
    let opened = stamp(
        &second
            .wait_for("opened", READY)
            .expect("the second failing replica's breaker opens"),
    );
    for r in &healthy {
        let rejected = r
            .wait_for("rejected", Duration::from_secs(5))
            .expect("with two failing replicas the breaker opens for all");
        assert!(stamp(&rejected).saturating_sub(opened) <= 1000);
    }
    drop(first);
}

fn duplicates_run_once(url: &str) {
    let p = prefix("once");
    let replicas: Vec<Replica> = [("r1", "34"), ("r2", "33"), ("r3", "33")]
        .iter()
        .map(|(r, n)| Replica::spawn(&["once", url, &p, r, n]))
        .collect();
    let mut results = Vec::new();
    for r in replicas {
        let out = r.finish(Duration::from_secs(60));
        results.extend(
            out.into_iter()
                .filter_map(|l| l.strip_prefix("result ").map(str::to_owned)),
        );
    }
    assert_eq!(results.len(), 100, "every duplicate gets an answer");
    assert!(
        results.iter().all(|r| r == &results[0]),
        "every duplicate gets the one result: {results:?}"
    );
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("redis reachable");
    let effects: u64 = redis::cmd("GET")
        .arg(format!("{p}:effects"))
        .query(&mut conn)
        .expect("effects counter");
    assert_eq!(effects, 1, "the side effect ran exactly once");
}
