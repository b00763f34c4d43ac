//! `steadfast jobs`: inspect and repair a durable job store (the logic lives in
//! `steadfast_jobs::cli`).

pub use steadfast_jobs::cli::JobsArgs;

/// Runs a `jobs` command on stdout.
pub async fn run(args: JobsArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout();
    steadfast_jobs::cli::run(args, &mut out)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
}
