//! A gate in front of the one big automaton: cheap *triggers*, one of which stands in or near
//! every match of every built-in and generic rule, so that the automaton only runs on the
//! regions around them. Most text has no trigger at all, and the scan then costs this file's
//! one pass over the bytes (SIMD byte classes and a SIMD literal search) instead of the
//! automaton's, whose tables no longer fit in the first-level cache.
//!
//! Exactness does not depend on the triggers being rare, only on them being *complete*: every
//! position where some rule matches lies in the window of a trigger, and some match at that
//! position ends inside the window. A window runs from [`K_BACK`] whitespace/non-whitespace
//! boundaries before its trigger to [`K_FWD`] boundaries after the point [`MIN_FWD`] bytes past
//! its word, then on to the end of that line (and for markup to the next `<`); overlapping
//! windows merge into regions. The scan then
//! searches each region (the search still sees the bytes around it for `\b` and `^`), and a
//! match found there is searched again, anchored at its start, over the whole text, so the
//! result is the one the ungated scan finds (leftmost start, then rule priority).
//!
//! The triggers, by the rules they stand for:
//!
//! - credential words (`pass`, `pwd`, `secret`, `token`, `key`, `auth`, `cred`, `psk`,
//!   `cookie`, `eyJ`, …) anywhere, the credential words of twelve other languages, and auth
//!   schemes and command heads before a space (`bearer `, `bot `, `login `, `echo `, …): one
//!   SIMD multi-literal search (Teddy) over the text with ASCII letters lowercased and
//!   whitespace made a space;
//! - `=`; `%3A%2F%2F`; a `:` before `//`, a port and `:`, `$`, `{`, `*`, ten password bytes, a
//!   vendor header's value, or after `/user` or a key name of the weak kind (`sid`, `sig`,
//!   `otp`, `sas`, `sess…`, `dsn`, `conn…`); a `.` between digits (addresses, versions);
//!   `----`, a short flag after a space, `Private-Lines:`, an `sk-`/`tok_`-like key shape; a
//!   `/` between spaces or in a base64 run that an `A` starts; `(` before a quote; `<` before a
//!   weak key name; a line that starts a stack frame or a traceback;
//! - a run of 16 token bytes (`[A-Za-z0-9_-]`): every provider format, random runs, path
//!   segments, dotted and structured tokens, id/secret pairs.
//!
//! The claims (`version 10.2.3.4`, `partition_key=…`) ride on the same triggers (a `.` between
//! digits, the word `key`).

use std::collections::VecDeque;

use aho_corasick::packed;

mod classes;

use classes::classify;

/// Whitespace/non-whitespace boundaries a window reaches back over: a value and three words of
/// prose before a credential word of another language (`<value> ist der geheime Schlüssel`)
/// with the separator before it, and more.
const K_BACK: usize = 12;
/// Boundaries a window reaches forward over: `mc alias set <name> <url> <key> <secret>`, a
/// credential word, an assignment over several lines, a value.
const K_FWD: usize = 18;
/// Bytes past the end of a trigger's word before the window's boundaries are counted (up to 80
/// bytes of attributes before a markup value, `name="ApiSecret" … value="…"`).
const MIN_FWD: usize = 96;
/// Bytes past a `(` before the boundaries are counted (a login call's three quoted arguments of
/// up to 64 bytes).
const MIN_CALL: usize = 224;
/// The words of key names at the head of [`WORDS`].
const KEY_NAMES: usize = 10;

/// Credential words and heads, lowercased: first the words of key names (before an ASCII byte
/// or a quote of another language, see [`word_goes_on`]), then token heads and credential
/// words of other languages that stand anywhere, then schemes and command heads before
/// whitespace (made a space).
const WORDS: &[&str] = &[
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "cred",
    "psk",
    "cookie",
    "rabbitmq",
    // Token heads (`eyJ…`, `xoxb-…`): a match may end right after them.
    "eyj",
    "eyi",
    "xox",
    "xapp", // Other languages, written in ASCII.
    "clave",
    "senha",
    "chave",
    "kennwort",
    "zugangsdaten",
    "geheimnis",
    "jeton",
    "parola",
    "chiave",
    "anahtar",
    "wachtwoord",
    "sleutel",
    "klucz",
    "belirte",
    // Schemes and command heads, before whitespace (made a space).
    "bearer ",
    "basic ",
    "digest ",
    "ssws ",
    "splunk ",
    "bot ",
    "hmac ",
    "jwt ",
    "flyv1 ",
    "negotiate ",
    "ntlm ",
    "pat ",
    "plain ",
    "login ",
    "echo ",
    "mc ",
    "identified ",
];

