//! MCP's two eras, as a request shows them.
//!
//! Handshake-era revisions (2024-11-05 … 2025-11-25) open a session with `initialize` and
//! negotiate the version once. The 2026-07-28 revision ("modern") has no handshake: every
//! request carries its protocol version, client capabilities and (optionally) client info in
//! `params._meta` under the `io.modelcontextprotocol/` keys, `server/discover` tells a client
//! what the server supports, and each request is served on its own. A request is modern
//! exactly when its `_meta` carries a protocol version, or it is `server/discover`.
//!
//! The validation ladder is the Python SDK 2.x's (`mcp/shared/inbound.py`), first failure
//! wins: the envelope keys present (`-32602` naming the missing ones), then on HTTP the
//! `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` headers equal to the body (`-32020`),
//! then the version supported (`-32022`, naming the supported versions in `data`).

use serde_json::{Value, json};

/// `_meta` key of a modern request's protocol version.
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of a modern request's client capabilities.
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of a modern request's client name and version.
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of a `server/discover` result's server name and version.
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The `_meta` key of a modern request's log level: logs related to the request at this level
/// and above may be sent; without it, none (`notifications/message` is per-request opt-in).
pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// The log levels, least severe first (RFC 5424, as MCP's `LoggingLevel`).
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The rank of a log level in [`LOG_LEVELS`] (`None`: not a level).
pub fn log_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}

/// The rank of the log level a modern request asks for (`None`: it asked for no logs).
pub fn log_level_of(params: &Value) -> Option<usize> {
    params
        .get("_meta")
        .and_then(|m| m.get(LOG_LEVEL))
        .and_then(Value::as_str)
        .and_then(log_rank)
}

/// The method a modern client learns the server's versions and capabilities with.
pub const DISCOVER: &str = "server/discover";

/// Modern revisions served, newest last.
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];
/// Handshake-era revisions served through `initialize`, oldest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The modern revision the gateway speaks to modern upstreams.
pub const LATEST_MODERN: &str = "2026-07-28";
/// The handshake-era revision the gateway offers when a client asks for none it knows.
pub const LATEST_HANDSHAKE: &str = "2025-11-25";

/// Error codes MCP 2026-07-28 reserves (the range -32020…-32099 is the spec's).
pub mod code {
    /// The HTTP headers disagree with the body, or a required one is missing.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a client capability the client did not declare.
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
    /// The requested protocol version is not served; `data.supported` lists those that are.
    pub const UNSUPPORTED_VERSION: i64 = -32022;
}

// The whole range -32020…-32099 is permanent for the call engine: never retried, never a
// breaker failure (`steadfast_mcp::classify_error_data`, which every upstream error of a tool
// call goes through).

/// Every version served, both eras: what `server/discover` and `-32022` name. Modern first,
/// so a client that takes the first one it knows picks the newest revision.
pub fn supported_versions() -> Vec<&'static str> {
    MODERN_VERSIONS
        .iter()
        .rev()
        .chain(HANDSHAKE_VERSIONS.iter().rev())
        .copied()
        .collect()
}

/// The modern protocol version a request's params carry, if any.
pub fn version_of(params: &Value) -> Option<&str> {
    params
        .get("_meta")
        .and_then(|m| m.get(PROTOCOL_VERSION))
        .and_then(Value::as_str)
}

/// Whether a request's params come from a 2026-07-28 client: they carry its protocol version
/// in `_meta`, which handshake-era requests never do.
pub fn is_modern(params: &Value) -> bool {
    version_of(params).is_some()
}

/// Whether raw params may be modern: a cheap test before any parse (a handshake-era request
/// never contains the key).
pub fn may_be_modern(params: Option<&str>) -> bool {
    // Built once: a `str::contains` builds its searcher at each call (~2.6k instructions).
    static KEY: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(PROTOCOL_VERSION));
    params.is_some_and(|p| KEY.find(p.as_bytes()).is_some())
}

/// A modern request refused before it is served: the JSON-RPC error to answer with.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// JSON-RPC error code.
    pub code: i64,
    /// What was wrong, in words.
    pub message: String,
    /// Error data (the supported versions for `-32022`).
    pub data: Option<Value>,
}

impl Refusal {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The JSON-RPC error object.
    pub fn error_object(&self) -> Value {
        let mut e = json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.data {
            e["data"] = d.clone();
        }
        e
    }

    /// The HTTP status a modern POST refused this way gets (the Python SDK's table:
    /// 404 for an unknown method, 400 for the rest of the ladder).
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP front and upstreams
    pub fn http_status(&self) -> u16 {
        http_status(self.code)
    }
}

