//! `steadfast simulate`'s command line: sweeps, a progress bar, tables, JSON and SVG plots.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use plotters::prelude::*;
use steadfast::{BreakerConfig, BudgetConfig, RetryPolicy};

use crate::config::Config;
use crate::simulate::{self, ContentionRow, Guard, Model, OverloadParams, OverloadRow, Strategy};

/// Options shared by both experiments.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// Take the policy (and breaker, budget) from this proxy config.
    #[arg(short, long)]
    pub config: Option<PathBuf>,
    /// Whose settings to use from the config: the defaults, or this tool's.
    #[arg(long, default_value = "*")]
    pub tool: String,
    /// Seed for jitter and failures.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also draw the curves to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// Which experiment.
#[derive(Debug, clap::Subcommand)]
pub enum Experiment {
    /// N clients racing to write one resource (the AWS "Exponential Backoff And Jitter" experiment).
    Contention {
        #[command(flatten)]
        common: Common,
        /// `aws`: AWS's own simulator (read a version, write it; fixed parameters: message time
        /// |Normal(10, 2)|, base 5, cap 2000). `slots`: 1 ms write slots, under your policy.
        #[arg(long, value_enum, default_value = "aws")]
        model: Model,
        /// Client counts to sweep.
        #[arg(long, value_delimiter = ',', default_value = "1,5,10,25,50,75,100")]
        clients: Vec<usize>,
        /// Runs per point, each with its own seed; the report averages them.
        #[arg(long, default_value_t = 10)]
        runs: u32,
        /// Width of a write slot (slots model): two writes in one slot conflict.
        #[arg(long, default_value = "1ms", value_parser = humantime::parse_duration)]
        slot: Duration,
    },
    /// Steady load against a failing dependency: load amplification per protection.
    Overload {
        #[command(flatten)]
        common: Common,
        /// Failure rates to sweep (1 is a full outage).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "0,0.1,0.25,0.5,0.75,0.9,1"
        )]
        failure_rates: Vec<f64>,
        /// Requests offered per second.
        #[arg(long, default_value_t = 100)]
        rate: u32,
        /// How long requests arrive.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        duration: Duration,
        /// The dependency's latency.
        #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
        latency: Duration,
    },
}

struct Settings {
    policy: RetryPolicy,
    breaker: BreakerConfig,
    budget: BudgetConfig,
}

fn settings(common: &Common, contention: bool) -> anyhow::Result<Settings> {
    let Some(path) = &common.config else {
        let policy = if contention {
            // Everyone must get through eventually: the experiment counts cost, not give-ups.
            RetryPolicy::builder()
                .max_attempts(1000)
                .base_delay(Duration::from_millis(10))
                .max_delay(Duration::from_secs(2))
                .build()?
        } else {
            RetryPolicy::builder().max_attempts(3).build()?
        };
        // A ratio rule, so a dependency failing a quarter of calls keeps being called.
        let breaker = BreakerConfig::builder()
            .trip(steadfast::TripRule::Ratio)
            .failure_ratio(0.5)
            .minimum_throughput(20)
            .build()?;
        return Ok(Settings {
            policy,
            breaker,
            budget: BudgetConfig::default(),
        });
    };
    let config = Config::load(path, None)?;
    let tool = config.tool(&common.tool);
    Ok(Settings {
        policy: tool.policy.engine_policy().clone(),
        breaker: tool.breaker.unwrap_or_default(),
        budget: config.budget.unwrap_or_default(),
    })
}

