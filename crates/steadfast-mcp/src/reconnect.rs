//! A client connection that comes back: connect with retries, and reconnect (restart a child
//! process, or reopen an HTTP session) whenever the upstream goes away.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::Peer;
use rmcp::service::{RoleClient, RunningService, Service};
use steadfast::{CancellationToken, RetryError, RetryPolicy};
use tokio::sync::watch;

use crate::connect::{ConnectError, Upstream, connect};
use crate::failure::CallFailure;

type OnConnect =
    dyn Fn(Peer<RoleClient>, bool) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync;

#[derive(Clone)]
enum State {
    Down,
    Up(Peer<RoleClient>),
    Dead(String),
}

struct Inner<S> {
    upstream: Upstream,
    reconnect: RetryPolicy,
    make: Box<dyn Fn() -> S + Send + Sync>,
    on_connect: Option<Box<OnConnect>>,
    state: watch::Sender<State>,
    reconnects: AtomicU64,
    shutdown: CancellationToken,
}

/// An upstream MCP connection supervised for its whole life.
///
/// [`ReconnectingBuilder::connect`] connects under one policy (default
/// [`default_connect_policy`](crate::default_connect_policy): 3 attempts, 500 ms base, 5 s
/// cap); afterwards, whenever the service loop ends — the child exited, the transport closed —
/// it reconnects under another, runs the `on_connect` hook (to re-learn tools, tell a
/// downstream client its tool list changed, …), and hands the new peer to callers. Callers ask
/// for the peer with [`peer`](Self::peer), which waits a bounded time for a reconnection in
/// progress and otherwise fails with [`CallFailure::NotSent`] — a failure that proves the call
/// never ran, so even a non-idempotent tool may be retried after it.
///
/// Dropping every handle, or [`shutdown`](Self::shutdown), stops the upstream.
pub struct Reconnecting<S: Service<RoleClient>> {
    inner: Arc<Inner<S>>,
}

impl<S: Service<RoleClient>> Clone for Reconnecting<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Service<RoleClient>> std::fmt::Debug for Reconnecting<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconnecting")
            .field("upstream", &self.inner.upstream.to_string())
            .field("connected", &self.is_connected())
            .field("reconnects", &self.reconnects())
            .finish()
    }
}

/// Builds a [`Reconnecting`] connection.
pub struct ReconnectingBuilder<S> {
    upstream: Upstream,
    connect: RetryPolicy,
    reconnect: RetryPolicy,
    make: Box<dyn Fn() -> S + Send + Sync>,
    on_connect: Option<Box<OnConnect>>,
}

impl<S> std::fmt::Debug for ReconnectingBuilder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconnectingBuilder")
            .field("upstream", &self.upstream)
            .field("connect", &self.connect)
            .field("reconnect", &self.reconnect)
            .finish_non_exhaustive()
    }
}

impl<S: Service<RoleClient>> ReconnectingBuilder<S> {
    /// The policy for the first connection.
    pub fn connect_policy(mut self, policy: RetryPolicy) -> Self {
        self.connect = policy;
        self
    }

    /// The policy for each reconnection (default: 10 attempts, 500 ms base, 30 s cap).
    pub fn reconnect_policy(mut self, policy: RetryPolicy) -> Self {
        self.reconnect = policy;
        self
    }

    /// Runs after every successful (re)connection, before callers get the new peer. The flag
    /// says whether it is a reconnection.
    pub fn on_connect<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(Peer<RoleClient>, bool) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.on_connect = Some(Box::new(move |p, again| Box::pin(f(p, again))));
        self
    }

    /// Connects (retrying under the connect policy) and starts supervising.
    pub async fn connect(self) -> Result<Reconnecting<S>, RetryError<ConnectError>> {
        let running = connect(&self.upstream, &self.connect, &self.make).await?;
        let (state, _) = watch::channel(State::Down);
        let inner = Arc::new(Inner {
            upstream: self.upstream,
            reconnect: self.reconnect,
            make: self.make,
            on_connect: self.on_connect,
            state,
            reconnects: AtomicU64::new(0),
            shutdown: CancellationToken::new(),
        });
        inner.up(&running, false).await;
        tokio::spawn(supervise(
            Arc::downgrade(&inner),
            inner.shutdown.clone(),
            running,
        ));
        Ok(Reconnecting { inner })
    }
}

