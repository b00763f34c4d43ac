//! `tools/call` through the retry engine, over raw JSON.
//!
//! Each attempt is a fresh upstream request (new id, new progress token) on whatever
//! connection is live; its idle timeout starts again on every progress message; a dropped
//! attempt cancels its upstream request. What counts as a failure, what may be replayed and
//! what the model is told are steadfast-mcp's (`ToolCall::run_judged`), the same code the rmcp
//! middleware runs. The result itself is relayed as the server wrote it.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ErrorData};
use serde_json::Value;
use steadfast_mcp::{CallFailure, ToolCall, llm_error_result};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::route::router::Kind;
use crate::session::{Session, span};
use crate::upstream::{Params, ProgressRoute, Reply};
use crate::wire::call_params::CallParams;
use crate::wire::jsonrpc;
use crate::wire::trace_context;

/// A raw result and whether it says `isError: true`.
pub(crate) struct Answer {
    pub(crate) raw: String,
    pub(crate) is_error: bool,
}

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
    if !steadfast::trace::listening() {
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
    let (tool, parent) = match &params {
        CallParams::Raw { text, name } => (
            text[name.clone()].to_owned(),
            trace_context::from_raw_params(text),
        ),
        CallParams::Value(v) => (
            v.get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            trace_context::from_params(v),
        ),
    };
    let server = span::server(
        session,
        "tools/call",
        id,
        span::Target::Tool(&tool),
        parent.as_ref(),
    );
    let started = Instant::now();
    let line = call(session, id, params, cancel)
        .instrument(server.clone())
        .await;
    let error = span::outcome_of(line.as_deref());
    span::end(&server, error.1);
    span::record_duration(
        span::Side::Server,
        "tools/call",
        session.router.resolve(Kind::Tool, &tool).map(|_| &*tool),
        error.0.as_deref(),
        started.elapsed(),
    );
    line
}

