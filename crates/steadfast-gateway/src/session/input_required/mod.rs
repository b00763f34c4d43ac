//! Multi round-trip requests (MCP 2026-07-28) for modern clients in front of handshake-era
//! upstreams.
//!
//! A handshake-era server asks its client (sampling, elicitation, roots) with a request of its
//! own while it works on a call; a modern client cannot answer such a request (the revision
//! has none from server to client). So when one arrives for a modern client's `tools/call`,
//! `prompts/get` or `resources/read`, the gateway answers the client's request with
//! `resultType: "input_required"`, carrying the server's request under a key
//! (`inputRequests: {key: {method, params}}`) and an unguessable `requestState`, and
//! **parks** the call: the upstream request stays in flight, its server request unanswered.
//! The client fulfils the input request and sends its request again with
//! `inputResponses: {key: result}` and that `requestState`; the gateway answers the server's
//! request with the client's result and answers the retried request with the call's eventual
//! result — or with the next `input_required` if the server asks again.
//!
//! Bounds: at most [`MAX_PARKED`] calls parked in the process; a parked call not resumed
//! within the upstream's `request_timeout` (the bound a relayed server request has) is
//! cancelled upstream and forgotten; at most [`MAX_ASKS`] server requests outstanding per
//! call. A parked call lives in this process: a retry that reaches another replica (or comes
//! after the bound, or twice) gets `-32602` naming `requestState`, and starts over.
//!
//! Only for clients that declared the capability the server's request needs in the request's
//! `_meta` client capabilities; otherwise the server hears `-32021` (missing client capability,
//! with `requiredCapabilities`), as the Python SDK's servers say it.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::session::client::{Client, Moved};
use crate::session::{Registered, Session};
pub(crate) use crate::upstream::capability_for;
use crate::wire::era;
use crate::wire::jsonrpc::{self, Envelope, code};

pub(crate) mod handshake;
pub(crate) mod runs;

pub(crate) use runs::{Caps, MAX_ASKS, ServerAsk};
use runs::{EVENTS, Event, NEXT_RUN, RunLink};

/// The methods whose result may be `input_required` (the Python SDK's
/// `INPUT_REQUIRED_METHODS`): its client drives the retry loop for these only.
pub(crate) const METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// What every `requestState` the gateway mints starts with: a retry carrying another state
/// (a modern upstream's own) is relayed to the upstream as before.
pub(crate) const STATE_PREFIX: &str = "steadfast-mrtr.";

/// Calls parked in this process at once, at most.
pub(crate) const MAX_PARKED: usize = 1024;

/// A parkable request's run: the call's future sends its answer here; the responder
/// ([`answer_first`]) gets it, or the server's requests first.
pub(crate) struct Run {
    link: Arc<RunLink>,
    rx: mpsc::Receiver<Event>,
    /// Cancels the call (upstream too): the client cancelled, or a parked call expired.
    pub(crate) cancel: CancellationToken,
}

/// Ends the run's registration with its client when the call's task ends.
pub(crate) struct RunGuard {
    session: Arc<Session>,
    link: Arc<RunLink>,
    /// The first request's progress token (raw JSON), if it asked for progress: its moves
    /// end with the call (`Client::move_progress`).
    token: Option<String>,
}

impl RunGuard {
    /// Hands the call's answer to whoever answers the client now. Waits for room when the
    /// server's requests fill the queue (a parked call's retry drains it); the receiver is gone
    /// when the call was cancelled or its park dropped or expired, which ends the wait.
    pub(crate) async fn done(&self, line: Option<Vec<u8>>) {
        let _ = self.link.tx.send(Event::Done(line)).await;
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.session.client.runs().remove(&self.link);
        if let Some(t) = &self.token {
            self.session.client.end_moved_progress(t);
        }
    }
}

/// A request's progress token (raw JSON), if it asked for progress.
fn progress_token(params: &Value) -> Option<String> {
    params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_number())
        .map(Value::to_string)
}

