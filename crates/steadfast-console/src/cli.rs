//! `steadfast jobs console`: serve the jobs console of a store (the `steadfast` binary mounts
//! [`ConsoleArgs`] and calls [`run`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use steadfast_jobs::inspect::Inspector;
use steadfast_jobs::{Jobs, StoreOptions};

use crate::{ConsoleOptions, check_listen, jobs_router, serve_on};

/// Serve the jobs console: queues, throughput, dead letters, schedules and keys, live.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Where to listen. Beyond loopback an admin token is required.
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub listen: SocketAddr,
    /// A file holding the admin token (its first line). The console then asks for it once per
    /// browser session, on any address.
    #[arg(long, value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,
    /// Show job arguments (sanitized). Off by default.
    #[arg(long)]
    pub show_arguments: bool,
    /// How often live pages refresh (and at most how often each page reads the store).
    #[arg(long, default_value = "2s", value_parser = humantime_duration)]
    pub refresh: Duration,
    /// Also answer to this Host name without a token (repeatable), e.g. behind a local proxy.
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
}

fn humantime_duration(s: &str) -> Result<Duration, String> {
    let (n, unit) = s.trim().split_at(
        s.trim()
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(s.len()),
    );
    let n: u64 = n
        .parse()
        .map_err(|_| format!("a duration is a number and ms, s or m, e.g. 2s (got {s:?})"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!(
            "a duration is a number and ms, s or m, e.g. 2s (got {s:?})"
        )),
    }
}

/// Reads the token (the file's first line, trimmed); an empty one is refused.
fn token(path: &PathBuf) -> Result<String, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("admin token file {}: {e}", path.display()))?;
    let t = text.lines().next().unwrap_or("").trim().to_owned();
    if t.len() < 16 {
        return Err(format!(
            "admin token file {}: the token must be at least 16 characters",
            path.display()
        )
        .into());
    }
    Ok(t)
}

/// Opens the store at `url` (and `schema`), then serves its console until the process ends;
/// prints the URL to `out` once listening.
pub async fn run(
    url: String,
    schema: Option<String>,
    args: ConsoleArgs,
    out: &mut dyn std::io::Write,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = ConsoleOptions::new()
        .show_arguments(args.show_arguments)
        .refresh(args.refresh);
    if let Some(path) = &args.admin_token_file {
        opts = opts.admin_token(token(path)?);
    } else if let Ok(t) = std::env::var("STEADFAST_CONSOLE_TOKEN")
        && !t.is_empty()
    {
        opts = opts.admin_token(t);
    }
    for h in args.allow_host {
        opts = opts.allow_host(h);
    }
    check_listen(args.listen, &opts)?;
    let mut store = StoreOptions::new(url).max_connections(4);
    if let Some(s) = schema {
        store = store.schema(s);
    }
    let jobs = Jobs::builder().connect_with(store).await?;
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    writeln!(out, "console: http://{}/", listener.local_addr()?)?;
    out.flush()?;
    serve_on(listener, jobs_router(Inspector::new(jobs), opts)).await?;
    Ok(())
}

/// `steadfast proxy`'s admin listener flags: the gateway's console and `/metrics`, off unless
/// `--admin` is given.
#[cfg(feature = "gateway")]
#[derive(Debug, Clone, Default, Args)]
pub struct AdminArgs {
    /// Serve the gateway's admin console (and /metrics) at this address, e.g. 127.0.0.1:9091.
    /// Beyond loopback an admin token is required.
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// With --admin: a file holding the admin token (its first line; else
    /// STEADFAST_CONSOLE_TOKEN). The console asks for it once per browser session; a scraper
    /// sends it as `Authorization: Bearer`.
    #[arg(long, value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,
    /// With --admin: also answer to this Host name without a token (repeatable).
    #[arg(long, value_name = "HOST")]
    pub admin_allow_host: Vec<String>,
}

/// Starts the admin listener if `--admin` asks for one: binds it (refusing an address beyond
/// loopback without a token), prints its URL to stderr, serves it on a task of the current
/// runtime, and returns the handle to run the gateway under ([`Admin::attach`]).
///
/// [`Admin::attach`]: steadfast_gateway::admin::Admin::attach
#[cfg(feature = "gateway")]
pub async fn start_admin(
    args: &AdminArgs,
) -> Result<Option<steadfast_gateway::admin::Admin>, Box<dyn std::error::Error>> {
    let Some(addr) = args.admin else {
        return Ok(None);
    };
    let mut opts = ConsoleOptions::new();
    if let Some(path) = &args.admin_token_file {
        opts = opts.admin_token(token(path)?);
    } else if let Ok(t) = std::env::var("STEADFAST_CONSOLE_TOKEN")
        && !t.is_empty()
    {
        opts = opts.admin_token(t);
    }
    for h in &args.admin_allow_host {
        opts = opts.allow_host(h.clone());
    }
    check_listen(addr, &opts)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--admin {addr}: {e}"))?;
    eprintln!(
        "steadfast: admin console at http://{}/",
        listener.local_addr()?
    );
    let admin = steadfast_gateway::admin::Admin::new();
    let app = crate::gateway_router(admin.clone(), opts);
    tokio::spawn(async move {
        if let Err(e) = serve_on(listener, app).await {
            tracing::error!("the admin console stopped: {e}");
        }
    });
    Ok(Some(admin))
}