/// The HTTP status for a JSON-RPC error code in a modern POST's answer; 200 for codes the
/// transport assigns none (a tool's or upstream's error is an answer, not a transport fault).
#[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP front and upstreams
pub fn http_status(code: i64) -> u16 {
    match code {
        -32700 | -32600 | -32602 => 400,
        code::HEADER_MISMATCH | code::MISSING_CLIENT_CAPABILITY | code::UNSUPPORTED_VERSION => 400,
        -32601 => 404,
        _ => 200,
    }
}

/// The `-32022` refusal for `requested`.
pub fn unsupported(requested: &str) -> Refusal {
    Refusal {
        code: code::UNSUPPORTED_VERSION,
        message: format!(
            "Unsupported protocol version {requested:?}: this gateway serves {}",
            supported_versions().join(", ")
        ),
        data: Some(json!({"supported": supported_versions(), "requested": requested})),
    }
}

/// The HTTP headers a modern POST carries, as the front read them (`None`: absent).
#[derive(Debug, Default, Clone, Copy)]
pub struct Headers<'a> {
    /// `MCP-Protocol-Version`.
    pub version: Option<&'a str>,
    /// `Mcp-Method`.
    pub method: Option<&'a str>,
    /// `Mcp-Name`.
    pub name: Option<&'a str>,
}

/// The params key whose value a name-bearing method mirrors in `Mcp-Name`.
pub fn name_key(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// Checks a modern request: envelope, then (on HTTP) headers, then version. The version it
/// carries when every rung passes.
pub fn check<'a>(
    method: &str,
    params: &'a Value,
    headers: Option<Headers<'_>>,
) -> Result<&'a str, Refusal> {
    let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
        return Err(Refusal::new(
            -32602,
            format!(
                "invalid params: params._meta must be an object carrying {PROTOCOL_VERSION:?} and {CLIENT_CAPABILITIES:?}"
            ),
        ));
    };
    let missing: Vec<&str> = [PROTOCOL_VERSION, CLIENT_CAPABILITIES]
        .into_iter()
        .filter(|k| !meta.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(Refusal::new(
            -32602,
            format!(
                "invalid params: params._meta is missing {}",
                missing.join(", ")
            ),
        ));
    }
    if let Some(level) = meta.get(LOG_LEVEL)
        && level.as_str().is_none_or(|l| log_rank(l).is_none())
    {
        return Err(Refusal::new(
            -32602,
            format!(
                "invalid params: params._meta's {LOG_LEVEL:?} must be one of {}",
                LOG_LEVELS.join(", ")
            ),
        ));
    }
    let version = &meta[PROTOCOL_VERSION];
    if let Some(h) = headers {
        if h.version.is_none() || h.version != version.as_str() {
            return Err(Refusal::new(
                code::HEADER_MISMATCH,
                "Header mismatch: MCP-Protocol-Version does not match params._meta's protocol version",
            ));
        }
        if h.method != Some(method) {
            return Err(Refusal::new(
                code::HEADER_MISMATCH,
                format!(
                    "Header mismatch: Mcp-Method {:?} does not match the body's method {method:?}",
                    h.method.unwrap_or("(missing)")
                ),
            ));
        }
        if let Some(key) = name_key(method)
            && let Some(body) = params.get(key).and_then(Value::as_str)
            && h.name.and_then(decode_header_value).as_deref() != Some(body)
        {
            return Err(Refusal::new(
                code::HEADER_MISMATCH,
                format!("Header mismatch: Mcp-Name does not match the body's {key}"),
            ));
        }
    }
    let Some(version) = version.as_str() else {
        return Err(Refusal::new(
            -32602,
            "invalid params: the protocol version in params._meta must be a string",
        ));
    };
    if !MODERN_VERSIONS.contains(&version) {
        return Err(unsupported(version));
    }
    Ok(version)
}

/// The refusal of `initialize` on a connection that opened with modern requests (the era is
/// locked per connection, as the Python SDK's dual-era servers lock it): `-32022` naming the
/// modern versions served there, and the version asked for.
pub fn initialize_after_modern(params: &Value) -> Refusal {
    let mut data = json!({"supported": MODERN_VERSIONS});
    if let Some(v) = params.get("protocolVersion").filter(|v| v.is_string()) {
        data["requested"] = v.clone();
    }
    Refusal {
        code: code::UNSUPPORTED_VERSION,
        message: format!(
            "this connection serves the {LATEST_MODERN} protocol (it opened with a request \
             carrying the per-request envelope); the initialize handshake is not accepted on it"
        ),
        data: Some(data),
    }
}

