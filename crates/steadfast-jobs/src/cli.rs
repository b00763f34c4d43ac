//! The `jobs` command line: `--db URL list | show ID | dead | requeue ID | purge --older-than
//! 7d | stats | limits | set-limits KEY | pause | resume`. The `steadfast` binary mounts it as
//! `steadfast jobs`.

use std::io::Write;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::{JobState, Jobs, JobsError, StoreOptions};

/// Inspect and repair a job store.
#[derive(Debug, Args)]
pub struct JobsArgs {
    /// The store: sqlite://path or postgres://…
    #[arg(long, env = "STEADFAST_JOBS_DB")]
    pub db: String,
    /// PostgreSQL schema holding the tables.
    #[arg(long)]
    pub schema: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: JobsCommand,
}

/// A `jobs` subcommand.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Jobs, newest first.
    List {
        /// Only jobs in this state (available, running, done, dead, cancelled).
        #[arg(long, value_parser = parse_state)]
        state: Option<JobState>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// One job in full (its last error is sanitized).
    Show {
        /// The job's id.
        id: i64,
    },
    /// Dead letters, newest first.
    Dead {
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Put a dead (or cancelled) job back in the queue with its attempts reset.
    Requeue {
        /// The job's id.
        id: i64,
    },
    /// Delete dead letters older than a duration.
    Purge {
        /// How old (e.g. 7d, 12h).
        #[arg(long, value_parser = humantime::parse_duration)]
        older_than: Duration,
    },
    /// Counts by state and the queue's lag.
    Stats,
    /// Keys with limits or paused (with their running and waiting jobs), and paused queues.
    Limits,
    /// Set a key's limits for every worker sharing the store.
    SetLimits {
        /// The key (tenant, provider, tool).
        key: String,
        /// At most this many of its jobs running at once.
        #[arg(long)]
        max_running: Option<u32>,
        /// At most this many starts per window: `N/DURATION`, e.g. `60/1m`.
        #[arg(long, value_parser = parse_rate)]
        rate: Option<(u32, Duration)>,
    },
    /// Stop starting a key's jobs, or a queue's (running ones finish).
    Pause(Target),
    /// Start a paused key's or queue's jobs again.
    Resume(Target),
}

/// What `pause` and `resume` act on: one key or one queue.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct Target {
    /// A key (tenant, provider, tool).
    #[arg(long)]
    pub key: Option<String>,
    /// A queue: every job of this handler.
    #[arg(long)]
    pub queue: Option<String>,
}

fn parse_rate(s: &str) -> Result<(u32, Duration), String> {
    let (n, per) = s
        .split_once('/')
        .ok_or_else(|| format!("rate must be N/DURATION, e.g. 60/1m (got {s:?})"))?;
    let n = n
        .trim()
        .parse()
        .map_err(|_| format!("rate must start with a whole number of starts (got {n:?})"))?;
    let per = humantime::parse_duration(per.trim())
        .map_err(|e| format!("rate's window must be a duration like 1s or 1m ({e})"))?;
    Ok((n, per))
}

fn parse_state(s: &str) -> Result<JobState, String> {
    Ok(match s {
        "available" => JobState::Available,
        "running" => JobState::Running,
        "done" => JobState::Done,
        "dead" => JobState::Dead,
        "cancelled" => JobState::Cancelled,
        other => {
            return Err(format!(
                "state must be one of available, running, done, dead, cancelled (got {other:?})"
            ));
        }
    })
}

