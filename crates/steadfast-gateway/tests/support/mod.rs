//! The gateway's test kit: the gateway in this process, its clients and its upstreams too.
//!
//! - [`fake::Fake`]: a scriptable MCP server reached as an in-process upstream.
//! - [`stdio`]: the stdio front over `tokio::io::duplex` pipes ([`steadfast_gateway::serve_io`]),
//!   driven by a [`client::Client`].
//! - [`http`]: the HTTP front on `127.0.0.1:0`, driven by [`client::post`].
//! - [`Era`]: a request's params in either revision (2025-11-25 after `initialize`, or
//!   2026-07-28 with the per-request envelope).
//!
//! Nothing here spawns a process or sleeps in real time: tests that measure time run on
//! tokio's paused clock (`#[tokio::test(start_paused = true)]`), where every timer of the
//! gateway and of the fake fires as soon as nothing else can run.
#![allow(dead_code)]

pub mod client;
pub mod fake;

use std::time::Duration;

use serde_json::{Value, json};
use steadfast_gateway::{Config, Exit, UpstreamSet};
use tokio::task::JoinHandle;

/// Long enough for any answer on the paused clock (virtual time), short enough to fail a
/// test that hangs in real time.
pub const ANSWER: Duration = Duration::from_secs(60);

/// A configuration from TOML text.
pub fn config(toml: &str) -> Config {
    Config::parse_toml(toml, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// The stdio front serving one client over pipes.
pub struct Stdio {
    /// The client's end.
    pub client: client::Client,
    /// The gateway; it ends when the client closes its pipe ([`Stdio::close`]).
    pub gateway: JoinHandle<std::io::Result<Exit>>,
}

/// Starts the stdio front in front of `upstreams`.
pub fn stdio(config: Config, upstreams: impl Into<UpstreamSet>) -> Stdio {
    let (client_side, gateway_side) = tokio::io::duplex(1 << 20);
    let (reader, writer) = tokio::io::split(gateway_side);
    let upstreams = upstreams.into();
    let gateway = tokio::spawn(steadfast_gateway::serve_io(
        config, upstreams, reader, writer, None,
    ));
    Stdio {
        client: client::Client::new(client_side),
        gateway,
    }
}

impl Stdio {
    /// Closes the client's pipe; how the gateway ended.
    pub async fn close(self) -> Exit {
        drop(self.client);
        tokio::time::timeout(ANSWER, self.gateway)
            .await
            .expect("the gateway ends")
            .expect("the gateway task")
            .expect("the gateway's result")
    }
}

/// The HTTP front on a port of its own: its MCP URL.
#[cfg(feature = "http")]
pub async fn http(config: Config, upstreams: impl Into<UpstreamSet>) -> String {
    let options = steadfast_gateway::HttpOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..steadfast_gateway::HttpOptions::default()
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let upstreams = upstreams.into();
    tokio::spawn(steadfast_gateway::serve_http(
        config,
        upstreams,
        options,
        Some(tx),
        None,
    ));
    let addr = tokio::time::timeout(ANSWER, rx)
        .await
        .expect("the front listens")
        .expect("the front started");
    format!("http://{addr}/mcp")
}

/// Which revision a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// MCP 2025-11-25: `initialize` first, a session.
    Handshake,
    /// MCP 2026-07-28: no handshake, the envelope in every request's `_meta`.
    Modern,
}

impl Era {
    /// `params` as this era sends them.
    pub fn params(self, params: Value) -> Value {
        match self {
            Era::Handshake => params,
            Era::Modern => modern(params),
        }
    }
}

/// `extra` with the 2026-07-28 per-request envelope.
pub fn modern(extra: Value) -> Value {
    let mut p = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": fake::MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "kit-modern", "version": "0"},
    }});
    if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            if k == "_meta" {
                if let (Some(meta), Some(v)) = (p["_meta"].as_object_mut(), v.as_object()) {
                    meta.extend(v.clone());
                }
            } else {
                p.insert(k.clone(), v.clone());
            }
        }
    }
    p
}

/// `tools/call` params for `echo`.
pub fn echo(text: &str) -> Value {
    json!({"name": "echo", "arguments": {"text": text}})
}

/// The text of a tool result's first block.
pub fn text_of(response: &Value) -> String {
    response
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
