//! Serving a console on its own listener: loopback unless an admin token is set.

use std::net::SocketAddr;

use axum::Router;
use tokio::net::TcpListener;

use crate::options::ConsoleOptions;

/// Why a console could not be served.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServeError {
    /// A non-loopback address without an admin token.
    NeedsToken(SocketAddr),
    /// Binding or serving failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NeedsToken(a) => write!(
                f,
                "the console listens on {a}, beyond loopback: set an admin token \
                 (--admin-token-file or STEADFAST_CONSOLE_TOKEN), or listen on 127.0.0.1"
            ),
            Self::Io(e) => write!(f, "console listener: {e}"),
        }
    }
}

impl std::error::Error for ServeError {}

/// Refuses an address beyond loopback unless `opts` requires an admin token.
///
/// ```
/// use steadfast_console::{ConsoleOptions, check_listen};
/// assert!(check_listen("127.0.0.1:9090".parse().unwrap(), &ConsoleOptions::new()).is_ok());
/// assert!(check_listen("0.0.0.0:9090".parse().unwrap(), &ConsoleOptions::new()).is_err());
/// let with_token = ConsoleOptions::new().admin_token("s3cret");
/// assert!(check_listen("0.0.0.0:9090".parse().unwrap(), &with_token).is_ok());
/// ```
pub fn check_listen(addr: SocketAddr, opts: &ConsoleOptions) -> Result<(), ServeError> {
    if addr.ip().is_loopback() || opts.requires_token() {
        Ok(())
    } else {
        Err(ServeError::NeedsToken(addr))
    }
}

/// Binds `addr` after [`check_listen`], then serves `app` until the process ends.
pub async fn serve(addr: SocketAddr, app: Router, opts: &ConsoleOptions) -> Result<(), ServeError> {
    check_listen(addr, opts)?;
    let listener = TcpListener::bind(addr).await.map_err(ServeError::Io)?;
    serve_on(listener, app).await
}

/// Serves `app` on a listener already bound (after [`check_listen`]).
pub async fn serve_on(listener: TcpListener, app: Router) -> Result<(), ServeError> {
    axum::serve(listener, app).await.map_err(ServeError::Io)
}