/// Credential words of other languages with non-ASCII letters (searched only in text that has
/// non-ASCII bytes), ASCII letters lowercased.
const FOREIGN: &[&str] = &[
    "contraseña",
    "schlüssel",
    "clé",
    "пароль",
    "Пароль",
    "ПАРОЛЬ",
    "ключ",
    "Ключ",
    "токен",
    "Токен",
    "секрет",
    "Секрет",
    "パスワード",
    "暗証番号",
    "キー",
    "秘密鍵",
    "トークン",
    "シークレット",
    "密码",
    "密钥",
    "秘钥",
    "令牌",
    "口令",
    "密碼",
    "金鑰",
    "비밀번호",
    "암호",
    "키",
    "토큰",
    "şifre",
    "Şifre",
    "hasł",
];

/// Key names that take a value only after an assignment (`sid: …`, `<dsn>…`): looked for
/// before a `:` and after a `<` rather than everywhere (`inside`, `design`).
const WEAK: &[&[u8]] = &[b"sid", b"sig", b"otp", b"sas", b"sess", b"dsn", b"conn"];

/// A token byte (`[A-Za-z0-9_-]`).
fn is_tok(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// `\s` of the patterns (ASCII): space, `\t`, `\n`, `\v`, `\f`, `\r`.
fn ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn is_boundary(hay: &[u8], j: usize) -> bool {
    j > 0 && j < hay.len() && ws(hay[j - 1]) != ws(hay[j])
}

/// The trigger searchers, built once per sanitizer.
pub(super) struct Gate {
    words: packed::Searcher,
    foreign: packed::Searcher,
    /// Whether the CPU has AVX2 (x86_64): the byte classes are then found 32 bytes at a time.
    avx2: bool,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gate")
    }
}

impl Gate {
    pub(super) fn new() -> Gate {
        let searcher = |set: &[&str]| {
            let mut c = packed::Config::new();
            c.heuristic_pattern_limits(false);
            c.builder()
                .extend(set.iter().map(|w| w.as_bytes()))
                .build()
                .expect("a literal searcher for the triggers")
        };
        Gate {
            words: searcher(WORDS),
            foreign: searcher(FOREIGN),
            #[cfg(target_arch = "x86_64")]
            avx2: std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            avx2: false,
        }
    }