/// A run for a modern request of `method` with `params`, when it may be answered with
/// `input_required` (one of [`METHODS`], from a client that declared some input capability),
/// registered with the session's client; with the guard its call's task holds.
fn begin(
    session: &Arc<Session>,
    id: &str,
    method: &str,
    params: &Value,
) -> Option<(Run, RunGuard)> {
    if !METHODS.contains(&method) {
        return None;
    }
    let caps = Caps::of(params);
    if !caps.any() {
        return None;
    }
    let (tx, rx) = mpsc::channel(EVENTS);
    let link = Arc::new(RunLink {
        serial: NEXT_RUN.fetch_add(1, Ordering::Relaxed),
        caps,
        stream: session.request_stream(id),
        tx,
    });
    session.client.runs().lock().push(link.clone());
    let guard = RunGuard {
        session: session.clone(),
        link: link.clone(),
        token: progress_token(params),
    };
    let run = Run {
        link,
        rx,
        cancel: CancellationToken::new(),
    };
    Some((run, guard))
}

/// What a modern request's task holds while its call runs (see [`prepare`]).
pub(crate) struct Prepared {
    /// The request's registration, unless [`answer_first`] holds it (a run).
    pub(crate) reg: Option<Registered>,
    /// The run's guard, when the request may be answered `input_required`.
    pub(crate) run: Option<RunGuard>,
    /// What cancels the call: the request's own, or the run's.
    pub(crate) ct: CancellationToken,
    /// A session of one HTTP request, findable by the upstream while it runs.
    pub(crate) transient: Option<crate::upstream::Transient>,
}

/// Prepares a modern request's call: when it may be answered `input_required` ([`begin`]),
/// a responder ([`answer_first`]) is spawned that holds `reg` and watches `ct`, and the call
/// is cancelled by the run instead.
pub(crate) fn prepare(
    session: &Arc<Session>,
    method: &str,
    params: &Value,
    reg: Registered,
    ct: CancellationToken,
) -> Prepared {
    let Some((run, guard)) = begin(session, reg.id(), method, params) else {
        return Prepared {
            reg: Some(reg),
            run: None,
            ct,
            transient: None,
        };
    };
    // A session of one HTTP request is no upstream's client: findable while its call runs,
    // so the server's requests reach the run. (Without a run, its serial says it is a
    // transient client, and the server hears -32021 at once: `upstream/inbound.rs`.)
    let transient = session.stateless.then(|| {
        let client: Arc<dyn crate::upstream::Downstream> = session.client.clone();
        crate::upstream::register_transient(&client)
    });
    let cancel = run.cancel.clone();
    tokio::spawn(answer_first(
        session.clone(),
        method.to_owned(),
        params.clone(),
        run,
        ct,
        reg,
    ));
    Prepared {
        reg: None,
        run: Some(guard),
        ct: cancel,
        transient,
    }
}

/// What a parked call is bound to: a retry must be the same request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Binding {
    method: String,
    /// The tool or prompt name, or the resource URI.
    target: String,
    /// The token's subject, when the front identified the client (`[auth]`).
    principal: Option<String>,
}

impl Binding {
    fn of(session: &Session, method: &str, params: &Value) -> Self {
        let key = if method == "resources/read" {
            "uri"
        } else {
            "name"
        };
        Self {
            method: method.to_owned(),
            target: params
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            principal: session
                .identity()
                .map(|i| i.sub.clone())
                .filter(|s| !s.is_empty()),
        }
    }
}

/// A call between rounds: its answer channel, and the server's requests the client has not
/// answered yet (each under its key).
struct Parked {
    rx: mpsc::Receiver<Event>,
    cancel: CancellationToken,
    asks: Vec<(String, ServerAsk)>,
    next_key: u64,
    binding: Binding,
    /// A parked call not resumed within this is cancelled.
    bound: Duration,
    /// The client whose request started the call and that request's progress token (raw
    /// JSON): the call's progress is dropped while it is parked (its request is answered),
    /// and goes to the retry, with the retry's token, once resumed.
    progress: Option<(Weak<Client>, String)>,
}

