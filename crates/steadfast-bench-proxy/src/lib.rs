//! The cost of a pipe: tools to measure what an MCP proxy adds per call.
//!
//! Three small binaries, all plain blocking `std` I/O on one thread so that the tools
//! themselves add as little as possible and the same amount in every configuration:
//!
//! - `rpc-driver -- CMD…` spawns `CMD`, speaks raw newline-delimited JSON-RPC to it
//!   (`initialize`, then N sequential `tools/call`, then M calls with K in flight) and prints
//!   microseconds per sequential call and calls per second with K in flight, as one JSON line.
//! - `echo-upstream` is a minimal MCP server on stdio: `initialize`, `tools/list`, `ping`, and
//!   `tools/call` of `echo`, answered as fast as one thread can.
//! - `byte-relay -- CMD…` copies its stdin to `CMD`'s stdin and `CMD`'s stdout to its stdout:
//!   the floor for any process that sits in a pipe.
//!
//! `scripts/bench-proxy.sh` builds them in release, runs direct / byte relay / `steadfast
//! proxy` (and other proxies when present) side by side pinned to one CPU, and prints the table
//! that BENCHMARKS.md keeps.

/// Splits `args` at `--`: the options before it, the command line after it.
///
/// ```
/// let args: Vec<String> = ["--seq", "10", "--", "cat", "-u"].iter().map(|s| s.to_string()).collect();
/// let (opts, cmd) = steadfast_bench_proxy::split_command(&args);
/// assert_eq!(opts, ["--seq", "10"]);
/// assert_eq!(cmd, ["cat", "-u"]);
/// ```
pub fn split_command(args: &[String]) -> (&[String], &[String]) {
    match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[]),
    }
}

/// The value of option `--name` in `opts`, parsed, or `default` when absent.
///
/// ```
/// let opts: Vec<String> = ["--seq", "10"].iter().map(|s| s.to_string()).collect();
/// assert_eq!(steadfast_bench_proxy::option(&opts, "--seq", 5u64), Ok(10));
/// assert_eq!(steadfast_bench_proxy::option(&opts, "--conc", 5u64), Ok(5));
/// assert!(steadfast_bench_proxy::option::<u64>(&["--seq".into(), "x".into()], "--seq", 5).is_err());
/// ```
pub fn option<T: std::str::FromStr>(opts: &[String], name: &str, default: T) -> Result<T, String> {
    match opts.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => {
            let raw = opts
                .get(i + 1)
                .ok_or_else(|| format!("{name}: needs a value"))?;
            raw.parse()
                .map_err(|_| format!("{name}: expected a number (got {raw:?})"))
        }
    }
}

pub mod http;