    /// The regions of `hay` the automaton must search, in order, disjoint: every position where
    /// a rule matches is in one, with a match that ends inside it.
    pub(super) fn regions(&self, hay: &[u8]) -> Vec<(usize, usize)> {
        let mut low = vec![0u8; hay.len()];
        // Triggers, each list in increasing order: runs of token bytes, bytes, words (with
        // whether the word is an element's name), words of other scripts.
        let mut runs: Vec<(usize, bool)> = Vec::new();
        let mut bytes: Vec<(usize, bool)> = Vec::new();
        let mut words: Vec<(usize, bool)> = Vec::new();
        let mut foreign: Vec<(usize, bool)> = Vec::new();
        if line_start(hay, 0) {
            bytes.push((0, false));
        }
        // 64 bytes at a time: the lowercased copy, and bit masks of the bytes to look at and of
        // token bytes (plain loops the compiler turns into SIMD compares).
        let mut block = [0u8; 64];
        let mut lowered = [0u8; 64];
        let mut tail_run = 0usize;
        for (n, (chunk, out)) in hay.chunks(64).zip(low.chunks_mut(64)).enumerate() {
            let base = n * 64;
            let masks = if chunk.len() == 64 {
                classify(
                    chunk.try_into().expect("a full block"),
                    out.try_into().expect("a full block"),
                    self.avx2,
                )
            } else {
                // The last, short block: zero-padded (a zero is no token and no trigger).
                block[..chunk.len()].copy_from_slice(chunk);
                block[chunk.len()..].fill(0);
                let r = classify(&block, &mut lowered, self.avx2);
                out.copy_from_slice(&lowered[..out.len()]);
                r
            };
            let (trig, tok) = (masks.candidates(), masks.tok);
            // Runs of 16 token bytes: one crossing in from the blocks before, and the ones that
            // start inside this block (bit k of `d` is set when bits k..k+16 all are).
            let leading = tok.trailing_ones() as usize;
            if tail_run > 0 && tail_run < 16 && tail_run + leading >= 16 {
                runs.push((base - tail_run, false));
            }
            let a = tok & (tok >> 1);
            let b = a & (a >> 2);
            let c = b & (b >> 4);
            let d = c & (c >> 8);
            let mut starts = d & !((tok << 1) | u64::from(tail_run > 0));
            while starts != 0 {
                runs.push((base + starts.trailing_zeros() as usize, false));
                starts &= starts - 1;
            }
            tail_run = if tok == u64::MAX {
                tail_run + 64
            } else {
                tok.leading_ones() as usize
            };
            let mut trig = trig;
            while trig != 0 {
                let i = base + trig.trailing_zeros() as usize;
                trig &= trig - 1;
                if confirm(hay, i) {
                    // An element named by a weak key (`<dsn>`): its value runs to the next `<`.
                    bytes.push((i, hay[i] == b'<'));
                }
            }
        }
        let mut pos = 0;
        while let Some(m) = self
            .words
            .find_in(&low, aho_corasick::Span::from(pos..low.len()))
        {
            let t = m.start();
            pos = t + 1;
            if m.pattern().as_usize() < KEY_NAMES && !word_goes_on(hay, t) {
                continue;
            }
            words.push((t, after_angle(hay, t)));
        }
        if !hay.is_ascii() {
            let mut pos = 0;
            while let Some(m) = self
                .foreign
                .find_in(&low, aho_corasick::Span::from(pos..low.len()))
            {
                foreign.push((m.start(), false));
                pos = m.start() + 1;
            }
        }
        let lists = [&runs, &bytes, &words, &foreign];
        let mut at = [0usize; 4];
        let mut w = Walker::default();
        let mut regions: Vec<(usize, usize)> = Vec::new();
        // The lists merged in order of position. A window's start never decreases with its
        // trigger's position, so regions grow at the end: a trigger inside the last region
        // only needs its window's end.
        loop {
            let mut best: Option<(usize, bool, usize)> = None;
            for (k, list) in lists.iter().enumerate() {
                if let Some(&(t, markup)) = list.get(at[k])
                    && best.is_none_or(|(b, _, _)| t < b)
                {
                    best = Some((t, markup, k));
                }
            }
            let Some((t, markup, k)) = best else { break };
            at[k] += 1;
            match regions.last_mut() {
                Some(last) if t < last.1 => {
                    let e = w.end(hay, t, markup);
                    last.1 = last.1.max(e);
                }
                _ => {
                    let s = w.start(hay, t);
                    let e = w.end(hay, t, markup);
                    match regions.last_mut() {
                        Some(last) if s <= last.1 => last.1 = last.1.max(e),
                        _ => regions.push((s, e)),
                    }
                }
            }
        }
        regions
    }
}

/// Window bounds, computed for triggers in increasing order; each byte is walked over at most
/// once backwards and once forwards, whatever the triggers.
#[derive(Default)]
struct Walker {
    /// The last trigger, and the boundaries at or before it, nearest first (up to `K_BACK`).
    prev: usize,
    back: [usize; K_BACK],
    back_len: usize,
    /// Boundaries after the last trigger found so far, and where the walk stopped.
    fwd: VecDeque<usize>,
    frontier: usize,
    /// The last newline search (monotone): from, found.
    nl: Option<(usize, Option<usize>)>,
    /// The last `<` search (monotone): from, found.
    lt: Option<(usize, Option<usize>)>,
}

