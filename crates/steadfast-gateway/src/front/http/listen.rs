//! `subscriptions/listen` over HTTP (MCP 2026-07-28): the POST's response is the listen's
//! stream of server-sent events, open until the client closes it (which cancels the listen),
//! the gateway stops (the graceful result is the last event) or the listen falls behind (an
//! error event ends it). The revision's transport: the response is always a stream (406 to a
//! client that does not accept one, as the Python SDK answers), `X-Accel-Buffering: no` so a
//! reverse proxy does not hold events back, and a comment line every [`KEEP_ALIVE`] so idle
//! timeouts of intermediaries do not close a quiet stream.

use super::answer::{ANSWER_BOUND, CancelUnlessAnswered};
use super::sse::{first_message, sse_event, sse_response};
use super::*;

/// Between keep-alive comments on a quiet listen stream.
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Serves listen `id` on `session` (a throwaway modern session), its params checked.
pub(super) async fn serve(
    session: Arc<Session>,
    id: String,
    params: serde_json::Value,
    raw: Option<&str>,
    sse: bool,
    answer: fn(Vec<u8>) -> Response<Body>,
) -> Response<Body> {
    if !sse {
        return full(
            StatusCode::NOT_ACCEPTABLE,
            "subscriptions/listen answers with an event stream: accept text/event-stream\n",
        );
    }
    let cap = session.limits.max_queued_notifications;
    let (reply, stream) = crate::session::Reply::stream(cap);
    let method = crate::session::listen::LISTEN.to_owned();
    session.serve_modern(reply, &id, method, params, raw);
    let mut guard = CancelUnlessAnswered {
        session,
        id,
        armed: true,
    };
    // The acknowledgment (or the refusal) comes once the upstreams are ready.
    let (line, related) = match first_message(
        &mut guard,
        &stream,
        tokio::time::Instant::now() + ANSWER_BOUND,
    )
    .await
    {
        Ok(m) => m,
        Err(refused) => return refused,
    };
    if !related {
        // Refused before it was acknowledged: a plain answer.
        guard.disarm();
        return answer(line);
    }
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let _ = tx.try_send(sse_event(&line));
    tokio::spawn(async move {
        let mut quiet =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        loop {
            let next = tokio::select! {
                m = stream.next_message() => m,
                // The client went away (hyper dropped the body): the guard cancels.
                _ = tx.closed() => return,
                _ = quiet.tick() => {
                    if tx.send(Bytes::from_static(b":\n\n")).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            let Some((line, related)) = next else {
                guard.disarm();
                return;
            };
            if !related {
                guard.disarm(); // the listen's end: nothing left to cancel
            }
            if tx.send(sse_event(&line)).await.is_err() {
                return;
            }
            quiet.reset();
        }
    });
    let mut r = sse_response(rx);
    r.headers_mut().insert(
        "x-accel-buffering",
        hyper::header::HeaderValue::from_static("no"),
    );
    r
}
