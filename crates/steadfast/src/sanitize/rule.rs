//! One redaction rule: a pattern, what replaces it, and an optional check on each match.

use std::borrow::Cow;
use std::fmt;

/// One redaction rule.
///
/// `pattern` is a regular expression (the `regex` crate's syntax), matched against the bytes of
/// the text. It may contain a group named `KEEP` — text kept before the replacement (a key name,
/// `Bearer `) — and a group named `TAIL`, kept after it.
///
/// Start a pattern with `(?-u)` when what it matches is ASCII (every built-in rule does): `\b`,
/// `\w`, `\d` and `\s` are then ASCII classes, which the scanner runs at full speed on text of
/// any script. A rule with a Unicode-aware `\b` makes every scan of non-ASCII text slower.
///
/// ```
/// use steadfast::{Rule, Sanitizer};
/// let employee_id = Rule::new("employee-id", r"(?-u)\bEMP-\d{6}\b", "[employee]");
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

    pub(super) const fn builtin(
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
