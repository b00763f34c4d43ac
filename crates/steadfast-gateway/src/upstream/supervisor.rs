//! Keeps an upstream connected: connect, handshake, watch, restart with backoff, and never
//! give up for good.
//!
//! A child that dies soon after it started counts as a failed start, so a server that exits
//! right after `initialize` is restarted on the policy's backoff rather than in a hot loop.
//! When the policy's attempts are spent, the supervisor keeps probing at the policy's
//! maximum delay: an upstream that becomes startable again is picked up without restarting the
//! proxy, and meanwhile calls fail fast with an honest message. A call to a down upstream
//! does not wait for that probe: it asks for a start at once ([`start_for_call`], at most one
//! a second), and gets the connection if the start succeeds or the reason as soon as it fails.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use steadfast::{RetryPolicy, Rng};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::{Link, LinkState, Reply, Settings, Upstream};
use crate::wire::jsonrpc;

enum Conn {
    Stdio(super::stdio::Process),
    InProcess(Arc<super::Link>),
    #[cfg(feature = "http")]
    Http(Arc<super::Link>),
}

impl Conn {
    fn link(&self) -> &Arc<super::Link> {
        match self {
            Conn::Stdio(p) => &p.link,
            Conn::InProcess(l) => l,
            #[cfg(feature = "http")]
            Conn::Http(l) => l,
        }
    }

    async fn ended(&mut self) -> String {
        match self {
            Conn::Stdio(p) => p.ended().await,
            Conn::InProcess(l) => super::in_process::ended(l).await,
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
            // Closing the link closes the server's input and stops reading its output.
            Conn::InProcess(l) => l.close(),
            #[cfg(feature = "http")]
            Conn::Http(l) => super::http::terminate(&l, grace).await,
        }
    }
}

/// Why a start failed, and whether a quick retry could help.
struct StartFailure {
    why: String,
    /// No retry fixes it (the command does not exist, is not executable, or the server wrote
    /// garbage and fell silent): waiters are answered at once.
    hopeless: bool,
}

impl StartFailure {
    fn retry(why: impl Into<String>) -> Self {
        Self {
            why: why.into(),
            hopeless: false,
        }
    }
}

/// The supervisor's count of failures, and when it stops making callers wait.
struct Tally {
    failures: u32,
    ever_connected: bool,
    /// The upstream is published as [`LinkState::Failed`] until a start succeeds.
    gave_up: bool,
}

impl Tally {
    fn policy<'a>(&self, settings: &'a Settings) -> &'a RetryPolicy {
        if self.ever_connected {
            &settings.restart
        } else {
            &settings.connect
        }
    }

    /// Publishes the upstream as down after a failure. It is `Failed` — callers are answered at
    /// once — when no retry could help, when the policy's attempts are spent (a short burst for
    /// the first start, the restart policy's attempts after), or once it was so already;
    /// otherwise `Down`, and callers wait for the restart.
    fn failed(&mut self, up: &Upstream, why: &str, hopeless: bool) {
        self.failures += 1;
        let policy = self.policy(&up.settings);
        let every = policy.max_delay().max(Duration::from_millis(100));
        up.probe_ms
            .store(every.as_millis() as u64, Ordering::Relaxed);
        if hopeless || self.failures >= policy.max_attempts() {
            if !self.gave_up {
                tracing::warn!(
                    upstream = %up.name, every = ?every, reason = %why,
                    "the upstream cannot be started now; calls fail at once while it is probed"
                );
            }
            self.gave_up = true;
        }
        let state = if self.gave_up {
            let probe = if self.ever_connected {
                "restart attempts are spent"
            } else if hopeless {
                "it cannot be started"
            } else {
                "every start of a short burst failed"
            };
            LinkState::Failed(format!("{why} ({probe}; probed every {every:?})").into())
        } else {
            LinkState::Down(why.into())
        };
        // Before the state: a call that saw a start under way waits for this one.
        up.wake.probing.store(false, Ordering::Release);
        up.state.send_replace(state);
    }
}

/// The least time between two starts that calls ask for: a client calling a down server in a
/// loop costs one start a second, not one per call.
const START_FOR_CALL_EVERY: Duration = Duration::from_secs(1);

/// Calls asking the supervisor of a down upstream to try a start now.
#[derive(Default)]
pub(super) struct Wake {
    asked: Notify,
    /// When a call last asked.
    last: Mutex<Option<Instant>>,
    /// A start of the down upstream is under way (a probe, or one a call asked for).
    probing: AtomicBool,
}

