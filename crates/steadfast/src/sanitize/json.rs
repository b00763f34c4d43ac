//! JSON sanitized as JSON: every string through the rules, every member whose key names a
//! secret redacted whole.
//!
//! Scanning serialized JSON as text fails twice: escaped quotes (`\"password\":\"…\"`) hide
//! key-value pairs from the rules, and escaped newlines defeat the line-anchored stack-trace
//! rules. Walking the value sees each string as it is, and keeps the shape, so the output is
//! always valid JSON.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::Sanitizer;

/// What a redacted member's value becomes.
const REDACTED: &str = "[redacted]";

/// Last words (after splitting on separators and camelCase) that make a key name a secret.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "pass",
    "passphrase",
    "secret",
    "secrets",
    "token",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "accountkey",
    "clientsecret",
    "authorization",
    "auth",
    "cookie",
    "cookies",
    "session",
    "sessionid",
    "sessid",
    "jsessionid",
    "phpsessid",
    "credential",
    "credentials",
    "creds",
    "signature",
    "sig",
    "dsn",
    "otp",
    "totp",
    "connectionstring",
    "connstr",
];

/// Words that, written before `key` / `id` / `string` / `token`, make a secret: `api_key`,
/// `session_id`, `connection_string`, `x-api-key`.
const SECRET_PAIRS: &[(&str, &str)] = &[
    ("api", "key"),
    ("access", "key"),
    ("secret", "key"),
    ("private", "key"),
    ("account", "key"),
    ("client", "key"),
    ("signing", "key"),
    ("encryption", "key"),
    ("master", "key"),
    ("shared", "key"),
    ("license", "key"),
    ("ssh", "key"),
    ("auth", "key"),
    ("session", "key"),
    ("session", "id"),
    ("connection", "string"),
    ("conn", "string"),
];

/// Words that appear in secret keys' names wherever they are (`password_confirmation`,
/// `secret_value`), unless the last word says the value is about the secret, not the secret
/// (`password_min_length`, `secret_name`).
const STRONG_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "credentials",
    "credential",
    "apikey",
    "privatekey",
    "clientsecret",
];

const METADATA_WORDS: &[&str] = &[
    "count",
    "length",
    "len",
    "min",
    "max",
    "policy",
    "required",
    "strength",
    "hint",
    "rules",
    "expires",
    "expiry",
    "expired",
    "expiration",
    "ttl",
    "age",
    "at",
    "type",
    "kind",
    "name",
    "names",
    "id",
    "ids",
    "ref",
    "arn",
    "path",
    "file",
    "version",
    "enabled",
    "set",
    "changed",
    "updated",
    "created",
    "reset",
    "rotated",
    "url",
    "uri",
    "provider",
    "source",
    "present",
];

/// Whether a member named `key` holds a secret. Case- and separator-insensitive:
/// `api_key`, `apiKey`, `X-Api-Key` and `APIKEY` all do; `tokens_used`, `token_count`,
/// `max_tokens` and `author` do not.
pub(super) fn is_secret_key(key: &str) -> bool {
    // Most keys mention no secret word at all: answer those without splitting them.
    if !mentions_secret(key) {
        return false;
    }
    let words = words(key);
    let Some(last) = words.last() else {
        return false;
    };
    if SECRET_WORDS.contains(&last.as_str()) {
        return true;
    }
    if let [.., before, last] = words.as_slice()
        && SECRET_PAIRS.contains(&(before.as_str(), last.as_str()))
    {
        return true;
    }
    // `access_token`, `refresh_token`: covered by `token`; `api_token_value` is not.
    !METADATA_WORDS.contains(&last.as_str())
        && words.iter().any(|w| STRONG_WORDS.contains(&w.as_str()))
}

/// Whether `key` contains, in any case, a fragment of some secret word. Every key that
/// [`is_secret_key`] accepts does.
fn mentions_secret(key: &str) -> bool {
    const FRAGMENTS: &[&[u8]] = &[
        b"pass", b"pwd", b"secret", b"token", b"key", b"auth", b"cookie", b"sess", b"sid", b"cred",
        b"sig", b"dsn", b"otp", b"conn",
    ];
    let key = key.as_bytes();
    FRAGMENTS
        .iter()
        .any(|f| key.windows(f.len()).any(|w| w.eq_ignore_ascii_case(f)))
}

/// Lowercase words of a key: split on anything not a letter or digit, and at camelCase
/// boundaries (`apiKey` → `api key`, `APIKey` → `api key`, `HTTPSProxy` → `https proxy`).
fn words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let chars: Vec<char> = key.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        if c.is_uppercase() && !word.is_empty() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_lower) {
                words.push(std::mem::take(&mut word));
            }
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

impl Sanitizer {
    /// Sanitizes a JSON value: each string through the rules, and the whole value of each
    /// member whose key names a secret (`password`, `api_key`, `token`, `secret`,
    /// `authorization`, `cookie`, `session_id`, … in any case and with any separator) replaced
    /// by `"[redacted]"`. `null` and booleans under such keys stay: they hold no secret. Keys
    /// are sanitized too. The result has the same shape.
    ///
    /// ```
    /// use serde_json::json;
    /// let s = steadfast::Sanitizer::default_rules();
    /// let data = json!({
    ///     "error": "login failed for https://admin:hunter2@db.example.com",
    ///     "request": {"apiKey": {"id": 7, "value": "abc"}, "max_tokens": 512},
    ///     "trace": ["TypeError: x\n    at handler (/srv/app/index.js:10:3)\n"]
    /// });
    /// assert_eq!(
    ///     s.sanitize_json(&data),
    ///     json!({
    ///         "error": "login failed for https://[redacted]@db.example.com",
    ///         "request": {"apiKey": "[redacted]", "max_tokens": 512},
    ///         "trace": ["TypeError: x\n"]
    ///     })
    /// );
    /// ```
    pub fn sanitize_json(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(match self.sanitize(s) {
                Cow::Borrowed(_) => s.clone(),
                Cow::Owned(clean) => clean,
            }),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.sanitize_json(v)).collect())
            }
            Value::Object(members) => {
                let mut out = Map::new();
                for (key, v) in members {
                    let clean = if is_secret_key(key) && !matches!(v, Value::Null | Value::Bool(_))
                    {
                        Value::String(REDACTED.to_owned())
                    } else {
                        self.sanitize_json(v)
                    };
                    let key = match self.sanitize(key) {
                        Cow::Borrowed(_) => key.clone(),
                        Cow::Owned(clean) => clean,
                    };
                    out.insert(key, clean);
                }
                Value::Object(out)
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
        }
    }
}
