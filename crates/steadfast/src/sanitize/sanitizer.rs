//! The scanner: every rule in one multi-pattern regex, one pass over the bytes.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, meta};

use super::gate::Gate;
use super::generic::{GENERIC_RULES, Generic};
use super::places::{PLACES_EARLY, PLACES_LATE};
use super::rule::Rule;

/// How a match is judged before it is replaced.
enum Check {
    Always,
    /// A rule's check, on the redacted part.
    Value(fn(&str) -> bool),
    /// A generic rule's check, on up to [`BEFORE`] bytes before the match, the context (`KEEP`)
    /// and the redacted part.
    Context(fn(&str, &str, &str) -> bool),
}

/// What the scan needs of a rule once its pattern has won a span.
struct Compiled {
    name: Cow<'static, str>,
    replacement: Cow<'static, str>,
    check: Check,
    /// The rule alone, when its pattern has a `KEEP` or `TAIL` group: run again, anchored, on
    /// the span the scan found, to find them. (The scan's regex could report the groups, but
    /// resolving them in an automaton of every rule costs far more than in one of one rule.)
    /// Compiled the first time the rule wins a span.
    groups: Option<Lazy>,
    /// A built-in rule that only claims its span (its check always fails).
    claim: bool,
}

/// A compiled set of rules.
///
/// ```
/// let s = steadfast::Sanitizer::default_rules();
/// assert_eq!(s.sanitize("call with Bearer abc123def456ghi789"), "call with Bearer [redacted]");
/// ```
pub struct Sanitizer {
    /// Every rule as one pattern of a multi-pattern regex: a match names the rule that won.
    /// With the gate, compiled the first time a text has a trigger (clean text never needs it).
    regex: Lazy,
    rules: Vec<Compiled>,
    /// Whether the generic layer's rules are among `rules` (after the others).
    generic: bool,
    /// The index in `rules` of the generic layer's first rule (`rules.len()` without it).
    first_generic: usize,
    /// The rules before the generic layer alone, and the generic layer alone (only with the
    /// layer): a span that one rule's check turned down is looked at again by the others, and
    /// a generic value is checked for a rule's match inside it.
    /// Both compiled on first use.
    rules_regex: Option<Lazy>,
    generic_regex: Option<Lazy>,
    /// The triggers in front of `regex` (`gate.rs`), when the rules are exactly the built-in
    /// ones (with or without the generic layer): the triggers are written for them.
    gate: Option<Gate>,
    /// Whether a text whose regions cover most of it is searched whole (see `pass`); off only
    /// in tests, so that they exercise the regions on any text.
    dense_switch: bool,
}

/// A regex of some of the rules, compiled the first time it is searched: compiling every rule
/// costs 0.1 s in a release build and seconds in a debug one, paid by whoever sanitizes first.
struct Lazy {
    patterns: Vec<Cow<'static, str>>,
    /// Whether searches report capture groups (see [`builder`]).
    groups: bool,
    regex: OnceLock<meta::Regex>,
}

impl Lazy {
    fn new(patterns: Vec<Cow<'static, str>>, groups: bool) -> Lazy {
        Lazy {
            patterns,
            groups,
            regex: OnceLock::new(),
        }
    }

    /// Compiled now (an invalid pattern is an error here, not at the first search).
    fn eager(patterns: Vec<Cow<'static, str>>) -> Result<Lazy, Box<meta::BuildError>> {
        let lazy = Lazy::new(patterns, false);
        let regex = builder(false).build_many(&lazy.patterns)?;
        let _ = lazy.regex.set(regex);
        Ok(lazy)
    }

    fn get(&self) -> &meta::Regex {
        self.regex.get_or_init(|| {
            builder(self.groups)
                .build_many(&self.patterns)
                .expect("patterns that compiled together (or built-in ones, tested) compile")
        })
    }

    fn is_compiled(&self) -> bool {
        self.regex.get().is_some()
    }
}

/// A match of one rule of the table.
struct Match {
    start: usize,
    end: usize,
    rule: usize,
}

/// A match as its rule judged it: what is kept around the replacement, and whether it passes.
struct Judged {
    start: usize,
    keep: usize,
    tail: usize,
    end: usize,
    passes: bool,
}

/// Which of the sanitizer's regexes to search.
#[derive(Clone, Copy)]
enum Which {
    All,
    Rules,
    Generic,
}

