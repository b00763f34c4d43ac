//! Does a token look like a secret? The judgments the generic layer makes on a candidate value.
//!
//! A credential is random: drawn from an alphabet (hex, base62, base64) with about as many
//! distinct characters as its length allows. Shannon entropy per character measures that, but
//! its ceiling depends on the length (a 16-character string has at most 4 bits per character)
//! and on the alphabet (hex at most 4), so each alphabet has its own threshold, as in
//! detect-secrets (`HexHighEntropyString` 3.0, `Base64HighEntropyString` 4.5 on long strings)
//! and gitleaks (3.5 for its generic rule). Entropy alone would flag git SHAs, UUIDs and
//! digests, which are random too: those are told apart by shape here and by context in the
//! rules (`generic.rs`).

/// Shannon entropy of `s`, in bits per byte.
pub(super) fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    // Each distinct byte once, in the order of the text: no pass over all 256 counts.
    let mut h = 0.0;
    for b in s.bytes() {
        let c = std::mem::take(&mut counts[b as usize]);
        if c > 0 {
            let p = f64::from(c) / n;
            h -= p * p.log2();
        }
    }
    h
}

/// `8-4-4-4-12` hex digits.
pub(super) fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// A ULID: 26 characters of Crockford base32 (upper case, no `I`, `L`, `O`, `U`), starting with
/// a timestamp digit `0`–`7`. Sortable ids, not secrets.
pub(super) fn is_ulid(s: &str) -> bool {
    s.len() == 26
        && s.bytes().next().is_some_and(|b| (b'0'..=b'7').contains(&b))
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b.is_ascii_uppercase() && !b"ILOU".contains(&b)))
}

/// A KSUID: 27 characters of base62 whose first (the top of a timestamp in seconds since
/// 2014) is a digit until about 2050. Sortable ids, not secrets.
pub(super) fn is_ksuid(s: &str) -> bool {
    s.len() == 27
        && s.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
        && (s.bytes().all(|b| !b.is_ascii_uppercase())
            || s.bytes().all(|b| !b.is_ascii_lowercase()))
}

/// Lowercase to uppercase steps: random base62 changes case every few characters, prose and
/// identifiers rarely.
fn case_changes(s: &str) -> usize {
    s.as_bytes()
        .windows(2)
        .filter(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
        .count()
}

/// Words joined by separators (`api-gateway-timeout`, `db.password.file`), a DNS label with a
/// generated suffix (`api-7d9f8c6b5-xk2lp`), or a path without capitals: names, not secrets.
fn is_name(s: &str) -> bool {
    let lower = !s.bytes().any(|b| b.is_ascii_uppercase());
    if lower && s.contains('/') {
        return true;
    }
    // A resource path: `prod/db-Ab3dEf`, `projects/demo/…`.
    if let Some((first, _)) = s.split_once('/')
        && first.len() >= 2
        && first.bytes().all(|b| b.is_ascii_lowercase())
    {
        return true;
    }
    if camel_words(s) {
        return true;
    }
    let mut parts = s.split(['-', '_', '.']);
    if s.split(['-', '_', '.']).nth(1).is_none() {
        return false;
    }
    // Every part a word, or (all lowercase) parts no longer than a generated suffix.
    let wordy = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphabetic());
    parts.clone().all(wordy) || (lower && parts.all(|p| p.len() <= 16))
}

/// An identifier of capitalized words and numbers (`Base64HighEntropyString`,
/// `KeywordDetector2`): every capital starts a run of at least two lowercase letters.
fn camel_words(s: &str) -> bool {
    let b = s.as_bytes();
    let mut capitals = 0;
    for (i, c) in b.iter().enumerate() {
        if c.is_ascii_uppercase() {
            capitals += 1;
            let word = b.get(i + 1..i + 3);
            if !word.is_some_and(|w| w.iter().all(u8::is_ascii_lowercase)) {
                return false;
            }
        } else if !c.is_ascii_alphanumeric() {
            return false;
        }
    }
    capitals >= 2 && b[0].is_ascii_uppercase()
}

/// Placeholders and masks: `********`, `xxxxxxxx`, `<token>`, `${TOKEN}`, `$TOKEN`, `%s`.
fn is_placeholder(s: &str) -> bool {
    let first = s.as_bytes()[0];
    s.bytes().all(|b| b == first)
        || matches!(first, b'$' | b'<' | b'%' | b'{' | b'[')
        || s.eq_ignore_ascii_case("null")
        || s.eq_ignore_ascii_case("none")
        || s.eq_ignore_ascii_case("redacted")
}

