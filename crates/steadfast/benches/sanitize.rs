//! Sanitizer throughput (MiB/s) on text of every script, side by side.
//!
//! Each group is a 256 KiB text built from error messages: clean ASCII (the common case), clean
//! accented Latin, CJK and emoji text, the ASCII text with one leading `é` (which once cost
//! 200×), and a match-dense mixed text (about half the messages carry a secret, an internal URL
//! or a stack trace). Baseline in the same run: the same rules applied one regex at a time (the
//! usual way). The `adversarial` group feeds near-misses at two sizes: equal MiB/s at both sizes
//! means linear time.
//!
//! Each text is also run through the sanitizer without the generic layer (`rules_only`: the
//! scan as it was before issue 24, plus its three new built-in rules), in the same run. The
//! `generic_dense` text is command lines and credential files that only the generic layer
//! redacts, and the adversarial text has the generic layer's near-misses too.
//!
//! Run: `cargo bench -p steadfast --bench sanitize`. With `SANITIZE_COST=<variant>:<text>` it
//! instead sanitizes that text 50 times (`SANITIZE_COST_ROUNDS`) and exits, for `valgrind --tool=cachegrind`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use steadfast::{BUILTIN_RULES, Rule, Sanitizer, sanitize, sanitize_json};

const MIXED: &[&str] = &[
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

/// Secrets that only the generic layer knows (values made up at run time would be better; these
/// are cycled fakes like the corpus's).
const GENERIC_DENSE: &[&str] = &[
    "command failed: mysql -h db.example.com -u app -pFake0Pass1Word2x -e 'select 1'",
    "sshpass -p 'Fake0Pass1Word2x' ssh ops@bastion.example.com uptime: Permission denied",
    "redis-cli -h cache.example.com -a FakeEXAMPLE0123456789testTEST PING: NOAUTH",
    "psql: could not parse ~/.pgpass line 3: db.example.com:5432:main:app:Fake0Pass1Word2x",
    "Datadog rejected the request: api key 0123456789abcdef0123456789abcdef is not valid",
    "okta: request with SSWS 00FakeEXAMPLE0123456789testTEST0123456789 failed",
    "render deploy failed: 401 using rnd_FakeEXAMPLE0123456789testTEST01",
    "the credentials FAKE0EXAMPLE1TEST2AB:FakeEXAMPLE0123456789testTEST0123456789 were rejected",
    "User alice is not a member of team platform",
    "Rate limit exceeded, retry in 30 seconds",
];

const ASCII: &[&str] = &[
    "File not found: /reports/2024/q3.pdf",
    "HTTP 404: resource not found",
    "Rate limit exceeded, retry in 30 seconds",
    "Invalid argument: 'limit' must be between 1 and 100",
    "The API gateway timed out after 30000ms",
    "Connection refused by api.example.com:443",
    "Failed to decode JSON at line 1 column 17: expected value",
    "Service temporarily unavailable (503)",
    "User alice is not a member of team platform",
    "Timeout waiting for lock on table orders after 5s",
];

const ACCENTED: &[&str] = &[
    "Fichier introuvable : /rapports/2024/été.pdf",
    "Délai dépassé : le serveur n'a pas répondu après 30 secondes",
    "Ungültiges Argument: „limit“ muss zwischen 1 und 100 liegen",
    "Die Verbindung zur Datenbank wurde unerwartet geschlossen",
    "Límite de solicitudes excedido; inténtelo de nuevo más tarde",
    "Não foi possível decodificar o JSON na linha 1, coluna 17",
    "Użytkownik Zażółć nie należy do zespołu platformy",
    "Sunucu geçici olarak kullanılamıyor (503)",
];

const CJK: &[&str] = &[
    "找不到文件：/报告/2024/第三季度.pdf",
    "请求超时：服务器在30秒后仍未响应",
    "参数无效：limit 必须介于 1 和 100 之间",
    "ファイルが見つかりません：レポート/2024/第3四半期.pdf",
    "レート制限を超えました。30秒後に再試行してください",
    "사용자 앨리스는 플랫폼 팀의 구성원이 아닙니다",
    "데이터베이스 연결이 예기치 않게 종료되었습니다",
];

const EMOJI: &[&str] = &[
    "🚫 File not found 📄 /reports/2024/q3.pdf 😢",
    "⏱️ Timeout after 30 s 🔁 retrying ⚠️",
    "🔥🔥 upstream returned 503 🔥🔥 — service unavailable 🛠️",
    "✅ 3 of 5 steps done ❌ step 4 failed: quota exceeded 📈",
    "👩‍💻 user alice is not in team 🧑‍🤝‍🧑 platform",
];

fn build(messages: &[&str], prefix: &str) -> String {
    let mut text = String::from(prefix);
    while text.len() < 256 * 1024 {
        for m in messages {
            text.push_str(m);
            text.push('\n');
        }
    }
    text
}

/// About 64 KiB of error data: nested objects, messages, a few secret-named members.
fn error_data() -> serde_json::Value {
    let items: Vec<serde_json::Value> = (0..400)
        .map(|i| {
            serde_json::json!({
                "id": i,
                "message": MIXED[i % MIXED.len()],
                "detail": {"status": 500 + i % 4, "max_tokens": 512, "retryable": i % 2 == 0},
                "request": {"url": "https://api.example.com/v1/items", "api_key": "k-0000", "user": "alice"},
            })
        })
        .collect();
    serde_json::json!({"errors": items})
}

/// Near-misses that make backtracking engines (and naive rescans) superlinear.
fn adversarial(size: usize) -> String {
    let mut text = String::with_capacity(size + 64);
    let units = [
        "password=",
        "sk-",
        "Bearer ",
        "-----BEGIN ",
        "    at ",
        "http://",
        "eyJ",
        "é",
        "a@",
        "\"token\":\"",
        "AKIA",
        "-p",
        "user:",
        "api key ",
        "SSWS ",
        "FakeEXAMPLE0123456789",
        "X=",
    ];
    let mut i = 0;
    while text.len() < size {
        text.push_str(units[i % units.len()]);
        i += 1;
    }
    text
}

/// The same rules, one regex per rule, applied in sequence (on bytes: the built-in patterns
/// are byte-level).
struct Sequential(Vec<(regex::bytes::Regex, Rule)>);

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
                    (regex::bytes::Regex::new(&pattern).unwrap(), r.clone())
                })
                .collect(),
        )
    }

    fn sanitize(&self, text: &str) -> usize {
        let mut out = text.as_bytes().to_vec();
        for (re, rule) in &self.0 {
            out = re
                .replace_all(&out, |c: &regex::bytes::Captures<'_>| {
                    let keep = c.name("keep").map_or(&b""[..], |m| m.as_bytes());
                    let tail = c.name("tail").map_or(&b""[..], |m| m.as_bytes());
                    [keep, rule.replacement.as_bytes(), tail].concat()
                })
                .into_owned();
        }
        out.len()
    }
}

