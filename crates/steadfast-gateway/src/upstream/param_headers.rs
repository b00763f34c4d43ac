//! `Mcp-Param-*` headers (MCP 2026-07-28): a tool's input schema may mark a property with
//! `x-mcp-header: TOKEN`, and a modern HTTP client then mirrors that argument into the header
//! `Mcp-Param-TOKEN` of each `tools/call`, so that intermediaries can route on it without
//! reading the body. Servers check the two agree: the Python SDK's refuses a call whose
//! annotated argument has no header (`-32020`). The gateway is that client toward its modern
//! HTTP upstreams: it learns the annotations from their `tools/list` and writes the headers.
//!
//! Only annotations the revision allows are mirrored: on a property reached from the schema's
//! root through `properties` alone, a token of RFC 9110 field-name characters, on a string,
//! integer or boolean property (a server validates nothing for a schema with any other
//! annotation, so extra headers for it are harmless, and missing ones would not be).
//! Bounded: schemas come from the server; the walk stops at [`MAX_DEPTH`] levels and keeps
//! at most [`MAX_HEADERS`] annotations per tool.

use std::sync::Arc;

use serde_json::Value;

use crate::wire::era;

/// Levels of nested `properties` looked into.
const MAX_DEPTH: usize = 16;

/// Annotations kept per tool.
const MAX_HEADERS: usize = 32;

/// A tool's mirrored arguments: each one's path of property names, and its header token.
pub(crate) type ParamHeaders = Arc<[(Vec<String>, String)]>;

/// The annotations of `input_schema` to mirror (`None` when it has none).
pub(crate) fn of_schema(input_schema: &Value) -> Option<ParamHeaders> {
    let mut found = Vec::new();
    walk(input_schema, &mut Vec::new(), &mut found);
    (!found.is_empty()).then(|| found.into())
}

fn walk(schema: &Value, path: &mut Vec<String>, found: &mut Vec<(Vec<String>, String)>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    if path.len() >= MAX_DEPTH {
        return;
    }
    for (name, property) in properties {
        path.push(name.clone());
        let token = property.get("x-mcp-header").and_then(Value::as_str);
        let scalar = matches!(
            property.get("type").and_then(Value::as_str),
            Some("string" | "integer" | "boolean")
        );
        if let Some(token) = token.filter(|t| scalar && is_token(t))
            && found.len() < MAX_HEADERS
        {
            found.push((path.clone(), token.to_owned()));
        }
        walk(property, path, found);
        path.pop();
    }
}

/// An RFC 9110 token: what a header's name may be made of.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The headers a `tools/call` with `arguments` carries for `mirrored`: one per annotated
/// argument present (and not `null`), its value as the revision renders it (`true`/`false`,
/// numbers and strings as written), wrapped in the base64 sentinel when not header-safe.
pub(crate) fn headers(
    mirrored: &[(Vec<String>, String)],
    arguments: &Value,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, token) in mirrored {
        let value = path.iter().try_fold(arguments, |v, key| v.get(key));
        let rendered = match value {
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) => s.clone(),
            _ => continue,
        };
        out.push((
            format!("Mcp-Param-{token}"),
            era::encode_header_value(&rendered),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{headers, of_schema};

    #[test]
    fn annotated_scalars_on_the_properties_chain_are_mirrored() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
            "size": {"type": "number", "x-mcp-header": "Size"},
            "bad": {"type": "string", "x-mcp-header": "no spaces"},
            "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}},
            "deep": {"type": "object", "properties": {
                "tenant": {"type": "integer", "x-mcp-header": "Tenant"}}},
            "plain": {"type": "string"},
        }});
        let m = of_schema(&schema).unwrap();
        let mut tokens: Vec<_> = m.iter().map(|(p, t)| (p.join("."), t.as_str())).collect();
        tokens.sort();
        assert_eq!(
            tokens,
            [
                ("deep.tenant".to_owned(), "Tenant"),
                ("dry".to_owned(), "Dry-Run"),
                ("region".to_owned(), "Region")
            ]
        );
        let h = headers(
            &m,
            &json!({"region": "eu-west", "dry": true, "deep": {"tenant": 7}}),
        );
        let mut h: Vec<_> = h.iter().map(|(n, v)| format!("{n}: {v}")).collect();
        h.sort();
        assert_eq!(
            h,
            [
                "Mcp-Param-Dry-Run: true",
                "Mcp-Param-Region: eu-west",
                "Mcp-Param-Tenant: 7"
            ]
        );
        // Absent or null arguments: no header; a value that is not header-safe: the sentinel.
        let h = headers(&m, &json!({"region": "Zürich", "dry": null}));
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(h[0].1.starts_with("=?base64?"), "{h:?}");
    }

    #[test]
    fn a_schema_without_annotations_mirrors_nothing() {
        assert!(
            of_schema(&json!({"type": "object", "properties": {"a": {"type": "string"}}}))
                .is_none()
        );
        assert!(of_schema(&json!(null)).is_none());
    }
}
