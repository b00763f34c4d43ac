//! The `jobs` command line: `--db URL list | show ID | dead | requeue ID | purge --older-than
//! 7d | stats`. The `steadfast` binary mounts it as `steadfast jobs`.

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
    }
    jobs.store().close().await;
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
