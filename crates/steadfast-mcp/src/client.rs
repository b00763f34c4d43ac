//! Sending one tool call to an upstream peer, with per-attempt timeouts and cancellation that
//! reaches the upstream.

use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientRequest, ProgressToken, RequestId, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RoleClient};
use rmcp::{Peer, ServiceError};

use crate::failure::CallFailure;

/// Per-attempt limits for [`send_tool_call`].
///
/// ```
/// use std::time::Duration;
/// let limits = steadfast_mcp::AttemptLimits { idle: Some(Duration::from_secs(30)), max: None };
/// # let _ = limits;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttemptLimits {
    /// Fails the attempt after this long without a response or a progress notification.
    pub idle: Option<Duration>,
    /// Fails the attempt after this long, progress or not.
    pub max: Option<Duration>,
}

impl AttemptLimits {
    fn options(self) -> PeerRequestOptions {
        let mut o = PeerRequestOptions::no_options();
        if let Some(idle) = self.idle {
            o = PeerRequestOptions::with_timeout(idle).reset_timeout_on_progress();
        }
        if let Some(max) = self.max {
            o = o.with_max_total_timeout(max);
        }
        o
    }
}

/// Tells the upstream to stop a request whose caller went away, unless it finished.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let n = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(id),
                    Some("cancelled by the client".to_owned()),
                ));
                let _ = peer.send_notification(n.into()).await;
            });
        }
    }
}

/// What the upstream answered to `tools/call`.
#[derive(Debug)]
pub enum ToolAnswer {
    /// A tool result (which may have `isError: true`).
    Result(CallToolResult),
    /// Any other result — a task handle, an input-required round — to hand to the caller as it
    /// is, without judging or retrying it.
    Other(Box<ServerResult>),
}

/// Sends `tools/call` to `peer` and waits for the answer.
///
/// Failures are sorted as [`send_request`] sorts them; `on_sent` and cancellation on drop work
/// the same way.
pub async fn send_tool_call(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
    limits: AttemptLimits,
    on_sent: impl FnOnce(&ProgressToken),
) -> Result<ToolAnswer, CallFailure> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    Ok(match send_request(peer, request, limits, on_sent).await? {
        ServerResult::CallToolResult(r) => ToolAnswer::Result(r),
        other => ToolAnswer::Other(Box::new(other)),
    })
}

/// Sends any request to `peer` and waits for the answer.
///
/// Failures are sorted by what they prove: the request could not be queued at all →
/// [`CallFailure::NotSent`]; a JSON-RPC error → [`CallFailure::Rpc`]; timeout or transport
/// lost while waiting → [`CallFailure::Lost`]. `on_sent` runs as soon as the request is on its
/// way, with the progress token the upstream will use (to map progress back to the caller's
/// token). If the returned future is dropped before the answer, the upstream is sent
/// `notifications/cancelled`.
pub async fn send_request(
    peer: &Peer<RoleClient>,
    request: ClientRequest,
    limits: AttemptLimits,
    on_sent: impl FnOnce(&ProgressToken),
) -> Result<ServerResult, CallFailure> {
    if peer.is_transport_closed() {
        return Err(CallFailure::NotSent("upstream is not connected".to_owned()));
    }
    let handle = match peer
        .send_request_with_option(request, limits.options())
        .await
    {
        Ok(h) => h,
        Err(ServiceError::TransportClosed) => {
            return Err(CallFailure::NotSent("upstream transport closed".to_owned()));
        }
        Err(e) => return Err(CallFailure::NotSent(e.to_string())),
    };
    on_sent(&handle.progress_token);
    let mut guard = CancelOnDrop {
        peer: peer.clone(),
        id: Some(handle.id.clone()),
    };
    let response = handle.await_response().await;
    // Answered, or timed out (rmcp has already sent the cancellation): nothing left to cancel.
    guard.id = None;
    match response {
        Ok(result) => Ok(result),
        Err(ServiceError::McpError(e)) => Err(CallFailure::Rpc(e)),
        Err(e) => Err(CallFailure::Lost(e)),
    }
}
