//! What the session does with each message the client sends: its dispatch. `initialize`,
//! `ping`, `tools/call` and cancellation are acted on here; every other request is handed to
//! the extension (methods it serves) or forwarded, and notifications are relayed. The first
//! request accepted decides the connection's era (`initialize`: handshake; a modern request
//! that passes its checks: 2026-07-28); a request of the other era is refused.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;
use serde_json::value::RawValue;

use super::{Reply, Session, span};
use crate::session::client::Era;
use crate::wire::call_params::CallParams;
use crate::wire::era;
use crate::wire::jsonrpc::{self, Envelope, code};

impl Session {
    /// A request from the client: answered here (ping, a refusal), or handed with `reply` to
    /// the task that answers it.
    pub(super) fn on_request(self: &Arc<Self>, env: &Envelope<'_>, reply: Reply) {
        let id = env.id.map(RawValue::get).unwrap_or("null");
        let method = env.method.as_deref().unwrap_or_default();
        // A stateless session serves only modern requests the HTTP front checked: no second
        // look at the params.
        if self.stateless {
            return self.on_modern_request(env, reply);
        }
        // The era is locked per connection by the first request of either era accepted on
        // it, as the SDKs' dual-era servers lock it: a request of the other era is refused.
        let modern = Self::is_modern_request(env, method);
        match (self.client.era(), modern) {
            (Era::Handshake, true) => {
                let refusal = era::modern_after_handshake().error_object();
                return self.refuse_raw(reply, id, &refusal.to_string());
            }
            (_, true) => return self.on_modern_request(env, reply),
            (Era::Modern, false) => return self.refuse_other_era(reply, id, method, env),
            _ => {}
        }
        match method {
            "ping" => {
                let answer =
                    span::answered_now(self, id, "ping", jsonrpc::result_response(id, "{}"));
                reply.answer_capped(&self.client, answer);
            }
            "initialize" => self.on_initialize(reply, id, env),
            _ if !self.initialized.load(Ordering::Acquire) => self.refuse(
                reply,
                id,
                code::INVALID_REQUEST,
                "the session is not initialized: send initialize first",
            ),
            "tools/call" => self.on_tools_call(reply, id, env),
            _ => self.on_relayed(reply, id, method, env),
        }
    }

    /// A request without the modern envelope on a connection that opened modern: `initialize`
    /// gets `-32022` naming the modern versions, anything else the envelope check's `-32602`
    /// naming the missing keys (what the Python SDK's dual-era servers answer).
    fn refuse_other_era(&self, reply: Reply, id: &str, method: &str, env: &Envelope<'_>) {
        let params: Value = env
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let refusal = if method == "initialize" {
            era::initialize_after_modern(&params)
        } else {
            match era::check(method, &params, None) {
                Err(r) => r,
                // (Not reached: a request that passes the check is modern.)
                Ok(_) => era::initialize_after_modern(&params),
            }
        };
        self.refuse_raw(reply, id, &refusal.error_object().to_string());
    }

    /// `initialize`: the upstream's handshake (each upstream's, when there are several),
    /// answered from the proxy.
    fn on_initialize(self: &Arc<Self>, reply: Reply, id: &str, env: &Envelope<'_>) {
        if self.client.lock_era(Era::Handshake) != Era::Handshake {
            return self.refuse_other_era(reply, id, "initialize", env);
        }
        let Some((_, reg)) = self.register(id, &asked(env), reply) else {
            return;
        };
        self.initialized.store(true, Ordering::Release);
        let params = env.params.map_or("{}", RawValue::get).to_owned();
        self.remember_protocol(&params);
        let me = self.clone();
        let id = reg.id().clone();
        tokio::spawn(async move {
            use tracing::Instrument;
            let traced = span::initialize(&me, &id, &params);
            let answer = me.initialize(&id, &params).instrument(traced).await;
            // Marked after the answer is queued: no notification may precede it; an upstream
            // that cannot start ends a stdio proxy once the client has its error.
            let started = answer.started();
            let unstartable = answer.unstartable();
            reg.answer(answer.into_line());
            if started {
                me.client.mark_initialized();
            }
            if unstartable {
                me.unstartable.cancel();
            }
        });
    }