/// Runs a `jobs` command, writing to `out`.
///
/// ```no_run
/// use clap::Parser;
/// #[derive(Parser)]
/// struct Cli { #[command(flatten)] jobs: steadfast_jobs::cli::JobsArgs }
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let cli = Cli::parse_from(["jobs", "--db", "sqlite://jobs.db", "stats"]);
/// steadfast_jobs::cli::run(cli.jobs, &mut std::io::stdout()).await?;
/// # Ok(()) }
/// ```
pub async fn run(args: JobsArgs, out: &mut dyn Write) -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = StoreOptions::new(args.db).max_connections(2);
    if let Some(s) = args.schema {
        opts = opts.schema(s);
    }
    let jobs = Jobs::builder().connect_with(opts).await?;
    let json = args.json;
    match args.command {
        JobsCommand::List { state, limit } => {
            print_jobs(out, &jobs.list(state, limit).await?, json)?
        }
        JobsCommand::Dead { limit } => print_jobs(out, &jobs.dead(limit).await?, json)?,
        JobsCommand::Show { id } => {
            let job = jobs.get(id).await?.ok_or(JobsError::NotFound(id))?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&job)?)?;
            } else {
                writeln!(out, "id:           {}", job.id)?;
                writeln!(out, "handler:      {}", job.handler)?;
                writeln!(out, "state:        {}", job.state)?;
                writeln!(
                    out,
                    "attempts:     {} of {}",
                    job.attempts, job.max_attempts
                )?;
                writeln!(out, "run at:       {}", job.run_at.to_rfc3339())?;
                if let Some(t) = job.first_attempt_at {
                    writeln!(out, "first try:    {}", t.to_rfc3339())?;
                }
                if let Some(t) = job.finished_at {
                    writeln!(out, "finished:     {}", t.to_rfc3339())?;
                }
                if let Some(e) = &job.last_error {
                    writeln!(
                        out,
                        "last error:   [{}] {e}",
                        job.last_error_code.as_deref().unwrap_or("?")
                    )?;
                }
                if let Some(k) = &job.unique_key {
                    writeln!(out, "unique key:   {k}")?;
                }
                if let Some(k) = &job.ordering_key {
                    writeln!(out, "ordering key: {k}")?;
                }
                if let (Some(s), Some(f)) = (job.schedule_id, job.fire_at) {
                    writeln!(out, "schedule:     {s} (fire time {})", f.to_rfc3339())?;
                }
                // The trace that queued it: what to search the tracing backend for.
                let trace = job
                    .traceparent
                    .as_deref()
                    .and_then(|tp| crate::TraceContext::parse(tp, None).ok());
                if let Some(t) = trace {
                    writeln!(
                        out,
                        "trace:        {} (queued by span {})",
                        t.trace_id(),
                        t.parent_id()
                    )?;
                }
                writeln!(
                    out,
                    "payload:      {}",
                    steadfast::sanitize(&job.payload.to_string())
                )?;
            }
        }
        JobsCommand::Requeue { id } => {
            if jobs.requeue(id).await? {
                writeln!(out, "job {id} requeued")?;
            } else {
                return Err(
                    format!("job {id} is not dead or cancelled (or does not exist)").into(),
                );
            }
        }
        JobsCommand::Purge { older_than } => {
            let n = jobs.purge(older_than).await?;
            writeln!(
                out,
                "purged {n} dead jobs older than {}",
                humantime::format_duration(older_than)
            )?;
        }
        JobsCommand::Stats => {
            let s = jobs.stats().await?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&s)?)?;
            } else {
                writeln!(
                    out,
                    "available {} (retrying {})  running {}  done {}  dead {}  cancelled {}",
                    s.available, s.retrying, s.running, s.done, s.dead, s.cancelled
                )?;
                if let Some(lag) = s.queue_lag {
                    writeln!(
                        out,
                        "queue lag {}",
                        humantime::format_duration(Duration::from_millis(lag.as_millis() as u64))
                    )?;
                }
            }
        }
        JobsCommand::Limits => print_limits(out, &jobs, json).await?,
        JobsCommand::SetLimits {
            key,
            max_running,
            rate,
        } => {
            let mut limits = crate::KeyLimits::new();
            limits.max_running = max_running;
            limits.rate = rate;
            jobs.set_limits(&key, limits).await?;
            writeln!(out, "limits of {key} set")?;
        }
        JobsCommand::Pause(t) => match (t.key, t.queue) {
            (Some(k), _) => {
                jobs.pause_key(&k).await?;
                writeln!(out, "key {k} paused")?;
            }
            (None, Some(q)) => {
                jobs.pause_queue(&q).await?;
                writeln!(out, "queue {q} paused")?;
            }
            (None, None) => return Err("pause needs --key or --queue".into()),
        },
        JobsCommand::Resume(t) => {
            let (what, was) = match (t.key, t.queue) {
                (Some(k), _) => (format!("key {k}"), jobs.resume_key(&k).await?),
                (None, Some(q)) => (format!("queue {q}"), jobs.resume_queue(&q).await?),
                (None, None) => return Err("resume needs --key or --queue".into()),
            };
            if was {
                writeln!(out, "{what} resumed")?;
            } else {
                writeln!(out, "{what} was not paused")?;
            }
        }
    }
    jobs.store().close().await;
    Ok(())
}

async fn print_limits(
    out: &mut dyn Write,
    jobs: &Jobs,
    json: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let keys = jobs.keys().await?;
    let queues = jobs.queues().await?;
    if json {
        let v = serde_json::json!({ "keys": keys, "paused_queues": queues });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<32} {:<8} {:>11} {:<16} {:>8} {:>8}",
        "key", "state", "max running", "rate", "running", "waiting"
    )?;
    for k in &keys {
        let max = k
            .limits
            .max_running
            .map_or_else(|| "-".to_owned(), |n| n.to_string());
        let rate = k.limits.rate.map_or_else(
            || "-".to_owned(),
            |(n, per)| format!("{n}/{}", humantime::format_duration(per)),
        );
        writeln!(
            out,
            "{:<32} {:<8} {max:>11} {rate:<16} {:>8} {:>8}",
            k.key,
            if k.paused { "paused" } else { "active" },
            k.running,
            k.waiting
        )?;
    }
    for q in &queues {
        writeln!(out, "queue {} paused", q.handler)?;
    }
    Ok(())
}

fn print_jobs(out: &mut dyn Write, jobs: &[crate::Job], json: bool) -> std::io::Result<()> {
    if json {
        return writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(jobs).unwrap_or_default()
        );
    }
    writeln!(
        out,
        "{:>8}  {:<10} {:<24} {:>8}  {:<25} last error",
        "id", "state", "handler", "attempts", "run at"
    )?;
    for j in jobs {
        let err = j.last_error.as_deref().unwrap_or("");
        let err: String = err.chars().take(60).collect();
        writeln!(
            out,
            "{:>8}  {:<10} {:<24} {:>4}/{:<3}  {:<25} {err}",
            j.id,
            j.state.as_str(),
            j.handler,
            j.attempts,
            j.max_attempts,
            j.run_at.format("%Y-%m-%dT%H:%M:%SZ")
        )?;
    }
    Ok(())
}
