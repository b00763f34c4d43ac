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
