//! The gateway console's sections, rendered from a [`Snapshot`]. Every text in it was
//! sanitized by the gateway when it was read, and passes [`shown`] (the sanitizer) again here,
//! so a page cannot show what the sanitizer would redact whatever the snapshot's origin.

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use steadfast_gateway::admin::{
    BreakerState, BreakerView, Snapshot, TaskView, TasksView, ToolView, UpstreamStatus,
    UpstreamView,
};

use crate::layout::{Section, button, shown, when};

/// What rendering needs besides the snapshot.
pub(crate) struct Ctx<'a> {
    pub base: &'a str,
    pub csrf: &'a str,
    pub back: String,
}

impl Ctx<'_> {
    fn action(&self, name: &str) -> String {
        format!("{}/actions/{name}", self.base)
    }
}

/// The front page's sections.
pub(crate) fn overview(c: &Ctx<'_>, s: &Snapshot) -> Vec<Section> {
    let mut out = vec![
        Section {
            id: "summary",
            html: summary(s),
        },
        Section {
            id: "upstreams",
            html: html! { h2 { "Upstreams" } (upstream_table(s)) },
        },
        Section {
            id: "tools",
            html: html! { h2 { "Tools and breakers" } (tool_table(s)) },
        },
    ];
    if let Some(t) = &s.tasks {
        out.push(Section {
            id: "tasks",
            html: html! { h2 { "Durable tool calls" } (task_table(c, t, s.at)) },
        });
    }
    out
}

/// The tasks page's section.
pub(crate) fn tasks_page(c: &Ctx<'_>, s: &Snapshot) -> Vec<Section> {
    let html = match &s.tasks {
        Some(t) => task_table(c, t, s.at),
        None => html! { p.muted { "Durable tool calls are off: no tool is durable ([tasks])." } },
    };
    vec![Section { id: "tasks", html }]
}

fn summary(s: &Snapshot) -> Markup {
    let down = s
        .upstreams
        .iter()
        .filter(|u| u.status != UpstreamStatus::Connected)
        .count();
    let open = s
        .tools
        .iter()
        .filter_map(|t| t.breaker.as_ref())
        .chain(s.other_breakers.iter().map(|(_, b)| b))
        .filter(|b| b.state != BreakerState::Closed)
        .count();
    html! {
        @if !s.running {
            p.notice { "The gateway is starting: nothing to show yet." }
        } @else {
            dl {
                dt { "Upstreams" }
                dd { (s.upstreams.len()) @if down > 0 { ", " span.bad { (down) " not connected" } } }
                dt { "Breakers not closed" }
                dd { @if open > 0 { span.bad { (open) } } @else { span.ok { "none" } } }
                dt { "Sessions" } dd { (s.sessions) }
                dt { "Requests in flight upstream" } dd { (s.in_flight) }
                dt { "Replicas" }
                dd {
                    @if s.shared_on_redis {
                        "breakers, retry budgets and call counts shared with the other replicas on Redis (what is shown is this replica's view)"
                    } @else { "this process only: breakers and budgets are its own" }
                    @if let Some(t) = &s.tasks {
                        @if t.store == "postgres" { "; durable calls shared by the replicas on one PostgreSQL" }
                        @else { "; durable calls in SQLite (this machine)" }
                    }
                }
            }
        }
    }
}

fn status_class(s: UpstreamStatus) -> &'static str {
    match s {
        UpstreamStatus::Connected => "ok",
        UpstreamStatus::Down => "bad",
        _ => "warn",
    }
}

fn upstream_table(s: &Snapshot) -> Markup {
    html! {
        @if s.upstreams.is_empty() { p.muted { "None." } } @else {
            table {
                thead { tr {
                    th scope="col" { "Upstream" } th scope="col" { "Transport" } th scope="col" { "Era" }
                    th scope="col" { "State" } th.n scope="col" { "Restarts" } th.n scope="col" { "In flight" }
                    th.n scope="col" { "Budget left" }
                } }
                tbody { @for u in &s.upstreams { (upstream_row(u)) } }
            }
        }
    }
}

fn upstream_row(u: &UpstreamView) -> Markup {
    html! {
        tr id={ "upstream-" (shown(&u.name)) } {
            th scope="row" { (shown(&u.name)) br; span.muted.err { (shown(&u.target)) } }
            td { (u.transport) }
            td { @if let Some(e) = &u.era { (shown(e)) } @else { span.muted { "—" } } }
            td {
                span class=(status_class(u.status)) data-state=(u.status.as_str()) { (u.status.as_str()) }
                @if let Some(r) = &u.reason { br; span.err { (shown(r)) } }
            }
            td.n { (u.restarts) }
            td.n { (u.in_flight) }
            td.n { @match u.budget_left { Some(b) => { (format!("{b:.1}")) }, None => { span.muted { "none" } } } }
        }
    }
}

