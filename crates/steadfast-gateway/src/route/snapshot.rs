//! A read-only picture of the router for the admin console: each upstream's connection and
//! restarts, each tool's counts and breaker, each upstream's budget. It only reads state the
//! router keeps anyway (nothing here is on a call's path), and every text that came from an
//! upstream or an error passes [`steadfast::sanitize`].

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;
use steadfast::{BreakerState, BreakerStats};

use crate::route::router::{Kind, Router};

/// How an upstream's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamStatus {
    /// Not started yet (stdio: the first client's `initialize` starts it).
    NotStarted,
    /// On its first start, not connected yet.
    Starting,
    /// Connected.
    Connected,
    /// Lost and being started again on its backoff.
    Restarting,
    /// Down and not worth waiting for: calls fail at once while the supervisor probes it.
    Down,
}

impl UpstreamStatus {
    /// The word the console shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotStarted => "not started",
            Self::Starting => "starting",
            Self::Connected => "connected",
            Self::Restarting => "restarting",
            Self::Down => "down",
        }
    }
}

/// One upstream as the console shows it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct UpstreamView {
    /// Its name in the config (`upstream` with one).
    pub name: String,
    /// Its command or URL, sanitized.
    pub target: String,
    /// `stdio` or `streamable HTTP`.
    pub transport: &'static str,
    /// The protocol revision it negotiated (e.g. `2025-11-25`), once connected.
    pub era: Option<String>,
    /// How its connection stands.
    pub status: UpstreamStatus,
    /// Why it is not connected, sanitized.
    pub reason: Option<String>,
    /// Restarts so far.
    pub restarts: u64,
    /// Requests sent to it and not answered yet.
    pub in_flight: usize,
    /// Retries its budget can pay for now, if it has a budget.
    pub budget_left: Option<f64>,
}

/// A breaker as the console shows it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BreakerView {
    /// The tool it guards, or the dependency its tools share.
    pub key: String,
    /// Closed, open or half-open.
    pub state: BreakerState,
    /// Time left before it admits a probe (open).
    pub open_remaining: Option<std::time::Duration>,
    /// Times it opened since it was created.
    pub times_opened: u64,
    /// Calls it refused.
    pub rejected: u64,
    /// Failures counted in its window (closed).
    pub failures_in_window: u64,
    /// When it was first seen open (or half-open) by the console, in this opening: the
    /// breaker keeps no clock time, so this is at most one refresh late (or the console's
    /// start, for a breaker open before it).
    pub open_since: Option<chrono::DateTime<chrono::Utc>>,
}

impl BreakerView {
    fn of(key: String, s: &BreakerStats) -> Self {
        Self {
            key,
            state: s.state,
            open_remaining: s.open_remaining,
            times_opened: s.times_opened,
            rejected: s.rejected,
            failures_in_window: s.failures_in_window,
            open_since: None,
        }
    }
}

/// One tool's counts and breaker.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolView {
    /// The upstream it belongs to.
    pub upstream: String,
    /// Its name (as the upstream lists it), sanitized.
    pub name: String,
    /// Calls finished.
    pub calls: u64,
    /// Retries made.
    pub retries: u64,
    /// Calls that gave up.
    pub errors: u64,
    /// Calls finished in the last five minutes.
    pub calls_5m: u64,
    /// Calls that gave up in the last five minutes.
    pub errors_5m: u64,
    /// Its breaker (its own, or its dependency's), once a call made one.
    pub breaker: Option<BreakerView>,
}

/// The router's part of the console's picture.
#[derive(Debug, Clone, Default)]
pub(crate) struct RouterView {
    pub(crate) upstreams: Vec<UpstreamView>,
    pub(crate) tools: Vec<ToolView>,
    /// Breakers no listed tool names (shared by a dependency, or of a tool no longer listed).
    pub(crate) other_breakers: Vec<(String, BreakerView)>,
    /// Clients that initialized (on the router or a variant of it) and are still there.
    pub(crate) clients: usize,
}

fn status(up: &crate::upstream::Upstream) -> UpstreamStatus {
    if !up.is_started() {
        UpstreamStatus::NotStarted
    } else if up.is_connected() {
        UpstreamStatus::Connected
    } else if up.is_down() {
        UpstreamStatus::Down
    } else if up.is_starting() {
        UpstreamStatus::Starting
    } else {
        UpstreamStatus::Restarting
    }
}

/// The protocol revision in the server's `initialize` result.
fn era(up: &crate::upstream::Upstream) -> Option<String> {
    let init: Value = serde_json::from_str(&up.init_result()?).ok()?;
    let v = init.get("protocolVersion")?.as_str()?;
    Some(steadfast::sanitize(v).into_owned())
}

/// Reads the router's state now.
pub(crate) fn read(router: &Router) -> RouterView {
    let mut view = RouterView::default();
    let variants = router.variant_routers();
    for r in router.routes().iter() {
        let up = &r.upstream;
        view.upstreams.push(UpstreamView {
            name: steadfast::sanitize(&r.name).into_owned(),
            target: up.describe(),
            transport: if up.is_http() {
                "streamable HTTP"
            } else {
                "stdio"
            },
            era: era(up),
            status: status(up),
            reason: up
                .down_reason()
                .map(|w| steadfast::sanitize(&w).into_owned()),
            restarts: up.restarts(),
            // Clients with other capability sets have connections of their own.
            in_flight: up.pending_len()
                + variants
                    .iter()
                    .flat_map(|v| v.routes().iter().cloned().collect::<Vec<_>>())
                    .filter(|v| v.name == r.name)
                    .map(|v| v.upstream.pending_len())
                    .sum::<usize>(),
            budget_left: r.tools.budget().map(|b| b.balance()),
        });
        let mut breakers: BTreeMap<String, BreakerStats> = r.tools.breaker_stats();
        let counts = r.tools.metrics.snapshot().tools;
        let mut used = HashSet::new();
        // Tools are counted under the names clients see: those the lists taught, those the
        // upstream lists now (as clients see them), and any counted since.
        let mut names: std::collections::BTreeSet<String> = r
            .names
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .tools
            .keys()
            .cloned()
            .collect();
        let no_prompts = std::collections::HashMap::new();
        names.extend(
            up.listed_names()
                .iter()
                .map(|n| router.exposed_name(r, Kind::Tool, n, &no_prompts)),
        );
        names.extend(counts.keys().cloned());
        for name in names {
            let c = counts.get(&name);
            let dependency = r.tools.config().tool(&name).dependency;
            let key = dependency.unwrap_or_else(|| name.clone());
            let stats = breakers
                .get(&key)
                .cloned()
                .or_else(|| c.and_then(|c| c.breaker.clone()));
            used.insert(key.clone());
            view.tools.push(ToolView {
                upstream: r.name.clone(),
                name: steadfast::sanitize(&name).into_owned(),
                calls: c.map_or(0, |c| c.calls),
                retries: c.map_or(0, |c| c.retries),
                errors: c.map_or(0, |c| c.failures.values().sum()),
                calls_5m: c.map_or(0, |c| c.last_5m.calls),
                errors_5m: c.map_or(0, |c| c.last_5m.failures),
                breaker: stats.map(|s| BreakerView::of(steadfast::sanitize(&key).into_owned(), &s)),
            });
        }
        breakers.retain(|k, _| !used.contains(k));
        for (key, s) in breakers {
            let key = steadfast::sanitize(&key).into_owned();
            view.other_breakers
                .push((r.name.clone(), BreakerView::of(key, &s)));
        }
    }
    view.clients = router.live_clients() + variants.iter().map(|v| v.live_clients()).sum::<usize>();
    view
}