/// The refusal of a modern request on a connection that opened with `initialize` (the era is
/// locked per connection): `-32600`, as the Python SDK's dual-era servers say it.
pub fn modern_after_handshake() -> Refusal {
    Refusal::new(
        -32600,
        format!(
            "this connection serves the handshake protocol era (it opened with initialize); \
             requests carrying the {LATEST_MODERN} envelope are not accepted on it"
        ),
    )
}

/// A header value as sent: verbatim, or the `=?base64?…?=` sentinel decoded (clients wrap
/// values that are not plain printable ASCII). `None` for a malformed sentinel, so a corrupt
/// header never matches.
pub fn decode_header_value(value: &str) -> Option<std::borrow::Cow<'_, str>> {
    let Some(payload) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Some(std::borrow::Cow::Borrowed(value));
    };
    String::from_utf8(b64_decode(payload)?)
        .ok()
        .map(std::borrow::Cow::Owned)
}

/// A header value for `value`: verbatim when it is printable ASCII without edge spaces, else
/// the base64 sentinel.
#[cfg_attr(not(feature = "http"), allow(dead_code))] // the HTTP front and upstreams
pub fn encode_header_value(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        return value.to_owned();
    }
    format!("=?base64?{}?=", b64_encode(value.as_bytes()))
}

/// The methods whose complete results must carry caching hints (`ttlMs`, `cacheScope`).
pub const CACHEABLE: [&str; 6] = [
    DISCOVER,
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// A modern server's result made what a handshake-era client knows: what 2026-07-28 added to
/// results — `resultType: "complete"`, the caching hints `ttlMs` and `cacheScope`, and
/// `_meta["io.modelcontextprotocol/serverInfo"]` (an empty `_meta` left by it goes too) —
/// removed. A task handle (`resultType` other than `complete`) is left as it is. `None` when
/// the line carries none of it (decided on the bytes: no parse for a handshake-era server's
/// result).
pub fn handshake_result(line: &[u8]) -> Option<Vec<u8>> {
    static MARKS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 2]> =
        std::sync::LazyLock::new(|| {
            [
                memchr::memmem::Finder::new(b"\"resultType\""),
                memchr::memmem::Finder::new(SERVER_INFO.as_bytes()),
            ]
        });
    if MARKS.iter().all(|m| m.find(line).is_none()) {
        return None;
    }
    let mut v: Value = serde_json::from_slice(line).ok()?;
    let result = v.get_mut("result")?.as_object_mut()?;
    match result.get("resultType").and_then(Value::as_str) {
        Some("complete") => {
            result.remove("resultType");
            result.remove("ttlMs");
            result.remove("cacheScope");
        }
        Some(_) => return None,
        None => {}
    }
    if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(SERVER_INFO);
        if meta.is_empty() {
            result.remove("_meta");
        }
    }
    let mut out = serde_json::to_vec(&v).ok()?;
    if line.ends_with(b"\n") {
        out.push(b'\n');
    }
    Some(out)
}

/// A result for a modern client, from a line that may come from a handshake-era server (or
/// the gateway's own gathering): `"resultType":"complete"` added when missing (servers of the
/// revision must mark results), and for a cacheable method the caching hints the revision
/// requires, when missing: `ttlMs: 0` (stale at once — the gateway cannot promise freshness
/// for a server that gave none) and `cacheScope: "private"` (what the gateway lists may depend
/// on its policy). `None` when the line needs nothing.
pub fn complete_result(method: &str, line: &[u8]) -> Option<Vec<u8>> {
    let cacheable = CACHEABLE.contains(&method);
    static RESULT_TYPE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"resultType\""));
    let marked = RESULT_TYPE.find(line).is_some();
    let hinted =
        !cacheable || (memchr_find(line, b"\"ttlMs\"") && memchr_find(line, b"\"cacheScope\""));
    if marked && hinted {
        return None;
    }
    if !cacheable && let Some(out) = mark_complete(line) {
        return Some(out);
    }
    let mut v: Value = serde_json::from_slice(line).ok()?;
    let result = v.get_mut("result")?.as_object_mut()?;
    result
        .entry("resultType")
        .or_insert_with(|| Value::String("complete".into()));
    if cacheable && result.get("resultType").and_then(Value::as_str) == Some("complete") {
        result.entry("ttlMs").or_insert_with(|| json!(0));
        result
            .entry("cacheScope")
            .or_insert_with(|| Value::String("private".into()));
    }
    let mut out = serde_json::to_vec(&v).ok()?;
    if line.ends_with(b"\n") {
        out.push(b'\n');
    }
    Some(out)
}

