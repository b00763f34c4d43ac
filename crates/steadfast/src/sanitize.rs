//! Redaction of secrets and internals from text that can reach a model or a log.
//!
//! A tool's error message is written for its developer: it carries stack traces, internal URLs,
//! and — far too often — the credentials that were in play. Handing it to a model leaks all of
//! that into a transcript, a log, or the model's next tool call. Every message that reaches an
//! [`LlmError`](crate::LlmError) passes through [`sanitize`].
//!
//! The rules live in one table, [`BUILTIN_RULES`]. They are compiled once into a single regular
//! expression (an alternation of every rule, without capture groups), so finding what to redact
//! is one pass over the text, linear in its length whatever it contains (the `regex` crate
//! guarantees linear time), and never panics. Only the spans found are then looked at again, by
//! the one rule that won each, to pull out what to keep.
//! Rules that need judgment beyond a pattern (an API-key shape must contain a digit; a value
//! after `password:` in prose must look like a secret) carry a small check that runs only on
//! matches; a match that fails its check is left as it was.
//!
//! To add rules, build a [`Sanitizer`] from the built-in table plus your own.

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

/// One redaction rule.
///
/// `pattern` is a regular expression (the `regex` crate's syntax). It may contain a group named
/// `KEEP` — text kept before the replacement (a key name, `Bearer `) — and a group named `TAIL`,
/// kept after it.
///
/// ```
/// use steadfast::{Rule, Sanitizer};
/// let employee_id = Rule::new("employee-id", r"\bEMP-\d{6}\b", "[employee]");
/// let s = Sanitizer::with_rules([employee_id]).unwrap();
/// assert_eq!(s.sanitize("no access for EMP-123456"), "no access for [employee]");
/// ```
#[derive(Clone)]
pub struct Rule {
    /// A short name, for documentation and debugging.
    pub name: Cow<'static, str>,
    /// The pattern.
    pub pattern: Cow<'static, str>,
    /// What replaces the match (between `KEEP` and `TAIL`).
    pub replacement: Cow<'static, str>,
    /// A check on the redacted part of a match (the text between `KEEP` and `TAIL`); `false`
    /// leaves the match unchanged.
    pub check: Option<fn(&str) -> bool>,
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule")
            .field("name", &self.name)
            .field("pattern", &self.pattern)
            .field("replacement", &self.replacement)
            .field("check", &self.check.is_some())
            .finish()
    }
}

impl Rule {
    /// A rule without a check.
    ///
    /// See [`Rule`] for an example.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        pattern: impl Into<Cow<'static, str>>,
        replacement: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self {
            name: name.into(),
            pattern: pattern.into(),
            replacement: replacement.into(),
            check: None,
        }
    }

    /// Adds a check on the redacted part of each match.
    ///
    /// ```
    /// use steadfast::{Rule, Sanitizer};
    /// // Long hex strings are credentials; short ones are ids worth keeping.
    /// let hex = Rule::new("long-hex", r"\b[0-9a-f]{8,}\b", "[hex]").with_check(|s| s.len() >= 16);
    /// let s = Sanitizer::compile([hex]).unwrap();
    /// assert_eq!(s.sanitize("id deadbeef, key 0123456789abcdef01"), "id deadbeef, key [hex]");
    /// ```
    pub fn with_check(mut self, check: fn(&str) -> bool) -> Self {
        self.check = Some(check);
        self
    }

    const fn builtin(
        name: &'static str,
        pattern: &'static str,
        replacement: &'static str,
        check: Option<fn(&str) -> bool>,
    ) -> Self {
        Self {
            name: Cow::Borrowed(name),
            pattern: Cow::Borrowed(pattern),
            replacement: Cow::Borrowed(replacement),
            check,
        }
    }
}

fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

/// An API-key shape (`sk-…`, `token_…`) is a secret only if it is long and not a plain word
/// chain: `api-gateway-timeout` is an ordinary message.
fn looks_like_key(s: &str) -> bool {
    s.len() >= 12 && has_digit(s)
}

/// A value after `password:` in prose ("password: must be 8 characters") is a word, not a
/// secret; one with digits or symbols, or a long one, is treated as a secret.
fn looks_like_secret_value(s: &str) -> bool {
    s.len() >= 12 || s.bytes().any(|b| !b.is_ascii_alphabetic())
}