fn bar(len: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("simulating {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// Runs the chosen experiment and prints its report.
pub fn run(experiment: Experiment) -> anyhow::Result<()> {
    match experiment {
        Experiment::Contention {
            common,
            model,
            clients,
            runs,
            slot,
        } => {
            anyhow::ensure!(
                !clients.is_empty() && clients.iter().all(|n| (1..=1000).contains(n)),
                "--clients: give counts between 1 and 1000"
            );
            anyhow::ensure!(!slot.is_zero(), "--slot must be positive");
            anyhow::ensure!(
                (1..=100).contains(&runs),
                "--runs must be between 1 and 100"
            );
            anyhow::ensure!(
                model == Model::Slots || common.config.is_none(),
                "--config applies to the slots model; the aws model runs AWS's own parameters"
            );
            let s = settings(&common, true)?;
            let strategies = model.strategies();
            let bar = bar(clients.len() * strategies.len());
            let mut rows = Vec::new();
            for &strategy in strategies {
                for &n in &clients {
                    bar.set_message(format!("{}, {n} clients", strategy.label()));
                    rows.push(simulate::contention(
                        model,
                        &s.policy,
                        strategy,
                        n,
                        slot,
                        common.seed,
                        runs,
                    ));
                    bar.inc(1);
                }
            }
            bar.finish_and_clear();
            if common.json {
                say!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print_contention(&rows)?;
            }
            if let Some(path) = &common.plot {
                let about = contention_caption(model, &s.policy, slot, runs, common.seed);
                plot_contention(&rows, model, &about, path)
                    .with_context(|| format!("cannot draw {}", path.display()))?;
            }
        }
        Experiment::Overload {
            common,
            failure_rates,
            rate,
            duration,
            latency,
        } => {
            anyhow::ensure!(
                !failure_rates.is_empty() && failure_rates.iter().all(|f| (0.0..=1.0).contains(f)),
                "--failure-rates: give rates between 0 and 1"
            );
            anyhow::ensure!(
                rate > 0 && rate <= 10_000,
                "--rate must be between 1 and 10000"
            );
            anyhow::ensure!(
                !duration.is_zero() && duration <= Duration::from_secs(3600),
                "--duration must be positive and at most 1h"
            );
            let s = settings(&common, false)?;
            let params = OverloadParams {
                policy: s.policy,
                budget: s.budget,
                breaker: s.breaker,
                rate,
                duration,
                latency,
                seed: common.seed,
            };
            let bar = bar(failure_rates.len() * Guard::ALL.len());
            let mut rows = Vec::new();
            for &f in &failure_rates {
                for guard in Guard::ALL {
                    bar.set_message(format!("{:.0}% failing, {}", f * 100.0, guard.label()));
                    rows.push(simulate::overload(&params, f, guard));
                    bar.inc(1);
                }
            }
            bar.finish_and_clear();
            if common.json {
                say!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print_overload(&rows)?;
            }
            if let Some(path) = &common.plot {
                let about = format!(
                    "{rate} requests/s for {}, dependency latency {}, up to {} attempts, seed {}",
                    humantime::format_duration(duration),
                    humantime::format_duration(latency),
                    params.policy.max_attempts(),
                    common.seed
                );
                plot_overload(&rows, &about, path)
                    .with_context(|| format!("cannot draw {}", path.display()))?;
            }
        }
    }
    Ok(())
}

fn contention_caption(
    model: Model,
    policy: &RetryPolicy,
    slot: Duration,
    runs: u32,
    seed: u64,
) -> String {
    match model {
        Model::Aws => format!(
            "AWS model: read + write under optimistic concurrency, message time |Normal({}, {})|, base {}, cap {} (time units); mean of {runs} runs, seed {seed}",
            simulate::AWS_NET_MEAN,
            simulate::AWS_NET_SD,
            simulate::AWS_BASE,
            simulate::AWS_CAP,
        ),
        Model::Slots => format!(
            "Slots model: first write in a {} slot wins; base {}, cap {}, multiplier {}; mean of {runs} runs, seed {seed}",
            humantime::format_duration(slot),
            humantime::format_duration(policy.base_delay()),
            humantime::format_duration(policy.max_delay()),
            policy.multiplier(),
        ),
    }
}

fn print_contention(rows: &[ContentionRow]) -> std::io::Result<()> {
    let unit = rows.first().map_or("ms", |r| r.model.time_unit());
    say!(
        "{:<20} {:>7} {:>10} {:>14} {:>8}",
        "strategy",
        "clients",
        "calls",
        format!("time ({unit})"),
        "gave up"
    );
    for r in rows {
        say!(
            "{:<20} {:>7} {:>10.1} {:>14.1} {:>8.1}",
            r.strategy.label(),
            r.clients,
            r.calls,
            r.time,
            r.gave_up
        );
    }
    Ok(())
}

fn print_overload(rows: &[OverloadRow]) -> std::io::Result<()> {
    say!(
        "{:>8}  {:<27} {:>8} {:>10} {:>14} {:>10} {:>8}",
        "failing",
        "protection",
        "offered",
        "dep. calls",
        "amplification",
        "succeeded",
        "goodput"
    );
    for r in rows {
        say!(
            "{:>7.0}%  {:<27} {:>8} {:>10} {:>13.2}x {:>10} {:>7.1}%",
            r.failure_rate * 100.0,
            r.guard.label(),
            r.offered,
            r.dependency_calls,
            r.amplification,
            r.succeeded,
            r.goodput * 100.0
        );
    }
    Ok(())
}

const COLORS: [RGBColor; 5] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];

/// A series: its name and its simulated points. Only these are drawn — as markers, with no line
/// between them, since nothing was simulated in between.
type Series = Vec<(String, Vec<(f64, f64)>)>;

struct Axis<'a> {
    label: &'a str,
    /// Where the legend goes (on the y axis: the corner the data leaves free).
    legend: SeriesLabelPosition,
    log: bool,
    /// Formats a tick value.
    fmt: fn(&f64) -> String,
}

