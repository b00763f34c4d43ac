//! A modern upstream's `input_required` answer to a handshake-era client's `tools/call`.
//!
//! A handshake-era client knows no embedded input requests: it answers requests the server
//! sends it. So the gateway puts each of the upstream's `inputRequests` to the client as a
//! request of its own (on the call's stream, if it has one), collects the answers, and sends
//! the call again with `inputResponses` and the upstream's `requestState` — at most
//! [`MAX_ROUNDS`] times, each request bounded by the upstream's `request_timeout` (the bound a
//! relayed server request has). The client sees one call and the server's requests during it,
//! as with a handshake-era server.

use std::sync::Arc;

use futures::future::Either;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{Caps, capability_for};
use crate::session::{Session, tool_call};
use crate::wire::call_params::CallParams;
use crate::wire::era;
use crate::wire::jsonrpc::{self, Envelope, code};

/// Rounds of input requests one call may take, at most.
pub(crate) const MAX_ROUNDS: usize = 8;

/// Input requests in one round, at most.
const MAX_REQUESTS: usize = super::MAX_ASKS;

/// Runs a handshake-era client's `tools/call` (as `tool_call::call`, or `run_traced` when
/// `traced`), completing a modern upstream's `input_required` answers with the client. With no
/// modern upstream the call's own future is returned, unwrapped.
pub(crate) fn call<'a>(
    session: &'a Arc<Session>,
    id: &'a str,
    params: CallParams,
    ct: &'a CancellationToken,
    traced: bool,
) -> impl std::future::Future<Output = Option<Vec<u8>>> + Send + 'a {
    let modern = session
        .router
        .routes()
        .iter()
        .any(|r| r.upstream.is_modern());
    if !modern {
        return Either::Left(once(session, id, params, ct, traced));
    }
    Either::Right(Box::pin(rounds(session, id, params, ct, traced)))
}

fn once<'a>(
    session: &'a Arc<Session>,
    id: &'a str,
    params: CallParams,
    ct: &'a CancellationToken,
    traced: bool,
) -> impl std::future::Future<Output = Option<Vec<u8>>> + Send + 'a {
    if traced {
        Either::Left(Box::pin(tool_call::run_traced(session, id, params, ct)))
    } else {
        Either::Right(tool_call::call(session, id, params, ct))
    }
}

/// The call, then a round per `input_required` answer.
async fn rounds(
    session: &Arc<Session>,
    id: &str,
    params: CallParams,
    ct: &CancellationToken,
    traced: bool,
) -> Option<Vec<u8>> {
    let original: Option<Value> = match &params {
        CallParams::Value(v) => Some(v.clone()),
        CallParams::Raw { text, .. } => serde_json::from_str(text).ok(),
    };
    let mut line = Box::pin(once(session, id, params, ct, traced)).await?;
    for _ in 0..MAX_ROUNDS {
        let Some((requests, state)) = input_required(&line) else {
            return Some(line);
        };
        let responses = match fulfil(session, id, &requests, ct).await {
            Ok(r) => r,
            Err(answer) => return answer,
        };
        let mut next = original.clone().unwrap_or_else(|| json!({}));
        next["inputResponses"] = Value::Object(responses);
        match state {
            Some(s) => next["requestState"] = Value::String(s),
            None => {
                if let Some(p) = next.as_object_mut() {
                    p.remove("requestState");
                }
            }
        }
        line = Box::pin(once(session, id, CallParams::Value(next), ct, traced)).await?;
    }
    if input_required(&line).is_none() {
        return Some(line);
    }
    Some(jsonrpc::error_response(
        id,
        code::INTERNAL_ERROR,
        &format!(
            "the upstream asked for input more than {MAX_ROUNDS} times for one call; the \
             gateway gave up (each round was answered by the client)"
        ),
    ))
}

/// An `input_required` result's requests (at least one, as this path serves them) and state.
fn input_required(line: &[u8]) -> Option<(Map<String, Value>, Option<String>)> {
    static MARK: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"input_required\""));
    MARK.find(line)?;
    let (env, _) = Envelope::parse(line).ok()?;
    let result: Value = serde_json::from_str(env.result?.get()).ok()?;
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return None;
    }
    let requests = result
        .get("inputRequests")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let state = result
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Some((requests, state))
}

