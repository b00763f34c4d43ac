//! One `tools/call`, for whoever asks: a live call from a session (through the retry engine)
//! or one attempt of a durable call (a job of `tasks/`).
//!
//! A live call is four steps — [`resolve`] (which upstream, which name), [`limits`] (policy,
//! replay rule, call limit), [`engine`] (attempts until one answers or the policy gives up),
//! [`outcome`] (the line answering the client) — and every attempt, live or durable, is
//! [`attempt::send`]: a fresh upstream request with its idle and hard timeouts. The result is
//! relayed as the server wrote it. What the call needs of its caller is a [`Context`]; this
//! layer knows nothing of sessions or tasks.

pub(crate) mod attempt;
mod engine;
pub(crate) mod limits;
mod outcome;
pub(crate) mod resolve;
pub(crate) mod span;

use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub(crate) use attempt::Answer;
pub(crate) use resolve::Request;

use crate::config::OnLimit;
use crate::route::router::Router;
use crate::upstream::Downstream;
use crate::wire::jsonrpc;
use crate::wire::outbound::Outbound;

/// Who asked for a call, and where what it relates goes.
pub(crate) struct Context<'a> {
    /// The client's request id (raw JSON): the answer is written for it.
    pub(crate) id: &'a str,
    /// Cancelled when the client cancels the request: the call stops and is not answered.
    pub(crate) cancel: &'a CancellationToken,
    /// Who asked, as call limits count; asked only when a limit is configured.
    pub(crate) caller: &'a dyn Caller,
    /// The client: progress for its token and the server's requests related to the call go
    /// there.
    pub(crate) downstream: Option<Arc<dyn Downstream>>,
    /// The request's own stream (an HTTP POST answered with server-sent events), if any:
    /// preferred to the client's queue for what the call relates.
    pub(crate) stream: Option<Arc<Outbound>>,
}

/// Who asked for a call, as call limits count it (a session, or a token's subject).
pub(crate) trait Caller: Sync {
    /// The key call limits count this caller's calls by.
    fn limit_key(&self) -> String;
}

/// Runs `request` for `ctx` over `router`'s upstreams; the line answering it (a call limit's
/// refusal as `on_limit` says), or `None` if the client cancelled it. Takes the context by
/// value so that a caller can return this future as it is (no state machine around it).
pub(crate) async fn run(
    router: &Router,
    ctx: Context<'_>,
    mut request: Request,
    on_limit: OnLimit,
) -> Option<Vec<u8>> {
    let ctx = &ctx;
    let call = match resolve::resolve(router, &mut request) {
        Ok(call) => call,
        Err(unknown) => {
            return Some(jsonrpc::error_response(
                ctx.id,
                jsonrpc::code::INVALID_PARAMS,
                &unknown,
            ));
        }
    };
    let started = Instant::now();
    let terms = limits::terms(&call, ctx);
    let upstream_error = std::sync::Mutex::new(None);
    let outcome = engine::run(router, ctx, &call, &terms, &upstream_error).await;
    let upstream_error = upstream_error
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    let failed = outcome::Failed {
        upstream_error: upstream_error.as_deref(),
    };
    outcome::answer(
        ctx,
        on_limit,
        &call,
        &terms,
        started.elapsed(),
        outcome,
        failed,
    )
}
