//! A `tools/call`'s params, checked in one pass without building a `serde_json::Value`.
//!
//! Most calls need nothing from their params but the tool's name: with one upstream, no
//! progress token and no task, the params go upstream as the client wrote them. Decoding them
//! into a `Value` (a map, a string per key and value) and writing them out again for every
//! attempt was a third of the proxy's allocations per call. The check here accepts and
//! refuses exactly what decoding into a `Value` would (same parser, same errors: bad escapes
//! and lone surrogates, numbers out of range, nesting), and finds what decides whether the
//! params must be decoded after all.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::ops::Range;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A `tools/call`'s params, as the call is run.
#[derive(Debug)]
pub(crate) enum CallParams {
    /// Decoded: something reads or rewrites them (a progress token, a task, a namespaced
    /// name, a name written with escapes).
    Value(Value),
    /// As the client wrote them (an object), and where the tool's name is in the text.
    Raw {
        /// The params' JSON text.
        text: String,
        /// The name's bytes in `text` (written without escapes).
        name: Range<usize>,
    },
}

/// What the one pass over the params found.
#[derive(Debug, Default)]
pub(crate) struct Scan<'a> {
    /// The params are a JSON object.
    pub(crate) object: bool,
    /// The top-level `name` (the last one, as a decoded map keeps), if it is a string.
    pub(crate) name: Option<Cow<'a, str>>,
    /// The top-level `_meta` (the last one) is an object with a `progressToken`, or declares
    /// the 2026-07-28 tasks extension in its client capabilities: the session must read it.
    pub(crate) progress_token: bool,
    /// A top-level `task` member exists.
    pub(crate) task: bool,
    /// Some object has a key serde_json treats specially when decoding a `Value` (its raw-value
    /// marker): only decoding says what such params mean.
    pub(crate) marker: bool,
}

impl CallParams {
    /// Checks `text` as decoding it into a `Value` would; the params to run the call with, or
    /// the decoding error. `decode` forces a decoded `Value` (e.g. names are namespaced).
    /// `Ok(None)`: valid JSON, but not an object with a string `name`.
    pub(crate) fn parse(text: &str, decode: bool) -> Result<Option<Self>, serde_json::Error> {
        if decode {
            return serde_json::from_str(text).map(Self::decoded);
        }
        // Where the pass fails, decoding is asked for its own error (the same one, but it is
        // the reference).
        let scan = match scan(text) {
            Ok(s) if !s.marker => s,
            _ => return serde_json::from_str(text).map(Self::decoded),
        };
        let Some(name) = scan.name.as_ref().filter(|_| scan.object) else {
            return Ok(None);
        };
        let raw_name = match name {
            Cow::Borrowed(n) => Some(n.as_ptr() as usize - text.as_ptr() as usize),
            Cow::Owned(_) => None,
        };
        match raw_name {
            Some(start) if !(scan.progress_token || scan.task) => Ok(Some(Self::Raw {
                text: text.to_owned(),
                name: start..start + name.len(),
            })),
            _ => serde_json::from_str(text).map(Self::decoded),
        }
    }

    /// The tool's name, as the client sent it (tests read it; the session reads it from the
    /// scan).
    #[cfg(test)]
    pub(crate) fn name(&self) -> &str {
        match self {
            Self::Value(v) => v.get("name").and_then(Value::as_str).unwrap_or_default(),
            Self::Raw { text, name } => &text[name.clone()],
        }
    }

    /// Decoded params, if they are an object with a string `name`.
    fn decoded(v: Value) -> Option<Self> {
        (v.is_object() && v.get("name").is_some_and(Value::is_string)).then_some(Self::Value(v))
    }
}

/// One pass over `text`, failing where decoding it into a `Value` fails.
pub(crate) fn scan(text: &str) -> Result<Scan<'_>, serde_json::Error> {
    let marker = Cell::new(false);
    let mut de = serde_json::Deserializer::from_str(text);
    let mut scan = de.deserialize_any(TopVisitor(&marker))?;
    de.end()?;
    scan.marker = marker.get();
    Ok(scan)
}

/// The key serde_json's `Value` decoding treats as a raw value's marker.
const MARKER: &str = "$serde_json::private::RawValue";

struct TopVisitor<'m>(&'m Cell<bool>);