fn variants() -> [(&'static str, Sanitizer); 2] {
    [
        ("steadfast", Sanitizer::builder().build().unwrap()),
        (
            "rules_only",
            Sanitizer::builder().generic_layer(false).build().unwrap(),
        ),
    ]
}

fn inputs() -> Vec<(&'static str, String)> {
    vec![
        ("ascii_clean", build(ASCII, "")),
        ("accented_latin", build(ACCENTED, "")),
        ("cjk", build(CJK, "")),
        ("emoji", build(EMOJI, "")),
        ("leading_e_acute", build(ASCII, "é")),
        ("match_dense", build(MIXED, "")),
        ("generic_dense", build(GENERIC_DENSE, "")),
    ]
}

/// `SANITIZE_COST=steadfast:ascii_clean`: one variant on one text, 50 times (for cachegrind).
fn cost(spec: &str) {
    let (variant, text) = spec.split_once(':').expect("variant:text");
    let (_, s) = variants()
        .into_iter()
        .find(|(n, _)| *n == variant)
        .expect("a variant");
    let (_, t) = inputs()
        .into_iter()
        .find(|(n, _)| *n == text)
        .expect("a text");
    let rounds: usize = std::env::var("SANITIZE_COST_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(50);
    let mut n = 0;
    for _ in 0..rounds {
        n += s.sanitize(black_box(&t)).len();
    }
    println!("{n}");
}

fn bench(c: &mut Criterion) {
    let variants = variants();
    let sequential = Sequential::new();

    let mut g = c.benchmark_group("sanitize");
    for (name, text) in &inputs() {
        g.throughput(Throughput::Bytes(text.len() as u64));
        for (variant, s) in &variants {
            g.bench_with_input(BenchmarkId::new(*variant, name), text, |b, t| {
                b.iter(|| s.sanitize(black_box(t)).len())
            });
        }
        if matches!(*name, "ascii_clean" | "match_dense") {
            g.bench_with_input(
                BenchmarkId::new("baseline_rule_by_rule", name),
                text,
                |b, t| b.iter(|| sequential.sanitize(black_box(t))),
            );
        }
    }
    g.finish();

    // A relayed JSON-RPC error's `data`: walked as JSON, against the old way (serialize, scan
    // the text, parse back).
    let _ = sanitize("warm up"); // compile outside the measurement
    let data = error_data();
    let bytes = serde_json::to_string(&data).unwrap().len();
    let mut g = c.benchmark_group("sanitize_json");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("steadfast/walk", |b| {
        b.iter(|| sanitize_json(black_box(&data)))
    });
    g.bench_function("baseline/as_text", |b| {
        b.iter(|| {
            let text = serde_json::to_string(black_box(&data)).unwrap();
            serde_json::from_str::<serde_json::Value>(&sanitize(&text)).ok()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("sanitize_adversarial");
    for size in [64 * 1024, 1024 * 1024] {
        let text = adversarial(size);
        g.throughput(Throughput::Bytes(text.len() as u64));
        for (variant, s) in &variants {
            g.bench_with_input(BenchmarkId::new(*variant, size), &text, |b, t| {
                b.iter(|| s.sanitize(black_box(t)).len())
            });
        }
    }
    g.finish();
}

fn main() {
    if let Ok(spec) = std::env::var("SANITIZE_COST") {
        cost(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2)).sample_size(10);
    targets = bench
}
