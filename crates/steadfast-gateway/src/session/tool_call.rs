//! A session's `tools/call`: the health tool answered here, every other tool run by `call/`
//! with a [`Context`] built from the session.

use std::sync::Arc;

use steadfast::trace::listening;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::call::span::{Side, Subject, record_duration};
use crate::call::{Context, Request};
use crate::route::router::Kind;
use crate::session::{Session, span};
use crate::wire::call_params::CallParams;
use crate::wire::jsonrpc;

/// Runs one `tools/call`; the line answering it, or `None` if the client cancelled it.
///
/// Traced (someone listens: `steadfast::trace::listening`), the call runs in a SERVER span
/// `tools/call {tool}`, child of the client's `_meta.traceparent`; the engine's
/// `execute_tool` span and each attempt's CLIENT span are under it.
/// Not an `async fn`: untraced, the call's own future is returned (no extra state machine
/// around it); traced, a boxed one, so the untraced future stays the size it was.
pub fn run<'a>(
    session: &'a Arc<Session>,
    id: &'a str,
    params: CallParams,
    cancel: &'a CancellationToken,
) -> impl std::future::Future<Output = Option<Vec<u8>>> + 'a {
    use futures::future::Either;
    if !listening() {
        return Either::Left(call(session, id, params, cancel));
    }
    Either::Right(Box::pin(run_traced(session, id, params, cancel)))
}

/// `run` in its SERVER span, with `mcp.server.operation.duration`.
#[inline(never)]
pub(crate) async fn run_traced(
    session: &Arc<Session>,
    id: &str,
    params: CallParams,
    cancel: &CancellationToken,
) -> Option<Vec<u8>> {
    use tracing::Instrument;
    let request = Request::new(params);
    let tool = request.name().to_owned();
    let parent = request.trace_parent();
    let server = span::server(
        session,
        "tools/call",
        id,
        Subject::Tool(&tool),
        parent.as_ref(),
    );
    let started = Instant::now();
    let line = call_request(session, id, request, cancel)
        .instrument(server.clone())
        .await;
    let error = span::outcome_of(line.as_deref());
    crate::call::span::end(&server, error.1);
    record_duration(
        Side::Server,
        "tools/call",
        session.router.resolve(Kind::Tool, &tool).map(|_| &*tool),
        error.0.as_deref(),
        started.elapsed(),
    );
    line
}

/// The call itself (in whatever span the caller made). Not an `async fn`: one state machine
/// less around the call.
pub(crate) fn call<'a>(
    session: &'a Arc<Session>,
    id: &'a str,
    params: CallParams,
    cancel: &'a CancellationToken,
) -> impl std::future::Future<Output = Option<Vec<u8>>> + 'a {
    call_request(session, id, Request::new(params), cancel)
}

/// The health tool's answer at once, or the call `call/` runs: the future returned is
/// `call::run`'s own (no state machine of this function's around it).
fn call_request<'a>(
    session: &'a Arc<Session>,
    id: &'a str,
    request: Request,
    cancel: &'a CancellationToken,
) -> impl std::future::Future<Output = Option<Vec<u8>>> + 'a {
    use futures::future::Either;
    let config = session.router.config();
    if config.health_tool.as_deref() == Some(request.name()) {
        let r = crate::session::health::result(session);
        let line = jsonrpc::result_response(id, &r.to_string());
        return Either::Left(std::future::ready(Some(line)));
    }
    let ctx = Context {
        id,
        cancel,
        caller: &**session,
        downstream: Some(session.client.clone()),
        // The call's own stream (an HTTP POST answered with server-sent events), if any:
        // progress and the server's requests related to any attempt go there.
        stream: session.request_stream(id),
    };
    // Boxed: the call's future is large, and the spawned task that holds this one is moved
    // through the runtime's layers; a pointer moves cheaply.
    let on_limit = config.call_limits.on_limit;
    Either::Right(Box::pin(crate::call::run(
        &session.router,
        ctx,
        request,
        on_limit,
    )))
}