    /// `tools/call`: checked, then claimed by the extension or run with the call's policy.
    fn on_tools_call(self: &Arc<Self>, reply: Reply, id: &str, env: &Envelope<'_>) {
        let Some((ct, reg)) = self.register(id, &asked(env), reply) else {
            return;
        };
        // Decoded only when something must read or rewrite them; checked either way.
        let decode = self.router.topology().renames();
        let parsed = env.params.map(|p| CallParams::parse(p.get(), decode));
        let params = match parsed {
            Some(Ok(Some(p))) => p,
            Some(Err(e)) => {
                let line = jsonrpc::error_response(
                    id,
                    code::INVALID_PARAMS,
                    &format!("invalid params: {e}"),
                );
                return reg.answer_capped(line);
            }
            _ => {
                let line = jsonrpc::error_response(
                    id,
                    code::INVALID_PARAMS,
                    "invalid params: tools/call needs params with a tool name (a string)",
                );
                return reg.answer_capped(line);
            }
        };
        let me = self.clone();
        let id = reg.id().clone();
        // A call the extension claims (a task-augmented call to a durable tool: a task
        // handle at once). (Params with a `task` member are always decoded.)
        let claimed = match &params {
            CallParams::Value(v) => self.extension().filter(|x| x.claims_call(self, v)),
            CallParams::Raw { .. } => None,
        };
        let params = match (claimed.cloned(), params) {
            (Some(x), CallParams::Value(params)) => {
                tokio::spawn(async move {
                    // In its SERVER span: the task stores that span's context.
                    let traced = span::request(&me, &id, "tools/call", Some(&params));
                    let line = span::answered(traced, "tools/call", x.call(&me, &id, params)).await;
                    reg.answer(line);
                });
                return;
            }
            (_, params) => params,
        };
        // Boxed: the call's future is large, and spawning moved it through the runtime's
        // layers four times; a pointer moves cheaply. Traced or not is decided here, once
        // (`handshake::call` returns the untraced call's own future, with no wrapper choosing
        // at poll). A modern upstream's `input_required` answers are completed with the client.
        let traced = steadfast::trace::listening();
        tokio::spawn(Box::pin(async move {
            let call =
                crate::session::input_required::handshake::call(&me, &id, params, &ct, traced);
            if let Some(line) = call.await {
                reg.answer(handshake_answer(line));
            }
        }));
    }

    /// Any other request: served by the extension, or forwarded, and its answer relayed
    /// unless the client cancels it first.
    fn on_relayed(self: &Arc<Self>, reply: Reply, id: &str, method: &str, env: &Envelope<'_>) {
        let Some((ct, reg)) = self.register(id, &asked(env), reply) else {
            return;
        };
        let me = self.clone();
        let id = reg.id().clone();
        let method = method.to_owned();
        let params = env.params.map(|p| p.get().to_owned());
        // Methods the extension serves (tasks/* from the durable store while it is open).
        let ours = self.extension().filter(|x| x.serves(&method)).cloned();
        tokio::spawn(async move {
            let answer = async {
                match &ours {
                    Some(x) => x.serve(&me, &id, &method, params.as_deref()).await,
                    None => me.forward(&id, &method, params.as_deref()).await,
                }
            };
            let answer = span::serve(&me, &id, &method, params.as_deref(), answer);
            tokio::select! {
                line = answer => reg.answer(handshake_answer(me.filter_list(&method, line))),
                // A cancelled request is not answered (MCP); dropping the forward
                // cancels it upstream.
                _ = ct.cancelled() => {}
            }
        });
    }

    /// A notification from the client: cancellation acted on, the rest relayed.
    pub(super) fn on_notification(self: &Arc<Self>, env: &Envelope<'_>, line: &[u8]) {
        match env.method.as_deref().unwrap_or_default() {
            "notifications/cancelled" => {
                let Some(params) = env.params else { return };
                let Ok(v) = serde_json::from_str::<Value>(params.get()) else {
                    return;
                };
                let Some(id) = v.get("requestId") else { return };
                let id = id.to_string();
                if let Some(x) = self.extension() {
                    x.on_cancelled(self, &id);
                }
                self.cancel_request(&id);
            }
            // The proxy completed the server's handshake itself.
            "notifications/initialized" => {}
            _ => {
                let mut line = line.to_vec();
                line.push(b'\n');
                for route in self.router.routes().iter() {
                    if route.upstream.is_started() {
                        route.upstream.notify(line.clone());
                    }
                }
            }
        }
    }
}

/// A handshake-era client's answer: `line` less what a modern upstream's result carries that
/// this client's revision does not know (`era::handshake_result`).
fn handshake_answer(line: Vec<u8>) -> Vec<u8> {
    crate::wire::era::handshake_result(&line).unwrap_or(line)
}

/// What the access policy reads of a handshake-era request (its params as written).
fn asked<'a>(env: &'a Envelope<'_>) -> crate::session::identity::Asked<'a> {
    crate::session::identity::Asked {
        method: env.method.as_deref().unwrap_or_default(),
        raw: env.params.map(RawValue::get),
        decoded: None,
    }
}
