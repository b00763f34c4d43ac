//! The sanitizer against a corpus of error messages: every secret redacted with the surrounding
//! text kept readable, and every ordinary message — many of them look-alikes of secrets — left
//! exactly as it was.
//!
//! Credentials are made up and built at test time (`support/sanitize_fakes.rs`): `{ghp}` in a
//! message stands for a fake GitHub token, and so on.

#[path = "support/sanitize_fakes.rs"]
mod fakes;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use steadfast::sanitize;

/// (input, expected output), hand-written: every context a secret turns up in.
const SECRETS: &[(&str, &str)] = &[
    (
        "bad config:\n[database]\npassword = correct horse battery staple\nhost = db.example.com",
        "bad config:\n[database]\npassword = [redacted]\nhost = db.example.com",
    ),
    (
        "  client_secret = two words  \r\nnext = 1",
        "  client_secret = [redacted]  \r\nnext = 1",
    ),
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
    ("Cookie: session=abc123; theme=dark", "Cookie: [redacted]"),
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
    // Env dumps, shell and process arguments.
    (
        "DATABASE_PASSWORD=hunter2-Fake9",
        "DATABASE_PASSWORD=[redacted]",
    ),
    ("OPENAI_API_KEY={openai}", "OPENAI_API_KEY=[redacted]"),
    (
        "HOME=/home/app\nPATH=/usr/local/bin:/usr/bin\nPWD=/srv/app\nDB_PASSWORD=Sup3rS3cret!\nSTRIPE_SECRET_KEY={sk_live}\nLOG_LEVEL=info\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
        "HOME=/home/app\nPATH=/usr/local/bin:/usr/bin\nPWD=/srv/app\nDB_PASSWORD=[redacted]\nSTRIPE_SECRET_KEY=[redacted]\nLOG_LEVEL=info\nAWS_SECRET_ACCESS_KEY=[redacted]\n",
    ),
    (
        "export GITHUB_TOKEN=Fake0Token1Value",
        "export GITHUB_TOKEN=[redacted]",
    ),
    (
        "docker run -e POSTGRES_PASSWORD=Fake-pw-1 -e POSTGRES_USER=app postgres:16",
        "docker run -e POSTGRES_PASSWORD=[redacted] -e POSTGRES_USER=app postgres:16",
    ),
    (
        "spawn failed: mcp-server --api-key Fake0Key1Value2 --port 8080",
        "spawn failed: mcp-server --api-key [redacted] --port 8080",
    ),
    (
        "command: psql --host db.example.com --password Fake-Pw-9 app",
        "command: psql --host db.example.com --password [redacted] app",
    ),
    (
        r#"$env:API_KEY = "Fake0Key1Value2""#,
        r#"$env:API_KEY = "[redacted]""#,
    ),
    ("TWILIO_AUTH_TOKEN={hex32}", "TWILIO_AUTH_TOKEN=[redacted]"),
    (
        "SENTRY_DSN=https://{sentry_key}@o123456.ingest.sentry.io/4504",
        "SENTRY_DSN=[redacted]",
    ),
    (
        "NEXT_PUBLIC_SUPABASE_ANON_KEY={jwt} loaded",
        "NEXT_PUBLIC_SUPABASE_ANON_KEY=[redacted] loaded",
    ),
    (
        "//registry.npmjs.org/:_authToken=Fake0Npm1Token2Value",
        "//registry.npmjs.org/:_authToken=[redacted]",
    ),
    // Config files: YAML, INI, TOML, XML, Ruby, Python.
    (
        "database:\n  host: db.example.com\n  username: app\n  password: s3cr3t-Fake-pw\nredis:\n  url: redis://:Fake-pass-123@cache.example.com:6379/0\n",
        "database:\n  host: db.example.com\n  username: app\n  password: [redacted]\nredis:\n  url: redis://[redacted]@cache.example.com:6379/0\n",
    ),
    (
        "[client]\nuser = app\npassword = Fake-Passw0rd\nhost = db.example.com",
        "[client]\nuser = app\npassword = [redacted]\nhost = db.example.com",
    ),
    (
        "[auth]\nclient_id = \"app\"\nclient_secret = \"Fake-Secret-123\"\n",
        "[auth]\nclient_id = \"app\"\nclient_secret = \"[redacted]\"\n",
    ),
    (
        "data:\n  password: RmFrZVBhc3N3b3JkMQ==\n  username: YWRtaW4=\n",
        "data:\n  password: [redacted]\n  username: YWRtaW4=\n",
    ),
    (
        "users:\n- name: ci\n  user:\n    token: {jwt}\n",
        "users:\n- name: ci\n  user:\n    token: [redacted]\n",
    ),
    (
        "SOAP fault: <auth><username>app</username><password>Fake-pw-1</password></auth>",
        "SOAP fault: <auth><username>app</username><password>[redacted]</password></auth>",
    ),
    (
        r#"params: {:user=>"bob", :password=>"Fake-pw"}"#,
        r#"params: {:user=>"bob", :password=>"[redacted]"}"#,
    ),
    (
        "kwargs={'api_key': 'Fake0Key1', 'timeout': 30}",
        "kwargs={'api_key': '[redacted]', 'timeout': 30}",
    ),
    (
        "[pypi]\nusername = __token__\npassword = {pypi}\n",
        "[pypi]\nusername = __token__\npassword = [redacted]\n",
    ),
    // Connection strings.
    (
        "Server=tcp:db.example.com,1433;Database=app;User ID=sa;Password=Fake!Pass1;Encrypt=True;",
        "Server=tcp:db.example.com,1433;Database=app;User ID=sa;Password=[redacted];Encrypt=True;",
    ),
    (
        "DefaultEndpointsProtocol=https;AccountName=fakeacct;AccountKey={azure_key};EndpointSuffix=core.windows.net",
        "DefaultEndpointsProtocol=https;AccountName=fakeacct;AccountKey=[redacted];EndpointSuffix=core.windows.net",
    ),
    (
        "Endpoint=sb://fake-ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=Fake0Key1Base64Value2=",
        "Endpoint=sb://fake-ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=[redacted]",
    ),
    (
        "GET https://fakeacct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&sig=Fak3%2BSig%3D returned 403",
        "GET https://fakeacct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&sig=[redacted] returned 403",
    ),
    (
        "MongoServerError: bad auth for mongodb+srv://app:Fake-Pass-9@cluster0.fake.mongodb.net/db?retryWrites=true",
        "MongoServerError: bad auth for mongodb+srv://[redacted]@cluster0.fake.mongodb.net/db?retryWrites=true",
    ),
    (
        "mysql://root:Fake-Root-1@db.example.com:3306/app: access denied",
        "mysql://[redacted]@db.example.com:3306/app: access denied",
    ),
    (
        "postgresql://db.example.com/app?user=app&password=Fake-pw-1&sslmode=require",
        "postgresql://db.example.com/app?user=app&password=[redacted]&sslmode=require",
    ),
    (
        "jdbc:postgresql://db.example.com:5432/app?user=app&password=Fake-pw-1",
        "jdbc:postgresql://db.example.com:5432/app?user=app&password=[redacted]",
    ),
    (
        "amqp://guest:Fake-guest-1@rabbit.example.com:5672/ refused",
        "amqp://[redacted]@rabbit.example.com:5672/ refused",
    ),
    // URLs.
    (
        "Sentry init failed: https://{sentry_key}@o123456.ingest.sentry.io/4504",
        "Sentry init failed: https://[redacted]@o123456.ingest.sentry.io/4504",
    ),
    (
        "Twilio: https://{twilio_sid}:{hex32}@api.twilio.com/2010-04-01/Accounts.json returned 401",
        "Twilio: https://[redacted]@api.twilio.com/2010-04-01/Accounts.json returned 401",
    ),
    (
        "fatal: unable to access 'https://x-access-token:{ghs}@github.com/org/repo.git/': The requested URL returned error: 403",
        "fatal: unable to access 'https://[redacted]@github.com/org/repo.git/': The requested URL returned error: 403",
    ),
    (
        "GET https://api.example.com/v1/data?access_token=Fake0Access1Token&page=2 returned 401",
        "GET https://api.example.com/v1/data?access_token=[redacted]&page=2 returned 401",
    ),
    (
        "https://maps.example.com/api/geocode?address=Paris&key={gcp_key}",
        "https://maps.example.com/api/geocode?address=Paris&key=[redacted]",
    ),
    (
        "https://s3.example.com/b/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={aws_id}%2F20240101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=0123abcd4567ef890123abcd4567ef89 expired",
        "https://s3.example.com/b/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted] expired",
    ),
    (
        "POST /oauth/token body: grant_type=client_credentials&client_id=app&client_secret=Fake-Secret-1",
        "POST /oauth/token body: grant_type=client_credentials&client_id=app&client_secret=[redacted]",
    ),
    (
        "redirect to https://app.example.com/cb#access_token=Fake0Access1&token_type=bearer",
        "redirect to https://app.example.com/cb#access_token=[redacted]&token_type=bearer",
    ),
    // Headers.
    ("X-Api-Key: Fake0Key1Value2", "X-Api-Key: [redacted]"),
    (
        "Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "Proxy-Authorization: [redacted]",
    ),
    (
        "Authorization: Token Fake0Token1Value",
        "Authorization: [redacted]",
    ),
    (
        "authorization: Bearer FakeOnlyLettersTokenValue",
        "authorization: [redacted]",
    ),
    (
        "Bearer FakeOnlyLettersTokenValue was rejected",
        "Bearer [redacted] was rejected",
    ),
    (
        "bearer abcdefghijklmnopqrstuvwxyz is not valid",
        "bearer [redacted] is not valid",
    ),
    (
        "Authorization: AWS4-HMAC-SHA256 Credential={aws_id}/20240101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024",
        "Authorization: [redacted], SignedHeaders=host;x-amz-date, Signature=[redacted]",
    ),
    (
        "Set-Cookie: __Host-session=Fake0Session1Value; Path=/; Secure; HttpOnly",
        "Set-Cookie: [redacted]; Path=/; Secure; HttpOnly",
    ),
    (
        "Cookie: theme=dark; sessionid=Fake0Sess1; csrftoken=Fake2Csrf3",
        "Cookie: [redacted]",
    ),
    (
        "request had JSESSIONID=Fake0Session1Id2Value attached",
        "request had JSESSIONID=[redacted] attached",
    ),
    (
        "express: connect.sid=s%3AFake0Sess.1Sig invalid",
        "express: connect.sid=[redacted] invalid",
    ),
    (
        "POST /v1/charges HTTP/1.1\r\nHost: api.stripe.com\r\nAuthorization: Bearer {sk_live}\r\nContent-Type: application/json\r\n",
        "POST /v1/charges HTTP/1.1\r\nHost: api.stripe.com\r\nAuthorization: [redacted]\r\nContent-Type: application/json\r\n",
    ),
    (
        "curl -H 'Authorization: Bearer {openai}' https://api.openai.com/v1/models",
        "curl -H 'Authorization: [redacted]' https://api.openai.com/v1/models",
    ),
    (
        "PRIVATE-TOKEN: {glpat} rejected",
        "PRIVATE-TOKEN: [redacted] rejected",
    ),
    // JSON as text, plain and escaped inside a string.
    (
        r#"{"client_id":"app","client_secret":"Fake-Secret-1"}"#,
        r#"{"client_id":"app","client_secret":"[redacted]"}"#,
    ),
    (
        r#"{"error":{"data":"{\"password\":\"hunter2-Fake\",\"user\":\"bob\"}"}}"#,
        r#"{"error":{"data":"{\"password\":\"[redacted]\",\"user\":\"bob\"}"}}"#,
    ),
    (
        r#"{"access_token":"Fake0Access1","token_type":"Bearer","expires_in":3600,"refresh_token":"Fake2Refresh3"}"#,
        r#"{"access_token":"[redacted]","token_type":"Bearer","expires_in":3600,"refresh_token":"[redacted]"}"#,
    ),
    (
        r#"{"type": "service_account", "project_id": "fake-project", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvFake0Key\n-----END PRIVATE KEY-----\n", "client_email": "svc@fake-project.iam.gserviceaccount.com"}"#,
        r#"{"type": "service_account", "project_id": "fake-project", "private_key": "[redacted]", "client_email": "svc@fake-project.iam.gserviceaccount.com"}"#,
    ),
    (
        r#"{"auths":{"https://index.docker.io/v1/":{"auth":"ZmFrZXVzZXI6ZmFrZXBhc3M9"}}}"#,
        r#"{"auths":{"https://index.docker.io/v1/":{"auth":"[redacted]"}}}"#,
    ),
    (
        r#"{"headers": {"apiKey": "Fake0Key1Value"}, "status": 401}"#,
        r#"{"headers": {"apiKey": "[redacted]"}, "status": 401}"#,
    ),
    (
        r#"{"sessionId": "Fake0Sess1Id2", "user": "bob"}"#,
        r#"{"sessionId": "[redacted]", "user": "bob"}"#,
    ),
    // Stack traces that carry secrets.
    (
        "Error: connect failed for postgres://app:Fake-pw@db.example.com:5432/app\n    at Client.connect (/app/node_modules/pg/lib/client.js:132:21)\n    at async main (/app/index.js:9:3)",
        "Error: connect failed for postgres://[redacted]@db.example.com:5432/app\n",
    ),
    (
        "Traceback (most recent call last):\n  File \"/srv/app/main.py\", line 7, in <module>\n    client = Client(api_key=\"Fake0Key1\")\nopenai.AuthenticationError: Incorrect API key provided: {openai}",
        "openai.AuthenticationError: Incorrect API key provided: [redacted]",
    ),
    (
        "org.postgresql.util.PSQLException: FATAL: password authentication failed\n\tat org.postgresql.core.v3.ConnectionFactoryImpl.doAuthentication(ConnectionFactoryImpl.java:693)\n",
        "org.postgresql.util.PSQLException: FATAL: password authentication failed\n",
    ),
    (
        "panicked at src/client.rs:40:9: token {ghp} rejected\nstack backtrace:\n   0: rust_begin_unwind\n   1: app::client::call\n",
        "panicked at src/client.rs:40:9: token [redacted] rejected\n",
    ),
];

