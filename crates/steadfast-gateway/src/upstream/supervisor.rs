//! Keeps an upstream connected: connect, handshake, watch, restart with backoff, and never
//! give up for good.
//!
//! A child that dies soon after it started counts as a failed start, so a server that exits
//! right after `initialize` is restarted on the policy's backoff rather than in a hot loop.
//! When the policy's attempts are spent, the supervisor keeps probing at the policy's
//! maximum delay: an upstream that becomes startable again is picked up without restarting the
//! proxy, and meanwhile calls fail fast with an honest message.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use steadfast::{RetryPolicy, Rng};
use tokio::time::Instant;

use super::{LinkState, Reply, Upstream};
use crate::jsonrpc;

/// How an upstream is kept connected and how long things may take.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The bound on a handshake (and on a client's `initialize` waiting for one).
    pub init_timeout: Duration,
    /// How long a call waits for a (re)starting upstream before it counts as not sent.
    pub reconnect_wait: Duration,
    /// Backoff for the first connection.
    pub connect: RetryPolicy,
    /// Backoff for restarts.
    pub restart: RetryPolicy,
    /// The largest message read from the upstream.
    pub max_message_size: usize,
    /// The bound on a forwarded request other than `tools/call`.
    pub request_timeout: Duration,
    /// A connection that lived this long was a good start: the failure count starts over.
    pub stable_after: Duration,
    /// Between closing a child's input, TERM and KILL.
    pub shutdown_grace: Duration,
    /// Messages queued toward the upstream.
    pub max_queue: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            init_timeout: Duration::from_secs(25),
            reconnect_wait: Duration::from_secs(10),
            connect: steadfast_mcp::default_connect_policy(),
            restart: steadfast_mcp::default_reconnect_policy(),
            max_message_size: 16 * 1024 * 1024,
            request_timeout: Duration::from_secs(60),
            stable_after: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(2),
            max_queue: 4096,
        }
    }
}

enum Conn {
    Stdio(super::stdio::Process),
    #[cfg(feature = "http")]
    Http(Arc<super::Link>),
}

impl Conn {
    fn link(&self) -> &Arc<super::Link> {
        match self {
            Conn::Stdio(p) => &p.link,
            #[cfg(feature = "http")]
            Conn::Http(l) => l,
        }
    }

    async fn ended(&mut self) -> String {
        match self {
            Conn::Stdio(p) => p.ended().await,
            #[cfg(feature = "http")]
            Conn::Http(l) => {
                l.closed().await;
                super::http::close_reason(l)
            }
        }
    }

    async fn terminate(self, grace: Duration) {
        match self {
            Conn::Stdio(p) => p.terminate(grace).await,
            #[cfg(feature = "http")]
            Conn::Http(l) => super::http::terminate(&l, grace).await,
        }
    }
}

/// The supervisor's loop; ends when the upstream is shut down.
pub(super) async fn run(up: Arc<Upstream>) {
    let mut failures = 0u32;
    let mut generation = 0u64;
    let mut ever_connected = false;
    let mut previous = Duration::ZERO;
    let mut rng = Rng::new();
    let mut gave_up_logged = false;
    // Starts that completed a handshake and died soon after: a crash loop, during which calls
    // fail at once. A server that cannot be reached at all is an outage, which calls ride out
    // (they wait `reconnect_wait` for it).
    let mut crash_loop = 0u32;
    loop {
        if up.shutdown.is_cancelled() {
            break;
        }
        generation += 1;
        let attempt = tokio::select! {
            c = connect(&up, generation) => c,
            _ = up.shutdown.cancelled() => break,
        };
        match attempt {
            Ok(mut conn) => {
                let link = conn.link().clone();
                // Replay safety must not depend on the client listing tools: learn the hints
                // before the first call can be made. A server that dies before it answers
                // tools/list did not start: no restart is announced for it.
                if up.offers("tools") {
                    tokio::select! {
                        _ = tokio::time::timeout(up.settings.init_timeout, learn_tools(up.clone(), link.clone())) => {}
                        _ = link.closed() => {}
                    }
                }
                if link.is_closed() {
                    let why = conn.ended().await;
                    let why = steadfast::sanitize(&format!("{why} right after the handshake"))
                        .into_owned();
                    tracing::warn!(upstream = %up.name, reason = %why, "the upstream failed to start");
                    up.state.send_replace(LinkState::Down(why.clone().into()));
                    up.fail_generation(generation, false, &why);
                    conn.terminate(up.settings.shutdown_grace).await;
                    failures += 1;
                    crash_loop += 1;
                    up.failing.store(crash_loop, Ordering::Relaxed);
                } else {
                    up.failing.store(0, Ordering::Relaxed);
                    up.state.send_replace(LinkState::Up(link.clone()));
                    metrics::gauge!("steadfast_upstream_connected", "upstream" => up.name.clone())
                        .set(1.0);
                    let since = Instant::now();
                    if ever_connected {
                        up.restarts.fetch_add(1, Ordering::Relaxed);
                        metrics::counter!("steadfast_upstream_restarts_total", "upstream" => up.name.clone())
                            .increment(1);
                        tracing::info!(upstream = %up.name, generation, "the upstream is back");
                        for client in up.clients() {
                            client.out.push_notification(jsonrpc::notification(
                                "notifications/tools/list_changed",
                                None,
                            ));
                        }
                    }
                    ever_connected = true;
                    gave_up_logged = false;
                    let why = tokio::select! {
                        why = conn.ended() => why,
                        _ = up.shutdown.cancelled() => {
                            up.state.send_replace(LinkState::Down("shut down".into()));
                            up.fail_generation(generation, false, "the proxy is shutting down");
                            conn.terminate(up.settings.shutdown_grace).await;
                            break;
                        }
                    };
                    tracing::warn!(upstream = %up.name, reason = %steadfast::sanitize(&why), "the upstream connection ended");
                    up.state.send_replace(LinkState::Down(why.clone().into()));
                    metrics::gauge!("steadfast_upstream_connected", "upstream" => up.name.clone())
                        .set(0.0);
                    // Requests in flight on a lost session may have run: only the one the server
                    // refused (settled by the HTTP link itself) proves it never ran.
                    up.fail_generation(generation, false, &why);
                    conn.terminate(up.settings.shutdown_grace).await;
                    if since.elapsed() >= up.settings.stable_after {
                        failures = 0;
                        crash_loop = 0;
                        previous = Duration::ZERO;
                    } else {
                        crash_loop += 1;
                    }
                    up.failing.store(crash_loop, Ordering::Relaxed);
                    failures += 1;
                }
            }
            Err(why) => {
                let why = steadfast::sanitize(&why).into_owned();
                tracing::warn!(upstream = %up.name, reason = %why, "could not connect the upstream");
                up.state.send_replace(LinkState::Down(why.into()));
                failures += 1;
            }
        }
        let policy = if ever_connected {
            &up.settings.restart
        } else {
            &up.settings.connect
        };
        let delay = if failures < policy.max_attempts() {
            policy.backoff_delay(failures, previous, &mut rng)
        } else {
            if !gave_up_logged {
                gave_up_logged = true;
                tracing::warn!(
                    upstream = %up.name,
                    every = ?policy.max_delay(),
                    "restart attempts spent; probing the upstream at the policy's maximum delay"
                );
            }
            policy.max_delay().max(Duration::from_millis(100))
        };
        previous = delay;
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = up.shutdown.cancelled() => break,
        }
    }
    up.state.send_replace(LinkState::Down("shut down".into()));
    up.stopped.cancel();
}