/// The built-in rules, in priority order (at one position, the earlier rule wins).
///
/// | rule | redacts | becomes |
/// |---|---|---|
/// | `pem-private-key` | PEM private key blocks | `[redacted private key]` |
/// | `stack-frame` | `at fn (file:line:col)` lines (JavaScript, Java, Rust) | removed |
/// | `python-traceback` | `Traceback (most recent call last):` and `File "…", line N` frames | removed |
/// | `rust-backtrace` | `stack backtrace:` blocks and `  12: crate::module::fn` frames | removed |
/// | `internal-url` | URLs to localhost, loopback, private networks, `*.internal`/`*.local`/`*.svc` | `[internal-url]` |
/// | `internal-host` | bare loopback, private and link-local IPv4 addresses (with port) | `[internal-host]` |
/// | `url-credentials` | `scheme://user:password@` | `scheme://[redacted]@` |
/// | `slack-webhook` | `hooks.slack.com/services/…` | `[redacted]` |
/// | `auth-header` | `Authorization:`, `X-Api-Key:`, `Cookie:` … values | `Authorization: [redacted]` |
/// | `bearer` | `Bearer …`, `Basic …`, `Token …` credentials | `Bearer [redacted]` |
/// | `jwt` | JSON Web Tokens | `[redacted]` |
/// | `aws-access-key` | `AKIA…`/`ASIA…` key ids | `[redacted]` |
/// | `github-token` | `ghp_…`, `gho_…`, `github_pat_…` | `[redacted]` |
/// | `gitlab-token` | `glpat-…` | `[redacted]` |
/// | `slack-token` | `xoxb-…`, `xoxp-…` … | `[redacted]` |
/// | `google-api-key` | `AIza…` | `[redacted]` |
/// | `api-key` | `sk-…`, `pk-…`, `api-…`, `key-…`, `token-…`, `secret-…`, `rk_live_…` (long, with a digit) | `[redacted]` |
/// | `key-value-quoted` | `"password": "…"`, `'api_key': '…'` (JSON, Python reprs) | `"password": "[redacted]"` |
/// | `key-value` | `password=…`, `api_key=…` in query strings and env | `password=[redacted]` |
/// | `key-colon-value` | `client_secret: …` in prose and YAML (values that look like secrets) | `client_secret: [redacted]` |
pub const BUILTIN_RULES: &[Rule] = &[
    Rule::builtin(
        "pem-private-key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----|[\s\S]*)",
        "[redacted private key]",
        None,
    ),
    Rule::builtin(
        "stack-frame",
        r"(?m)^[ \t]+at [^\n]*?(?::\d+\)?|\(<anonymous>\)|\(native\)|\(Native Method\)|\(Unknown Source\)|\(index \d+\))[ \t]*\r?(?:\n|$)",
        "",
        None,
    ),
    Rule::builtin(
        "python-traceback",
        r#"(?m)^[ \t]*Traceback \(most recent call last\):[ \t]*\r?(?:\n|$)|^[ \t]*File "[^"\n]*", line \d+[^\n]*\r?(?:\n|$)(?:[ \t]{4,}[^\n]*\r?(?:\n|$))?"#,
        "",
        None,
    ),
    Rule::builtin(
        "rust-backtrace",
        r"(?m)^stack backtrace:[ \t]*\r?(?:\n|$)(?:[ \t]+(?:\d+: |at )[^\n]*\r?(?:\n|$))*|^[ \t]+\d+: [\w<>\[\]{}$ ]*::[^\n]*\r?(?:\n|$)",
        "",
        None,
    ),
    Rule::builtin(
        "internal-url",
        r#"(?i)\b(?:https?|wss?|ftp|grpc|redis|postgres(?:ql)?|mysql|mongodb(?:\+srv)?|amqp)://(?:[^/\s@"'<>]*@)?(?:localhost|127(?:\.\d{1,3}){3}|0\.0\.0\.0|\[::1?\]|10(?:\.\d{1,3}){3}|192\.168(?:\.\d{1,3}){2}|172\.(?:1[6-9]|2\d|3[01])(?:\.\d{1,3}){2}|169\.254(?:\.\d{1,3}){2}|[\w.-]+\.(?:internal|local|localdomain|lan|svc|cluster\.local|corp))(?::\d+)?(?:[/?#][^\s"'<>]*)?"#,
        "[internal-url]",
        None,
    ),
    Rule::builtin(
        "internal-host",
        r"\b(?:127(?:\.\d{1,3}){3}|10(?:\.\d{1,3}){3}|192\.168(?:\.\d{1,3}){2}|172\.(?:1[6-9]|2\d|3[01])(?:\.\d{1,3}){2}|169\.254(?:\.\d{1,3}){2})(?::\d{1,5})?\b",
        "[internal-host]",
        None,
    ),
    Rule::builtin(
        "url-credentials",
        r"(?i)\b(?P<KEEP>[a-z][a-z0-9+.-]*://)[^/\s:@]*:[^/\s@]+(?P<TAIL>@)",
        "[redacted]",
        None,
    ),
    Rule::builtin(
        "slack-webhook",
        r"(?i)\bhttps://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]+",
        "[redacted]",
        None,
    ),
    Rule::builtin(
        "auth-header",
        r#"(?i)(?P<KEEP>\b(?:proxy-)?(?:authorization|x-api-key|api-key|x-auth-token|x-access-token|cookie|set-cookie)["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token|digest)\s+)?[^\s,;"')}>]+"#,
        "[redacted]",
        None,
    ),
    Rule::builtin(
        "bearer",
        r"(?i)(?P<KEEP>\b(?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=-]{12,}",
        "[redacted]",
        Some(has_digit),
    ),
    Rule::builtin(
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
        "[redacted]",
        None,
    ),
    Rule::builtin(
        "aws-access-key",
        r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
        "[redacted]",
        None,
    ),
    Rule::builtin(
        "github-token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        "[redacted]",
        None,
    ),
    Rule::builtin(
        "gitlab-token",
        r"\bglpat-[A-Za-z0-9_-]{20,}",
        "[redacted]",
        None,
    ),
    Rule::builtin(
        "slack-token",
        r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
        "[redacted]",
        None,
    ),
    Rule::builtin(
        "google-api-key",
        r"\bAIza[0-9A-Za-z_-]{35,}",
        "[redacted]",
        None,
    ),
    Rule::builtin(
        "api-key",
        r"(?i)\b(?:sk|pk|rk|api|key|token|secret)[-_][A-Za-z0-9_-]{8,}",
        "[redacted]",
        Some(looks_like_key),
    ),
    Rule::builtin(
        "key-value-quoted",
        r#"(?i)(?P<KEEP>["']?\b(?:password|passwd|pwd|pass|secret|client[_-]?secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|access[_-]?token|refresh[_-]?token|id[_-]?token|auth[_-]?token|session[_-]?(?:id|token)|private[_-]?key|aws_secret_access_key|token|signature|sig)["']?\s*[:=]\s*")[^"\n]*(?P<TAIL>")"#,
        "[redacted]",
        None,
    ),
    Rule::builtin(
        "key-value-single-quoted",
        r#"(?i)(?P<KEEP>["']?\b(?:password|passwd|pwd|pass|secret|client[_-]?secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|access[_-]?token|refresh[_-]?token|id[_-]?token|auth[_-]?token|session[_-]?(?:id|token)|private[_-]?key|aws_secret_access_key|token|signature|sig)["']?\s*[:=]\s*')[^'\n]*(?P<TAIL>')"#,
        "[redacted]",
        None,
    ),
    // `key=value`: query strings and env; the value stops at `&`.
    Rule::builtin(
        "key-value",
        r#"(?i)(?P<KEEP>["']?\b(?:password|passwd|pwd|pass|secret|client[_-]?secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|access[_-]?token|refresh[_-]?token|id[_-]?token|auth[_-]?token|session[_-]?(?:id|token)|private[_-]?key|aws_secret_access_key|token|signature|sig)["']?\s*=\s*["']?)[^\s"'&,;}<>)\]\[][^\s"'&,;}<>)\]]*"#,
        "[redacted]",
        None,
    ),
    // `key: value`: prose and YAML; the value may contain `&`, and must look like a secret.
    Rule::builtin(
        "key-colon-value",
        r#"(?i)(?P<KEEP>["']?\b(?:password|passwd|pwd|pass|secret|client[_-]?secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|access[_-]?token|refresh[_-]?token|id[_-]?token|auth[_-]?token|session[_-]?(?:id|token)|private[_-]?key|aws_secret_access_key|token|signature|sig)["']?\s*:\s*["']?)[^\s"',;}<>)\]\[][^\s"',;}<>)\]]*"#,
        "[redacted]",
        Some(looks_like_secret_value),
    ),
];

