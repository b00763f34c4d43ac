//! A raw JSON-RPC client for measuring a pipe: `rpc-driver [OPTIONS] -- CMD…` spawns `CMD`,
//! runs the MCP handshake, then
//!
//! 1. `--warmup W` unmeasured and `--seq N` measured sequential `tools/call echo` (one in
//!    flight: the latency a proxy adds to each call), and
//! 2. `--conc M` calls with `--inflight K` in flight (throughput; a new call is written as soon
//!    as an answer arrives, answers already buffered are taken together and their successors
//!    written in one write),
//!
//! and prints one JSON line: `seq_us_mean`, `seq_us_p50`, `seq_us_p99`, `calls_per_s`.
//! With `--http URL` instead of a command, the same runs go over streamable HTTP: one
//! keep-alive connection for the sequential calls (blocking), K connections (one session) for
//! the calls in flight, each driven by a task of one current-thread tokio runtime (64 blocking
//! threads sharing the benchmark's one CPU cost a context switch per call, which the
//! measurement then charged to the server). `--modern` (with `--http`) sends MCP 2026-07-28 requests
//! instead: no `initialize` and no session, each call carrying its protocol version and
//! capabilities in `params._meta` and the `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name`
//! headers.
//!
//! A watchdog ends the run (exit 3) after `--deadline SECONDS`, so a hung proxy cannot hang a
//! benchmark.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steadfast_bench_proxy::{option, split_command};

struct Options {
    http: Option<String>,
    modern: bool,
    warmup: u64,
    seq: u64,
    conc: u64,
    inflight: u64,
    deadline: u64,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (opts, cmd) = split_command(&args);
    let options = match parse(opts) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rpc-driver: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(url) = options.http.clone() {
        watchdog(options.deadline);
        return report(run_http(&url, &options));
    }
    let Some((program, rest)) = cmd.split_first() else {
        eprintln!(
            "usage: rpc-driver [--warmup W] [--seq N] [--conc M] [--inflight K] [--deadline S] -- CMD [ARGS…]"
        );
        return ExitCode::from(2);
    };
    watchdog(options.deadline);
    let mut child = match Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rpc-driver: cannot start {program}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return ExitCode::FAILURE;
    };
    let mut pipe = Pipe {
        to: stdin,
        from: BufReader::with_capacity(1 << 16, stdout),
    };
    let outcome = run(&mut pipe, &options);
    drop(pipe);
    // Bounded: the watchdog still runs.
    let _ = child.wait();
    report(outcome)
}

fn report(outcome: Result<Value, String>) -> ExitCode {
    match outcome {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rpc-driver: {e}");
            ExitCode::FAILURE
        }
    }
}

fn watchdog(secs: u64) {
    let deadline = Duration::from_secs(secs);
    std::thread::spawn(move || {
        std::thread::sleep(deadline);
        eprintln!("rpc-driver: no result within {deadline:?}; giving up");
        std::process::exit(3);
    });
}

fn parse(opts: &[String]) -> Result<Options, String> {
    let o = Options {
        http: option(opts, "--http", String::new()).map(|u| Some(u).filter(|u| !u.is_empty()))?,
        modern: opts.iter().any(|a| a == "--modern"),
        warmup: option(opts, "--warmup", 2_000)?,
        seq: option(opts, "--seq", 20_000)?,
        conc: option(opts, "--conc", 200_000)?,
        inflight: option(opts, "--inflight", 64)?,
        deadline: option(opts, "--deadline", 120)?,
    };
    if o.modern && o.http.is_none() {
        return Err("--modern: needs --http URL".into());
    }
    if o.inflight == 0 {
        return Err("--inflight: must be >= 1".into());
    }
    Ok(o)
}

struct Pipe {
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl Pipe {
    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.to
            .write_all(bytes)
            .map_err(|e| format!("writing to the server: {e}"))
    }

    /// The next message that is a response (notifications are skipped).
    fn next_response(&mut self, line: &mut Vec<u8>) -> Result<Value, String> {
        loop {
            line.clear();
            let n = self
                .from
                .read_until(b'\n', line)
                .map_err(|e| format!("reading from the server: {e}"))?;
            if n == 0 {
                return Err("the server closed its stdout".into());
            }
            let Ok(v) = serde_json::from_slice::<Value>(line) else {
                continue;
            };
            if v.get("id").is_some() && v.get("method").is_none() {
                if let Some(e) = v.get("error") {
                    return Err(format!("error answer: {e}"));
                }
                return Ok(v);
            }
        }
    }

    /// Whether another whole line is already buffered.
    fn line_buffered(&self) -> bool {
        self.from.buffer().contains(&b'\n')
    }
}

fn call(id: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"hello\"}}}}}}\n"
        )
        .as_bytes(),
    );
}

