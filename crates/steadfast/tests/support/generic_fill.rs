//! Fills the placeholders of the generic-layer sets (`generic_heldout.rs`, `generic_tuning.rs`)
//! with values made at test time, so that no real-looking secret sits in the repository.
//!
//! A placeholder is `{kind}` or `{kind:len}`. In a secret-bearing message every placeholder is a
//! secret unless its kind starts with `~` (`{~uuid}`: a tenant id next to the secret). In a
//! look-alike every placeholder is ordinary data. Values come from a seeded generator: each
//! message gets the same values on every run.

#![allow(dead_code)]

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize] as char)
            .collect()
    }
}

const B62: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const HEX: &[u8] = b"0123456789abcdef";
const HEX_UP: &[u8] = b"0123456789ABCDEF";
const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
/// What a person or a password manager picks: letters, digits, a few symbols.
const PW: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz23456789!#%*+=";
/// Azure AD client secrets: base62 with `~`, `.`, `_`, `-`.
const AZ: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789~._-";

fn value(rng: &mut Rng, kind: &str, len: Option<usize>) -> String {
    let n = |d: usize| len.unwrap_or(d);
    match kind {
        "b62" => rng.pick(B62, n(40)),
        "b64" => rng.pick(B64, n(40)),
        "b64u" => rng.pick(B64URL, n(43)),
        "hex" => rng.pick(HEX, n(32)),
        "HEX" => rng.pick(HEX_UP, n(32)),
        "up" => rng.pick(UPPER, n(20)),
        "low" => rng.pick(LOWER, n(12)),
        "az" => rng.pick(AZ, n(40)),
        "pw" => {
            // Always one of each class, as password rules demand.
            let body = rng.pick(PW, n(16) - 4);
            format!(
                "{}{}{}{}{body}",
                rng.pick(b"ABCDEFGHJKLMNPQRSTUVWXYZ", 1),
                rng.pick(b"abcdefghijkmnpqrstuvwxyz", 1),
                rng.pick(b"23456789", 1),
                rng.pick(b"!#%*+=", 1)
            )
        }
        "uuid" => {
            let h = rng.pick(HEX, 32);
            format!(
                "{}-{}-4{}-a{}-{}",
                &h[..8],
                &h[8..12],
                &h[13..16],
                &h[17..20],
                &h[20..]
            )
        }
        // Sortable and random ids (look-alikes): ULID (Crockford base32), KSUID (base62, 27),
        // nanoid (21, url-safe).
        "ulid" => format!("01{}", rng.pick(b"0123456789ABCDEFGHJKMNPQRSTVWXYZ", 24)),
        "ksuid" => format!("2{}", rng.pick(B62, 26)),
        "nano" => rng.pick(B64URL, n(21)),
        "b64pad" => {
            let body = rng.pick(B64, n(44) - 2);
            format!("{body}==")
        }
        // A JSON credential file, base64-wrapped (as Kubernetes secrets and CI variables hold
        // them): the whole blob is the secret.
        "b64cred" => {
            let json = format!(
                "{{\"type\":\"service_account\",\"client_id\":\"{}\",\"client_secret\":\"{}\"}}",
                rng.pick(HEX, 20),
                rng.pick(B62, n(32))
            );
            base64(json.as_bytes())
        }
        // SASL PLAIN: base64 of `\0user\0password`, as mail and directory clients log it.
        "b64plain" => {
            let pw = value(rng, "pw", len);
            base64(format!("\0svc-mail\0{pw}").as_bytes())
        }
        // A password percent-encoded, as it appears in a query string or an encoded URL.
        "pct" => {
            let pw = value(rng, "pw", len);
            pw.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect()
        }
        other => panic!("unknown placeholder kind {other}"),
    }
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A message with its placeholders filled, and the secret values it now holds.
pub struct Filled {
    pub text: String,
    pub secrets: Vec<String>,
}

/// Fills `template` with values seeded by `seed`.
pub fn fill(template: &str, seed: u64) -> Filled {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut text = String::with_capacity(template.len() + 64);
    let mut secrets = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        let inner = &rest[open + 1..close];
        let (spec, secret) = match inner.strip_prefix('~') {
            Some(s) => (s, false),
            None => (inner, true),
        };
        let (kind, len) = match spec.split_once(':') {
            Some((k, l)) => (k, l.parse().ok()),
            None => (spec, None),
        };
        // `{` of JSON and the like: not a placeholder.
        let known = [
            "b62", "b64", "b64u", "hex", "HEX", "up", "low", "az", "pw", "uuid", "b64pad",
            "b64cred", "b64plain", "pct", "ulid", "ksuid", "nano",
        ];
        if !known.contains(&kind) {
            text.push_str(&rest[..=open]);
            rest = &rest[open + 1..];
            continue;
        }
        text.push_str(&rest[..open]);
        let v = value(&mut rng, kind, len);
        text.push_str(&v);
        if secret {
            secrets.push(v);
        }
        rest = &rest[close + 1..];
    }
    text.push_str(rest);
    Filled { text, secrets }
}

/// Whether any 10-character piece of a secret survived in `out` (a partial redaction leaks).
pub fn leaks(out: &str, secret: &str) -> bool {
    let w = secret.len().min(10);
    (0..=secret.len() - w).any(|i| out.contains(&secret[i..i + w]))
}