/// [`complete_result`] for an answer to `id` (raw JSON) that the gateway may have written
/// itself (`jsonrpc::result_response`): when the line starts as that writer starts it, the
/// mark goes in after that prefix with no parse of the line (a modern client's every tool
/// call comes here); any other line is left to [`complete_result`].
pub fn complete_result_for(method: &str, id: &str, line: &[u8]) -> Option<Vec<u8>> {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    const RESULT: &[u8] = br#","result":{"#;
    static RESULT_TYPE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"resultType\""));
    let at = HEAD.len() + id.len() + RESULT.len();
    let ours = !CACHEABLE.contains(&method)
        && line.starts_with(HEAD)
        && line[HEAD.len()..].starts_with(id.as_bytes())
        && line[HEAD.len() + id.len()..].starts_with(RESULT);
    if !ours {
        return complete_result(method, line);
    }
    if RESULT_TYPE.find(line).is_some() {
        return None;
    }
    let empty = line[at..].trim_ascii_start().starts_with(b"}");
    let mark: &[u8] = if empty {
        br#""resultType":"complete""#
    } else {
        br#""resultType":"complete","#
    };
    let mut out = Vec::with_capacity(line.len() + mark.len());
    out.extend_from_slice(&line[..at]);
    out.extend_from_slice(mark);
    out.extend_from_slice(&line[at..]);
    Some(out)
}

