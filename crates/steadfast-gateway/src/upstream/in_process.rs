//! A server in the same process (`steadfast_mcp::Upstream::InProcess`): the stdio transport's
//! line framing over a pipe its owner opens, with no child process.
//!
//! It is a real upstream to everything above the link (the supervisor's handshake, restarts
//! and backoff, the request path): only starting and ending differ. A start asks the
//! `InProcess` value for a new pipe; the connection ends when the server closes its output;
//! terminating it closes the server's input and stops reading.

use std::sync::Arc;

use super::Upstream;
use super::link::Link;
use super::stdio::{SpawnError, pump};

/// Opens a connection to the in-process server `up` names.
pub(crate) fn open(up: &Arc<Upstream>, generation: u64) -> Result<Arc<Link>, SpawnError> {
    let steadfast_mcp::Upstream::InProcess(server) = up.spec() else {
        return Err(SpawnError {
            why: "not an in-process upstream".to_owned(),
            hopeless: true,
        });
    };
    let pipe = server.connect().map_err(|e| SpawnError {
        why: format!("cannot connect `{}`: {e}", up.describe()),
        // As for a command: what does not exist or may not be used will not start later.
        hopeless: matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
        ),
    })?;
    Ok(pump(up, generation, pipe.reader, pipe.writer, true))
}

/// Why the connection ended, once it has.
pub(crate) async fn ended(link: &Link) -> String {
    link.closed().await;
    "the in-process upstream closed its pipe".to_owned()
}
