//! The generic layer, continued: places where credentials stand that the first rules did not
//! look (issue 33) — credential words in other languages, encoded and nested text, markup,
//! values on the next line, login transcripts, function arguments, key armor, URL path
//! segments, tokens known by their structure, and headers named by a vendor.
//!
//! Each rule is a context and a value, like the rules of `generic.rs`, and the value must look
//! random (or, where the context leaves no doubt, like a password).

use super::entropy::{is_ksuid, is_password, is_random, is_ulid, is_uuid, trim};
use super::generic::{Generic, not_secret_context};

/// Credential words of the twelve most used languages on the web after English, in the forms
/// their error messages use (UTF-8 bytes: patterns are matched on bytes).
macro_rules! foreign_word {
    () => {
        concat!(
            r"(?:[Cc]ontraseña|[Cc]lave(?: secreta| de API| de acceso)?|[Ss]enha|[Cc]have(?: secreta| de API| de acesso)?",
            r"|[Kk]ennwort|[Pp]asswort|[Ss]chlüssel|[Zz]ugangsdaten|[Gg]eheimnis|[Zz]ugriffstoken",
            r"|[Mm]ot de passe|[Cc]lé(?: API| secrète| d'API| d’API)?|[Jj]eton(?: d'accès)?",
            r"|[Pp]arola d'ordine|[Cc]hiave(?: API| segreta| di accesso)?",
            r"|(?:П|п)ароль|ПАРОЛЬ|(?:К|к)люч(?: API| доступа)?|API-ключ|(?:Т|т)окен(?: доступа)?|(?:С|с)екрет",
            r"|パスワード|暗証番号|APIキー|秘密鍵|アクセストークン|トークン|シークレット|認証キー",
            r"|密码|密钥|秘钥|令牌|口令|访问令牌|訪問令牌|密碼|金鑰",
            r"|비밀번호|암호|API 키|토큰|비밀 키|액세스 토큰",
            r"|(?:Ş|ş)ifre(?:si)?|[Pp]arola(?:sı)?|[Aa]nahtar(?:ı)?|API anahtarı|[Bb]elirteç",
            r"|[Hh]asło|[Hh]asła|[Hh]asłem|[Kk]lucz(?: API| dostępu)?|[Tt]oken dostępu",
            r"|[Ww]achtwoord|(?:[Gg]eheime )?[Ss]leutel|API-sleutel|[Tt]oegangstoken)"
        )
    };
}

/// A word of prose in any script (lowercase, Capitalized, UPPERCASE or holding a non-ASCII
/// character), never a token with digits: the words a value may stand behind.
macro_rules! prose {
    () => {
        r"(?:[a-z]+|[A-Z][a-z]+|[A-Z]{2,}|[A-Za-z']*[\x80-\xFF][^\s]*)[,:]?"
    };
}

/// A token as credentials are written (see `generic.rs`).
macro_rules! tok {
    () => {
        r"[A-Za-z0-9+/!#$%*^](?:[A-Za-z0-9+/_~=!#$%*^-]|\.[A-Za-z0-9+/_~=!#$%*^-]){7,}"
    };
}

/// A credential word inside an identifier (see `generic.rs`), plus `psk`.
macro_rules! keyword {
    () => {
        r"(?i:[A-Za-z0-9_.-]*?(?:pass(?:word|wd|phrase)?|pwd|secret|token|key|auth|credentials?|creds|psk)[A-Za-z0-9_.-]*)"
    };
}

/// A quote escaped once or more, or as an HTML entity (plain quotes are `generic.rs`'s).
macro_rules! equote {
    () => {
        r#"(?:\\+["']|&quot;|&#34;|&#x22;|&apos;|&#39;)"#
    };
}

fn random(_: &str, _: &str, value: &str) -> bool {
    is_random(value)
}

/// Words, in the same languages, that make the key a public or an identifying one: `clave
/// pública`, `ключ кэша` (cache key), `公钥` (public key).
const FOREIGN_NOT_SECRET: &[&str] = &[
    "públic",
    "public",
    "publiq",
    "pubblic",
    "öffentlich",
    "публичн",
    "открыт",
    "公開",
    "公钥",
    "공개",
    "genel",
    "publiczn",
    "openbar",
    "кэш",
    "кеш",
    "caché",
    "cache",
    "キャッシュ",
    "缓存",
    "캐시",
    "önbellek",
    "id",
];

