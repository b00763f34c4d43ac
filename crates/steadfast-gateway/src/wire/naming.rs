//! The names clients see when several upstreams share one endpoint.
//!
//! A tool `create_issue` of upstream `github` is listed as `github_create_issue` (the separator
//! is configurable). Popular clients refuse tool names outside `^[A-Za-z0-9_-]{1,64}$`, so a
//! name is made to fit: other characters become `_`, and a name that would be too long keeps
//! its start and gets a short hash of the whole original, so it stays unique and stable across
//! restarts. Prefixes are checked once, at start: no upstream's prefix and separator may begin
//! another's, or `a_b_x` could belong to `a` (tool `b_x`) or to `a_b` (tool `x`).

/// The longest name popular clients accept.
pub(crate) const MAX_NAME: usize = 64;

/// The longest upstream prefix, so a tool name keeps room for the tool's own name.
pub(crate) const MAX_PREFIX: usize = 32;

/// The default separator between an upstream's name and its tool's.
pub(crate) const DEFAULT_SEPARATOR: &str = "_";

/// Whether `c` may appear in a name clients see.
pub(crate) fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// An upstream's name as a prefix: characters clients refuse become `-`.
///
pub(crate) fn prefix(upstream: &str) -> String {
    upstream
        .chars()
        .map(|c| if allowed(c) { c } else { '-' })
        .collect()
}

/// Checks a separator: one to three allowed characters.
pub(crate) fn check_separator(sep: &str) -> Result<(), String> {
    if sep.is_empty() || sep.chars().count() > 3 || !sep.chars().all(allowed) {
        return Err(format!(
            "must be 1 to 3 characters from [A-Za-z0-9_-] (got {sep:?})"
        ));
    }
    Ok(())
}

/// Checks one upstream name: non-empty, and short enough to leave room for tool names.
pub(crate) fn check_upstream_name(name: &str) -> Result<(), String> {
    let p = prefix(name);
    if p.is_empty() {
        return Err("an upstream's name must not be empty".to_owned());
    }
    if p.len() > MAX_PREFIX {
        return Err(format!(
            "an upstream's name is the prefix of its tools' names and must be at most \
             {MAX_PREFIX} characters (got {})",
            p.len()
        ));
    }
    Ok(())
}

/// The first pair of upstream names whose prefixes make tool names ambiguous, with why.
///
pub(crate) fn ambiguous<S: AsRef<str>>(names: &[S], sep: &str) -> Option<(String, String, String)> {
    for (i, a) in names.iter().enumerate() {
        for b in names.iter().skip(i + 1) {
            let (a, b) = (a.as_ref(), b.as_ref());
            let (pa, pb) = (format!("{}{sep}", prefix(a)), format!("{}{sep}", prefix(b)));
            if pa.starts_with(&pb) || pb.starts_with(&pa) {
                let (short, long) = if pa.len() <= pb.len() { (a, b) } else { (b, a) };
                let example = format!("{}{}x", prefix(long), sep);
                return Some((
                    short.to_owned(),
                    long.to_owned(),
                    format!(
                        "upstreams `{short}` and `{long}` collide: with the separator {sep:?}, \
                         a tool named `{example}` could belong to either. Rename one, or set \
                         [proxy] separator (for example \"__\")"
                    ),
                ));
            }
        }
    }
    None
}

/// The name clients see for `original` of the upstream with prefix `prefix`.
///
pub(crate) fn exposed(prefix: &str, sep: &str, original: &str) -> String {
    let mut name = String::with_capacity(prefix.len() + sep.len() + original.len());
    name.push_str(prefix);
    name.push_str(sep);
    name.extend(original.chars().map(|c| if allowed(c) { c } else { '_' }));
    if name.len() <= MAX_NAME {
        return name;
    }
    // Room for "-" and 8 hex digits; every character is ASCII by now.
    let hash = fnv1a(original.as_bytes());
    name.truncate(MAX_NAME - 9);
    name.push('-');
    name.push_str(&format!("{:08x}", hash as u32));
    name
}

/// The name for `original` when its plain form ([`exposed`]) belongs to another of the
/// upstream's names: the plain form's start plus a hash of the original, always.
///
pub(crate) fn hashed(prefix: &str, sep: &str, original: &str) -> String {
    let mut name = exposed(prefix, sep, original);
    if let Some(dash) = name.len().checked_sub(9).filter(|_| name.len() == MAX_NAME) {
        // Already the long form: its hash is the original's.
        name.truncate(dash);
    }
    name.truncate(MAX_NAME - 9);
    name.push('-');
    name.push_str(&format!("{:08x}", fnv1a(original.as_bytes()) as u32));
    name
}

/// Whether `original` appears to clients exactly as written after the prefix.
pub(crate) fn is_clean(original: &str) -> bool {
    original.chars().all(allowed)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_rules_documented_on_each_function_hold() {
        assert_eq!(prefix("brave.search"), "brave-search");
        assert!(ambiguous(&["a", "b"], "_").is_none());
        assert!(ambiguous(&["a", "a_b"], "_").is_some());
        assert!(ambiguous(&["a", "a_b"], "__").is_none());
        assert_eq!(
            exposed("github", "_", "create_issue"),
            "github_create_issue"
        );
        assert_eq!(exposed("fs", "_", "files.read"), "fs_files_read");
        let long = exposed("fs", "_", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert!(long.starts_with("fs_xxx"));
        let n = hashed("c", "_", "get.file");
        assert!(n.starts_with("c_get_file-") && n.len() == "c_get_file-".len() + 8);
    }

    use super::*;

    #[test]
    fn names_fit_the_pattern_clients_enforce() {
        for original in [
            "a b",
            "ünïcode",
            "x".repeat(200).as_str(),
            "dots.and/slashes",
        ] {
            let n = exposed("up", "_", original);
            assert!(n.len() <= MAX_NAME, "{n}");
            assert!(n.chars().all(allowed), "{n}");
            assert!(n.starts_with("up_"), "{n}");
        }
    }

    #[test]
    fn long_names_stay_distinct() {
        let a = exposed("up", "_", &format!("{}a", "x".repeat(100)));
        let b = exposed("up", "_", &format!("{}b", "x".repeat(100)));
        assert_ne!(a, b);
    }

    #[test]
    fn separators_and_prefixes_are_checked() {
        assert!(check_separator("").is_err());
        assert!(check_separator("....").is_err());
        assert!(check_separator(".").is_err());
        assert!(check_separator("__").is_ok());
        assert!(check_upstream_name(&"x".repeat(40)).is_err());
        assert!(check_upstream_name("github").is_ok());
        let (_, _, why) = ambiguous(&["a_b", "c", "a"], "_").expect("ambiguous");
        assert!(why.contains("`a`") && why.contains("`a_b`"), "{why}");
    }
}
