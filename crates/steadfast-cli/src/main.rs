//! The `steadfast` binary: the resilient MCP proxy, its demo, and tools around it.

/// `println!` that returns an error instead of panicking when stdout is closed (`| head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?;
    }};
}

mod demo;
mod example_server;
mod jobs;
mod sim_report;

/// The proxy's configuration lives in the gateway library; the simulator reads it too.
mod config {
    pub use steadfast_gateway::Config;
}
mod simulate;
mod telemetry;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgAction, Parser, Subcommand};

use crate::config::Config;

/// Resilient tool calls for AI agents: an MCP proxy with retries, breakers and LLM-safe errors.
#[derive(Debug, Parser)]
#[command(
    name = "steadfast",
    version,
    about,
    after_help = "Examples:
  steadfast proxy -- npx -y @modelcontextprotocol/server-filesystem /tmp
  steadfast proxy --retries 4 --attempt-timeout 20s -- python3 server.py
  steadfast proxy --config ~/.cursor/mcp.json --server github
  steadfast check-config steadfast.toml
  steadfast completions bash > /etc/bash_completion.d/steadfast
  steadfast demo"
)]
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
    #[command(after_help = "Examples:
  steadfast proxy -- npx -y @modelcontextprotocol/server-memory
  steadfast proxy --retries 2 --max-elapsed 60s --health-tool steadfast_health -- uvx mcp-server-time
  steadfast proxy --config steadfast.toml
  steadfast proxy --config claude_desktop_config.json --server filesystem
  steadfast proxy --config steadfast.toml --listen 127.0.0.1:8080 --admin 127.0.0.1:9091

Quick flags layer over the defaults; a --config file's own settings win over them.")]
    Proxy {
        /// A TOML config, or a JSON file in the `mcpServers` shape.
        #[arg(short, long)]
        config: Option<PathBuf>,
        /// Which `mcpServers` entry to wrap, when the JSON file has several.
        #[arg(long)]
        server: Option<String>,
        #[command(flatten)]
        quick: QuickFlags,
        #[command(flatten)]
        admin: steadfast_console::cli::AdminArgs,
        /// The upstream command and its arguments (overrides the config's upstream).
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
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
    /// Inspect and repair a durable job store: list, show, dead, requeue, purge, stats; or
    /// serve its console in a browser (`jobs console`).
    Jobs(jobs::JobsCli),
}

/// The common case without a config file: retries and bounds from the command line.
#[derive(Debug, Clone, Default, clap::Args)]
struct QuickFlags {
    /// Retries after the first attempt (max_attempts = N + 1).
    #[arg(long, value_name = "N")]
    retries: Option<u32>,
    /// How long an attempt may stay silent (no result, no progress), e.g. 30s.
    #[arg(long, value_name = "DURATION")]
    attempt_timeout: Option<String>,
    /// The time budget of one call, retries included, e.g. 2m.
    #[arg(long, value_name = "DURATION")]
    max_elapsed: Option<String>,
    /// Add a health tool with this name to the upstream's tools.
    #[arg(long, value_name = "NAME")]
    health_tool: Option<String>,
    /// Serve streamable HTTP at this address (e.g. 127.0.0.1:8080) instead of stdio.
    #[cfg(feature = "http")]
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// With --listen: accept bearer tokens listed (comma-separated) in this environment variable.
    #[cfg(feature = "http")]
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,
    /// With --listen: accept bearer tokens listed one per line in this file.
    #[cfg(feature = "http")]
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// With --listen: also accept this Origin (loopback origins always are). Repeatable.
    #[cfg(feature = "http")]
    #[arg(long, value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// With --listen: end a session unused this long (default 30m).
    #[cfg(feature = "http")]
    #[arg(long, value_name = "DURATION")]
    session_idle: Option<humantime::Duration>,
}

