//! Charts as SVG drawn on the server from numbers only (no script, no chart library): jobs
//! finished per minute, and start-latency percentiles per minute.
//!
//! SVG elements are written with explicit end tags (`line … {}`), never as void elements:
//! inside HTML, an SVG `<line>` without `/>` or `</line>` swallows what follows it.

use maud::{Markup, html};
use steadfast_jobs::inspect::{LATENCY_BOUNDS_MS, Minute};

const W: f64 = 560.0;
const H: f64 = 160.0;
const LEFT: f64 = 48.0;
const BOTTOM: f64 = 20.0;

fn x_labels(n: usize) -> Markup {
    let plot = W - LEFT;
    html! {
        text x=(LEFT) y=(H - 4.0) font-size="11" fill="#57606a" { "-" (n) "m" }
        text x=(LEFT + plot / 2.0) y=(H - 4.0) font-size="11" fill="#57606a" text-anchor="middle" { "-" (n / 2) "m" }
        text x=(W) y=(H - 4.0) font-size="11" fill="#57606a" text-anchor="end" { "now" }
    }
}

/// Done (green) and dead (red) jobs per minute, stacked bars.
pub fn throughput(minutes: &[Minute]) -> Markup {
    let n = minutes.len().max(1);
    let top = minutes
        .iter()
        .map(|m| m.done + m.dead)
        .max()
        .unwrap_or(0)
        .max(1);
    let plot_h = H - BOTTOM - 8.0;
    let bar = (W - LEFT) / n as f64;
    let done: u64 = minutes.iter().map(|m| m.done).sum();
    let dead: u64 = minutes.iter().map(|m| m.dead).sum();
    let label = format!(
        "Jobs finished per minute over the last {n} minutes: {done} done, {dead} dead letters; busiest minute {top}."
    );
    html! {
        figure.chart {
            svg width=(W) height=(H) viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(label) {
                line x1=(LEFT) y1=(8) x2=(LEFT) y2=(H - BOTTOM) stroke="#d0d7de" {}
                line x1=(LEFT) y1=(H - BOTTOM) x2=(W) y2=(H - BOTTOM) stroke="#d0d7de" {}
                text x=(LEFT - 6.0) y=(14) font-size="11" fill="#57606a" text-anchor="end" { (top) }
                text x=(LEFT - 6.0) y=(H - BOTTOM) font-size="11" fill="#57606a" text-anchor="end" { "0" }
                @for (i, m) in minutes.iter().enumerate() {
                    @let x = LEFT + i as f64 * bar + 0.5;
                    @let hd = plot_h * m.done as f64 / top as f64;
                    @let hx = plot_h * m.dead as f64 / top as f64;
                    @if m.done > 0 {
                        rect x=(x) y=(H - BOTTOM - hd) width=((bar - 1.0).max(1.0)) height=(hd) fill="#1a7f37" {
                            title { (m.at.format("%H:%M")) ": " (m.done) " done" }
                        }
                    }
                    @if m.dead > 0 {
                        rect x=(x) y=(H - BOTTOM - hd - hx) width=((bar - 1.0).max(1.0)) height=(hx) fill="#b3261e" {
                            title { (m.at.format("%H:%M")) ": " (m.dead) " dead" }
                        }
                    }
                }
                (x_labels(n))
            }
            figcaption { "Jobs finished per minute: " span.ok { "done " (done) } " · " span.bad { "dead " (dead) } }
        }
    }
}

/// The p50, p95 and p99 start latency per minute, on the histogram's bucket bounds.
pub fn latency(minutes: &[Minute]) -> Markup {
    let n = minutes.len().max(1);
    let levels = LATENCY_BOUNDS_MS.len() + 1;
    let plot_h = H - BOTTOM - 8.0;
    let step = (W - LEFT) / n as f64;
    let y_of = |bound: i64| {
        let level = LATENCY_BOUNDS_MS
            .iter()
            .position(|b| *b == bound)
            .unwrap_or(levels - 1);
        H - BOTTOM - plot_h * (level + 1) as f64 / levels as f64
    };
    let series = [
        (0.5, "p50", "#0b57d0"),
        (0.95, "p95", "#9a6700"),
        (0.99, "p99", "#b3261e"),
    ];
    let worst = minutes.iter().filter_map(|m| m.quantile_ms(0.99)).max();
    let label = match worst {
        Some(w) => format!(
            "Start latency percentiles per minute over the last {n} minutes; the worst p99 was at most {}.",
            crate::layout::ms(w)
        ),
        None => format!("Start latency over the last {n} minutes: no job started and finished."),
    };
    html! {
        figure.chart {
            svg width=(W) height=(H) viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(label) {
                line x1=(LEFT) y1=(8) x2=(LEFT) y2=(H - BOTTOM) stroke="#d0d7de" {}
                line x1=(LEFT) y1=(H - BOTTOM) x2=(W) y2=(H - BOTTOM) stroke="#d0d7de" {}
                @for b in [10_i64, 100, 1_000, 10_000, 60_000] {
                    text x=(LEFT - 6.0) y=(y_of(b) + 4.0) font-size="11" fill="#57606a" text-anchor="end" { (crate::layout::ms(b)) }
                }
                @for (q, name, colour) in series {
                    @let points: Vec<(f64, f64)> = minutes.iter().enumerate().filter_map(|(i, m)| {
                        m.quantile_ms(q).map(|v| (LEFT + (i as f64 + 0.5) * step, y_of(v)))
                    }).collect();
                    @if points.len() > 1 {
                        @let line: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                        polyline points=(line.join(" ")) fill="none" stroke=(colour) stroke-width="1.5" {
                            title { (name) }
                        }
                    }
                    // A dot per minute too: a lone minute has no line to draw.
                    @for (x, y) in &points {
                        circle cx=(format!("{x:.1}")) cy=(format!("{y:.1}")) r="2.5" fill=(colour) { title { (name) } }
                    }
                }
                (x_labels(n))
            }
            figcaption {
                "Start latency (due → first attempt; at most): "
                @for (_, name, colour) in series { span style={ "color:" (colour) } { (name) } " " }
            }
        }
    }
}
