//! The jobs console's pages, rendered from their [`Data`]: every text from the store goes
//! through [`shown`] (the sanitizer), and job arguments only when the options allow.

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use steadfast_jobs::inspect::{JobDetail, JobPage, QueueCounts, SchedulePage, ScheduleStatus};
use steadfast_jobs::{Job, JobState, KeyStatus};

use crate::charts;

/// A count as shown: "10,000+" past the inspector's cap.
fn count(n: u64) -> String {
    if n > steadfast_jobs::inspect::COUNT_CAP {
        format!("{}+", steadfast_jobs::inspect::COUNT_CAP)
    } else {
        n.to_string()
    }
}
use crate::layout::{Section, button, ms, shown, when};

/// What rendering needs besides the data.
pub struct Ctx<'a> {
    /// The console's base path.
    pub base: &'a str,
    /// The visitor's CSRF token.
    pub csrf: &'a str,
    /// Where actions send the browser back to (this page).
    pub back: String,
    /// Now.
    pub now: DateTime<Utc>,
    /// Show job arguments.
    pub arguments: bool,
}

impl Ctx<'_> {
    fn link(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn action(&self, name: &str) -> String {
        format!("{}/actions/{name}", self.base)
    }
}

/// A path segment, percent-encoded.
pub fn seg(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

const STATES: [JobState; 5] = [
    JobState::Available,
    JobState::Running,
    JobState::Done,
    JobState::Dead,
    JobState::Cancelled,
];

/// The front page's sections.
pub fn overview(
    c: &Ctx<'_>,
    queues: &[QueueCounts],
    minutes: &[steadfast_jobs::inspect::Minute],
    dead: &JobPage,
    keys: &[KeyStatus],
    schedules: &SchedulePage,
) -> Vec<Section> {
    vec![
        Section {
            id: "queues",
            html: html! { h2 { "Queues" } (queue_table(c, queues)) },
        },
        Section {
            id: "charts",
            html: html! {
                h2 { "The last hour" }
                div.charts { (charts::throughput(minutes)) (charts::latency(minutes)) }
            },
        },
        Section {
            id: "dead",
            html: html! {
                h2 { "Newest dead letters " a href=(c.link("/dead")) { "(all)" } }
                (job_table(c, &dead.jobs, JobState::Dead))
                @if !dead.jobs.is_empty() {
                    p { (button(&c.action("retry-dead"), c.csrf, &c.back, &[], "Retry all dead letters (up to 1,000)", false)) }
                }
            },
        },
        Section {
            id: "keys",
            html: key_table(c, keys),
        },
        Section {
            id: "schedules",
            html: schedule_table(c, schedules),
        },
    ]
}

fn queue_table(c: &Ctx<'_>, queues: &[QueueCounts]) -> Markup {
    html! {
        @if queues.is_empty() { p.muted { "No jobs yet." } } @else {
            table {
                thead { tr {
                    th scope="col" { "Queue" }
                    @for s in STATES { th.n scope="col" { (s.as_str()) } }
                    th scope="col" { "" }
                } }
                tbody { @for q in queues {
                    @let h = seg(&q.handler);
                    tr {
                        th scope="row" {
                            a href=(c.link(&format!("/queues/{h}"))) { (shown(&q.handler)) }
                            @if q.paused { " " span.warn { "(paused)" } }
                        }
                        @for (s, n) in STATES.iter().zip([q.available, q.running, q.done, q.dead, q.cancelled]) {
                            td.n { a href=(c.link(&format!("/queues/{h}?state={}", s.as_str()))) class=[(s == &JobState::Dead && n > 0).then_some("bad")] { (count(n)) } }
                        }
                        td {
                            @let op = if q.paused { "resume" } else { "pause" };
                            (button(&c.action("queue"), c.csrf, &c.back, &[("handler", q.handler.clone()), ("op", op.to_owned())], op, false))
                        }
                    }
                } }
            }
        }
    }
}

fn job_table(c: &Ctx<'_>, jobs: &[Job], state: JobState) -> Markup {
    html! {
        @if jobs.is_empty() { p.muted { "None." } } @else {
            table {
                thead { tr {
                    th.n scope="col" { "Job" } th scope="col" { "Queue" } th.n scope="col" { "Attempts" }
                    th scope="col" { @if state == JobState::Available { "Runs" } @else { "Updated" } }
                    th scope="col" { "Last error" } th scope="col" { "" }
                } }
                tbody { @for j in jobs {
                    tr id={ "job-" (j.id) } {
                        td.n { a href=(c.link(&format!("/jobs/{}", j.id))) { (j.id) } }
                        td { (shown(&j.handler)) }
                        td.n { (j.attempts) "/" (j.max_attempts) }
                        td { @if state == JobState::Available { (when(j.run_at, c.now)) } @else { (when(j.finished_at.unwrap_or(j.updated_at), c.now)) } }
                        td.err { @if let Some(e) = &j.last_error { span.muted { "[" (shown(j.last_error_code.as_deref().unwrap_or("?"))) "] " } (shown(e)) } }
                        td { (job_actions(c, j)) }
                    }
                } }
            }
        }
    }
}

fn job_actions(c: &Ctx<'_>, j: &Job) -> Markup {
    let id = vec![("id", j.id.to_string())];
    html! {
        @match j.state {
            JobState::Dead => {
                (button(&c.action("retry"), c.csrf, &c.back, &id, "Retry", false)) " "
                (button(&c.action("discard"), c.csrf, &c.back, &id, "Discard", true))
            }
            JobState::Cancelled => { (button(&c.action("retry"), c.csrf, &c.back, &id, "Retry", false)) }
            JobState::Available => { (button(&c.action("cancel"), c.csrf, &c.back, &id, "Cancel", true)) }
            _ => {}
        }
    }
}

/// A page of jobs: tabs per state, the table, the next-page link.
pub fn jobs_page(
    c: &Ctx<'_>,
    handler: Option<&str>,
    queue: Option<&QueueCounts>,
    state: JobState,
    page: &JobPage,
) -> Vec<Section> {
    let path = match handler {
        Some(h) => format!("/queues/{}", seg(h)),
        None => "/dead".to_owned(),
    };
    let tabs = html! {
        @if let Some(q) = queue {
            nav aria-label="states" { p {
                @for (s, n) in STATES.iter().zip([q.available, q.running, q.done, q.dead, q.cancelled]) {
                    @if *s == state { strong { (s.as_str()) " (" (count(n)) ")" } } @else {
                        a href=(c.link(&format!("{path}?state={}", s.as_str()))) { (s.as_str()) " (" (count(n)) ")" }
                    }
                    " · "
                }
                @if q.paused { span.warn { "paused" } }
            } }
        }
    };
    let bulk = state == JobState::Dead && !page.jobs.is_empty();
    let handler_field: Vec<(&str, String)> = handler
        .map(|h| ("handler", h.to_owned()))
        .into_iter()
        .collect();
    vec![Section {
        id: "jobs",
        html: html! {
            (tabs)
            (job_table(c, &page.jobs, state))
            @if bulk { p { (button(&c.action("retry-dead"), c.csrf, &c.back, &handler_field, "Retry these dead letters (up to 1,000)", false)) } }
            @if let Some(next) = page.next {
                p { a href=(c.link(&format!("{path}?state={}&before={next}", state.as_str()))) rel="next" { "Older →" } }
            }
        },
    }]
}

/// One job in full.
pub fn job_page(c: &Ctx<'_>, d: &JobDetail) -> Vec<Section> {
    let j = &d.job;
    let args = if c.arguments {
        html! { pre { (shown(&steadfast::sanitize_json(&j.payload).to_string())) } }
    } else {
        html! { span.muted { "hidden (the console was not set up to show job arguments)" } }
    };
    vec![Section {
        id: "job",
        html: html! {
            dl {
                dt { "Queue" } dd { a href=(c.link(&format!("/queues/{}", seg(&j.handler)))) { (shown(&j.handler)) } }
                dt { "State" } dd class=[(j.state == JobState::Dead).then_some("bad")] { (j.state.as_str()) }
                dt { "Attempts" } dd { (j.attempts) " of " (j.max_attempts) }
                @if let Some(t) = d.next_run { dt { "Next run" } dd { (when(t, c.now)) @if d.last_delay_ms > 0 { " (backoff " (ms(d.last_delay_ms as i64)) ")" } } }
                @if let Some(t) = j.first_attempt_at { dt { "First attempt" } dd { (when(t, c.now)) } }
                @if let Some(w) = &d.locked_by { dt { "Worker" } dd { (shown(w)) } }
                @if let Some(t) = d.lease_until { dt { "Lease until" } dd { (when(t, c.now)) } }
                @if let Some(t) = j.finished_at { dt { "Finished" } dd { (when(t, c.now)) } }
                dt { "Queued" } dd { (when(j.created_at, c.now)) }
                @if let Some(e) = &j.last_error { dt { "Last error" } dd.err { "[" (shown(j.last_error_code.as_deref().unwrap_or("?"))) "] " (shown(e)) } }
                @if let Some(k) = &j.limit_key { dt { "Key" } dd { (shown(k)) } }
                @if let Some(k) = &j.unique_key { dt { "Unique key" } dd { (shown(k)) } }
                @if let Some(s) = j.schedule_id { dt { "Schedule" } dd { (s) } }
                dt { "Priority" } dd { (j.priority) }
                dt { "Arguments" } dd { (args) }
            }
            p { (job_actions(c, j)) }
            p.muted { "The store keeps a job's attempt count and its last error, not each attempt's." }
        },
    }]
}

fn key_table(c: &Ctx<'_>, keys: &[KeyStatus]) -> Markup {
    html! {
        h2 { "Keys with limits" }
        @if keys.is_empty() { p.muted { "No key has limits or is paused." } } @else {
            table {
                thead { tr {
                    th scope="col" { "Key" } th.n scope="col" { "Running / most" } th scope="col" { "Rate" }
                    th.n scope="col" { "Waiting" } th scope="col" { "State" } th scope="col" { "" }
                } }
                tbody { @for k in keys {
                    tr {
                        th scope="row" { (shown(&k.key)) }
                        td.n { (k.running) " / " @match k.limits.max_running { Some(m) => (m), None => "–" } }
                        td { @match k.limits.rate { Some((n, per)) => { (n) " per " (ms(per.as_millis() as i64)) }, None => "–" } }
                        td.n { (k.waiting) }
                        td { @if k.paused { span.warn { "paused" } } @else { "active" } }
                        td {
                            @let op = if k.paused { "resume" } else { "pause" };
                            (button(&c.action("key"), c.csrf, &c.back, &[("key", k.key.clone()), ("op", op.to_owned())], op, false))
                        }
                    }
                } }
            }
        }
    }
}

/// The schedules table (front page and its own page).
pub fn schedule_table(c: &Ctx<'_>, page: &SchedulePage) -> Markup {
    html! {
        h2 { "Schedules" }
        @if page.schedules.is_empty() { p.muted { "No recurring schedules." } } @else {
            table {
                thead { tr {
                    th.n scope="col" { "Id" } th scope="col" { "Key" } th scope="col" { "Queue" } th scope="col" { "When" }
                    th scope="col" { "State" } th scope="col" { "Next fire times" } th scope="col" { "" }
                } }
                tbody { @for s in &page.schedules {
                    tr {
                        td.n { (s.id) }
                        td { (shown(s.key.as_deref().unwrap_or("–"))) }
                        td { (shown(&s.handler)) }
                        td { @if let Some(cron) = &s.cron { code { (shown(cron)) } @if let Some(tz) = &s.tz { " " (shown(tz)) } } @else if let Some(i) = s.interval_ms { "every " (ms(i)) } }
                        td { @match s.status { ScheduleStatus::Active => "active", ScheduleStatus::Paused => span.warn { "paused" }, _ => span.muted { "cancelled" } } }
                        td { @for (n, t) in s.next_fires.iter().enumerate() { @if n > 0 { ", " } (when(*t, c.now)) } }
                        td {
                            @let id = ("id", s.id.to_string());
                            @match s.status {
                                ScheduleStatus::Active => {
                                    (button(&c.action("schedule"), c.csrf, &c.back, &[id.clone(), ("op", "pause".into())], "pause", false)) " "
                                    (button(&c.action("schedule"), c.csrf, &c.back, &[id.clone(), ("op", "cancel".into())], "cancel", true))
                                }
                                ScheduleStatus::Paused => {
                                    (button(&c.action("schedule"), c.csrf, &c.back, &[id.clone(), ("op", "resume".into())], "resume", false)) " "
                                    (button(&c.action("schedule"), c.csrf, &c.back, &[id.clone(), ("op", "cancel".into())], "cancel", true))
                                }
                                _ => {}
                            }
                        }
                    }
                } }
            }
            @if let Some(next) = page.next { p { a href=(c.link(&format!("/schedules?after={next}"))) rel="next" { "More →" } } }
        }
    }
}

/// The keys page.
pub fn keys_page(c: &Ctx<'_>, keys: &[KeyStatus]) -> Vec<Section> {
    vec![Section {
        id: "keys",
        html: key_table(c, keys),
    }]
}
