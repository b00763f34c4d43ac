//! A child process speaking MCP on its stdin and stdout.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::Upstream;
use super::link::{Link, Transport};
use crate::wire::framing::LineReader;

/// The environment variable that counts how deeply proxies are nested.
pub const DEPTH_VAR: &str = "STEADFAST_PROXY_DEPTH";

/// A running child and its connection.
pub(crate) struct Process {
    pub link: Arc<Link>,
    child: Child,
    /// The last lines the child wrote to stderr (copied through to the proxy's own stderr):
    /// why a server that exits at once failed is usually there.
    stderr: Arc<Mutex<Tail>>,
}

/// How much of a child's stderr is kept to explain its exit.
const TAIL_BYTES: usize = 4096;

/// The end of a stream, bounded: the last [`TAIL_BYTES`] bytes.
#[derive(Default)]
struct Tail(VecDeque<u8>);

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        let bytes = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
        let over = (self.0.len() + bytes.len()).saturating_sub(TAIL_BYTES);
        self.0.drain(..over);
        self.0.extend(bytes);
    }

    /// The kept text, its last few lines, trimmed; `None` when empty.
    fn text(&self) -> Option<String> {
        let (a, b) = self.0.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        // Stack frames and bare punctuation say little; the error line above them says why.
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.len() > 2 && !l.starts_with("at ") && !l.starts_with("File \""))
            .collect();
        let last = lines[lines.len().saturating_sub(6)..].join(" | ");
        (!last.trim().is_empty()).then(|| last.trim().to_owned())
    }
}

/// Why a child could not be started, and whether trying again soon could help.
pub(crate) struct SpawnError {
    /// What happened, safe to show.
    pub why: String,
    /// The command does not exist or may not be executed: no retry fixes that.
    pub hopeless: bool,
}

/// Starts the child and the tasks that read and write its pipes.
pub(crate) async fn spawn(up: &Arc<Upstream>, generation: u64) -> Result<Process, SpawnError> {
    let steadfast_mcp::Upstream::Command {
        command,
        args,
        env,
        cwd,
    } = &up.spec
    else {
        return Err(SpawnError {
            why: "not a command upstream".to_owned(),
            hopeless: true,
        });
    };
    let depth: u32 = std::env::var(DEPTH_VAR)
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    let mut cmd = Command::new(command);
    cmd.args(args)
        .envs(env)
        .env(DEPTH_VAR, (depth + 1).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group, so the whole tree (npx → node) can be signalled at shutdown.
    #[cfg(unix)]
    cmd.process_group(0);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().map_err(|e| SpawnError {
        why: format!("cannot start `{}`: {e}", up.describe()),
        hopeless: matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
        ) || e.raw_os_error() == Some(libc::ENOEXEC),
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(SpawnError {
            why: "the child has no pipes".to_owned(),
            hopeless: false,
        });
    };
    let tail = Arc::new(Mutex::new(Tail::default()));
    tokio::spawn(copy_stderr(stderr, tail.clone()));
    let link = pump(up, generation, stdout, stdin, false);
    Ok(Process {
        link,
        child,
        stderr: tail,
    })
}

/// Opens a line-framed connection over `input` (the server's output) and `output` (its
/// input): a task writes what is sent on the link, batched, and another reads the server's
/// lines into `up`. The link closes when writing fails or the server's output ends; when it
/// closes, `output` is dropped (the server's end of input), and with `stop_reading` the
/// reading stops too (an in-process server has no process to kill; a child's remaining
/// output is still read until it exits).
pub(super) fn pump(
    up: &Arc<Upstream>,
    generation: u64,
    input: impl AsyncRead + Send + Unpin + 'static,
    mut output: impl AsyncWrite + Send + Unpin + 'static,
    stop_reading: bool,
) -> Arc<Link> {
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(up.settings.max_queue);
    let link = Link::new(generation, Transport::Stdio(tx));

    let writer_link = link.clone();
    tokio::spawn(async move {
        let mut batch = Vec::new();
        loop {
            let line = tokio::select! {
                line = rx.recv() => match line { Some(l) => l, None => break },
                _ = writer_link.closed() => break,
            };
            batch.clear();
            batch.extend_from_slice(&line);
            while batch.len() < 256 * 1024 {
                match rx.try_recv() {
                    Ok(more) => batch.extend_from_slice(&more),
                    Err(_) => break,
                }
            }
            if output.write_all(&batch).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
        // Dropping the output closes the server's input: a well-behaved server exits.
        drop(output);
        writer_link.close();
    });

    let reader_link = link.clone();
    let reader_up = up.clone();
    let max = up.settings.max_message_size;
    tokio::spawn(async move {
        let mut reader = LineReader::new(input, max);
        loop {
            let frame = tokio::select! {
                frame = reader.next() => frame,
                _ = reader_link.closed(), if stop_reading => break,
            };
            let Ok(Some(frame)) = frame else { break };
            reader_up.on_frame(&reader_link, frame);
        }
        reader_link.close();
    });
    link
}

/// Copies the child's stderr to ours as it comes (it is the server's log, for the operator),
/// keeping its tail.
async fn copy_stderr(mut from: tokio::process::ChildStderr, tail: Arc<Mutex<Tail>>) {
    use tokio::io::AsyncReadExt;
    let mut out = tokio::io::stderr();
    let mut buf = vec![0u8; 8192];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                tail.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(&buf[..n]);
                let _ = out.write_all(&buf[..n]).await;
            }
        }
    }
}

impl Process {
    /// Resolves when the connection ends or the child exits; why, with the end of the child's
    /// stderr when it exited.
    pub(crate) async fn ended(&mut self) -> String {
        let status = tokio::select! {
            status = self.child.wait() => Some(status),
            // A child that exits closes its output first: its status (and last words) say more.
            _ = self.link.closed() => {
                tokio::time::timeout(Duration::from_millis(200), self.child.wait()).await.ok()
            }
        };
        self.link.close();
        let mut why = match status {
            None => return "the upstream closed its output".to_owned(),
            Some(Ok(s)) => format!("the upstream exited ({s})"),
            Some(Err(e)) => format!("the upstream could not be waited for: {e}"),
        };
        // stderr is copied on another task: give it a moment to catch up with a child that
        // wrote and exited.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Some(tail) = self.stderr.lock().unwrap_or_else(|e| e.into_inner()).text() {
            why = format!("{why}; its stderr ended with: {tail}");
        }
        why
    }

    /// Ends the child: its input is closed, then TERM, then KILL, each after `grace`.
    pub(crate) async fn terminate(mut self, grace: Duration) {
        self.link.close();
        if let Some(stdin) = self.child.stdin.take() {
            drop(stdin);
        }
        if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
            return;
        }
        signal_group(&self.child, libc::SIGTERM);
        if tokio::time::timeout(grace, self.child.wait()).await.is_ok() {
            return;
        }
        signal_group(&self.child, libc::SIGKILL);
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(grace, self.child.wait()).await;
    }
}

fn signal_group(child: &Child, signal: libc::c_int) {
    #[cfg(unix)]
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) with a negative pid signals the process group the child leads.
        unsafe {
            libc::kill(-(pid as libc::pid_t), signal);
        }
    }
}