/// The reconnect policy when none is given: 10 attempts, 500 ms base, 30 s cap, full jitter.
///
/// ```
/// assert_eq!(steadfast_mcp::default_reconnect_policy().max_attempts(), 10);
/// ```
pub fn default_reconnect_policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(10)
        .base_delay(Duration::from_millis(500))
        .max_delay(Duration::from_secs(30))
        .build()
        .unwrap_or_default()
}

impl<S: Service<RoleClient>> Inner<S> {
    async fn up(&self, running: &RunningService<RoleClient, S>, again: bool) {
        if let Some(hook) = &self.on_connect {
            hook(running.peer().clone(), again).await;
        }
        self.state.send_replace(State::Up(running.peer().clone()));
    }
}

/// Reconnects whenever the service ends, until shutdown or until every handle is gone.
async fn supervise<S: Service<RoleClient>>(
    inner: std::sync::Weak<Inner<S>>,
    shutdown: CancellationToken,
    mut running: RunningService<RoleClient, S>,
) {
    loop {
        // Dropping `running` (with this select, on shutdown) stops the service and its child.
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = running.waiting() => {}
        }
        let Some(inner) = inner.upgrade() else { return };
        inner.state.send_replace(State::Down);
        if shutdown.is_cancelled() {
            return;
        }
        let n = inner.reconnects.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(reconnects = n, upstream = %inner.upstream, "upstream went away; reconnecting");
        let again = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = connect(&inner.upstream, &inner.reconnect, &inner.make) => r,
        };
        match again {
            Ok(r) => {
                inner.up(&r, true).await;
                tracing::info!(upstream = %inner.upstream, "upstream reconnected");
                running = r;
            }
            Err(e) => {
                let why = steadfast::sanitize(&e.to_string()).into_owned();
                tracing::error!(error = %why, "could not reconnect; giving up");
                inner.state.send_replace(State::Dead(why));
                return;
            }
        }
    }
}

impl<S: Service<RoleClient>> Reconnecting<S> {
    /// A builder for `upstream`, whose client side is served by what `make` returns (a fresh
    /// service per connection).
    ///
    /// ```no_run
    /// use steadfast_mcp::{Reconnecting, Upstream};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let conn = Reconnecting::builder(Upstream::command("python3", ["server.py"]), || ())
    ///     .connect()
    ///     .await?;
    /// let peer = conn.peer(std::time::Duration::from_secs(10)).await?;
    /// let tools = peer.list_all_tools().await?;
    /// # let _ = tools; Ok(()) }
    /// ```
    pub fn builder(
        upstream: Upstream,
        make: impl Fn() -> S + Send + Sync + 'static,
    ) -> ReconnectingBuilder<S> {
        ReconnectingBuilder {
            upstream,
            connect: crate::default_connect_policy(),
            reconnect: default_reconnect_policy(),
            make: Box::new(make),
            on_connect: None,
        }
    }

    /// The live peer, waiting up to `wait` for a reconnection in progress (including one not
    /// noticed yet: a peer whose transport just closed).
    pub async fn peer(&self, wait: Duration) -> Result<Peer<RoleClient>, CallFailure> {
        let mut rx = self.inner.state.subscribe();
        let ready = rx.wait_for(|s| match s {
            State::Up(p) => !p.is_transport_closed(),
            State::Dead(_) => true,
            State::Down => false,
        });
        match tokio::time::timeout(wait, ready).await {
            Ok(Ok(s)) => match &*s {
                State::Up(p) => Ok(p.clone()),
                State::Dead(why) => Err(CallFailure::NotSent(format!("upstream is down: {why}"))),
                State::Down => Err(CallFailure::NotSent("upstream is reconnecting".into())),
            },
            _ => Err(CallFailure::NotSent("upstream is reconnecting".into())),
        }
    }

    /// Whether a live connection is up right now.
    pub fn is_connected(&self) -> bool {
        matches!(&*self.inner.state.borrow(), State::Up(p) if !p.is_transport_closed())
    }

    /// Times the connection was lost and reconnection began.
    pub fn reconnects(&self) -> u64 {
        self.inner.reconnects.load(Ordering::Relaxed)
    }

    /// Stops supervising and closes the upstream.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
    }
}

impl<S> Drop for Inner<S> {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