/// A modern (MCP 2026-07-28) `tools/call echo`: the envelope in `params._meta`.
fn modern_call(id: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"hello\"}},\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{{}}}}}}}}\n"
        )
        .as_bytes(),
    );
}

fn run(pipe: &mut Pipe, o: &Options) -> Result<Value, String> {
    let mut line = Vec::new();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "rpc-driver", "version": "0"}}});
    pipe.write(format!("{init}\n").as_bytes())?;
    pipe.next_response(&mut line)?;
    pipe.write(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")?;

    let mut buf = Vec::new();
    let mut id = 1;
    let mut sequential = |n: u64, times: &mut Vec<Duration>| -> Result<(), String> {
        for _ in 0..n {
            buf.clear();
            call(id, &mut buf);
            let start = Instant::now();
            pipe.write(&buf)?;
            let r = pipe.next_response(&mut line)?;
            times.push(start.elapsed());
            if r["id"] != id {
                return Err(format!("expected the answer to {id}, got {r}"));
            }
            id += 1;
        }
        Ok(())
    };
    sequential(o.warmup, &mut Vec::new())?;
    let mut times = Vec::with_capacity(o.seq as usize);
    sequential(o.seq, &mut times)?;

    // Throughput with K in flight.
    let first = 1_000_000_000;
    let mut next = first;
    let end = first + o.conc;
    let mut done = 0;
    let start = Instant::now();
    buf.clear();
    while next < end && next - first < o.inflight {
        call(next, &mut buf);
        next += 1;
    }
    pipe.write(&buf)?;
    while done < o.conc {
        buf.clear();
        loop {
            pipe.next_response(&mut line)?;
            done += 1;
            if next < end {
                call(next, &mut buf);
                next += 1;
            }
            if done >= o.conc || !pipe.line_buffered() {
                break;
            }
        }
        if !buf.is_empty() {
            pipe.write(&buf)?;
        }
    }
    Ok(summary(o, times, start.elapsed()))
}

fn summary(o: &Options, mut times: Vec<Duration>, conc_time: Duration) -> Value {
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = times.iter().map(|d| us(*d)).sum::<f64>() / times.len().max(1) as f64;
    let pct = |p: f64| {
        times
            .get(((times.len() as f64 - 1.0) * p) as usize)
            .map_or(0.0, |d| us(*d))
    };
    let secs = conc_time.as_secs_f64();
    json!({
        "seq_calls": o.seq,
        "seq_us_mean": round(mean),
        "seq_us_p50": round(pct(0.5)),
        "seq_us_p99": round(pct(0.99)),
        "conc_calls": o.conc,
        "inflight": o.inflight,
        "calls_per_s": (o.conc as f64 / secs).round(),
    })
}

fn answer_to(messages: Vec<Value>, id: u64) -> Result<(), String> {
    match messages.into_iter().find(|m| m["id"] == id) {
        Some(m) if m.get("result").is_some() => Ok(()),
        Some(m) => Err(format!("error answer: {m}")),
        None => Err(format!("no answer to {id} in the HTTP response")),
    }
}

fn run_http(url: &str, o: &Options) -> Result<Value, String> {
    let mut conn = steadfast_bench_proxy::http::HttpConn::new(url)?;
    let call: fn(u64, &mut Vec<u8>) = if o.modern {
        conn.headers =
            "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n"
                .into();
        modern_call
    } else {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "rpc-driver", "version": "0"}}});
        answer_to(conn.post(&init.to_string())?, 0)?;
        conn.post("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}")?;
        call
    };
    let mut buf = Vec::new();
    let mut times = Vec::with_capacity(o.seq as usize);
    for id in 1..=o.warmup + o.seq {
        buf.clear();
        call(id, &mut buf);
        let body = String::from_utf8_lossy(&buf).into_owned();
        let start = Instant::now();
        answer_to(conn.post(&body)?, id)?;
        if id > o.warmup {
            times.push(start.elapsed());
        }
    }
    // K connections, one task each on a current-thread runtime in this one thread, sharing
    // the calls.
    let per = o.conc.div_ceil(o.inflight);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let elapsed = runtime.block_on(async {
        let mut conns = Vec::new();
        for _ in 0..o.inflight {
            conns.push(steadfast_bench_proxy::http::AsyncConn::connect(&conn).await?);
        }
        let start = Instant::now();
        let workers: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(w, mut c)| {
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    for i in 0..per {
                        let id = 1_000_000_000 + w as u64 * per + i;
                        buf.clear();
                        call(id, &mut buf);
                        c.call(&buf, id).await?;
                    }
                    Ok::<(), String>(())
                })
            })
            .collect();
        for w in workers {
            w.await.map_err(|_| "a worker panicked".to_owned())??;
        }
        Ok::<_, String>(start.elapsed())
    })?;
    let mut o2 = Options { http: None, ..*o };
    o2.conc = per * o.inflight;
    Ok(summary(&o2, times, elapsed))
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