fn compact(v: &f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(*v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

fn percent(v: &f64) -> String {
    format!("{}%", trim(*v))
}

fn chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x: &Axis<'_>,
    y: &Axis<'_>,
    series: &Series,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let points = || series.iter().flat_map(|s| s.1.iter().copied());
    let x_max = points().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let x_min = points().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let y_max = points().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
    let y_min_pos = points()
        .map(|p| p.1)
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(title, ("sans-serif", 17))
        .margin(14)
        .margin_right(24)
        .x_label_area_size(44)
        .y_label_area_size(64);
    let x_range = if x.log {
        (x_min.max(1e-9) / 1.3)..(x_max * 1.3)
    } else {
        let pad = x_max * 0.04;
        (-pad)..(x_max + pad)
    };
    if y.log {
        let lo = if y_min_pos.is_finite() {
            y_min_pos / 2.0
        } else {
            0.1
        };
        let mut c = builder.build_cartesian_2d(x_range, (lo..y_max * 2.0).log_scale())?;
        c.configure_mesh()
            .x_desc(x.label)
            .y_desc(y.label)
            .x_labels(8)
            .y_labels(8)
            .x_label_formatter(&x.fmt)
            .y_label_formatter(&y.fmt)
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(242, 242, 242))
            .draw()?;
        draw_series(&mut c, series, y.legend.clone())?;
    } else {
        let mut c = builder.build_cartesian_2d(x_range, (-y_max * 0.04)..(y_max * 1.1))?;
        c.configure_mesh()
            .x_desc(x.label)
            .y_desc(y.label)
            .x_labels(8)
            .y_labels(8)
            .x_label_formatter(&x.fmt)
            .y_label_formatter(&y.fmt)
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(242, 242, 242))
            .draw()?;
        draw_series(&mut c, series, y.legend.clone())?;
    }
    Ok(())
}

