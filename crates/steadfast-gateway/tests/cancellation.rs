//! A client's cancel reaches the upstream under the upstream's own id (the gateway renumbers
//! requests), the call is not retried, and no answer follows: on the stdio front in both
//! eras, on the paused clock (the upstream never answers; nothing real waits).

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::fake::{Fake, Step};
use support::{Era, stdio};

/// `hang` never answers; everything else is normal.
fn hanging() -> Fake {
    Fake::new("hang").on(|m| {
        if m["method"] == "tools/call" && m["params"]["name"] == "hang" {
            Step::Silence
        } else {
            Step::Default
        }
    })
}

async fn cancel_is_routed(era: Era) {
    let fake = hanging();
    let mut gw = stdio(support::config(""), fake.upstream());
    let p = &mut gw.client;
    if era == Era::Handshake {
        p.initialize().await;
    }
    let call = era.params(json!({"name": "hang", "arguments": {}}));
    p.request(json!("c-1"), "tools/call", call).await;
    // The upstream has the call (under an id of the gateway's).
    let mut upstream_id = Value::Null;
    for _ in 0..100 {
        if let Some(m) = fake
            .seen()
            .into_iter()
            .find(|m| m["params"]["name"] == "hang")
        {
            upstream_id = m["id"].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !upstream_id.is_null(),
        "{era:?}: the call reached the upstream"
    );
    p.notify(
        "notifications/cancelled",
        era.params(json!({"requestId": "c-1", "reason": "user pressed stop"})),
    )
    .await;
    let mut cancelled = Vec::new();
    for _ in 0..100 {
        cancelled = fake
            .seen()
            .into_iter()
            .filter(|m| m["method"] == "notifications/cancelled")
            .collect();
        if !cancelled.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(cancelled.len(), 1, "{era:?}: {:?}", fake.seen());
    assert_eq!(
        cancelled[0]["params"]["requestId"], upstream_id,
        "{era:?}: the upstream's own id"
    );
    // No answer to a cancelled request, and no retry: a minute of quiet (virtual).
    while let Some(m) = p.read(Duration::from_secs(60)).await {
        assert_ne!(m["id"], "c-1", "{era:?}: answered after its cancel: {m}");
    }
    assert_eq!(
        fake.calls("hang"),
        1,
        "{era:?}: a cancelled call is not retried"
    );
}

#[tokio::test(start_paused = true)]
async fn a_handshake_clients_cancel_reaches_the_upstream_under_its_id() {
    cancel_is_routed(Era::Handshake).await;
}

#[tokio::test(start_paused = true)]
async fn a_modern_clients_cancel_reaches_the_upstream_under_its_id() {
    cancel_is_routed(Era::Modern).await;
}

/// Waits (real time, bounded) until the fake has seen a call to `tool`.
#[cfg(feature = "http")]
async fn until_called(fake: &Fake, tool: &str) {
    let start = std::time::Instant::now();
    while fake.calls(tool) == 0 {
        assert!(
            start.elapsed() < support::ANSWER,
            "the call never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `DELETE` of an HTTP session.
#[cfg(feature = "http")]
async fn delete(url: &str, session: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut s = tokio::net::TcpStream::connect(authority).await.unwrap();
    let head = format!(
        "DELETE /{path} HTTP/1.1\r\nHost: {authority}\r\nMcp-Session-Id: {session}\r\n\
         Connection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    raw.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A POST waiting for its request's answer stops waiting as soon as nothing will answer it —
/// the client cancelled the request, or ended the session — not at the front's 600 s bound:
/// the request's task drops the `Reply` its answer would have gone to (no waiter to forget).
#[cfg(feature = "http")]
#[tokio::test]
async fn an_http_post_ends_at_once_when_its_request_is_cancelled_or_its_session_ended() {
    use support::client::{post, session_post};
    for how in ["cancel", "delete"] {
        let fake = hanging();
        let url = support::http(support::config(""), fake.upstream()).await;
        let session = support::client::http_session(&url).await;
        let call = tokio::spawn({
            let (url, session) = (url.clone(), session.clone());
            async move {
                let hang = json!({"name": "hang", "arguments": {}});
                session_post(&url, &session, 7, "tools/call", hang).await
            }
        });
        until_called(&fake, "hang").await;
        let start = std::time::Instant::now();
        if how == "cancel" {
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 7, "reason": "stop"}});
            let a = post(&url, &[("Mcp-Session-Id", &session)], &cancel).await;
            assert_eq!(a.status, 202, "{how}: {a:?}");
        } else {
            assert_eq!(delete(&url, &session).await, 200, "{how}");
        }
        let answer = tokio::time::timeout(Duration::from_secs(30), call)
            .await
            .unwrap_or_else(|_| panic!("{how}: the POST still waits"))
            .expect("the POST's task");
        assert!(start.elapsed() < Duration::from_secs(30), "{how}");
        assert_eq!(answer.status, 504, "{how}: nothing will answer: {answer:?}");
        assert!(
            answer.messages.iter().all(|m| m["id"] != 7),
            "{how}: a cancelled request is not answered: {answer:?}"
        );
    }
}