/// A call to a down upstream ([`LinkState::Failed`], `rx` its state): a start is tried now
/// (or the one under way is joined), and the call gets the connection if it succeeds, the
/// reason as soon as it fails, within `reconnect_wait`. A start that calls asked for less than
/// [`START_FOR_CALL_EVERY`] ago is not repeated: the call fails at once, saying the server is
/// down.
pub(super) async fn start_for_call(
    up: &Upstream,
    mut rx: watch::Receiver<LinkState>,
) -> Result<Arc<Link>, String> {
    let notice = |state: &LinkState| match state {
        LinkState::Failed(why) => up.down_notice(why),
        LinkState::Down(why) => format!("the upstream is not connected: {why}"),
        LinkState::Up(_) => "the upstream connection is closing".to_owned(),
    };
    rx.borrow_and_update();
    if !up.wake.probing.load(Ordering::Acquire) {
        let now = Instant::now();
        {
            let mut last = up.wake.last.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| now.duration_since(t) < START_FOR_CALL_EVERY) {
                return Err(notice(&rx.borrow()));
            }
            *last = Some(now);
        }
        tracing::info!(upstream = %up.name, "a call to the down upstream: trying to start it now");
        up.wake.asked.notify_one();
    }
    // The start's outcome is the next state published: up, or down again with its reason.
    let outcome = tokio::time::timeout(up.settings.reconnect_wait, async {
        tokio::select! {
            changed = rx.changed() => changed.is_ok(),
            _ = up.shutdown.cancelled() => false,
        }
    })
    .await;
    let state = rx.borrow().clone();
    match (outcome, state) {
        (Ok(true), LinkState::Up(link)) if !link.is_closed() => Ok(link),
        (_, state) => Err(notice(&state)),
    }
}

/// Sleeps `delay` before the next start; a down upstream's sleep is cut short by a call that
/// asks for a start. Whether the upstream is shutting down.
async fn pause(up: &Upstream, delay: Duration, gave_up: bool) -> bool {
    let asked = async {
        if gave_up {
            up.wake.asked.notified().await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let shutdown = tokio::select! {
        _ = tokio::time::sleep(delay) => false,
        _ = asked => false,
        _ = up.shutdown.cancelled() => true,
    };
    up.wake.probing.store(gave_up, Ordering::Release);
    shutdown
}

/// The supervisor's loop; ends when the upstream is shut down.
pub(super) async fn run(up: Arc<Upstream>) {
    let mut tally = Tally {
        failures: 0,
        ever_connected: false,
        gave_up: false,
    };
    let mut generation = 0u64;
    let mut previous = Duration::ZERO;
    let mut rng = Rng::new();
    // Starts that completed a handshake and died soon after: a crash loop, during which calls
    // fail at once. A server that cannot be reached at all is an outage, which calls ride out
    // (they wait `reconnect_wait` for it) until the policy's attempts are spent.
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
            Ok(conn) => {
                let Some(lived) = serve(&up, conn, generation, &mut tally).await else {
                    break;
                };
                if lived >= up.settings.stable_after {
                    crash_loop = 0;
                    previous = Duration::ZERO;
                } else {
                    crash_loop += 1;
                }
                up.failing.store(crash_loop, Ordering::Relaxed);
            }
            Err(StartFailure { why, hopeless }) => {
                let why = steadfast::sanitize(&why).into_owned();
                tracing::warn!(upstream = %up.name, reason = %why, "could not connect the upstream");
                tally.failed(&up, &why, hopeless);
            }
        }
        let policy = tally.policy(&up.settings);
        let delay = if tally.failures < policy.max_attempts() {
            policy.backoff_delay(tally.failures, previous, &mut rng)
        } else {
            policy.max_delay().max(Duration::from_millis(100))
        };
        previous = delay;
        if pause(&up, delay, tally.gave_up).await {
            break;
        }
    }
    up.state.send_replace(LinkState::Down("shut down".into()));
    up.stopped.cancel();
}

