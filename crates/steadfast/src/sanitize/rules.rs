//! The built-in rules: one table, in priority order.
//!
//! Every pattern starts with `(?-u)`: the formats are ASCII, and ASCII classes let the scanner
//! run as one lazy DFA over text of any script (a Unicode `\b` makes it fall back to a far slower
//! engine as soon as the text holds one non-ASCII byte).

use super::rule::Rule;

/// Key names whose value is a secret whatever it looks like: the last component of a dotted,
/// dashed or snake-case name (`DATABASE_PASSWORD`, `aws.secret_access_key`, `x-auth-token`), or
/// the last word of a camelCase one (`dbPassword`, `clientSecret`). `tokens`, `token_count` and
/// `max_tokens` do not end in a secret word.
macro_rules! strong_key {
    () => {
        r"(?:\b_*(?:[A-Za-z0-9]+[_.-])*(?i:pass(?:word|wd|phrase)?|pwd|secrets?|token|api[_-]?key|api[_-]?token|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|credentials?|creds|account[_-]?key|shared[_-]?access[_-]?(?:key|signature)|connection[_-]?string|conn[_-]?str|dsn|signature|auth[_-]?token|access[_-]?token|refresh[_-]?token|id[_-]?token|session[_-]?token|bearer[_-]?token)|\b_*[a-z0-9][A-Za-z0-9]*(?:Password|Passwd|Passphrase|Secret|Token|ApiKey|AccessKey|SecretKey|PrivateKey|AccountKey|Credentials?|Signature))"
    };
}

/// Key names whose value is a secret only if it looks random (`key`, `session`, `sig`, `auth`):
/// `sort_key=name` is not a credential, `session_key=8f2a…` is.
macro_rules! weak_key {
    () => {
        r"(?:\b_*(?:[A-Za-z0-9]+[_.-])*(?i:key|session(?:[_-]?id)?|sessid|jsessionid|phpsessid|sid|sig|auth|otp)|\b_*[a-z0-9][A-Za-z0-9]*(?:Key|SessionId|Sid|Auth))"
    };
}

/// An optional quote around a key, plain or JSON-escaped.
macro_rules! q {
    () => {
        r#"(?:\\?["'])?"#
    };
}

/// `=`, `:`, `:=`, `=>` with spaces around.
macro_rules! assign {
    () => {
        r"\s*(?:=>|:=|[:=])\s*"
    };
}

fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

/// The longest run of ASCII letters and digits.
fn longest_alnum_run(s: &str) -> usize {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::len)
        .max()
        .unwrap_or(0)
}

/// A word as prose writes it: letters only, lowercase, UPPERCASE or Capitalized, not too long.
/// `Bearer authentication`, `Basic Plan`, `Token REQUIRED` are ordinary text.
fn is_word(s: &str) -> bool {
    let s = s.trim_end_matches(['.', '-', '_', '~', '+', '/', '=']);
    if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_alphabetic()) {
        return false;
    }
    let rest = &s[1..];
    rest.bytes().all(|b| b.is_ascii_lowercase()) || s.bytes().all(|b| b.is_ascii_uppercase())
}

/// A credential after `Bearer` / `Basic` / `Token` in prose: anything but a word.
fn looks_like_credential(s: &str) -> bool {
    !is_word(s)
}

/// After `Authorization:`, anything but a word (`Authorization: required`) is a credential.
fn header_value(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_whitespace()) || !is_word(s)
}

/// An API-key shape (`api-…`, `key_…`, `token-…`) is a secret only if it holds a long random
/// run: `api-gateway-timeout` and the pod `api-7d9f8c-xk2lp` are ordinary text.
fn looks_like_key(s: &str) -> bool {
    let run = longest_alnum_run(s);
    run >= 24 || (run >= 12 && (has_digit(s) || mixed_case(s)))
}

fn mixed_case(s: &str) -> bool {
    case_changes(s) >= 2
}