#[cfg(feature = "http")]
impl QuickFlags {
    /// The HTTP front's options, if `--listen` was given, checked against `config` (its
    /// `[auth]` guards `/mcp`, so no static token is needed off loopback).
    fn http(
        &self,
        config: &steadfast_gateway::Config,
    ) -> anyhow::Result<Option<steadfast_gateway::HttpOptions>> {
        let Some(listen) = self.listen else {
            return Ok(None);
        };
        let mut tokens = Vec::new();
        if let Some(var) = &self.token_env {
            let v = std::env::var(var)
                .map_err(|_| anyhow::anyhow!("--token-env {var}: the variable is not set"))?;
            tokens.extend(
                v.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned),
            );
        }
        if let Some(path) = &self.token_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("--token-file {}: {e}", path.display()))?;
            tokens.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned),
            );
        }
        if (self.token_env.is_some() || self.token_file.is_some()) && tokens.is_empty() {
            anyhow::bail!("--token-env/--token-file gave no token: refusing to serve without one");
        }
        let options = steadfast_gateway::HttpOptions {
            listen,
            tokens,
            allowed_origins: self.allow_origin.clone(),
            session_idle: self.session_idle.map_or(
                steadfast_gateway::HttpOptions::default().session_idle,
                Into::into,
            ),
            ..Default::default()
        };
        // The library's rules (a listener beyond loopback needs tokens or [auth]), checked
        // before anything starts so the flag is named.
        options
            .validate(config)
            .map_err(|e| anyhow::anyhow!("--{e}"))?;
        Ok(Some(options))
    }
}

impl QuickFlags {
    /// The flags that set config keys, to layer under a config file ([`Config::layered`]).
    fn overrides(&self) -> steadfast_gateway::Overrides {
        steadfast_gateway::Overrides {
            retries: self.retries,
            attempt_timeout: self.attempt_timeout.clone(),
            max_elapsed: self.max_elapsed.clone(),
            health_tool: self.health_tool.clone(),
        }
    }
}

