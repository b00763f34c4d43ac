//! `steadfast simulate`'s command line: sweeps, a progress bar, tables, JSON and SVG plots.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use plotters::prelude::*;
use steadfast::{BreakerConfig, BudgetConfig, RetryPolicy};

use crate::config::Config;
use crate::simulate::{self, ContentionRow, Guard, JITTERS, OverloadParams, OverloadRow};

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
        /// Client counts to sweep.
        #[arg(long, value_delimiter = ',', default_value = "1,5,10,25,50,75,100")]
        clients: Vec<usize>,
        /// Width of a write slot: two writes in one slot conflict.
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
            clients,
            slot,
        } => {
            anyhow::ensure!(
                !clients.is_empty() && clients.iter().all(|n| *n > 0),
                "--clients: give positive counts"
            );
            anyhow::ensure!(!slot.is_zero(), "--slot must be positive");
            let s = settings(&common, true)?;
            let bar = bar(clients.len() * JITTERS.len());
            let mut rows = Vec::new();
            for jitter in JITTERS {
                for &n in &clients {
                    bar.set_message(format!("{} jitter, {n} clients", jitter.1));
                    rows.push(simulate::contention(
                        &s.policy,
                        jitter,
                        n,
                        slot,
                        common.seed,
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
                plot_contention(&rows, path)
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
                plot_overload(&rows, path)
                    .with_context(|| format!("cannot draw {}", path.display()))?;
            }
        }
    }
    Ok(())
}

fn print_contention(rows: &[ContentionRow]) -> std::io::Result<()> {
    say!(
        "{:<13} {:>7} {:>9} {:>12} {:>8}",
        "jitter",
        "clients",
        "calls",
        "time (ms)",
        "gave up"
    );
    for r in rows {
        say!(
            "{:<13} {:>7} {:>9} {:>12.0} {:>8}",
            r.jitter,
            r.clients,
            r.calls,
            r.time_ms,
            r.gave_up
        );
    }
    Ok(())
}

fn print_overload(rows: &[OverloadRow]) -> std::io::Result<()> {
    say!(
        "{:>8}  {:<27} {:>8} {:>10} {:>14} {:>10}",
        "failing",
        "protection",
        "offered",
        "dep. calls",
        "amplification",
        "succeeded"
    );
    for r in rows {
        say!(
            "{:>7.0}%  {:<27} {:>8} {:>10} {:>13.2}x {:>10}",
            r.failure_rate * 100.0,
            r.guard.label(),
            r.offered,
            r.dependency_calls,
            r.amplification,
            r.succeeded
        );
    }
    Ok(())
}

const COLORS: [RGBColor; 4] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

type Series = Vec<(String, Vec<(f64, f64)>)>;

fn chart(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &Series,
) -> anyhow::Result<()> {
    let x_max = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(0.0, f64::max)
        .max(1e-9);
    let y_max = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.05;
    let mut c = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    c.configure_mesh().x_desc(x_label).y_desc(y_label).draw()?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        c.draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))?
        .label(name.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
        c.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn plot_contention(rows: &[ContentionRow], path: &Path) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (1100, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(550);
    let by = |f: fn(&ContentionRow) -> f64| -> Series {
        JITTERS
            .iter()
            .map(|(_, name)| {
                let pts = rows
                    .iter()
                    .filter(|r| r.jitter == *name)
                    .map(|r| (r.clients as f64, f(r)))
                    .collect();
                (format!("{name} jitter"), pts)
            })
            .collect()
    };
    chart(
        &left,
        "Calls made",
        "clients",
        "calls",
        &by(|r| r.calls as f64),
    )?;
    chart(
        &right,
        "Time until all finished",
        "clients",
        "ms",
        &by(|r| r.time_ms),
    )?;
    root.present()?;
    Ok(())
}

fn plot_overload(rows: &[OverloadRow], path: &Path) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (700, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let series: Series = Guard::ALL
        .iter()
        .map(|g| {
            let pts = rows
                .iter()
                .filter(|r| r.guard == *g)
                .map(|r| (r.failure_rate * 100.0, r.amplification))
                .collect();
            (g.label().to_owned(), pts)
        })
        .collect();
    chart(
        &root,
        "Load on the dependency per request offered",
        "% of calls failing",
        "amplification",
        &series,
    )?;
    root.present()?;
    Ok(())
}