impl<'de> Visitor<'de> for TopVisitor<'_> {
    type Value = Scan<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Scan::default())
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Scan::default())
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Scan::default())
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Scan::default())
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Scan::default())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Scan::default())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Check(self.0).visit_seq(seq)?;
        Ok(Scan::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut scan = Scan {
            object: true,
            ..Scan::default()
        };
        let m = self.0;
        while let Some(key) = map.next_key_seed(Key(m))? {
            match &*key {
                "name" => scan.name = map.next_value_seed(Str(m))?,
                "_meta" => scan.progress_token = map.next_value_seed(Meta(m))?,
                "task" => {
                    scan.task = true;
                    map.next_value_seed(Check(m))?;
                }
                _ => map.next_value_seed(Check(m))?,
            }
        }
        Ok(scan)
    }
}

/// A key, borrowed when written without escapes; the marker key is noted.
struct Key<'m>(&'m Cell<bool>);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let key = d.deserialize_str(Str(self.0))?.unwrap_or_default();
        if key == MARKER {
            self.0.set(true);
        }
        Ok(key)
    }
}

/// A string value (borrowed when written without escapes); any other value is checked and
/// gives `None`.
struct Str<'m>(&'m Cell<bool>);

impl<'de> DeserializeSeed<'de> for Str<'_> {
    type Value = Option<Cow<'de, str>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Str<'_> {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(s.to_owned())))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Check(self.0).visit_seq(seq).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Check(self.0).visit_map(map).map(|()| None)
    }
}

/// A visitor's answer for values that are not objects: checked (as `Check` does), and false.
macro_rules! not_found_in_scalars_or_arrays {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_str<E>(self, _: &str) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_unit<E>(self) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
            Check(self.0).visit_seq(seq).map(|()| false)
        }
    };
}

/// `_meta`: whether it is an object with a `progressToken` member or declaring the tasks
/// extension.
struct Meta<'m>(&'m Cell<bool>);

impl<'de> DeserializeSeed<'de> for Meta<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Meta<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    not_found_in_scalars_or_arrays!();
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut found = false;
        while let Some(key) = map.next_key_seed(Key(self.0))? {
            if key == CLIENT_CAPABILITIES {
                found |= map.next_value_seed(Has(self.0, TASKS_EXTENSION))?;
                continue;
            }
            found |= key == "progressToken";
            map.next_value_seed(Check(self.0))?;
        }
        Ok(found)
    }
}

/// The per-request client capabilities of MCP 2026-07-28, in `_meta`.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// Where in them a client declares the tasks extension.
const TASKS_EXTENSION: &[&str] = &["extensions", "io.modelcontextprotocol/tasks"];

/// Any value, checked as `Check` does; true when it is an object holding `path` (nested keys).
struct Has<'m>(&'m Cell<bool>, &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Has<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Has<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    not_found_in_scalars_or_arrays!();
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut found = false;
        while let Some(key) = map.next_key_seed(Key(self.0))? {
            match self.1 {
                [last] if key == *last => {
                    map.next_value_seed(Check(self.0))?;
                    found = true;
                }
                [first, rest @ ..] if key == *first => {
                    found |= map.next_value_seed(Has(self.0, rest))?;
                }
                _ => map.next_value_seed(Check(self.0))?,
            }
        }
        Ok(found)
    }
}