/// Puts each input request to the client and collects the answers by key; `Err` with the
/// line answering the call (`None`: the client cancelled it) when one cannot be had.
async fn fulfil(
    session: &Arc<Session>,
    id: &str,
    requests: &Map<String, Value>,
    ct: &CancellationToken,
) -> Result<Map<String, Value>, Option<Vec<u8>>> {
    let fail = |code: i64, message: String, data: Option<Value>| {
        let mut e = json!({"code": code, "message": steadfast::sanitize(&message)});
        if let Some(d) = data {
            e["data"] = d;
        }
        Err(Some(jsonrpc::raw_error_response(id, &e.to_string())))
    };
    if requests.is_empty() || requests.len() > MAX_REQUESTS {
        return fail(
            code::INTERNAL_ERROR,
            format!(
                "the upstream answered input_required with {} input requests (the gateway \
                 puts 1 to {MAX_REQUESTS} to a client; a state-only round is not supported)",
                requests.len()
            ),
            None,
        );
    }
    // Every request checked before any is put to the client: none is asked for a call that
    // fails on the next one.
    let caps = session.handshake_capabilities();
    for request in requests.values() {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        if let Err((code, message, data)) = askable(method, caps) {
            return fail(code, message, data);
        }
    }
    let bound = session.upstream().settings().request_timeout;
    let stream = session.request_stream(id);
    let mut waits = Vec::with_capacity(requests.len());
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let params = request.get("params").map(Value::to_string);
        match session
            .client
            .ask(method, params.as_deref(), stream.clone(), bound)
        {
            Ok(rx) => waits.push(async move {
                match rx.await {
                    Ok(Ok(result)) => Ok((key.clone(), result)),
                    Ok(Err(error)) => Err(Refused::Client(error)),
                    Err(_) => Err(Refused::Timeout),
                }
            }),
            Err(declined) => return fail(declined.code, declined.message, declined.data),
        }
    }
    // The first refusal ends the wait for the others (their answers are not needed).
    let answers = tokio::select! {
        a = futures::future::try_join_all(waits) => a,
        _ = ct.cancelled() => return Err(None),
    };
    match answers {
        Ok(answers) => Ok(answers
            .into_iter()
            .map(|(key, result)| {
                let v = serde_json::from_str(&result).unwrap_or_else(|_| json!({}));
                (key, v)
            })
            .collect()),
        // The client refused: its error answers the call.
        Err(Refused::Client(error)) => {
            let error = crate::upstream::sanitize_error_object(&error);
            Err(Some(jsonrpc::raw_error_response(id, &error)))
        }
        Err(Refused::Timeout) => fail(
            code::UPSTREAM_TIMEOUT,
            format!(
                "the client did not answer the upstream's input request within {bound:?} \
                 (the proxy's request_timeout)"
            ),
            None,
        ),
    }
}

/// Why an input request put to the client got no result.
enum Refused {
    /// The client answered with this error object.
    Client(String),
    /// No answer within the bound.
    Timeout,
}

/// Whether a handshake-era client with `caps` can be asked `method`; the error answering the
/// call otherwise.
fn askable(method: &str, caps: Caps) -> Result<(), (i64, String, Option<Value>)> {
    match capability_for(method) {
        Some(c) if caps.has(c) => Ok(()),
        Some(c) => Err((
            era::code::MISSING_CLIENT_CAPABILITY,
            format!(
                "the upstream needs to ask the client {method}, and the client did not \
                 declare the {c} capability in initialize"
            ),
            Some(json!({"requiredCapabilities": {c: {}}})),
        )),
        None => Err((
            code::INTERNAL_ERROR,
            format!("the upstream asked for input the gateway cannot put to a client: {method:?}"),
            None,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_input_required_results_are_taken() {
        let line = br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}},"requestState":"s"}}"#;
        let (r, s) = input_required(line).unwrap();
        assert_eq!(r["a"]["method"], "roots/list");
        assert_eq!(s.as_deref(), Some("s"));
        let text = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\"input_required\""}]}}"#;
        assert!(
            input_required(text).is_none(),
            "a mention is not a result type"
        );
        assert!(input_required(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).is_none());
    }
}
