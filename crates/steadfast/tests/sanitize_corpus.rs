//! The sanitizer against a corpus of realistic error messages: every secret redacted with the
//! surrounding text kept readable, and every ordinary message left exactly as it was.

use proptest::prelude::*;
use steadfast::sanitize;

/// (input, expected output).
const SECRETS: &[(&str, &str)] = &[
    (
        "POST https://api.openai.com/v1/chat/completions failed: 401 Incorrect API key provided: sk-proj-abc123DEF456ghi789JKL012mno345",
        "POST https://api.openai.com/v1/chat/completions failed: 401 Incorrect API key provided: [redacted]",
    ),
    (
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U rejected",
        "Authorization: [redacted] rejected",
    ),
    (
        "upstream refused the call (Authorization: Bearer sk-live-abcdefghijklmnopqrstuvwx)",
        "upstream refused the call (Authorization: [redacted])",
    ),
    (
        "request failed with header Bearer abcdef1234567890XYZ",
        "request failed with header Bearer [redacted]",
    ),
    (
        "connect ECONNREFUSED http://localhost:5432/db",
        "connect ECONNREFUSED [internal-url]",
    ),
    (
        "upstream http://127.0.0.1:8080/v1/tools returned 502",
        "upstream [internal-url] returned 502",
    ),
    (
        "fetch https://admin:s3cretP4ss@api.example.com/v2/items failed",
        "fetch https://[redacted]@api.example.com/v2/items failed",
    ),
    (
        "postgres://app:hunter2@db.prod.example.com:5432/main: connection refused",
        "postgres://[redacted]@db.prod.example.com:5432/main: connection refused",
    ),
    (
        "The security token included in the request is invalid (AccessKeyId: AKIAIOSFODNN7EXAMPLE)",
        "The security token included in the request is invalid (AccessKeyId: [redacted])",
    ),
    (
        "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY in env",
        "aws_secret_access_key=[redacted] in env",
    ),
    (
        "GitHub API 401 using token ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "GitHub API 401 using token [redacted]",
    ),
    (
        "git clone https://oauth2:glpat-xxxxxxxxxxxxxxxxxxxx@gitlab.com/group/repo.git failed",
        "git clone https://[redacted]@gitlab.com/group/repo.git failed",
    ),
    (
        "GitLab rejected glpat-Abc123Def456Ghi789Jkl0 (expired)",
        "GitLab rejected [redacted] (expired)",
    ),
    (
        "Slack API error invalid_auth for xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "Slack API error invalid_auth for [redacted]",
    ),
    (
        "webhook https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX returned 404",
        "webhook [redacted] returned 404",
    ),
    (
        "jwt verification failed for eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyMSJ9.c2lnbmF0dXJlLXZhbHVl",
        "jwt verification failed for [redacted]",
    ),
    (
        "failed to load key: -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc+/def==\n-----END RSA PRIVATE KEY----- (invalid padding)",
        "failed to load key: [redacted private key] (invalid padding)",
    ),
    (
        "truncated: -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA",
        "truncated: [redacted private key]",
    ),
    (
        "Google Maps error: AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWYx is not authorized",
        "Google Maps error: [redacted] is not authorized",
    ),
    (
        r#"{"error":"unauthorized","api_key":"abcd1234efgh5678"}"#,
        r#"{"error":"unauthorized","api_key":"[redacted]"}"#,
    ),
    (
        r#"config {"password": "correct horse battery"} rejected"#,
        r#"config {"password": "[redacted]"} rejected"#,
    ),
    (
        "settings {'client_secret': 'abc def 123'}",
        "settings {'client_secret': '[redacted]'}",
    ),
    (
        "DATABASE_URL=postgres://svc:Pa55w0rd!@10.1.2.3:5432/app",
        "DATABASE_URL=[internal-url]",
    ),
    (
        "redis://:s3cr3tpass@cache.example.com:6379 refused",
        "redis://[redacted]@cache.example.com:6379 refused",
    ),
    (
        "Stripe: No such customer; request used sk_live_51H8x9ZK2eZvKYlo2C0abcdEFGH",
        "Stripe: No such customer; request used [redacted]",
    ),
    (
        "publishable key pk_test_TYooMQauvdEDq54NiTphI7jx is invalid",
        "publishable key [redacted] is invalid",
    ),
    (
        "Anthropic 401: invalid x-api-key sk-ant-api03-AbCdEf123456-GhIjKl789",
        "Anthropic 401: invalid x-api-key [redacted]",
    ),
    (
        "Cookie: session=abc123; theme=dark",
        "Cookie: [redacted]; theme=dark",
    ),
    (
        "set-cookie: sid=s%3A8f9a0b; Path=/; HttpOnly",
        "set-cookie: [redacted]; Path=/; HttpOnly",
    ),
    (
        "callback https://example.com/cb?code=xyz&access_token=ya29.a0AfH6SMBx3 failed",
        "callback https://example.com/cb?code=xyz&access_token=[redacted] failed",
    ),
    (
        "https://api.example.com/search?q=cats&api_key=0123456789abcdef returned 403",
        "https://api.example.com/search?q=cats&api_key=[redacted] returned 403",
    ),
    (
        "signature=3f2a9c0d1e mismatch",
        "signature=[redacted] mismatch",
    ),
    (
        "client_secret: 7f8e9d0c1b2a3948 was rejected",
        "client_secret: [redacted] was rejected",
    ),
    (
        "export OPENAI_API_KEY=sk-abcdefghijklmnop1234",
        "export OPENAI_API_KEY=[redacted]",
    ),
    (
        "env SECRET_KEY=django-insecure-8x!k2 in settings",
        "env SECRET_KEY=[redacted] in settings",
    ),
    (
        "Traceback (most recent call last):\n  File \"/srv/app/tools.py\", line 42, in search\n    resp = client.get(url)\n  File \"/usr/lib/python3/requests/api.py\", line 73, in get\n    return request(\"get\", url)\nrequests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded",
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded",
    ),
    (
        "TypeError: Cannot read properties of undefined (reading 'id')\n    at getUser (/app/src/users.js:42:17)\n    at async Promise.all (index 0)\n    at /app/node_modules/express/lib/router/layer.js:95:5",
        "TypeError: Cannot read properties of undefined (reading 'id')\n",
    ),
    (
        "java.net.SocketTimeoutException: Read timed out\n\tat java.base/java.net.SocketInputStream.socketRead0(Native Method)\n\tat com.example.Client.fetch(Client.java:88)\n",
        "java.net.SocketTimeoutException: Read timed out\n",
    ),
    (
        "thread 'main' panicked at src/main.rs:10:5:\ncalled `Result::unwrap()` on an `Err` value\nstack backtrace:\n   0: rust_begin_unwind\n   1: core::panicking::panic_fmt\n   2: app::main\n             at ./src/main.rs:10:5\n",
        "thread 'main' panicked at src/main.rs:10:5:\ncalled `Result::unwrap()` on an `Err` value\n",
    ),
    (
        "Error: connect ETIMEDOUT 192.168.1.20:443",
        "Error: connect ETIMEDOUT [internal-host]",
    ),
    (
        "mongodb+srv://user:pa%40ss@cluster0.abcde.mongodb.net/test unreachable",
        "mongodb+srv://[redacted]@cluster0.abcde.mongodb.net/test unreachable",
    ),
    (
        "Basic dXNlcjpwYXNzd29yZDEyMw== was rejected by proxy",
        "Basic [redacted] was rejected by proxy",
    ),
    (
        "grpc://payments.internal:50051 unavailable",
        "[internal-url] unavailable",
    ),
    (
        "http://metadata.google.internal/computeMetadata/v1/ timed out",
        "[internal-url] timed out",
    ),
    (
        "GET http://169.254.169.254/latest/meta-data/iam/security-credentials/ returned 200",
        "GET [internal-url] returned 200",
    ),
    (
        r#"{"token": "tok_1a2b3c4d5e"}"#,
        r#"{"token": "[redacted]"}"#,
    ),
    (
        "password=hunter2&user=alice",
        "password=[redacted]&user=alice",
    ),
    ("login?user=bob&pass=abc", "login?user=bob&pass=[redacted]"),
    (
        "X-Auth-Token: 9f8e7d6c5b4a39281706",
        "X-Auth-Token: [redacted]",
    ),
    ("http://[::1]:3000/health failed", "[internal-url] failed"),
    (
        "upstream said: password: Tr0ub4dor&3 is wrong",
        "upstream said: password: [redacted] is wrong",
    ),
];

