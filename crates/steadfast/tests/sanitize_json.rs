//! JSON sanitized as JSON: strings through the rules, secret-named members redacted whole,
//! the shape kept — where scanning the serialized text let escaped secrets and stack traces
//! through.

#[path = "support/sanitize_fakes.rs"]
mod fakes;

use proptest::prelude::*;
use serde_json::{Value, json};
use steadfast::{sanitize, sanitize_json};

/// Keys whose whole value is redacted, in the spellings real payloads use.
const SECRET_KEYS: &[&str] = &[
    "password",
    "Password",
    "PASSWORD",
    "passwd",
    "pwd",
    "db_password",
    "dbPassword",
    "new-password",
    "password_confirmation",
    "passphrase",
    "secret",
    "client_secret",
    "clientSecret",
    "CLIENT_SECRET",
    "token",
    "access_token",
    "accessToken",
    "refresh-token",
    "id_token",
    "X-Auth-Token",
    "api_key",
    "apiKey",
    "APIKey",
    "api-key",
    "x-api-key",
    "APIKEY",
    "apikey",
    "access_key",
    "AccessKey",
    "secret_access_key",
    "aws_secret_access_key",
    "private_key",
    "privateKey",
    "authorization",
    "Authorization",
    "proxy-authorization",
    "auth",
    "basic_auth",
    "cookie",
    "Set-Cookie",
    "cookies",
    "session",
    "session_id",
    "sessionId",
    "JSESSIONID",
    "credential",
    "credentials",
    "signature",
    "dsn",
    "connection_string",
    "ConnectionString",
    "otp",
];

/// Keys that look close but hold no secret: their values are sanitized as usual, not redacted.
const ORDINARY_KEYS: &[&str] = &[
    "tokens_used",
    "token_count",
    "max_tokens",
    "maxTokens",
    "total_tokens",
    "prompt_tokens",
    "token_type",
    "tokenizer",
    "author",
    "authors",
    "authority",
    "authored_at",
    "oauth_provider",
    "key",
    "keys",
    "sort_key",
    "primary_key",
    "key_id",
    "keyboard",
    "monkey",
    "password_min_length",
    "password_policy",
    "secret_name",
    "secretary",
    "session_expired",
    "session_count",
    "passenger",
    "compass",
    "bypass",
    "signature_algorithm",
    "client_id",
    "user",
    "message",
];

#[test]
fn secret_named_members_are_redacted_whole() {
    for key in SECRET_KEYS {
        let data = json!({ *key: {"nested": "anything", "n": 1}, "other": "kept" });
        let out = sanitize_json(&data);
        assert_eq!(
            out,
            json!({ *key: "[redacted]", "other": "kept" }),
            "key {key:?}"
        );
    }
}

#[test]
fn look_alike_keys_are_kept() {
    for key in ORDINARY_KEYS {
        let data = json!({ *key: "plain words", "n": 5 });
        assert_eq!(sanitize_json(&data), data, "key {key:?}");
    }
}

#[test]
fn null_and_booleans_under_secret_keys_stay() {
    let data = json!({"password": null, "token": true, "api_key": false, "secret": 42});
    assert_eq!(
        sanitize_json(&data),
        json!({"password": null, "token": true, "api_key": false, "secret": "[redacted]"})
    );
}

/// The relayed JSON-RPC error of the issue: escaped quotes and escaped newlines defeated the
/// text scan; walking the value sees each string as it is.
#[test]
fn relayed_error_data_keeps_its_shape_and_loses_its_secrets() {
    let data = json!({
        "request": {
            "url": "https://api.example.com/v1/items?api_key=Fake0Key1Value2",
            "headers": {"Authorization": "Bearer Fake0Token1", "Accept": "application/json"},
            "body": "{\"password\":\"hunter2-Fake\",\"user\":\"bob\"}",
        },
        "error": "TypeError: x is undefined\n    at handler (/srv/app/src/index.js:10:3)\n    at process (node:internal/process:1:1)\n",
        "upstream": ["http://10.0.0.7:8080/health", "ok"],
        "retry": {"attempts": 3, "max_tokens": 512, "tokens_used": 77},
    });
    let out = sanitize_json(&data);
    assert_eq!(
        out,
        json!({
            "request": {
                "url": "https://api.example.com/v1/items?api_key=[redacted]",
                "headers": {"Authorization": "[redacted]", "Accept": "application/json"},
                "body": "{\"password\":\"[redacted]\",\"user\":\"bob\"}",
            },
            "error": "TypeError: x is undefined\n",
            "upstream": ["[internal-url]", "ok"],
            "retry": {"attempts": 3, "max_tokens": 512, "tokens_used": 77},
        })
    );
    // The same data scanned as serialized text leaks: the reason for walking it.
    let as_text = sanitize(&data.to_string()).into_owned();
    assert!(as_text.contains("/srv/app/src/index.js"), "{as_text}");
}