impl Parked {
    fn take(&mut self, ask: ServerAsk) {
        if self.asks.len() >= MAX_ASKS {
            let line = jsonrpc::error_response(
                &ask.id,
                code::OVERLOADED,
                &format!("too many requests from the server await the client (at most {MAX_ASKS})"),
            );
            ask.reply(line);
            return;
        }
        if self.asks.is_empty() {
            self.bound = ask.bound();
        }
        self.next_key += 1;
        self.asks.push((format!("input-{}", self.next_key), ask));
    }

    /// Relays the client's `inputResponses` to the server requests they answer.
    fn answer(&mut self, responses: Option<&Map<String, Value>>) {
        let Some(responses) = responses else { return };
        self.asks.retain(|(key, ask)| match responses.get(key) {
            Some(r) => {
                ask.reply(jsonrpc::result_response(&ask.id, &r.to_string()));
                false
            }
            None => true,
        });
    }

    /// The `input_required` result: every request the client has not answered.
    fn result(&self, state: &str) -> String {
        let requests: Map<String, Value> = self
            .asks
            .iter()
            .map(|(k, a)| (k.clone(), a.as_input_request()))
            .collect();
        json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": state,
        })
        .to_string()
    }
}

impl Drop for Parked {
    /// A parked call dropped (expired, cancelled by the client, the table full) is cancelled
    /// upstream, and the server's requests still open are answered with an error.
    fn drop(&mut self) {
        // The server hears the answers to its requests before the call's cancellation.
        for (_, ask) in self.asks.drain(..) {
            ask.reply(jsonrpc::error_response(
                &ask.id,
                code::INTERNAL_ERROR,
                "the client did not answer (its request was not resumed)",
            ));
        }
        self.cancel.cancel();
    }
}

struct Entry {
    parked: Parked,
    timer: AbortHandle,
}

/// Parked calls by `requestState`.
static PARKED: LazyLock<Mutex<HashMap<String, Entry>>> = LazyLock::new(Mutex::default);

fn table() -> std::sync::MutexGuard<'static, HashMap<String, Entry>> {
    PARKED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Parks `parked` under a new state; the line answering request `id` with `input_required`.
fn park(parked: Parked, id: &str) -> Vec<u8> {
    if let Some((client, token)) = &parked.progress
        && let Some(client) = client.upgrade()
    {
        client.move_progress(token, Moved::Parked);
    }
    let state = format!("{STATE_PREFIX}{}", crate::wire::secret_id::random_hex());
    let result = parked.result(&state);
    let bound = parked.bound;
    let mut map = table();
    if map.len() >= MAX_PARKED {
        drop(map);
        drop(parked); // cancelled upstream
        return jsonrpc::error_response(
            id,
            code::OVERLOADED,
            &format!(
                "too many calls await their clients' input (at most {MAX_PARKED}); retry later"
            ),
        );
    }
    let key = state.clone();
    let timer = tokio::spawn(async move {
        tokio::time::sleep(bound).await;
        let gone = table().remove(&key);
        if let Some(e) = gone {
            tracing::info!(
                method = %e.parked.binding.method,
                "a call awaiting its client's input was not resumed within {bound:?}; cancelled"
            );
        }
    });
    map.insert(
        state,
        Entry {
            parked,
            timer: timer.abort_handle(),
        },
    );
    jsonrpc::result_response(id, &result)
}

/// The refusal of a `requestState` the gateway does not hold (or not for this request).
fn invalid_state(id: &str, why: &str) -> Vec<u8> {
    let error = json!({
        "code": code::INVALID_PARAMS,
        "message": format!(
            "invalid requestState: {why}; send the request again without requestState and \
             inputResponses to start over"
        ),
        "data": {"reason": "invalid_request_state", "field": "requestState"},
    });
    jsonrpc::raw_error_response(id, &error.to_string())
}