impl fmt::Debug for Sanitizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sanitizer")
            .field(
                "rules",
                &self
                    .rules
                    .iter()
                    .map(|r| r.name.as_ref())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Room for the lazy DFA: with every rule in one automaton, the default 2 MiB cache is cleared
/// often on match-dense text, and a cache cleared too often makes the engine give up on the DFA.
const DFA_CACHE: usize = 16 << 20;
const SIZE_LIMIT: usize = 64 << 20;
/// Extra scans of a text that had a replacement, until one changes nothing. Each is linear, so
/// the whole stays linear.
const MAX_PASSES: usize = 3;
/// How much text before a generic rule's match its check sees (`cache key …`): bounded, so that
/// checking stays linear.
const BEFORE: usize = 32;
/// How far past a generic match's value a rule's match may end and still cut the value short
/// (a PEM header is under 64 bytes).
const RULE_INSIDE_SLACK: usize = 256;
/// How far past a rejected span the generic layer's second look at it may reach: a value up to
/// this long after a credential word is found whole.
const SECOND_LOOK_SLACK: usize = 512;

impl Sanitizer {
    /// The built-in rules followed by `extra` (which lose to the built-in ones at the same
    /// position), then the generic layer. [`Sanitizer::builder`] can leave the layer out.
    ///
    /// See [`Rule`] for an example.
    pub fn with_rules(extra: impl IntoIterator<Item = Rule>) -> Result<Sanitizer, regex::Error> {
        Self::builder().rules(extra).build()
    }

    /// A sanitizer of the built-in rules, extra rules, and (unless turned off) the generic
    /// layer.
    ///
    /// ```
    /// let s = steadfast::Sanitizer::builder().generic_layer(false).build().unwrap();
    /// // Only the generic layer knows that a random value after `-p` is a MySQL password.
    /// assert_eq!(s.sanitize("mysql -u app -pq8Zx7R2pLk5T"), "mysql -u app -pq8Zx7R2pLk5T");
    /// let s = steadfast::Sanitizer::builder().build().unwrap();
    /// assert_eq!(s.sanitize("mysql -u app -pq8Zx7R2pLk5T"), "mysql -u app -p[redacted]");
    /// ```
    pub fn builder() -> SanitizerBuilder {
        SanitizerBuilder {
            extra: Vec::new(),
            generic: true,
            prefilter: true,
            dense_switch: true,
        }
    }

    /// Whether this sanitizer runs the generic layer.
    ///
    /// ```
    /// assert!(steadfast::Sanitizer::with_rules([]).unwrap().has_generic_layer());
    /// ```
    pub fn has_generic_layer(&self) -> bool {
        self.generic
    }

    /// Exactly these rules, in this order (without the generic layer).
    ///
    /// An invalid pattern is an error that names its rule.
    ///
    /// ```
    /// let s = steadfast::Sanitizer::compile([steadfast::Rule::new("digits", r"\d+", "#")]).unwrap();
    /// assert_eq!(s.sanitize("order 66"), "order #");
    /// let bad = steadfast::Sanitizer::compile([steadfast::Rule::new("broken", "(x", "#")]);
    /// assert!(bad.unwrap_err().to_string().contains("broken"));
    /// ```
    pub fn compile(rules: impl IntoIterator<Item = Rule>) -> Result<Sanitizer, regex::Error> {
        Self::compile_layers(rules.into_iter().collect(), &[], false)
    }

    /// `lazy`: compile each regex the first time it is searched (only for rules known to
    /// compile: an invalid custom rule must be an error here).
    fn compile_layers(
        rules: Vec<Rule>,
        generic: &[&'static Generic],
        lazy: bool,
    ) -> Result<Sanitizer, regex::Error> {
        let first_generic = rules.len();
        let rules: Vec<Rule> = rules
            .into_iter()
            .chain(
                generic
                    .iter()
                    .map(|g| Rule::builtin(g.name, g.pattern, "[redacted]", None)),
            )
            .collect();
        let patterns: Vec<Cow<'static, str>> = rules.iter().map(|r| r.pattern.clone()).collect();
        let regex = if lazy {
            Lazy::new(patterns.clone(), false)
        } else {
            Lazy::eager(patterns.clone()).map_err(|e| {
                // Say which rule is at fault: build them one by one (only on this error path).
                let culprit = rules
                    .iter()
                    .find_map(|r| builder(true).build(&r.pattern).err().map(|e| (r, e)));
                match culprit {
                    Some((rule, e)) => {
                        let cause = std::error::Error::source(&e)
                            .map_or(String::new(), |c| format!(": {c}"));
                        regex::Error::Syntax(format!("rule `{}`: {e}{cause}", rule.name))
                    }
                    None => match e.size_limit() {
                        Some(limit) => regex::Error::CompiledTooBig(limit),
                        None => regex::Error::Syntax(e.to_string()),
                    },
                }
            })?
        };
        let (rules_regex, generic_regex) = if generic.is_empty() {
            (None, None)
        } else {
            let (before, after) = patterns.split_at(first_generic);
            (
                Some(Lazy::new(before.to_vec(), false)),
                Some(Lazy::new(after.to_vec(), false)),
            )
        };
        let compiled = rules
            .into_iter()
            .enumerate()
            .map(|(i, rule)| {
                // Patterns with a `KEEP` or `TAIL` group (`(?P<KEEP>…)`, `(?<KEEP>…)`).
                let groups = ["KEEP>", "TAIL>"]
                    .iter()
                    .any(|g| rule.pattern.contains(g))
                    .then(|| Lazy::new(vec![rule.pattern.clone()], true));
                let check = match (i.checked_sub(first_generic), rule.check) {
                    (Some(g), _) => Check::Context(generic[g].check),
                    (None, Some(check)) => Check::Value(check),
                    (None, None) => Check::Always,
                };
                let claim = super::rules::is_claim(&rule);
                Compiled {
                    claim,
                    name: rule.name,
                    replacement: rule.replacement,
                    check,
                    groups,
                }
            })
            .collect();
        Ok(Sanitizer {
            regex,
            rules: compiled,
            generic: !generic.is_empty(),
            first_generic,
            rules_regex,
            generic_regex,
            gate: None,
            dense_switch: true,
        })
    }

    /// Redacts `text`. Returns it unchanged (borrowed) when nothing matched.
    ///
    /// Time is linear in the length of `text`, whatever it holds.
    ///
    /// See [`Sanitizer`] for an example.
    pub fn sanitize<'t>(&self, text: &'t str) -> Cow<'t, str> {
        self.sanitize_counting(text, &mut 0)
    }

    /// How much scanning [`Sanitizer::sanitize`] does on `text`: the bytes each search of the
    /// scan covered up to the end of its match (or of the text), plus the bytes handed to the
    /// checks. A count of work that does not depend on the machine, for tests of linearity.
    ///
    /// ```
    /// let s = steadfast::Sanitizer::default_rules();
    /// let short = s.scan_work(&"password=/ ".repeat(1_000));
    /// let long = s.scan_work(&"password=/ ".repeat(4_000));
    /// assert!(long <= 5 * short);
    /// ```
    #[doc(hidden)]
    pub fn scan_work(&self, text: &str) -> usize {
        let mut work = 0;
        let _ = self.sanitize_counting(text, &mut work);
        work
    }

    fn sanitize_counting<'t>(&self, text: &'t str, work: &mut usize) -> Cow<'t, str> {
        // Whether the gate runs: once a text turns out dense with triggers, its later scans go
        // without it (the gate would only add its own pass).
        let mut gated = self.gate.is_some();
        let Some((mut out, mut again)) = self.pass(text, work, &mut gated) else {
            return Cow::Borrowed(text);
        };
        // A replacement changes what the rules around it see: a letter next to it gains a word
        // boundary (`…10.0.0.1Authorization: x` → `[internal-host]Authorization: x`), text a
        // match kept in front of its value is seen without that value, a quoted value now holds
        // a placeholder. Scan the result again until nothing changes (a bounded number of
        // times), so that sanitizing sanitized text changes nothing and what a second look
        // would catch is caught now. Clean text costs one scan; text with a secret one more.
        // (A rule that matches empty text inserts its replacement again on every scan: those
        // replacements do not ask for another.)
        for _ in 0..MAX_PASSES {
            if !again {
                break;
            }
            match self.pass(&out, work, &mut gated) {
                Some((next, next_again)) => (out, again) = (next, next_again),
                None => break,
            }
        }
        Cow::Owned(out)
    }

    /// Where a match's rule keeps text and whether its check lets it be replaced.
    fn judge(&self, text: &str, m: &Match, work: &mut usize) -> Judged {
        let hay = text.as_bytes();
        // Patterns run on bytes; a span never splits a character of the text.
        let start = floor_char(text, m.start);
        let end = ceil_char(text, m.end);
        let rule = &self.rules[m.rule];
        let (keep, tail) = match rule.groups.as_ref().map(Lazy::get) {
            Some(alone) => {
                let mut caps = alone.create_captures();
                alone.search_captures(
                    &Input::new(hay).span(m.start..m.end).anchored(Anchored::Yes),
                    &mut caps,
                );
                *work += m.end - m.start;
                if caps.is_match() {
                    (
                        caps.get_group_by_name("KEEP").map_or(start, |s| s.end),
                        caps.get_group_by_name("TAIL").map_or(end, |s| s.start),
                    )
                } else {
                    (start, end)
                }
            }
            None => (start, end),
        };
        // A group boundary inside a character (possible in a custom byte-level rule):
        // redact the whole span rather than guess.
        let (keep, tail) =
            if keep <= tail && text.is_char_boundary(keep) && text.is_char_boundary(tail) {
                (keep, tail)
            } else {
                (start, end)
            };
        let passes = match rule.check {
            Check::Always => true,
            Check::Value(check) => {
                *work += tail - keep;
                check(&text[keep..tail])
            }
            Check::Context(check) => {
                let from = floor_char(text, start.saturating_sub(BEFORE));
                *work += tail - from;
                check(&text[from..start], &text[start..keep], &text[keep..tail])
            }
        };
        Judged {
            start,
            keep,
            tail,
            end,
            passes,
        }
    }

    /// The first match at or after `at` of the regex `which`, as a match of the whole table.
    fn find(
        &self,
        which: Which,
        hay: &[u8],
        span: (usize, usize),
        anchored: bool,
        work: &mut usize,
    ) -> Option<Match> {
        let (regex, offset) = match which {
            Which::All => (self.regex.get(), 0),
            Which::Rules => (self.rules_regex.as_ref()?.get(), 0),
            Which::Generic => (self.generic_regex.as_ref()?.get(), self.first_generic),
        };
        let mut input = Input::new(hay).span(span.0..span.1);
        if anchored {
            input = input.anchored(Anchored::Yes);
        }
        let m = regex.search(&input);
        *work += m.map_or(span.1, |m| m.end()) - span.0;
        m.map(|m| Match {
            start: m.start(),
            end: m.end(),
            rule: offset + m.pattern().as_usize(),
        })
    }

    /// The first match at or after `at`, searching only the gate's regions (from `*next` on).
    /// A match found in a region is searched again anchored at its start over the whole text:
    /// the region may end before the match would (see `gate.rs` for why this is exact).
    fn find_gated(
        &self,
        hay: &[u8],
        at: usize,
        regions: &[(usize, usize)],
        next: &mut usize,
        work: &mut usize,
    ) -> Option<Match> {
        while let Some(&(start, end)) = regions.get(*next) {
            if end <= at {
                *next += 1;
                continue;
            }
            let from = start.max(at);
            if let Some(m) = self.find(Which::All, hay, (from, end), false, work) {
                if end == hay.len() {
                    // The region runs to the end of the text: nothing was cut.
                    return Some(m);
                }
                return self
                    .find(Which::All, hay, (m.start, hay.len()), true, work)
                    .or(Some(m));
            }
            *next += 1;
        }
        None
    }

    /// One scan: the redacted text (`None` when nothing was replaced), and whether a
    /// non-empty span was replaced (the result is then scanned again).
    fn pass(&self, text: &str, work: &mut usize, gated: &mut bool) -> Option<(String, bool)> {
        let hay = text.as_bytes();
        let mut again = false;
        let mut out: Option<String> = None;
        let mut copied = 0;
        let mut at = 0;
        let mut rescan_budget = text.len() + 4096;
        // A match found by a second look at a rejected span's start.
        let mut pending: Option<Match> = None;
        // With the gate, only its regions are searched; without a region there is no match.
        let mut regions = match &self.gate {
            Some(gate) if *gated => {
                *work += hay.len();
                Some(gate.regions(hay))
            }
            _ => None,
        };
        if regions.as_ref().is_some_and(Vec::is_empty) {
            return None;
        }
        // Regions over most of the text: searching it all is the same result, without a search
        // again at each match (and the next scans skip the gate).
        if let Some(r) = &regions
            && self.dense_switch
            && 2 * r.iter().map(|(s, e)| e - s).sum::<usize>() > hay.len()
        {
            regions = None;
            *gated = false;
        }
        let mut region = 0;
        while at <= hay.len() {
            let m = match pending.take() {
                Some(m) => m,
                None => {
                    let found = match &regions {
                        Some(regions) => self.find_gated(hay, at, regions, &mut region, work),
                        None => self.find(Which::All, hay, (at, hay.len()), false, work),
                    };
                    match found {
                        Some(m) => m,
                        None => break,
                    }
                }
            };
            let Judged {
                start,
                keep,
                mut tail,
                mut end,
                passes,
            } = self.judge(text, &m, work);
            let rule = &self.rules[m.rule];
            let generic = m.rule >= self.first_generic;
            if passes {
                if generic {
                    // A generic value may run into a rule's match (`A:x=-----BEGIN PRIVATE
                    // KEY-----…` as a user and password): redact up to it and let the rule
                    // take the rest, so the key block does not survive behind the replacement.
                    if let Some(cut) = self.rule_inside(text, keep, end, work) {
                        (tail, end) = (cut, cut);
                    }
                }
                let buf = out.get_or_insert_with(|| String::with_capacity(text.len()));
                buf.push_str(&text[copied..start]);
                buf.push_str(&text[start..keep]);
                buf.push_str(&rule.replacement);
                buf.push_str(&text[tail..end]);
                copied = end;
                again |= end > start;
                at = if end == start {
                    ceil_char(text, end + 1)
                } else {
                    end
                };
                continue;
            }
            if end == start {
                // An empty match: move on by one character.
                at = ceil_char(text, end + 1);
                continue;
            }
            if rule.claim {
                // A claim (`version 10.2.3.4`, `partition_key=…`) is there so that no other
                // rule redacts inside it.
                at = end;
                continue;
            }
            // A rule's check turned the span down: the span must stay visible to every other
            // rule. The generic layer's rules lose to the built-in ones at the same position,
            // so ask them alone whether one matches here (`token_for_upload: <random>` is no
            // `token_…` key shape, but it is a credential word and a value).
            if !generic && end - start <= rescan_budget {
                rescan_budget -= end - start;
                let until = ceil_char(text, (end + SECOND_LOOK_SLACK).min(hay.len()));
                if let Some(g) = self.find(Which::Generic, hay, (start, until), true, work)
                    && g.end > g.start
                {
                    pending = Some(g);
                    continue;
                }
            }
            at = if end - start <= rescan_budget {
                // The span may hold a match that starts later (`AKIA…:…` fails as a pair; a
                // key after the `KEEP` part, `key: -----BEGIN PRIVATE KEY-----…`; a key that is
                // the element name of markup turned down, `<AGE-SECRET-KEY-1…>…<`): look
                // again after the word it starts with (a rule starts at a word boundary or at
                // a non-word character), within a budget that keeps the whole scan linear.
                rescan_budget -= end - start;
                let word = hay[start..end]
                    .iter()
                    .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
                    .map_or(end, |i| start + i);
                ceil_char(text, word.max(start + 1))
            } else {
                end
            };
        }
        let mut buf = out?;
        buf.push_str(&text[copied..]);
        Some((buf, again))
    }

    /// Where a built-in (or extra) rule's match that passes its check starts inside the value
    /// `keep..end` of a generic match and runs on past it, if one does. The look is bounded to the value and a
    /// little after it (room for a PEM header), so it stays linear.
    fn rule_inside(&self, text: &str, keep: usize, end: usize, work: &mut usize) -> Option<usize> {
        let hay = text.as_bytes();
        let from = ceil_char(text, keep + 1);
        if from >= end {
            return None;
        }
        let until = ceil_char(text, (end + RULE_INSIDE_SLACK).min(hay.len()));
        let m = self.find(Which::Rules, hay, (from, until), false, work)?;
        // A match inside the value is redacted with it; one that runs on past it is not.
        if m.start >= end || m.end <= end {
            return None;
        }
        let judged = self.judge(text, &m, work);
        (judged.passes && judged.start > keep).then_some(judged.start)
    }

    /// Whether the automaton of every rule has been compiled yet (it is, with the trigger gate,
    /// only once a text has a trigger).
    ///
    /// ```
    /// let s = steadfast::Sanitizer::builder().build().unwrap();
    /// assert_eq!(s.sanitize("file not found: report.pdf"), "file not found: report.pdf");
    /// assert!(!s.is_compiled());
    /// assert_eq!(s.sanitize("password=hunter2"), "password=[redacted]");
    /// assert!(s.is_compiled());
    /// ```
    #[doc(hidden)]
    pub fn is_compiled(&self) -> bool {
        self.regex.is_compiled()
    }

    /// Compiles every regex of this sanitizer now, rather than the first time a text needs it:
    /// for a program that would rather pay the cost at start (0.1 s in a release build,
    /// seconds in a debug one) than on its first secret, on a thread of its choice.
    ///
    /// ```
    /// let s = steadfast::Sanitizer::default_rules();
    /// s.compile_all();
    /// assert!(s.is_compiled());
    /// ```
    pub fn compile_all(&self) {
        self.regex.get();
        for lazy in [&self.rules_regex, &self.generic_regex]
            .into_iter()
            .flatten()
        {
            lazy.get();
        }
        for rule in &self.rules {
            if let Some(groups) = &rule.groups {
                groups.get();
            }
        }
    }

    /// The names of the rules, in priority order.
    ///
    /// ```
    /// assert!(steadfast::Sanitizer::default_rules().rule_names().any(|n| n == "jwt"));
    /// ```
    pub fn rule_names(&self) -> impl Iterator<Item = &str> {
        self.rules.iter().map(|r| r.name.as_ref())
    }
}