impl Walker {
    /// Drops the boundaries at or before `q` and finds `k` after it (walking on from where the
    /// last walk stopped, never back).
    fn advance(&mut self, hay: &[u8], q: usize, k: usize) {
        while self.fwd.front().is_some_and(|&b| b <= q) {
            self.fwd.pop_front();
        }
        if self.frontier <= q {
            self.frontier = q + 1;
        }
        while self.fwd.len() < k && self.frontier < hay.len() {
            if is_boundary(hay, self.frontier) {
                self.fwd.push_back(self.frontier);
            }
            self.frontier += 1;
        }
    }

    /// Where the window of the trigger at `t` starts (`t` not below the last call's).
    fn start(&mut self, hay: &[u8], t: usize) -> usize {
        // Back: the K_BACK-th boundary at or before t.
        let mut found = [0usize; K_BACK];
        let mut n = 0;
        let mut j = t;
        let floor = self.prev.min(t);
        while j > floor && n < K_BACK {
            if is_boundary(hay, j) {
                found[n] = j;
                n += 1;
            }
            j -= 1;
        }
        if n < K_BACK && j == floor {
            // The boundaries at or before the last trigger were found by its walk.
            for &b in &self.back[..self.back_len] {
                if n == K_BACK {
                    break;
                }
                found[n] = b;
                n += 1;
            }
        }
        let s = if n == K_BACK { found[K_BACK - 1] } else { 0 };
        self.prev = t;
        self.back = found;
        self.back_len = n;
        s
    }

    /// Where the window of the trigger at `t` ends (`t` not below the last call's).
    fn end(&mut self, hay: &[u8], t: usize, markup: bool) -> usize {
        // Forward: past the trigger's word, at least MIN_FWD bytes on (MIN_CALL after a `(`),
        // then K_FWD boundaries more, then the line's end. (A query point below an earlier one
        // finds boundaries further on than it needs: a wider window, never a narrower one.)
        self.advance(hay, t, 1);
        let word_end = self.fwd.front().copied().unwrap_or(hay.len());
        let least = if hay[t] == b'(' {
            t + MIN_CALL
        } else {
            word_end.saturating_add(MIN_FWD)
        };
        self.advance(hay, least.min(hay.len()), K_FWD);
        let from = self.fwd.get(K_FWD - 1).copied().unwrap_or(hay.len());
        let mut e = next(hay, b'\n', from, &mut self.nl).map_or(hay.len(), |n| n + 1);
        if markup {
            // `<password>a value with spaces</password>`, `<secret a="…" b="…">value<`: on to the
            // next `<`.
            let lt = next(hay, b'<', t + 1, &mut self.lt).map_or(hay.len(), |n| n + 2);
            e = e.max(lt);
        }
        e.min(hay.len())
    }
}

/// The first `byte` at or after `from`, for `from` that never decreases between calls: the
/// last search's start and result are kept.
fn next(
    hay: &[u8],
    byte: u8,
    from: usize,
    memo: &mut Option<(usize, Option<usize>)>,
) -> Option<usize> {
    if let Some((last_from, found)) = *memo
        && from >= last_from
    {
        match found {
            None => return None,
            Some(f) if from <= f => return Some(f),
            Some(_) => {}
        }
    }
    let found = memchr::memchr(byte, hay.get(from..).unwrap_or(&[])).map(|i| from + i);
    *memo = Some((from, found));
    found
}

