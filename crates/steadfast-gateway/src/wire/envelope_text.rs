//! The MCP 2026-07-28 envelope cut out of a request's params as text, for a handshake-era
//! upstream: the params' members and `_meta`'s other members are copied as the client wrote
//! them (decoding the params into a `Value`, removing three keys and encoding it all again
//! was a tenth of a modern call's work).

use super::era::{CLIENT_CAPABILITIES, CLIENT_INFO, PROTOCOL_VERSION};

/// An object's members in order, each key as written (`None` when a key has escapes: its text
/// could not be copied as the key reads).
type Members<'a> = Vec<(Option<&'a str>, &'a str)>;

/// What [`strip_envelope`] made of params.
#[derive(Debug, PartialEq)]
pub(crate) enum Cut {
    /// The params are not modern (no string protocol version in `_meta`): left as they are.
    NotModern,
    /// The params without the envelope.
    Stripped(String),
}

/// `params` (a JSON object) without the envelope's keys in its `_meta`, and without `_meta`
/// when nothing else is left in it, when they are modern (`era::is_modern`): what
/// `era::strip_envelope` makes of the decoded params, with the rest as written. `None` when
/// the text is not that simple (not an object, `_meta` given twice or not an object, a key
/// written with escapes): the caller decodes instead.
pub(crate) fn strip_envelope(params: &str) -> Option<Cut> {
    let top = members(params)?;
    let mut metas = top.iter().filter(|(k, _)| *k == Some("_meta"));
    let Some((_, meta)) = metas.next() else {
        return Some(Cut::NotModern);
    };
    if metas.next().is_some() || top.iter().any(|(k, _)| k.is_none()) {
        return None;
    }
    let inner = members(meta)?;
    if inner.iter().any(|(k, _)| k.is_none()) {
        return None;
    }
    // As a decoded map reads it: the last copy of the key counts.
    let version = inner
        .iter()
        .rev()
        .find(|(k, _)| *k == Some(PROTOCOL_VERSION));
    if !version.is_some_and(|(_, v)| v.starts_with('"')) {
        return Some(Cut::NotModern);
    }
    let envelope = |k: &Option<&str>| {
        matches!(
            *k,
            Some(PROTOCOL_VERSION | CLIENT_CAPABILITIES | CLIENT_INFO)
        )
    };
    let kept: Vec<_> = inner.iter().filter(|(k, _)| !envelope(k)).collect();
    let mut out = String::with_capacity(params.len());
    out.push('{');
    let mut first = true;
    let mut member = |out: &mut String, key: &str| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push('"');
        out.push_str(key);
        out.push_str("\":");
    };
    for (key, value) in &top {
        let key = (*key)?;
        if key != "_meta" {
            member(&mut out, key);
            out.push_str(value);
            continue;
        }
        if kept.is_empty() {
            continue;
        }
        member(&mut out, key);
        out.push('{');
        for (i, (k, v)) in kept.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            out.push_str((*k)?);
            out.push_str("\":");
            out.push_str(v);
        }
        out.push('}');
    }
    out.push('}');
    Some(Cut::Stripped(out))
}

/// The members of the object `text`, or `None` when it is not one. `text` is valid JSON (the
/// params were checked when the request was read); a structural scan finds the members
/// without decoding anything (serde_json's visitor cost ~4k instructions for a small call).
/// Anything unexpected gives `None` and the caller decodes.
fn members(text: &str) -> Option<Members<'_>> {
    let b = text.as_bytes();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(b, i + 1);
    let mut out = Vec::new();
    if b.get(i) == Some(&b'}') {
        return (ws(b, i + 1) == b.len()).then_some(out);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(b, i)?;
        let key = &text[i + 1..key_end - 1];
        i = ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let start = ws(b, i + 1);
        let end = value_end(b, start)?;
        let value = text.get(start..end)?;
        out.push(((!key.contains('\\')).then_some(key), value));
        i = ws(b, end);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return (ws(b, i + 1) == b.len()).then_some(out),
            _ => return None,
        }
    }
}

/// The index after the whitespace at `i`.
fn ws(b: &[u8], mut i: usize) -> usize {
    while b
        .get(i)
        .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
    {
        i += 1;
    }
    i
}

/// The index after the string starting (with its quote) at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j += memchr::memchr2(b'"', b'\\', b.get(j..)?)?;
        if b[j] == b'"' {
            return Some(j + 1);
        }
        j += 2; // an escape: the next byte is never the string's end
    }
}

/// The index after the value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let n = b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(b.len() - i);
            (n > 0).then_some(i + n)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::{Cut, strip_envelope};
    use crate::wire::era;

    /// The text cut decodes to what stripping the decoded params gives.
    fn same_as_decoded(text: &str) {
        let Some(Cut::Stripped(cut)) = strip_envelope(text) else {
            panic!("no cut for {text}");
        };
        let mut v: Value = serde_json::from_str(text).unwrap();
        era::strip_envelope(&mut v);
        assert_eq!(
            serde_json::from_str::<Value>(&cut).unwrap(),
            v,
            "{text} → {cut}"
        );
    }

    #[test]
    fn the_envelope_goes_and_the_rest_stays_as_written() {
        let text = r#"{"name":"echo","arguments":{"text":"hé \"x\"","n":1.50},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":7}}"#;
        assert_eq!(
            strip_envelope(text).unwrap(),
            Cut::Stripped(r#"{"name":"echo","arguments":{"text":"hé \"x\"","n":1.50},"_meta":{"progressToken":7}}"#.into())
        );
        same_as_decoded(text);
    }

    #[test]
    fn an_emptied_meta_goes_too() {
        let text = r#"{ "_meta" : { "io.modelcontextprotocol/protocolVersion" : "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"x": [1, 2]}, "io.modelcontextprotocol/clientInfo": {"name": "c"} }, "name": "echo" }"#;
        assert_eq!(
            strip_envelope(text).unwrap(),
            Cut::Stripped(r#"{"name":"echo"}"#.into())
        );
        same_as_decoded(text);
        same_as_decoded(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"1"}}"#);
        same_as_decoded(
            r#"{"arguments":{"s":"}{][\\\"","a":[{"b":[]},-1.5e3,true,null]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","x":"\\"}}"#,
        );
        same_as_decoded(
            r#"{"a":{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}},"_meta":{"k":null,"io.modelcontextprotocol/protocolVersion":"x"}}"#,
        );
    }

    #[test]
    fn params_that_are_not_modern_are_left_as_they_are() {
        for text in [
            r#"{"name":"echo"}"#,
            r#"{"a":{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}},"_meta":{"k":null}}"#,
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":1,"io.modelcontextprotocol/clientCapabilities":{}}}"#,
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"x","io.modelcontextprotocol/protocolVersion":null}}"#,
        ] {
            assert_eq!(strip_envelope(text), Some(Cut::NotModern), "{text}");
            let v: Value = serde_json::from_str(text).unwrap();
            assert!(!crate::wire::era::is_modern(&v), "{text}");
        }
    }

    #[test]
    fn what_it_cannot_copy_is_left_to_decoding() {
        for text in [
            r#"{"_meta":1}"#,
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"},"n\u0061me":1}"#,
            r#"{"_meta":{},"_meta":{}}"#,
            r#"{"na\u006de":"echo","_meta":{}}"#,
            r#"{"_meta":{"\u0061":1}}"#,
            r#"[1]"#,
            r#"{"_meta":{}"#,
        ] {
            assert_eq!(strip_envelope(text), None, "{text}");
        }
    }
}
