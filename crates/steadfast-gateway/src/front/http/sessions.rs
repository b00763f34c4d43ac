//! The session table of handshake-era clients: lookup, idle reaping, the `GET` stream.

use super::sse::{sse_event, sse_response};
use super::*;

/// Ends a session: what it has in flight is cancelled, its event streams end.
pub(super) fn end(s: &Session) {
    // (Fronts awaiting an answer stop waiting as the cancelled requests drop their replies.)
    s.cancel_all();
    s.client.out.close();
    if let Some(stop) = s
        .client
        .stream
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        stop.cancel();
    }
}

impl Front {
    /// The session, marked as used now.
    pub(super) fn session(&self, id: &str) -> Option<Arc<Session>> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let (s, seen) = sessions.get_mut(id)?;
        *seen = tokio::time::Instant::now();
        Some(s.clone())
    }

    /// Ends sessions unused for `session_idle` that have nothing in flight.
    pub(super) fn reap(&self) {
        let idle = self.options.session_idle;
        let gone: Vec<Arc<Session>> = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, (s, seen))| seen.elapsed() >= idle && s.in_flight() == 0)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter()
                .filter_map(|id| sessions.remove(id))
                .map(|(s, _)| s)
                .collect()
        };
        for s in gone {
            tracing::info!(session = %s.id, "an idle session ended");
            end(&s);
        }
    }

    /// The session's own stream: every message queued for it, as server-sent events.
    pub(super) fn stream(&self, session: Arc<Session>) -> Response<Body> {
        // One message in the channel at a time: when the client goes away, what could not be
        // delivered goes back to the queue for its next stream, not into a dead buffer.
        let (tx, rx) = mpsc::channel::<Bytes>(1);
        let out = session.client.out.clone();
        let stop = tokio_util::sync::CancellationToken::new();
        // A new stream replaces the old one (a reconnecting client).
        let previous = session
            .client
            .stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(stop.clone());
        if let Some(p) = previous {
            p.cancel();
        }
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    m = out.next_message() => m,
                    _ = stop.cancelled() => None,
                };
                let Some((line, notification)) = next else {
                    break;
                };
                let delivered = tokio::select! {
                    r = tx.send(sse_event(&line)) => r.is_ok(),
                    _ = stop.cancelled() => false,
                };
                if !delivered {
                    out.unpop(line, notification);
                    break;
                }
            }
        });
        sse_response(rx)
    }
}