/// Whether what follows a credential word at `t` (the rest of its identifier, then one byte)
/// can go on into a match: anything but a non-ASCII letter right after the identifier
/// (`dépassé` is no password). A fullwidth colon or an opening quote of another language may
/// follow, and so may anything after a credential word of another language written in ASCII
/// (`Passwortä` is the prose of the rule for other languages).
fn word_goes_on(hay: &[u8], t: usize) -> bool {
    let rest = &hay[t..];
    let n = rest
        .iter()
        .take(256)
        .take_while(|b| b.is_ascii_alphanumeric() || b"_.-".contains(b))
        .count();
    let Some(&next) = rest.get(n) else {
        return true;
    };
    if next < 0x80 || n == 256 {
        return true;
    }
    let after = &rest[n..];
    if ["：", "«", "“"]
        .iter()
        .any(|q| after.starts_with(q.as_bytes()))
    {
        return true;
    }
    let mut k = t;
    while k > 0
        && t - k < 256
        && (hay[k - 1].is_ascii_alphanumeric() || b"_.-".contains(&hay[k - 1]))
    {
        k -= 1;
    }
    let ident = hay[k..t + n].to_ascii_lowercase();
    ["passwort", "passe", "zugriffstoken", "toegangstoken"]
        .iter()
        .any(|w| ident.ends_with(w.as_bytes()))
}

/// Whether a key word of markup is an element's name (`<db_password>`): the credential word is
/// in an identifier right after a `<`.
fn after_angle(hay: &[u8], t: usize) -> bool {
    let mut j = t;
    let floor = t.saturating_sub(128);
    while j > floor && (hay[j - 1].is_ascii_alphanumeric() || b"_.-:".contains(&hay[j - 1])) {
        j -= 1;
    }
    // (A walk that hit its limit counts as one: the window is only wider.)
    j > 0 && (j == floor || hay[j - 1] == b'<')
}

/// Whether the byte at `i` (one `classify` flags) is a trigger.
fn confirm(hay: &[u8], i: usize) -> bool {
    match hay[i] {
        b'=' => true,
        b'%' => hay[i..].len() >= 9 && hay[i..i + 9].eq_ignore_ascii_case(b"%3a%2f%2f"),
        b':' => colon(hay, i),
        b'.' => {
            i > 0 && hay[i - 1].is_ascii_digit() && hay.get(i + 1).is_some_and(u8::is_ascii_digit)
        }
        b'-' | b'_' => dash(hay, i),
        b'/' | b'+' => slash(hay, i),
        b'(' => {
            let rest = &hay[i + 1..];
            let k = rest.iter().take(64).take_while(|b| ws(**b)).count();
            k == 64 || matches!(rest.get(k), Some(b'"' | b'\''))
        }
        b'<' => {
            let rest = &hay[i + 1..];
            let n = rest
                .iter()
                .take(128)
                .take_while(|b| b.is_ascii_alphanumeric() || b"_.-".contains(b))
                .count();
            n == 128 || has_weak(&rest[..n])
        }
        b'\n' => line_start(hay, i + 1),
        _ => false,
    }
}

fn has_weak(ident: &[u8]) -> bool {
    (0..ident.len()).any(|k| {
        matches!(ident[k] | 0x20, b's' | b'o' | b'd' | b'c')
            && WEAK.iter().any(|w| {
                ident.len() - k >= w.len() && ident[k..k + w.len()].eq_ignore_ascii_case(w)
            })
    })
}

/// A line that starts a stack frame, a traceback or a Rust backtrace.
fn line_start(hay: &[u8], j: usize) -> bool {
    let k = j + hay[j.min(hay.len())..]
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    let rest = &hay[k.min(hay.len())..];
    let indented = k > j;
    (indented && (rest.starts_with(b"at ") || rest.first().is_some_and(u8::is_ascii_digit)))
        || rest.starts_with(b"Traceback (")
        || rest.starts_with(b"File \"")
        || (!indented && rest.starts_with(b"stack backtrace:"))
}

/// Bytes of a `user:password` password (`[^\s:@/"'`<>()\[\]{},;|\\]`).
static PASSWORD: [bool; 256] = {
    let mut t = [true; 256];
    let not = b" \t\n\x0b\x0c\r:@/\"'`<>()[]{},;|\\";
    let mut k = 0;
    while k < not.len() {
        t[not[k] as usize] = false;
        k += 1;
    }
    t
};