#[test]
fn secrets_in_keys_are_redacted_too() {
    let token = format!("ghp_{}", fakes::mixed(36));
    let data = json!({ token.clone(): 1 });
    let out = sanitize_json(&data);
    assert!(!out.to_string().contains(&token), "{out}");
    assert_eq!(out, json!({"[redacted]": 1}));
}

#[test]
fn every_fake_format_in_any_string_is_redacted() {
    for (name, _, secret) in fakes::fakes() {
        let data = json!({"detail": {"list": [format!("failed with {secret} here")]}});
        let out = sanitize_json(&data).to_string();
        assert!(!out.contains(&secret), "{name}: {out}");
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        proptest::sample::select(vec![
            "password",
            "token",
            "api_key",
            "max_tokens",
            "author",
            "message",
            "data",
            "error",
            "Authorization",
            "session_id",
            "user",
        ])
        .prop_map(str::to_owned),
        "\\PC{0,12}",
    ];
    let text = prop_oneof![
        "\\PC{0,60}",
        proptest::sample::select(vec![
            "password=hunter2-Fake",
            "Bearer Fake0Token1Value",
            "    at f (/a.js:1:2)\n",
            "http://localhost:1/x",
            "{\"token\":\"Fake0Tok1\"}",
            "é中🔑",
            "\\\"",
        ])
        .prop_map(str::to_owned),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        text.prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The same tree, with every string replaced: the shape of a value.
fn shape(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
        Value::Object(m) => Value::Object(
            m.values()
                .map(shape)
                .enumerate()
                .map(|(i, v)| (i.to_string(), v))
                .collect(),
        ),
        Value::String(_) => Value::String(String::new()),
        other => other.clone(),
    }
}

/// A redacted member turns any value into a string: compare shapes up to that.
fn same_shape(before: &Value, after: &Value) -> bool {
    match (before, after) {
        (_, Value::String(s)) if s == "[redacted]" => true,
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_shape(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.values().zip(b.values()).all(|(x, y)| same_shape(x, y))
        }
        (a, b) => shape(a) == shape(b),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// JSON in, valid JSON of the same shape out; sanitizing twice changes nothing more.
    #[test]
    fn json_in_valid_json_of_the_same_shape_out(value in arb_json()) {
        let once = sanitize_json(&value);
        let text = serde_json::to_string(&once).unwrap();
        let reparsed: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&reparsed, &once);
        // Keys can only collide if two of them sanitize to the same text; the generator's
        // keys are distinct after sanitizing unless they hold secrets.
        if value.as_object().is_none_or(|m| m.keys().all(|k| sanitize(k) == k.as_str())) {
            prop_assert!(same_shape(&value, &once), "{} -> {}", value, once);
        }
        prop_assert_eq!(sanitize_json(&once), once);
    }

    /// A generated secret anywhere in a JSON string never survives.
    #[test]
    fn embedded_secrets_in_json_are_redacted(
        prefix in "\\PC{0,30}",
        secret in proptest::sample::select(fakes::fakes().into_iter().map(|(_, _, v)| v).collect::<Vec<_>>()),
        key in "[a-z_]{1,10}",
    ) {
        let value = json!({ key: [format!("{prefix} {secret} end")] });
        let out = serde_json::to_string(&sanitize_json(&value)).unwrap();
        prop_assert!(!out.contains(&secret), "{}", out);
    }
}
