//! JSON-RPC 2.0 envelopes, read without decoding what they carry.
//!
//! The proxy relays messages it does not need to understand. Decoding every result into typed
//! MCP structs (as an SDK does) costs time and, worse, drops every field the SDK's version of
//! the schema does not know (`execution`, a 2025-11-25 `tasks` capability, vendor `_meta`). So
//! a message is split into its envelope — `id`, `method`, and the raw text of `params`,
//! `result` or `error` — and only the few methods the proxy acts on are decoded further.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// JSON-RPC error codes the proxy answers with.
pub(crate) mod code {
    /// Not a valid JSON-RPC 2.0 request.
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    /// Valid JSON-RPC, invalid parameters.
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    /// MCP: the resource does not exist (the same number as `UPSTREAM_UNAVAILABLE`, which
    /// answers other requests).
    pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;
    /// The method does not exist (or cannot be routed).
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    /// Internal error (the upstream could not be reached, and similar).
    pub(crate) const INTERNAL_ERROR: i64 = -32603;
    /// Steadfast: the upstream did not answer in time.
    pub(crate) const UPSTREAM_TIMEOUT: i64 = -32001;
    /// Steadfast: the upstream is not available.
    pub(crate) const UPSTREAM_UNAVAILABLE: i64 = -32002;
    /// Steadfast: too many requests in flight.
    pub(crate) const OVERLOADED: i64 = -32003;
    /// Steadfast: a message exceeded `max_message_size`.
    pub(crate) const TOO_LARGE: i64 = -32004;
    /// Steadfast: a tool-call limit refused the call (`[limits] on_limit = "jsonrpc_error"`).
    pub(crate) const CALL_LIMIT: i64 = -32005;
}

/// One message's envelope. Borrowed from the line it was read from.
#[derive(Debug, Deserialize)]
pub(crate) struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a RawValue>,
    /// The id, as written (a request or a response).
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    /// The method (requests and notifications).
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    /// Raw params.
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    /// Raw result (responses).
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    /// Raw error object (responses).
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
}

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MessageKind {
    /// Has a method and an id.
    Request,
    /// Has a method and no id.
    Notification,
    /// Has an id and a result or an error.
    Response,
}

/// Why a line could not be taken as a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// Not JSON at all (or JSON that is not an object or array). Ignored, as the official SDKs
    /// do: answering garbage can start an error storm with a peer that echoes.
    NotJson,
    /// JSON that is not a valid JSON-RPC 2.0 message. `id` is the raw id if it could be read.
    Invalid {
        /// The raw id text, if any could be read.
        id: Option<String>,
        /// The JSON-RPC code to answer with.
        code: i64,
        /// What is wrong.
        message: String,
    },
    /// A JSON array: a batch, which MCP (since 2025-06-18) does not allow. The ids of the
    /// requests in it, so each can be answered.
    Batch(Vec<String>),
}