/// Builds a [`Sanitizer`]: see [`Sanitizer::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct SanitizerBuilder {
    extra: Vec<Rule>,
    generic: bool,
    prefilter: bool,
    dense_switch: bool,
}

impl SanitizerBuilder {
    /// Adds rules after the built-in ones (they lose to them at the same position).
    ///
    /// ```
    /// let id = steadfast::Rule::new("employee-id", r"(?-u)\bEMP-\d{6}\b", "[employee]");
    /// let s = steadfast::Sanitizer::builder().rules([id]).build().unwrap();
    /// assert_eq!(s.sanitize("EMP-123456"), "[employee]");
    /// ```
    pub fn rules(mut self, extra: impl IntoIterator<Item = Rule>) -> Self {
        self.extra.extend(extra);
        self
    }

    /// Whether to run the generic layer (default: yes). See [`Sanitizer::builder`].
    pub fn generic_layer(mut self, enabled: bool) -> Self {
        self.generic = enabled;
        self
    }

    /// Whether to run the trigger gate in front of the scan (default: yes; it only applies to
    /// the built-in rules, with or without the generic layer). The result is the same either
    /// way: for tests that compare the two, and benchmarks.
    #[doc(hidden)]
    pub fn prefilter(mut self, enabled: bool) -> Self {
        self.prefilter = enabled;
        self
    }