/// Every fake format is also tried in each of these contexts; `{}` is the secret.
const CONTEXTS: &[(&str, &str)] = &[
    (
        "request failed: {} was rejected",
        "request failed: {} was rejected",
    ),
    (
        r#"{"error":"invalid credential","detail":"{}","status":401}"#,
        r#"{"error":"invalid credential","detail":"{}","status":401}"#,
    ),
    (
        "2024-05-01T10:00:00Z WARN upstream rejected credential {} (status 401)",
        "2024-05-01T10:00:00Z WARN upstream rejected credential {} (status 401)",
    ),
    (
        "Error: upstream said 401 for {}\n    at call (/app/src/client.js:12:7)\n    at async run (/app/src/main.js:3:1)\n",
        "Error: upstream said 401 for {}\n",
    ),
];

/// Ordinary messages: nothing to redact.
const ORDINARY: &[&str] = &[
    "Idempotency-Key: 3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c already used",
    "X-Idempotency-Key: 3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c",
    "driver version 10.2.1.7 is too old",
    "firmware: 10.14.2.0",
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
    // Look-alikes of keys and tokens.
    "pod api-7d9f8c-xk2lp is in CrashLoopBackOff",
    "deployment payments-api-5d8f7c9b6-x2x4q restarted 3 times",
    "pod api-7d9f8c6b5d-xk2lp evicted: node memory pressure",
    "secret-operator-6c4f9d8b7-qw2er is not ready",
    "token-refresher-7b9c5d4f6-zx8cv OOMKilled",
    "key-manager-55c8d9f7b4-abcde pending",
    "kube-apiserver-master-0 unreachable",
    "risk-free rate unavailable for 2024-06-30",
    "api-gateway returned 502 Bad Gateway",
    "token expired",
    "Bearer token required",
    "Bearer authentication failed",
    "Basic Authentication is disabled for this realm",
    "Token Authentication failed: signature mismatch",
    "Digest authentication not supported",
    "bearer token missing from request",
    "Authorization header missing",
    "authorization: required",
    "Authorization header must use the Bearer scheme",
    "WWW-Authenticate: Bearer realm=\"api\", error=\"invalid_token\"",
    "WWW-Authenticate: Basic realm=\"Restricted Area\"",
    "request id 123e4567-e89b-12d3-a456-426614174000 failed",
    "session 550e8400-e29b-41d4-a716-446655440000 not found",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 not found",
    "short sha 9fceb02 is ambiguous",
    "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824 digest mismatch",
    "pull ghcr.io/org/app@sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824 failed",
    "md5 d41d8cd98f00b204e9800998ecf8427e does not match",
    "checksum sha1=da39a3ee5e6b4b0d3255bfef95601890afd80709 rejected",
    "ETag: \"33a64df551425fcc55e4d42a148795d9f25f89d4\"",
    "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7",
    "X-Request-Id: 7f8e9d0c-1b2a-3948-5766-aabbccddeeff",
    "image data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg== is too large",
    "The avatar was sent as data:image/jpeg;base64,/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgH and rejected",
    "max_tokens=4096 exceeds the model limit of 2048",
    "tokens_used: 1532, token_count: 1532",
    "token_limit: 8192",
    "Author: Jane Doe",
    "authored by alice in PR #42",
    "session timeout after 30 minutes",
    "session: expired",
    "password_min_length: 12",
    "passwordless login is enabled",
    "bypass=true is not allowed here",
    "compass: north",
    "keyboard layout: de",
    "key: user_id",
    "sort_key=created_at",
    "primary_key: id",
    "api_version=2024-06-01",
    "Secrets Manager: ResourceNotFoundException for secret prod/db",
    "secret: not found",
    "token: null",
    "password: undefined",
    "api_key: missing",
    "credentials: invalid",
    "HTTP 401 Unauthorized: invalid credentials",
    "Signature: invalid",
    "sig: mismatch",
    "signature verification failed",
    "The API key must start with sk-",
    "task-1234567890 failed",
    "disk-1234567890ab is full",
    "ask-the-expert-2024 is closed",
    "key-value store unavailable",
    "key_123 not found",
    "token-bucket refill rate is 10/s",
    "pk_id = 42 violates a foreign key",
    "sk_live keys are not allowed in test mode",
    "Use a key like sk_test_... from the dashboard",
    "The AKIA prefix denotes a long-term key",
    "ghp_ tokens are classic personal access tokens",
    "eyJ is how a JWT starts",
    "AIza keys can be restricted by referrer",
    "customer cus_NffrFeUfNV2Hib not found",
    "Generated request id req_abc123def456ghi789",
    "Order ID: ord_9f8e7d6c5b4a",
    "internationalization failed for locale fr",
    "Password reset email sent to alice@example.com",
    "Your password must include a number",
    "The password field is required",
    "password=",
    r#"{"password": ""}"#,
    r#"{"api_key": null, "token": null}"#,
    r#"{"password": true, "secret": 42}"#,
    "password: ********",
    "pwd: /home/app",
    "PWD=/srv/app",
    "DB_PASSWORD_FILE=/run/secrets/db_password",
    "SECRET_NAME=prod/db/credentials",
    "token_type=Bearer",
    "grant_type=client_credentials",
    "response_type=code&scope=openid profile",
    "code_challenge_method=S256",
    "TOKENIZERS_PARALLELISM=false",
    "HF_HUB_DISABLE_TELEMETRY=1",
    "AWS_REGION=us-east-1",
    "SHELL=/bin/bash\nLANG=en_US.UTF-8\nTERM=xterm-256color\nHOSTNAME=api-7d9f8c-xk2lp\nNODE_ENV=production\nGOMAXPROCS=2",
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin",
    // JSON that holds no secret.
    r#"{"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}}"#,
    r#"{"error":{"type":"invalid_request_error","message":"max_tokens is too large"}}"#,
    r#"{"key":"Content-Type","value":"application/json"}"#,
    r#"{"token_count": 5, "tokens_used": 17, "max_tokens": 100, "author": "alice"}"#,
    r#"{"auth_required": true, "password_policy": "min 12 chars"}"#,
    r#"{"session_id": null}"#,
    r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Invalid params: 'query' is required"}}"#,
    // URLs and addresses that are public and carry no credential.
    "https://api.example.com/users/12345 returned 404",
    "https://user@example.com/profile is not a valid profile URL",
    "git@github.com:org/repo.git: Permission denied (publickey)",
    "ssh://git@gitlab.example.com:2222/group/repo.git unreachable",
    "mailto:alice@example.com bounced",
    "http://example.com:8080/path timed out",
    "postgres://db.example.com:5432/app refused the connection",
    "redis://cache.example.com:6379/0 timeout",
    "Listening on 0.0.0.0:8080",
    "node ip-10-0-1-23.ec2.compute.amazonaws.com is NotReady",
    // Prose, in several scripts.
    "Meet at 10:30 (room 4)",
    "Exception in thread \"main\" java.lang.NullPointerException",
    "Rate limit: 100 requests per 60s, retry after 12s",
    "X-RateLimit-Remaining: 0",
    "Content-Security-Policy: default-src 'self'",
    "Cookie policy updated; please accept again",
    "cookie banner consent required",
    "Set-Cookie header too large",
    "Fichier introuvable : /rapports/été.pdf",
    "Mot de passe incorrect pour l'utilisateur « alice »",
    "Passwort zu kurz: mindestens 12 Zeichen",
    "contraseña demasiado corta",
    "パスワードが違います",
    "令牌已过期 (token expired)",
    "🔑 key rotated successfully ✅",
    "Сессия истекла, войдите снова",
    "The token bucket for tenant acme is empty",
    "Session expired; the refresh token was revoked",
    "OAuth consent screen is not configured",
    "JWT must have three parts separated by dots",
    "PEM file is missing the BEGIN line",
    "Invalid key id 'k-2024-01'",
    "tool 'search_docs' timed out after 30s",
    "model gpt-4o-mini returned finish_reason=length",
];