/// Serves a connection that completed its handshake until it ends; how long it lived, or
/// `None` when the upstream is shutting down. A connection that dies before it lists its tools
/// did not start: it is reported as a failed start and lived zero.
async fn serve(
    up: &Arc<Upstream>,
    mut conn: Conn,
    generation: u64,
    tally: &mut Tally,
) -> Option<Duration> {
    let link = conn.link().clone();
    // Replay safety must not depend on the client listing tools: learn the hints before the
    // first call can be made. A server that dies before it answers tools/list did not start:
    // no restart is announced for it.
    if up.offers("tools") {
        tokio::select! {
            _ = tokio::time::timeout(up.settings.init_timeout, learn_tools(up.clone(), link.clone())) => {}
            _ = link.closed() => {}
        }
    }
    if link.is_closed() {
        let why = conn.ended().await;
        let why = steadfast::sanitize(&format!("{why} right after the handshake")).into_owned();
        tracing::warn!(upstream = %up.name, reason = %why, "the upstream failed to start");
        up.fail_generation(generation, false, &why);
        conn.terminate(up.settings.shutdown_grace).await;
        tally.failed(up, &why, false);
        return Some(Duration::ZERO);
    }
    up.failing.store(0, Ordering::Relaxed);
    tally.gave_up = false;
    // Before the connection is published: a listen acknowledged from then on waits for it.
    let plan = super::listen::plan(up);
    up.wake.probing.store(false, Ordering::Release);
    up.state.send_replace(LinkState::Up(link.clone()));
    metrics::gauge!("steadfast_upstream_connected", "upstream" => up.name.clone()).set(1.0);
    let since = Instant::now();
    if tally.ever_connected {
        up.restarts.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("steadfast_upstream_restarts_total", "upstream" => up.name.clone())
            .increment(1);
        tracing::info!(upstream = %up.name, generation, "the upstream is back");
        for client in up.clients() {
            client.push_notification(jsonrpc::notification(
                "notifications/tools/list_changed",
                None,
            ));
        }
        if let Some(changes) = up.changes() {
            changes.publish_change(super::changes::Change::Tools);
        }
    }
    tally.ever_connected = true;
    // What the server announces reaches the front's listeners: a modern server only on a
    // listen of the gateway's own (`listen.rs`).
    if let Some(plan) = plan {
        tokio::spawn(super::listen::follow(up.clone(), link.clone(), plan));
    }
    let why = tokio::select! {
        why = conn.ended() => why,
        _ = up.shutdown.cancelled() => {
            up.state.send_replace(LinkState::Down("shut down".into()));
            up.fail_generation(generation, false, "the proxy is shutting down");
            conn.terminate(up.settings.shutdown_grace).await;
            return None;
        }
    };
    let why = steadfast::sanitize(&why).into_owned();
    tracing::warn!(upstream = %up.name, reason = %why, "the upstream connection ended");
    metrics::gauge!("steadfast_upstream_connected", "upstream" => up.name.clone()).set(0.0);
    let lived = since.elapsed();
    if lived >= up.settings.stable_after {
        tally.failures = 0;
    }
    tally.failed(up, &why, false);
    // Requests in flight on a lost session may have run: only the one the server refused
    // (settled by the HTTP link itself) proves it never ran.
    up.fail_generation(generation, false, &why);
    conn.terminate(up.settings.shutdown_grace).await;
    Some(lived)
}

/// How long a server that wrote something other than JSON-RPC may stay silent before its start
/// counts as failed (a banner before a prompt answer is tolerated; garbage and then nothing is
/// a server that will not answer).
const NOISE_GRACE: Duration = Duration::from_secs(1);

/// Resolves when the server wrote a line that is not JSON-RPC and then nothing useful for
/// [`NOISE_GRACE`]; with the head of that line.
async fn noise_then_silence(up: &Upstream) -> String {
    loop {
        up.noise_seen.notified().await;
        tokio::time::sleep(NOISE_GRACE).await;
        if let Some(head) = up.noise.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return head;
        }
    }
}