impl<'a> Envelope<'a> {
    /// Splits `line` into its envelope and checks JSON-RPC 2.0's rules.
    pub(crate) fn parse(line: &'a [u8]) -> Result<(Self, MessageKind), Malformed> {
        // serde would read an array as a struct's fields in order: batches go their own way.
        if line.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            let e = serde_json::from_slice::<Value>(b"?").unwrap_err();
            return Err(classify_parse_failure(line, &e));
        }
        // Read as text once checked as UTF-8 (one pass over the line, where reading bytes
        // checks every string and raw value again); other lines are read as bytes, so their
        // errors stay what they were.
        let parsed = match std::str::from_utf8(line) {
            Ok(text) => serde_json::from_str(text),
            Err(_) => serde_json::from_slice(line),
        };
        let env: Envelope<'a> = match parsed {
            Ok(e) => e,
            Err(e) => return Err(classify_parse_failure(line, &e)),
        };
        // The id's copy is made only for an error.
        let id = || env.id.map(|r| r.get().to_owned());
        let invalid = |message: &str| Malformed::Invalid {
            id: id(),
            code: code::INVALID_REQUEST,
            message: message.to_owned(),
        };
        if env.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
            return Err(invalid("invalid request: jsonrpc must be \"2.0\""));
        }
        let kind = match (&env.method, env.id) {
            (Some(_), Some(_)) => MessageKind::Request,
            (Some(_), None) => MessageKind::Notification,
            (None, Some(_)) if env.result.is_some() != env.error.is_some() => MessageKind::Response,
            (None, _) => {
                return Err(invalid(
                    "invalid request: a message needs a method, or an id with a result or an error",
                ));
            }
        };
        if let Some(raw) = env.id
            && !(valid_id(raw.get()) || kind == MessageKind::Response && raw.get() == "null")
        {
            return Err(invalid(
                "invalid request: id must be a string or an integer that fits in 64 bits",
            ));
        }
        if let Some(p) = env.params {
            // Nesting deeper than the limit takes more brackets than a shorter text has, or
            // than a text with fewer opening brackets has (counted by memchr: a per-byte scan
            // of every request's params cost more than the rest of this check).
            let bytes = p.get().as_bytes();
            if bytes.len() > MAX_DEPTH
                && memchr::memchr2_iter(b'{', b'[', bytes)
                    .nth(MAX_DEPTH)
                    .is_some()
                && too_deep(bytes, MAX_DEPTH)
            {
                return Err(Malformed::Invalid {
                    id: id(),
                    code: code::INVALID_REQUEST,
                    message: format!(
                        "invalid request: params nested deeper than {MAX_DEPTH} levels"
                    ),
                });
            }
            let first = p.get().as_bytes().first();
            if !matches!(first, Some(b'{' | b'[')) {
                return Err(Malformed::Invalid {
                    id: id(),
                    code: code::INVALID_PARAMS,
                    message: "invalid params: params must be an object or an array".to_owned(),
                });
            }
        }
        Ok((env, kind))
    }
}

/// How deeply params may nest (serde_json's own limit for decoding).
pub(crate) const MAX_DEPTH: usize = 128;

/// Whether JSON text nests deeper than `limit` (strings skipped).
fn too_deep(bytes: &[u8], limit: usize) -> bool {
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => match string_end(bytes, i) {
                Some(end) => i = end,
                None => return false,
            },
            _ => {}
        }
        i += 1;
    }
    false
}

/// A string, or an integer within 64 bits (what every SDK can hold).
fn valid_id(raw: &str) -> bool {
    if raw.starts_with('"') {
        return true;
    }
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    // Up to 18 digits always fit; longer ones are parsed to be sure.
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits.len() <= 18 || raw.parse::<i64>().is_ok() || raw.parse::<u64>().is_ok())
}

fn classify_parse_failure(line: &[u8], e: &serde_json::Error) -> Malformed {
    let first = line.iter().find(|b| !b.is_ascii_whitespace()).copied();
    match first {
        Some(b'[') => {
            // A batch: answer each request we can find an id for.
            match serde_json::from_slice::<Vec<Box<RawValue>>>(line) {
                Ok(items) => Malformed::Batch(
                    items
                        .iter()
                        .filter_map(|i| scan_id(i.get().as_bytes()))
                        .collect(),
                ),
                Err(_) => Malformed::Batch(Vec::new()),
            }
        }
        Some(b'{') => {
            // Valid enough to start like an object: read the id if it can be found, so the
            // sender is not left waiting (too deep, a lone surrogate, a duplicate key, …).
            let id = scan_id(line);
            if id.is_none() && e.is_syntax() && e.column() <= 1 {
                return Malformed::NotJson;
            }
            let message = if e.to_string().contains("recursion limit") {
                "invalid request: nested too deeply".to_owned()
            } else if e.is_data() {
                format!("invalid request: {e}")
            } else {
                format!("invalid request: not valid JSON ({e})")
            };
            let code = if e.to_string().contains("surrogate") {
                code::INVALID_PARAMS
            } else {
                code::INVALID_REQUEST
            };
            match id {
                Some(id) => Malformed::Invalid {
                    id: Some(id),
                    code,
                    message,
                },
                None => Malformed::NotJson,
            }
        }
        _ => Malformed::NotJson,
    }
}

