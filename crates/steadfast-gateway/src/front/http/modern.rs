//! POSTs of MCP 2026-07-28 ("modern") clients: no `Mcp-Session-Id`, each request served on
//! its own by a throwaway session, so any replica behind a load balancer can answer any of
//! them.
//!
//! The routing headers are checked against the body (`MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name`: `-32020` and 400 on a mismatch or a missing one), then the version (`-32022`
//! and 400, naming the supported versions). The answer is JSON, or server-sent events when the
//! request's related messages (progress, logs) come before its response, as for sessions.
//! A modern client's error answers get the transport's statuses (400 for the validation
//! ladder, 404 for an unknown method); a tool's or upstream's error is an answer (200).
//! A notification is acknowledged (202) and dropped, as the Python SDK does: the revision
//! defines none from client to server over HTTP (closing the stream cancels).

use super::answer::{ANSWER_BOUND, CancelUnlessAnswered};
use super::sse::post_stream;
use super::*;
use crate::session::Reply;
use crate::wire::era;

/// The routing headers of a POST, read before its body is.
#[derive(Debug, Default)]
pub(super) struct ModernHeaders {
    // (Values kept as hyper read them, cheap to clone, rather than copied into strings.)
    version: Option<hyper::header::HeaderValue>,
    method: Option<hyper::header::HeaderValue>,
    name: Option<hyper::header::HeaderValue>,
    /// A routing header given twice: first-copy and last-copy readers would disagree.
    duplicated: Option<&'static str>,
    /// The client lists `text/event-stream` in `Accept`: related messages may stream.
    sse: bool,
}

impl ModernHeaders {
    /// The routing headers of a POST whose `Accept` the caller read already (`sse`).
    pub(super) fn of(headers: &hyper::HeaderMap, sse: bool) -> Self {
        // Names made once: a `&str` name is checked and lowercased at each lookup.
        use hyper::header::HeaderName;
        static VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
        static METHOD: HeaderName = HeaderName::from_static("mcp-method");
        static NAME: HeaderName = HeaderName::from_static("mcp-name");
        let mut h = Self {
            sse,
            ..Self::default()
        };
        for (slot, name) in [
            (&mut h.version, &VERSION),
            (&mut h.method, &METHOD),
            (&mut h.name, &NAME),
        ] {
            let mut all = headers.get_all(name).iter();
            *slot = all.next().filter(|v| v.to_str().is_ok()).cloned();
            if all.next().is_some() {
                h.duplicated = Some(name.as_str());
            }
        }
        h
    }

    /// `MCP-Protocol-Version` names a modern version (2026-07-28): the client speaks that era
    /// even when its body lacks the envelope.
    pub(super) fn is_modern(&self) -> bool {
        self.view()
            .version
            .is_some_and(|v| era::MODERN_VERSIONS.contains(&v))
    }

    fn view(&self) -> era::Headers<'_> {
        fn text(v: &Option<hyper::header::HeaderValue>) -> Option<&str> {
            v.as_ref().and_then(|v| v.to_str().ok())
        }
        era::Headers {
            version: text(&self.version),
            method: text(&self.method),
            name: text(&self.name),
        }
    }
}

/// A JSON-RPC answer with the status the modern transport gives its error code.
fn answer(line: Vec<u8>) -> Response<Body> {
    let status = error_code(&line).map_or(200, era::http_status);
    let mut r = json_response(line);
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    r
}

/// The error code of an error response (`None` for a result).
fn error_code(line: &[u8]) -> Option<i64> {
    static ERROR: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"error\""));
    ERROR.find(line)?;
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    v.get("error")?.get("code")?.as_i64()
}

/// `modern-` and 32 hex digits (what `format!("modern-{:032x}")` writes, without its
/// padding machinery: ~8k instructions, a few percent of a modern call).
fn modern_id(n: u128) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(39);
    id.push_str("modern-");
    for shift in (0..32).rev() {
        id.push(char::from(HEX[((n >> (shift * 4)) & 0xf) as usize]));
    }
    id
}