/// Starts a connection and completes the MCP handshake within `init_timeout`.
async fn connect(up: &Arc<Upstream>, generation: u64) -> Result<Conn, String> {
    let conn = match &up.spec {
        steadfast_mcp::Upstream::Command { .. } => {
            Conn::Stdio(super::stdio::spawn(up, generation).await?)
        }
        #[cfg(feature = "http")]
        steadfast_mcp::Upstream::Http { .. } => Conn::Http(super::http::open(up, generation)?),
        #[allow(unreachable_patterns)]
        _ => return Err("this build cannot reach HTTP upstreams (feature `http`)".to_owned()),
    };
    let link = conn.link().clone();
    let params = up
        .init_params
        .get()
        .cloned()
        .unwrap_or_else(|| "{}".to_owned());
    let params: Value = serde_json::from_str(&params).unwrap_or_default();
    let (guard, rx) = up.call(
        &link,
        "initialize",
        Some(super::Params::Value(&params)),
        None,
    );
    let mut conn = conn;
    let outcome = tokio::select! {
        r = tokio::time::timeout(up.settings.init_timeout, rx) => r,
        why = conn.ended() => {
            drop(guard);
            conn.terminate(up.settings.shutdown_grace).await;
            return Err(format!("{why} during the handshake"));
        }
    };
    let result = match outcome {
        Ok(Ok(Reply::Result(r))) => r,
        Ok(Ok(Reply::Error(e))) => {
            conn.terminate(up.settings.shutdown_grace).await;
            return Err(format!(
                "the upstream refused initialize: {}",
                steadfast::sanitize(&e)
            ));
        }
        Ok(Ok(other)) => {
            conn.terminate(up.settings.shutdown_grace).await;
            return Err(
                steadfast::sanitize(&format!("the handshake failed: {other:?}")).into_owned(),
            );
        }
        Ok(Err(_)) => {
            conn.terminate(up.settings.shutdown_grace).await;
            return Err("the handshake was abandoned".to_owned());
        }
        Err(_) => {
            drop(guard);
            conn.terminate(up.settings.shutdown_grace).await;
            return Err(format!(
                "the upstream did not answer initialize within {:?}",
                up.settings.init_timeout
            ));
        }
    };
    guard.finish();
    #[cfg(feature = "http")]
    if let Conn::Http(l) = &conn {
        super::http::initialized(l, &result);
    }
    *up.init_result.write().unwrap_or_else(|e| e.into_inner()) = Some(result);
    let _ = link.send(
        jsonrpc::notification("notifications/initialized", None),
        None,
    );
    Ok(conn)
}

/// Lists the server's tools (every page) to learn names and replay-safety hints, so that
/// replay safety does not depend on the client listing tools.
async fn learn_tools(up: Arc<Upstream>, link: Arc<super::Link>) {
    let mut cursor: Option<String> = None;
    for page in 0..100 {
        let params = match &cursor {
            Some(c) => serde_json::json!({ "cursor": c }),
            None => serde_json::json!({}),
        };
        let (guard, rx) = up.call(
            &link,
            "tools/list",
            Some(super::Params::Value(&params)),
            None,
        );
        let Ok(Ok(Reply::Result(r))) = tokio::time::timeout(up.settings.request_timeout, rx).await
        else {
            drop(guard);
            return;
        };
        guard.finish();
        let Ok(v) = serde_json::from_str::<Value>(&r) else {
            return;
        };
        up.learn_tools(&v, page == 0);
        cursor = v
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            return;
        }
    }
}
