//! One way to ask an upstream and one error for what can go wrong.
//!
//! A request to an upstream ends in a [`Reply`]: a result, or one of five ways it did not get
//! one. Each caller used to turn that into words or an error answer of its own (the relay, the
//! gathering of lists, the handshake, the call attempt), and each pager of a list walked
//! `nextCursor` its own way. Here a reply becomes a result or an [`UpstreamError`] once
//! ([`Reply::into_result`]); [`Upstream::request`] sends, bounds the wait and gives that; and
//! [`Upstream::pages`] is every list's pager, a stream of pages. Dropping the future (or the
//! stream) of either cancels the request upstream, as the in-flight guard does.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use serde_json::{Value, json};

use super::{Downstream, Link, Params, Reply, Upstream};
use crate::wire::jsonrpc::{self, code};

/// Why a request to an upstream got no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum UpstreamError {
    /// The server answered with a JSON-RPC error object (raw JSON, as it sent it).
    Rpc(String),
    /// The request provably never reached the server.
    NotSent(String),
    /// The connection was lost after the request was sent.
    Lost(String),
    /// The reply exceeded `max_message_size` (its length).
    TooLarge(usize),
    /// An HTTP upstream answered with an error status (and this body).
    Http(u16, String),
    /// No answer within the bound.
    Timeout(Duration),
    /// A result that is not what MCP says it is (a list's page that is not JSON, say).
    Invalid(String),
}

impl Reply {
    /// The result, or why there is none.
    pub(crate) fn into_result(self) -> Result<String, UpstreamError> {
        Err(match self {
            Reply::Result(raw) => return Ok(raw),
            Reply::Error(raw) => UpstreamError::Rpc(raw),
            Reply::NotSent(why) => UpstreamError::NotSent(why),
            Reply::Lost(why) => UpstreamError::Lost(why),
            Reply::TooLarge(len) => UpstreamError::TooLarge(len),
            Reply::Http(status, body) => UpstreamError::Http(status, body),
        })
    }
}

impl std::fmt::Display for UpstreamError {
    /// In words, for a log or a reason shown to an operator (not sanitized: the caller does).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Rpc(e) => write!(f, "it answered with an error: {e}"),
            Self::NotSent(why) | Self::Lost(why) => f.write_str(why),
            Self::TooLarge(len) => write!(f, "its reply ({len} bytes) exceeds max_message_size"),
            Self::Http(status, body) => {
                let head: String = body.chars().take(200).collect();
                write!(f, "it answered HTTP {status}: {head}")
            }
            Self::Timeout(after) => write!(f, "it did not answer within {after:?}"),
            Self::Invalid(why) => f.write_str(why),
        }
    }
}

impl UpstreamError {
    /// The line answering client request `id` (raw JSON) that this error ended: the server's
    /// own error object relayed (sanitized, its shape kept), else the gateway's error with the
    /// code a client can act on. `method` and `max_message_size` make the words precise.
    pub(crate) fn answer(&self, id: &str, method: &str, max_message_size: usize) -> Vec<u8> {
        let (code, message) = match self {
            Self::Rpc(e) => return jsonrpc::raw_error_response(id, &sanitize_error_object(e)),
            Self::TooLarge(len) => (
                code::TOO_LARGE,
                format!(
                    "the upstream's reply ({len} bytes) exceeds max_message_size \
                     ({max_message_size} bytes)"
                ),
            ),
            Self::NotSent(why) | Self::Lost(why) => (code::UPSTREAM_UNAVAILABLE, why.clone()),
            Self::Http(status, body) => (
                code::INTERNAL_ERROR,
                format!("the upstream answered HTTP {status}: {body}"),
            ),
            Self::Timeout(after) => (
                code::UPSTREAM_TIMEOUT,
                format!("the upstream did not answer {method} within {after:?}"),
            ),
            Self::Invalid(why) => (code::INTERNAL_ERROR, why.clone()),
        };
        jsonrpc::error_response(id, code, &steadfast::sanitize(&message))
    }
}

/// Who a request is for and where what the server relates to it goes: the client whose
/// request it is (its server requests are routed to that client), its progress, its stream.
#[derive(Default)]
pub(crate) struct Related<'a> {
    /// The client whose request this is.
    pub origin: Option<&'a dyn Downstream>,
    /// Where the request's progress goes.
    pub progress: Option<super::ProgressRoute>,
    /// The client request's own stream (an HTTP POST answered with events).
    pub stream: Option<Arc<crate::wire::outbound::Outbound>>,
}

impl Upstream {
    /// Sends `method` on `link` and awaits its result for at most `bound`. Dropping the
    /// returned future cancels the request upstream; so does the bound passing.
    pub(crate) async fn request(
        self: &Arc<Self>,
        link: &Arc<Link>,
        method: &str,
        params: Option<Params<'_>>,
        related: Related<'_>,
        bound: Duration,
    ) -> Result<String, UpstreamError> {
        let Related {
            origin,
            progress,
            stream,
        } = related;
        let (guard, rx) = self.call_related(link, method, params, progress, origin, stream);
        let reply = match tokio::time::timeout(bound, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Reply::Lost("the upstream request was dropped".to_owned()),
            // (The guard, dropped unfinished, cancels the request upstream.)
            Err(_) => return Err(UpstreamError::Timeout(bound)),
        };
        guard.finish();
        reply.into_result()
    }

