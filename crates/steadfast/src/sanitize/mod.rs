//! Redaction of secrets and internals from text and JSON that can reach a model or a log.
//!
//! A tool's error message is written for its developer: it carries stack traces, internal URLs,
//! and — far too often — the credentials that were in play. Handing it to a model leaks all of
//! that into a transcript, a log, or the model's next tool call. Every message that reaches an
//! [`LlmError`](crate::LlmError) passes through [`sanitize`]; structured data (a relayed
//! JSON-RPC error's `data`) passes through [`sanitize_json`], which keeps its shape.
//!
//! The rules live in one table, [`BUILTIN_RULES`]: 75 of them, covering more than forty
//! credential formats (listed with examples and sources in `docs/sanitizer.md`). They are
//! compiled once into one multi-pattern regular expression over bytes, so finding what to
//! redact is one pass over the text, linear in its length whatever it contains, and a match
//! names the rule that won it. Every built-in pattern is ASCII-only (`(?-u)`): the formats are
//! ASCII, and ASCII classes keep the whole scan in a lazy DFA on text of any script — with
//! Unicode `\b`, one `é` used to send the scan to an engine 200 times slower.
//!
//! A gate of cheap triggers (`gate.rs`: SIMD byte classes and a SIMD search for credential
//! words) runs first, and the automaton only searches the regions around triggers: most text
//! has none, and then costs the gate's pass alone. The automaton is compiled the first time a
//! text has a trigger ([`Sanitizer::compile_all`] compiles it up front).
//!
//! Only the spans found are looked at again, by the one rule that won each, to pull out what to
//! keep (`password=`, `Bearer `). Rules that need judgment beyond a pattern (a value after
//! `password:` in prose must look like a secret; `Bearer authentication` is prose) carry a
//! small check that runs only on matches; a match that fails its check is left as it was.
//!
//! Beside the rules runs a **generic layer** (`generic.rs`): a value that looks random for its
//! alphabet and stands where a credential stands (after `password`/`secret`/`token`/`key`/`auth`
//! in any style, after an auth scheme, as the password of `user:password`, behind the
//! command-line conventions of common tools) is redacted though no rule names its format. Its
//! patterns join the same automaton, after the rules, so the scan stays one linear pass. It is
//! on by default; [`set_generic_layer`] (or `STEADFAST_SANITIZER_GENERIC=off` in the
//! environment) turns it off for [`sanitize`] and [`sanitize_json`], and
//! [`Sanitizer::builder`] builds a sanitizer with or without it.
//!
//! The layer also looks where credentials stand in other shapes (`places.rs`): credential
//! words of other languages, encoded and nested text, markup, the next line, login
//! transcripts, function arguments, key armor, URL path segments, structured tokens and
//! vendor-named headers.
//!
//! To add rules, build a [`Sanitizer`] from the built-in table plus your own.

mod entropy;
mod gate;
mod generic;
mod json;
mod places;
mod rule;
mod rules;
mod sanitizer;

use std::borrow::Cow;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU8, Ordering};

pub use rule::Rule;
pub use rules::BUILTIN_RULES;
pub use sanitizer::{Sanitizer, SanitizerBuilder};

static WITH_GENERIC: LazyLock<Sanitizer> = LazyLock::new(|| {
    Sanitizer::builder()
        .build()
        .expect("the built-in rules compile")
});

static RULES_ONLY: LazyLock<Sanitizer> = LazyLock::new(|| {
    Sanitizer::builder()
        .generic_layer(false)
        .build()
        .expect("the built-in rules compile")
});

/// 0: not decided yet (read the environment), 1: on, 2: off.
static GENERIC: AtomicU8 = AtomicU8::new(0);

/// Turns the generic layer on or off for [`sanitize`], [`sanitize_json`] and
/// [`Sanitizer::default_rules`], process-wide. It is on unless this was called with `false` or
/// the environment variable `STEADFAST_SANITIZER_GENERIC` is `off`, `0` or `false`.
///
/// ```
/// steadfast::set_generic_layer(false);
/// assert_eq!(steadfast::sanitize("sshpass -p q8Zx7R2pLk5T ssh a"), "sshpass -p q8Zx7R2pLk5T ssh a");
/// steadfast::set_generic_layer(true);
/// assert_eq!(steadfast::sanitize("sshpass -p q8Zx7R2pLk5T ssh a"), "sshpass -p [redacted] ssh a");
/// ```
pub fn set_generic_layer(enabled: bool) {
    GENERIC.store(if enabled { 1 } else { 2 }, Ordering::Relaxed);
}