fn draw_series<'a, DB, X, Y>(
    c: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &Series,
    legend: SeriesLabelPosition,
) -> anyhow::Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    // One marker per series, different in shape, fill and size, so coinciding points stay
    // visible (a larger hollow shape around a smaller filled one). Markers only: nothing was
    // simulated between two points, so no line suggests it was.
    macro_rules! markers {
        ($name:expr, $points:expr, $shape:expr) => {{
            let shape = $shape;
            c.draw_series($points.iter().map(|p| EmptyElement::at(*p) + shape()))?
                .label($name.clone())
                .legend(move |(x, y)| EmptyElement::at((x + 8, y)) + shape());
        }};
    }
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let (hollow, filled) = (color.stroke_width(2), color.filled());
        match i % 5 {
            0 => markers!(name, points, move || Circle::new((0, 0), 7, hollow)),
            1 => markers!(name, points, move || TriangleMarker::new((0, 0), 6, filled)),
            2 => markers!(name, points, move || Rectangle::new(
                [(-4, -4), (4, 4)],
                filled
            )),
            3 => markers!(name, points, move || Cross::new((0, 0), 6, hollow)),
            _ => markers!(name, points, move || {
                Polygon::new(vec![(0, -7), (7, 0), (0, 7), (-7, 0)], hollow)
            }),
        }
    }
    c.configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    Ok(())
}

fn caption<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    text: &str,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    area.draw(&Text::new(
        text.to_owned(),
        (14, 8),
        ("sans-serif", 13).into_font().color(&RGBColor(60, 60, 60)),
    ))?;
    Ok(())
}

fn plot_contention(
    rows: &[ContentionRow],
    model: Model,
    about: &str,
    path: &Path,
) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let (charts, foot) = root.split_vertically(490);
    let (left, right) = charts.split_horizontally(600);
    let by = |f: fn(&ContentionRow) -> f64| -> Series {
        model
            .strategies()
            .iter()
            .map(|s: &Strategy| {
                let pts = rows
                    .iter()
                    .filter(|r| r.strategy == *s)
                    .map(|r| (r.clients as f64, f(r)))
                    .collect();
                (s.label().to_owned(), pts)
            })
            .collect()
    };
    let clients = Axis {
        label: "clients",
        legend: SeriesLabelPosition::UpperLeft,
        log: false,
        fmt: compact,
    };
    chart(
        &left,
        "Writes attempted (per run)",
        &clients,
        &Axis {
            label: "calls (log scale)",
            legend: SeriesLabelPosition::UpperLeft,
            log: true,
            fmt: compact,
        },
        &by(|r| r.calls),
    )?;
    let time_label = format!("time, {} (log scale)", model.time_unit());
    chart(
        &right,
        "Time until every client finished",
        &clients,
        &Axis {
            label: &time_label,
            legend: SeriesLabelPosition::UpperLeft,
            log: true,
            fmt: compact,
        },
        &by(|r| r.time),
    )?;
    caption(&foot, about)?;
    root.present()?;
    Ok(())
}

fn plot_overload(rows: &[OverloadRow], about: &str, path: &Path) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let (charts, foot) = root.split_vertically(490);
    let (left, right) = charts.split_horizontally(600);
    let by = |f: fn(&OverloadRow) -> f64| -> Series {
        Guard::ALL
            .iter()
            .map(|g| {
                let pts = rows
                    .iter()
                    .filter(|r| r.guard == *g)
                    .map(|r| (r.failure_rate * 100.0, f(r)))
                    .collect();
                (g.label().to_owned(), pts)
            })
            .collect()
    };
    let failing = Axis {
        label: "% of calls failing",
        legend: SeriesLabelPosition::UpperLeft,
        log: false,
        fmt: percent,
    };
    chart(
        &left,
        "Load on the dependency per request offered",
        &failing,
        &Axis {
            label: "amplification (calls / request)",
            legend: SeriesLabelPosition::UpperLeft,
            log: false,
            fmt: |v| format!("{}×", trim(*v)),
        },
        &by(|r| r.amplification),
    )?;
    chart(
        &right,
        "Goodput: requests that succeeded",
        &failing,
        &Axis {
            label: "succeeded / offered",
            legend: SeriesLabelPosition::UpperRight,
            log: false,
            fmt: |v| format!("{}%", trim(*v * 100.0)),
        },
        &by(|r| r.goodput),
    )?;
    caption(&foot, about)?;
    root.present()?;
    Ok(())
}
