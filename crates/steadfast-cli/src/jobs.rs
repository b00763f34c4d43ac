//! `steadfast jobs`: inspect and repair a durable job store (the logic lives in
//! `steadfast_jobs::cli`), or serve its console (`steadfast_console::cli`).

use steadfast_jobs::cli::{JobsArgs, JobsCommand};

/// Inspect and repair a job store, or serve its console.
#[derive(Debug, clap::Args)]
pub struct JobsCli {
    /// The store: sqlite://path or postgres://… (`--store` is the same).
    #[arg(
        long,
        visible_alias = "store",
        env = "STEADFAST_JOBS_DB",
        global = true
    )]
    db: Option<String>,
    /// PostgreSQL schema holding the tables.
    #[arg(long, global = true)]
    schema: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// What to do.
    #[command(subcommand)]
    command: JobsTop,
}

/// `console`, or one of the store commands.
#[derive(Debug, clap::Subcommand)]
enum JobsTop {
    /// Serve the jobs console in a browser (loopback unless an admin token is set).
    Console(steadfast_console::cli::ConsoleArgs),
    #[command(flatten)]
    Store(JobsCommand),
}

/// Runs a `jobs` command on stdout.
pub async fn run(cli: JobsCli) -> anyhow::Result<()> {
    let db = cli.db.ok_or_else(|| {
        anyhow::anyhow!("the store is required: --db (or --store) URL, or STEADFAST_JOBS_DB")
    })?;
    let mut out = std::io::stdout();
    let done = match cli.command {
        JobsTop::Console(args) => steadfast_console::cli::run(db, cli.schema, args, &mut out).await,
        JobsTop::Store(command) => {
            let args = JobsArgs {
                db,
                schema: cli.schema,
                json: cli.json,
                command,
            };
            steadfast_jobs::cli::run(args, &mut out).await
        }
    };
    done.map_err(|e| anyhow::anyhow!("{e}"))
}
