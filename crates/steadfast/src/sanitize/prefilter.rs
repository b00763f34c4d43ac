//! A gate in front of the one big automaton: a small automaton of *triggers*, one of which
//! stands near the start of every match of every built-in rule, so that the big automaton only
//! runs from a little before the first trigger.
//!
//! On clean text (the common case) there is no trigger at all, and the scan costs the small
//! automaton alone. Exactness does not depend on the triggers being rare, only on them being
//! complete: for every match of every built-in and generic rule, starting at `s`, there is a
//! trigger starting at some `t ≥ s` with [`window_start`]`(t) ≤ s`. Then no match starts
//! before the window of the first trigger at or after the scan's position, and searching the
//! big automaton from there finds the same leftmost-first match as searching from the
//! position (the search still sees the bytes before its span for `\b` and `^`).
//!
//! The triggers, by the rules they stand for:
//!
//! - credential words (`pass`, `pwd`, `secret`, `token`, `key`, `auth`, `cred`, `psk`) followed
//!   by the rest of an identifier and an ASCII byte that is not part of one, or the end: every
//!   rule that reads a credential word reads an ASCII separator after it (`=`, `:`, a quote, a
//!   space, `<`, `>`, `|`, `%`, `\`, `&`, a newline);
//! - weak credential words (`sid`, `sig`, `sess`, `otp`, `dsn`, `cookie`) only before an
//!   assignment, as the weak-key and cookie rules need;
//! - key shapes (`sk-`, `api_`, `token-` …), schemes (`Bearer`, `SSWS`, …) before a space;
//! - structure: a run of 16 token characters (every provider format, random runs, path segments,
//!   dotted tokens, id/secret pairs), `=`, `://`, `%3A`, a `:` before 10 password characters
//!   (`user:password`), a vendor header name before a long value, `:$`/`:{SHA}` (htpasswd),
//!   `:port:` (.pgpass), a `/` between spaces, `-p`/`-u`-like flags after a space, an indented
//!   line (stack frames), `----BEGIN`, `eyJ`, private IPv4 prefixes, a quote after `(`;
//! - literal heads of the remaining rules (`login`, `echo`, `identified`, `traceback`, …) and
//!   the credential words of other languages.
//!
//! The claims (`version 10.2.3.4`) have no trigger of their own: a claim only keeps another
//! rule from redacting inside it, and that rule's trigger opens a window that starts before
//! the claim.

use aho_corasick::packed;
use regex_automata::{Anchored, Input, meta};
use regex_syntax::hir::literal::{ExtractKind, Extractor};

use super::places::FOREIGN_WORDS;

/// How far before a trigger a match may start, besides one run of spaces and one run of
/// non-space bytes before that (an identifier in front of its credential word, `FOO   =`).
const BACK: usize = 256;
/// The longest walk back over those runs; past it, the window starts where the scan is.
const MAX_WALK: usize = 4096;
/// The gate lowercases and searches the text in chunks of this size.
const CHUNK: usize = 4096;
/// Literal prefixes are this long (the longest Teddy fingerprint).
const PREFIX: usize = 3;

