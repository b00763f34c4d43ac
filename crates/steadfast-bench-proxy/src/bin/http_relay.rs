//! The floor for an HTTP front: `http-relay [--listen ADDR] -- CMD…` serves HTTP/1.1 with
//! hyper on a current-thread tokio runtime and relays each POST's body, as one line, to `CMD`'s
//! stdin; the line `CMD` answers with the same JSON-RPC id is the POST's answer (JSON). A body
//! without an id (a notification) is written and answered 202.
//!
//! What it does not do, so that it costs what any HTTP front must: no JSON parsing (the id is
//! the value after the first `"id":` in the text), no sessions, no headers checked, no
//! authentication. It prints `serving MCP at http://ADDR/mcp` on stderr, as `steadfast proxy
//! --listen` does, so `scripts/bench-proxy.sh` drives it the same way.

use std::collections::HashMap;
use std::convert::Infallible;
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

type Waiters = Arc<Mutex<HashMap<Vec<u8>, oneshot::Sender<Bytes>>>>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (opts, cmd) = steadfast_bench_proxy::split_command(&args);
    let listen = opts
        .iter()
        .position(|a| a == "--listen")
        .and_then(|i| opts.get(i + 1))
        .map_or("127.0.0.1:0", String::as_str)
        .to_owned();
    if cmd.is_empty() {
        eprintln!("usage: http-relay [--listen ADDR] -- CMD [ARGS…]");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("http-relay: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(&listen, cmd)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("http-relay: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(listen: &str, cmd: &[String]) -> Result<(), String> {
    let mut child = tokio::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", cmd[0]))?;
    let (mut to, from) = (
        child.stdin.take().ok_or("no stdin")?,
        child.stdout.take().ok_or("no stdout")?,
    );
    let waiters: Waiters = Arc::default();
    // Lines to the child, batched: whatever is queued goes in one write.
    let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
    tokio::spawn(async move {
        let mut out = Vec::with_capacity(1 << 16);
        while let Some(line) = rx.recv().await {
            out.clear();
            out.extend_from_slice(&line);
            out.push(b'\n');
            while let Ok(more) = rx.try_recv() {
                out.extend_from_slice(&more);
                out.push(b'\n');
            }
            if to.write_all(&out).await.is_err() {
                return;
            }
        }
    });
    // The child's answers, to whoever waits for their id.
    let answers = waiters.clone();
    tokio::spawn(async move {
        let mut from = BufReader::with_capacity(1 << 16, from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match from.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let Some(id) = id_of(&line) else { continue };
            let waiter = answers.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
            if let Some(w) = waiter {
                let _ = w.send(Bytes::copy_from_slice(line.trim_ascii_end()));
            }
        }
    });
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("listen {listen}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("http-relay: serving MCP at http://{addr}/mcp");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (tx, waiters) = (tx.clone(), waiters.clone());
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let (tx, waiters) = (tx.clone(), waiters.clone());
                async move { Ok::<_, Infallible>(relay(req, &tx, &waiters).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, svc)
                .await;
        });
    }
}

async fn relay(
    req: Request<hyper::body::Incoming>,
    tx: &mpsc::UnboundedSender<Bytes>,
    waiters: &Waiters,
) -> Response<Full<Bytes>> {
    let status = |s: StatusCode| {
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = s;
        r
    };
    let Ok(mut body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return status(StatusCode::BAD_REQUEST);
    };
    // A body's own trailing newline would be an empty line on the pipe.
    body.truncate(body.trim_ascii_end().len());
    let Some(id) = id_of(&body) else {
        let _ = tx.send(body);
        return status(StatusCode::ACCEPTED);
    };
    let (answer_tx, answer_rx) = oneshot::channel();
    waiters
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id.to_vec(), answer_tx);
    let _ = tx.send(body);
    match answer_rx.await {
        Ok(line) => {
            let mut r = Response::new(Full::new(line));
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            r
        }
        Err(_) => status(StatusCode::BAD_GATEWAY),
    }
}

/// The text of the value after the first `"id":` (a number or a string without escapes).
fn id_of(line: &[u8]) -> Option<&[u8]> {
    let at = memchr::memmem::find(line, b"\"id\":")? + 5;
    let rest = &line[at..];
    let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
    let end = if rest.first() == Some(&b'"') {
        1 + memchr::memchr(b'"', &rest[1..])? + 1
    } else {
        rest.iter()
            .position(|b| matches!(b, b',' | b'}' | b' '))
            .unwrap_or(rest.len())
    };
    Some(&rest[..end])
}
