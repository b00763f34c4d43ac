//! Step 3 of a call: the retry engine over attempts. What counts as a failure, what may be
//! replayed and what the model is told are steadfast-mcp's (`ToolCall::run_judged`), the same
//! code the rmcp middleware runs; each attempt is [`attempt::send`].

use std::sync::Arc;

use steadfast::LlmError;
use steadfast_mcp::{CallFailure, ToolCall};

use super::Context;
use super::attempt::{self, Answer, Related};
use super::limits::Terms;
use super::resolve::{Resolved, replacement};
use super::span;
use crate::route::router::Router;
use crate::upstream::ProgressRoute;

/// Runs `call` under `terms`: attempts until one answers or the policy gives up. Each attempt
/// leaves the upstream's JSON-RPC error in `upstream_error` when it answered with one (see
/// `attempt::Related`).
pub(crate) async fn run(
    router: &Router,
    ctx: &Context<'_>,
    call: &Resolved<'_>,
    terms: &Terms,
    upstream_error: &std::sync::Mutex<Option<String>>,
) -> Result<Answer, LlmError> {
    let (upstream, tools) = (&call.route.upstream, &call.route.tools);
    let (name, original) = (call.name, &*call.original);
    let policy = &terms.entry.settings.policy;
    let mode = policy.retry_on_is_error;
    // One progress route for every attempt: its high-water mark spans retries (MCP requires
    // progress to increase).
    let progress = match (call.progress_token, &ctx.downstream) {
        (Some(t), Some(client)) => Some(ProgressRoute {
            client: client.clone(),
            token: t.to_string().into(),
            high: Arc::default(),
            activity: Arc::default(),
            stream: ctx.stream.clone(),
        }),
        _ => None,
    };
    let limit = terms.limit.as_ref();
    // Boxed: the engine's future is large, and this one is moved into a task (and its stages)
    // several times; a pointer moves cheaply.
    Box::pin(
        ToolCall::new(name, policy)
            .replays_ambiguous(terms.replay)
            .breaker(terms.entry.breaker.clone())
            .budget(tools.budget())
            .metrics(terms.listed.then(|| tools.metrics.tool(name)))
            .run_judged(
                ctx.cancel,
                |n| {
                    // A retry goes to whatever serves the tool now: a reload may have replaced
                    // the upstream this call started on (the old one fails every attempt at once).
                    let rerouted = if n > 1 {
                        replacement(router, name, upstream, original)
                    } else {
                        None
                    };
                    // Traced, the attempt runs in a CLIENT span (decided here, so that the
                    // untraced attempt is the one state machine it was).
                    let traced = steadfast::trace::listening().then(|| {
                        let u = rerouted.as_ref().unwrap_or(upstream);
                        (u.name.clone(), u.is_http())
                    });
                    let related = Related {
                        progress: progress.clone(),
                        origin: ctx.downstream.as_deref(),
                        stream: ctx.stream.clone(),
                        upstream_error: Some(upstream_error),
                    };
                    // Boxed: the engine moves each attempt's future into its timeout, its race
                    // with cancellation and its judge; a pointer moves cheaply, this one does not.
                    let attempt = Box::pin(async move {
                        let upstream = rerouted.as_ref().unwrap_or(upstream);
                        // Every attempt sent counts: a retry is a call.
                        if let Some((limit, keys)) = limit {
                            limit.acquire(keys).await.map_err(CallFailure::Limited)?;
                        }
                        attempt::send(upstream, call.params, related, terms.bounds).await
                    });
                    match traced {
                        None => futures::future::Either::Left(attempt),
                        Some((up, http)) => futures::future::Either::Right(Box::pin(
                            traced_attempt(attempt, up, http, original, n),
                        )),
                    }
                },
                move |answer: Answer| attempt::judge(mode, answer),
            ),
    )
    .await
}

/// One attempt in its CLIENT span `tools/call {tool}` (`tool`: the upstream's name for it).
#[inline(never)]
async fn traced_attempt(
    attempt: impl std::future::Future<Output = Result<Answer, CallFailure>>,
    upstream: String,
    http: bool,
    tool: &str,
    n: u32,
) -> Result<Answer, CallFailure> {
    let client = span::client("tools/call", span::Subject::Tool(tool), &upstream, http, n);
    attempt::in_span(client, attempt).await
}
