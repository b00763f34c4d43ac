//! The `steadfast` binary: the resilient MCP proxy, its demo, and tools around it.

/// `println!` that returns an error instead of panicking when stdout is closed (`| head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?;
    }};
}

mod config;
mod demo;
mod example_server;
mod proxy;
mod sim_report;
mod simulate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgAction, Parser, Subcommand};

use crate::config::Config;

/// Resilient tool calls for AI agents: an MCP proxy with retries, breakers and LLM-safe errors.
#[derive(Debug, Parser)]
#[command(name = "steadfast", version, about)]
struct Cli {
    /// More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP on stdio, forwarding to an upstream server with retries, breakers and
    /// sanitized errors.
    ///
    /// `steadfast proxy -- python3 server.py` needs no config; `--config steadfast.toml` (or a
    /// Claude Desktop / Cursor JSON file with `mcpServers`) sets policies and the upstream.
    Proxy {
        /// A TOML config, or a JSON file in the `mcpServers` shape.
        #[arg(short, long)]
        config: Option<PathBuf>,
        /// Which `mcpServers` entry to wrap, when the JSON file has several.
        #[arg(long)]
        server: Option<String>,
        /// The upstream command and its arguments (overrides the config's upstream).
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Validate a config file; each error is reported with file, line, key and constraint.
    CheckConfig {
        /// The file to check.
        file: PathBuf,
        /// Which `mcpServers` entry, for JSON files with several.
        #[arg(long)]
        server: Option<String>,
    },
    /// Run the proxy in front of the bundled example server and drive it with a real MCP
    /// client, then print what the proxy absorbed.
    Demo {
        /// Tool calls to make.
        #[arg(long, default_value_t = 40)]
        calls: u32,
    },
    /// Serve the bundled unreliable MCP server on stdio (used by the demo and tests).
    ExampleServer {
        /// Serve streamable HTTP at this address instead (e.g. 127.0.0.1:0); prints the URL.
        #[cfg(feature = "http")]
        #[arg(long)]
        http: Option<std::net::SocketAddr>,
    },
    /// Simulate a policy on a simulated clock: client contention per jitter strategy, or load
    /// amplification against a failing dependency.
    Simulate {
        #[command(subcommand)]
        experiment: sim_report::Experiment,
    },
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // stdout carries the protocol: logs go to stderr only.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("steadfast: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Proxy {
                config,
                server,
                command,
            } => {
                let config = match &config {
                    Some(path) => Config::load(path, server.as_deref())?,
                    None => Config::default(),
                };
                let upstream = match command.split_first() {
                    Some((program, args)) => steadfast_mcp::Upstream::command(program.clone(), args.iter().cloned()),
                    None => config.upstream.clone().ok_or_else(|| {
                        anyhow::anyhow!(
                            "no upstream: give one after `--` (steadfast proxy -- python3 server.py) or in the config's [upstream]"
                        )
                    })?,
                };
                proxy::run(config, upstream).await
            }
            Command::CheckConfig { file, server } => {
                let config = Config::load(&file, server.as_deref())?;
                match &config.upstream {
                    Some(u) => say!("{}: ok (upstream: {u})", file.display()),
                    None => say!("{}: ok (no upstream; give one after `--`)", file.display()),
                }
                Ok(())
            }
            Command::Demo { calls } => demo::run(calls).await,
            #[cfg(feature = "http")]
            Command::ExampleServer { http: Some(addr) } => example_server::run_http(addr).await,
            Command::ExampleServer { .. } => example_server::run().await,
            // Each run builds its own paused-clock runtime, which cannot nest in this one.
            Command::Simulate { experiment } => {
                tokio::task::spawn_blocking(move || sim_report::run(experiment)).await?
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`steadfast simulate … | head`): not an error worth a word.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("steadfast: {e}");
            ExitCode::FAILURE
        }
    }
}