/// `grant_type=client_credentials…`: a form body or query, whose secrets the rules find by key.
fn is_assignment(s: &str) -> bool {
    s.split_once('=').is_some_and(|(k, v)| {
        !v.is_empty()
            && k.len() >= 2
            && k.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
            && k.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    })
}

/// Trailing sentence punctuation is not part of a token.
pub(super) fn trim(s: &str) -> &str {
    s.trim_end_matches(['.', ',', ';', ':', '!', '?', ')'])
}

/// A random token: high entropy for its alphabet and length, not a UUID, not a name.
///
/// - hex (one case): at least 16 characters, letters and digits, entropy ≥ 3.0;
/// - other alphabets, 16 characters or more: entropy ≥ 3.5, and a digit, a symbol, or case
///   changing inside the token (letters-only tokens need 24 characters and six case changes);
/// - 10 to 15 characters: lower, upper and digit all present and entropy ≥ log2(len) − 0.6.
pub(super) fn is_random(s: &str) -> bool {
    let s = trim(s);
    let n = s.len();
    if n < 10 || is_uuid(s) || is_ulid(s) || is_placeholder(s) || is_name(s) || is_assignment(s) {
        return false;
    }
    let digits = s.bytes().filter(u8::is_ascii_digit).count();
    let letters = s.bytes().filter(u8::is_ascii_alphabetic).count();
    if digits == n {
        return false;
    }
    let h = entropy(s);
    if is_hex(s) {
        return n >= 16 && letters > 0 && digits > 0 && h >= 3.0;
    }
    let upper = s.bytes().any(|b| b.is_ascii_uppercase());
    let lower = s.bytes().any(|b| b.is_ascii_lowercase());
    let symbol = digits + letters < n;
    if n >= 16 {
        let mixed = digits > 0 || symbol || case_changes(s) >= 2;
        let letters_only_ok = digits > 0 || symbol || (n >= 24 && case_changes(s) >= 6);
        return h >= 3.5 && mixed && letters_only_ok;
    }
    upper && lower && digits > 0 && h >= (n as f64).log2() - 0.6
}

/// A password where the context leaves no doubt (`sshpass -p`, `pass:`, `.pgpass`): anything
/// of six characters or more that is not a word, a number, a path or a placeholder.
pub(super) fn is_password(s: &str) -> bool {
    let s = trim(s);
    if s.len() < 6 || is_placeholder(s) || s.starts_with('/') || s.starts_with("~/") {
        return false;
    }
    let letters = s.bytes().filter(u8::is_ascii_alphabetic).count();
    let digits = s.bytes().filter(u8::is_ascii_digit).count();
    // A word, or a number (a port mapping `8080:80` too).
    !(letters == s.len() || letters == 0 || (digits == 0 && is_name(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tokens_by_alphabet() {
        assert!(is_random("9f86d081884c7d659a2feaa0c55ad015")); // 32 hex
        assert!(is_random("Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB"));
        assert!(is_random("q8Zx~R2.pLk_7Tn-VwYs3aBc9dEf0GhIjK1mN4oP"));
        assert!(is_random("Jp5=gA+#JC%yy*t="));
        assert!(is_random("aB3dE6gH9kL2"));
    }

    #[test]
    fn look_alikes_are_not_random() {
        for s in [
            "123e4567-e89b-42d3-a456-426614174000",
            "authenticationfailed",
            "api-gateway-timeout",
            "api-7d9f8c6b5-xk2lp",
            "projects/demo/secrets/db-password/versions/latest",
            "****************",
            "${GITHUB_TOKEN}",
            "1234567890123456",
            "getUserProfileById",
            "Base64HighEntropyString",
            "deadbeef",
        ] {
            assert!(!is_random(s), "{s}");
        }
    }

    #[test]
    fn passwords_in_certain_contexts() {
        assert!(is_password("hunter2!"));
        assert!(is_password("S3cr3t-pw"));
        assert!(!is_password("secret"));
        assert!(!is_password("8080:80"));
        assert!(!is_password("/tmp/pw.txt"));
        assert!(!is_password("pedantic"));
    }

    #[test]
    fn entropy_of_known_strings() {
        assert_eq!(entropy("aaaa"), 0.0);
        assert!((entropy("abcd") - 2.0).abs() < 1e-9);
    }
}