/// The call itself (in whatever span the caller made).
pub(crate) async fn call(
    session: &Arc<Session>,
    id: &str,
    params: CallParams,
    cancel: &CancellationToken,
) -> Option<Vec<u8>> {
    // Raw params go upstream as the client wrote them; decoded ones are written out per
    // attempt (with the attempt's progress token, or the upstream's own name for the tool).
    let (text, name_at, mut params) = match params {
        CallParams::Raw { text, name } => (text, Some(name), Value::Null),
        CallParams::Value(v) => (String::new(), None, v),
    };
    // `name` is the name the client sees: policies, breakers, limits and metrics go by it.
    let name: Cow<'_, str> = match &name_at {
        Some(at) => Cow::Borrowed(&text[at.clone()]),
        None => Cow::Owned(
            params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        ),
    };
    let name = &*name;
    let config = session.router.config();
    if config.health_tool.as_deref() == Some(name) {
        let r = crate::session::health::result(session);
        return Some(jsonrpc::result_response(id, &r.to_string()));
    }
    let Some((route, original)) = session.router.resolve(Kind::Tool, name) else {
        return Some(jsonrpc::error_response(
            id,
            jsonrpc::code::INVALID_PARAMS,
            &format!(
                "unknown tool `{}`: no upstream of this endpoint has it (upstreams: {})",
                steadfast::sanitize(name),
                session.upstream_names()
            ),
        ));
    };
    if original != name {
        // Only decoded params are namespaced (`CallParams::parse`).
        params["name"] = Value::String(original.to_string());
    }
    let (upstream, tools) = (&route.upstream, &route.tools);
    let listed = upstream.lists(&original);
    let started = Instant::now();
    let entry = tools.entry(name, listed);
    let policy = &entry.settings.policy;
    let (read_only, idempotent) = upstream.hints(&original);
    let replay = policy.retry_ambiguous.unwrap_or(read_only || idempotent);
    let idle = policy.idle_timeout();
    let max = policy.attempt_max;
    let mode = policy.retry_on_is_error;
    let max_size = upstream.settings().max_message_size;
    // The call's own stream (an HTTP POST answered with server-sent events), if any: progress
    // and the server's requests related to any attempt go there.
    let stream = session.client.request_stream(id);
    // (Raw params have no progress token: `CallParams::parse` decodes those; `params` is
    // `null` for them. Looked up member by member: `Value::pointer` allocates for each step.)
    let route = params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .map(|t| ProgressRoute {
            client: session.client.clone(),
            token: t.to_string().into(),
            high: Arc::default(),
            activity: Arc::default(),
            stream: stream.clone(),
        });
    let stream = &stream;
    let params = match name_at {
        Some(_) => Params::Raw(&text),
        None => Params::Value(&params),
    };
    let limit = tools.call_limit();
    let limit = limit.as_deref();
    // Built only when a limit counts them: three strings per call otherwise wasted.
    let keys = limit.map(|_| {
        steadfast::CallKeys::new()
            .session(session.limit_key())
            .tool(name.to_owned())
            .upstream(upstream.name.clone())
    });
    let keys = keys.as_ref();
    // Boxed: the engine's future is large, and this one is moved into a task (and its stages)
    // several times; a pointer moves cheaply.
    let upstream_name: &str = &original;
    let outcome = Box::pin(ToolCall::new(name, policy)
        .replays_ambiguous(replay)
        .breaker(entry.breaker.clone())
        .budget(tools.budget())
        .metrics(listed.then(|| tools.metrics.tool(name)))
        .run_judged(
            cancel,
            |n| {
                let route = route.clone();
                // A retry goes to whatever serves the tool now: a reload may have replaced the
                // upstream this call started on (the old one fails every attempt at once).
                let rerouted = if n > 1 {
                    replacement(session, name, upstream, &original)
                } else {
                    None
                };
                // Traced, the attempt runs in a CLIENT span (decided here, so that the untraced
                // attempt is the one state machine it was).
                let traced = steadfast::trace::listening().then(|| {
                    let u = rerouted.as_ref().unwrap_or(upstream);
                    (u.name.clone(), u.is_http())
                });
                // Boxed: the engine moves each attempt's future into its timeout, its race with
                // cancellation and its judge; a pointer moves cheaply, this future does not.
                let attempt = Box::pin(async move {
                    let upstream = rerouted.as_ref().unwrap_or(upstream);
                    {
                        // Every attempt sent counts: a retry is a call.
                        if let (Some(limit), Some(keys)) = (limit, keys) {
                            limit.acquire(keys).await.map_err(CallFailure::Limited)?;
                        }
                        let link = upstream.link().await.map_err(CallFailure::NotSent)?;
                        let activity = route.as_ref().map(|r| r.activity.clone());
                        let (guard, mut rx) = upstream.call_related(
                            &link,
                            "tools/call",
                            Some(params),
                            route,
                            Some(&*session.client),
                            stream.clone(),
                        );
                        let started = Instant::now();
                        let mut idle_deadline = idle.map(|d| started + d);
                        let hard_deadline = max.map(|d| started + d);
                        let reply = loop {
                            let progressed = async {
                                match &activity {
                                    Some(a) => a.notified().await,
                                    None => std::future::pending().await,
                                }
                            };
                            tokio::select! {
                                r = &mut rx => break r.unwrap_or(Reply::Lost("the request was dropped".to_owned())),
                                _ = progressed => {
                                    idle_deadline = idle.map(|d| Instant::now() + d);
                                }
                                _ = sleep_until(idle_deadline) => {
                                    return Err(timed_out(idle));
                                }
                                _ = sleep_until(hard_deadline) => {
                                    return Err(timed_out(max));
                                }
                            }
                        };
                        guard.finish();
                        into_answer(reply, max_size)
                    }
                });
                match traced {
                    None => futures::future::Either::Left(attempt),
                    Some((up, http)) => futures::future::Either::Right(Box::pin(traced_attempt(
                        attempt,
                        up,
                        http,
                        upstream_name,
                        n,
                    ))),
                }
            },
            move |answer: Answer| {
                if !answer.is_error {
                    return Ok(answer);
                }
                let Ok(result) = serde_json::from_str::<CallToolResult>(&answer.raw) else {
                    return Ok(answer);
                };
                match mode.judge(&result) {
                    Some(class) => Err(CallFailure::Tool(Box::new(result), class)),
                    None => Ok(answer),
                }
            },
        ))
        .await;
    // Labelled by name only for tools the upstream lists (the entry of an unlisted name is the
    // shared one, labelled `unlisted`): made-up names cannot grow the metric's label set.
    let label = metrics::SharedString::from(entry.label.clone());
    metrics::histogram!("steadfast_tool_call_duration_seconds", "tool" => label)
        .record(started.elapsed().as_secs_f64());
    if cancel.is_cancelled() {
        return None;
    }
    let result = match outcome {
        Ok(a) if a.is_error => crate::wire::sanitize::sanitize_error_result(&a.raw),
        Ok(a) => a.raw,
        Err(llm)
            if llm.code == steadfast::LlmErrorCode::ToolCallLimit
                && config.call_limits.on_limit == crate::config::OnLimit::JsonrpcError =>
        {
            return Some(jsonrpc::error_response(
                id,
                jsonrpc::code::CALL_LIMIT,
                &llm.message,
            ));
        }
        Err(mut llm) => {
            upstream.explain_down(&mut llm);
            // rmcp writes the 2026 `resultType`; a relay adds nothing the server's own
            // results would not have.
            let mut v = serde_json::to_value(llm_error_result(&llm)).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.remove("resultType");
            }
            v.to_string()
        }
    };
    Some(jsonrpc::result_response(id, &result))
}