/// The triggers that start with a literal (byte-level, like the rules). Each is found by its
/// lowercased prefix in a SIMD literal search and confirmed by this pattern, anchored there.
fn literal_led() -> Vec<String> {
    let mut p: Vec<String> = [
        // Credential words, then the rest of the identifier and an ASCII non-identifier byte.
        r"(?i:pass|pwd|secret|token|key|auth|cred|psk)[A-Za-z0-9_.-]*(?:[\x00-\x2C\x2F\x3A-\x40\x5B-\x5E\x60\x7B-\x7F]|\z)",
        // Weak words, only before an assignment (weak keys, cookies, `signature`, `dsn`).
        r#"(?i:sid|sig|sess|otp|dsn|cookie|conn(?:ection)?[_-]?str)[A-Za-z0-9_.-]*(?:\\?["'])?\s*[:=]"#,
        // Key shapes, schemes.
        r"(?i:sk|pk|rk|api|key|token|secret|tok)[-_]",
        r"(?i:bearer|basic|digest|apikey|api-key|ssws|splunk|geniekey|bot|oauth|hmac|jwt|sso-key|flyv1|sharedkey|negotiate|ntlm|zoho-oauthtoken|pat|plain|xoauth2)\s",
        // Structure that starts with a literal.
        r"://",
        r"(?i:%3a)",
        r"(?i)-{4} ?begin",
        r"eyJ|eyI",
        r"\b(?:127|10|172)\.\d|\b192\.168\.|\b169\.254\.",
        r#""(?:d|p|q|dp|dq|qi|k)"\s*:"#,
        r"(?i:xox[abposre]-|xapp-|glc_|sntry|pscale_|atlasv1)",
        // Heads of the remaining rules.
        r#"(?i:login|logon|echo|identified|traceback|backtrace|file\x20"|/user:|private-lines|rabbitmqctl|vault)"#,
        r"(?i:user(?:name)?\s+\S+\s+/\s|b2\s|mc\s)",
    ]
    .iter()
    .map(|p| format!("(?-u){p}"))
    .collect();
    p.push(format!("(?-u){FOREIGN_WORDS}"));
    p
}

/// The lowercased prefixes (at most [`PREFIX`] bytes) that every match of `patterns` starts
/// with, split into those that start with an ASCII byte and the others.
fn prefixes(patterns: &[String]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut ascii = Vec::new();
    let mut other = Vec::new();
    for pattern in patterns {
        let hir = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(pattern)
            .expect("a trigger parses");
        let mut ex = Extractor::new();
        ex.kind(ExtractKind::Prefix)
            .limit_literal_len(PREFIX)
            .limit_class(64)
            .limit_repeat(PREFIX)
            .limit_total(10_000);
        let seq = ex.extract(&hir);
        let literals = seq.literals().expect("every trigger starts with a literal");
        for lit in literals {
            let p: Vec<u8> = lit.as_bytes().to_ascii_lowercase();
            assert!(!p.is_empty(), "a trigger of {pattern} has an empty prefix");
            let set = if p[0].is_ascii() {
                &mut ascii
            } else {
                &mut other
            };
            if !set.contains(&p) {
                set.push(p);
            }
        }
    }
    (ascii, other)
}

/// The gate: a SIMD literal search for the literal-led triggers, byte searches and a word-at-a-
/// time run search for the structural ones.
pub(super) struct Gate {
    /// The literal-led triggers, run anchored at a literal candidate.
    verify: meta::Regex,
    /// Lowercased prefixes of the literal-led triggers that start with an ASCII byte.
    ascii: packed::Searcher,
    /// Prefixes of the credential words of other scripts (searched only in chunks that hold a
    /// non-ASCII byte).
    other: packed::Searcher,
}

impl Gate {
    pub(super) fn new() -> Gate {
        let patterns = literal_led();
        let verify = super::sanitizer::builder()
            .build_many(&patterns)
            .expect("the prefilter's triggers compile");
        let (ascii, other) = prefixes(&patterns);
        let searcher = |set: &[Vec<u8>]| {
            packed::Config::new()
                .heuristic_pattern_limits(false)
                .builder()
                .extend(set)
                .build()
                .expect("a literal searcher for the triggers")
        };
        Gate {
            verify,
            ascii: searcher(&ascii),
            other: searcher(&other),
        }
    }

    /// Where the first trigger at or after `at` starts, if there is one, and how many bytes
    /// the search for it covered.
    pub(super) fn next_trigger(&self, hay: &[u8], at: usize) -> (Option<usize>, usize) {
        let mut buf = [0u8; CHUNK + PREFIX];
        let mut from = at;
        while from < hay.len() {
            let end = (from + CHUNK).min(hay.len());
            let mut best = structural(hay, at, from, end);
            let limit = best.unwrap_or(end);
            if limit > from {
                let ext = (limit + PREFIX - 1).min(hay.len());
                let chunk = &hay[from..ext];
                let low = &mut buf[..chunk.len()];
                for (l, b) in low.iter_mut().zip(chunk) {
                    *l = b.to_ascii_lowercase();
                }
                let low = &*low;
                let mut searchers = vec![&self.ascii];
                if !chunk.is_ascii() {
                    searchers.push(&self.other);
                }
                for searcher in searchers {
                    let limit = best.unwrap_or(limit);
                    if let Some(t) = self.first_literal(searcher, hay, low, from, limit) {
                        best = Some(t);
                    }
                }
            }
            if let Some(t) = best {
                return (Some(t), t + 1 - at);
            }
            from = end;
        }
        (None, hay.len() - at)
    }

