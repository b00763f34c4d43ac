//! The generic layer: secrets that no rule names, found by what surrounds them and how random
//! they look.
//!
//! A rule per provider format always trails the world. What every credential has in common is
//! that it is random and that something says it is a credential: a word (`password`, `secret`,
//! `token`, `key`, `auth`, in any case or separator style, followed by `=`, `:`, a quote, a
//! space or a few words of prose), an auth scheme (`SSWS …`, `GenieKey …`, `Bot …`), a
//! `user:password` pair, or a command-line convention (`mysql -p…`, `sshpass -p`, `redis-cli
//! -a`, `curl -u user:pw`, `openssl -passin pass:…`, `smbclient -U user%pw`, `htpasswd -b`,
//! `.pgpass`/`.netrc`/`.htpasswd` lines). This is how gitleaks' `generic-api-key` rule
//! (keyword, assignment, entropy ≥ 3.5) and detect-secrets' `KeywordDetector` and
//! high-entropy plugins work; here the context is a regular expression in the same one-pass
//! automaton as the built-in rules, and the randomness a check on each match.
//!
//! Each rule's check sees the context (the rule's `KEEP` part) and the value. The context lets
//! a rule refuse `Idempotency-Key: <uuid>`, `partition key …`, `sha256:<digest>`; the value
//! must pass [`is_random`] (or, where the context leaves no doubt, [`is_password`]). A match
//! that fails its check is scanned again from its value, so a rule inside it can still match.

use super::entropy::{is_password, is_random, is_uuid, trim};

/// A rule of the generic layer: like a built-in [`Rule`](super::Rule), but its check also sees
/// the context the pattern matched before the value.
pub(super) struct Generic {
    pub(super) name: &'static str,
    pub(super) pattern: &'static str,
    pub(super) check: fn(before: &str, context: &str, value: &str) -> bool,
}

/// A token as credentials are written: base64/base62/hex with `-_.~=+/`, and the symbols
/// passwords take (`!#$%*^`); no trailing dot, no `:` or `@` (URLs and emails are for the
/// rules).
macro_rules! tok {
    () => {
        r"[A-Za-z0-9+/!#$%*^](?:[A-Za-z0-9+/_~=!#$%*^-]|\.[A-Za-z0-9+/_~=!#$%*^-]){7,}"
    };
}

/// A password on a command line or in a credential file: anything up to a space or a quote.
macro_rules! pw {
    () => {
        r#"[^\s"'`\\]{6,}"#
    };
}

/// Words that make what follows a credential, inside an identifier in any style
/// (`api_key`, `X-Auth-Token`, `clientSecret`, `PGPASSWORD`, `access_key_id`).
macro_rules! keyword {
    () => {
        r"(?i:\b[A-Za-z0-9_.-]*?(?:pass(?:word|wd|phrase)?|pwd|passwort|secret|token|key|auth|credentials?|creds)[A-Za-z0-9_.-]*)"
    };
}

/// Between a keyword and its value: an assignment or a space, optional quotes, and up to three
/// lowercase words of prose (`api key is …`, `key not found: …`, `token, got …`).
macro_rules! sep {
    () => {
        r#"(?:["'`]?[ \t]*(?:=>|:=|->|[:=,])[ \t]*|["'`]?[ \t]+)(?:[a-z]+:?[ \t]+){0,3}["'`(<\[]?"#
    };
}

/// Names before `key` that make it an identifier, not a credential.
const NOT_SECRET_KEYS: &[&str] = &[
    "idempotency",
    "deduplication",
    "partition",
    "primary",
    "foreign",
    "sort",
    "cache",
    "object",
    "s3",
    "public",
    "routing",
    "dedup",
    "row",
    "shard",
    "index",
    "lookup",
    "unique",
    "composite",
    "hash",
    "range",
    "map",
    "dict",
    "fingerprint",
    "keyboard",
    "monkey",
    "turkey",
    "author",
    "page",
    "pagination",
    "continuation",
    "sync",
    "cursor",
    "resume",
    // Words that merely contain a credential word.
    "passagier",
    "passenger",
    "passport",
    "passage",
    "passive",
    "bypass",
    "compass",
    "keynote",
    "keystone",
    "keyspace",
    "keyring",
    "keyword",
    "keywords",
    "donkey",
    "hockey",
    "whiskey",
    "jockey",
    "error",
    "websocket",
];

