//! Step 2 of a call: the terms it runs under — the tool's policy and breaker, whether it may
//! be replayed, the call limit and the keys it counts by.

use std::sync::Arc;

use steadfast::{CallKeys, CallLimit};

use super::Context;
use super::attempt::Timeouts;
use super::resolve::Resolved;
use crate::route::shared::Counter;
use crate::route::tools::ToolEntry;

/// What a resolved call runs under.
pub(crate) struct Terms {
    /// The tool's entry: policy, breaker, metric label (the shared one for unlisted tools).
    pub(crate) entry: Arc<ToolEntry>,
    /// The upstream lists the tool (its metrics are kept by name).
    pub(crate) listed: bool,
    /// An ambiguous failure may be retried (the policy says so, or the tool is read-only or
    /// idempotent).
    pub(crate) replay: bool,
    /// Each attempt's time bounds.
    pub(crate) bounds: Timeouts,
    /// The call limit, if one is configured, with the keys this call counts by.
    pub(crate) limit: Option<(Arc<CallLimit<Counter>>, CallKeys)>,
}

/// The terms of `call`, asked for by `ctx`'s caller.
pub(crate) fn terms(call: &Resolved<'_>, ctx: &Context<'_>) -> Terms {
    let (upstream, tools) = (&call.route.upstream, &call.route.tools);
    let facts = upstream.facts(&call.original);
    let listed = facts.listed;
    let entry = tools.entry(call.name, listed);
    let policy = &entry.settings.policy;
    let replay = policy
        .retry_ambiguous
        .unwrap_or(facts.read_only || facts.idempotent);
    let bounds = Timeouts::of(policy);
    // Keys built only when a limit counts them: three strings per call otherwise wasted.
    let limit = tools.call_limit().map(|limit| {
        let keys = keys(ctx.caller.limit_key(), call.name, &upstream.name);
        (limit, keys)
    });
    Terms {
        entry,
        listed,
        replay,
        bounds,
        limit,
    }
}

/// The keys a call limit counts a call by: who asked, the tool as clients name it, its upstream.
pub(crate) fn keys(caller: String, tool: &str, upstream: &str) -> CallKeys {
    CallKeys::new()
        .session(caller)
        .tool(tool.to_owned())
        .upstream(upstream.to_owned())
}