    /// The pages of list `method` (`tools/list`, `prompts/list`, …), each result decoded, in
    /// order, following `nextCursor` for at most `max_pages` pages; each page bounded by the
    /// upstream's `request_timeout`. The stream ends after the last page, or after the first
    /// error (its last item). Dropping it cancels the page in flight.
    pub(crate) fn pages<'a>(
        self: &'a Arc<Self>,
        link: &'a Arc<Link>,
        method: &'a str,
        origin: Option<&'a dyn Downstream>,
        max_pages: usize,
    ) -> impl Stream<Item = Result<Page, UpstreamError>> + 'a {
        // (`None` cursor: the first page; `Some(None)`: no page left.)
        let start: Option<Option<Value>> = Some(None);
        futures::stream::unfold((start, 0usize), move |(cursor, n)| async move {
            let cursor = cursor?;
            if n >= max_pages {
                return None;
            }
            let params = cursor.map(|c| json!({ "cursor": c }));
            let related = Related {
                origin,
                ..Related::default()
            };
            let bound = self.settings().request_timeout;
            let page = self
                .request(
                    link,
                    method,
                    params.as_ref().map(Params::Value),
                    related,
                    bound,
                )
                .await
                .and_then(|raw| match serde_json::from_str::<Value>(&raw) {
                    Ok(value) => Ok(Page {
                        value,
                        bytes: raw.len(),
                    }),
                    Err(e) => Err(UpstreamError::Invalid(format!(
                        "its {method} result is not JSON: {e}"
                    ))),
                });
            let next = match &page {
                Ok(p) => p
                    .value
                    .get("nextCursor")
                    .filter(|c| !c.is_null())
                    .cloned()
                    .map(Some),
                Err(_) => None,
            };
            Some((page, (next, n + 1)))
        })
    }
}

/// One page of a list: its result, and how many bytes the server sent for it.
pub(crate) struct Page {
    /// The page's result, decoded.
    pub value: Value,
    /// Its length as the server wrote it.
    pub bytes: usize,
}

/// A relayed JSON-RPC error object with its message and data sanitized, keeping its shape.
pub(crate) fn sanitize_error_object(raw: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(raw) else {
        return raw.to_owned();
    };
    if let Some(m) = v.get("message").and_then(Value::as_str)
        && let std::borrow::Cow::Owned(clean) = steadfast::sanitize(m)
    {
        v["message"] = Value::String(clean);
    }
    if let Some(data) = v.get_mut("data") {
        crate::wire::sanitize::sanitize_value(data);
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_but_a_result_is_one_typed_error() {
        assert_eq!(Reply::Result("{}".into()).into_result(), Ok("{}".into()));
        let cases = [
            (
                Reply::Error("{\"code\":1}".into()),
                UpstreamError::Rpc("{\"code\":1}".into()),
            ),
            (
                Reply::NotSent("n".into()),
                UpstreamError::NotSent("n".into()),
            ),
            (Reply::Lost("l".into()), UpstreamError::Lost("l".into())),
            (Reply::TooLarge(9), UpstreamError::TooLarge(9)),
            (
                Reply::Http(503, "b".into()),
                UpstreamError::Http(503, "b".into()),
            ),
        ];
        for (reply, error) in cases {
            assert_eq!(reply.into_result(), Err(error));
        }
    }

    #[test]
    fn an_answer_keeps_the_servers_error_and_gives_the_gateways_codes() {
        let answer = |e: UpstreamError| -> Value {
            serde_json::from_slice(&e.answer("7", "tools/list", 100)).unwrap()
        };
        let rpc = answer(UpstreamError::Rpc(
            r#"{"code":-32601,"message":"no","data":{"k":1}}"#.into(),
        ));
        assert_eq!(rpc["id"], 7);
        assert_eq!(rpc["error"]["code"], -32601);
        assert_eq!(rpc["error"]["data"]["k"], 1, "its shape kept");
        let timeout = answer(UpstreamError::Timeout(Duration::from_secs(2)));
        assert_eq!(timeout["error"]["code"], code::UPSTREAM_TIMEOUT);
        assert_eq!(
            timeout["error"]["message"],
            "the upstream did not answer tools/list within 2s"
        );
        let large = answer(UpstreamError::TooLarge(500));
        assert_eq!(large["error"]["code"], code::TOO_LARGE);
        assert!(
            large["error"]["message"]
                .as_str()
                .unwrap()
                .contains("(100 bytes)")
        );
        let lost = answer(UpstreamError::Lost("reset".into()));
        assert_eq!(lost["error"]["code"], code::UPSTREAM_UNAVAILABLE);
        let http = answer(UpstreamError::Http(502, "bad gateway".into()));
        assert_eq!(http["error"]["code"], code::INTERNAL_ERROR);
    }

    #[test]
    fn the_servers_error_text_is_sanitized_and_words_are_bounded() {
        let leaked =
            r#"{"code":-1,"message":"auth failed for Bearer sk-live-0123456789abcdefghijklmnop"}"#;
        let line = UpstreamError::Rpc(leaked.into()).answer("1", "m", 1);
        assert!(!String::from_utf8_lossy(&line).contains("sk-live-0123456789"));
        let long = UpstreamError::Http(500, "x".repeat(1000)).to_string();
        assert!(long.len() < 260, "{}", long.len());
    }
}
