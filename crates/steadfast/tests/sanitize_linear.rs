//! The scan's work grows linearly with the text, whatever the text holds.
//!
//! Time is not measured (it flakes on a shared machine): `Sanitizer::scan_work` counts the
//! bytes each search of the scan covered up to its match and the bytes handed to the checks, a
//! count that does not depend on the machine. A text made of a near-miss repeated is sanitized
//! at two sizes; four times the text must cost at most about four times the work, and every
//! text at most a fixed amount of work per byte. A scan that goes back over what it has already
//! searched (a rescan per failed check, without a budget) fails both.

use steadfast::Sanitizer;

/// Near-misses: patterns that backtrack catastrophically in other engines, spans that a naive
/// rescan would revisit, and checks that fail over and over.
fn nasty(n: usize) -> Vec<(&'static str, String)> {
    vec![
        ("letters", "a".repeat(n)),
        ("sk- and letters", format!("sk-{}", "a".repeat(n))),
        ("password=x…", format!("password={}", "x".repeat(n))),
        ("password=/", "password=/".repeat(n / 10)),
        ("key: -", "key: -".repeat(n / 6)),
        (
            "Bearer authentication",
            "Bearer authentication ".repeat(n / 22),
        ),
        ("api-gateway-", "api-gateway-".repeat(n / 12)),
        ("token_for_", "token_for_".repeat(n / 10)),
        ("token_for_upload: x", "token_for_upload: x ".repeat(n / 20)),
        ("A:x=", "A:xyzxyzxyz=".repeat(n / 12)),
        (
            "unterminated PEM",
            format!("-----BEGIN RSA PRIVATE KEY-----{}", "A".repeat(n)),
        ),
        (
            "PEM headers",
            "A:b=-----BEGIN PRIVATE KEY-----".repeat(n / 31),
        ),
        ("stack frames", "    at ".repeat(n / 7)),
        ("http://", "http://".repeat(n / 7)),
        ("é", "é".repeat(n / 2)),
        ("é a@", format!("é{}", "a@".repeat(n / 2))),
        ("user:pass pairs", "u:Zf3D0LXCM3 ".repeat(n / 13)),
        ("env names", "AB_CD=".repeat(n / 6)),
    ]
}

#[test]
fn scan_work_is_linear_in_the_text() {
    for s in [Sanitizer::default_rules(), Sanitizer::rules_only()] {
        let small = nasty(20_000);
        let large = nasty(80_000);
        for ((name, a), (_, b)) in small.iter().zip(&large) {
            let (wa, wb) = (s.scan_work(a), s.scan_work(b));
            // Four times the text, at most about four times the work (the constant is the
            // per-search overhead near the ends).
            assert!(
                wb <= wa * 4 + wa / 4 + 4096,
                "{name}: {wa} for {} bytes, {wb} for {} bytes",
                a.len(),
                b.len()
            );
            // And a bounded amount of work per byte.
            assert!(
                wb <= 64 * b.len(),
                "{name}: {wb} for {} bytes ({} per byte)",
                b.len(),
                wb / b.len()
            );
        }
    }
}

#[test]
fn scan_work_counts_something() {
    // The counter is not zero on text without a match (the scan reads it all) and grows with
    // matches that are looked at again.
    let s = Sanitizer::default_rules();
    let clean = "file not found: report.pdf ".repeat(100);
    assert!(s.scan_work(&clean) >= clean.len());
    let dense = "Bearer authentication ".repeat(100);
    assert!(s.scan_work(&dense) > dense.len());
}