/// Words that make even a UUID a credential (`secret_id <uuid>`, `api key <uuid>`).
fn strong(context: &str) -> bool {
    ["pass", "pwd", "secret", "token", "api", "auth", "cred"]
        .iter()
        .any(|w| contains_ignore_case(context, w))
}

fn contains_ignore_case(hay: &str, needle: &str) -> bool {
    hay.as_bytes()
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

/// The word just before a match (`cache` in `cache key …`).
pub(super) fn last_word(before: &str) -> &str {
    before
        .trim_end()
        .rsplit(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or("")
}

/// The words of an identifier or a phrase: split on what is not a letter or digit and at
/// camelCase humps (`PublicKeyId` → `Public`, `Key`, `Id`).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .flat_map(|w| {
            let b = w.as_bytes();
            let mut cuts = vec![0];
            cuts.extend(
                (1..b.len())
                    .filter(|&i| b[i].is_ascii_uppercase() && b[i - 1].is_ascii_lowercase()),
            );
            cuts.push(b.len());
            cuts.windows(2).map(|c| &w[c[0]..c[1]]).collect::<Vec<_>>()
        })
        .filter(|w| !w.is_empty())
}

/// Whether a word of the context (camelCase split) or the word before it is a non-secret key's
/// (`cache key`, `PublicKeyId`, `KeyError`).
fn names_not_secret(before: &str, context: &str) -> bool {
    words(last_word(before))
        .chain(words(context))
        .any(|w| NOT_SECRET_KEYS.iter().any(|n| n.eq_ignore_ascii_case(w)))
}

/// Whether the context names an identifier, not a credential: a word of it or the word before
/// it is a non-secret key's (`cache key`, `PublicKeyId`, `sort_key`), or a word after the
/// credential word says the value is about the key (`key id …`, `token_name`).
pub(super) fn not_secret_context(before: &str, context: &str) -> bool {
    if names_not_secret(before, context) {
        return true;
    }
    let all: Vec<&str> = words(context).collect();
    let at = all.iter().rposition(|w| {
        let w = w.to_ascii_lowercase();
        [
            "pass", "pwd", "secret", "token", "key", "auth", "cred", "psk",
        ]
        .iter()
        .any(|k| w.contains(k))
    });
    at.is_some_and(|i| {
        all[i + 1..].iter().any(|w| {
            [
                "id",
                "ids",
                "name",
                "names",
                "type",
                "length",
                "policy",
                "fingerprint",
                "version",
                "count",
                "expiry",
                "expires",
                "format",
            ]
            .iter()
            .any(|n| n.eq_ignore_ascii_case(w))
        })
    })
}

fn keyword_value(before: &str, context: &str, value: &str) -> bool {
    if names_not_secret(before, context)
        || prose_id_after_key(context)
        || words(context).any(|w| w.eq_ignore_ascii_case("public"))
    {
        return false;
    }
    // `KEYID:SECRET` after a credential word: judged by its first half, redacted whole.
    let v = trim(value);
    // An OpenPGP key id or fingerprint (`gpg: key 8A88E352602E9035: public key imported`):
    // upper-case hex of 8, 16 or 40 digits.
    let first_raw = v.split(':').next().unwrap_or(v);
    if matches!(first_raw.len(), 8 | 16 | 40)
        && first_raw
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
    {
        return false;
    }
    let first = v.split(':').next().unwrap_or(v);
    is_random(first) || (is_uuid(first) && strong(context))
}

/// `key id 2A7B…`, `token name …`: the word after the credential word, in prose, says the
/// value is about the credential, not the credential.
fn prose_id_after_key(context: &str) -> bool {
    let mut it = context.split_whitespace();
    it.next();
    it.any(|w| {
        let w = w.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        ["id", "ids", "fingerprint", "name"]
            .iter()
            .any(|n| n.eq_ignore_ascii_case(w))
    })
}

fn scheme_value(_: &str, context: &str, value: &str) -> bool {
    let v = trim(value);
    let bot = context.trim().eq_ignore_ascii_case("bot");
    is_random(v) || (is_uuid(v) && !bot) || v.split(':').all(is_random)
}

