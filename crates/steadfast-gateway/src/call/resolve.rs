//! Step 1 of a call: its params read once, and which upstream serves the tool under which name.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use serde_json::Value;

use crate::route::router::{Kind, Router};
use crate::route::upstream_route::Route;
use crate::upstream::{Params, Upstream};
use crate::wire::call_params::CallParams;

/// A `tools/call`'s params as the call runs with them.
pub(crate) struct Request {
    /// Raw params, as the client wrote them (empty for decoded ones).
    text: String,
    /// Where the tool's name is in `text` (raw params only).
    name_at: Option<Range<usize>>,
    /// Decoded params (`null` for raw ones): written out per attempt, with the attempt's
    /// progress token or the upstream's own name for the tool.
    decoded: Value,
    /// The tool's name, for decoded params.
    name: String,
}

impl Request {
    /// The call's params, read.
    pub(crate) fn new(params: CallParams) -> Self {
        match params {
            CallParams::Raw { text, name } => Self {
                text,
                name_at: Some(name),
                decoded: Value::Null,
                name: String::new(),
            },
            CallParams::Value(decoded) => Self {
                text: String::new(),
                name_at: None,
                name: decoded
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                decoded,
            },
        }
    }

    /// The tool's name as the client wrote it.
    pub(crate) fn name(&self) -> &str {
        match &self.name_at {
            Some(at) => &self.text[at.clone()],
            None => &self.name,
        }
    }

    /// The params' `_meta.traceparent`, if any.
    pub(crate) fn trace_parent(&self) -> Option<crate::wire::trace_context::TraceParent> {
        match &self.name_at {
            Some(_) => crate::wire::trace_context::from_raw_params(&self.text),
            None => crate::wire::trace_context::from_params(&self.decoded),
        }
    }
}

/// A call whose upstream is known.
pub(crate) struct Resolved<'r> {
    /// The upstream serving the tool, with the tool's state.
    pub(crate) route: Arc<Route>,
    /// The name the client sees: policies, breakers, limits and metrics go by it.
    pub(crate) name: &'r str,
    /// The upstream's own name for the tool.
    pub(crate) original: Cow<'r, str>,
    /// The params as they go upstream.
    pub(crate) params: Params<'r>,
    /// The client's progress token (raw JSON), if it sent one.
    pub(crate) progress_token: Option<&'r Value>,
}

/// Which upstream serves `request`'s tool; the error message (an unknown tool) otherwise.
/// Decoded params are renamed to the upstream's own name for the tool.
pub(crate) fn resolve<'r>(
    router: &Router,
    request: &'r mut Request,
) -> Result<Resolved<'r>, String> {
    let Request {
        text,
        name_at,
        decoded,
        name: owned,
    } = request;
    let name: &'r str = match name_at {
        Some(at) => &text[at.clone()],
        None => owned,
    };
    let Some((route, original)) = router.resolve(Kind::Tool, name) else {
        return Err(format!(
            "unknown tool `{}`: no upstream of this endpoint has it (upstreams: {})",
            steadfast::sanitize(name),
            upstream_names(router)
        ));
    };
    if original != name {
        // Only decoded params are namespaced (`CallParams::parse`).
        decoded["name"] = Value::String(original.to_string());
    }
    let decoded: &'r Value = decoded;
    let params = match name_at {
        // Raw params without the 2026-07-28 envelope: the upstream need not look again. (A
        // modern client's raw params carry it — over stdio they come this way too — and a
        // handshake-era upstream must not get it: `Raw` has it cut there.)
        Some(_) if !crate::wire::era::may_be_modern(Some(text)) => Params::Plain(text),
        Some(_) => Params::Raw(text),
        None => Params::Value(decoded),
    };
    // (Raw params have no progress token: `CallParams::parse` decodes those; `decoded` is
    // `null` for them. Looked up member by member: `Value::pointer` allocates for each step.)
    let progress_token = decoded.get("_meta").and_then(|m| m.get("progressToken"));
    Ok(Resolved {
        route,
        name,
        original,
        params,
        progress_token,
    })
}

/// The upstream serving `name` now, if a reload replaced `current` by another one that serves
/// it under the same name (`None`: nothing changed, or nothing serves it any more).
pub(crate) fn replacement(
    router: &Router,
    name: &str,
    current: &Arc<Upstream>,
    original: &str,
) -> Option<Arc<Upstream>> {
    let (route, now) = router.resolve(Kind::Tool, name)?;
    (!Arc::ptr_eq(&route.upstream, current) && now == original).then(|| route.upstream.clone())
}

/// The endpoint's upstreams by name, for messages ("a, b").
pub(crate) fn upstream_names(router: &Router) -> String {
    router
        .routes()
        .iter()
        .map(|r| r.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