/// `line` with `"resultType":"complete"` written first in its result object and the rest as
/// the server wrote it (no decode and re-encode of the answer: every tool call of a modern
/// client to a handshake-era server comes here). For a result without the key (the caller
/// found none in the text); `None` when the line has no result object.
fn mark_complete(line: &[u8]) -> Option<Vec<u8>> {
    let (env, _) = crate::wire::jsonrpc::Envelope::parse(line).ok()?;
    let result = env.result?.get();
    let rest = result.strip_prefix('{')?;
    let at = (rest.as_ptr() as usize).checked_sub(line.as_ptr() as usize)?;
    let empty = rest.trim_start().starts_with('}');
    let mark: &[u8] = if empty {
        br#""resultType":"complete""#
    } else {
        br#""resultType":"complete","#
    };
    let mut out = Vec::with_capacity(line.len() + mark.len());
    out.extend_from_slice(line.get(..at)?);
    out.extend_from_slice(mark);
    out.extend_from_slice(line.get(at..)?);
    Some(out)
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (the header sentinel's; a dependency for 20 lines is not
/// worth it).
fn b64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The inverse of [`b64_encode`]; `None` unless the input is canonical (what the encoder
/// would produce), so one value has one spelling.
fn b64_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for chunk in text.as_bytes().chunks(4) {
        let pad = chunk.iter().rev().take_while(|b| **b == b'=').count();
        if pad > 2 {
            return None;
        }
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            let v = if i >= 4 - pad {
                0
            } else {
                B64.iter().position(|c| c == b)? as u32
            };
            n |= v << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    (b64_encode(&out) == text).then_some(out)
}

/// The `initialize` params a modern request stands for, to start handshake-era upstreams for
/// a client that never initializes: its capabilities and info, the newest handshake revision.
pub fn init_params_of(params: &Value) -> Value {
    let meta = params.get("_meta");
    let caps = meta
        .and_then(|m| m.get(CLIENT_CAPABILITIES))
        .filter(|c| c.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let info = meta
        .and_then(|m| m.get(CLIENT_INFO))
        .filter(|c| c.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"name": "modern-client", "version": "0"}));
    json!({"protocolVersion": LATEST_HANDSHAKE, "capabilities": caps, "clientInfo": info})
}

/// The handshake-era version to answer an `initialize` with when the upstream speaks the
/// modern revision (its own version means nothing to this client): the client's, when served,
/// else the newest handshake revision.
pub fn handshake_version_for(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| HANDSHAKE_VERSIONS.iter().find(|v| **v == r))
        .copied()
        .unwrap_or(LATEST_HANDSHAKE)
}

/// Removes the modern envelope from a request's `_meta` (for a handshake-era upstream, which
/// negotiated its version once), and `_meta` itself when nothing else is left in it.
pub fn strip_envelope(params: &mut Value) {
    let Some(p) = params.as_object_mut() else {
        return;
    };
    let empty = match p.get_mut("_meta").and_then(Value::as_object_mut) {
        Some(meta) => {
            meta.remove(PROTOCOL_VERSION);
            meta.remove(CLIENT_CAPABILITIES);
            meta.remove(CLIENT_INFO);
            meta.is_empty()
        }
        None => false,
    };
    if empty {
        p.remove("_meta");
    }
}

/// Adds (or sets the version of) the modern envelope to a request's params, for a modern
/// upstream: a handshake-era client's request gets the gateway's own capabilities and info.
pub fn add_envelope(params: &mut Value, version: &str, capabilities: &Value) {
    if !params.is_object() {
        *params = json!({});
    }
    let Some(p) = params.as_object_mut() else {
        return;
    };
    let meta = p.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Some(m) = meta.as_object_mut() {
        m.insert(PROTOCOL_VERSION.into(), Value::String(version.into()));
        m.entry(CLIENT_CAPABILITIES)
            .or_insert_with(|| capabilities.clone());
        m.entry(CLIENT_INFO).or_insert_with(
            || json!({"name": "steadfast-gateway", "version": env!("CARGO_PKG_VERSION")}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modern(method: &str, extra: Value) -> Value {
        let mut p = json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}}});
        if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let _ = method;
        p
    }

    #[test]
    fn a_request_is_modern_when_its_meta_carries_a_version() {
        assert!(is_modern(&modern("tools/list", json!({}))));
        assert!(!is_modern(&json!({"_meta": {"progressToken": 1}})));
        assert!(!is_modern(&json!({})));
        assert!(may_be_modern(Some(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}"#
        )));
        assert!(!may_be_modern(Some("{}")));
    }

    #[test]
    fn the_ladder_checks_envelope_then_headers_then_version() {
        let p = json!({"_meta": {PROTOCOL_VERSION: "2026-07-28"}});
        let e = check("tools/list", &p, None).unwrap_err();
        assert_eq!(e.code, -32602);
        assert!(e.message.contains(CLIENT_CAPABILITIES), "{}", e.message);

        let p = modern("tools/call", json!({"name": "echo"}));
        assert_eq!(check("tools/call", &p, None), Ok("2026-07-28"));
        let good = Headers {
            version: Some("2026-07-28"),
            method: Some("tools/call"),
            name: Some("echo"),
        };
        assert_eq!(check("tools/call", &p, Some(good)), Ok("2026-07-28"));
        for bad in [
            Headers {
                version: None,
                ..good
            },
            Headers {
                method: Some("tools/list"),
                ..good
            },
            Headers {
                name: Some("other"),
                ..good
            },
            Headers { name: None, ..good },
        ] {
            let e = check("tools/call", &p, Some(bad)).unwrap_err();
            assert_eq!(e.code, code::HEADER_MISMATCH, "{bad:?}");
            assert_eq!(e.http_status(), 400);
        }
        let b64 = Headers {
            name: Some("=?base64?ZWNobw==?="),
            ..good
        };
        assert_eq!(check("tools/call", &p, Some(b64)), Ok("2026-07-28"));

        let mut old = p.clone();
        old["_meta"][PROTOCOL_VERSION] = json!("1900-01-01");
        let e = check("tools/call", &old, None).unwrap_err();
        assert_eq!(e.code, code::UNSUPPORTED_VERSION);
        assert_eq!(e.data.as_ref().unwrap()["requested"], "1900-01-01");
        let supported = e.data.as_ref().unwrap()["supported"]
            .as_array()
            .unwrap()
            .clone();
        assert!(supported.contains(&json!("2026-07-28")));
        assert!(
            supported.contains(&json!("2025-11-25")),
            "dual-era: handshake versions named too"
        );
        // The header rung comes first: a client that disagrees with itself is told so.
        let h = Headers {
            version: Some("2026-07-28"),
            ..good
        };
        assert_eq!(
            check("tools/call", &old, Some(h)).unwrap_err().code,
            code::HEADER_MISMATCH
        );
    }

    #[test]
    fn the_modern_statuses_are_the_python_sdks() {
        assert_eq!(http_status(-32601), 404);
        assert_eq!(http_status(-32603), 200);
    }

    #[test]
    fn header_values_round_trip_through_the_sentinel() {
        for v in ["echo", "Straße", " padded", "=?base64?x?="] {
            assert_eq!(
                decode_header_value(&encode_header_value(v)).as_deref(),
                Some(v)
            );
        }
        assert_eq!(encode_header_value("echo"), "echo");
        assert_eq!(decode_header_value("=?base64?!!?="), None);
    }

    #[test]
    fn results_are_marked_complete_and_envelopes_translated() {
        let line = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#;
        let out: Value =
            serde_json::from_slice(&complete_result("tools/list", line).unwrap()).unwrap();
        assert_eq!(out["result"]["resultType"], "complete");
        assert_eq!(out["result"]["ttlMs"], 0);
        assert_eq!(out["result"]["cacheScope"], "private");
        let call = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        let out: Value =
            serde_json::from_slice(&complete_result("tools/call", call).unwrap()).unwrap();
        assert!(
            out["result"].get("ttlMs").is_none(),
            "not a cacheable method"
        );
        // Marked in place: the answer as written, the key first in the result.
        let call =
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[],\"isError\":false}}\n";
        assert_eq!(
            complete_result("tools/call", call).unwrap(),
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"complete\",\"content\":[],\"isError\":false}}\n"
        );
        let empty = br#"{"id":2,"jsonrpc":"2.0","result":{ }}"#;
        let out: Value = serde_json::from_slice(&complete_result("ping", empty).unwrap()).unwrap();
        assert_eq!(
            out,
            json!({"id": 2, "jsonrpc": "2.0", "result": {"resultType": "complete"}})
        );
        let task = br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task"}}"#;
        assert!(complete_result("tools/call", task).is_none());
        let error = br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}"#;
        assert!(complete_result("tools/list", error).is_none());
        let hinted = br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","ttlMs":5,"cacheScope":"public","tools":[]}}"#;
        assert!(complete_result("tools/list", hinted).is_none());

        // Without a parse for the gateway's own lines: the same answers.
        for (method, id, line) in [
            (
                "tools/call",
                "1",
                &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[],\"isError\":false}}\n"
                    [..],
            ),
            (
                "ping",
                "\"a,\\\"result\\\":{\"",
                br#"{"jsonrpc":"2.0","id":"a,\"result\":{","result":{ }}"#,
            ),
            ("tools/call", "1", task),
            ("tools/call", "1", error),
            ("tools/list", "1", hinted),
            ("tools/list", "1", line),
            ("ping", "2", empty),
            ("tools/call", "12", call),
        ] {
            assert_eq!(
                complete_result_for(method, id, line),
                complete_result(method, line),
                "{}",
                String::from_utf8_lossy(line)
            );
        }

        let mut p = modern("tools/call", json!({"name": "echo"}));
        p["_meta"]["progressToken"] = json!(7);
        strip_envelope(&mut p);
        assert_eq!(p, json!({"name": "echo", "_meta": {"progressToken": 7}}));
        let mut p = modern("tools/list", json!({}));
        strip_envelope(&mut p);
        assert_eq!(p, json!({}));

        let mut p = json!({"name": "echo"});
        add_envelope(&mut p, LATEST_MODERN, &json!({"sampling": {}}));
        assert_eq!(version_of(&p), Some(LATEST_MODERN));
        assert_eq!(p["_meta"][CLIENT_CAPABILITIES], json!({"sampling": {}}));
        let init = init_params_of(&modern("tools/list", json!({})));
        assert_eq!(init["protocolVersion"], LATEST_HANDSHAKE);
        assert_eq!(handshake_version_for(Some("2025-06-18")), "2025-06-18");
        assert_eq!(handshake_version_for(Some("2026-07-28")), LATEST_HANDSHAKE);
    }

    #[test]
    fn handshake_results_lose_what_the_modern_revision_added() {
        let modern = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"12:00"}],"isError":false,"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcp-time","version":"1"}}}}"#;
        let out: Value = serde_json::from_slice(&handshake_result(modern).unwrap()).unwrap();
        assert_eq!(
            out["result"],
            json!({"content": [{"type": "text", "text": "12:00"}], "isError": false})
        );
        let list = br#"{"jsonrpc":"2.0","id":2,"result":{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"},"other":1}}}"#;
        let out: Value = serde_json::from_slice(&handshake_result(list).unwrap()).unwrap();
        assert_eq!(out["result"], json!({"tools": [], "_meta": {"other": 1}}));
        // A handshake-era server's result, and a task handle, are left alone.
        assert!(handshake_result(br#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}"#).is_none());
        let task = br#"{"jsonrpc":"2.0","id":4,"result":{"resultType":"task","taskId":"t"}}"#;
        assert!(handshake_result(task).is_none());
    }
}