/// Not user names: hash algorithms (`sha256:<digest>`), URI schemes, log levels, Kubernetes
/// kinds (`pod:api-7d9f…`), and times.
const NOT_USERS: &[&str] = &[
    "sha1",
    "sha224",
    "sha256",
    "sha384",
    "sha512",
    "md5",
    "blake2b",
    "blake3",
    "crc32",
    "sha",
    "h1",
    "urn",
    "uuid",
    "http",
    "https",
    "data",
    "mailto",
    "file",
    "git",
    "ssh",
    "arn",
    "pod",
    "namespace",
    "ns",
    "node",
    "image",
    "container",
    "service",
    "svc",
    "deployment",
    "job",
    "host",
    "port",
    "time",
    "line",
    "error",
    "warn",
    "warning",
    "info",
    "debug",
    "note",
    "id",
    "key",
    "docker",
    "registry",
    "ref",
    "tag",
    "digest",
    "base64",
];

/// `user:password`, not `sha256:<digest>` or `user_id:<object id>`: a hex value after a colon
/// is an id or a digest far more often than a password.
fn user_password(_: &str, context: &str, value: &str) -> bool {
    let user = context.trim_end_matches(':');
    !NOT_USERS.iter().any(|u| u.eq_ignore_ascii_case(user))
        && !user.to_ascii_lowercase().ends_with("id")
        && !user.bytes().all(|b| b.is_ascii_digit())
        && !value.bytes().all(|b| b.is_ascii_hexdigit())
        && is_random(value)
}

fn id_secret_pair(_: &str, _: &str, value: &str) -> bool {
    match value.split_once(':') {
        Some((id, secret)) => {
            !NOT_USERS.iter().any(|u| u.eq_ignore_ascii_case(id))
                && is_random(id)
                && is_random(secret)
        }
        None => false,
    }
}

fn random(_: &str, _: &str, value: &str) -> bool {
    is_random(value)
}

fn password(_: &str, _: &str, value: &str) -> bool {
    is_password(value)
}

/// A value glued to `-p` (`mysql -pS3cret`): a password unless it is a compiler-style flag.
fn glued_password(_: &str, _: &str, value: &str) -> bool {
    is_password(value)
        && value
            .bytes()
            .any(|b| b.is_ascii_digit() || !b.is_ascii_alphanumeric())
}

/// `NAME=value` in upper snake case: a credential name ending in a secret word takes any
/// password; any other name only a long random non-hex value (`STRIPE_WEBHOOK_SIGNING=…`,
/// not `GIT_COMMIT=<sha>`).
fn env_value(_: &str, context: &str, value: &str) -> bool {
    let name = context.trim_end_matches(['=', ' ', '"', '\'']);
    let secret_name = [
        "PASSWORD", "PASSWD", "PASS", "PWD", "SECRET", "TOKEN", "AUTH", "APIKEY",
    ]
    .iter()
    .any(|w| name.ends_with(w));
    let v = trim(value);
    if secret_name {
        return is_password(v);
    }
    v.len() >= 20 && is_random(v) && !v.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Object ids that look like tokens but are not credentials (Stripe, OpenAI, Anthropic, …).
const ID_PREFIXES: &[&str] = &[
    "req",
    "request",
    "cus",
    "ch",
    "pi",
    "pm",
    "py",
    "evt",
    "sub",
    "in",
    "ii",
    "txn",
    "price",
    "prod",
    "acct",
    "seti",
    "src",
    "po",
    "re",
    "cs",
    "msg",
    "toolu",
    "srvtoolu",
    "file",
    "batch",
    "run",
    "thread",
    "asst",
    "step",
    "chatcmpl",
    "resp",
    "call",
    "ftjob",
    "job",
    "trace",
    "span",
    "build",
    "commit",
    "sha",
    "img",
    "vs",
    "org",
    "proj",
    "user",
    "sess",
    "conv",
    "item",
    "deploy",
    "deployment",
    "dpl",
    "sha1",
    "sha256",
    "sha384",
    "sha512",
    "md5",
];

/// `<prefix>_<random>`: a provider token whose format has no rule (`rnd_…`, `pcsk_…`,
/// `nvapi-…`, `shippo_live_…`), unless the prefix is an object id's.
fn prefixed_token(before: &str, _: &str, value: &str) -> bool {
    // Inside a longer token (`…__o-d9f9-ScMF…`), not at its start.
    if before
        .bytes()
        .last()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b"-_.+/=".contains(&b))
    {
        return false;
    }
    let v = trim(value);
    let Some(cut) = v.find(['_', '-']) else {
        return false;
    };
    let prefix = &v[..cut];
    let body = &v[cut + 1..];
    // A provider's prefix is a word or an abbreviation (`rnd`, `nvapi`, `r8`), one case, not a
    // random run cut at a `-` or `_` of base64url.
    let letters = prefix.trim_end_matches(|c: char| c.is_ascii_digit());
    let one_case = letters.bytes().all(|b| b.is_ascii_lowercase())
        || letters.bytes().all(|b| b.is_ascii_uppercase());
    if letters.is_empty() || !one_case || !letters.bytes().all(|b| b.is_ascii_alphabetic()) {
        return false;
    }
    // Hex groups joined by `-` are trace context (`ff-<trace id>-<span id>-01`), not a token.
    if body.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') && body.contains('-') {
        return false;
    }
    !ID_PREFIXES.iter().any(|p| p.eq_ignore_ascii_case(prefix))
        && body.len() >= 20
        && is_random(body)
}