    /// Whether a text whose trigger regions cover most of it is searched whole rather than
    /// region by region (default: yes; same result). For tests of the regions.
    #[doc(hidden)]
    pub fn dense_switch(mut self, enabled: bool) -> Self {
        self.dense_switch = enabled;
        self
    }

    /// Compiles the rules. An invalid extra rule is an error that names it.
    ///
    /// See [`Sanitizer::builder`] for an example.
    pub fn build(self) -> Result<Sanitizer, regex::Error> {
        let gated = self.prefilter && self.extra.is_empty();
        let rules = super::BUILTIN_RULES
            .iter()
            .cloned()
            .chain(self.extra)
            .collect();
        let generic: Vec<&'static Generic> = if self.generic {
            PLACES_EARLY
                .iter()
                .chain(GENERIC_RULES)
                .chain(PLACES_LATE)
                .collect()
        } else {
            Vec::new()
        };
        let mut sanitizer = Sanitizer::compile_layers(rules, &generic, gated)?;
        if gated {
            sanitizer.gate = Some(Gate::new());
        }
        sanitizer.dense_switch = self.dense_switch;
        Ok(sanitizer)
    }
}

/// `groups`: whether searches report capture groups (a rule alone, for its `KEEP` and `TAIL`).
/// A regex of many rules only reports where a match is and which rule it is: without the
/// groups it compiles in about half the time.
fn builder(groups: bool) -> meta::Builder {
    let mut b = meta::Builder::new();
    // Built-in patterns use byte classes such as `(?-u:[^\s])`, which may match part of a
    // character; the scan widens every span to whole characters.
    b.syntax(syntax::Config::new().utf8(false)).configure(
        meta::Config::new()
            .nfa_size_limit(Some(SIZE_LIMIT))
            .dfa_size_limit(Some(SIZE_LIMIT))
            .hybrid_cache_capacity(DFA_CACHE)
            .which_captures(if groups {
                WhichCaptures::All
            } else {
                WhichCaptures::Implicit
            }),
    );
    b
}

fn floor_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, mut i: usize) -> usize {
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}