fn current() -> &'static Sanitizer {
    let mut state = GENERIC.load(Ordering::Relaxed);
    if state == 0 {
        let off = std::env::var("STEADFAST_SANITIZER_GENERIC").is_ok_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "off" | "0" | "false"
            )
        });
        state = if off { 2 } else { 1 };
        // A concurrent `set_generic_layer` wins over the environment.
        let _ = GENERIC.compare_exchange(0, state, Ordering::Relaxed, Ordering::Relaxed);
        state = GENERIC.load(Ordering::Relaxed);
    }
    if state == 2 {
        &RULES_ONLY
    } else {
        &WITH_GENERIC
    }
}

/// Redacts `text` with the built-in rules. Returns the input unchanged (borrowed) when nothing
/// matched.
///
/// ```
/// use steadfast::sanitize;
/// assert_eq!(
///     sanitize("GET http://10.0.3.7:8080/admin?x=1 failed: password=hunter2"),
///     "GET [internal-url] failed: password=[redacted]"
/// );
/// assert_eq!(sanitize("DATABASE_PASSWORD=hunter2 OPENAI_API_KEY=abc"), "DATABASE_PASSWORD=[redacted] OPENAI_API_KEY=[redacted]");
/// assert_eq!(sanitize("file not found: report.pdf"), "file not found: report.pdf");
/// ```
pub fn sanitize(text: &str) -> Cow<'_, str> {
    current().sanitize(text)
}

/// Sanitizes a JSON value with the built-in rules, keeping its shape: see
/// [`Sanitizer::sanitize_json`].
///
/// ```
/// use serde_json::json;
/// let data = json!({"user": "alice", "password": "hunter2", "tokens_used": 42});
/// assert_eq!(
///     steadfast::sanitize_json(&data),
///     json!({"user": "alice", "password": "[redacted]", "tokens_used": 42})
/// );
/// ```
pub fn sanitize_json(value: &serde_json::Value) -> serde_json::Value {
    current().sanitize_json(value)
}

impl Sanitizer {
    /// The built-in rules and, unless [`set_generic_layer`] turned it off, the generic layer:
    /// compiled once per process and shared.
    ///
    /// See [`Sanitizer`] for an example.
    pub fn default_rules() -> &'static Sanitizer {
        current()
    }

    /// The built-in rules without the generic layer, compiled once per process and shared.
    ///
    /// ```
    /// assert!(!steadfast::Sanitizer::rules_only().has_generic_layer());
    /// ```
    pub fn rules_only() -> &'static Sanitizer {
        &RULES_ONLY
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
    fn every_builtin_rule_compiles_alone_and_is_ascii_only() {
        for rule in BUILTIN_RULES {
            Sanitizer::compile([rule.clone()]).unwrap_or_else(|e| panic!("{}: {e}", rule.name));
            assert!(
                rule.pattern.starts_with("(?-u)"),
                "{} is not ASCII-only",
                rule.name
            );
        }
    }

    #[test]
    fn rule_names_are_unique() {
        let mut names: Vec<_> = BUILTIN_RULES.iter().map(|r| r.name.as_ref()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn bad_custom_rules_are_errors_naming_the_rule() {
        let err = Sanitizer::with_rules([Rule::new("broken", "(unclosed", "x")]).unwrap_err();
        assert!(err.to_string().contains("broken"), "{err}");
    }

    #[test]
    fn byte_level_custom_rules_never_split_a_character() {
        // `(?-u:.)` matches one byte: half of `é`. The span is widened to the whole character.
        let s = Sanitizer::compile([Rule::new("byte", r"(?-u:\xC3)", "#")]).unwrap();
        assert_eq!(s.sanitize("café au lait"), "caf# au lait");
    }

    #[test]
    fn empty_matches_move_on() {
        let s = Sanitizer::compile([Rule::new("empty", r"x*", "-")]).unwrap();
        assert_eq!(s.sanitize(" é "), "- -é- -");
    }
}