fn random_or_password(before: &str, context: &str, value: &str) -> bool {
    let lower = context.to_lowercase();
    if FOREIGN_NOT_SECRET.iter().any(|w| lower.contains(w))
        || super::generic::last_word(before).eq_ignore_ascii_case("public")
    {
        return false;
    }
    let strong = [
        "pass",
        "pwd",
        "secret",
        "senha",
        "contrase",
        "hasł",
        "пароль",
        "密码",
    ]
    .iter()
    .any(|w| context.to_lowercase().contains(w));
    is_random(value) || (strong && is_password(value) && has_symbol_or_digit(value))
}

fn has_symbol_or_digit(v: &str) -> bool {
    v.bytes().any(|b| !b.is_ascii_alphabetic())
}

/// A value after a credential word in markup or a nested encoding: random, a password after a
/// strong word, never after an identifier's name (`PublicKeyId`, `key_name`).
fn named_value(before: &str, context: &str, value: &str) -> bool {
    if not_secret_context(before, context) {
        return false;
    }
    let v = trim(value);
    let lower = context.to_ascii_lowercase();
    let strong = ["pass", "pwd", "secret", "cred"]
        .iter()
        .any(|w| lower.contains(w));
    is_random(v) || (is_uuid(v) && strong) || (strong && is_password(v) && has_symbol_or_digit(v))
}

/// Base64 of a JSON object (`eyJ…`) that holds a credential member.
fn base64_json_credential(_: &str, _: &str, value: &str) -> bool {
    let decoded = decode_base64(value.trim_end_matches('='));
    let text = String::from_utf8_lossy(&decoded).to_ascii_lowercase();
    [
        "secret",
        "password",
        "private_key",
        "token",
        "\"key\"",
        "apikey",
        "api_key",
    ]
    .iter()
    .any(|w| text.contains(w))
}

/// SASL PLAIN (`\0user\0password` in base64), as mail, directory and proxy clients log it.
fn sasl_plain(_: &str, _: &str, value: &str) -> bool {
    let decoded = decode_base64(value.trim_end_matches('='));
    let parts: Vec<&[u8]> = decoded.split(|b| *b == 0).collect();
    parts.len() == 3
        && parts[1..]
            .iter()
            .all(|p| !p.is_empty() && p.iter().all(|b| (0x20..0x7f).contains(b)))
}

