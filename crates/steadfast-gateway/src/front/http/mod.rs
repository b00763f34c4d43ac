//! The streamable-HTTP front: many clients, one upstream, shared breakers and budgets.
//!
//! `POST /mcp` carries one message: `initialize` (without a session) opens a session and
//! answers with its `Mcp-Session-Id`; a request is answered in the POST's body (JSON, or a
//! stream of server-sent events, see `post_stream`); a notification or a response gets 202.
//! `GET /mcp` streams the session's messages that belong to no request of it (notifications,
//! the server's requests it relates to no request) as server-sent events; `DELETE /mcp` ends
//! the session. An unknown or ended session is answered 404, so a client re-initializes.
//!
//! Security, as the MCP spec asks of HTTP servers: bind to loopback by default; bearer tokens
//! compared in constant time (401 with `WWW-Authenticate` otherwise); an `Origin` header must
//! be on the allow-list (403 otherwise: the DNS-rebinding warning); request bodies are capped
//! at `max_request_size` (413, sent once the rest of the body is read and dropped — at most
//! 64 MiB within 10 s — so a client that sends its whole body first reads it rather than a
//! reset); a body that is no JSON-RPC message gets 400 with a JSON-RPC error (`-32700` not JSON,
//! `-32600` not a message); sessions are capped (503 when full); a connection that does not
//! send a request's headers within `header_read_timeout` (idle keep-alive ones too) is closed.
//! With `[auth]`, every request naming a session is checked against its token once, whatever
//! its method (`front/auth.rs`, `claim`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame as BodyFrame, Incoming};
use hyper::{Request, Response, StatusCode};
use tokio::sync::mpsc;

use super::serve::{Gateway, Signals};
use crate::config::Config;
use crate::route::router::Router;
use crate::route::topology::UpstreamSet;
use crate::session::Session;
use crate::session::client::Client;
use crate::wire::jsonrpc::{Envelope, MessageKind};
use crate::wire::outbound::Outbound;

mod answer;
mod listen;
mod modern;
mod options;
mod routes;
mod sessions;
mod sse;

use sessions::end;

/// How the HTTP front listens and whom it lets in.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen (loopback unless you mean otherwise).
    pub listen: SocketAddr,
    /// Bearer tokens accepted; empty = no authentication (only sensible on loopback).
    pub tokens: Vec<String>,
    /// `Origin` values accepted besides loopback ones (`http://localhost:*`, `http://127.0.0.1:*`).
    pub allowed_origins: Vec<String>,
    /// Sessions open at once.
    pub max_sessions: usize,
    /// A session unused this long (and with nothing in flight) is ended.
    pub session_idle: Duration,
    /// A connection must send a request's headers within this (also when idle between
    /// requests), so clients that connect and stall cannot hold sockets and tasks for ever.
    pub header_read_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            tokens: Vec::new(),
            allowed_origins: Vec::new(),
            max_sessions: 1024,
            session_idle: Duration::from_secs(30 * 60),
            header_read_timeout: Duration::from_secs(30),
        }
    }
}

struct Front {
    prometheus: Option<metrics_exporter_prometheus::PrometheusHandle>,
    router: Arc<Router>,
    config: Arc<Config>,
    options: HttpOptions,
    /// Open sessions and when each was last used.
    sessions: Mutex<HashMap<String, (Arc<Session>, tokio::time::Instant)>>,
    /// Initializes under way: they count against `max_sessions` until answered.
    opening: std::sync::atomic::AtomicUsize,
    /// `[tasks]` Durable tool calls, shared by every session (when some tool is durable).
    durable: Option<Arc<crate::tasks::Durable>>,
    /// `[auth]` OAuth tokens, metadata and access policy (`front/auth.rs`).
    auth: Option<Arc<super::auth::Auth>>,
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r
}

/// Serves MCP over streamable HTTP until a signal arrives; returns the address it bound.
pub async fn serve_http(
    config: Config,
    upstreams: impl Into<UpstreamSet>,
    options: HttpOptions,
    bound: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
    reload: Option<crate::Reload>,
) -> std::io::Result<crate::Exit> {
    options
        .validate(&config)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut prometheus = None;
    let gateway = Gateway::build(config, upstreams.into(), |router| {
        // Upstreams start with the gateway, not at the first client's `initialize`: a
        // readiness probe behind a load balancer turns 200 without any client.
        router.start_early();
        prometheus = super::prometheus::recorder().cloned();
    })
    .await?;
    let auth = super::auth::Auth::start(&gateway.config)
        .await
        .map_err(std::io::Error::other)?;
    let front = Arc::new(Front {
        prometheus,
        router: gateway.router.clone(),
        durable: gateway.durable.clone(),
        auth,
        config: gateway.config.clone(),
        options: options.clone(),
        sessions: Mutex::default(),
        opening: std::sync::atomic::AtomicUsize::new(0),
    });
    let reaper = Arc::downgrade(&front);
    let every =
        (options.session_idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match reaper.upgrade() {
                Some(f) => f.reap(),
                None => return,
            }
        }
    });
    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "serving MCP over streamable HTTP at /mcp");
    if let Some(tx) = bound {
        let _ = tx.send(addr);
    }
    let mut signals = Signals::listen(reload)?;
    let exit = loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                front.clone().connection(stream);
            }
            exit = signals.stop(&gateway.router) => break exit,
        }
    };
    // Listens end gracefully (their result is their stream's last event), and the gateway
    // waits a moment for their streams to take it.
    front
        .router
        .changes()
        .close_all(Duration::from_millis(500))
        .await;
    for (_, (s, _)) in front
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
    {
        end(&s);
    }
    gateway.stop().await;
    Ok(exit)
}

impl Front {
    /// Serves one accepted connection on its own task.
    fn connection(self: Arc<Self>, stream: tokio::net::TcpStream) {
        // Answers are written whole (head and body in one write): nothing to gain from
        // Nagle's delay, and a client that pipelines would wait on it.
        let _ = stream.set_nodelay(true);
        let header_read_timeout = self.options.header_read_timeout;
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let front = self.clone();
                async move { Ok::<_, Infallible>(front.handle(req).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            // hyper enforces its header read timeout only with a timer.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .serve_connection(io, svc)
                .await;
        });
    }
}

/// A JSON answer.
fn json_response(line: Vec<u8>) -> Response<Body> {
    let mut r = full(StatusCode::OK, line);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}
