//! Sanitizer throughput (MB/s) on a mixed corpus: mostly ordinary error messages, some with
//! secrets, a few stack traces. Baseline in the same run: the same rules applied one regex at a
//! time (the usual way), to show what the single combined pass buys.
//!
//! Run: `cargo bench -p steadfast --bench sanitize`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use steadfast::{BUILTIN_RULES, Rule, Sanitizer, sanitize};

const MESSAGES: &[&str] = &[
    "File not found: /reports/2024/q3.pdf",
    "HTTP 404: resource not found",
    "Rate limit exceeded, retry in 30 seconds",
    "Invalid argument: 'limit' must be between 1 and 100",
    "The API gateway timed out after 30000ms",
    "Connection refused by api.example.com:443",
    "GET https://api.github.com/repos/rust-lang/rust returned 403: API rate limit exceeded",
    "Failed to decode JSON at line 1 column 17: expected value",
    "POST https://api.openai.com/v1/chat failed: 401 Incorrect API key provided: sk-proj-abc123DEF456ghi789JKL012",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N rejected",
    "upstream http://127.0.0.1:8080/v1/tools returned 502",
    "fetch https://admin:s3cretP4ss@api.example.com/v2/items failed",
    "TypeError: Cannot read properties of undefined (reading 'id')\n    at getUser (/app/src/users.js:42:17)\n    at /app/node_modules/express/lib/router/layer.js:95:5",
    "https://api.example.com/search?q=cats&api_key=0123456789abcdef returned 403",
    "Service temporarily unavailable (503)",
    "User alice is not a member of team platform",
];

fn corpus() -> String {
    build(MESSAGES)
}

/// Only the messages with nothing to redact: the common case.
fn clean_corpus() -> String {
    let clean: Vec<&str> = MESSAGES
        .iter()
        .copied()
        .filter(|m| sanitize(m) == *m)
        .collect();
    build(&clean)
}

fn build(messages: &[&str]) -> String {
    let mut text = String::new();
    while text.len() < 256 * 1024 {
        for m in messages {
            text.push_str(m);
            text.push('\n');
        }
    }
    text
}

/// The same rules, one regex per rule, applied in sequence.
struct Sequential(Vec<(regex::Regex, Rule)>);

impl Sequential {
    fn new() -> Self {
        Sequential(
            BUILTIN_RULES
                .iter()
                .map(|r| {
                    let pattern = r
                        .pattern
                        .replace("(?P<KEEP>", "(?P<keep>")
                        .replace("(?P<TAIL>", "(?P<tail>");
                    (regex::Regex::new(&pattern).unwrap(), r.clone())
                })
                .collect(),
        )
    }

    fn sanitize(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (re, rule) in &self.0 {
            out = re
                .replace_all(&out, |c: &regex::Captures<'_>| {
                    let keep = c.name("keep").map_or("", |m| m.as_str());
                    let tail = c.name("tail").map_or("", |m| m.as_str());
                    format!("{keep}{}{tail}", rule.replacement)
                })
                .into_owned();
        }
        out
    }
}

fn bench(c: &mut Criterion) {
    let text = corpus();
    let lines: Vec<&str> = text.lines().collect();
    let _ = Sanitizer::default_rules(); // compile outside the measurement
    let sequential = Sequential::new();

    let mut g = c.benchmark_group("sanitize");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("steadfast/one_pass_whole_text", |b| {
        b.iter(|| sanitize(black_box(&text)).len())
    });
    g.bench_function("steadfast/per_message", |b| {
        b.iter(|| {
            lines
                .iter()
                .map(|l| sanitize(black_box(l)).len())
                .sum::<usize>()
        })
    });
    g.bench_function("baseline/rule_by_rule_whole_text", |b| {
        b.iter(|| sequential.sanitize(black_box(&text)).len())
    });
    g.finish();

    let clean = clean_corpus();
    let mut g = c.benchmark_group("sanitize_clean");
    g.throughput(Throughput::Bytes(clean.len() as u64));
    g.bench_function("steadfast/one_pass_whole_text", |b| {
        b.iter(|| sanitize(black_box(&clean)).len())
    });
    g.bench_function("baseline/rule_by_rule_whole_text", |b| {
        b.iter(|| sequential.sanitize(black_box(&clean)).len())
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3)).sample_size(20);
    targets = bench
}
criterion_main!(benches);