struct Compiled {
    /// The rule alone, with its `KEEP` / `TAIL` groups: used only on the spans it won.
    regex: Regex,
    replacement: Cow<'static, str>,
    check: Option<fn(&str) -> bool>,
}

/// A compiled set of rules.
///
/// ```
/// let s = steadfast::Sanitizer::default_rules();
/// assert_eq!(s.sanitize("call with Bearer abc123def456ghi789"), "call with Bearer [redacted]");
/// ```
pub struct Sanitizer {
    /// Every rule in one alternation, without capture groups: the single scan over the text.
    finder: Regex,
    /// The same rules as a set: which of them match a span found by the scan.
    set: regex::RegexSet,
    rules: Vec<Compiled>,
}

impl fmt::Debug for Sanitizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sanitizer")
            .field("rules", &self.rules.len())
            .finish()
    }
}

static DEFAULT: LazyLock<Sanitizer> = LazyLock::new(|| {
    Sanitizer::compile(BUILTIN_RULES.iter().cloned()).expect("the built-in rules compile")
});

/// Redacts `text` with the built-in rules. Returns the input unchanged (borrowed) when nothing
/// matched.
///
/// ```
/// use steadfast::sanitize;
/// assert_eq!(
///     sanitize("GET http://10.0.3.7:8080/admin?x=1 failed: password=hunter2"),
///     "GET [internal-url] failed: password=[redacted]"
/// );
/// assert_eq!(sanitize("file not found: report.pdf"), "file not found: report.pdf");
/// ```
pub fn sanitize(text: &str) -> Cow<'_, str> {
    DEFAULT.sanitize(text)
}