fn config_errors(errors: Vec<steadfast_gateway::ConfigError>) -> anyhow::Error {
    anyhow::anyhow!(
        "{}",
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// The process's allocator. A proxy allocates a few dozen small objects per call and frees
/// them in whatever order the calls end; with 64 calls in flight glibc's per-size caches run
/// dry and every other allocation takes its slow path (a fifth of the instructions per call,
/// BENCHMARKS.md "Issue 20"). mimalloc's per-page free lists do not.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Hands mimalloc's free memory back to the system: the proxy calls it after a burst or a
/// large message, so one spike does not leave it at its high-water mark (glibc's
/// `malloc_trim`, which the gateway calls too, does nothing for mimalloc).
#[cfg(feature = "mimalloc")]
fn release_memory() {
    // The C function of the mimalloc linked in as the global allocator (libmimalloc-sys
    // declares it only with its `extended` feature, which needs another crate).
    unsafe extern "C" {
        fn mi_collect(force: bool);
    }
    // SAFETY: `mi_collect` takes no pointer; with `force` it frees the pages and purges the
    // memory mimalloc holds unused, and is safe to call from any thread at any time.
    unsafe { mi_collect(true) }
}

fn main() -> ExitCode {
    #[cfg(feature = "mimalloc")]
    steadfast_gateway::set_memory_release_hook(release_memory);
    let cli = Cli::parse();
    if let Command::Proxy {
        config,
        server,
        quick,
        admin,
        command,
    } = cli.command
    {
        return run_proxy(cli.verbose, config, server, quick, admin, command);
    }
    let _telemetry = telemetry::init(cli.verbose, None);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("steadfast: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Proxy { .. } => Ok(()),
            Command::Completions { shell } => {
                use clap::CommandFactory;
                let mut cmd = Cli::command();
                clap_complete::generate(shell, &mut cmd, "steadfast", &mut std::io::stdout());
                Ok(())
            }
            Command::CheckConfig { file, server } => {
                let config = Config::load_all(&file, server.as_deref()).map_err(|errors| {
                    let n = errors.len();
                    anyhow::anyhow!(
                        "{}\n{n} error{} in {}",
                        errors
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("\n"),
                        if n == 1 { "" } else { "s" },
                        file.display()
                    )
                })?;
                for w in &config.warnings {
                    eprintln!("steadfast: warning: {w}");
                }
                match (&config.upstream, config.upstreams.as_slice()) {
                    (Some(u), _) => say!("{}: ok (upstream: {u})", file.display()),
                    (None, []) => {
                        say!("{}: ok (no upstream; give one after `--`)", file.display())
                    }
                    (None, several) => say!(
                        "{}: ok ({} upstreams, tools named NAME{}TOOL: {})",
                        file.display(),
                        several.len(),
                        config.separator,
                        several
                            .iter()
                            .map(|u| u.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
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
            Command::Jobs(args) => jobs::run(args).await,
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

/// Runs a serving future under the admin console, when `--admin` asks for one (started
/// first, on the same runtime).
async fn with_admin<F: std::future::Future<Output = std::io::Result<steadfast_gateway::Exit>>>(
    args: &steadfast_console::cli::AdminArgs,
    serving: F,
) -> std::io::Result<steadfast_gateway::Exit> {
    match steadfast_console::cli::start_admin(args).await {
        Ok(Some(admin)) => admin.attach(serving).await,
        Ok(None) => serving.await,
        Err(e) => Err(std::io::Error::other(e.to_string())),
    }
}

/// The proxy runs on a current-thread runtime: one client, one thread, no hops between threads
/// on the way from stdin to the upstream and back.
fn run_proxy(
    verbose: u8,
    config: Option<PathBuf>,
    server: Option<String>,
    quick: QuickFlags,
    admin: steadfast_console::cli::AdminArgs,
    command: Vec<String>,
) -> ExitCode {
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("steadfast: {e}");
        ExitCode::FAILURE
    };
    if let Err(e) = steadfast_gateway::check_depth() {
        return fail(&e);
    }
    let flags = quick.overrides();
    let config_path = config.clone();
    let config = match Config::layered(config.as_deref(), server.as_deref(), &flags) {
        Ok(c) => c,
        Err(errors) => {
            let _logs = telemetry::init(verbose, None);
            return fail(&config_errors(errors));
        }
    };
    // Logging starts once the config says whether traces are exported (`[telemetry]`, or the
    // OTEL_* variables); the guard flushes the last spans when the proxy ends.
    let exported = config.telemetry.resolve(|k| std::env::var(k).ok());
    let _telemetry = telemetry::init(verbose, exported.as_ref());
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    let upstream = match command.split_first() {
        Some((program, args)) => {
            if !config.upstreams.is_empty() {
                tracing::warn!(
                    "the command after `--` is the only upstream; the config's [upstreams.*] are not started"
                );
            }
            steadfast_gateway::UpstreamSet::One(steadfast_mcp::Upstream::command(
                program.clone(),
                args.iter().cloned(),
            ))
        }
        None => match steadfast_gateway::UpstreamSet::from_config(&config) {
            Some(u) => u,
            None => {
                return fail(
                    &"no upstream: give one after `--` (steadfast proxy -- python3 server.py), in the config's [upstream], or several as [upstreams.NAME]",
                );
            }
        },
    };
    // SIGHUP reads the same file (and flags) again.
    let reload = config_path.map(|path| steadfast_gateway::reload_file(path, server, flags));
    #[cfg(feature = "http")]
    match quick.http(&config) {
        Ok(Some(options)) => {
            // Many clients: the multi-threaded runtime.
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => return fail(&format!("cannot start the runtime: {e}")),
            };
            let (tx, rx) = tokio::sync::oneshot::channel();
            // Tests and scripts read the address (useful with port 0) from stderr.
            runtime.spawn(async move {
                if let Ok(addr) = rx.await {
                    eprintln!("steadfast: serving MCP at http://{addr}/mcp");
                }
            });
            return match runtime.block_on(with_admin(
                &admin,
                steadfast_gateway::serve_http(config, upstream, options, Some(tx), reload),
            )) {
                Ok(exit) => {
                    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
                    ExitCode::from(u8::try_from(exit.code()).unwrap_or(1))
                }
                Err(e) => fail(&e),
            };
        }
        Ok(None) => {}
        Err(e) => return fail(&e),
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the runtime: {e}")),
    };
    match runtime.block_on(with_admin(
        &admin,
        steadfast_gateway::serve_stdio_with(config, upstream, reload),
    )) {
        Ok(exit) => {
            // Tasks still blocked on a read of stdin must not hold the process open.
            runtime.shutdown_timeout(std::time::Duration::from_millis(100));
            ExitCode::from(u8::try_from(exit.code()).unwrap_or(1))
        }
        Err(e) => fail(&e),
    }
}
