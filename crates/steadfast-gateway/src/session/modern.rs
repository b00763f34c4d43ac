//! Requests of MCP 2026-07-28 ("modern") clients: no `initialize`, each request on its own.
//!
//! A modern request carries its protocol version and client capabilities in `_meta`
//! (`wire::era`); it is checked (envelope, version), then served without any session state
//! it did not bring: `server/discover` from the upstreams' merged capabilities, every other
//! method as for a handshake-era client (tool calls with their policies, lists gathered, the
//! tasks extension's methods from the durable store). The answer's result is marked
//! `resultType: "complete"` when a handshake-era upstream's result lacks it.
//!
//! The stdio front serves both eras on one process (a dual-era server may, says the
//! revision): its first modern request starts the upstreams with `initialize` params made
//! from the request's envelope, as a handshake-era client's `initialize` would. The HTTP front
//! serves a modern POST on a throwaway session ([`Session::stateless`]) that never starts
//! upstreams (the gateway started them) and is not registered for notifications.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::session::client::Era;
use crate::session::{Reply, Session, input_required};
use crate::wire::call_params::CallParams;
use crate::wire::era;
use crate::wire::jsonrpc::{self, Envelope, code};

/// Whether a method's answer may be `input_required` (see `input_required.rs`).
fn parkable(method: &str) -> bool {
    input_required::METHODS.contains(&method)
}