impl Sanitizer {
    /// The built-in rules, compiled once per process and shared.
    ///
    /// See [`Sanitizer`] for an example.
    pub fn default_rules() -> &'static Sanitizer {
        &DEFAULT
    }

    /// The built-in rules followed by `extra` (which lose to the built-in ones at the same
    /// position).
    ///
    /// See [`Rule`] for an example.
    pub fn with_rules(extra: impl IntoIterator<Item = Rule>) -> Result<Sanitizer, regex::Error> {
        Self::compile(BUILTIN_RULES.iter().cloned().chain(extra))
    }

    /// Exactly these rules, in this order.
    ///
    /// ```
    /// let s = steadfast::Sanitizer::compile([steadfast::Rule::new("digits", r"\d+", "#")]).unwrap();
    /// assert_eq!(s.sanitize("order 66"), "order #");
    /// ```
    pub fn compile(rules: impl IntoIterator<Item = Rule>) -> Result<Sanitizer, regex::Error> {
        let rules: Vec<Rule> = rules.into_iter().collect();
        let alternation = rules
            .iter()
            .map(|r| {
                let bare = r
                    .pattern
                    .replace("(?P<KEEP>", "(?:")
                    .replace("(?P<TAIL>", "(?:");
                format!("(?:{bare})")
            })
            .collect::<Vec<_>>()
            .join("|");
        let finder = regex::RegexBuilder::new(&alternation)
            .size_limit(64 << 20)
            .build()?;
        let set = regex::RegexSetBuilder::new(rules.iter().map(|r| r.pattern.as_ref()))
            .size_limit(64 << 20)
            .build()?;
        let compiled = rules
            .into_iter()
            .map(|rule| {
                Ok(Compiled {
                    regex: Regex::new(&rule.pattern)?,
                    replacement: rule.replacement,
                    check: rule.check,
                })
            })
            .collect::<Result<_, regex::Error>>()?;
        Ok(Sanitizer {
            finder,
            set,
            rules: compiled,
        })
    }

    /// Redacts `text`. Returns it unchanged (borrowed) when nothing matched.
    ///
    /// See [`Sanitizer`] for an example.
    pub fn sanitize<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut matches = self.finder.find_iter(text).peekable();
        if matches.peek().is_none() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for m in matches {
            out.push_str(&text[last..m.start()]);
            self.replace(text, m.start(), m.end(), &mut out);
            last = m.end();
        }
        out.push_str(&text[last..]);
        Cow::Owned(out)
    }

    /// Writes the replacement for the span `[start, end)` that the scan matched. The rule that
    /// won it is the first that matches exactly that span (the alternation is leftmost-first);
    /// its own regex, run on the span with the text before it as context, gives the groups.
    fn replace(&self, text: &str, start: usize, end: usize, out: &mut String) {
        let window = &text[..end];
        let candidates = self.set.matches_at(window, start);
        let found = candidates.iter().find_map(|i| {
            let rule = &self.rules[i];
            let caps = rule.regex.captures_at(window, start)?;
            let whole = caps.get(0)?;
            (whole.start() == start && whole.end() == end).then_some((rule, caps))
        });
        let Some((rule, caps)) = found else {
            // Cannot happen with well-formed rules; redact rather than leak.
            out.push_str("[redacted]");
            return;
        };
        let keep = caps.name("KEEP");
        let tail = caps.name("TAIL");
        let secret = &text[keep.map_or(start, |m| m.end())..tail.map_or(end, |m| m.start())];
        if rule.check.is_some_and(|check| !check(secret)) {
            out.push_str(&text[start..end]);
            return;
        }
        out.push_str(keep.map_or("", |m| m.as_str()));
        out.push_str(&rule.replacement);
        out.push_str(tail.map_or("", |m| m.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_text_is_borrowed() {
        assert!(matches!(sanitize("nothing to see"), Cow::Borrowed(_)));
    }

    #[test]
    fn every_builtin_rule_compiles_alone() {
        for rule in BUILTIN_RULES {
            Sanitizer::compile([rule.clone()]).unwrap_or_else(|e| panic!("{}: {e}", rule.name));
        }
    }

    #[test]
    fn bad_custom_rules_are_errors_not_panics() {
        assert!(Sanitizer::with_rules([Rule::new("broken", "(unclosed", "x")]).is_err());
    }
}
