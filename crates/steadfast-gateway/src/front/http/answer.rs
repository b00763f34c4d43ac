//! A request's answer bound and the guard that cancels it when its client leaves first: shared
//! by every way an answer goes back (one JSON body, an event stream, a listen stream), below
//! all of them.

use std::sync::Arc;
use std::time::Duration;

use crate::session::Session;

/// How long a POST waits for its answer at most: a tool call is bounded by its own policy;
/// this only keeps a lost answer from holding the connection for ever.
pub(super) const ANSWER_BOUND: Duration = Duration::from_secs(600);

/// Cancels the client's request when dropped armed: its POST went away before the answer
/// (hyper drops the handler's future, or the stream's body, when the connection closes).
pub(super) struct CancelUnlessAnswered {
    pub(super) session: Arc<Session>,
    pub(super) id: String,
    pub(super) armed: bool,
}

impl CancelUnlessAnswered {
    /// The request is over (answered, cancelled, or given up): nothing to cancel.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelUnlessAnswered {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(session = %self.session.id, "a client left its request's stream: the request is cancelled");
            self.session.cancel_request(&self.id);
        }
    }
}