fn refusal(id: Option<&str>, r: &era::Refusal) -> Response<Body> {
    let line = crate::wire::jsonrpc::raw_error_response(
        id.unwrap_or("null"),
        &r.error_object().to_string(),
    );
    let mut resp = json_response(line);
    *resp.status_mut() = StatusCode::from_u16(r.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
    resp
}

/// A modern POST's message: its kind, method and id, its params decoded (`Null` when absent)
/// and where they are in the body.
pub(super) struct Message {
    pub(super) kind: MessageKind,
    pub(super) method: String,
    pub(super) id: Option<String>,
    pub(super) params: serde_json::Value,
    pub(super) raw: Option<std::ops::Range<usize>>,
}

impl Message {
    /// A request sent with a modern version's headers but without the `_meta` envelope:
    /// [`era::check`] then refuses it as the SDKs' servers do (-32602 naming what is missing),
    /// rather than the client being told to initialize, which it never does.
    pub(super) fn unenveloped(
        kind: MessageKind,
        method: &str,
        id: Option<&str>,
        env: &Envelope<'_>,
    ) -> Self {
        let params = env
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        Self {
            kind,
            method: method.to_owned(),
            id: id.map(str::to_owned),
            params,
            raw: None,
        }
    }
}

/// A POST without a session is a modern client's when it is `server/discover` or its params'
/// `_meta` carries a protocol version (looked for in the text before any decode): its params,
/// decoded once for the front and the session, and their place in `body`.
pub(super) fn modern_params(
    env: &Envelope<'_>,
    body: &[u8],
) -> Option<(serde_json::Value, Option<std::ops::Range<usize>>)> {
    let method = env.method.as_deref()?;
    let raw = env.params.map(serde_json::value::RawValue::get);
    if method != era::DISCOVER && (method == "initialize" || !era::may_be_modern(raw)) {
        return None;
    }
    let params = raw
        .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
        .unwrap_or_default();
    if method != era::DISCOVER && !era::is_modern(&params) {
        return None;
    }
    let at = |p: &str| {
        let start = (p.as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
        start..start + p.len()
    };
    Some((params, raw.map(at)))
}

impl Front {
    /// Serves a modern client's POST (see the module docs).
    pub(super) async fn post_modern(
        self: &Arc<Self>,
        headers: &ModernHeaders,
        message: Message,
        body: Bytes,
        identity: Option<Arc<crate::session::identity::Identity>>,
    ) -> Response<Body> {
        let Message {
            kind,
            method,
            id,
            params,
            raw,
        } = message;
        if let Some(name) = headers.duplicated {
            let r = era::Refusal {
                code: era::code::HEADER_MISMATCH,
                message: format!("Header mismatch: {name} was given more than once"),
                data: None,
            };
            return refusal(id.as_deref(), &r);
        }
        let (MessageKind::Request, Some(id)) = (kind, id) else {
            // A notification (or a response, which a modern client never sends).
            return match headers.view().version {
                Some(v) if !era::MODERN_VERSIONS.contains(&v) => {
                    refusal(None, &era::unsupported(v))
                }
                _ => full(StatusCode::ACCEPTED, ""),
            };
        };
        if let Err(r) = era::check(&method, &params, Some(headers.view())) {
            return refusal(Some(&id), &r);
        }
        let limits = self.config.limits;
        let client = Client::transient(limits.max_queued_notifications);
        // Served by the upstream connections started with the capabilities it declares.
        let router = self
            .router
            .for_capabilities(&crate::route::router::of_modern(&params));
        let session = Session::stateless(
            modern_id(crate::wire::secret_id::unique_u128()),
            client,
            router,
            limits,
        );
        if let Some(d) = &self.durable {
            session.extend(crate::tasks::SessionTasks::new(d.clone())); // [tasks]
        }
        let auth = self.auth.as_deref();
        if let Some(r) = super::super::auth::claim(auth, &session, identity.as_ref(), true) {
            return r; // (a throwaway session takes the token's subject: never refused)
        }
        let asked = crate::session::identity::Asked {
            method: &method,
            raw: None,
            decoded: Some(&params),
        };
        let id_ = Some(id.as_str());
        if let Some(r) = super::super::auth::scope_challenge(auth, identity.as_ref(), id_, &asked) {
            return r; // [auth] a scope challenge
        }
        // Served as the session would serve the line, without decoding it again.
        let raw = raw
            .and_then(|r| body.get(r))
            .and_then(|p| std::str::from_utf8(p).ok());
        if method == crate::session::listen::LISTEN {
            return super::listen::serve(session, id, params, raw, headers.sse, answer).await;
        }
        if headers.sse {
            let (reply, stream) = Reply::stream(limits.max_queued_notifications);
            session.serve_modern(reply, &id, method, params, raw);
            return post_stream(session, id, stream, answer).await;
        }
        let (reply, rx) = Reply::once();
        session.serve_modern(reply, &id, method, params, raw);
        let mut guard = CancelUnlessAnswered {
            session: session.clone(),
            id,
            armed: true,
        };
        let line = tokio::time::timeout(ANSWER_BOUND, rx).await;
        guard.disarm();
        match line {
            Ok(Ok(line)) => answer(line),
            _ => {
                session.cancel_all();
                full(StatusCode::GATEWAY_TIMEOUT, "no answer\n")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn modern_ids_are_32_hex_digits() {
        for n in [0, 0xabc, u128::MAX, 1 << 127] {
            assert_eq!(super::modern_id(n), format!("modern-{n:032x}"));
        }
    }
}