impl Session {
    /// Serves one modern request (the caller saw its envelope or `server/discover`), answered
    /// to `reply`.
    pub(crate) fn on_modern_request(self: &Arc<Self>, env: &Envelope<'_>, reply: Reply) {
        let id = env.id.map(RawValue::get).unwrap_or("null");
        let method = env.method.as_deref().unwrap_or_default().to_owned();
        let params: Value = match env.params.map(|p| serde_json::from_str(p.get())) {
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                let why = format!("invalid params: {e}");
                return self.refuse(reply, id, code::INVALID_PARAMS, &why);
            }
            None => json!({}),
        };
        if let Err(r) = era::check(&method, &params, None) {
            return self.refuse_raw(reply, id, &r.error_object().to_string());
        }
        // The connection is modern from its first accepted modern request on (a refused one
        // decides nothing: a dual-era client falls back to `initialize` after a -32022).
        if !self.stateless && self.client.lock_era(Era::Modern) != Era::Modern {
            let refusal = era::modern_after_handshake().error_object();
            return self.refuse_raw(reply, id, &refusal.to_string());
        }
        self.serve_modern(reply, id, method, params, env.params.map(RawValue::get));
    }

    /// Serves a modern request whose envelope was checked (`era::check`): `params` decoded,
    /// `raw` as written. The HTTP front calls it directly, having decoded and checked the
    /// params with the routing headers (one decode per request instead of four).
    pub(crate) fn serve_modern(
        self: &Arc<Self>,
        reply: Reply,
        id: &str,
        method: String,
        params: Value,
        raw: Option<&str>,
    ) {
        // For the spans' `mcp.protocol.version`: a modern client carries it in each request.
        if let Some(v) = era::version_of(&params) {
            let _ = self.protocol.set(super::protocol_text(v));
        }
        // A tool call's params as written, when nothing must read or rewrite them (no
        // progress token, task or tasks extension: `CallParams::parse`): they go upstream
        // without a decode and re-encode (the envelope cut from the text for a handshake-era
        // upstream, `upstream/era.rs`).
        let as_written = self.call_as_written(&method, raw);
        // The token's access policy reads the decoded params (`register`).
        let asked = super::identity::Asked {
            method: &method,
            raw,
            decoded: Some(&params),
        };
        let Some((ct, reg)) = self.register(id, &asked, reply) else {
            return;
        };
        let me = self.clone();
        let id = reg.id().clone();
        // Logs reach the client while a request that asked for their level runs (MCP
        // 2026-07-28: none for a request without `_meta` log level; `Client::log_scope`).
        let logs = self.client.log_scope(era::log_level_of(&params));
        // A retry of a call the gateway parked: resumed, not run again.
        if let Some(state) = input_required::state_of(&params).filter(|_| parkable(&method)) {
            let state = state.to_owned();
            tokio::spawn(Box::pin(async move {
                let _logs = logs;
                if let Some(line) = me.resume(&id, &method, &params, &state, &ct).await {
                    reg.answer(line);
                }
            }));
            return;
        }
        // With a run, the request is answered by `input_required::answer_first` (the call's
        // answer, or `input_required` first), and the call runs on until its answer or cancel.
        let prepared = input_required::prepare(self, &method, &params, reg, ct);
        tokio::spawn(Box::pin(async move {
            let input_required::Prepared {
                reg,
                run,
                ct,
                transient: _transient,
            } = prepared;
            let _logs = logs;
            let work = me.modern_work(&id, &method, params, as_written, &ct);
            if let Some(run) = run {
                tokio::select! {
                    line = work => run.done(line).await,
                    _ = ct.cancelled() => {}
                }
                return;
            }
            tokio::select! {
                line = work => {
                    if let (Some(line), Some(reg)) = (line, reg) {
                        let line = me.filter_list(&method, line); // [auth] the policy's view
                        let line = era::complete_result_for(&method, &id, &line).unwrap_or(line);
                        reg.answer(line);
                    }
                }
                // A cancelled request is not answered (MCP); dropping the work cancels it
                // upstream.
                _ = ct.cancelled() => {}
            }
        }));
    }

    /// A tool call's params as written, when nothing must read or rewrite them (no progress
    /// token, task or tasks extension: `CallParams::parse`): they go upstream without a decode
    /// and re-encode (the envelope cut from the text for a handshake-era upstream,
    /// `upstream/era.rs`).
    fn call_as_written(&self, method: &str, raw: Option<&str>) -> Option<CallParams> {
        let ("tools/call", Some(r)) = (method, raw) else {
            return None;
        };
        match CallParams::parse(r, self.router.topology().renames()) {
            Ok(Some(p @ CallParams::Raw { .. })) => Some(p),
            _ => None,
        }
    }

    /// A retry of a call the gateway parked (`requestState`), checked as any modern request.
    async fn resume(
        self: &Arc<Self>,
        id: &str,
        method: &str,
        params: &Value,
        state: &str,
        ct: &CancellationToken,
    ) -> Option<Vec<u8>> {
        if let Err(line) = self.modern_ready(id, params).await {
            return Some(line);
        }
        input_required::resume(self, id, method, params, state, ct).await
    }

    /// What a modern request is answered with (`None`: not answered, it was cancelled).
    async fn modern_work(
        self: &Arc<Self>,
        id: &str,
        method: &str,
        params: Value,
        as_written: Option<CallParams>,
        ct: &CancellationToken,
    ) -> Option<Vec<u8>> {
        if let Err(line) = self.modern_ready(id, &params).await {
            return Some(line);
        }
        match method {
            era::DISCOVER => Some(super::span::answered_now(
                self,
                id,
                method,
                jsonrpc::result_response(id, &self.discover_result().to_string()),
            )),
            "ping" => Some(super::span::answered_now(
                self,
                id,
                method,
                jsonrpc::result_response(id, "{}"),
            )),
            // Boxed, here and below: the arms' futures are large, and inline they made the
            // request's task large enough that creating and spawning it copied tens of KiB.
            "tools/call" => Box::pin(self.modern_call(id, params, as_written, ct)).await,
            super::listen::LISTEN => Box::pin(self.listen(id, &params, ct)).await,
            _ => {
                let raw = params.to_string();
                let ours = self.extension().filter(|x| x.serves(method)).cloned();
                let answer = async {
                    match &ours {
                        Some(x) => x.serve(self, id, method, Some(&raw)).await,
                        None => self.forward(id, method, Some(&raw)).await,
                    }
                };
                Some(Box::pin(super::span::serve(self, id, method, Some(&raw), answer)).await)
            }
        }
    }

    /// A modern `tools/call`: the extension's when it claims it (a durable tool and a client
    /// that declared the tasks extension: a task handle), else the call with its policy.
    /// (`as_written`: the params as the client wrote them, when the extension cannot claim
    /// the call and nothing must rewrite them.)
    async fn modern_call(
        self: &Arc<Self>,
        id: &str,
        params: Value,
        as_written: Option<CallParams>,
        ct: &tokio_util::sync::CancellationToken,
    ) -> Option<Vec<u8>> {
        if !params.get("name").is_some_and(Value::is_string) {
            return Some(jsonrpc::error_response(
                id,
                code::INVALID_PARAMS,
                "invalid params: tools/call needs params with a tool name (a string)",
            ));
        }
        if let Some(p) = as_written {
            return crate::session::tool_call::run(self, id, p, ct).await;
        }
        if let Some(x) = self
            .extension()
            .filter(|x| x.claims_call(self, &params))
            .cloned()
        {
            return Some(x.call(self, id, params).await);
        }
        crate::session::tool_call::run(self, id, CallParams::Value(params), ct).await
    }

    /// Gets the upstreams ready for a modern request: started (stdio: once, with the
    /// request's envelope as `initialize` params) and one connected within `init_timeout`;
    /// the error line to answer with otherwise.
    async fn modern_ready(self: &Arc<Self>, id: &str, params: &Value) -> Result<(), Vec<u8>> {
        let first = !self.initialized.swap(true, Ordering::AcqRel);
        if first && !self.stateless {
            let init = era::init_params_of(params).to_string();
            // Change notifications reach a modern client only on its listens.
            self.client.mark_modern();
            self.router.start(&init, self.client.clone());
            self.client.mark_initialized();
        }
        let routes = self.router.routes().to_vec();
        if !routes.iter().any(|r| r.upstream.is_connected()) {
            let bound = self.router.config().upstream_settings().init_timeout;
            let waits = routes
                .iter()
                .map(|r| Box::pin(r.upstream.wait_connected(bound)));
            if futures::future::select_ok(waits).await.is_err() {
                let why = routes
                    .iter()
                    .map(|r| {
                        format!(
                            "{}: {}",
                            r.name,
                            r.upstream.down_reason().unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                return Err(jsonrpc::error_response(
                    id,
                    code::UPSTREAM_UNAVAILABLE,
                    &steadfast::sanitize(&format!("no upstream is connected: {why}")),
                ));
            }
        }
        if first {
            // As `initialize` does: names routed and breakers made for what was listed, so a
            // call needs no list first and a shared breaker is heard at once.
            for r in routes.iter().filter(|r| r.upstream.is_connected()) {
                self.router.expose_listed(r);
            }
        }
        Ok(())
    }

    /// `server/discover`'s result: every supported version, the capabilities of the connected
    /// upstreams as the gateway serves them to a client without a session, the server's info.
    pub(crate) fn discover_result(&self) -> Value {
        let connected: Vec<_> = self
            .router
            .routes()
            .iter()
            .filter(|r| r.upstream.is_connected())
            .cloned()
            .collect();
        let init: Value = serde_json::from_str(&self.router.init_result(&connected))
            .unwrap_or_else(|_| json!({}));
        let mut caps = init
            .get("capabilities")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        modern_capabilities(&mut caps);
        if let Some(x) = self.extension() {
            x.on_discover(&mut caps);
        }
        let info = init.get("serverInfo").cloned().unwrap_or_else(
            || json!({"name": "steadfast-gateway", "version": env!("CARGO_PKG_VERSION")}),
        );
        let mut result = json!({
            "resultType": "complete",
            "ttlMs": 0,
            "cacheScope": "private",
            "supportedVersions": era::supported_versions(),
            "capabilities": caps,
            "_meta": {era::SERVER_INFO: info},
        });
        if let Some(i) = init.get("instructions").filter(|i| i.is_string()) {
            result["instructions"] = i.clone();
        }
        result
    }
}

/// Handshake-era capabilities as a client without a session can use them: the 2025-11-25
/// `tasks` capability is not part of the revision (the tasks extension is, declared by the
/// extension hook). `listChanged` and `subscribe` stay as the upstreams declare them: the
/// gateway delivers both on `subscriptions/listen` (`session/listen.rs`).
fn modern_capabilities(caps: &mut serde_json::Map<String, Value>) {
    caps.remove("tasks");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_capabilities_drop_the_handshake_tasks_capability() {
        let mut caps = json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "tasks": {"list": {}},
            "logging": {},
        });
        let c = caps.as_object_mut().unwrap();
        modern_capabilities(c);
        assert_eq!(
            caps,
            json!({
                "tools": {"listChanged": true},
                "resources": {"subscribe": true, "listChanged": true},
                "logging": {},
            }),
            "served on subscriptions/listen"
        );
    }
}