fn decode_base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes() {
        let Some(v) = val(c) else {
            break;
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// Segments before a path segment that make it a credential even when it is hex.
const SECRET_SEGMENTS: &[&str] = &[
    "key", "keys", "token", "tokens", "secret", "secrets", "hook", "hooks", "webhook", "webhooks",
    "services", "private", "auth", "api", "bot",
];

/// Segments before a path segment that make it an object's id.
const ID_SEGMENTS: &[&str] = &[
    "orders",
    "order",
    "users",
    "user",
    "items",
    "item",
    "commits",
    "commit",
    "builds",
    "build",
    "files",
    "file",
    "manifests",
    "blobs",
    "objects",
    "jobs",
    "runs",
    "deployments",
    "events",
    "assets",
    "releases",
    "tags",
    "ref",
    "refs",
    "sha",
    "uploads",
    "media",
    "images",
    "v2",
];

/// A URL path segment that is a credential: a long random base62/base64url value, or a random
/// hex one under a segment that says so (`/hooks/…`, `/key/…`). Object ids (`/orders/<ulid>`,
/// `/commits/<sha>`) stay.
fn path_secret(before: &str, _: &str, value: &str) -> bool {
    let v = value;
    let prev = before.rsplit('/').next().unwrap_or("").to_ascii_lowercase();
    // In a URL or an absolute path, under a segment that is a word (not a piece of base64).
    let token = before
        .rsplit([' ', '\t', '\n', '"', '\'', '(', '=', ','])
        .next()
        .unwrap_or("");
    let in_path = before.contains("://") || token.starts_with('/');
    let wordy = prev
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && !is_random(&prev);
    if !in_path || !wordy || before.contains("base64,") {
        return false;
    }
    if !is_random(v) || is_uuid(v) || is_ulid(v) || is_ksuid(v) {
        return false;
    }
    let hex = v.bytes().all(|b| b.is_ascii_hexdigit());
    if ID_SEGMENTS.contains(&prev.as_str()) {
        return false;
    }
    if hex {
        return SECRET_SEGMENTS.contains(&prev.as_str()) && v.len() >= 32;
    }
    v.len() >= 24 || SECRET_SEGMENTS.contains(&prev.as_str())
}

/// Three dotted parts, the first and last random (`<id>.<time>.<hmac>` bot tokens, signed
/// cookies): a credential by structure.
fn dotted_token(before: &str, _: &str, value: &str) -> bool {
    if before
        .bytes()
        .last()
        .is_some_and(|b| b == b'.' || b == b'/')
    {
        return false;
    }
    let parts: Vec<&str> = value.split('.').collect();
    parts.len() == 3 && is_random(parts[0]) && is_random(parts[2])
}

/// `sl.<random>`, `sk.<random>`: a short lowercase prefix, a dot, a long random body (`pk.` is
/// a public key by convention).
fn short_prefix_dot(before: &str, _: &str, value: &str) -> bool {
    let Some((prefix, body)) = value.split_once('.') else {
        return false;
    };
    if before
        .bytes()
        .last()
        .is_some_and(|b| b == b'.' || b == b'/' || b == b'-')
    {
        return false;
    }
    prefix != "pk" && body.len() >= 40 && is_random(body)
}

/// A long random run with no separator (`EAAG…`, `1//0…` bodies): only random, mixed case with
/// digits, not a piece of a larger base64 value, not an id after `Id:`, and not a whole
/// line (a certificate's body).
fn long_run(before: &str, _: &str, value: &str) -> bool {
    let last = before.bytes().last();
    if last.is_some_and(|b| b"+/=\n".contains(&b)) {
        return false;
    }
    if before.ends_with("base64,") {
        return false;
    }
    let trimmed = before.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    let word = super::generic::last_word(trimmed).to_ascii_lowercase();
    if word.ends_with("id") || word.starts_with("sha") || word == "h1" || word == "base64" {
        return false;
    }
    let upper = value.bytes().any(|b| b.is_ascii_uppercase());
    let lower = value.bytes().any(|b| b.is_ascii_lowercase());
    let digit = value.bytes().any(|b| b.is_ascii_digit());
    upper && lower && digit && is_random(value)
}

/// Header-name words that say the value is not a secret.
const PLAIN_HEADER_WORDS: &[&str] = &[
    "id",
    "ids",
    "trace",
    "traceid",
    "span",
    "spanid",
    "parent",
    "context",
    "request",
    "requestid",
    "correlation",
    "type",
    "length",
    "md5",
    "digest",
    "etag",
    "version",
    "date",
    "encoding",
    "language",
    "websocket",
    "accept",
    "range",
    "modified",
    "match",
    "since",
    "control",
    "origin",
    "referer",
    "forwarded",
    "host",
    "sampled",
    "flags",
    "state",
    "build",
    "deployment",
    "region",
    "ray",
    "cache",
    "hash",
    "checksum",
    "sha",
    "sha256",
    "policy",
    "nonce",
    "location",
    "name",
];

/// `X-Vendor-Thing: <random>`: a random, long value in a header whose name is not a well-known
/// non-secret header.
fn vendor_header(_: &str, context: &str, value: &str) -> bool {
    let name = context.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    let name = name.split([':', '"', '\'', ' ']).next().unwrap_or("");
    let plain = name
        .split('-')
        .any(|w| PLAIN_HEADER_WORDS.iter().any(|p| p.eq_ignore_ascii_case(w)));
    let v = trim(value);
    // A UUID in a vendor's key header is its API key (`X-Postmark-Server-Token: <uuid>`, and
    // `RGAPI-<uuid>`).
    let uuid_tail =
        v.len() >= 36 && v.is_char_boundary(v.len() - 36) && is_uuid(&v[v.len() - 36..]);
    !plain && v.len() >= 20 && (is_random(v) || uuid_tail)
}

/// Rules that run before the first generic rules (more specific contexts).
pub(super) const PLACES_EARLY: &[Generic] = &[
    // Key material in other armors: SSH2 (RFC 4716), OpenVPN static keys, any `BEGIN … PRIVATE
    // KEY` / `SECRET KEY` armor with four or five dashes.
    Generic {
        name: "key-armor",
        pattern: r"(?-u)-{4,5} ?BEGIN [A-Za-z0-9 ]*(?i:PRIVATE|SECRET|STATIC) (?i:KEY)[A-Za-z0-9 ]*-{4,5}(?:(?s:.)*?-{4,5} ?END [A-Za-z0-9 ]*-{4,5}|(?s:.)*)",
        check: |_, _, _| true,
    },
    Generic {
        name: "putty-private-lines",
        pattern: r"(?-u)(?P<KEEP>\bPrivate-Lines:[ \t]*\d+[ \t]*\r?\n)(?:[A-Za-z0-9+/=]+(?:\r?\n|$))+",
        check: |_, _, _| true,
    },
    Generic {
        name: "jwk-private-member",
        pattern: r#"(?-u)(?P<KEEP>"(?:d|p|q|dp|dq|qi|k)"\s*:\s*")[A-Za-z0-9_-]{16,}(?P<TAIL>")"#,
        check: random,
    },
    Generic {
        name: "secret-key-structure",
        pattern: r"(?-u)\b(?:nsec1[02-9ac-hj-np-z]{50,}|[xyzt]prv[1-9A-HJ-NP-Za-km-z]{100,})",
        check: |_, _, _| true,
    },
    // Encodings: a URL with credentials, percent-encoded; base64 of a JSON credential file;
    // SASL PLAIN.
    Generic {
        name: "encoded-url-credentials",
        pattern: r"(?-u)(?P<KEEP>(?i:\b[a-z][a-z0-9+.-]*%3A%2F%2F)[A-Za-z0-9._~-]*(?i:%3A))[A-Za-z0-9._~%!*+=-]+?(?P<TAIL>(?i:%40))",
        check: |_, _, v| is_password(v),
    },
    Generic {
        name: "base64-json-credential",
        pattern: r"(?-u)\bey[IJ][A-Za-z0-9+/_-]{40,}={0,2}",
        check: base64_json_credential,
    },
    Generic {
        name: "sasl-plain",
        pattern: r"(?-u)\bA[A-Za-z0-9+/]{15,}={0,2}",
        check: sasl_plain,
    },
    // Markup: a credential word as an element name (`<ClientSecretValue>…`), as the value of a
    // naming attribute with the secret in a sibling attribute or a child (`<add
    // key="ApiSecret" value="…"/>`, `<setting name="AuthToken"><value>…`), or as a `<name>`
    // with a `<value>` beside it.
    Generic {
        name: "markup-named-value",
        pattern: concat!(
            r#"(?-u)(?P<KEEP>(?i:\b(?:key|name|id|type|property|field)\s*=\s*)["']"#,
            keyword!(),
            r#"["'](?:[^<>]{0,80}?(?i:\bvalue)\s*=\s*["']|[^<>]{0,40}>\s*(?:<(?i:value|string)>\s*)?))"#,
            r#"[^"'<>\s]{6,}"#
        ),
        check: named_value,
    },
    Generic {
        name: "markup-name-value",
        pattern: concat!(
            r"(?-u)(?P<KEEP><(?i:name|key)>",
            keyword!(),
            r"</(?i:name|key)>\s*<(?i:value|string)>\s*)",
            r#"[^"'<>\s]{6,}"#
        ),
        check: named_value,
    },
    Generic {
        name: "markup-element",
        pattern: concat!(
            r"(?-u)(?P<KEEP><",
            keyword!(),
            r"(?:\s[^<>]*)?>\s*)",
            r#"[^"'<>\s]{6,}(?P<TAIL>\s*<)"#
        ),
        check: named_value,
    },
    // Transcripts: `PASS …` (FTP, POP3, IRC), `a1 LOGIN user …` (IMAP).
    Generic {
        name: "transcript-pass",
        pattern: r#"(?-u)(?m)(?P<KEEP>(?:^|[\s>:])PASS[ \t]+)[^\s"'`\\]{6,}"#,
        check: |_, _, v| is_password(v),
    },
    Generic {
        name: "transcript-login",
        pattern: r#"(?-u)(?P<KEEP>\b[A-Za-z0-9]{1,8}[ \t]+(?:LOGIN|login)[ \t]+["']?[^\s"']+["']?[ \t]+["']?)[^\s"'`\\]{6,}"#,
        check: |_, _, v| is_password(v) && has_symbol_or_digit(v),
    },
    // Function arguments in frames: a login-like call whose last string argument is a password.
    Generic {
        name: "call-password-argument",
        pattern: r#"(?-u)(?P<KEEP>(?i:\b[A-Za-z0-9_.>:-]*(?:connect|login|logon|auth[a-z]*|bind|signin|open)\s*\(\s*)(?:['"][^'"\n]{0,64}['"]\s*,\s*){1,3}['"])[^'"\s]{6,}(?P<TAIL>['"])"#,
        check: |_, _, v| is_password(v),
    },
    // Command lines: a secret echoed into a login.
    Generic {
        name: "echo-into-login",
        pattern: concat!(
            r#"(?-u)(?P<KEEP>\becho[ \t]+(?:-n[ \t]+)?["']?)"#,
            tok!(),
            r#"(?P<TAIL>["']?[ \t]*\|[ \t]*[^|\n]*?(?i:login|auth|passwd|password|--password-stdin|--with-token|secret))"#
        ),
        check: random,
    },
    // Other languages: the credential word, an assignment or a few words, the value; or the
    // value first ("… ist der geheime Schlüssel").
    Generic {
        name: "foreign-keyword-value",
        pattern: concat!(
            r"(?-u)(?P<KEEP>",
            foreign_word!(),
            r"[ \t]*(?:[:=]|：)?[ \t]*(?:",
            prose!(),
            r"[ \t]+){0,4}(?:[(]|«|“)?)",
            tok!()
        ),
        check: random_or_password,
    },
    Generic {
        name: "foreign-value-keyword",
        pattern: concat!(
            r"(?-u)(?:^|[\s(])",
            tok!(),
            r"(?P<TAIL>[ \t]+(?:",
            prose!(),
            r"[ \t]+){0,3}",
            foreign_word!(),
            r")"
        ),
        check: |_, _, v| {
            let v = v.trim_start_matches([' ', '\t', '\n', '(']);
            is_random(v) || (is_password(v) && has_symbol_or_digit(v))
        },
    },
    // Line structure and nesting: the value on the next line (`key: |`, `Key:\n  value`), in
    // a table cell, after escaped or entity quotes, or after a percent-encoded `=`.
    Generic {
        name: "keyword-value-nested",
        pattern: concat!(
            r"(?-u)(?P<KEEP>\b",
            keyword!(),
            r"(?:",
            equote!(),
            r"?[ \t]*[:=]?[ \t]*(?:[|>][-+]?[ \t]*)?\r?\n(?:[ \t]*-{3,}\r?\n)?[ \t]*",
            r"|[ \t]*\|[ \t]*",
            r"|%3[DdAa]",
            r"|",
            equote!(),
            r"?[ \t]*[:=][ \t]*",
            equote!(),
            r"))",
            tok!()
        ),
        check: named_value,
    },
];

/// Rules that run after the first generic rules (broad shapes, judged by their check).
pub(super) const PLACES_LATE: &[Generic] = &[
    Generic {
        name: "vendor-header",
        pattern: concat!(
            r#"(?-u)(?P<KEEP>(?:^|[\s'"{,>])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+['"]?[ \t]*:[ \t]*['"]?)"#,
            r"[A-Za-z0-9+/_=.~-]{20,}"
        ),
        check: vendor_header,
    },
    Generic {
        name: "path-segment-secret",
        pattern: r"(?-u)/(?P<KEEP>)[A-Za-z0-9_-]{16,}(?P<TAIL>[/?#\s]|$)",
        check: path_secret,
    },
    Generic {
        name: "dotted-token",
        pattern: r"(?-u)\b[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{16,}",
        check: dotted_token,
    },
    Generic {
        name: "short-prefix-dot",
        pattern: r"(?-u)\b[a-z]{1,4}\.[A-Za-z0-9_-]{40,}",
        check: short_prefix_dot,
    },
    Generic {
        name: "long-random-run",
        pattern: r"(?-u)\b[A-Za-z0-9_-]{64,}",
        check: long_run,
    },
];