/// The generic layer's rules, in priority order (after every built-in rule).
pub(super) const GENERIC_RULES: &[Generic] = &[
    // Credential files pasted into an error.
    Generic {
        name: "htpasswd-hash",
        pattern: r"(?-u)(?P<KEEP>\b[A-Za-z0-9_.@-]+:)(?:\$(?:apr1|2[abxy]|1|5|6|y|7)\$[A-Za-z0-9./$]{8,}|\{SHA\}[A-Za-z0-9+/=]{20,})",
        check: |_, _, _| true,
    },
    Generic {
        name: "pgpass-line",
        pattern: concat!(
            r"(?-u)(?P<KEEP>\b[A-Za-z0-9.*-]+:(?:\d{1,5}|\*):[A-Za-z0-9_*.-]+:[A-Za-z0-9_*.-]+:)",
            pw!()
        ),
        check: password,
    },
    Generic {
        name: "netrc-password",
        pattern: concat!(r"(?-u)(?P<KEEP>\blogin\s+\S+\s+password\s+)", pw!()),
        check: password,
    },
    // Command-line conventions.
    Generic {
        name: "cli-password-glued",
        pattern: concat!(r#"(?-u)(?P<KEEP>(?:^|\s)-p['"]?)"#, pw!()),
        check: glued_password,
    },
    Generic {
        name: "cli-short-secret-flag",
        pattern: concat!(r#"(?-u)(?P<KEEP>(?:^|\s)-[pPawkN]\s+['"]?)"#, pw!()),
        check: random,
    },
    Generic {
        name: "openssl-pass-arg",
        pattern: concat!(r"(?-u)(?P<KEEP>\bpass:)", pw!()),
        check: password,
    },
    Generic {
        name: "cli-user-percent-password",
        pattern: concat!(
            r#"(?-u)(?P<KEEP>(?:^|\s)(?:-U|--user)(?:=|\s+)['"]?[^\s%'"]+%)"#,
            pw!()
        ),
        check: password,
    },
    Generic {
        name: "cli-user-password",
        pattern: concat!(
            r#"(?-u)(?P<KEEP>(?:^|\s)(?:-u|--user)(?:=|\s+)['"]?[^\s:'"]+:)"#,
            r#"[^\s"'`@\\]{6,}"#
        ),
        check: password,
    },
    Generic {
        name: "cli-user-key",
        pattern: concat!(
            r#"(?-u)(?P<KEEP>(?:^|\s)(?:-u|--user)(?:=|\s+)['"]?)"#,
            tok!(),
            r#"(?P<TAIL>:)(?:\s|['"]|$)"#
        ),
        check: random,
    },
    Generic {
        name: "net-use-password",
        pattern: concat!(r"(?-u)(?P<KEEP>(?i:/user:)\S+\s+)", pw!()),
        check: password,
    },
    Generic {
        name: "htpasswd-batch",
        pattern: concat!(
            r#"(?-u)(?P<KEEP>\bhtpasswd\s+(?:-[A-Za-z]+\s+)*\S+\s+\S+\s+['"]?)"#,
            pw!()
        ),
        check: password,
    },
    Generic {
        name: "mc-alias-keys",
        pattern: concat!(
            r"(?-u)(?P<KEEP>\bmc\s+(?:alias\s+set|config\s+host\s+add)\s+\S+\s+\S+\s+)",
            tok!(),
            r"\s+",
            pw!()
        ),
        check: |_, _, v| v.split_whitespace().any(is_random),
    },
    Generic {
        name: "cli-positional-token",
        pattern: concat!(
            r"(?-u)(?P<KEEP>\b(?:vault\s+login|b2\s+authorize[-_]account\s+\S+|rabbitmqctl\s+(?:add_user|change_password|authenticate_user)\s+\S+)\s+)",
            tok!()
        ),
        check: random,
    },
    // Environment assignments: `PGPASSWORD=…`, `SOME_SIGNING=<random>`.
    Generic {
        name: "env-assignment",
        pattern: concat!(
            r#"(?-u)(?P<KEEP>\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\s*=\s*["']?)"#,
            r"[A-Za-z0-9+/=_.~!#%*^-]{6,}"
        ),
        check: env_value,
    },
    // Pairs and schemes.
    Generic {
        name: "id-secret-pair",
        pattern: r"(?-u)\b[A-Za-z0-9_-]{16,}:[A-Za-z0-9+/=_.~-]{16,}",
        check: id_secret_pair,
    },
    Generic {
        name: "user-password",
        pattern: r#"(?-u)(?P<KEEP>\b[A-Za-z0-9][A-Za-z0-9._+-]{0,63}:)[^\s:@/"'`<>()\[\]{},;|\\]{10,}"#,
        check: user_password,
    },
    Generic {
        name: "sql-identified-by",
        pattern: concat!(
            r"(?-u)(?P<KEEP>(?i:\bidentified\s+(?:with\s+\S+\s+)?by\s+(?:password\s+)?)')",
            r"[^'\r\n]{4,}(?P<TAIL>')"
        ),
        check: |_, _, v| !v.starts_with('*'),
    },
    Generic {
        name: "credentials-user-slash-password",
        pattern: concat!(
            r"(?-u)(?P<KEEP>(?i:\b(?:credentials?|creds|login|username|user)\s+)\S+\s+/\s+)",
            pw!()
        ),
        check: password,
    },
    Generic {
        name: "auth-scheme",
        pattern: concat!(
            r"(?-u)(?P<KEEP>\b(?i:apikey|api-key|ssws|splunk|geniekey|bot|oauth|hmac|jwt|sso-key|flyv1|sharedkey|negotiate|ntlm|zoho-oauthtoken|pat|plain|xoauth2)\s+)",
            tok!(),
            r"(?::",
            tok!(),
            r")?"
        ),
        check: scheme_value,
    },
    Generic {
        name: "keyword-value",
        pattern: concat!(
            r"(?-u)(?P<KEEP>",
            keyword!(),
            sep!(),
            r")",
            tok!(),
            r"(?::",
            tok!(),
            r")?"
        ),
        check: keyword_value,
    },
    Generic {
        name: "prefixed-token",
        pattern: r"(?-u)\b[A-Za-z][A-Za-z0-9]{1,9}[_-](?:(?:live|test|prod|v\d)[_-])?[A-Za-z0-9][A-Za-z0-9_-]{19,}",
        check: prefixed_token,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_need_a_strong_word() {
        assert!(keyword_value(
            "",
            "secret_id ",
            "123e4567-e89b-42d3-a456-426614174000"
        ));
        assert!(!keyword_value(
            "",
            "Idempotency-Key: ",
            "123e4567-e89b-42d3-a456-426614174000"
        ));
        assert!(!keyword_value(
            "",
            "key ",
            "123e4567-e89b-42d3-a456-426614174000"
        ));
        assert!(!keyword_value(
            "a cache ",
            "key ",
            "9f86d081884c7d659a2feaa0c55ad015"
        ));
        assert!(keyword_value(
            "the api ",
            "key ",
            "9f86d081884c7d659a2feaa0c55ad015"
        ));
    }

    #[test]
    fn object_ids_are_not_tokens() {
        assert!(!prefixed_token("", "", "req_011CSHoEeqs5C35K2UUqR7Fy"));
        assert!(prefixed_token("", "", "rnd_Zf3D0LXCM3EIMbgJpUNnkRtOfOue"));
        // Trace context with an unknown version (found by scanning the repository's own text).
        assert!(!prefixed_token(
            "",
            "",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
    }

    #[test]
    fn digests_are_not_user_passwords() {
        assert!(!user_password(
            "",
            "sha256:",
            "Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB"
        ));
        assert!(user_password(
            "",
            "deploy:",
            "Zf3D0LXCM3EIMbgJpUNnkRtOfOueHznB"
        ));
    }
}
