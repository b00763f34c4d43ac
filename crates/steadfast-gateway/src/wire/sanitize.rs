//! Sanitizing structured data the proxy relays: JSON is walked, never scanned as text.

use serde_json::Value;

/// Sanitizes `v` in place as JSON (every string, and the whole value of any member whose key
/// names a secret), keeping its shape.
pub(crate) fn sanitize_value(v: &mut Value) {
    *v = steadfast::sanitize_json(v);
}

/// Sanitizes the text blocks and structured content of an `isError` tool result (raw JSON).
/// Success content is data the model asked for and passes untouched.
pub(crate) fn sanitize_error_result(raw: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(raw) else {
        return raw.to_owned();
    };
    if let Some(blocks) = v.get_mut("content").and_then(Value::as_array_mut) {
        for b in blocks {
            if let Some(Value::String(t)) = b.get_mut("text") {
                // JSON text is sanitized as JSON: escaped quotes and `\n` would hide secrets
                // and stack traces from a scan of the text.
                let as_json = serde_json::from_str::<Value>(t)
                    .ok()
                    .filter(|v| v.is_object() || v.is_array());
                if let Some(v) = as_json {
                    *t = steadfast::sanitize_json(&v).to_string();
                } else if let std::borrow::Cow::Owned(clean) = steadfast::sanitize(t) {
                    *t = clean;
                }
            }
        }
    }
    if let Some(s) = v.get_mut("structuredContent") {
        sanitize_value(s);
    }
    v.to_string()
}