fn tool_table(s: &Snapshot) -> Markup {
    let several = s.upstreams.len() > 1;
    html! {
        @if s.tools.is_empty() && s.other_breakers.is_empty() { p.muted { "No tools listed yet." } } @else {
            table {
                thead { tr {
                    th scope="col" { "Tool" }
                    @if several { th scope="col" { "Upstream" } }
                    th.n scope="col" { "Calls" } th.n scope="col" { "Retries" } th.n scope="col" { "Errors" }
                    th.n scope="col" { "Calls (5 min)" } th.n scope="col" { "Errors (5 min)" }
                    th scope="col" { "Breaker" }
                } }
                tbody {
                    @for t in &s.tools { (tool_row(t, several, s.at)) }
                    @for (up, b) in &s.other_breakers {
                        tr {
                            th scope="row" { span.muted { "dependency " } (shown(&b.key)) }
                            @if several { td { (shown(up)) } }
                            td.n {} td.n {} td.n {} td.n {} td.n {}
                            td { (breaker(b, s.at)) }
                        }
                    }
                }
            }
        }
    }
}

fn tool_row(t: &ToolView, several: bool, now: DateTime<Utc>) -> Markup {
    html! {
        tr id={ "tool-" (shown(&t.name)) } {
            th scope="row" { (shown(&t.name)) }
            @if several { td { (shown(&t.upstream)) } }
            td.n { (t.calls) } td.n { (t.retries) }
            td.n class=[(t.errors > 0).then_some("bad")] { (t.errors) }
            td.n { (t.calls_5m) }
            td.n class=[(t.errors_5m > 0).then_some("bad")] { (t.errors_5m) }
            td { @match &t.breaker { Some(b) => { (breaker(b, now)) }, None => { span.muted { "none yet" } } } }
        }
    }
}

fn breaker(b: &BreakerView, now: DateTime<Utc>) -> Markup {
    let word = b.state.as_str();
    let class = match b.state {
        BreakerState::Closed => "ok",
        BreakerState::HalfOpen => "warn",
        // Open, isolated (forced open by an operator), and any state added later.
        _ => "bad",
    };
    let probe = b
        .open_remaining
        .and_then(|d| chrono::Duration::from_std(d).ok())
        .map(|d| now + d);
    html! {
        span class={ "breaker " (class) } data-state=(word) { (word) }
        @if let Some(since) = b.open_since { " since " (when(since, now)) }
        @if let Some(p) = probe { ", probes at " (when(p, now)) }
        @if b.times_opened > 0 { br; span.muted { "opened " (b.times_opened) "×, refused " (b.rejected) } }
        @if b.state == BreakerState::Closed && b.failures_in_window > 0 {
            br; span.muted { (b.failures_in_window) " failures in its window" }
        }
    }
}

fn task_table(c: &Ctx<'_>, t: &TasksView, now: DateTime<Utc>) -> Markup {
    html! {
        p.muted { "Store: " (t.store) ". The newest 50, every client's." }
        @match &t.tasks {
            Err(e) => { p.bad.err { "The task store failed: " (shown(e)) } }
            Ok(tasks) if tasks.is_empty() => { p.muted { "None." } }
            Ok(tasks) => {
                table {
                    thead { tr {
                        th scope="col" { "Task" } th scope="col" { "Tool" } th scope="col" { "Status" }
                        th.n scope="col" { "Attempts" } th scope="col" { "Next attempt" }
                        th scope="col" { "Created" } th scope="col" { "Updated" }
                        th scope="col" { "Message" } th scope="col" { "" }
                    } }
                    tbody { @for task in tasks { (task_row(c, task, now)) } }
                }
            }
        }
    }
}

fn task_row(c: &Ctx<'_>, t: &TaskView, now: DateTime<Utc>) -> Markup {
    let class = match t.status {
        "completed" => "ok",
        "failed" => "bad",
        "cancelled" => "muted",
        _ => "warn",
    };
    html! {
        tr id={ "task-" (shown(&t.id)) } {
            td.err { (shown(&t.id)) }
            td { (shown(&t.tool)) }
            td { span class=(class) data-status=(t.status) { (t.status) } }
            td.n { (t.attempts) }
            td { @if let Some(n) = t.next_attempt { (when(n, now)) } }
            td { (when(t.created, now)) }
            td { (when(t.updated, now)) }
            td.err { @if let Some(m) = &t.message { (shown(m)) } }
            td {
                @if t.status == "working" {
                    (button(&c.action("cancel-task"), c.csrf, &c.back, &[("id", t.id.clone())], "Cancel", true))
                }
            }
        }
    }
}