/// The gateway's `requestState` in a modern request's params, if it carries one (another
/// one, a modern upstream's, is the upstream's to read).
pub(crate) fn state_of(params: &Value) -> Option<&str> {
    params
        .get("requestState")
        .and_then(Value::as_str)
        .filter(|s| s.starts_with(STATE_PREFIX))
}

/// Answers the first request of a run: the call's result, or `input_required` when the server
/// asks first. `reg` (the request's registration) ends with the answer.
pub(crate) async fn answer_first(
    session: Arc<Session>,
    method: String,
    params: Value,
    run: Run,
    ct: CancellationToken,
    reg: Registered,
) {
    let id = reg.id().clone();
    let Run { link, rx, cancel } = run;
    drop(link);
    let parked = Parked {
        rx,
        cancel,
        asks: Vec::new(),
        next_key: 0,
        binding: Binding::of(&session, &method, &params),
        bound: Duration::from_secs(60),
        progress: progress_token(&params).map(|t| (Arc::downgrade(&session.client), t)),
    };
    let line = drive(&session, &id, &method, parked, &ct).await;
    if let Some(line) = line {
        reg.answer(line);
    }
}

/// Serves a retry carrying the gateway's `requestState` (`state`): the client's
/// `inputResponses` go to the server, then the call's answer or the next `input_required`.
pub(crate) async fn resume(
    session: &Arc<Session>,
    id: &str,
    method: &str,
    params: &Value,
    state: &str,
    ct: &CancellationToken,
) -> Option<Vec<u8>> {
    let binding = Binding::of(session, method, params);
    let entry = {
        let mut map = table();
        match map.get(state) {
            None => None,
            Some(e) if e.parked.binding != binding => {
                let b = &e.parked.binding;
                let line = invalid_state(
                    id,
                    &format!(
                        "it was issued for {} of '{}' by another client or for another request",
                        b.method,
                        steadfast::sanitize(&b.target)
                    ),
                );
                return Some(line);
            }
            Some(_) => map.remove(state),
        }
    };
    let Some(Entry { mut parked, timer }) = entry else {
        let bound = session.upstream().settings().request_timeout;
        return Some(invalid_state(
            id,
            &format!(
                "this gateway holds no call under it (a parked call is kept {bound:?} by the \
                 replica that answered input_required, and each state is used once)"
            ),
        ));
    };
    timer.abort();
    if let Some((client, token)) = &parked.progress
        && let Some(client) = client.upgrade()
    {
        // A retry without a token asked for no progress: none is sent.
        let to = match params.get("_meta").and_then(|m| m.get("progressToken")) {
            Some(t) if t.is_string() || t.is_number() => Moved::To {
                token: t.clone(),
                client: Arc::downgrade(&session.client),
                stream: session.request_stream(id),
            },
            _ => Moved::Parked,
        };
        client.move_progress(token, to);
    }
    parked.answer(params.get("inputResponses").and_then(Value::as_object));
    drive(session, id, method, parked, ct).await
}

/// Waits for the call's answer or the server's next request; the line answering `id`
/// (`None`: the client cancelled, and the call with it).
async fn drive(
    session: &Arc<Session>,
    id: &str,
    method: &str,
    mut parked: Parked,
    ct: &CancellationToken,
) -> Option<Vec<u8>> {
    loop {
        if !parked.asks.is_empty() {
            return Some(park(parked, id));
        }
        let event = tokio::select! {
            e = parked.rx.recv() => e,
            // Dropping the parked call cancels it upstream.
            _ = ct.cancelled() => return None,
        };
        match event {
            Some(Event::Input(ask)) => {
                parked.take(ask);
                // Requests sent together go to the client together; an answer queued behind
                // them wins (the server is done).
                while let Ok(e) = parked.rx.try_recv() {
                    match e {
                        Event::Input(ask) => parked.take(ask),
                        Event::Done(line) => return line.map(|l| finish(session, method, id, &l)),
                    }
                }
            }
            Some(Event::Done(line)) => return line.map(|l| finish(session, method, id, &l)),
            None => {
                return Some(jsonrpc::error_response(
                    id,
                    code::INTERNAL_ERROR,
                    "the call ended without an answer",
                ));
            }
        }
    }
}