const ORDINARY: &[&str] = &[
    "File not found: /reports/2024/q3.pdf",
    "HTTP 404: resource not found",
    "Rate limit exceeded, retry in 30 seconds",
    "Invalid argument: 'limit' must be between 1 and 100",
    "The API gateway timed out after 30000ms",
    "api-gateway-timeout: upstream did not respond",
    "Password must be at least 12 characters",
    "password: must contain a digit",
    "Invalid token: expired",
    "token expired, please re-authenticate",
    "Connection refused by api.example.com:443",
    "DNS lookup failed for search.example.org",
    "Service temporarily unavailable (503)",
    "Request entity too large: 12 MB exceeds 10 MB limit",
    "User alice is not a member of team platform",
    "Cannot parse date '2024-13-45': month out of range",
    "Query returned 0 rows for customer_id=48213",
    "Timeout waiting for lock on table orders after 5s",
    "GET https://api.github.com/repos/rust-lang/rust returned 403: API rate limit exceeded",
    "Failed to decode JSON at line 1 column 17: expected value",
    "The secret sauce is love",
    "Missing required parameter: api_key",
    "Key 'user_id' not found in payload",
    "Disk quota exceeded on volume data-01",
    "Model context length exceeded: 131072 tokens",
    "Upstream returned malformed XML near <item id=\"7\">",
    "Order #A-1029 is already shipped",
    "Permission denied: cannot write to /var/log/app.log",
    "SSL certificate for www.example.com expired on 2024-01-01",
    "Too many open files (os error 24)",
    "Cannot divide by zero in expression 'x / 0'",
    "Page 7 of 3 requested; last page is 3",
    "Index out of range: 10 >= 5",
    "Branch 'feature/login-v2' not found in repository",
    "Email address bob@example.com is already registered",
    "The token bucket is empty; try again shortly",
    "Calendar event at 10:30 conflicts with existing booking",
    "at least one of 'name' or 'id' is required",
    "Weather API: city 'Springfield' is ambiguous (3 matches)",
    "Currency conversion from EUR to XYZ is not supported",
    "Version 10.2 of the schema is deprecated",
    "Session expired after 30 minutes of inactivity",
    "Invalid key format: expected 'region/name'",
    "Retry-After: 120",
    "Authorization required to view this document",
    "https://docs.example.com/errors#E1024 explains this error",
    "Basic plan does not include exports",
    "secret-santa list is locked until December",
    "Use the sk-learn compatible API instead",
];