    /// The first literal candidate in `from..limit` that its trigger confirms.
    fn first_literal(
        &self,
        searcher: &packed::Searcher,
        hay: &[u8],
        low: &[u8],
        from: usize,
        limit: usize,
    ) -> Option<usize> {
        let mut pos = 0;
        while let Some(m) = searcher.find_in(low, aho_corasick::Span::from(pos..low.len())) {
            let c = from + m.start();
            if c >= limit {
                return None;
            }
            let input = Input::new(hay).span(c..hay.len()).anchored(Anchored::Yes);
            if self.verify.search_half(&input).is_some() {
                return Some(c);
            }
            pos = m.start() + 1;
        }
        None
    }
}

/// The first structural trigger in `from..end` (for a search that started at `at`): a run of 16
/// token bytes, `=`, and the shapes around `:`, `(`, `-`, `A` and indented lines.
fn structural(hay: &[u8], at: usize, from: usize, end: usize) -> Option<usize> {
    let mut best = token_run(hay, at, from, end);
    let limit = |best: Option<usize>| best.unwrap_or(end);
    for c in memchr::memchr3_iter(b'=', b':', b'(', &hay[from..limit(best)]) {
        let c = from + c;
        let hit = match hay[c] {
            b'=' => true,
            b':' => after_colon(hay, c),
            _ => quote_after_paren(hay, c),
        };
        if hit {
            best = Some(c);
            break;
        }
    }
    // An indented line right at `at` (its newline is before the search).
    if from == at && at > 0 && hay[at - 1] == b'\n' && matches!(hay.get(at), Some(b' ' | b'\t')) {
        return Some(at);
    }
    if from == 0 && matches!(hay.first(), Some(b' ' | b'\t' | b'-')) {
        return Some(0);
    }
    for c in memchr::memchr3_iter(b'\n', b'-', b'A', &hay[from..limit(best)]) {
        let c = from + c;
        let t = match hay[c] {
            b'\n' => matches!(hay.get(c + 1), Some(b' ' | b'\t')).then_some(c + 1),
            b'-' => flag(hay, c).then(|| (c - 1).max(at)),
            _ => sasl(hay, c).then_some(c),
        };
        if let Some(t) = t {
            best = Some(best.map_or(t, |b| b.min(t)));
            break;
        }
    }
    best
}

/// After a `:`: ten password bytes (`user:password`), a port or `*` and another `:` (.pgpass),
/// `$` or `{SHA}` (htpasswd), or a vendor header's long value (a name with a `-` before it).
fn after_colon(hay: &[u8], c: usize) -> bool {
    let rest = &hay[c + 1..];
    let password =
        |b: &u8| !(b.is_ascii_whitespace() || br#":@/"'`<>()[]{},;|\"#.contains(b) || *b == b'\\');
    if rest.len() >= 10 && rest[..10].iter().all(password) {
        return true;
    }
    if matches!(rest.first(), Some(b'$' | b'{')) {
        return true;
    }
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if (1..=5).contains(&digits) && rest.get(digits) == Some(&b':') || rest.starts_with(b"*:") {
        return true;
    }
    // `X-Name: value`: the name ends in `-<alnum>` and the value is a run of 20.
    let mut j = c;
    if j > 0 && matches!(hay[j - 1], b'"' | b'\'') {
        j -= 1;
    }
    while j > 0 && matches!(hay[j - 1], b' ' | b'\t') {
        j -= 1;
    }
    let name_end = j;
    while j > 0 && hay[j - 1].is_ascii_alphanumeric() {
        j -= 1;
    }
    if j == name_end || j == 0 || hay[j - 1] != b'-' {
        return false;
    }
    let value = rest
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .map_or(rest.len(), |i| i);
    let mut v = &rest[value..];
    if matches!(v.first(), Some(b'"' | b'\'')) {
        v = &v[1..];
    }
    v.len() >= 20
        && v[..20]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"+/_=.~-".contains(b))
}

