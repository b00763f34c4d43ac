//! Each upstream spoken to in its era: the MCP 2026-07-28 per-request envelope added for a
//! modern server, removed for a handshake-era one (`supervisor::probe` decides which).

use std::sync::atomic::Ordering;

use serde_json::Value;

use super::Upstream;

impl Upstream {
    /// Whether the connection speaks MCP 2026-07-28 (see `supervisor::probe`).
    pub(crate) fn is_modern(&self) -> bool {
        self.modern.load(Ordering::Relaxed)
    }

    /// Decoded params with the progress token `token` (if any), in this upstream's era, as
    /// text: for a handshake-era upstream the envelope is stripped from the value in hand, so
    /// a modern client's call is encoded once (not encoded, decoded again and re-encoded).
    pub(super) fn value_in_era(&self, params: &Value, token: Option<u64>) -> String {
        use crate::wire::era;
        if self.is_modern() {
            let text = super::pending::with_progress_token(params, token);
            return self
                .in_era(Some(text.into()))
                .map(std::borrow::Cow::into_owned)
                .unwrap_or_default();
        }
        if !era::is_modern(params) {
            return super::pending::with_progress_token(params, token);
        }
        let mut v = params.clone();
        if let (Some(t), Some(obj)) = (token, v.as_object_mut()) {
            let meta = obj
                .entry("_meta")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(m) = meta.as_object_mut() {
                m.insert("progressToken".into(), Value::from(t));
            }
        }
        era::strip_envelope(&mut v);
        v.to_string()
    }

    /// A request's params as this upstream's era wants them: with the per-request envelope
    /// for a modern server (a handshake-era client's request gets the capabilities the
    /// gateway initialized with), without it for a handshake-era one. Untouched (no parse)
    /// when neither applies.
    pub(super) fn in_era<'a>(
        &self,
        params: Option<std::borrow::Cow<'a, str>>,
    ) -> Option<std::borrow::Cow<'a, str>> {
        use crate::wire::era;
        if self.is_modern() {
            let mut v: Value = params
                .as_deref()
                .and_then(|p| serde_json::from_str(p).ok())
                .unwrap_or_else(|| Value::Object(Default::default()));
            let caps = self
                .init_params
                .get()
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .and_then(|p| p.get("capabilities").cloned())
                .unwrap_or_else(|| Value::Object(Default::default()));
            era::add_envelope(&mut v, era::LATEST_MODERN, &caps);
            return Some(v.to_string().into());
        }
        if !era::may_be_modern(params.as_deref()) {
            return params;
        }
        // Cut from the text when it is simple enough (the rest as written), else decoded.
        match params
            .as_deref()
            .map(crate::wire::envelope_text::strip_envelope)
        {
            Some(Some(crate::wire::envelope_text::Cut::Stripped(text))) => {
                return Some(text.into());
            }
            Some(Some(crate::wire::envelope_text::Cut::NotModern)) => return params,
            _ => {}
        }
        match params.as_deref().map(serde_json::from_str::<Value>) {
            Some(Ok(mut v)) if era::is_modern(&v) => {
                era::strip_envelope(&mut v);
                Some(v.to_string().into())
            }
            _ => params,
        }
    }
}