#[test]
fn every_secret_is_redacted_and_the_rest_stays_readable() {
    assert!(SECRETS.len() >= 40, "{} cases", SECRETS.len());
    let mut failures = Vec::new();
    for (input, want) in SECRETS {
        let got = sanitize(input);
        if got != *want {
            failures.push(format!(
                "input:    {input:?}\nexpected: {want:?}\ngot:      {got:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n\n{}",
        failures.len(),
        SECRETS.len(),
        failures.join("\n\n")
    );
}

#[test]
fn ordinary_messages_are_unchanged() {
    assert!(ORDINARY.len() >= 40, "{} cases", ORDINARY.len());
    let changed: Vec<_> = ORDINARY
        .iter()
        .filter_map(|m| {
            let out = sanitize(m);
            (out != *m).then(|| format!("{m:?} -> {out:?}"))
        })
        .collect();
    assert!(changed.is_empty(), "changed:\n{}", changed.join("\n"));
}

#[test]
fn sanitizing_twice_changes_nothing_more() {
    for (input, _) in SECRETS {
        let once = sanitize(input).into_owned();
        assert_eq!(sanitize(&once), once, "{input:?}");
    }
}

#[test]
fn huge_inputs_take_linear_time_and_do_not_panic() {
    // Patterns that backtrack catastrophically in other engines: long runs that almost match.
    let nasty = [
        "a".repeat(200_000),
        format!("sk-{}", "a".repeat(200_000)),
        format!("password={}", "x".repeat(200_000)),
        format!("-----BEGIN RSA PRIVATE KEY-----{}", "A".repeat(200_000)),
        "    at ".repeat(50_000),
        "http://".repeat(50_000),
    ];
    for text in &nasty {
        let _ = sanitize(text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Arbitrary text never panics, and sanitizing is idempotent.
    #[test]
    fn never_panics_on_any_text(text in any::<String>()) {
        let once = sanitize(&text).into_owned();
        prop_assert_eq!(sanitize(&once).into_owned(), once);
    }

    /// Secrets embedded anywhere in ordinary text are still redacted.
    #[test]
    fn embedded_secrets_are_redacted(
        prefix in "[a-zA-Z ,.:]{0,40}",
        suffix in "[a-zA-Z ,.:]{0,40}",
        pick in 0usize..5,
    ) {
        let secret = ["ghp_16C7e42F292c6912E7710c838347Ae178B4a", "AKIAIOSFODNN7EXAMPLE",
            "xoxb-123456789012-abcdefABCDEF", "sk-proj-abc123DEF456ghi789", "glpat-Abc123Def456Ghi789Jkl0"][pick];
        let text = format!("{prefix} {secret} {suffix}");
        let out = sanitize(&text);
        prop_assert!(!out.contains(secret), "{out:?}");
    }
}
