//! What every front does around its clients, once: build the router and the durable task store
//! from the config, wait for a signal (SIGHUP reloads the config, SIGTERM/SIGINT stop), and
//! stop in order. A front adds only how clients reach it (`stdio.rs`, `http/`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::config::Config;
use crate::config::layered::Overrides;
use crate::route::router::Router;
use crate::route::topology::UpstreamSet;
use crate::session::Session;

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

/// Reads the configuration again (on SIGHUP): the new one, or every error found in it.
pub type Reload = Arc<dyn Fn() -> Result<Config, Vec<crate::ConfigError>> + Send + Sync>;

/// A [`Reload`] that reads the config file at `path` again, layered over the same `flags`
/// ([`Config::layered`]), picking `server` of an `mcpServers` file.
pub fn reload_file(path: PathBuf, server: Option<String>, flags: Overrides) -> Reload {
    Arc::new(move || Config::layered(Some(&path), server.as_deref(), &flags))
}

/// The parts of a running gateway every front shares.
pub(crate) struct Gateway {
    pub(crate) config: Arc<Config>,
    pub(crate) router: Arc<Router>,
    /// `[tasks]` Durable tool calls, when some tool is `durable = true`.
    pub(crate) durable: Option<Arc<crate::tasks::Durable>>,
}

impl Gateway {
    /// The router over `upstreams` (upstreams not started) with its shared state; then
    /// `before_tasks` (a front that starts its upstreams early does it here, before the
    /// durable task store is opened); then that store, when some tool is durable.
    pub(crate) async fn build(
        config: Config,
        upstreams: UpstreamSet,
        before_tasks: impl FnOnce(&Arc<Router>),
    ) -> std::io::Result<Self> {
        let config = Arc::new(config);
        let shared = crate::route::shared::SharedState::connect(&config).await;
        let router = Router::build(upstreams, &config, &shared)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        before_tasks(&router);
        let durable = crate::tasks::Durable::open(&config, router.clone())
            .await
            .map_err(std::io::Error::other)?;
        crate::front::admin::publish(&router, durable.as_ref());
        Ok(Self {
            config,
            router,
            durable,
        })
    }

    /// Installs on `session` what every session gets: the durable tasks extension, when on.
    pub(crate) fn extend(&self, session: &Session) {
        if let Some(d) = &self.durable {
            session.extend(crate::tasks::SessionTasks::new(d.clone()));
        }
    }

    /// Stops, once the front ended its sessions (cancelling what they had in flight): durable
    /// attempts in flight cancelled and their leases released, a moment for the cancelled
    /// requests to reach their upstreams, then every upstream ended.
    pub(crate) async fn stop(&self) {
        if let Some(d) = &self.durable {
            d.shutdown().await;
        }
        // Let the cancelled tasks drop their upstream requests (each sends a cancel upstream).
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.router.shutdown().await;
    }
}

/// The signals a front answers: SIGHUP reloads, SIGTERM and SIGINT stop.
pub(crate) struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
    reload: Option<Reload>,
}

impl Signals {
    /// Listens for the signals from now on; SIGHUP calls `reload`, if any.
    pub(crate) fn listen(reload: Option<Reload>) -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
            reload,
        })
    }

    /// Waits for SIGTERM or SIGINT, applying every SIGHUP's reload to `router` meanwhile.
    /// Cancel-safe: a front selects it against its own events, and a signal that arrives while
    /// this is not polled is not lost.
    pub(crate) async fn stop(&mut self, router: &Router) -> Exit {
        loop {
            tokio::select! {
                _ = self.term.recv() => return Exit::Signal(libc::SIGTERM),
                _ = self.int.recv() => return Exit::Signal(libc::SIGINT),
                _ = self.hup.recv() => match self.reload.as_ref().map(|r| r()) {
                    Some(Ok(new)) => log_reload(router, new),
                    Some(Err(errors)) => {
                        for e in errors {
                            tracing::error!("config not reloaded (the old one stays): {e}");
                        }
                    }
                    None => tracing::info!("SIGHUP: no config file to reload"),
                },
            }
        }
    }
}

/// Applies a reloaded configuration and says what it changed (or why it was refused).
fn log_reload(router: &Router, new: Config) {
    let single_changed = matches!(
        router.topology(),
        crate::route::topology::Topology::Single(_)
    ) && new.upstream.is_some()
        && new.upstream.as_ref().map(|u| format!("{u:?}"))
            != router.config().upstream.as_ref().map(|u| format!("{u:?}"));
    match router.reload(Arc::new(new)) {
        Ok(changes) => {
            if single_changed {
                tracing::warn!("the new config names another [upstream]; that takes a restart");
            }
            for c in &changes {
                tracing::info!("config reloaded: {c}");
            }
            tracing::info!("config reloaded: policies, limits and budgets in force for new calls");
        }
        Err(why) => tracing::error!("config not reloaded (the old one stays): {why}"),
    }
}
