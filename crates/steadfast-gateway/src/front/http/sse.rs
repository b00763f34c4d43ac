//! Server-sent events: which clients take them, and a request answered as a stream.

use super::answer::{ANSWER_BOUND, CancelUnlessAnswered};
use super::*;

/// Whether an `Accept` header lists `text/event-stream` (a `q=0` parameter refuses it). `*/*`
/// does not count: a client that never asked for a stream (curl's default) gets JSON.
pub(super) fn accepts_sse(accept: Option<&hyper::header::HeaderValue>) -> bool {
    // Read as bytes (every modern POST asks): splitting the text by chars cost more than the
    // rest of the request's header checks.
    let Some(accept) = accept.map(hyper::header::HeaderValue::as_bytes) else {
        return false;
    };
    accept.split(|b| *b == b',').any(|range| {
        let mut parts = range.split(|b| *b == b';');
        let kind = parts.next().unwrap_or_default().trim_ascii();
        kind.eq_ignore_ascii_case(b"text/event-stream") && !parts.any(refuses)
    })
}

/// Whether a media range's parameter is `q=0` (or any `q` at or below zero).
fn refuses(param: &[u8]) -> bool {
    param
        .trim_ascii()
        .strip_prefix(b"q=")
        .and_then(|q| std::str::from_utf8(q).ok())
        .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
}

/// A message as one server-sent event.
pub(super) fn sse_event(line: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(line.len() + 24);
    event.extend_from_slice(b"event: message\ndata: ");
    event.extend_from_slice(line.strip_suffix(b"\n").unwrap_or(line));
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// A response whose body is the events sent on `rx`.
pub(super) fn sse_response(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let mut r = Response::new(BodyExt::boxed(SseBody(rx)));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    r.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    r
}

/// Answers request `id` of a client that accepts server-sent events, from its own `stream`.
///
/// The answer's form is decided by what comes first: the response itself → one JSON body (a
/// quick answer costs no stream, and every client must take JSON); a message related to the
/// request (progress, a request from the server, a log) → a stream of events carrying it and
/// everything after, ending with the response. The official SDKs choose once per server
/// (`enableJsonResponse` / `json_response`, streams by default); choosing per answer gives a
/// client the stream exactly when there is something to put on it, so progress and the
/// server's requests reach clients that never open the session's `GET` stream.
///
/// A client that goes away before the response cancels the request, as if it had sent
/// `notifications/cancelled`: the spec asks servers not to read a disconnection as a cancel
/// so that a client can resume the stream by `Last-Event-ID`, but this front gives no event
/// ids (it keeps no history), so an answer nobody can receive would be work for nothing —
/// and a tool call running for no one is a side effect nobody sees.
pub(super) async fn post_stream(
    session: Arc<Session>,
    id: String,
    stream: Arc<Outbound>,
    json: fn(Vec<u8>) -> Response<Body>,
) -> Response<Body> {
    let deadline = tokio::time::Instant::now() + ANSWER_BOUND;
    let mut guard = CancelUnlessAnswered {
        session,
        id,
        armed: true,
    };
    let (line, related) = match first_message(&mut guard, &stream, deadline).await {
        Ok(m) => m,
        Err(refused) => return refused,
    };
    // Related messages are queued as notifications (capped); the response is not.
    if !related {
        // The response came first.
        guard.disarm();
        return json(line);
    }
    // One event in the channel at a time: the stream's own queue is the capped one.
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let _ = tx.try_send(sse_event(&line));
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                m = stream.next_message() => m,
                // The client went away (hyper dropped the body): the guard cancels.
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(deadline) => {
                    guard.disarm();
                    stream.close();
                    return;
                }
            };
            let Some((line, related)) = next else {
                // Answered (the response was the last event), or cancelled by the client.
                guard.disarm();
                return;
            };
            if !related {
                guard.disarm(); // the response: the request is over either way
            }
            if tx.send(sse_event(&line)).await.is_err() {
                return;
            }
        }
    });
    sse_response(rx)
}

struct SseBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<BodyFrame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|b| b.map(|b| Ok(BodyFrame::data(b))))
    }
}

/// A POST's stream's first message by `deadline`, or the 504 it gets when nothing
/// will answer: cancelled by the client or the session ended (the guard disarmed), or the
/// bound passed (the stream closed too).
pub(super) async fn first_message(
    guard: &mut CancelUnlessAnswered,
    stream: &Outbound,
    deadline: tokio::time::Instant,
) -> Result<(Vec<u8>, bool), Response<Body>> {
    match tokio::time::timeout_at(deadline, stream.next_message()).await {
        Ok(Some(m)) => Ok(m),
        Ok(None) => {
            guard.disarm();
            Err(full(StatusCode::GATEWAY_TIMEOUT, "no answer\n"))
        }
        Err(_) => {
            guard.disarm();
            stream.close(); // what the request still sends goes nowhere
            Err(full(StatusCode::GATEWAY_TIMEOUT, "no answer\n"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::accepts_sse;
    use hyper::header::HeaderValue;

    fn sse(accept: &'static str) -> bool {
        accepts_sse(Some(&HeaderValue::from_static(accept)))
    }

    #[test]
    fn streams_only_for_clients_that_list_event_streams() {
        assert!(sse("application/json, text/event-stream"));
        assert!(sse("text/event-stream;q=0.5 , application/json"));
        assert!(sse("Text/Event-Stream"));
        assert!(!sse("application/json"));
        assert!(!sse("*/*"), "curl's default gets JSON");
        assert!(!sse("application/json, text/event-stream; q=0"));
        assert!(!sse("text/event-stream;charset=utf-8;q=0.0"));
        assert!(sse("text/event-stream;charset=utf-8"));
        assert!(!accepts_sse(None));
    }
}