/// Starts a connection and completes the MCP handshake within `init_timeout`.
async fn connect(up: &Arc<Upstream>, generation: u64) -> Result<Conn, StartFailure> {
    *up.noise.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let conn = match &up.spec {
        steadfast_mcp::Upstream::Command { .. } => Conn::Stdio(
            super::stdio::spawn(up, generation)
                .await
                .map_err(|e| StartFailure {
                    why: e.why,
                    hopeless: e.hopeless,
                })?,
        ),
        steadfast_mcp::Upstream::InProcess(_) => Conn::InProcess(
            super::in_process::open(up, generation).map_err(|e| StartFailure {
                why: e.why,
                hopeless: e.hopeless,
            })?,
        ),
        #[cfg(feature = "http")]
        steadfast_mcp::Upstream::Http { .. } => Conn::Http(
            super::http::open(up, generation).map_err(|why| StartFailure {
                why,
                hopeless: true,
            })?,
        ),
        #[allow(unreachable_patterns)]
        _ => {
            return Err(StartFailure {
                why: "this build cannot reach HTTP upstreams (feature `http`)".to_owned(),
                hopeless: true,
            });
        }
    };
    let link = conn.link().clone();
    let params = up
        .init_params
        .get()
        .cloned()
        .unwrap_or_else(|| "{}".to_owned());
    let params: Value = serde_json::from_str(&params).unwrap_or_default();
    let mut conn = conn;
    let grace = up.settings.shutdown_grace;
    let probed = match probe(up, &mut conn, &link, &params).await {
        Ok(p) => p,
        Err(f) => {
            conn.terminate(grace).await;
            return Err(f);
        }
    };
    if let Some(result) = probed {
        // A modern server: no `initialize`, no `notifications/initialized`, no session.
        *up.init_result.write().unwrap_or_else(|e| e.into_inner()) = Some(result);
        return Ok(conn);
    }
    let init_timeout = up.settings.init_timeout;
    let answer = handshake_call(up, &mut conn, &link, "initialize", &params, init_timeout).await;
    let result = match answer {
        Err(f) => {
            conn.terminate(grace).await;
            return Err(f);
        }
        Ok(Some(Reply::Result(r))) => r,
        Ok(Some(Reply::Error(e))) => {
            // A modern-only server that was still starting when the probe's bound ran out
            // (a Python server importing on a loaded machine) answers now and refuses
            // `initialize`: ask once more before giving this start up.
            if let Ok(Some(result)) = probe(up, &mut conn, &link, &params).await {
                *up.init_result.write().unwrap_or_else(|e| e.into_inner()) = Some(result);
                return Ok(conn);
            }
            conn.terminate(up.settings.shutdown_grace).await;
            return Err(StartFailure::retry(format!(
                "the upstream refused initialize: {}",
                steadfast::sanitize(&e)
            )));
        }
        Ok(Some(other)) => {
            conn.terminate(up.settings.shutdown_grace).await;
            return Err(StartFailure::retry(steadfast::sanitize(&handshake_failed(
                other,
            ))));
        }
        Ok(None) => {
            conn.terminate(up.settings.shutdown_grace).await;
            return Err(StartFailure::retry(format!(
                "the upstream did not answer initialize within {:?}",
                up.settings.init_timeout
            )));
        }
    };
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

/// The longest the `server/discover` probe is waited for: a handshake-era server may not
/// answer a request before `initialize` at all (the revision asks clients to fall back on a
/// timeout too).
const PROBE_BOUND: Duration = Duration::from_secs(5);

/// Asks the server for its era (MCP 2026-07-28, stdio and HTTP "Backward Compatibility"):
/// `server/discover` at the modern revision. A `DiscoverResult` naming it: the server is
/// modern, and its answer is kept as an `initialize`-shaped result (version, capabilities,
/// serverInfo, instructions) so the rest of the gateway reads one shape. `-32022` naming no
/// version the gateway speaks in either era: no start can help. Anything else (another error,
/// an HTTP refusal, silence within [`PROBE_BOUND`]): handshake era, `None`, and `initialize`
/// follows — the fallback is not keyed to one error code, as the revision asks.
async fn probe(
    up: &Arc<Upstream>,
    conn: &mut Conn,
    link: &Arc<super::Link>,
    init: &Value,
) -> Result<Option<String>, StartFailure> {
    use crate::wire::era;
    let mut params = serde_json::json!({"_meta": {
        era::CLIENT_CAPABILITIES: init.get("capabilities").cloned().unwrap_or_else(|| serde_json::json!({})),
        era::CLIENT_INFO: init.get("clientInfo").cloned().unwrap_or_else(|| serde_json::json!({})),
    }});
    era::add_envelope(&mut params, era::LATEST_MODERN, &serde_json::json!({}));
    // The envelope is this upstream's era while the probe runs (nothing else uses the
    // connection before it is published).
    up.modern.store(true, Ordering::Relaxed);
    let bound = PROBE_BOUND.min(up.settings.init_timeout);
    let reply = handshake_call(up, conn, link, era::DISCOVER, &params, bound).await;
    up.modern.store(false, Ordering::Relaxed);
    let verdict = match reply? {
        Some(Reply::Result(r)) => discovered(&r),
        Some(Reply::Error(e)) => {
            if let Some(why) = disjoint(&e) {
                return Err(StartFailure {
                    why,
                    hopeless: true,
                });
            }
            None
        }
        // Not reached at all: an outage, not an era.
        Some(Reply::NotSent(why)) => {
            return Err(StartFailure::retry(why));
        }
        _ => None,
    };
    match &verdict {
        Some(_) => {
            up.modern.store(true, Ordering::Relaxed);
            tracing::info!(upstream = %up.name, "the upstream speaks MCP 2026-07-28 (server/discover)");
        }
        None => {
            tracing::debug!(upstream = %up.name, "the upstream is of the handshake era: initialize")
        }
    }
    Ok(verdict)
}

/// A `DiscoverResult` naming a modern revision the gateway speaks, as an `initialize`-shaped
/// result; `None` for anything else (a server that answers discover but advertises only
/// handshake-era versions is a handshake-era server, as the SDKs read it).
fn discovered(raw: &str) -> Option<String> {
    use crate::wire::era;
    let v: Value = serde_json::from_str(raw).ok()?;
    let speaks = v
        .get("supportedVersions")?
        .as_array()?
        .iter()
        .any(|s| s.as_str() == Some(era::LATEST_MODERN));
    if !speaks {
        return None;
    }
    let mut r = serde_json::json!({
        "protocolVersion": era::LATEST_MODERN,
        "capabilities": v.get("capabilities").cloned().unwrap_or_else(|| serde_json::json!({})),
    });
    if let Some(info) = v.pointer("/_meta").and_then(|m| m.get(era::SERVER_INFO)) {
        r["serverInfo"] = info.clone();
    }
    if let Some(i) = v.get("instructions").filter(|i| i.is_string()) {
        r["instructions"] = i.clone();
    }
    Some(r.to_string())
}

/// For a `-32022` answer to the probe whose `supported` list names no version the gateway
/// speaks in either era: why no start can work.
fn disjoint(error: &str) -> Option<String> {
    use crate::wire::era;
    let e: Value = serde_json::from_str(error).ok()?;
    if e.get("code").and_then(Value::as_i64) != Some(era::code::UNSUPPORTED_VERSION) {
        return None;
    }
    let supported: Vec<&str> = e
        .pointer("/data/supported")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let known = |v: &&str| era::MODERN_VERSIONS.contains(v) || era::HANDSHAKE_VERSIONS.contains(v);
    if supported.iter().any(known) {
        return None;
    }
    Some(
        steadfast::sanitize(&format!(
            "the upstream speaks only MCP {} (the gateway speaks {})",
            supported.join(", "),
            era::supported_versions().join(", ")
        ))
        .into_owned(),
    )
}

/// One request of the handshake (the probe, `initialize`): its reply, or `None` when none
/// came within `bound`; a failed start when the connection ended or the server wrote garbage
/// and fell silent (the connection is terminated then).
async fn handshake_call(
    up: &Arc<Upstream>,
    conn: &mut Conn,
    link: &Arc<super::Link>,
    method: &str,
    params: &Value,
    bound: Duration,
) -> Result<Option<Reply>, StartFailure> {
    let (guard, rx) = up.call(link, method, Some(super::Params::Value(params)), None);
    let outcome = tokio::select! {
        r = tokio::time::timeout(bound, rx) => r,
        why = conn.ended() => {
            drop(guard);
            return Err(StartFailure::retry(format!("{why} during the handshake")));
        }
        head = noise_then_silence(up) => {
            drop(guard);
            return Err(StartFailure {
                why: format!(
                    "the upstream wrote output that is not JSON-RPC and did not answer \
                     {method} (is it an MCP server on stdio? it wrote: {head})"
                ),
                hopeless: true,
            });
        }
    };
    match outcome {
        Ok(Ok(reply)) => {
            guard.finish();
            Ok(Some(reply))
        }
        Ok(Err(_)) => Err(StartFailure::retry("the handshake was abandoned")),
        Err(_) => {
            drop(guard);
            Ok(None)
        }
    }
}

/// Why a handshake that got no result failed, in words.
fn handshake_failed(reply: Reply) -> String {
    match reply.into_result() {
        Err(e @ super::UpstreamError::TooLarge(_)) => {
            format!("the handshake failed: the initialize result: {e}")
        }
        Err(super::UpstreamError::Rpc(_)) | Ok(_) => "the handshake failed".to_owned(),
        Err(e) => format!("the handshake failed: {e}"),
    }
}

/// Lists the server's tools (every page) to learn names and replay-safety hints, so that
/// replay safety does not depend on the client listing tools.
async fn learn_tools(up: Arc<Upstream>, link: Arc<super::Link>) {
    use futures::StreamExt;
    let pages = up.pages(&link, "tools/list", None, 100);
    futures::pin_mut!(pages);
    let mut first = true;
    // (A page that fails ends the stream: what was learned so far is kept.)
    while let Some(Ok(page)) = pages.next().await {
        up.learn_tools(&page.value, first);
        first = false;
    }
}
