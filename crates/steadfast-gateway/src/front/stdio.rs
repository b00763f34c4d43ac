//! The stdio front: one client on the proxy's stdin and stdout.
//!
//! The proxy ends when the client closes stdin (at any moment, the handshake included), when
//! stdout is closed, or on SIGTERM/SIGINT. Ending means: cancel what is in flight (each
//! upstream request is cancelled), then end the child — close its input, then TERM, then KILL,
//! each after a grace period — so no server is left orphaned.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::config::Config;
use crate::route::router::{Router, UpstreamSet};
use crate::session::Session;
use crate::session::client::Client;
use crate::wire::framing::LineReader;

/// Why the proxy stopped; [`Exit::code`] is the conventional exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The client closed stdin.
    ClientClosed,
    /// stdout was closed (or failed).
    OutputClosed,
    /// A signal (its number).
    Signal(i32),
    /// No upstream could be started: the client's `initialize` was answered with the reason.
    UpstreamFailed,
}

impl Exit {
    /// 0 when the client left, 128 + the signal's number for a signal, 1 when no upstream
    /// could be started.
    pub fn code(self) -> i32 {
        match self {
            Exit::ClientClosed | Exit::OutputClosed => 0,
            Exit::Signal(n) => 128 + n,
            Exit::UpstreamFailed => 1,
        }
    }
}

fn input() -> Box<dyn AsyncRead + Unpin + Send> {
    // A pipe is read directly by the reactor; tokio's stdin goes through a blocking thread
    // per read, which costs a thread hop per message.
    #[cfg(unix)]
    if let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() {
        if let Ok(rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd) {
            return Box::new(rx);
        }
    }
    Box::new(tokio::io::stdin())
}

fn output() -> Box<dyn AsyncWrite + Unpin + Send> {
    #[cfg(unix)]
    if let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() {
        if let Ok(tx) = tokio::net::unix::pipe::Sender::from_owned_fd(fd) {
            return Box::new(tx);
        }
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

/// Reads the configuration again (on SIGHUP): the new one, or every error found in it.
pub type Reload = Arc<dyn Fn() -> Result<Config, Vec<crate::ConfigError>> + Send + Sync>;

/// [`serve_stdio`], and on SIGHUP `reload` is called: a valid new configuration replaces the
/// policies, limits and budget for calls that start from then on (the session and the upstream
/// stay); an invalid one is reported with its located errors and the old one kept.
pub async fn serve_stdio_with(
    config: Config,
    upstreams: impl Into<UpstreamSet>,
    reload: Option<Reload>,
) -> std::io::Result<Exit> {
    let config = Arc::new(config);
    let limits = config.limits;
    let client = Client::new(limits.max_queued_notifications);
    let shared = crate::route::shared::Shared::connect(&config).await;
    let router = Router::build(upstreams.into(), &config, &shared)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let session = Session::new(client.clone(), router.clone(), limits);
    // [tasks] Durable tool calls, when some tool is `durable = true`.
    let durable = crate::tasks::Durable::open(&config, router.clone())
        .await
        .map_err(std::io::Error::other)?;
    if let Some(d) = &durable {
        session.extend(crate::tasks::SessionTasks::new(d.clone()));
    }

    let out = client.out.clone();
    let mut writer = tokio::spawn(async move { out.write_to(output()).await });
    let reader_session = session.clone();
    let max = config.upstream_settings().max_message_size;
    let mut reader = tokio::spawn(async move {
        let mut lines = LineReader::new(input(), max);
        while let Ok(Some(frame)) = lines.next().await {
            reader_session.on_frame(frame);
        }
    });

    let mut term = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut hup = signal(tokio::signal::unix::SignalKind::hangup())?;
    let exit = loop {
        tokio::select! {
            _ = &mut reader => break Exit::ClientClosed,
            _ = &mut writer => break Exit::OutputClosed,
            // The client has its answer (queued before this fires): as an MCP server that
            // cannot start, the proxy exits with an error.
            _ = session.unstartable.cancelled() => break Exit::UpstreamFailed,
            _ = term.recv() => break Exit::Signal(libc::SIGTERM),
            _ = int.recv() => break Exit::Signal(libc::SIGINT),
            _ = hup.recv() => match &reload {
                Some(reload) => match reload() {
                    Ok(new) => crate::route::router::log_reload(&router, new),
                    Err(errors) => {
                        for e in errors {
                            tracing::error!("config not reloaded (the old one stays): {e}");
                        }
                    }
                },
                None => tracing::info!("SIGHUP: no config file to reload"),
            },
        }
    };
    tracing::info!(?exit, "stopping");
    reader.abort();
    // A modern client's listens end gracefully: their results are queued before the rest is
    // cancelled.
    router.changes().close_all(Duration::from_millis(500)).await;
    session.cancel_all();
    if let Some(d) = &durable {
        d.shutdown().await; // [tasks] attempts in flight are cancelled, leases released
    }
    // Let the cancelled tasks drop their upstream requests (each sends a cancel upstream).
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    router.shutdown().await;
    if exit != Exit::OutputClosed {
        client.out.close();
        let _ = tokio::time::timeout(Duration::from_millis(500), writer).await;
    }
    Ok(exit)
}

fn signal(kind: tokio::signal::unix::SignalKind) -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(kind)
}
