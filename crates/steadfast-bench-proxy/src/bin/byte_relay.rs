//! The floor for a process in a pipe: `byte-relay -- CMD…` copies its stdin to `CMD`'s stdin
//! and `CMD`'s stdout to its stdout, chunk by chunk as they arrive (one thread per direction,
//! no parsing, no buffering beyond one read).

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::{Command, ExitCode, Stdio};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (_, cmd) = steadfast_bench_proxy::split_command(&args);
    let Some((program, rest)) = cmd.split_first() else {
        eprintln!("usage: byte-relay -- CMD [ARGS…]");
        return ExitCode::from(2);
    };
    let mut child = match Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("byte-relay: cannot start {program}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (Some(mut child_in), Some(mut child_out)) = (child.stdin.take(), child.stdout.take())
    else {
        return ExitCode::FAILURE;
    };
    let up = std::thread::spawn(move || {
        // A read into a buffer larger than StdinLock's goes straight to the descriptor.
        let mut stdin = std::io::stdin().lock();
        copy(&mut stdin, &mut child_in);
        // child_in drops here: the child sees EOF.
    });
    // The raw descriptor, not `Stdout` (a line writer that may split a chunk in two writes).
    let mut stdout = match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => std::fs::File::from(fd),
        Err(_) => return ExitCode::FAILURE,
    };
    copy(&mut child_out, &mut stdout);
    // The child closed its stdout: done, even if our stdin is still open.
    drop(up);
    let _ = child.wait();
    ExitCode::SUCCESS
}

fn copy(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
            return;
        }
    }
}