/// The call's answer (written for the run's first request) as the answer to `id`, as a
/// modern client gets it.
fn finish(session: &Session, method: &str, id: &str, line: &[u8]) -> Vec<u8> {
    let line = match Envelope::parse(line) {
        Ok((env, _)) => match (env.result, env.error) {
            (Some(r), _) => jsonrpc::result_response(id, r.get()),
            (_, Some(e)) => jsonrpc::raw_error_response(id, e.get()),
            _ => line.to_vec(),
        },
        Err(_) => line.to_vec(),
    };
    let line = session.filter_list(method, line);
    era::complete_result_for(method, id, &line).unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::runs::missing_capability;
    use super::*;

    #[test]
    fn caps_come_from_the_envelope() {
        let p = json!({"_meta": {era::CLIENT_CAPABILITIES: {"elicitation": {"form": {}}, "roots": {}}}});
        let c = Caps::of(&p);
        assert!(c.elicitation && c.roots && !c.sampling);
        assert!(!Caps::of(&json!({"_meta": {era::CLIENT_CAPABILITIES: {}}})).any());
        assert!(!Caps::of(&json!({})).any());
    }

    #[test]
    fn missing_capability_names_it() {
        let r = missing_capability("sampling/createMessage");
        assert_eq!(r.code, -32021);
        assert!(r.message.contains("sampling capability"), "{}", r.message);
        assert_eq!(
            r.data,
            Some(json!({"requiredCapabilities": {"sampling": {}}}))
        );
    }

    #[test]
    fn only_our_states_are_ours() {
        assert_eq!(
            state_of(&json!({"requestState": "steadfast-mrtr.abc"})),
            Some("steadfast-mrtr.abc")
        );
        assert_eq!(state_of(&json!({"requestState": "v1.upstream"})), None);
        assert_eq!(state_of(&json!({})), None);
    }

    /// A call parked and never resumed is cancelled (and forgotten) at its bound, not before.
    #[tokio::test(start_paused = true)]
    async fn a_parked_call_not_resumed_is_cancelled_at_its_bound() {
        let (_tx, rx) = mpsc::channel(1);
        let cancel = CancellationToken::new();
        let parked = Parked {
            rx,
            cancel: cancel.clone(),
            asks: Vec::new(),
            next_key: 0,
            binding: Binding {
                method: "tools/call".into(),
                target: "t".into(),
                principal: None,
            },
            bound: Duration::from_secs(5),
            progress: None,
        };
        let line: Value = serde_json::from_slice(&park(parked, "7")).unwrap();
        assert_eq!(line["id"], 7);
        let state = line["result"]["requestState"].as_str().unwrap().to_owned();
        assert!(state.starts_with(STATE_PREFIX) && state.len() == STATE_PREFIX.len() + 32);
        assert!(table().contains_key(&state));
        tokio::time::sleep(Duration::from_millis(4_900)).await;
        assert!(!cancel.is_cancelled() && table().contains_key(&state));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(cancel.is_cancelled(), "cancelled upstream");
        assert!(!table().contains_key(&state), "forgotten");
    }

    #[test]
    fn input_requests_carry_method_and_params() {
        let ask = ServerAsk {
            upstream: Weak::new(),
            generation: 1,
            id: "\"s-1\"".into(),
            method: "elicitation/create".into(),
            params: Some(r#"{"message":"name?"}"#.into()),
        };
        assert_eq!(
            ask.as_input_request(),
            json!({"method": "elicitation/create", "params": {"message": "name?"}})
        );
    }
}