/// One attempt in its CLIENT span `tools/call {tool}` (`tool`: the upstream's name for it),
/// with `mcp.client.operation.duration`.
#[inline(never)]
async fn traced_attempt(
    attempt: impl std::future::Future<Output = Result<Answer, CallFailure>>,
    upstream: String,
    http: bool,
    tool: &str,
    n: u32,
) -> Result<Answer, CallFailure> {
    let client = span::client("tools/call", span::Target::Tool(tool), &upstream, http, n);
    attempt_in(client, attempt).await
}

/// Runs an attempt in its CLIENT span `client` and records how it ended, with
/// `mcp.client.operation.duration` (durable calls' attempts too).
pub(crate) async fn attempt_in(
    client: tracing::Span,
    attempt: impl std::future::Future<Output = Result<Answer, CallFailure>>,
) -> Result<Answer, CallFailure> {
    use tracing::Instrument;
    let started = Instant::now();
    let result = attempt.instrument(client.clone()).await;
    let code;
    let outcome = match &result {
        Ok(a) if a.is_error => span::Outcome::ToolError,
        Ok(_) => span::Outcome::Ok,
        Err(CallFailure::Rpc(e)) => span::Outcome::Rpc(i64::from(e.code.0)),
        Err(CallFailure::Tool(..)) => span::Outcome::ToolError,
        Err(CallFailure::NotSent(_)) => span::Outcome::Other("not_sent"),
        Err(CallFailure::Lost(rmcp::ServiceError::Timeout { .. })) => {
            span::Outcome::Other("timeout")
        }
        Err(CallFailure::Lost(_)) => span::Outcome::Other("connection_lost"),
        Err(CallFailure::Limited(_)) => span::Outcome::Other("call_limit"),
        Err(_) => span::Outcome::Other("_OTHER"),
    };
    span::end(&client, outcome);
    let error = match outcome {
        span::Outcome::Ok => None,
        span::Outcome::ToolError => Some("tool_error"),
        span::Outcome::Rpc(c) => {
            code = c.to_string();
            Some(code.as_str())
        }
        span::Outcome::Other(e) => Some(e),
    };
    span::record_duration(
        span::Side::Client,
        "tools/call",
        None,
        error,
        started.elapsed(),
    );
    result
}

/// The upstream serving `name` now, if a reload replaced `current` by another one that serves
/// it under the same name (`None`: nothing changed, or nothing serves it any more).
fn replacement(
    session: &Session,
    name: &str,
    current: &Arc<crate::upstream::Upstream>,
    original: &str,
) -> Option<Arc<crate::upstream::Upstream>> {
    let (route, now) = session.router.resolve(Kind::Tool, name)?;
    (!Arc::ptr_eq(&route.upstream, current) && now == original).then(|| route.upstream.clone())
}

pub(crate) async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

pub(crate) fn timed_out(after: Option<std::time::Duration>) -> CallFailure {
    CallFailure::Lost(rmcp::ServiceError::Timeout {
        timeout: after.unwrap_or_default(),
    })
}

pub(crate) fn into_answer(reply: Reply, max_size: usize) -> Result<Answer, CallFailure> {
    match reply {
        Reply::Result(raw) => {
            // Every result is searched: the searcher is built once, not per result.
            static IS_ERROR: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
                std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"isError\""));
            let is_error = IS_ERROR.find(raw.as_bytes()).is_some()
                && serde_json::from_str::<Value>(&raw)
                    .ok()
                    .and_then(|v| v.get("isError").and_then(Value::as_bool))
                    .unwrap_or(false);
            Ok(Answer { raw, is_error })
        }
        Reply::Error(raw) => {
            let data: ErrorData = serde_json::from_str(&raw).unwrap_or_else(|_| {
                ErrorData::internal_error("the upstream sent an unreadable error", None)
            });
            Err(CallFailure::Rpc(data))
        }
        Reply::NotSent(why) => Err(CallFailure::NotSent(why)),
        Reply::Lost(_) => Err(CallFailure::Lost(rmcp::ServiceError::TransportClosed)),
        Reply::TooLarge(len) => Err(CallFailure::Rpc(ErrorData::invalid_request(
            format!(
                "the tool's reply ({len} bytes) exceeds max_message_size ({max_size} bytes); it cannot be relayed"
            ),
            None,
        ))),
        Reply::Http(status, body) => Err(CallFailure::Rpc(ErrorData::internal_error(
            format!(
                "HTTP {status}: {}",
                body.chars().take(300).collect::<String>()
            ),
            None,
        ))),
    }
}