/// After a `:`: a URL's `//`, `$`/`{SHA}` (htpasswd), `*` or a port and another `:` (.pgpass),
/// `AA` (a bot token), ten password bytes (`user:password`), a vendor header's long value, or
/// after `/user` or a weak key name.
fn colon(hay: &[u8], i: usize) -> bool {
    let rest = &hay[i + 1..];
    if rest.starts_with(b"//") || rest.starts_with(b"AA") {
        return true;
    }
    if matches!(rest.first(), Some(b'$' | b'{' | b'*')) {
        return true;
    }
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits > 0 && rest.get(digits) == Some(&b':') {
        return true;
    }
    if rest.len() >= 10 && rest[..10].iter().all(|b| PASSWORD[*b as usize]) {
        return true;
    }
    if i >= 5 && hay[i - 5..i].eq_ignore_ascii_case(b"/user") {
        return true;
    }
    // The name before it (after whitespace and quotes): a weak key name, or a header name with
    // a `-` before a vendor header's long value.
    let mut k = i;
    let floor = i.saturating_sub(256);
    while k > floor && (ws(hay[k - 1]) || matches!(hay[k - 1], b'"' | b'\'' | b'\\')) {
        k -= 1;
    }
    let end = k;
    while k > floor && (hay[k - 1].is_ascii_alphanumeric() || b"_.-".contains(&hay[k - 1])) {
        k -= 1;
    }
    if k == floor && floor > 0 {
        return true;
    }
    let name = &hay[k..end];
    if has_weak(name) {
        return true;
    }
    if !name.contains(&b'-') {
        return false;
    }
    let mut j = rest
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count();
    if matches!(rest.get(j), Some(b'"' | b'\'')) {
        j += 1;
    }
    let vendor = |b: &u8| b.is_ascii_alphanumeric() || b"+/_=.~-".contains(b);
    rest.len() >= j + 20 && rest[j..j + 20].iter().all(vendor)
}

/// `-`/`_`: PEM and other armor (`----`), a short flag after a space (`-p`, `--user`),
/// `Private-Lines:`, or a key shape (`sk-…`, `tok_…`) with eight token bytes after it.
fn dash(hay: &[u8], i: usize) -> bool {
    if hay[i] == b'-' {
        if hay[i..].starts_with(b"----") || hay[i + 1..].starts_with(b"Lines:") {
            return true;
        }
        let after_space = i == 0 || ws(hay[i - 1]);
        if after_space
            && matches!(
                hay.get(i + 1),
                Some(b'-' | b'p' | b'P' | b'a' | b'w' | b'k' | b'N' | b'u' | b'U')
            )
        {
            return true;
        }
    }
    let mut k = i;
    while k > 0 && i - k < 8 && hay[k - 1].is_ascii_alphanumeric() {
        k -= 1;
    }
    let word = &hay[k..i];
    let shape = [
        &b"sk"[..],
        b"pk",
        b"rk",
        b"api",
        b"key",
        b"token",
        b"secret",
        b"tok",
    ]
    .iter()
    .any(|w| word.eq_ignore_ascii_case(w));
    shape && hay[i + 1..].iter().take(8).filter(|b| is_tok(**b)).count() == 8
}

/// `/` or `+`: `user / password`, or a base64 run that an `A` starts at a word boundary with
/// fifteen more run bytes after it (SASL PLAIN).
fn slash(hay: &[u8], i: usize) -> bool {
    if hay[i] == b'/' && (i == 0 || ws(hay[i - 1])) && hay.get(i + 1).is_some_and(|b| ws(*b)) {
        return true;
    }
    // The `A` is within 16 bytes before or right after (a quick SIMD look first).
    let near = &hay[i.saturating_sub(16)..(i + 2).min(hay.len())];
    if memchr::memchr(b'A', near).is_none() {
        return false;
    }
    let b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
    let mut s = i;
    while s > 0 && i - s < 256 && b64(hay[s - 1]) {
        s -= 1;
    }
    let mut e = i + 1;
    while e < hay.len() && e - i < 256 && b64(hay[e]) {
        e += 1;
    }
    if i - s == 256 || e - i == 256 {
        return true;
    }
    (s..e).any(|j| hay[j] == b'A' && (j == s || matches!(hay[j - 1], b'/' | b'+')) && e - j >= 16)
}