/// Finds the value of the top-level `"id"` member by scanning, without parsing the rest, so
/// messages that do not parse (too deep, too large, a bad escape later on) can still be
/// answered. Returns the raw id text if it is a valid id.
pub(crate) fn scan_id(bytes: &[u8]) -> Option<String> {
    let mut depth = 0usize;
    let mut i = 0;
    let n = bytes.len();
    let mut expect_key = false;
    while i < n {
        match bytes[i] {
            b'{' => {
                depth += 1;
                expect_key = depth == 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => expect_key = true,
            b'"' => {
                let end = string_end(bytes, i)?;
                if depth == 1 && expect_key {
                    expect_key = false;
                    if &bytes[i..=end] == b"\"id\"" {
                        return id_value(bytes, end + 1);
                    }
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Finds the last `"id":` in the tail of a message (serializers such as the TypeScript SDK's
/// write the id after the result), for replies too large to keep whole.
pub(crate) fn scan_id_in_tail(tail: &[u8]) -> Option<String> {
    let pos = memchr::memmem::rfind(tail, b"\"id\"")?;
    id_value(tail, pos + 4)
}

fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// The id value after its key: skips `\s*:\s*`, then reads a string or a number.
fn id_value(bytes: &[u8], mut i: usize) -> Option<String> {
    let skip_ws = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_ws(&mut i);
    if bytes.get(i) != Some(&b':') {
        return None;
    }
    i += 1;
    skip_ws(&mut i);
    let start = i;
    let end = match bytes.get(i)? {
        b'"' => string_end(bytes, i)? + 1,
        _ => {
            while i < bytes.len() && !matches!(bytes[i], b',' | b'}' | b']') {
                i += 1;
            }
            i
        }
    };
    let raw = std::str::from_utf8(&bytes[start..end]).ok()?.trim();
    // Any scalar id is echoed (so a `true` or `1.5` id still gets its error back); objects
    // and arrays are not ids.
    (!raw.is_empty() && !raw.starts_with(['{', '['])).then(|| raw.to_owned())
}

/// An error response for `id` (raw JSON text; `null` when unknown), one line with its newline.
pub(crate) fn error_response(id: &str, code: i64, message: &str) -> Vec<u8> {
    let message = serde_json::to_string(message).unwrap_or_else(|_| "\"error\"".to_owned());
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":{code},\"message\":{message}}}}}\n"
    )
    .into_bytes()
}

/// A response carrying `result` (raw JSON text) for `id`.
pub(crate) fn result_response(id: &str, result: &str) -> Vec<u8> {
    response(id, "result", result)
}

/// A response carrying an error object (raw JSON text) for `id`.
pub(crate) fn raw_error_response(id: &str, error: &str) -> Vec<u8> {
    response(id, "error", error)
}

/// `{"jsonrpc":"2.0","id":ID,"KEY":RAW}` and a newline, written without re-encoding `raw`.
fn response(id: &str, key: &str, raw: &str) -> Vec<u8> {
    // The fixed parts are 34 bytes with a 6-byte key: no regrowth.
    let mut out = Vec::with_capacity(raw.len() + id.len() + key.len() + 28);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    out.extend_from_slice(raw.as_bytes());
    out.extend_from_slice(b"}\n");
    out
}

/// A request line.
pub(crate) fn request(id: &str, method: &str, params: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + method.len() + params.map_or(0, str::len));
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.as_bytes());
    request_rest(out, method, params)
}

/// A request line with a numeric id (the proxy's own ids upstream), written without an
/// intermediate string.
pub(crate) fn request_numbered(id: u64, method: &str, params: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + method.len() + params.map_or(0, str::len));
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    push_u64(&mut out, id);
    request_rest(out, method, params)
}

/// `n` in decimal, without the formatting machinery.
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn request_rest(mut out: Vec<u8>, method: &str, params: Option<&str>) -> Vec<u8> {
    out.extend_from_slice(b",\"method\":");
    push_json_str(&mut out, method);
    if let Some(p) = params {
        out.extend_from_slice(b",\"params\":");
        out.extend_from_slice(p.as_bytes());
    }
    out.extend_from_slice(b"}\n");
    out
}

/// `s` as a JSON string: as it is between quotes when nothing in it needs escaping (every
/// method name the proxy sends), else through serde_json.
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// A notification line.
pub(crate) fn notification(method: &str, params: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + method.len() + params.map_or(0, str::len));
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
    push_json_str(&mut out, method);
    if let Some(p) = params {
        out.extend_from_slice(b",\"params\":");
        out.extend_from_slice(p.as_bytes());
    }
    out.extend_from_slice(b"}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(line: &str) -> (Option<String>, i64) {
        match Envelope::parse(line.as_bytes()) {
            Err(Malformed::Invalid { id, code, .. }) => (id, code),
            Err(other) => panic!("expected invalid, got {other:?}"),
            Ok((_, kind)) => panic!("expected invalid, got a valid {kind:?}"),
        }
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        let (e, k) = Envelope::parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
        assert_eq!((k, e.id.unwrap().get()), (MessageKind::Request, "1"));
        let (_, k) =
            Envelope::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(k, MessageKind::Notification);
        let (e, k) = Envelope::parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert_eq!((k, e.result.unwrap().get()), (MessageKind::Response, "{}"));
    }

    #[test]
    fn ids_that_no_sdk_can_hold_are_refused_with_the_id_echoed() {
        assert_eq!(
            invalid(r#"{"jsonrpc":"2.0","id":1180591620717411303424,"method":"ping"}"#),
            (Some("1180591620717411303424".into()), code::INVALID_REQUEST)
        );
        assert_eq!(
            invalid(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#).0,
            Some("1.5".into())
        );
        assert_eq!(
            invalid(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#).0,
            Some("true".into())
        );
        assert_eq!(
            invalid(r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#).0,
            Some("3".into())
        );
    }

    #[test]
    fn unparseable_objects_are_answered_when_their_id_can_be_read() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"arguments":{{"a":{}1{}}}}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(invalid(&deep).0, Some("9".into()));
        // A lone surrogate passes the envelope (a server in a language that allows it may
        // take it); tools/call decodes its params and answers -32602 (session tests).
        let surrogate = r#"{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"echo","arguments":{"t":"\ud800"}}}"#;
        let (env, _) = Envelope::parse(surrogate.as_bytes()).unwrap();
        assert!(serde_json::from_str::<Value>(env.params.unwrap().get()).is_err());
    }

    #[test]
    fn ids_within_64_bits_are_valid_and_larger_ones_not() {
        for ok in [
            "0",
            "-1",
            "123456789012345678",
            "9223372036854775807",
            "18446744073709551615",
            "-9223372036854775808",
            "\"x\"",
        ] {
            assert!(valid_id(ok), "{ok}");
        }
        for bad in [
            "18446744073709551616",
            "-9223372036854775809",
            "1.5",
            "",
            "-",
            "1e3",
            "true",
        ] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_line_that_is_not_utf8_is_refused_as_before() {
        // Read as bytes: the error names the bad byte's place, and the id is echoed.
        let line = b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"m\",\"params\":{\"a\":\"\xff\"}}";
        let Err(Malformed::Invalid { id, message, .. }) = Envelope::parse(line) else {
            panic!("not refused");
        };
        assert_eq!(id.as_deref(), Some("4"));
        assert!(message.contains("column"), "{message}");
        // Shallow params (shorter than the nesting limit) pass without the depth scan.
        let (env, _) =
            Envelope::parse(br#"{"jsonrpc":"2.0","id":1,"method":"m","params":[[[[]]]]}"#).unwrap();
        assert_eq!(env.params.unwrap().get(), "[[[[]]]]");
    }

    #[test]
    fn garbage_is_not_answered_and_batches_are() {
        assert_eq!(
            Envelope::parse(b"hello world").unwrap_err(),
            Malformed::NotJson
        );
        assert_eq!(
            Envelope::parse(
                br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]"#
            )
            .unwrap_err(),
            Malformed::Batch(vec!["1".into()])
        );
    }

    #[test]
    fn request_lines_escape_only_what_json_needs() {
        for method in ["tools/call", "a\"b", "a\\b", "tab\there", "é/ü", ""] {
            let line = request_numbered(7, method, Some("{}"));
            let v: Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(v["method"], method);
            assert_eq!(line, request("7", method, Some("{}")));
            assert_eq!(
                serde_json::from_slice::<Value>(&notification(method, None)).unwrap()["method"],
                method
            );
        }
        assert_eq!(request_numbered(0, "m", None), request("0", "m", None));
        assert_eq!(
            request_numbered(18446744073709551615, "m", None),
            b"{\"jsonrpc\":\"2.0\",\"id\":18446744073709551615,\"method\":\"m\"}\n"
        );
    }

    #[test]
    fn ids_are_found_in_the_head_or_the_tail_of_a_large_reply() {
        assert_eq!(
            scan_id(br#"{"result":{"id":5,"x":"}"},"id":7}"#),
            Some("7".into())
        );
        assert_eq!(
            scan_id_in_tail(br#"xxxx"}]},"jsonrpc":"2.0","id":42}"#),
            Some("42".into())
        );
    }
}