/// Any value, checked as decoding it would check it, kept nowhere.
struct Check<'m>(&'m Cell<bool>);

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Check(self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Keys are read as strings, as a decoded map reads them.
        while map.next_key_seed(Key(self.0))?.is_some() {
            map.next_value_seed(Check(self.0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every input is accepted or refused exactly as decoding it into a `Value` is, with the
    /// same error text.
    #[test]
    fn accepts_and_refuses_what_a_decoded_value_does() {
        let deep_ok = format!("{}1{}", "[".repeat(127), "]".repeat(127));
        let deep_bad = format!("{}1{}", "[".repeat(129), "]".repeat(129));
        let cases = [
            r#"{"name":"echo","arguments":{"text":"hello"}}"#,
            r#"{"name":"e\u0063ho"}"#,
            r#"{"name":"echo","arguments":{"t":"\ud800"}}"#,
            r#"{"name":"echo","arguments":{"\ud800":1}}"#,
            r#"{"name":"echo","arguments":{"n":1e999}}"#,
            r#"{"name":"echo","arguments":{"n":-1e999}}"#,
            r#"{"name":"echo","arguments":{"n":18446744073709551616}}"#,
            r#"{"name":"echo","arguments":{"s":"\x"}}"#,
            r#"{"name":"echo","arguments":{"s":"a
b"}}"#,
            r#"{"name":"echo"} x"#,
            r#"{"name":"echo",}"#,
            r#"[1,2,{"a":"\udc00"}]"#,
            r#"{"name":"a","x":{"$serde_json::private::RawValue":5}}"#,
            "\"x\"",
            "null",
            &deep_ok,
            &deep_bad,
        ];
        for text in cases {
            let value = serde_json::from_str::<Value>(text)
                .map(|_| ())
                .map_err(|e| e.to_string());
            let ours = CallParams::parse(text, false)
                .map(|_| ())
                .map_err(|e| e.to_string());
            assert_eq!(ours, value, "{text}");
            if !text.contains(MARKER) {
                // The pass alone, before any fallback to decoding.
                let pass = scan(text).map(|_| ()).map_err(|e| e.to_string());
                assert_eq!(pass, value, "{text}");
            }
        }
    }

    #[test]
    fn the_name_and_what_needs_decoding_are_found() {
        let plain = CallParams::parse(r#"{"arguments":{"name":1},"name":"echo"}"#, false)
            .unwrap()
            .unwrap();
        assert!(matches!(plain, CallParams::Raw { .. }));
        assert_eq!(plain.name(), "echo");
        for decoded in [
            r#"{"name":"echo","_meta":{"progressToken":7}}"#,
            r#"{"name":"echo","task":{}}"#,
            r#"{"name":"e\u0063ho"}"#,
            r#"{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}"#,
        ] {
            let p = CallParams::parse(decoded, false).unwrap().unwrap();
            assert!(matches!(p, CallParams::Value(_)), "{decoded}");
            assert_eq!(p.name(), "echo");
        }
        assert!(matches!(
            CallParams::parse(r#"{"name":"echo"}"#, true).unwrap(),
            Some(CallParams::Value(_))
        ));
        // The last of duplicate members counts, as in a decoded map.
        let dup = CallParams::parse(r#"{"name":1,"name":"b"}"#, false)
            .unwrap()
            .unwrap();
        assert_eq!(dup.name(), "b");
        assert!(
            CallParams::parse(r#"{"name":"a","name":1}"#, false)
                .unwrap()
                .is_none()
        );
        // A 2026-07-28 request declaring other capabilities is relayed as written.
        for raw in [
            r#"{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"x/y":{}},"sampling":{}}}}"#,
            r#"{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{"io.modelcontextprotocol/tasks":{}}}}"#,
            r#"{"name":"echo","_meta":{"io.modelcontextprotocol/clientCapabilities":[{"extensions":1}]}}"#,
        ] {
            let p = CallParams::parse(raw, false).unwrap().unwrap();
            assert!(matches!(p, CallParams::Raw { .. }), "{raw}");
        }
        let meta = r#"{"name":"a","_meta":{"progressToken":1},"_meta":{}}"#;
        assert!(matches!(
            CallParams::parse(meta, false).unwrap(),
            Some(CallParams::Raw { .. })
        ));
        // serde_json decodes a map whose first key is its raw-value marker as the JSON in
        // the string that follows: such params are decoded, whatever they mean.
        let marker = r#"{"name":"a","arguments":{"$serde_json::private::RawValue":"[1]"}}"#;
        let p = CallParams::parse(marker, false).unwrap().unwrap();
        let CallParams::Value(v) = &p else {
            panic!("not decoded")
        };
        assert_eq!(v["arguments"], serde_json::json!([1]));
        let top = r#"{"$serde_json::private::RawValue":"{\"name\":\"x\"}"}"#;
        assert_eq!(CallParams::parse(top, false).unwrap().unwrap().name(), "x");
        for refused in [r#"{"name":1}"#, r#"{}"#, "[]", "\"echo\""] {
            assert!(
                CallParams::parse(refused, false).unwrap().is_none(),
                "{refused}"
            );
        }
    }
}