/// A value after `password:` in prose ("password: must be 8 characters") is a word, not a
/// secret; one with digits or symbols, or a long one, is treated as a secret. A path is where a
/// secret is kept, and `********` is already masked.
fn looks_like_secret_value(s: &str) -> bool {
    (s.len() >= 12 || (s.len() >= 4 && s.bytes().any(|b| !b.is_ascii_alphabetic())))
        && not_a_path(s)
        && !s.bytes().all(|b| b == b'*')
}

/// Case changes inside runs of letters: `FakeEXAMPLEtest` has two, `Content-Type` none.
fn case_changes(s: &str) -> usize {
    s.as_bytes()
        .windows(2)
        .filter(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
        .count()
}

/// A value for a weak key (`key`, `session`, `sig`) must look random: digits among letters,
/// case changing inside words, percent-escapes, or great length. `Content-Type`, `created_at`
/// and `user_id` do not.
fn looks_random(s: &str) -> bool {
    let digits = s.bytes().filter(u8::is_ascii_digit).count();
    let letters = s.bytes().filter(u8::is_ascii_alphabetic).count();
    s.len() >= 8
        && ((digits >= 2 && letters >= 2)
            || case_changes(s) >= 3
            || s.contains(['%', '+'])
            || (s.len() >= 32 && !s.contains(' ')))
}

/// `DB_PASSWORD_FILE=/run/secrets/db` names where a secret is, and `PWD=/home/app` is the working
/// directory: a path is not a secret.
fn not_a_path(s: &str) -> bool {
    !(s.starts_with('/') || s.starts_with("~/") || s.starts_with("./"))
}

/// A DSN key as URL userinfo (`https://<key>@o1.ingest.example.io`) is random; `git@` is not.
fn userinfo_key(s: &str) -> bool {
    s.len() >= 16 && has_digit(s)
}

/// For rules that only claim a span so that no later rule redacts inside it.
fn never(_: &str) -> bool {
    false
}

/// Built-in rules that only claim a span so that no later rule redacts inside it.
const CLAIMS: &[&str] = &["version-number", "non-secret-key"];

/// Whether `rule` is one of the built-in claims (its name and pattern both).
pub(super) fn is_claim(rule: &Rule) -> bool {
    CLAIMS.contains(&rule.name.as_ref())
        && BUILTIN_RULES
            .iter()
            .any(|b| b.name == rule.name && b.pattern == rule.pattern)
}

/// The string behind a pointer, unless it is already a placeholder.
fn pointed_string(s: &str) -> bool {
    s != R
}

/// An INI value with spaces (`password = correct horse battery`) runs to the end of the line.
fn ini_value(s: &str) -> bool {
    not_a_path(s)
}

const fn rule(name: &'static str, pattern: &'static str, replacement: &'static str) -> Rule {
    Rule::builtin(name, pattern, replacement, None)
}

const fn checked(
    name: &'static str,
    pattern: &'static str,
    replacement: &'static str,
    check: fn(&str) -> bool,
) -> Rule {
    Rule::builtin(name, pattern, replacement, Some(check))
}

const R: &str = "[redacted]";

/// The built-in rules, in priority order (at one position, the earlier rule wins).
///
/// Each provider format with a made-up example and its source is listed in `docs/sanitizer.md`.
/// In short:
///
/// | rules | redact | become |
/// |---|---|---|
/// | `pem-private-key` | PEM, OpenSSH and PGP private key blocks | `[redacted private key]` |
/// | `stack-frame`, `python-traceback`, `rust-backtrace` | stack frames (JavaScript, Java, Python, Rust) | removed |
/// | `internal-url`, `internal-host` | URLs and addresses of localhost, private networks, `*.internal`, `*.svc` … | `[internal-url]`, `[internal-host]` |
/// | `url-credentials`, `url-key-userinfo` | `scheme://user:password@`, `https://<key>@host` (DSNs) | `scheme://[redacted]@` |
/// | `slack-webhook`, `discord-webhook`, `teams-webhook` | webhook URLs | `[redacted]` |
/// | `auth-header`, `set-cookie`, `cookie-header` | `Authorization:`, `X-Api-Key:` … values; cookies | `Authorization: [redacted]` |
/// | `jwt`, `aws-access-key-id`, `github-token`, `openai-key`, … (44 rules) | provider token formats | `[redacted]` |
/// | `bearer` | `Bearer …`, `Basic …`, `Token …` credentials in prose | `Bearer [redacted]` |
/// | `api-key-shape` | `api-…`, `key_…`, `token-…`, `secret-…` with a long random run | `[redacted]` |
/// | `key-*`, `weak-key-*`, `azure-connection-key`, `cli-flag`, `url-query-secret` | values of secret-named keys: JSON, YAML, TOML, INI, env, query strings, ADO.NET, `--password x` | `password=[redacted]` |
pub const BUILTIN_RULES: &[Rule] = &[
    // Structure first: whole blocks that must go, whatever they contain.
    rule(
        "pem-private-key",
        r"(?-u)-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:(?s:.)*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?s:.)*)",
        "[redacted private key]",
    ),
    rule(
        "stack-frame",
        r"(?-u)(?m)^[ \t]+at [^\n]*?(?::\d+\)?|\(<anonymous>\)|\(native\)|\(Native Method\)|\(Unknown Source\)|\(index \d+\))[ \t]*\r?(?:\n|$)",
        "",
    ),
    rule(
        "python-traceback",
        r#"(?-u)(?m)^[ \t]*Traceback \(most recent call last\):[ \t]*\r?(?:\n|$)|^[ \t]*File "[^"\n]*", line \d+[^\n]*\r?(?:\n|$)(?:[ \t]{4,}[^\n]*\r?(?:\n|$))?"#,
        "",
    ),
    rule(
        "rust-backtrace",
        r"(?-u)(?m)^stack backtrace:[ \t]*\r?(?:\n|$)(?:[ \t]+(?:\d+: |at )[^\n]*\r?(?:\n|$))*|^[ \t]+\d+: [\w<>\[\]{}$ ]*::[^\n]*\r?(?:\n|$)",
        "",
    ),
    // `version 10.2.3.4` is a version, not a private address (a bare `10.2.3.4` stays an
    // address: nothing tells them apart).
    checked(
        "version-number",
        r"(?-u)(?i)\b(?:version|release|build|firmware|driver|kernel|ver|rev)[ \t]*[:=]?[ \t]*v?\d+(?:\.\d+){1,3}\b",
        "",
        never,
    ),
    rule(
        "internal-url",
        r#"(?-u)(?i)\b(?:https?|wss?|ftp|grpcs?|redis|rediss|postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|amqps?|jdbc:[a-z]+)://(?:[^/\s@"'<>]*@)?(?:localhost|127(?:\.\d{1,3}){3}|0\.0\.0\.0|\[::1?\]|10(?:\.\d{1,3}){3}|192\.168(?:\.\d{1,3}){2}|172\.(?:1[6-9]|2\d|3[01])(?:\.\d{1,3}){2}|169\.254(?:\.\d{1,3}){2}|[\w.-]+\.(?:internal|local|localdomain|lan|svc|cluster\.local|corp))(?::\d+)?(?:[/?#][^\s"'<>]*)?"#,
        "[internal-url]",
    ),
    rule(
        "internal-host",
        r"(?-u)\b(?:127(?:\.\d{1,3}){3}|10(?:\.\d{1,3}){3}|192\.168(?:\.\d{1,3}){2}|172\.(?:1[6-9]|2\d|3[01])(?:\.\d{1,3}){2}|169\.254(?:\.\d{1,3}){2})(?::\d{1,5})?\b",
        "[internal-host]",
    ),
    // URLs that carry a credential.
    rule(
        "url-credentials",
        r#"(?-u)(?i)\b(?P<KEEP>[a-z][a-z0-9+.-]*://)[^/\s:@"'<>]*:[^/\s@"'<>]+(?P<TAIL>@)"#,
        R,
    ),
    checked(
        "url-key-userinfo",
        r"(?-u)(?i)\b(?P<KEEP>[a-z][a-z0-9+.-]*://)[A-Za-z0-9_-]{16,}(?P<TAIL>@)",
        R,
        userinfo_key,
    ),
    rule(
        "slack-webhook",
        r"(?-u)(?i)\bhttps://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+",
        R,
    ),
    rule(
        "discord-webhook",
        r"(?-u)(?i)\bhttps://(?:(?:canary|ptb)\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]+",
        R,
    ),
    rule(
        "teams-webhook",
        r"(?-u)(?i)\bhttps://[a-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]+",
        R,
    ),
    // Headers.
    checked(
        "auth-header",
        r#"(?-u)(?i)(?P<KEEP>\b(?:proxy-)?(?:authorization|x-api-key|api-key|apikey|x-auth-token|x-access-token|x-amz-security-token|x-goog-api-key|ocp-apim-subscription-key|x-functions-key|private-token|x-vault-token|x-shopify-access-token|x-figma-token|x-csrf-token)(?:\\?["'])?\s*[:=]\s*(?:\\?["'])?)(?:(?:bearer|basic|token|digest|negotiate|ntlm|apikey|sso-key|aws4-hmac-sha256)\s+)?[^\s,;"'\\)}\]>\[][^\s,;"'\\)}\]>]*"#,
        R,
        header_value,
    ),
    rule(
        "set-cookie",
        r#"(?-u)(?i)(?P<KEEP>\bset-cookie\s*:\s*)[^\s;,"'\\\[][^\s;,"'\\]*"#,
        R,
    ),
    rule(
        "cookie-header",
        r#"(?-u)(?i)(?P<KEEP>\bcookie\s*:\s*)[^\s"'\\\[][^\r\n"'\\]*"#,
        R,
    ),
    // Provider formats: a fixed prefix and a shape.
    rule(
        "jwt",
        r"(?-u)\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
        R,
    ),
    rule(
        "aws-access-key-id",
        r"(?-u)\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b",
        R,
    ),
    rule("gcp-api-key", r"(?-u)\bAIza[0-9A-Za-z_-]{35,}", R),
    rule(
        "gcp-oauth-client-secret",
        r"(?-u)\bGOCSPX-[A-Za-z0-9_-]{28}",
        R,
    ),
    rule("gcp-oauth-token", r"(?-u)\bya29\.[0-9A-Za-z_-]{20,}", R),
    rule(
        "github-token",
        r"(?-u)\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        R,
    ),
    rule(
        "gitlab-token",
        r"(?-u)\b(?:gl(?:pat|dt|ptt|rt|cbt|soat|ft|imt|agent|oas|ffct|wt)-[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20,})",
        R,
    ),
    rule(
        "slack-token",
        r"(?-u)\b(?:xox[abposre]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})",
        R,
    ),
    rule(
        "stripe-key",
        r"(?-u)\b(?:(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{24,})",
        R,
    ),
    rule(
        "anthropic-key",
        r"(?-u)\bsk-ant-(?:api|admin|oat|ort)\d{2}-[A-Za-z0-9_-]{20,}",
        R,
    ),
    rule(
        "openai-key",
        r"(?-u)\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}",
        R,
    ),
    rule(
        "huggingface-token",
        r"(?-u)\b(?:hf_|api_org_)[A-Za-z0-9]{30,}",
        R,
    ),
    rule(
        "sendgrid-key",
        r"(?-u)\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
        R,
    ),
    rule("twilio-sid", r"(?-u)\b(?:AC|SK)[0-9a-f]{32}\b", R),
    rule(
        "mailgun-key",
        r"(?-u)\b(?:key-[0-9a-z]{32}|[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8})\b",
        R,
    ),
    rule("mailchimp-key", r"(?-u)\b[0-9a-f]{32}-us\d{1,2}\b", R),
    rule("npm-token", r"(?-u)\bnpm_[A-Za-z0-9]{36,}", R),
    rule("pypi-token", r"(?-u)\bpypi-[A-Za-z0-9_-]{50,}", R),
    rule(
        "docker-hub-token",
        r"(?-u)\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}",
        R,
    ),
    rule("digitalocean-token", r"(?-u)\bdo[por]_v1_[a-f0-9]{64}\b", R),
    rule(
        "shopify-token",
        r"(?-u)\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b",
        R,
    ),
    rule(
        "atlassian-token",
        r"(?-u)\bAT(?:ATT|CTT|OAT)3[A-Za-z0-9_=-]{40,}",
        R,
    ),
    rule("heroku-key", r"(?-u)\bHRKU-[A-Za-z0-9_-]{20,}", R),
    rule(
        "age-secret-key",
        r"(?-u)\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b",
        R,
    ),
    rule("vault-token", r"(?-u)\bhv[sbr]\.[A-Za-z0-9_-]{24,}", R),
    rule("databricks-token", r"(?-u)\bdapi[a-f0-9]{32}(?:-\d)?\b", R),
    rule(
        "telegram-bot-token",
        r"(?-u)\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b",
        R,
    ),
    rule("linear-key", r"(?-u)\blin_api_[A-Za-z0-9]{40}\b", R),
    rule(
        "notion-token",
        r"(?-u)\b(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})\b",
        R,
    ),
    rule("postman-key", r"(?-u)\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b", R),
    rule(
        "grafana-token",
        r"(?-u)\b(?:glsa_[A-Za-z0-9]{32}_[a-f0-9]{8}\b|glc_[A-Za-z0-9+/]{32,}={0,2})",
        R,
    ),
    rule("new-relic-key", r"(?-u)\bNR(?:AK|II)-[A-Za-z0-9]{27}\b", R),
    rule("groq-key", r"(?-u)\bgsk_[A-Za-z0-9]{48,}", R),
    rule("xai-key", r"(?-u)\bxai-[A-Za-z0-9]{70,}", R),
    rule("replicate-token", r"(?-u)\br8_[A-Za-z0-9]{37}\b", R),
    rule("perplexity-key", r"(?-u)\bpplx-[A-Za-z0-9]{40,}", R),
    rule(
        "square-token",
        r"(?-u)\bsq0(?:atp|csp)-[A-Za-z0-9_-]{22,}",
        R,
    ),
    rule("supabase-token", r"(?-u)\bsbp_[a-f0-9]{40}\b", R),
    rule("sentry-token", r"(?-u)\bsntry[su]_[A-Za-z0-9+/=_-]{40,}", R),
    rule(
        "planetscale-token",
        r"(?-u)\bpscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}",
        R,
    ),
    rule(
        "doppler-token",
        r"(?-u)\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}",
        R,
    ),
    rule("pulumi-token", r"(?-u)\bpul-[a-f0-9]{40}\b", R),
    rule(
        "terraform-token",
        r"(?-u)\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{60,}",
        R,
    ),
    rule("figma-token", r"(?-u)\bfig[dou]_[A-Za-z0-9_-]{40,}", R),
    // Values of keys that name a secret. Before the shapes below, so that `api_key_v2=…` is
    // judged as an assignment, not as an `api_…` shape.
    // Keys that name an identifier, not a credential (`Idempotency-Key: <uuid>`,
    // `partition_key=…`, `next_page_token=…`): claimed so that the key rules below leave them alone.
    checked(
        "non-secret-key",
        r#"(?-u)(?i)\b(?:[A-Za-z0-9]+[_.-])*(?:(?:idempotency|partition|sort|primary|foreign|cache|object|routing|dedup(?:lication)?|row|range|hash|shard|s3|websocket)[_.-]?key|public[ _.-]?key|(?:next[_.-]?)?page[_.-]?token|(?:continuation|sync|pagination)[_.-]?token)(?:\\?["'])?\s*(?:=>|:=|[:=])\s*(?:\\?["'])?[^\s"',;&]+"#,
        "",
        never,
    ),
    rule(
        "key-xml-element",
        concat!(r"(?-u)(?P<KEEP><", strong_key!(), r">)[^<]+(?P<TAIL></)"),
        R,
    ),
    rule(
        "azure-connection-key",
        r#"(?-u)(?i)(?P<KEEP>\b(?:AccountKey|SharedAccessKey|SharedAccessSignature)\s*=\s*)[^;\s"'\\]+"#,
        R,
    ),
    rule(
        "key-escaped-quoted",
        concat!(
            r#"(?-u)(?P<KEEP>\\""#,
            strong_key!(),
            r#"\\"\s*:\s*\\")(?:[^"\\\r\n]|\\\\)+(?P<TAIL>\\")"#
        ),
        R,
    ),
    rule(
        "key-quoted",
        concat!(
            r"(?-u)(?P<KEEP>",
            q!(),
            strong_key!(),
            q!(),
            assign!(),
            r#"")(?:[^"\\\r\n]|\\[^\r\n])+(?P<TAIL>")"#
        ),
        R,
    ),
    rule(
        "key-single-quoted",
        concat!(
            r"(?-u)(?P<KEEP>",
            q!(),
            strong_key!(),
            q!(),
            assign!(),
            r"')[^'\r\n]+(?P<TAIL>')"
        ),
        R,
    ),
    checked(
        "key-ini-spaced",
        concat!(
            r"(?-u)(?m)(?P<KEEP>^[ \t]*",
            strong_key!(),
            r#"[ \t]+=[ \t]+)[^\s"';#][^\s]*(?:[ \t]+[^\s]+)+(?P<TAIL>[ \t]*\r?)$"#
        ),
        R,
        ini_value,
    ),
    // A debugger's print of a `char *` (`passwd=0x7ffd5c3a "…"` in a gdb frame): the string the
    // pointer holds is the value. Before `key-value`, which would take the pointer.
    checked(
        "key-pointer-string",
        concat!(
            r"(?-u)(?P<KEEP>",
            q!(),
            strong_key!(),
            q!(),
            r#"\s*[=:]\s*0x[0-9a-fA-F]+\s+")(?:[^"\\\r\n]|\\[^\r\n])+(?P<TAIL>")"#
        ),
        R,
        pointed_string,
    ),
    checked(
        "key-value",
        concat!(
            r"(?-u)(?P<KEEP>",
            q!(),
            strong_key!(),
            q!(),
            r#"\s*(?:=>|:=|=)\s*)[^\s"'&,;<>()\[\]{}\\:=-][^\s"'&,;<>()\[\]{}\\]*"#
        ),
        R,
        not_a_path,
    ),
    checked(
        "key-colon-value",
        concat!(
            r"(?-u)(?P<KEEP>",
            q!(),
            strong_key!(),
            q!(),
            r#"\s*:\s*)[^\s"',;<>()\[\]{}\\:-][^\s"',;<>()\[\]{}\\]*"#
        ),
        R,
        looks_like_secret_value,
    ),
    checked(
        "weak-key-quoted",
        concat!(
            r"(?-u)(?P<KEEP>",
            q!(),
            weak_key!(),
            q!(),
            assign!(),
            r#"\\?["'])[^"'\\\r\n]+(?P<TAIL>\\?["'])"#
        ),
        R,
        looks_random,
    ),
    checked(
        "weak-key-value",
        concat!(
            r"(?-u)(?P<KEEP>",
            q!(),
            weak_key!(),
            q!(),
            assign!(),
            r#")[^\s"'&,;<>()\[\]{}\\:=-][^\s"'&,;<>()\[\]{}\\]*"#
        ),
        R,
        looks_random,
    ),
    rule(
        "url-query-secret",
        r##"(?-u)(?i)(?P<KEEP>[?&;](?:sig|key|sas|auth|session|sid|x-amz-signature|x-amz-security-token|x-goog-signature|x-goog-credential)=)[^&\s"'#<>\\]+"##,
        R,
    ),
    rule(
        "cli-flag",
        r#"(?-u)(?i)(?P<KEEP>(?:^|\s)--?(?:[a-z0-9]+-)*(?:password|passwd|pass|token|secret|api-?key|access-key|secret-key|private-key|client-secret|auth-token)\s+)[^\s"'-][^\s"']*"#,
        R,
    ),
    // Shapes without a provider prefix, judged by a check.
    checked(
        "bearer",
        r"(?-u)(?i)(?P<KEEP>\b(?:bearer|basic|token|digest)\s+)[A-Za-z0-9_.~+/=-]{8,}",
        R,
        looks_like_credential,
    ),
    checked(
        "api-key-shape",
        r"(?-u)(?i)\b(?:sk|pk|rk|api|key|token|secret|tok)[-_][A-Za-z0-9_-]{8,}",
        R,
        looks_like_key,
    ),
];
