//! A live connection to an upstream: where requests are written.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::wire::jsonrpc;

pub(super) enum Transport {
    Stdio(mpsc::Sender<Vec<u8>>),
    #[cfg(feature = "http")]
    Http(Arc<dyn HttpSession>),
}

/// An HTTP session as its link sees it: where each message is posted. Implemented by
/// `http::Session`; a trait so that this file, below the transports, names none of them (the
/// HTTP transport takes its own session back with `Arc::downcast`).
#[cfg(feature = "http")]
pub(super) trait HttpSession: std::any::Any + Send + Sync {
    /// Posts one message; `request` is the upstream id when a reply is expected, `exchange`
    /// bounds a request's exchange. An error means the message was certainly not sent.
    fn send(
        self: Arc<Self>,
        line: Vec<u8>,
        request: Option<u64>,
        exchange: Option<CancellationToken>,
    ) -> Result<(), String>;
}

/// One connection (one child process, or one HTTP session). A restart makes a new one with a
/// higher generation, so replies and cancels meant for the old one go nowhere.
pub(crate) struct Link {
    generation: u64,
    closed: CancellationToken,
    pub(super) transport: Transport,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Link {
    pub(super) fn new(generation: u64, transport: Transport) -> Arc<Self> {
        Arc::new(Self {
            generation,
            closed: CancellationToken::new(),
            transport,
        })
    }

    /// Which connection this is (1 for the first).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the connection has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Marks the connection ended.
    pub(super) fn close(&self) {
        self.closed.cancel();
    }

    /// Resolves when the connection ends.
    pub(super) async fn closed(&self) {
        self.closed.cancelled().await;
    }

    /// Whether this is an HTTP session (each message its own exchange).
    pub(crate) fn is_http(&self) -> bool {
        match &self.transport {
            Transport::Stdio(_) => false,
            #[cfg(feature = "http")]
            Transport::Http(_) => true,
        }
    }

    /// Writes one message. `request` is the upstream id when a reply is expected. An error
    /// means the message was certainly not delivered.
    pub(crate) fn send(&self, line: Vec<u8>, request: Option<u64>) -> Result<(), String> {
        self.send_inner(line, request, None)
    }

    /// Writes request `id`; over HTTP its exchange lasts until `exchange` is cancelled (the
    /// request settled or was given up), so a hung server holds no connection past that.
    pub(super) fn send_request(
        &self,
        line: Vec<u8>,
        id: u64,
        exchange: Option<CancellationToken>,
    ) -> Result<(), String> {
        self.send_inner(line, Some(id), exchange)
    }

    fn send_inner(
        &self,
        line: Vec<u8>,
        request: Option<u64>,
        exchange: Option<CancellationToken>,
    ) -> Result<(), String> {
        if self.is_closed() {
            return Err("the upstream connection is closed".to_owned());
        }
        // A stdio child reads its input in order: nothing per message to bound.
        #[cfg(not(feature = "http"))]
        let _ = (request, exchange);
        match &self.transport {
            Transport::Stdio(tx) => tx.try_send(line).map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => {
                    "the upstream is not reading its input (queue full)".to_owned()
                }
                mpsc::error::TrySendError::Closed(_) => {
                    "the upstream connection is closed".to_owned()
                }
            }),
            #[cfg(feature = "http")]
            Transport::Http(session) => session.clone().send(line, request, exchange),
        }
    }

    /// Tells the server to stop working on request `id`.
    pub(crate) fn cancel(&self, id: u64, reason: &str) {
        let params = serde_json::json!({"requestId": id, "reason": reason}).to_string();
        let _ = self.send(
            jsonrpc::notification("notifications/cancelled", Some(&params)),
            None,
        );
    }
}
