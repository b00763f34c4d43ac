//! The stdio front: one client on the proxy's stdin and stdout.
//!
//! The proxy ends when the client closes stdin (at any moment, the handshake included), when
//! stdout is closed, or on SIGTERM/SIGINT. At stdin's end the requests already read are
//! answered first, for at most `drain_timeout` (`printf '…' | steadfast proxy -- server` gets
//! its answers, as from the server alone). Ending means: cancel what is still in flight (each
//! upstream request is cancelled), then end the child — close its input, then TERM, then KILL,
//! each after a grace period — so no server is left orphaned.
//!
//! A client's line is held up to `max_request_size` (16 MiB), not the larger cap on what
//! upstreams send: requests are small, and a client's garbage must not grow the proxy by
//! hundreds of MB. A longer line is skipped (and answered, when its id can be read).

use std::os::fd::AsFd;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

use super::serve::{Exit, Gateway, Reload, Signals};
use crate::config::Config;
use crate::route::topology::UpstreamSet;
use crate::session::Session;
use crate::session::client::Client;
use crate::wire::framing::LineReader;

fn input() -> Box<dyn AsyncRead + Unpin + Send> {
    // A pipe is read directly by the reactor; tokio's stdin goes through a blocking thread
    // per read, which costs a thread hop per message.
    #[cfg(unix)]
    if let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned()
        && let Ok(rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
    {
        return Box::new(rx);
    }
    Box::new(tokio::io::stdin())
}

fn output() -> Box<dyn AsyncWrite + Unpin + Send> {
    #[cfg(unix)]
    if let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned()
        && let Ok(tx) = tokio::net::unix::pipe::Sender::from_owned_fd(fd)
    {
        return Box::new(tx);
    }
    Box::new(tokio::io::stdout())
}

/// Serves one client on stdin/stdout in front of `upstream`, until the client leaves or a
/// signal arrives.
pub async fn serve_stdio(
    config: Config,
    upstreams: impl Into<UpstreamSet>,
) -> std::io::Result<Exit> {
    serve_stdio_with(config, upstreams, None).await
}

/// [`serve_stdio`], and on SIGHUP `reload` is called: a valid new configuration replaces the
/// policies, limits and budget for calls that start from then on (the session and the upstream
/// stay); an invalid one is reported with its located errors and the old one kept.
pub async fn serve_stdio_with(
    config: Config,
    upstreams: impl Into<UpstreamSet>,
    reload: Option<Reload>,
) -> std::io::Result<Exit> {
    serve_io(config, upstreams, input(), output(), reload).await
}

/// The stdio front over any byte stream: serves one client that writes its messages (one per
/// line) to `reader` and reads the answers from `writer`, as [`serve_stdio_with`] does on
/// stdin/stdout, until `reader` ends (then what was read is answered first, within
/// `drain_timeout`), `writer` fails, or a signal arrives — SIGTERM/SIGINT stop it and SIGHUP
/// calls `reload`, as for the stdio front, so a program that embeds it should expect that.
///
/// With [`steadfast_mcp::Upstream::InProcess`] upstreams the whole gateway runs in one
/// process over pipes (a client on a socket, or a test on `tokio::io::duplex` pipes).
pub async fn serve_io(
    config: Config,
    upstreams: impl Into<UpstreamSet>,
    reader: impl AsyncRead + Send + Unpin + 'static,
    writer: impl AsyncWrite + Send + Unpin + 'static,
    reload: Option<Reload>,
) -> std::io::Result<Exit> {
    let gateway = Gateway::build(config, upstreams.into(), |_| {}).await?;
    let limits = gateway.config.limits;
    let client = Client::new(limits.max_queued_notifications);
    let session = Session::new(client.clone(), gateway.router.clone(), limits);
    gateway.extend(&session);

    let out = client.out.clone();
    let mut writer = tokio::spawn(async move { out.write_to(writer).await });
    let reader_session = session.clone();
    let max = limits.max_request_size;
    let mut reader = tokio::spawn(async move {
        let mut lines = LineReader::new(reader, max);
        while let Ok(Some(frame)) = lines.next().await {
            reader_session.on_frame(frame);
        }
    });

    let mut signals = Signals::listen(reload)?;
    let mut exit = tokio::select! {
        _ = &mut reader => Exit::ClientClosed,
        _ = &mut writer => Exit::OutputClosed,
        // The client has its answer (queued before this fires): as an MCP server that cannot
        // start, the proxy exits with an error.
        _ = session.unstartable.cancelled() => Exit::UpstreamFailed,
        exit = signals.stop(&gateway.router) => exit,
    };
    tracing::info!(?exit, "stopping");
    reader.abort();
    // A modern client's listens end gracefully: their results are queued before the rest is
    // cancelled (a listen never ends by itself, so it is not drained).
    gateway
        .router
        .changes()
        .close_all(Duration::from_millis(500))
        .await;
    if exit == Exit::ClientClosed {
        exit = drain(&session, &gateway, &mut writer, &mut signals).await;
    }
    session.cancel_all();
    gateway.stop().await;
    if exit != Exit::OutputClosed && !writer.is_finished() {
        client.out.close();
        let _ = tokio::time::timeout(Duration::from_millis(500), writer).await;
    }
    Ok(exit)
}

/// At stdin's end: waits (up to `drain_timeout`) for the requests already read to be answered,
/// unless stdout closes or a signal arrives first; why the proxy then stops.
async fn drain(
    session: &Session,
    gateway: &Gateway,
    writer: &mut tokio::task::JoinHandle<std::io::Result<()>>,
    signals: &mut Signals,
) -> Exit {
    let bound = gateway.config.upstream_settings().drain_timeout;
    if session.in_flight() == 0 || bound.is_zero() {
        return Exit::ClientClosed;
    }
    tracing::debug!(
        in_flight = session.in_flight(),
        ?bound,
        "stdin ended: answering what was read"
    );
    tokio::select! {
        r = tokio::time::timeout(bound, session.drained()) => {
            if r.is_err() {
                tracing::info!(in_flight = session.in_flight(), ?bound, "stdin ended and drain_timeout passed: cancelling what is in flight");
            }
            Exit::ClientClosed
        }
        _ = &mut *writer => Exit::OutputClosed,
        exit = signals.stop(&gateway.router) => exit,
    }
}
