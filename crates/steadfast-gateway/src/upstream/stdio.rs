//! A child process speaking MCP on its stdin and stdout.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::Upstream;
use super::link::{Link, Transport};
use crate::framing::LineReader;

/// The environment variable that counts how deeply proxies are nested.
pub const DEPTH_VAR: &str = "STEADFAST_PROXY_DEPTH";

/// A running child and its connection.
pub struct Process {
    pub link: Arc<Link>,
    child: Child,
}

/// Starts the child and the tasks that read and write its pipes.
pub async fn spawn(up: &Arc<Upstream>, generation: u64) -> Result<Process, String> {
    let steadfast_mcp::Upstream::Command {
        command,
        args,
        env,
        cwd,
    } = &up.spec
    else {
        return Err("not a command upstream".to_owned());
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
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    // Its own process group, so the whole tree (npx → node) can be signalled at shutdown.
    #[cfg(unix)]
    cmd.process_group(0);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", up.describe()))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the child has no pipes".to_owned());
    };
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
            if stdin.write_all(&batch).await.is_err() || stdin.flush().await.is_err() {
                break;
            }
        }
        // Dropping stdin closes the child's input: a well-behaved server exits.
        writer_link.close();
    });

    let reader_link = link.clone();
    let reader_up = up.clone();
    let max = up.settings.max_message_size;
    tokio::spawn(async move {
        let mut reader = LineReader::new(stdout, max);
        while let Ok(Some(frame)) = reader.next().await {
            reader_up.on_frame(&reader_link, frame);
        }
        reader_link.close();
    });
    Ok(Process { link, child })
}

impl Process {
    /// Resolves when the connection ends or the child exits.
    pub async fn ended(&mut self) -> String {
        tokio::select! {
            status = self.child.wait() => {
                self.link.close();
                match status {
                    Ok(s) => format!("the upstream exited ({s})"),
                    Err(e) => format!("the upstream could not be waited for: {e}"),
                }
            }
            _ = self.link.closed() => "the upstream closed its output".to_owned(),
        }
    }

    /// Ends the child: its input is closed, then TERM, then KILL, each after `grace`.
    pub async fn terminate(mut self, grace: Duration) {
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
