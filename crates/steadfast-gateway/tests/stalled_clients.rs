//! The HTTP front closes connections that stall: one that never finishes its headers, and an
//! idle keep-alive connection that sends no next request, each within `header_read_timeout`.
#![cfg(feature = "http")]

use std::time::Duration;

use steadfast_gateway::{Config, HttpOptions, serve_http};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BOUND: Duration = Duration::from_secs(10);

async fn front() -> std::net::SocketAddr {
    let options = HttpOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        header_read_timeout: Duration::from_millis(300),
        ..HttpOptions::default()
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    // The upstream is started by a client's initialize: none comes here.
    let upstream = steadfast_mcp::Upstream::command("true", Vec::<String>::new());
    tokio::spawn(serve_http(
        Config::default(),
        upstream,
        options,
        Some(tx),
        None,
    ));
    tokio::time::timeout(BOUND, rx).await.unwrap().unwrap()
}

/// Reads until the server closes the connection; what it sent.
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let read = tokio::time::timeout(BOUND, stream.read_to_end(&mut seen)).await;
    assert!(
        read.is_ok(),
        "the connection was left open: {:?}",
        String::from_utf8_lossy(&seen)
    );
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test]
async fn a_client_that_stalls_in_its_headers_is_disconnected() {
    let addr = front().await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    until_closed(&mut s).await;
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let addr = front().await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let seen = until_closed(&mut s).await;
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
}