/// Every (input, expected) pair: the hand-written ones and each fake format in each context.
fn secret_cases() -> Vec<(String, String)> {
    let mut cases: Vec<(String, String)> = SECRETS
        .iter()
        .map(|(i, o)| (fakes::fill(i), (*o).to_owned()))
        .collect();
    for (_, _, secret) in fakes::fakes() {
        let replacement = if secret.starts_with("-----BEGIN") {
            "[redacted private key]"
        } else {
            "[redacted]"
        };
        for (input, output) in CONTEXTS {
            cases.push((
                input.replace("{}", &secret),
                output.replace("{}", replacement),
            ));
        }
    }
    cases
}

#[test]
fn every_secret_is_redacted_and_the_rest_stays_readable() {
    let cases = secret_cases();
    assert!(cases.len() >= 150, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (input, want) in &cases {
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
        cases.len(),
        failures.join("\n\n")
    );
}

#[test]
fn ordinary_messages_are_unchanged() {
    assert!(ORDINARY.len() >= 150, "{} cases", ORDINARY.len());
    let changed: Vec<_> = ORDINARY
        .iter()
        .filter_map(|m| {
            let out = sanitize(m);
            (out != *m).then(|| format!("{m:?} -> {out:?}"))
        })
        .collect();
    assert!(
        changed.is_empty(),
        "{} of {} changed:\n{}",
        changed.len(),
        ORDINARY.len(),
        changed.join("\n")
    );
}

#[test]
fn at_least_forty_formats_are_covered() {
    let formats = fakes::fakes();
    assert!(formats.len() >= 40, "{} formats", formats.len());
}

/// The formats table of `docs/sanitizer.md`: every made-up example is redacted.
#[test]
fn documented_examples_are_redacted() {
    let doc = include_str!("../../../docs/sanitizer.md");
    let examples: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| #"))
        .filter_map(|l| l.split(" | ").nth(3))
        .map(|cell| cell.trim_matches('`'))
        .collect();
    assert!(
        examples.len() >= 40,
        "{} formats documented",
        examples.len()
    );
    let kept: Vec<_> = examples
        .iter()
        .filter(|e| {
            let out = sanitize(e);
            out == **e || !out.contains("[redacted")
        })
        .collect();
    assert!(kept.is_empty(), "not redacted: {kept:#?}");
}

#[test]
fn sanitizing_twice_changes_nothing_more() {
    for (input, _) in secret_cases() {
        let once = sanitize(&input).into_owned();
        assert_eq!(sanitize(&once), once, "{input:?}");
    }
}

#[test]
fn reference_behaviours_are_kept() {
    // tool-call-retry: stack traces removed, internal URLs replaced, `bearer [redacted]`.
    assert_eq!(
        sanitize(
            "boom\n    at f (/app/a.js:1:2)\nGET http://localhost:3000/x failed; bearer abc123def456ghi"
        ),
        "boom\nGET [internal-url] failed; bearer [redacted]"
    );
}

/// Separators a secret may sit between without becoming part of a longer word.
const SEPARATORS: &[&str] = &[
    " ", "\n", "\"", "'", "(", ")", "=", ": ", ", ", "<", ">", "/", "\t", "é ", " 中",
];

fn any_fake() -> impl Strategy<Value = String> {
    let all: Vec<String> = fakes::fakes().into_iter().map(|(_, _, v)| v).collect();
    proptest::sample::select(all)
}

proptest! {
    // Found cases are kept in `proptest-regressions/sanitize_corpus.txt` (checked in) and run
    // first on every run, so a leak found once stays found.
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/sanitize_corpus.txt"
        ))),
        ..ProptestConfig::default()
    })]

    /// Arbitrary text never panics, and sanitizing is idempotent.
    #[test]
    fn never_panics_on_any_text(text in any::<String>()) {
        let once = sanitize(&text).into_owned();
        prop_assert_eq!(sanitize(&once).into_owned(), once);
    }

    /// Text made of rule fragments (keys, schemes, prefixes, quotes, non-ASCII) never panics,
    /// and sanitizing it is idempotent.
    #[test]
    fn fragments_never_panic_and_are_idempotent(parts in proptest::collection::vec(
        proptest::sample::select(vec![
            "password", "=", ": ", "\"", "'", "Bearer ", "token ", "sk-", "api-", "http://",
            "https://", "@", "user:", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----",
            "\n", "    at ", "f (/a.js:1:2)", "é", "中", "🔑", "abc123DEF456ghi789", "&", "?",
            "key", "session", "Authorization: ", "Cookie: ", "\\\"", "{", "}", "10.0.0.1",
        ]),
        0..40,
    )) {
        let text = parts.concat();
        let once = sanitize(&text).into_owned();
        prop_assert_eq!(sanitize(&once).into_owned(), once);
    }

    /// A generated secret of any format, embedded in any text (between separators), never
    /// survives, neither whole nor its last 10 characters.
    #[test]
    fn embedded_secrets_are_redacted(
        prefix in "\\PC{0,40}",
        suffix in "\\PC{0,40}",
        before in proptest::sample::select(SEPARATORS),
        after in proptest::sample::select(SEPARATORS),
        secret in any_fake(),
    ) {
        let text = format!("{prefix}{before}{secret}{after}{suffix}");
        let out = sanitize(&text);
        let tail = &secret[secret.len() - 10..];
        prop_assert!(!out.contains(secret.as_str()), "{:?}", out);
        prop_assert!(!out.contains(tail), "{:?}", out);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/sanitize_corpus.txt"
        ))),
        ..ProptestConfig::default()
    })]

    /// A secret glued to ASCII that other rules read as a key, a user or a scheme
    /// (`A:😀😀=-----BEGIN PRIVATE KEY-----…`: the `user:password` pattern once took the PEM
    /// header as a password and the key body survived) never survives.
    #[test]
    fn secrets_glued_to_ascii_are_redacted(
        head in "\\PC{0,6}",
        glue in "[A-Za-z0-9]{1,4}[:=@/-][=:-]{0,2}",
        wide in "[\\u{10000}-\\u{10FFFF}\\u{80}-\\u{FFFF}]{0,3}",
        // Never a word character: glued to a word, a token is another token.
        before in proptest::sample::select(&["", "=", ":", " ", "-"][..]),
        secret in any_fake(),
        after in proptest::sample::select(SEPARATORS),
        suffix in "\\PC{0,10}",
    ) {
        let text = format!("{head}{glue}{wide}{before}{secret}{after}{suffix}");
        let out = sanitize(&text);
        let tail = &secret[secret.len() - 10..];
        prop_assert!(!out.contains(secret.as_str()), "{:?}", out);
        prop_assert!(!out.contains(tail), "{:?}", out);
    }
}