/// `(` then spaces and a quote (a call's string arguments).
fn quote_after_paren(hay: &[u8], c: usize) -> bool {
    let rest = &hay[c + 1..];
    let i = rest
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(rest.len());
    matches!(rest.get(i), Some(b'"' | b'\''))
}

/// A short flag after a space: `-p`, `-P`, `-a`, `-w`, `-k`, `-N`, `-u`, `-U`, `--user`.
fn flag(hay: &[u8], c: usize) -> bool {
    c > 0
        && hay[c - 1].is_ascii_whitespace()
        && (matches!(
            hay.get(c + 1),
            Some(b'p' | b'P' | b'a' | b'w' | b'k' | b'N' | b'u' | b'U')
        ) || hay[c + 1..].starts_with(b"-user"))
}

/// `A` at a word's start and 15 base64 bytes after it (a SASL PLAIN blob).
fn sasl(hay: &[u8], c: usize) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    (c == 0 || !word(hay[c - 1]))
        && hay.len() >= c + 16
        && hay[c + 1..c + 16]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

/// The first start `p` in `from..end` (and not before `at`) of 16 token bytes
/// (`[A-Za-z0-9_-]`). Such a run covers a whole aligned 8-byte word, so only words whose 8
/// bytes are all token bytes (tested 8 at a time) are looked at more closely.
fn token_run(hay: &[u8], at: usize, from: usize, end: usize) -> Option<usize> {
    let first_word = from.saturating_sub(8) & !7;
    let mut w = first_word;
    while w + 8 <= hay.len() && w < end {
        let word = u64::from_le_bytes(hay[w..w + 8].try_into().expect("8 bytes"));
        if all_token_bytes(word) {
            // Extend the run both ways; the run's 16-byte windows start from its start.
            let mut s = w;
            while s > at && is_token(hay[s - 1]) {
                s -= 1;
            }
            let mut e = w + 8;
            while e < hay.len() && is_token(hay[e]) {
                e += 1;
            }
            // (It may start before `from`, in the chunk before, whose search saw no word of it.)
            let s = s.max(at);
            if e >= s + 16 && s < end {
                return Some(s);
            }
            w = e.max(w + 8) & !7;
            continue;
        }
        w += 8;
    }
    None
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether all 8 bytes of `x` are token bytes (`[A-Za-z0-9_-]`), tested together.
fn all_token_bytes(x: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Each byte below 128 (a non-ASCII byte is no token byte), then range tests without
    // carries between bytes.
    if x & HIGH != 0 {
        return false;
    }
    let ge = |v: u64, lo: u8| (v + ONES * u64::from(128 - lo)) & HIGH;
    let lt = |v: u64, hi: u8| !(v + ONES * u64::from(128 - hi)) & HIGH;
    let eq = |v: u64, b: u8| !((v ^ (ONES * u64::from(b))) + ONES * 0x7F) & HIGH;
    let lower = x | (ONES * 0x20);
    let letter = ge(lower, b'a') & lt(lower, b'z' + 1);
    let digit = ge(x, b'0') & lt(x, b'9' + 1);
    (letter | digit | eq(x, b'_') | eq(x, b'-')) == HIGH
}

/// Where the big automaton must start to see every match that a trigger at `t` stands for, but
/// never before `at`: [`BACK`] bytes before it, then back over a run of spaces and the run of
/// non-space bytes before it. Non-decreasing in `t` (below the walk's limit), which is what
/// makes the first trigger's window the one to search from.
pub(super) fn window_start(hay: &[u8], at: usize, t: usize) -> usize {
    let mut i = t.saturating_sub(BACK);
    if i <= at {
        return at;
    }
    let floor = i.saturating_sub(MAX_WALK).max(at);
    while i > floor && hay[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    while i > floor && !hay[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    if i == floor { at } else { i }
}
